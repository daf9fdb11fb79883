"""The run model (`RunData`, `Layer`, `RoleData`) and how it is built from what was read.

Nothing here talks to TensorBoard: `provider.Reader` lists and reads, then
hands tag names, metric tables and step arrays to the functions below, which
sort tags into layers and roles, merge exact values over bucket estimates,
count what TensorBoard's sampling dropped and put the layers in model order.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..analysis import health, metrics
from ..analysis import series as series_lib
from ..writing import format as metadata
from . import axes, data_roles, tables
from . import tags as tags_lib


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# Shared by every row not yet judged (the analysis gives each row arrays of its own): a run
# of 20,000 rows would otherwise make 60,000 empty arrays.
_NO_SCORE = _read_only(np.zeros(0))
_NO_STATUS = _read_only(np.zeros(0, dtype=np.uint8))
_NO_RULE = _read_only(np.zeros(0, dtype=np.uint8))


def _undecided() -> health.CellHealth:
    return health.CellHealth(_NO_SCORE, _NO_STATUS, _NO_RULE)


@dataclasses.dataclass
class RoleData:
    """One layer in one role: where it came from and its metrics per step.

    `health` (score, status and rule per step) is empty as read: the analysis
    decides it, once, from the cell rules and the findings.
    """

    tags: List[str]
    source: str  # "gradhealth", "histogram", "scalar", or several joined by "+"
    table: metrics.MetricTable
    health: health.CellHealth = dataclasses.field(default_factory=_undecided)
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
    # How the role of the row's first tag was decided (tags.BY_RULE, BY_CONVENTION, ...).
    decided_by: str = tags_lib.BY_CONVENTION
    # A histogram on another step axis than the row's (Keras' per-epoch histograms beside
    # per-iteration summaries, see `axes`): its step N is not the row's step N. It then
    # adds nothing to the table, and a cell shows the histogram written nearest in time,
    # labelled with its own step: from the row's wall time per step (`step_walls`)
    # and the histogram's own steps and wall times.
    histogram_other_axis: bool = False
    step_walls: Optional[np.ndarray] = None
    # The histogram's kept steps on its own axis (ascending), whichever axis it is on: a row of
    # exact statistics at every step may have a histogram only every N-th.
    histogram_steps: Optional[np.ndarray] = None
    histogram_walls: Optional[np.ndarray] = None

    def histogram_step_at(self, index: int) -> Optional[Tuple[int, Optional[float]]]:
        """The histogram to show at the row's `index`-th step: (its step on its own axis, seconds it was
        written after the row's step, None on the row's own axis); None when the row has no histogram."""
        if self.histogram_tag is None:
            return None
        step = int(self.table.steps[index])
        if not self.histogram_other_axis:
            if self.histogram_steps is not None and not _holds(self.histogram_steps, step):
                return None  # logged at other steps only: nothing to read here
            return step, None
        wall = float(self.step_walls[index])
        nearest = axes.nearest_in_time(self.histogram_walls, wall)
        if nearest is None:
            return None
        return int(self.histogram_steps[nearest]), float(self.histogram_walls[nearest] - wall)

    def histogram_steps_around(self, step: int) -> Tuple[Optional[int], Optional[int]]:
        """The histogram's nearest kept steps before and after `step` on the row's own axis (None where
        there is none, and both None for a histogram on another axis or of unknown steps)."""
        if self.histogram_other_axis or self.histogram_steps is None or not len(self.histogram_steps):
            return None, None
        hs = self.histogram_steps
        i = int(np.searchsorted(hs, step, side="left"))
        j = int(np.searchsorted(hs, step, side="right"))
        return (int(hs[i - 1]) if i > 0 else None), (int(hs[j]) if j < len(hs) else None)

    @property
    def own_tag(self) -> Optional[str]:
        """The row's gradhealth summary tag (`role_data` lists it first), whose vectors carry a histogram
        from format version 2 on; None for a row without one."""
        return self.tags[0] if self.source.split("+")[0] == "gradhealth" else None


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
    """One run as the analysis sees it.

    Run-level scalars: `scalars` lists the tags of each scalar kind
    (``tags.SCALAR_LOSS``, ...), `scalar_series` holds the values of the ones
    worth diagnosing (loss, learning rate, global gradient norm) as
    tag -> (steps, values), and `scalar_kinds` maps each of those tags to its
    kind as the reader classified it (with the user's tag rules): analysis
    reads the kind there rather than classifying the tag again.
    """

    run: str
    layers: List[Layer]
    scalars: Dict[str, List[str]]  # scalar kind -> tags
    unclassified: List[str]
    steps_kept: int
    last_step: Optional[int]
    scalar_series: Dict[str, tuple] = dataclasses.field(default_factory=dict)
    # Step distance between logged histograms; None with fewer than two.
    histogram_interval: Optional[float] = None
    # Steps logged (largest over the rows) and what TensorBoard's sampling dropped:
    # None when every logged step was kept, else a dict (see `run_sampling`).
    steps_logged: Optional[int] = None
    sampling: Optional[dict] = None
    # What TensorBoard's sampling dropped from `scalar_series` (the loss, ...): None when nothing,
    # else a dict (see `series_sampling`). Rows can be whole while the loss is sampled.
    scalars_sampling: Optional[dict] = None
    # Scalar tag -> kind for every tag in `scalars` and `scalar_series`.
    scalar_kinds: Dict[str, str] = dataclasses.field(default_factory=dict)
    # Tags left out because what they hold cannot be read: tag -> why, for a person.
    unreadable: Dict[str, str] = dataclasses.field(default_factory=dict)
    # Histogram tags read but for some steps, no data there since they hold no histogram: tag -> which.
    unreadable_steps: Dict[str, UnreadableSteps] = dataclasses.field(default_factory=dict)
    # Where an integration's stop_on stopped training, and why: {"step", "message"}; None if it did not.
    stopped: Optional[dict] = None
    # Per tag of `scalar_series`: whether it counts steps as the layers' rows do (False: Keras'
    # per-epoch scalars beside per-iteration rows), None where the wall times cannot tell.
    scalar_axes: Dict[str, Optional[bool]] = dataclasses.field(default_factory=dict)
    # Per tag of `scalar_series` on another axis (`scalar_axes` False): the layers' step written
    # nearest in time to each of its points, so that its step N is never read as training step N.
    scalar_row_steps: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    # Per tag of `scalar_series`: the wall time each of its points was written (absent where unknown).
    scalar_walls: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    # The earliest wall time of any step read (None where none was recorded): when the run started,
    # which tells the ranks of one training (started together) from runs only named alike.
    first_wall: Optional[float] = None
    # (role, kinds) -> `role_rows`, made once: a dozen detectors ask for each on a run of many layers.
    _role_rows: Dict[tuple, list] = dataclasses.field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for kind, tags in self.scalars.items():
            for tag in tags:
                self.scalar_kinds.setdefault(tag, kind)
        # A run assembled by hand (tests, tools) may give series without their
        # listing: their kind is what the built-in conventions say.
        for tag in self.scalar_series:
            if tag not in self.scalar_kinds:
                self.scalar_kinds[tag] = tags_lib.classify_scalar(tag).kind

    def layer(self, name: str) -> Optional[Layer]:
        for layer in self.layers:
            if layer.name == name:
                return layer
        return None

    def scalar_steps(self, tag: str) -> np.ndarray:
        """A run-level scalar's steps on the layers' axis: its own where it counts steps as the rows do
        (or the wall times cannot tell), else the layers' step written nearest in time to each point."""
        mapped = self.scalar_row_steps.get(tag)
        return mapped if mapped is not None else np.asarray(self.scalar_series[tag][0])

    def scalar_other_axis(self, tag: str) -> bool:
        """Whether a run-level scalar is proven to count steps otherwise than the layers' rows."""
        return self.scalar_axes.get(tag) is False

    def scalar_axis_groups(self, tags: Sequence[str]) -> List[List[str]]:
        """`tags` (run-level scalars) in groups that count steps alike, in their given order: first those
        on the layers' axis (or whose wall times cannot tell), then each other axis. Two scalars on
        other axes share one when, at the own steps both logged, the layers' steps written nearest in
        time agree for at least three quarters of them: Keras' `epoch_loss` and `epoch_accuracy` do."""
        rows = [t for t in tags if not self.scalar_other_axis(t)]
        others: List[List[str]] = []
        for tag in (t for t in tags if self.scalar_other_axis(t)):
            for members in others:
                if self._same_other_axis(members[0], tag):
                    members.append(tag)
                    break
            else:
                others.append([tag])
        return ([rows] if rows else []) + others

    def _same_other_axis(self, a: str, b: str) -> bool:
        """Whether two scalars on other axes than the layers' count steps alike (`scalar_axis_groups`)."""
        _, ia, ib = np.intersect1d(self.scalar_series[a][0], self.scalar_series[b][0], return_indices=True)
        if not len(ia):
            return False
        return bool(np.mean(self.scalar_steps(a)[ia] == self.scalar_steps(b)[ib]) >= 0.75)

    def role_rows(self, role: str, kinds: Optional[tuple] = None) -> List[Tuple[Layer, metrics.MetricTable]]:
        """(layer, metric table) of every layer with logged steps in `role`, of the tensor `kinds` given
        (None: any), in model order: the tables the detectors judge, with a step whose tensor held NaN or
        Inf left to the non-finite count alone (`metrics.judged`). The run's layers and rows must not
        change once it is asked."""
        key = (role, None if kinds is None else tuple(kinds))
        rows = self._role_rows.get(key)
        if rows is None:
            rows = self._role_rows[key] = [
                (layer, metrics.judged(layer.roles[role].table)) for layer in self.layers
                if role in layer.roles and len(layer.roles[role].table.steps)
                and (kinds is None or layer.kind in kinds)]
        return rows

    def roles(self) -> List[str]:
        present = {role for layer in self.layers for role in layer.roles}
        return [role for role in tags_lib.ROLES if role in present]


class NotFound(Exception):
    """A run, layer or step that the data does not have."""


# Run-level scalars whose series are read for diagnosis.
DIAGNOSED_SCALARS = (tags_lib.SCALAR_LOSS, tags_lib.SCALAR_LR, tags_lib.SCALAR_GRAD_NORM)


@dataclasses.dataclass
class RunTags:
    """A run's tags sorted by what they describe."""

    histograms: List[tags_lib.TagInfo]  # per-layer histograms
    layer_scalars: List[tags_lib.TagInfo]  # per-layer statistic scalars
    own: List[tags_lib.TagInfo]  # gradhealth's own summaries
    scalars: Dict[str, List[str]]  # run-level scalar kind -> tags
    shapes: Dict[str, List[int]]  # layer -> tensor shape, from gradhealth summaries
    unclassified: List[str]
    # gradhealth tags whose metadata does not follow the format: tag -> why.
    unreadable: Dict[str, str] = dataclasses.field(default_factory=dict)

    def diagnosed(self) -> List[str]:
        return [t for kind in DIAGNOSED_SCALARS for t in self.scalars.get(kind, [])]


def classify_run_tags(hist_tags: Sequence[str], scalar_tags: Sequence[str], own_contents: Mapping[str, bytes],
                      rules: Sequence[tags_lib.UserRule] = ()) -> RunTags:
    """Sorts a run's histogram, scalar and gradhealth tags (each in write order) into layers and roles.

    ``own_contents``: the plugin content of each gradhealth tag, in write order.
    """
    infos: List[tags_lib.TagInfo] = []
    unclassified: List[str] = []
    hist_set = set(hist_tags)
    for tag in hist_tags:
        # classify_histogram looks among the siblings for the tag's own gradient
        # (tag + ".grad", ...) and copies what it is given into a set: handing
        # it every tag made classifying a run quadratic in its number of tags.
        siblings = [t for t in (tag + ".grad", tag + "/grad", tag + "_grad") if t in hist_set]
        info = tags_lib.classify_histogram(tag, siblings, rules)
        (infos.append(info) if info else unclassified.append(tag))
    scalars: Dict[str, List[str]] = {}
    layer_scalars: List[tags_lib.TagInfo] = []
    for tag in scalar_tags:
        info = tags_lib.classify_scalar(tag, rules)
        if isinstance(info, tags_lib.TagInfo):
            layer_scalars.append(info)
        else:
            scalars.setdefault(info.kind, []).append(tag)
    own, shapes, unreadable = [], {}, {}
    for tag, content in own_contents.items():
        try:
            meta = metadata.read_metadata(content)
        except metadata.MetadataError as e:
            unreadable[tag] = str(e)
            continue
        own.append(tags_lib.own_summary_info(tag, meta["layer"], meta["role"], meta.get("position")))
        if "shape" in meta:
            shapes[meta["layer"]] = meta["shape"]
    histograms = tags_lib.separate_shared_rows(tags_lib.pair_rows(infos))
    layer_scalars = tags_lib.join_output_scalars(layer_scalars, histograms)
    return RunTags(histograms=histograms, layer_scalars=layer_scalars, own=own,
                   scalars=scalars, shapes=shapes, unclassified=unclassified, unreadable=unreadable)


def not_numbers(datums: Sequence) -> Optional[str]:
    """Why a tag's tensors cannot be read as numbers (text, complex values), or None when they can."""
    if isinstance(datums, tables.Samples):  # decoded together: one dtype for every step
        if datums.dtype.kind in "biuf":
            return None
        datums = datums[:1]
    for d in datums:  # one dtype per step: a tag's tensors need not agree
        values = d.numpy
        # An array's own dtype, without converting it: a run of many tags has hundreds of thousands.
        dtype = values.dtype if isinstance(values, np.ndarray) else np.asarray(values).dtype
        if dtype.kind not in "biuf":
            what = "text" if dtype.kind in "OSU" else f"{dtype.name} values"
            return f"the tensor at step {d.step} holds {what}, not numbers"
    return None


def _no_step_readable(datums: Sequence, problem: Callable[[Sequence[int]], Optional[str]]) -> Optional[str]:
    """The first step's problem (`problem` of a tensor's shape) when every step has one; None when a step
    has none: a tag with some readable steps is read, its other steps being no data."""
    if isinstance(datums, tables.Samples):  # decoded together: one shape for every step
        why = problem(datums.values.shape[1:])
        return None if why is None or not len(datums) else f"the tensor at step {int(datums.steps[0])} {why}"
    first = None
    for d in datums:
        why = problem(np.shape(d.numpy))
        if why is None:
            return None
        first = first or f"the tensor at step {d.step} {why}"
    return first


def not_histograms(datums: Sequence) -> Optional[str]:
    """Why a histogram tag's tensors are no histograms at any step (a scalar, a cube), or None when one is."""
    return _no_step_readable(datums, metrics.buckets_problem)


@dataclasses.dataclass(frozen=True)
class UnreadableSteps:
    """A tag read but for some of its steps, whose tensors are no histograms (a histogram tag) or no
    statistics vectors (a gradhealth summary): no data there."""

    steps: int  # how many of its steps are unreadable
    of: int  # its steps read
    first_step: int
    why: str  # what is wrong at the first of them, with its step: "negative counts at step 40"
    holds: str = "histogram"  # what each of its steps should hold

    def to_json(self, tag: str) -> dict:
        return {"tag": tag, "steps": self.steps, "of": self.of, "first_step": self.first_step, "why": self.why}


def histogram_tag_read(bad: Sequence[Tuple[int, str]], steps: int) -> Tuple[Optional[str], Optional[UnreadableSteps]]:
    """(why the tag is unreadable, its unreadable steps) from the (step, why) of its `steps` read that are
    no histograms (`tables.TagMetrics.bad`): a tag with no histogram at any step is unreadable, saying what
    is wrong at its first; one with some is read, its other steps said; (None, None) when all are fine."""
    if not bad:
        return None, None
    if len(bad) >= steps:
        return bad[0][1], None
    return None, UnreadableSteps(steps=len(bad), of=steps, first_step=bad[0][0], why=bad[0][1])


def not_vectors(datums: Sequence) -> Optional[str]:
    """Why a gradhealth tag's tensors are no statistics vectors at any step (too short, too long), or None."""
    return _no_step_readable(datums, metadata.vector_problem)


@dataclasses.dataclass
class RunReads:
    """What was read for a run's classified tags."""

    histograms: Dict[str, metrics.MetricTable]  # histogram tag -> metric table
    exact: Dict[str, tuple]  # per-layer scalar tag -> (steps, values)
    own: Dict[str, tuple]  # gradhealth tag -> (steps, {metric: values})
    scalar_series: Dict[str, tuple]  # diagnosed run-level scalar tag -> (steps, values)
    # (plugin, tag) -> (steps logged, dropped, lower bound); see `tag_sampling`.
    sampling: Dict[tuple, tuple]
    # (plugin, tag) -> wall time of each kept step, where the reader recorded them.
    walls: Dict[tuple, np.ndarray] = dataclasses.field(default_factory=dict)
    # Tags read but left out, their values not being numbers: tag -> why.
    unreadable: Dict[str, str] = dataclasses.field(default_factory=dict)
    # Histogram tags read but for some steps, which are no histograms: tag -> what those are.
    unreadable_steps: Dict[str, UnreadableSteps] = dataclasses.field(default_factory=dict)

    def kept_steps(self) -> Dict[tuple, np.ndarray]:
        """(plugin, tag) -> the steps TensorBoard kept, for every tag read."""
        kept = {("histograms", tag): table.steps for tag, table in self.histograms.items()}
        kept.update({(metadata.PLUGIN_NAME, tag): steps for tag, (steps, _) in self.own.items()})
        kept.update({("scalars", tag): steps for tag, (steps, _) in self.exact.items()})
        kept.update({("scalars", tag): steps for tag, (steps, _) in self.scalar_series.items()})
        return kept


def tag_sampling(kept_steps: Mapping[tuple, np.ndarray], max_steps: Mapping[tuple, Optional[int]],
                 samples: Mapping[str, float]) -> Dict[tuple, tuple]:
    """(plugin, tag) -> (steps logged, dropped, lower bound) for every tag read.

    ``max_steps``: the last step the provider lists per (plugin, tag);
    ``samples``: samples per tag the loader keeps, by plugin, where known.
    The run's first step comes from the series TensorBoard kept whole (a loss
    scalar usually is: 1,000 samples per tag), so that the count of a sampled
    series starts where the run started, not at its own first kept step.
    """
    def logged(key: tuple, steps: np.ndarray, first: Optional[int] = None) -> Tuple[int, bool, bool]:
        return series_lib.logged_steps(steps, max_steps.get(key), samples.get(key[0]), first)

    whole = _evidently_whole(kept_steps, max_steps, samples)
    out = {key: (len(steps), False, False) if key in whole else logged(key, steps)
           for key, steps in kept_steps.items()}
    whole = [steps for key, steps in kept_steps.items() if len(steps) and not out[key][1]]
    first = int(min(int(steps[0]) for steps in whole)) if whole else None
    if first is not None:
        # The run's first step changes only the count of a series that lost steps: the others
        # keep what they were found to hold without it.
        out.update({key: logged(key, kept_steps[key], first) for key, found in out.items() if found[1]})
    return out


def _evidently_whole(kept_steps: Mapping[tuple, np.ndarray], max_steps: Mapping[tuple, Optional[int]],
                     samples: Mapping[str, float]) -> set:
    """The series `series.logged_steps` finds nothing dropped from at first sight, equally long ones at once:
    steps ascending, and fewer than the loader keeps or evenly spaced up to the last step listed.

    A run of 20,000 tags would otherwise cost 20,000 calls; the rest are left to it.
    """
    keys = list(kept_steps)
    found = set()
    for rows in series_lib.same_length([len(kept_steps[key]) for key in keys]):
        group = [keys[i] for i in rows]
        n = len(kept_steps[group[0]])
        if n < 2:
            found.update(group)
            continue
        steps = np.array([kept_steps[key] for key in group], dtype=np.int64)
        gaps = np.diff(steps, axis=1)
        # Unknown (None): no proof; NaN compares false.
        capacity = np.array([samples.get(key[0], np.nan) for key in group], dtype=np.float64)
        listed = [max_steps.get(key) for key in group]
        # A listed last step past the last kept one: the series lost its end.
        to_end = np.array([m is None or m <= last for m, last in zip(listed, steps[:, -1].tolist())])
        even = (gaps == gaps[:, :1]).all(axis=1) & to_end
        whole = (gaps > 0).all(axis=1) & ((n < capacity) | even)
        found.update(group[i] for i in np.flatnonzero(whole).tolist())
    return found


# Per-layer statistic scalars of one role, in the order their conventions list them (seed 002's
# grad_mean before grad_max; TF1's variable_summaries mean, stddev, max, min): the loaders
# do not agree on any order of their own.
_SCALAR_ORDER = {name: i for i, name in enumerate(("mean_abs", "max_abs", "l2", "mean", "std", "max", "min"))}


def _row_table(hist_tag: Optional[str], scalar_infos: List[tags_lib.TagInfo], own_infos: List[tags_lib.TagInfo],
               reads: RunReads) -> metrics.MetricTable:
    """A row's metric table: bucket estimates (of `hist_tag`, if given) overwritten by exact values."""
    table = tables.copy_table(reads.histograms[hist_tag]) if hist_tag else metrics.empty_table()
    # Exact values win over bucket estimates: scalars first, then gradhealth's own summaries.
    for info in scalar_infos:
        steps, values = reads.exact[info.tag]
        table = metrics.merge_exact(table, steps, {info.metric: values})
    for info in own_infos[:1]:
        steps, values = reads.own[info.tag]
        table = metrics.merge_exact(table, steps, values)
    return table


def _row_sampling(step_tags: List[tuple], table: metrics.MetricTable, sampling: Mapping[tuple, tuple]) -> dict:
    """A row's logged-step count and what dropped steps from it, over the tags its steps come from."""
    estimates = [(plugin, sampling[(plugin, tag)]) for plugin, tag in step_tags if (plugin, tag) in sampling]
    logged = max([est[0] for _, est in estimates] + [len(table.steps)])
    return {"steps_logged": int(logged), "dropped_by": sorted({plugin for plugin, est in estimates if est[1]}),
            "logged_at_least": any(est[1] and est[2] for _, est in estimates)}


def role_data(group: List[tags_lib.TagInfo], reads: RunReads) -> Optional[RoleData]:
    """One layer's row in one role from the tags describing it; None when none of them was read."""
    own_infos = [i for i in group if i.metric == tags_lib.OWN_SUMMARY and i.tag in reads.own]
    hist_infos = [i for i in group if i.metric is None and i.tag in reads.histograms]
    scalar_infos = sorted(
        (i for i in group if i.metric not in (None, tags_lib.OWN_SUMMARY) and i.tag in reads.exact),
        key=lambda i: (_SCALAR_ORDER.get(i.metric, len(_SCALAR_ORDER)), tags_lib.natural_key(i.tag)))
    if not hist_infos and not scalar_infos and not own_infos:
        return None
    hist_tag = hist_infos[0].tag if hist_infos else None
    hist_table = reads.histograms[hist_tag] if hist_tag else metrics.empty_table()
    first_seen = (int(hist_table.steps[0]), hist_table.first_wall) if hist_tag and len(hist_table.steps) else None
    # The exact series that sets the row's step axis: gradhealth's summary, else the first scalar.
    axis_key = ((metadata.PLUGIN_NAME, own_infos[0].tag) if own_infos
                else ("scalars", scalar_infos[0].tag) if scalar_infos else None)
    other_axis = hist_tag is not None and axis_key is not None and _other_axis(axis_key, hist_tag, reads)
    # With gradhealth's exact summaries, bucket estimates add nothing; on another step axis
    # they would put one moment's numbers under another's step. The histogram then serves
    # only the cell's bucket view.
    merged_hist = hist_tag if hist_tag and not own_infos and not other_axis else None
    table = _row_table(merged_hist, scalar_infos, own_infos, reads)
    source = "+".join(s for s, present in (("gradhealth", own_infos), ("histogram", hist_infos),
                                           ("scalar", scalar_infos)) if present)
    used = own_infos[:1] + hist_infos[:1] + scalar_infos
    tags = [i.tag for i in used]
    # The tags whose steps make up the row.
    step_tags = ([(metadata.PLUGIN_NAME, i.tag) for i in own_infos[:1]]
                 + ([("histograms", merged_hist)] if merged_hist else [])
                 + [("scalars", i.tag) for i in scalar_infos])
    axis = {"histogram_steps": hist_table.steps} if hist_tag else {}
    if other_axis:
        axis = {"histogram_other_axis": True, "step_walls": _row_walls(table.steps, axis_key, reads),
                "histogram_steps": hist_table.steps, "histogram_walls": reads.walls[("histograms", hist_tag)]}
    return RoleData(tags=tags, source=source, table=table, histogram_tag=hist_tag, first_seen=first_seen,
                    decided_by=used[0].decided_by, **_row_sampling(step_tags, table, reads.sampling), **axis)


def _other_axis(axis_key: tuple, hist_tag: str, reads: RunReads) -> bool:
    """Whether the histogram tag is proven to count steps otherwise than the row's exact series."""
    exact = reads.own if axis_key[0] == metadata.PLUGIN_NAME else reads.exact
    walls, hist_walls = reads.walls.get(axis_key), reads.walls.get(("histograms", hist_tag))
    if walls is None or hist_walls is None:
        return False
    return axes.same_step_axis(exact[axis_key[1]][0], walls, reads.histograms[hist_tag].steps, hist_walls) is False


def _row_walls(steps: np.ndarray, axis_key: tuple, reads: RunReads) -> np.ndarray:
    """The wall time of each of the row's steps, from the series that sets its axis (NaN where it has none)."""
    exact = reads.own if axis_key[0] == metadata.PLUGIN_NAME else reads.exact
    own_steps, walls = exact[axis_key[1]][0], reads.walls[axis_key]
    at = np.minimum(np.searchsorted(own_steps, steps), max(len(own_steps) - 1, 0))
    found = (own_steps[at] == steps) if len(own_steps) else np.zeros(len(steps), dtype=bool)
    return np.where(found, walls[at] if len(walls) else np.nan, np.nan)


def _roles_from_data(infos: List[tags_lib.TagInfo], reads: RunReads) -> List[tags_lib.TagInfo]:
    """The histograms whose names told no role, with the role their data proves where it proves one."""
    out = []
    for info in infos:
        table = reads.histograms.get(info.tag) if info.decided_by == tags_lib.BY_FALLBACK else None
        role = data_roles.role_from_data(table) if table is not None else None
        out.append(info if role is None else tags_lib.with_role(info, role, tags_lib.BY_DATA))
    return out


def _one_count(table: metrics.MetricTable) -> float:
    """How many values the tag's histograms hold (their median over steps), NaN where unknown."""
    counts = table.values.get("count")
    return float(np.nanmedian(counts)) if counts is not None and np.isfinite(counts).any() else np.nan


def _doubt_shared_names(infos: List[tags_lib.TagInfo], reads: RunReads) -> List[tags_lib.TagInfo]:
    """Weight histograms that name one parameter under different prefixes, made role OTHER (a guess)
    where nothing but their parameter word says weight.

    Two tags naming one parameter cannot both be its weights, and which one is goes unsaid: a weight
    rule would judge a gradient's first histogram as an initialisation. A tag stays a weight when a
    rule or a role word decides it, or when its histograms hold another number of values than every
    other tag of that name: a weight and its gradient hold as many. Rows of repeated blocks
    (``block_0/ln_1/gamma``, ``block_1/ln_1/gamma``) are not views of one parameter and doubt no one.
    """
    doubted = set()
    for group in tags_lib.weights_sharing_a_name(infos):
        counts = {i.tag: _one_count(reads.histograms.get(i.tag, metrics.empty_table())) for i in group}
        for info in filter(tags_lib.weight_by_parameter_word_alone, group):
            mine = counts[info.tag]
            if any(tags_lib.views_of_one_parameter(info, other) and (np.isnan(mine) or np.isnan(counts[other.tag])
                                                  or mine == counts[other.tag]) for other in group):
                doubted.add(info.tag)
    return [tags_lib.with_role(i, tags_lib.OTHER, tags_lib.BY_SHARED_NAME) if i.tag in doubted else i
            for i in infos]


def _layers(run_tags: RunTags, reads: RunReads) -> List[Layer]:
    """The layers the tags describe, each with one row per role that has data, in first-tag order."""
    grouped: Dict[tuple, List[tags_lib.TagInfo]] = collections.defaultdict(list)
    histograms = _roles_from_data(_doubt_shared_names(run_tags.histograms, reads), reads)
    for info in run_tags.own + histograms + run_tags.layer_scalars:
        grouped[(info.layer, info.role)].append(info)
    layers: Dict[str, Layer] = {}
    for (name, role), group in grouped.items():
        row = role_data(group, reads)
        if row is None:
            continue
        first = group[0]
        layer = layers.setdefault(name, Layer(name=name, group=first.group, kind=first.kind, order=0, roles={},
                                             order_hint=first.order_hint, shape=run_tags.shapes.get(name)))
        if layer.order_hint is None:
            layer.order_hint = first.order_hint
        layer.roles[role] = row
    return list(layers.values())


def mark_scales(layers: Iterable[Layer]) -> None:
    """Gives a kernel whose first logged weights are all above zero the kind of a normalisation parameter.

    Kernels start symmetric around zero; a scale starts at one (BatchNorm's and LayerNorm's weight, a
    weight norm's magnitude). In an ``nn.Sequential`` the name says neither (``features.1.weight``):
    the values do. A scale's spread and |mean| are no kernel's to judge (weight growth, initialisation)."""
    for layer in layers:
        weight = layer.roles.get(tags_lib.WEIGHT)
        if layer.kind != tags_lib.KIND_KERNEL or weight is None or "min" not in weight.table.values:
            continue
        low = weight.table.get("min")
        known = np.flatnonzero(np.isfinite(low))
        if len(known) and low[known[0]] > 0 and metrics.proves(weight.table.quality_of("min")[known[0]], True):
            layer.kind = tags_lib.KIND_NORM


def add_update_ratios(layers: Iterable[Layer]) -> None:
    """The update-to-weight ratio of layers logging their weights: estimated from their updates where
    those are logged too, else, for kernels, the lower bound the weights' own norms prove (other
    parameters often start at zero, where any update is large against the weights)."""
    bounded: Dict[int, List[RoleData]] = collections.defaultdict(list)  # by row length
    for layer in layers:
        weight = layer.roles.get(tags_lib.WEIGHT)
        update = layer.roles.get(tags_lib.UPDATE)
        if weight is None or "update_ratio" in weight.table.values:
            continue
        if update is None and layer.kind != tags_lib.KIND_KERNEL:
            continue
        if update is None:
            bounded[len(weight.table.steps)].append(weight)
            continue
        ratio, quality = metrics.update_ratio_from_histograms(update.table, weight.table)
        weight.table.values["update_ratio"] = ratio
        weight.table.quality["update_ratio"] = quality
    for weights in bounded.values():  # equally long rows: their bounds in one pass
        ratios, qualities = metrics.update_ratio_lower_bounds([w.table for w in weights])
        for weight, ratio, quality, known in zip(weights, ratios, qualities, np.isfinite(ratios).any(axis=1)):
            if known:
                weight.table.values["update_ratio"] = ratio
                weight.table.quality["update_ratio"] = quality


def build_run(run: str, run_tags: RunTags, reads: RunReads, last_step: Optional[int]) -> RunData:
    """The run model from its classified tags and what was read for them."""
    layers = _layers(run_tags, reads)
    mark_scales(layers)
    add_update_ratios(layers)
    ordered = model_order(layers)
    all_steps = [layer_role.table.steps for layer in ordered for layer_role in layer.roles.values()]
    kept = len(np.unique(np.concatenate(all_steps))) if all_steps else 0
    rows = [r for layer in ordered for r in layer.roles.values()]
    found_axes = scalar_axes(reads)
    return RunData(
        run=run, layers=ordered, scalars=run_tags.scalars,
        unclassified=sorted(run_tags.unclassified, key=tags_lib.natural_key),
        steps_kept=kept, last_step=last_step, scalar_series=reads.scalar_series,
        histogram_interval=logging_interval(t.steps for t in reads.histograms.values()),
        steps_logged=max((r.steps_logged or 0 for r in rows), default=0) or kept,
        sampling=run_sampling(rows),
        scalars_sampling=series_sampling(reads),
        unreadable={tag: why for tag, why in sorted({**run_tags.unreadable, **reads.unreadable}.items(),
                                                    key=lambda item: tags_lib.natural_key(item[0]))},
        unreadable_steps={tag: reads.unreadable_steps[tag]
                          for tag in sorted(reads.unreadable_steps, key=tags_lib.natural_key)},
        scalar_axes=found_axes,
        scalar_row_steps=scalar_row_steps(reads, found_axes),
        scalar_walls={tag: np.asarray(reads.walls[("scalars", tag)], dtype=np.float64)
                      for tag in reads.scalar_series if ("scalars", tag) in reads.walls},
        first_wall=min((float(w.min()) for w in reads.walls.values() if len(w)), default=None),
    )


def _axis_reference(reads: RunReads) -> Optional[Tuple[np.ndarray, np.ndarray, tuple]]:
    """(steps, wall times, (plugin, tag)) of the series standing for the layers' rows' step axis; None
    without wall times.

    The rows' axis is that of gradhealth's own summaries where there are any (they
    set the row's steps), else of the histograms, else of the per-layer scalars;
    the longest series of that kind stands for it. A run without rows is judged against
    its run-level scalar spanning the most steps.
    """
    candidates = ([(metadata.PLUGIN_NAME, tag, steps) for tag, (steps, _) in reads.own.items()]
                  or [("histograms", tag, table.steps) for tag, table in reads.histograms.items()]
                  or [("scalars", tag, steps) for tag, (steps, _) in reads.exact.items()])
    known = [((len(steps),), key, tag, steps) for key, tag, steps in candidates if (key, tag) in reads.walls]
    if not known:
        # No rows (Keras' validation run): the scalar counting the most steps stands for training's
        # axis, an optimizer step being the finest a writer counts (epoch 2 is iteration 84).
        known = [((int(steps[-1]) - int(steps[0]), len(steps)), "scalars", tag, steps)
                 for tag, (steps, _) in reads.scalar_series.items() if len(steps) and ("scalars", tag) in reads.walls]
    if not known:
        return None
    _, key, tag, steps = max(known, key=lambda c: c[0])
    return np.asarray(steps), np.asarray(reads.walls[(key, tag)], dtype=np.float64), (key, tag)


def scalar_axes(reads: RunReads) -> Dict[str, Optional[bool]]:
    """Per run-level scalar: whether it counts steps as the layers' rows do, told from wall times
    (`axes.same_step_axis` against `_axis_reference`)."""
    reference = _axis_reference(reads)
    if reference is None:
        return {tag: None for tag in reads.scalar_series}
    steps, walls, chosen = reference
    out: Dict[str, Optional[bool]] = {}
    for scalar, (scalar_steps, _) in reads.scalar_series.items():
        scalar_walls = reads.walls.get(("scalars", scalar))
        if chosen == ("scalars", scalar):
            out[scalar] = True  # the axis itself, in a run without rows
            continue
        out[scalar] = None if scalar_walls is None else axes.same_step_axis(steps, walls, scalar_steps, scalar_walls)
    return out


def scalar_row_steps(reads: RunReads, found_axes: Mapping[str, Optional[bool]]) -> Dict[str, np.ndarray]:
    """Per run-level scalar on another axis than the rows: the rows' step written nearest in time to each
    of its points (`axes.nearest_steps`)."""
    reference = _axis_reference(reads)
    if reference is None:
        return {}
    steps, walls, _ = reference
    return {tag: axes.nearest_steps(steps, walls, reads.walls[("scalars", tag)])
            for tag, same in found_axes.items() if same is False}


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


def model_order(layers: Iterable[Layer]) -> List[Layer]:
    """The layers in model order, each with its `order` set to its position."""
    ordered = sorted(layers, key=_model_order_key)
    for i, layer in enumerate(ordered):
        layer.order = i
    return ordered


def logging_interval(step_arrays: Iterable[np.ndarray]) -> Optional[float]:
    """The histogram writer's step interval, over all tags.

    Reservoir sampling only removes steps, so kept gaps are multiples of the
    writer's interval; their common divisor is the interval itself (the
    smallest gap is not, once steps were dropped).
    """
    arrays = [steps for steps in step_arrays if len(steps) > 1]
    if not arrays:
        return None
    # Every tag's gaps in one pass: the steps end to end, less the gap from each tag's last to the next's first.
    gaps = _ascending_gaps(np.concatenate(arrays))
    ends = np.cumsum([len(steps) for steps in arrays])[:-1]
    gaps = np.delete(gaps, ends - 1)
    gaps = gaps[gaps > 0]
    return float(np.gcd.reduce(gaps)) if len(gaps) else None


def _ascending_gaps(steps: np.ndarray) -> np.ndarray:
    """Gaps between ascending int64 steps, exact even from -2^63 to 2^63-1.

    The difference of two int64 steps can exceed int64; subtracting in uint64
    wraps modulo 2^64, which is the true gap for any ascending pair.
    """
    as_unsigned = np.asarray(steps, dtype=np.int64).view(np.uint64)
    return as_unsigned[1:] - as_unsigned[:-1]


# What keeps every sample, per plugin whose samples TensorBoard cut. A
# `tensorboard` flag: 0 means all (a data server started by hand says "all").
def keep_all_flag(plugins: Sequence[str]) -> str:
    """The ``tensorboard`` flag that keeps every logged step of these plugins' tags."""
    return "--samples_per_plugin=" + ",".join(f"{name}=0" for name in plugins)


def run_sampling(rows: Sequence[RoleData]) -> Optional[dict]:
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


# Series a sampling sentence names before it says "and N more".
_NAMED_SERIES = 3


def series_sampling(reads: RunReads) -> Optional[dict]:
    """What TensorBoard's sampling dropped from the run-level scalars the analysis reads (the loss,
    the global gradient norm, ...); None when it kept every logged point of each."""
    cut = []
    for tag in sorted(reads.scalar_series, key=tags_lib.natural_key):
        found = reads.sampling.get(("scalars", tag))
        if found is not None and found[1]:
            cut.append({"tag": tag, "kept": int(len(reads.scalar_series[tag][0])), "logged": int(found[0]),
                        "logged_at_least": bool(found[2])})
    if not cut:
        return None
    named = [f"{c['kept']:,} of {'at least ' if c['logged_at_least'] else ''}{c['logged']:,} logged points of "
             f"{c['tag']}" for c in cut[:_NAMED_SERIES]]
    more = f" and of {len(cut) - _NAMED_SERIES} more series" if len(cut) > _NAMED_SERIES else ""
    flag = keep_all_flag(["scalars"])
    kept = f"TensorBoard kept {', '.join(named)}{more} (random samples)"
    return {"series": cut, "flag": flag, "kept_text": kept, "message": f"{kept}; {flag} keeps every point"}


def sampling_message(sampling: Mapping) -> str:
    """One sentence for the tab and the CLI: kept against logged, and the flag that keeps them all."""
    lo, hi = sampling["kept_min"], sampling["kept_max"]
    kept = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
    logged = f"{'at least ' if sampling['logged_at_least'] else ''}{sampling['logged']:,}"
    rows = sampling["rows"]
    return (f"TensorBoard kept {kept} of {logged} logged steps in {rows} row{'s' if rows != 1 else ''} "
            f"(random samples); {sampling['flag']} keeps every step")


def role_union_steps(run_data: RunData, role: str) -> np.ndarray:
    """Every step any layer logged in this role, ascending."""
    steps = [layer.roles[role].table.steps for layer in run_data.layers if role in layer.roles]
    if not steps:
        return np.zeros(0, dtype=np.int64)
    # Most rows are logged at the same steps: each distinct axis once (every zoom's answer asks).
    return np.unique(np.concatenate([steps[group[0]] for group in equal_arrays(steps)]))


def equal_arrays(arrays: Sequence[np.ndarray]) -> List[List[int]]:
    """The indices of `arrays` grouped by equal contents (dtype and values), in order of first appearance.

    The reader hands rows logged at the same steps one shared array: those are grouped by identity,
    and only one array of each is compared by its bytes (a long run's step arrays are 40 KB each).
    """
    by_id: Dict[int, List[int]] = {}
    for i, a in enumerate(arrays):
        by_id.setdefault(id(a), []).append(i)
    by_bytes: Dict[tuple, List[int]] = {}
    for members in by_id.values():
        a = arrays[members[0]]
        by_bytes.setdefault((a.dtype.str, a.shape, a.tobytes()), []).extend(members)
    return [sorted(members) for members in by_bytes.values()]


def _holds(steps: np.ndarray, step: int) -> bool:
    """Whether ascending `steps` hold `step`."""
    i = int(np.searchsorted(steps, step))
    return i < len(steps) and int(steps[i]) == step
