"""Reads runs through TensorBoard's data provider into per-layer metric tables.

This is the only module that talks to TensorBoard's data. It goes through
``context.data_provider`` (never the legacy multiplexer), so it works the same
under the Python loader, the Rust data server and a remote gRPC data server,
and the CLI uses it unchanged on a ``MultiplexerDataProvider``.

Results are cached per run, keyed by what the provider lists for each tag
(last step and wall time), so an unchanged run is never recomputed and a run
whose tags grew reads only the tags that changed and computes metrics only
for their new steps.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
from tensorboard.data import provider

from . import health, metrics
from . import series as series_lib
from . import tags as tags_lib
from .writing import format as metadata

# Read every sample TensorBoard kept; the loader's reservoir already bounds it.
_ALL_SAMPLES = 1_000_000
_CACHE_RUNS = 64
# Metric tables kept per tag (a few hundred bytes per logged step each).
_CACHE_BYTES = 256 * 1024 * 1024
# Buckets of the tags whose cells were asked for lately.
_BUCKET_CACHE_BYTES = 64 * 1024 * 1024
# How much to read per read_tensors call, in bucket values (3 per bucket):
# one call for a whole run would hold all of its decoded histograms at once
# (as much memory again as TensorBoard keeps for them) and, from a gRPC data
# server, can pass the 256 MB message limit. About 4 MB of float64 per call
# keeps the server's peak memory within a few tens of MB of its resting size
# and costs nothing in speed. The first call reads _FIRST_READ_TAGS tags (their
# size is unknown until then); later ones as many as this budget allows.
_READ_VALUES = 500_000
_FIRST_READ_TAGS = 8
_MAX_READ_TAGS = 4096
# Tags with fewer new rows than this have their metrics computed together, up
# to _BATCH_ROWS rows at a time: a run of thousands of tags with a few steps
# each would otherwise pay numpy's per-call overhead thousands of times. Tags
# with more rows go alone (large arrays spill the CPU cache; nothing to gain).
_BATCH_ROWS = 4096
_ALONE_ROWS = 256


class TagCache:
    """Per-tag results keyed by what the provider lists (last step, wall time), bounded in bytes.

    A tag whose listing did not change is not read again; the least recently
    used entries go first when the bound is reached. Thread-safe.
    """

    def __init__(self, max_bytes: int = _CACHE_BYTES) -> None:
        self._entries: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self._bytes = 0
        self._max = max_bytes
        self._lock = threading.Lock()

    def get(self, key: tuple, version: tuple):
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def peek(self, key: tuple):
        """The value stored for `key` whatever its version (None if there is none)."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry[1]

    def put(self, key: tuple, version: tuple, value, nbytes: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (version, value, nbytes)
            self._bytes += nbytes
            while self._bytes > self._max and len(self._entries) > 1:
                _, (_, _, size) = self._entries.popitem(last=False)
                self._bytes -= size

    @property
    def nbytes(self) -> int:
        return self._bytes


def _table_nbytes(table: metrics.MetricTable) -> int:
    return int(table.steps.nbytes + sum(v.nbytes for v in table.values.values())
               + sum(q.nbytes for q in table.quality.values()))


@dataclasses.dataclass
class _TagMetrics:
    """One histogram tag's metric table and the wall time of each of its rows."""

    table: metrics.MetricTable
    wall_times: np.ndarray

    @property
    def nbytes(self) -> int:
        return _table_nbytes(self.table) + int(self.wall_times.nbytes)


@dataclasses.dataclass
class _Pending:
    """One histogram tag just read: its kept rows, which of them need metrics, where the others come from."""

    key: tuple
    version: tuple
    bimodal: bool
    steps: np.ndarray
    walls: np.ndarray
    fresh: np.ndarray  # rows to compute
    arrays: list  # their bucket arrays
    source: np.ndarray  # per row: the row of `previous` to reuse, or -1
    previous: Optional[_TagMetrics]
    width: int  # most buckets in one fresh row


def _pending(key: tuple, version: tuple, bimodal: bool, datums: Sequence, previous: Optional[_TagMetrics]) -> _Pending:
    """Sorts a tag's datums by step and finds the rows an earlier result already has.

    A row is reused when its step and wall time are both still there: when a run
    grows, the loaders keep most old samples, and only new steps need their
    buckets turned into metrics.
    """
    n = len(datums)
    steps = np.array([d.step for d in datums], dtype=np.int64)
    walls = np.array([d.wall_time for d in datums], dtype=np.float64)
    if n > 1 and np.any(np.diff(steps) < 0):
        order = np.argsort(steps, kind="stable")
        datums = [datums[i] for i in order]
        steps, walls = steps[order], walls[order]
    source = np.full(n, -1, dtype=np.int64)
    if previous is not None and ("bimodal_dip" in previous.table.values) != bimodal:
        previous = None
    if previous is not None and len(previous.table.steps) and n:
        old_steps = previous.table.steps
        at = np.minimum(np.searchsorted(old_steps, steps), len(old_steps) - 1)
        same = (old_steps[at] == steps) & (previous.wall_times[at] == walls)
        source = np.where(same, at, -1)
    fresh = np.flatnonzero(source < 0)
    arrays = [datums[i].numpy for i in fresh]
    shapes = {getattr(a, "shape", ()) for a in arrays}
    width = max((shape[0] for shape in shapes if len(shape)), default=0)
    return _Pending(key=key, version=version, bimodal=bimodal, steps=steps, walls=walls, fresh=fresh, arrays=arrays,
                    source=source, previous=previous, width=width)


def _select_rows(h: metrics.Histograms, rows: np.ndarray) -> metrics.Histograms:
    return dataclasses.replace(h, **{f.name: getattr(h, f.name)[rows] for f in dataclasses.fields(h)
                                     if getattr(h, f.name) is not None})


def _fresh_tables(parts: List[_Pending]) -> List[metrics.MetricTable]:
    """Metrics of the fresh rows of several tags, computed in one pass and split per tag."""
    lengths = np.array([len(p.fresh) for p in parts], dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    h = metrics.stack_histograms(np.concatenate([p.steps[p.fresh] for p in parts]),
                                 np.concatenate([p.walls[p.fresh] for p in parts]),
                                 [a for p in parts for a in p.arrays])
    table = metrics.histogram_metrics(h)
    dip = None
    if any(p.bimodal for p in parts):
        rows = np.concatenate([np.arange(s, e) for s, e, p in zip(starts, ends, parts) if p.bimodal])
        dip = np.full(len(h.steps), np.nan)
        dip[rows] = metrics.bimodal_dip(_select_rows(h, rows))
    if len(parts) == 1:
        if dip is not None:
            table.values["bimodal_dip"] = dip
            table.quality["bimodal_dip"] = table.quality["std"]
        return [table]
    out = []
    for s, e, p in zip(starts, ends, parts):
        # Copies: a cached tag must not keep the whole batch alive.
        values = {name: v[s:e].copy() for name, v in table.values.items()}
        quality = {name: q[s:e].copy() for name, q in table.quality.items()}
        metrics.add_std_rel_first(values, quality)  # relative to this tag's first step, not the batch's
        if p.bimodal:
            values["bimodal_dip"] = dip[s:e].copy()
            quality["bimodal_dip"] = quality["std"]
        out.append(metrics.MetricTable(steps=h.steps[s:e].copy(), values=values, quality=quality,
                                       first_wall=float(h.wall_times[s]) if e > s else None))
    return out


def _assemble(p: _Pending, fresh: metrics.MetricTable) -> _TagMetrics:
    """The tag's full table: the fresh rows' metrics with the reused rows of its previous table."""
    n = len(p.steps)
    if len(p.fresh) == n:
        return _TagMetrics(table=fresh, wall_times=p.walls)
    old = p.previous.table
    kept = np.flatnonzero(p.source >= 0)
    values, quality = {}, {}
    for name, v_new in fresh.values.items():
        if name == "std_rel_first":
            continue
        v = np.empty(n, dtype=v_new.dtype)
        v[p.fresh], v[kept] = v_new, old.values[name][p.source[kept]]
        q = np.empty(n, dtype=np.uint8)
        q[p.fresh], q[kept] = fresh.quality[name], old.quality[name][p.source[kept]]
        values[name], quality[name] = v, q
    metrics.add_std_rel_first(values, quality)
    table = metrics.MetricTable(steps=p.steps, values=values, quality=quality, first_wall=float(p.walls[0]))
    return _TagMetrics(table=table, wall_times=p.walls)


def _compute(pending: List[_Pending]) -> List[_TagMetrics]:
    """Every pending tag's full table; tags with few new rows are computed in batches."""
    fresh: List[Optional[metrics.MetricTable]] = [None] * len(pending)
    by_width: Dict[int, List[int]] = collections.defaultdict(list)
    for i, p in enumerate(pending):
        if len(p.fresh) >= _ALONE_ROWS:
            fresh[i] = _fresh_tables([p])[0]
        else:
            # Batch-mates padded to a similar bucket count: at most twice the work of their own.
            by_width[max(p.width, 1).bit_length()].append(i)
    for members in by_width.values():
        batch: List[int] = []
        rows = 0
        for i in members + [None]:
            if i is None or (batch and rows + len(pending[i].fresh) > _BATCH_ROWS):
                for j, table in zip(batch, _fresh_tables([pending[j] for j in batch])):
                    fresh[j] = table
                batch, rows = [], 0
            if i is not None:
                batch.append(i)
                rows += len(pending[i].fresh)
    return [_assemble(p, table) for p, table in zip(pending, fresh)]


def _copy_table(table: metrics.MetricTable) -> metrics.MetricTable:
    """A table whose dicts can be extended without touching the cached one."""
    return metrics.MetricTable(steps=table.steps, values=dict(table.values), quality=dict(table.quality),
                               first_wall=table.first_wall)


@dataclasses.dataclass
class RoleData:
    """One layer in one role: where it came from and its metrics per step."""

    tags: List[str]
    source: str  # "gradhealth", "histogram", "scalar", or several joined by "+"
    table: metrics.MetricTable
    health: health.CellHealth
    histograms: Optional[metrics.Histograms] = None  # only where a caller built it by hand
    histogram_tag: Optional[str] = None  # read again on demand for one cell
    first_seen: Optional[tuple] = None  # (first step, its wall time) of the histogram, for model order
    # Steps the writer logged for this row (see `series.logged_steps`); more than
    # len(table.steps) when TensorBoard's sampling dropped some, then `dropped_by`
    # names the plugins whose samples were cut and `logged_at_least` says whether
    # the count is only a lower bound.
    steps_logged: Optional[int] = None
    dropped_by: List[str] = dataclasses.field(default_factory=list)
    logged_at_least: bool = False


@dataclasses.dataclass
class Layer:
    name: str
    group: str
    kind: str
    order: int
    roles: Dict[str, RoleData]
    order_hint: Optional[int] = None
    shape: Optional[List[int]] = None  # known from gradhealth summaries only


@dataclasses.dataclass(eq=False)  # hashed by identity: the analysis caches per object
class RunData:
    run: str
    layers: List[Layer]
    scalars: Dict[str, List[str]]  # scalar kind -> tags
    unclassified: List[str]
    steps_kept: int
    last_step: Optional[int]
    # Run-level scalars worth diagnosing (loss, learning rate, global gradient
    # norm): tag -> (steps, values).
    scalar_series: Dict[str, tuple] = dataclasses.field(default_factory=dict)
    # Step distance between logged histograms; None with fewer than two.
    histogram_interval: Optional[float] = None
    # Steps logged (largest over the rows) and what TensorBoard's sampling dropped:
    # None when every logged step was kept, else a dict (see `_run_sampling`).
    steps_logged: Optional[int] = None
    sampling: Optional[dict] = None

    def layer(self, name: str) -> Optional[Layer]:
        for layer in self.layers:
            if layer.name == name:
                return layer
        return None

    def roles(self) -> List[str]:
        present = {role for layer in self.layers for role in layer.roles}
        return [role for role in tags_lib.ROLES if role in present]


class NotFound(Exception):
    """A run, layer or step that the data does not have."""


class Reader:
    """Turns a data provider's histograms and scalars into `RunData`."""

    def __init__(self, data_provider: provider.DataProvider, limits: Mapping[str, float],
                 tag_rules: Sequence[tags_lib.UserRule] = (),
                 samples: Optional[Mapping[str, Optional[float]]] = None) -> None:
        """``samples``: samples per tag the loader keeps, by plugin name, where it is known
        (0 for every sample); it rules out sampling for tags holding fewer steps."""
        self._provider = data_provider
        self._limits = dict(limits)
        self._tag_rules = list(tag_rules)
        self._samples = {name: (np.inf if not count else float(count)) for name, count in (samples or {}).items()
                         if count is not None}
        self._lock = threading.Lock()
        self._cache: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self.tag_cache = TagCache()
        self.bucket_cache = TagCache(_BUCKET_CACHE_BYTES)

    def list_runs(self, ctx, experiment_id: str) -> List[str]:
        """Runs with histograms, scalars or gradhealth summaries, in TensorBoard's order."""
        seen = set()
        for listing in self._listings(ctx, experiment_id, run=None).values():
            seen.update(listing)
        return sorted(seen, key=tags_lib.natural_key)

    def run_data(self, ctx, experiment_id: str, run: str) -> RunData:
        listings = self._listings(ctx, experiment_id, run=run)
        if not any(run in listing for listing in listings.values()):
            raise NotFound(f"no run named {run!r}")
        key = (experiment_id, run)
        fingerprint = tuple(
            (plugin, tag, ts.max_step, ts.max_wall_time)
            for plugin, listing in sorted(listings.items())
            for tag, ts in sorted(listing.get(run, {}).items())
        )
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] == fingerprint:
                self._cache.move_to_end(key)
                return cached[1]
        data = self._build(ctx, experiment_id, run, listings)
        with self._lock:
            self._cache[key] = (fingerprint, data)
            self._cache.move_to_end(key)
            while len(self._cache) > _CACHE_RUNS:
                self._cache.popitem(last=False)
        return data

    def _listings(self, ctx, experiment_id: str, run: Optional[str]) -> Dict[str, Mapping]:
        flt = provider.RunTagFilter(runs=[run]) if run is not None else None
        return {
            "histograms": self._provider.list_tensors(
                ctx, experiment_id=experiment_id, plugin_name="histograms", run_tag_filter=flt),
            "scalars": self._provider.list_scalars(
                ctx, experiment_id=experiment_id, plugin_name="scalars", run_tag_filter=flt),
            metadata.PLUGIN_NAME: self._provider.list_tensors(
                ctx, experiment_id=experiment_id, plugin_name=metadata.PLUGIN_NAME, run_tag_filter=flt),
        }

    def _build(self, ctx, experiment_id: str, run: str, listings: Mapping[str, Mapping]) -> RunData:
        # The Python loader lists tags in the order they were first written, the Rust data
        # server alphabetically; answers must not depend on which one TensorBoard uses.
        # Ordering by last write keeps the writer's order for tags written every step.
        hist_tags = _write_order(listings["histograms"].get(run, {}))
        scalar_tags = _write_order(listings["scalars"].get(run, {}))
        infos: List[tags_lib.TagInfo] = []
        unclassified: List[str] = []
        hist_set = set(hist_tags)
        for tag in hist_tags:
            # classify_histogram looks among the siblings for the tag's own gradient
            # (tag + ".grad", ...) and copies what it is given into a set: handing
            # it every tag made classifying a run quadratic in its number of tags.
            siblings = [t for t in (tag + ".grad", tag + "/grad", tag + "_grad") if t in hist_set]
            info = tags_lib.classify_histogram(tag, siblings, self._tag_rules)
            (infos.append(info) if info else unclassified.append(tag))
        infos = tags_lib.separate_shared_rows(infos)
        scalars: Dict[str, List[str]] = {}
        layer_scalars: List[tags_lib.TagInfo] = []
        for tag in scalar_tags:
            info = tags_lib.classify_scalar(tag, self._tag_rules)
            if isinstance(info, tags_lib.TagInfo):
                layer_scalars.append(info)
            else:
                scalars.setdefault(info.kind, []).append(tag)

        own_infos, shapes = [], {}
        own_listing = listings[metadata.PLUGIN_NAME].get(run, {})
        for tag in _write_order(own_listing):
            ts = own_listing[tag]
            meta = metadata.parse_metadata(ts.plugin_content)
            if meta is None:
                unclassified.append(tag)
                continue
            position = meta.get("position") if isinstance(meta.get("position"), int) else None
            own_infos.append(tags_lib.own_summary_info(tag, meta["layer"], meta["role"], position))
            if isinstance(meta.get("shape"), list):
                shapes[meta["layer"]] = meta["shape"]
        own = self._read_own(ctx, experiment_id, run, own_infos)

        histograms = self._histogram_tables(ctx, experiment_id, run, infos, listings["histograms"].get(run, {}))
        diagnosed = [t for kind in (tags_lib.SCALAR_LOSS, tags_lib.SCALAR_LR, tags_lib.SCALAR_GRAD_NORM)
                     for t in scalars.get(kind, [])]
        exact = self._read_layer_scalars(ctx, experiment_id, run, [i.tag for i in layer_scalars] + diagnosed)
        scalar_series = {tag: exact.pop(tag) for tag in diagnosed if tag in exact}

        kept_steps = {("histograms", tag): table.steps for tag, table in histograms.items()}
        kept_steps.update({(metadata.PLUGIN_NAME, tag): steps for tag, (steps, _) in own.items()})
        kept_steps.update({("scalars", tag): steps for tag, (steps, _) in exact.items()})
        kept_steps.update({("scalars", tag): steps for tag, (steps, _) in scalar_series.items()})
        sampling = self._tag_sampling(run, listings, kept_steps)

        grouped: Dict[tuple, List[tags_lib.TagInfo]] = collections.defaultdict(list)
        for info in own_infos + infos + layer_scalars:
            grouped[(info.layer, info.role)].append(info)

        layers: Dict[str, Layer] = {}
        for (name, role), group in grouped.items():
            role_data = self._role_data(role, group, histograms, exact, own, sampling)
            if role_data is None:
                continue
            first = group[0]
            layer = layers.setdefault(name, Layer(name=name, group=first.group, kind=first.kind, order=0, roles={},
                                                 order_hint=first.order_hint, shape=shapes.get(name)))
            if layer.order_hint is None:
                layer.order_hint = first.order_hint
            layer.roles[role] = role_data
        self._add_update_ratios(layers.values())
        for layer in layers.values():
            for role, rd in layer.roles.items():
                rd.health = health.cell_health(rd.table, role, layer.kind, self._limits)

        ordered = sorted(layers.values(), key=_model_order_key)
        for i, layer in enumerate(ordered):
            layer.order = i
        all_steps = [layer_role.table.steps for layer in ordered for layer_role in layer.roles.values()]
        kept = len(np.unique(np.concatenate(all_steps))) if all_steps else 0
        max_steps = [ts.max_step for listing in listings.values() for ts in listing.get(run, {}).values()]
        rows = [r for layer in ordered for r in layer.roles.values()]
        return RunData(
            run=run, layers=ordered, scalars=scalars, unclassified=sorted(unclassified, key=tags_lib.natural_key),
            steps_kept=kept, last_step=max(max_steps) if max_steps else None,
            scalar_series=scalar_series, histogram_interval=_logging_interval(t.steps for t in histograms.values()),
            steps_logged=max((r.steps_logged or 0 for r in rows), default=0) or kept,
            sampling=_run_sampling(rows),
        )

    def _tag_sampling(self, run: str, listings: Mapping[str, Mapping], kept_steps: Mapping[tuple, np.ndarray]
                      ) -> Dict[tuple, tuple]:
        """(plugin, tag) -> (steps logged, dropped, lower bound) for every tag read.

        The run's first step comes from the series TensorBoard kept whole (a loss
        scalar usually is: 1,000 samples per tag), so that the count of a sampled
        series starts where the run started, not at its own first kept step.
        """
        def max_step(plugin: str, tag: str) -> Optional[int]:
            ts = listings.get(plugin, {}).get(run, {}).get(tag)
            return None if ts is None else ts.max_step

        whole = [steps for (plugin, tag), steps in kept_steps.items() if len(steps) and not series_lib.logged_steps(
            steps, max_step(plugin, tag), self._samples.get(plugin))[1]]
        first = int(min(int(steps[0]) for steps in whole)) if whole else None
        return {(plugin, tag): series_lib.logged_steps(steps, max_step(plugin, tag), self._samples.get(plugin), first)
                for (plugin, tag), steps in kept_steps.items()}

    def _histogram_tables(self, ctx, experiment_id: str, run: str, infos: List[tags_lib.TagInfo],
                          listing: Mapping) -> Dict[str, metrics.MetricTable]:
        """Metric tables of histogram tags, reading only the tags whose listing changed."""
        out: Dict[str, metrics.MetricTable] = {}
        stale: List[tags_lib.TagInfo] = []
        for info in infos:
            ts = listing[info.tag]
            hit = self.tag_cache.get((experiment_id, run, "histograms", info.tag), (ts.max_step, ts.max_wall_time))
            if hit is None:
                stale.append(info)
            else:
                out[info.tag] = hit.table
        size = _FIRST_READ_TAGS
        while stale:
            chunk, stale = stale[:size], stale[size:]
            result = self._provider.read_tensors(
                ctx, experiment_id=experiment_id, plugin_name="histograms", downsample=_ALL_SAMPLES,
                run_tag_filter=provider.RunTagFilter(runs=[run], tags=[i.tag for i in chunk]),
            ).get(run, {})
            pending, values_read = [], 0
            for info in chunk:
                key = (experiment_id, run, "histograms", info.tag)
                ts = listing[info.tag]
                datums = result.pop(info.tag, [])
                if datums:
                    values_read += len(datums) * max(int(np.size(datums[-1].numpy)), 1)
                bimodal = info.role == tags_lib.WEIGHT and info.kind in (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER)
                pending.append(_pending(key, (ts.max_step, ts.max_wall_time), bimodal, datums,
                                        self.tag_cache.peek(key)))
            del result
            for p, entry in zip(pending, _compute(pending)):
                self.tag_cache.put(p.key, p.version, entry, entry.nbytes)
                out[p.key[-1]] = entry.table
            del pending
            size = int(np.clip(_READ_VALUES * len(chunk) / max(values_read, 1), 8, _MAX_READ_TAGS))
        return out

    def histogram_at(self, ctx, experiment_id: str, run: str, tag: str, step: int) -> Optional[np.ndarray]:
        """The ``[k, 3]`` buckets of one histogram at one step (None if the tag has no such step).

        A tag's buckets stay cached, keyed like the metric tables, after one of
        its cells was asked for: the next cells of the layer cost no read.
        """
        listing = self._provider.list_tensors(
            ctx, experiment_id=experiment_id, plugin_name="histograms",
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=[tag]),
        ).get(run, {}).get(tag)
        if listing is None:
            return None
        key = (experiment_id, run, "buckets", tag)
        version = (listing.max_step, listing.max_wall_time)
        by_step = self.bucket_cache.get(key, version)
        if by_step is None:
            result = self._provider.read_tensors(
                ctx, experiment_id=experiment_id, plugin_name="histograms", downsample=_ALL_SAMPLES,
                run_tag_filter=provider.RunTagFilter(runs=[run], tags=[tag]),
            ).get(run, {}).get(tag, [])
            by_step = {}
            for datum in result:
                by_step.setdefault(datum.step, datum.numpy)
            self.bucket_cache.put(key, version, by_step, sum(int(getattr(a, "nbytes", 64)) for a in by_step.values()))
        buckets = by_step.get(step)
        # Whatever the tensor holds: a malformed one reads as no buckets, as in the metrics.
        return None if buckets is None else metrics.as_buckets(buckets).copy()

    def _read_own(self, ctx, experiment_id: str, run: str, infos: List[tags_lib.TagInfo]) -> Dict[str, tuple]:
        """gradhealth summaries: tag -> (steps, {metric: exact values})."""
        if not infos:
            return {}
        result = self._provider.read_tensors(
            ctx, experiment_id=experiment_id, plugin_name=metadata.PLUGIN_NAME, downsample=_ALL_SAMPLES,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=[i.tag for i in infos]),
        ).get(run, {})
        out = {}
        for tag, datums in result.items():
            datums = sorted(datums, key=lambda d: d.step)
            width = len(metadata.FIELDS)
            vectors = np.full((len(datums), width), np.nan)
            for i, d in enumerate(datums):  # one small vector per step; reshaping is all it does
                flat = np.asarray(d.numpy, dtype=np.float64).ravel()[:width]
                vectors[i, :len(flat)] = flat
            out[tag] = (np.array([d.step for d in datums], dtype=np.int64), metadata.vectors_to_table_values(vectors))
        return out

    def _read_layer_scalars(self, ctx, experiment_id: str, run: str, tags: List[str]) -> Dict[str, tuple]:
        if not tags:
            return {}
        result = self._provider.read_scalars(
            ctx, experiment_id=experiment_id, plugin_name="scalars", downsample=_ALL_SAMPLES,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=tags),
        ).get(run, {})
        out = {}
        for tag, datums in result.items():
            datums = sorted(datums, key=lambda d: d.step)
            out[tag] = (np.array([d.step for d in datums], dtype=np.int64),
                        np.array([d.value for d in datums], dtype=np.float64))
        return out

    def _role_data(self, role: str, group: List[tags_lib.TagInfo], histograms: Mapping[str, metrics.MetricTable],
                   exact: Mapping[str, tuple], own: Mapping[str, tuple],
                   sampling: Mapping[tuple, tuple]) -> Optional[RoleData]:
        own_infos = [i for i in group if i.metric == tags_lib.OWN_SUMMARY and i.tag in own]
        hist_infos = [i for i in group if i.metric is None and i.tag in histograms]
        scalar_infos = sorted(
            (i for i in group if i.metric not in (None, tags_lib.OWN_SUMMARY) and i.tag in exact),
            key=lambda i: (_SCALAR_ORDER.get(i.metric, len(_SCALAR_ORDER)), tags_lib.natural_key(i.tag)))
        hist_tag = hist_infos[0].tag if hist_infos else None
        hist_table = histograms[hist_tag] if hist_tag else metrics.empty_table()
        first_seen = (int(hist_table.steps[0]), hist_table.first_wall) if hist_tag and len(hist_table.steps) else None
        # With gradhealth's exact summaries, bucket estimates add nothing but a second step axis
        # (Keras' own callback logs histograms per epoch, the integrations per optimizer step):
        # the histogram then serves only the cell's bucket view.
        table = _copy_table(hist_table) if hist_tag and not own_infos else metrics.empty_table()
        # Exact values win over bucket estimates: scalars first, then gradhealth's own summaries.
        for info in scalar_infos:
            steps, values = exact[info.tag]
            table = metrics.merge_exact(table, steps, {info.metric: values})
        for info in own_infos[:1]:
            steps, values = own[info.tag]
            table = metrics.merge_exact(table, steps, values)
        if not hist_infos and not scalar_infos and not own_infos:
            return None
        source = "+".join(s for s, present in (("gradhealth", own_infos), ("histogram", hist_infos),
                                               ("scalar", scalar_infos)) if present)
        tags = [i.tag for i in own_infos[:1] + hist_infos[:1] + scalar_infos]
        empty = health.CellHealth(np.zeros(0), np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=object))
        # The tags whose steps make up the row: the histogram's only without gradhealth summaries.
        step_tags = ([(metadata.PLUGIN_NAME, i.tag) for i in own_infos[:1]]
                     + [("histograms", i.tag) for i in hist_infos[:1] if not own_infos]
                     + [("scalars", i.tag) for i in scalar_infos])
        estimates = [(plugin, sampling[(plugin, tag)]) for plugin, tag in step_tags if (plugin, tag) in sampling]
        logged = max([est[0] for _, est in estimates] + [len(table.steps)])
        dropped = sorted({plugin for plugin, est in estimates if est[1]})
        return RoleData(tags=tags, source=source, table=table, health=empty, histogram_tag=hist_tag,
                        first_seen=first_seen, steps_logged=int(logged), dropped_by=dropped,
                        logged_at_least=any(est[1] and est[2] for _, est in estimates))

    @staticmethod
    def _add_update_ratios(layers) -> None:
        for layer in layers:
            weight = layer.roles.get(tags_lib.WEIGHT)
            update = layer.roles.get(tags_lib.UPDATE)
            if weight is None or update is None or "update_ratio" in weight.table.values:
                continue
            ratio, quality = metrics.update_ratio_from_histograms(update.table, weight.table)
            weight.table.values["update_ratio"] = ratio
            weight.table.quality["update_ratio"] = quality


