"""Reads runs through TensorBoard's data provider into per-layer metric tables.

This is the only module that talks to TensorBoard's data. It goes through
``context.data_provider`` (never the legacy multiplexer), so it works the same
under the Python loader, the Rust data server and a remote gRPC data server,
and the CLI uses it unchanged on a ``MultiplexerDataProvider``.

Results are cached per run, keyed by what the provider lists for each tag
(last step and wall time), so an unchanged run is never recomputed and a run
whose tags grew recomputes only the tags that changed.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
from tensorboard.data import provider

from . import health, metadata, metrics, summary
from . import tags as tags_lib

# Read every sample TensorBoard kept; the loader's reservoir already bounds it.
_ALL_SAMPLES = 1_000_000
_CACHE_RUNS = 64
# Metric tables kept per tag (a few hundred bytes per logged step each).
_CACHE_BYTES = 256 * 1024 * 1024


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
                 tag_rules: Sequence[tags_lib.UserRule] = ()) -> None:
        self._provider = data_provider
        self._limits = dict(limits)
        self._tag_rules = list(tag_rules)
        self._lock = threading.Lock()
        self._cache: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self.tag_cache = TagCache()

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
        hist_tags = list(listings["histograms"].get(run, {}))
        scalar_tags = list(listings["scalars"].get(run, {}))
        infos: List[tags_lib.TagInfo] = []
        unclassified: List[str] = []
        for tag in hist_tags:
            info = tags_lib.classify_histogram(tag, hist_tags, self._tag_rules)
            (infos.append(info) if info else unclassified.append(tag))
        scalars: Dict[str, List[str]] = {}
        layer_scalars: List[tags_lib.TagInfo] = []
        for tag in scalar_tags:
            info = tags_lib.classify_scalar(tag, self._tag_rules)
            if isinstance(info, tags_lib.TagInfo):
                layer_scalars.append(info)
            else:
                scalars.setdefault(info.kind, []).append(tag)

        own_infos, shapes = [], {}
        for tag, ts in listings[metadata.PLUGIN_NAME].get(run, {}).items():
            meta = summary.parse_metadata(ts.plugin_content)
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

        grouped: Dict[tuple, List[tags_lib.TagInfo]] = collections.defaultdict(list)
        for info in own_infos + infos + layer_scalars:
            grouped[(info.layer, info.role)].append(info)

        layers: Dict[str, Layer] = {}
        for (name, role), group in grouped.items():
            role_data = self._role_data(role, group, histograms, exact, own)
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
        return RunData(
            run=run, layers=ordered, scalars=scalars, unclassified=sorted(unclassified, key=tags_lib.natural_key),
            steps_kept=kept, last_step=max(max_steps) if max_steps else None,
            scalar_series=scalar_series, histogram_interval=_logging_interval(t.steps for t in histograms.values()),
        )

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
                out[info.tag] = hit
        if not stale:
            return out
        result = self._provider.read_tensors(
            ctx, experiment_id=experiment_id, plugin_name="histograms", downsample=_ALL_SAMPLES,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=[i.tag for i in stale]),
        ).get(run, {})
        for info in stale:
            datums = sorted(result.get(info.tag, []), key=lambda d: d.step)
            h = metrics.stack_histograms(
                [d.step for d in datums], [d.wall_time for d in datums], [d.numpy for d in datums])
            table = metrics.histogram_metrics(h)
            if info.role == tags_lib.WEIGHT and info.kind in (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER):
                table.values["bimodal_dip"] = metrics.bimodal_dip(h)
                table.quality["bimodal_dip"] = table.quality["std"]
            ts = listing[info.tag]
            self.tag_cache.put((experiment_id, run, "histograms", info.tag), (ts.max_step, ts.max_wall_time),
                               table, _table_nbytes(table))
            out[info.tag] = table
        return out

    def histogram_at(self, ctx, experiment_id: str, run: str, tag: str, step: int) -> Optional[np.ndarray]:
        """The ``[k, 3]`` buckets of one histogram at one step, read on demand (not cached)."""
        result = self._provider.read_tensors(
            ctx, experiment_id=experiment_id, plugin_name="histograms", downsample=_ALL_SAMPLES,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=[tag]),
        ).get(run, {}).get(tag, [])
        for datum in result:
            if datum.step == step:
                return np.asarray(datum.numpy, dtype=np.float64).reshape(-1, 3)
        return None

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
            width = len(summary.FIELDS)
            vectors = np.full((len(datums), width), np.nan)
            for i, d in enumerate(datums):  # one small vector per step; reshaping is all it does
                flat = np.asarray(d.numpy, dtype=np.float64).ravel()[:width]
                vectors[i, :len(flat)] = flat
            out[tag] = (np.array([d.step for d in datums], dtype=np.int64), summary.vectors_to_table_values(vectors))
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
                   exact: Mapping[str, tuple], own: Mapping[str, tuple]) -> Optional[RoleData]:
        own_infos = [i for i in group if i.metric == tags_lib.OWN_SUMMARY and i.tag in own]
        hist_infos = [i for i in group if i.metric is None and i.tag in histograms]
        scalar_infos = [i for i in group if i.metric not in (None, tags_lib.OWN_SUMMARY) and i.tag in exact]
        hist_tag = hist_infos[0].tag if hist_infos else None
        table = _copy_table(histograms[hist_tag]) if hist_tag else metrics.empty_table()
        first_seen = (int(table.steps[0]), table.first_wall) if hist_tag and len(table.steps) else None
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
        return RoleData(tags=tags, source=source, table=table, health=empty, histogram_tag=hist_tag,
                        first_seen=first_seen)

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


def _logging_interval(step_arrays) -> Optional[float]:
    """Smallest distance between consecutive logged histogram steps, over all tags.

    Reservoir sampling only removes steps, so kept gaps are multiples of the
    writer's interval and the smallest one is the interval itself.
    """
    gaps = [np.diff(steps) for steps in step_arrays if len(steps) > 1]
    gaps = np.concatenate(gaps) if gaps else np.zeros(0)
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if len(gaps) else None


def role_union_steps(run_data: RunData, role: str) -> np.ndarray:
    steps = [layer.roles[role].table.steps for layer in run_data.layers if role in layer.roles]
    if not steps:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(steps))