# Within one module: weights first, then biases, then normalisation parameters,
# then the module's output, as a model summary lists them.
_KIND_RANK = {tags_lib.KIND_KERNEL: 0, tags_lib.KIND_OTHER: 1, tags_lib.KIND_BIAS: 2, tags_lib.KIND_NORM: 3,
              tags_lib.KIND_PREACTIVATION: 4, tags_lib.KIND_OUTPUT: 5}


def _model_order_key(layer: Layer) -> tuple:
    """Model order, from the best evidence there is.

    1. the position gradhealth's own summaries record;
    2. the order the histograms were first written in (training loops, Keras'
       callback and forward hooks write layer after layer), from the wall time
       of each tag's first kept step;
    3. natural order of the module names (``dense`` < ``dense_1`` < ``dense_10``).
    """
    hint = layer.order_hint if layer.order_hint is not None else float("inf")
    seen = [r.first_seen for role, r in sorted(layer.roles.items(), key=lambda kv: tags_lib.ROLES.index(kv[0]))
            if r.first_seen is not None and r.first_seen[1] is not None]
    written = seen[0] if seen else (float("inf"), float("inf"))
    return (hint, written, tags_lib.natural_key(layer.group), _KIND_RANK.get(layer.kind, 1),
            tags_lib.natural_key(layer.name))


# Per-layer statistic scalars of one role, in the order their conventions list them (seed 002's
# grad_mean before grad_max; TF1's variable_summaries mean, stddev, max, min): the loaders
# do not agree on any order of their own.
_SCALAR_ORDER = {name: i for i, name in enumerate(("mean_abs", "max_abs", "l2", "mean", "std", "max", "min"))}


def _write_order(listing: Mapping) -> List[str]:
    """Tags by the wall time of their last value, then by name: the same under both loaders."""
    def key(tag):
        wall = listing[tag].max_wall_time
        return (wall if wall is not None else float("-inf"), tags_lib.natural_key(tag))

    return sorted(listing, key=key)


def _logging_interval(step_arrays) -> Optional[float]:
    """The histogram writer's step interval, over all tags.

    Reservoir sampling only removes steps, so kept gaps are multiples of the
    writer's interval; their common divisor is the interval itself (the
    smallest gap is not, once steps were dropped).
    """
    gaps = [np.diff(steps) for steps in step_arrays if len(steps) > 1]
    gaps = np.concatenate(gaps) if gaps else np.zeros(0, dtype=np.int64)
    gaps = gaps[gaps > 0].astype(np.int64)
    return float(np.gcd.reduce(gaps)) if len(gaps) else None


# What keeps every sample, per plugin whose samples TensorBoard cut. A
# `tensorboard` flag: 0 means all (a data server started by hand says "all").
def keep_all_flag(plugins: Sequence[str]) -> str:
    """The ``tensorboard`` flag that keeps every logged step of these plugins' tags."""
    return "--samples_per_plugin=" + ",".join(f"{name}=0" for name in plugins)


def _run_sampling(rows: Sequence[RoleData]) -> Optional[dict]:
    """What TensorBoard's sampling dropped in a run's rows; None when it dropped nothing."""
    cut = [r for r in rows if r.dropped_by]
    if not cut:
        return None
    plugins = sorted({p for r in cut for p in r.dropped_by})
    kept = [len(r.table.steps) for r in cut]
    logged = max(r.steps_logged for r in cut)
    out = {
        "rows": len(cut),
        "kept_min": int(min(kept)), "kept_max": int(max(kept)),
        "logged": int(logged),
        "logged_at_least": any(r.logged_at_least for r in cut),
        "plugins": plugins,
        "flag": keep_all_flag(plugins),
    }
    out["message"] = sampling_message(out)
    return out


def sampling_message(sampling: Mapping) -> str:
    """One sentence for the tab and the CLI: kept against logged, and the flag that keeps them all."""
    lo, hi = sampling["kept_min"], sampling["kept_max"]
    kept = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
    logged = f"{'at least ' if sampling['logged_at_least'] else ''}{sampling['logged']:,}"
    rows = sampling["rows"]
    return (f"TensorBoard kept {kept} of {logged} logged steps in {rows} row{'s' if rows != 1 else ''} "
            f"(random samples); {sampling['flag']} keeps every step")


def role_union_steps(run_data: RunData, role: str) -> np.ndarray:
    steps = [layer.roles[role].table.steps for layer in run_data.layers if role in layer.roles]
    if not steps:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(steps))
