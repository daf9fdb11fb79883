"""Helpers every detector shares: per-layer hits, spans of steps past a limit,
and grouping one problem in many layers into one finding.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..reading import tags as tags_lib
from ..reading.runs import Layer, RunData
from . import metrics
from . import series as series_lib
from .finding import CRITICAL, INFO, WARN, Axis, Finding

# Weight-shape rules (std growth, |mean|, skewness, update ratio) mean little for
# biases and normalisation parameters that start constant.
PARAM_SHAPE_KINDS = (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER)


@dataclasses.dataclass
class Hit:
    """One layer's occurrence of a problem, before grouping across layers."""

    layer: str
    first: int
    last: int
    value: float
    step: int
    detail: Dict = dataclasses.field(default_factory=dict)
    points: Optional[np.ndarray] = None
    # The limit `value` crossed, where a finding has several triggers with their own limits.
    threshold: Optional[float] = None
    # The kept step before `first` when steps in between were dropped by TensorBoard's
    # sampling: the problem began after it, at `first` at the latest.
    after: Optional[int] = None


def kept_before(steps: np.ndarray, i: int) -> Optional[int]:
    """The kept step before index i if the writer logged steps between them that were not kept."""
    if i <= 0:
        return None
    interval = series_lib.logging_interval(steps)
    gap = int(steps[i] - steps[i - 1])
    return int(steps[i - 1]) if interval is not None and gap > interval else None


def layers_text(layers: List[str]) -> str:
    """Names quoted, so that a numeric one (nn.Sequential's `3`) never reads as a count: '`a`, `b`, `c` and 2 more'."""
    quoted = [f"`{name}`" for name in layers]
    if len(quoted) <= 3:
        return ", ".join(quoted)
    return f"{', '.join(quoted[:3])} and {len(quoted) - 3} more"


def labelled(word: str, names: List[str]) -> str:
    """'layer `3`', 'layers `a`, `b`': quoted names after the word that says what they are."""
    return f"{word}{'s' if len(names) > 1 else ''} {layers_text(names)}"


def group(rd: RunData, kind: str, severity: str, role: Optional[str], hits: List[Hit], threshold: float,
          what: str, advice: str) -> Optional[Finding]:
    """One finding for the same problem in many layers, listed in model order (run-level scalars
    first); its evidence is the earliest (then shallowest) layer's."""
    if not hits:
        return None
    order = {layer.name: layer.order for layer in rd.layers}
    hits = sorted(hits, key=lambda h: (h.first, order.get(h.layer, -1)))
    # Model order reads as the model does: "0, 1, 3", not the onset order "3, 0, 1".
    layers = sorted((h.layer for h in hits), key=lambda name: order.get(name, -1))
    first = min(h.first for h in hits)
    last = max(h.last for h in hits)
    onset = hits[0]
    evidence = {
        "threshold": onset.threshold if onset.threshold is not None else threshold,
        "value": onset.value,
        "step": onset.step,
        "layers": {h.layer: {"first_step": h.first, "last_step": h.last, "value": h.value, "step": h.step,
                             **({"threshold": h.threshold} if h.threshold is not None else {}), **h.detail}
                   for h in hits},
    }
    subject = _named([name for name in layers if name in order], [name for name in layers if name not in order], role)
    if onset.after is not None and onset.first == first:
        evidence["onset_after"] = onset.after
    f = Finding(run=rd.run, kind=kind, severity=severity, layers=layers, first_step=first, last_step=last,
                evidence=evidence, message="", advice=advice, role=role,
                spans={h.layer: (h.first, h.last) for h in hits},
                points={h.layer: h.points for h in hits if h.points is not None})
    f.message = f"{subject} {what} {when_text(f)}"
    return f


def _named(rows: List[str], scalars: List[str], role: Optional[str]) -> str:
    """A finding's subject: 'layer `3`: activations', 'scalar `loss`' (run-level scalars have no role),
    'scalar `grad_norm` and layers `a`, `b`: gradients' (a scalar judged with the rows, listed first
    as model order lists it)."""
    parts = ([labelled("scalar", scalars)] if scalars else []) + ([labelled("layer", rows)] if rows else [])
    names = " and ".join(parts)
    return f"{names}: {role}s" if role else names


def scalar_axis(rd: RunData, tags: Sequence[str], first: int, last: int) -> Axis:
    """The step axis of run-level scalars that count steps alike (one of `RunData.scalar_axis_groups`),
    with a finding's `first` and `last` step on it: the unit their names agree on ("epoch" for Keras'
    `epoch_loss`), else "step"."""
    units = {tags_lib.step_unit(tag) for tag in tags}
    unit = units.pop() if len(units) == 1 else None
    return Axis(unit or "step", all(rd.scalar_other_axis(tag) for tag in tags), int(first), int(last))


def written_text(rd: RunData, first: int, last: int) -> str:
    """'written about steps 7 to 210 of the layers, from wall time': where values on another step axis
    were written on the rows' axis (`RunData.scalar_steps`)."""
    axis = "the layers" if rd.layers else "the run's other scalars"
    where = f"step {first}" if first == last else f"steps {first} to {last}"
    return f"written about {where} of {axis}, from wall time"


def when_text(f: Finding) -> str:
    """'at step 5', 'from step 5 to step 99', and when the onset fell between two kept steps, that."""
    when = f"at step {f.first_step}" if f.first_step == f.last_step else \
        f"from step {f.first_step} to step {f.last_step}"
    if f.evidence.get("onset_after") is not None:
        # Sampled logs: the onset is only known to lie between two kept steps.
        when += f" (it began after step {f.evidence['onset_after']}: the steps in between were not kept)"
    return when


def role_tables(rd: RunData, role: str,
                kinds: Optional[tuple] = None) -> Iterator[Tuple[Layer, metrics.MetricTable]]:
    """(layer, metric table) of every layer with logged steps in `role`, of the tensor `kinds` given."""
    return iter(rd.role_rows(role, kinds))


@dataclasses.dataclass(frozen=True)
class Test:
    """One trigger of a span rule: a metric past a limit at a step."""

    metric: str
    limit: float
    above: bool = True
    inclusive: bool = False  # >= (<=) instead of > (<)
    use_abs: bool = False
    # Also read bounds that cannot prove the test (`metrics.proves`): what the data allows, never a finding's proof.
    unproven: bool = False

    def values(self, table: metrics.MetricTable) -> np.ndarray:
        """The values the test judges: NaN where a bound cannot prove it (an upper bound for a test above a
        limit, a lower bound for one below), unless `unproven`."""
        values = table.get(self.metric)
        values = np.abs(values) if self.use_abs else values
        if self.unproven:
            return values
        return np.where(metrics.proves(table.quality_of(self.metric), self.above), values, np.nan)

    def fired(self, values: np.ndarray) -> np.ndarray:
        v = np.nan_to_num(values, nan=-np.inf if self.above else np.inf)
        if self.above:
            return v >= self.limit if self.inclusive else v > self.limit
        return v <= self.limit if self.inclusive else v < self.limit


def span_hits(rd: RunData, role: str, tests: Sequence[Test], min_length: int, kinds=None) -> List[Hit]:
    """Per layer: the spans of at least `min_length` logged steps where any of `tests` holds.

    The evidence is the test that held at the onset, at its worst step inside
    the spans, with its own limit. The hit's points are the steps inside the
    spans only, so the heatmap keeps healthy steps between two spans healthy.
    """
    layers = rd.role_rows(role, kinds)
    found = {}
    intervals: Dict[bytes, Optional[int]] = {}
    above = np.array([t.above for t in tests])
    # Layers of equal length are tested together, a row each: the spans, the onset's test and its
    # worst step are found for every row at once; only rows with a span make a Hit.
    for rows in series_lib.same_length([len(table.steps) for _, table in layers]):
        values = np.array([stack([layers[i][1] for i in rows], t.values) for t in tests])  # (tests, rows, n)
        fired = np.array([t.fired(v) for t, v in zip(tests, values)])
        inside = series_lib.sustained_rows(fired.any(axis=0), min_length)
        hit = np.flatnonzero(inside.any(axis=1))
        if not len(hit):
            continue
        inside, fired, values = inside[hit], fired[:, hit], values[:, hit]
        n = inside.shape[1]
        at = np.arange(len(hit))
        first = np.argmax(inside, axis=1)
        last = n - 1 - np.argmax(inside[:, ::-1], axis=1)
        k = np.argmax(fired[:, at, first], axis=0)  # the first test holding at the onset
        v = values[k, at]
        judged = inside & fired[k, at] & ~np.isnan(v)
        # The worst value the onset's test judged inside the spans: the largest for "above", else the smallest.
        worst = np.where(above[k], np.argmax(np.where(judged, v, -np.inf), axis=1),
                         np.argmin(np.where(judged, v, np.inf), axis=1))
        for i, (a, b, t, j) in enumerate(zip(first.tolist(), last.tolist(), k.tolist(), worst.tolist())):
            layer, table = layers[rows[hit[i]]]
            steps, test = table.steps, tests[t]
            after = None
            if a > 0:
                key = steps.tobytes()
                if key not in intervals:  # rows mostly share their steps: one interval for all of them
                    intervals[key] = series_lib.logging_interval(steps)
                after = _kept_before(steps, a, intervals[key])
            found[int(rows[hit[i]])] = Hit(
                layer.name, int(steps[a]), int(steps[b]), float(v[i, j]), int(steps[j]),
                {"metric": f"|{test.metric}|" if test.use_abs else test.metric}, steps[inside[i]],
                threshold=test.limit, after=after)
    return [found[i] for i in sorted(found)]


def _kept_before(steps: np.ndarray, i: int, interval: Optional[int]) -> Optional[int]:
    """`kept_before`, the steps' logging interval given."""
    gap = int(steps[i] - steps[i - 1])
    return int(steps[i - 1]) if interval is not None and gap > interval else None


def stack(items: Sequence, column: Callable[..., np.ndarray]) -> np.ndarray:
    """One row per item of `column(item)`: a 2-D float array, the columns being equally long."""
    return np.array([column(item) for item in items], dtype=np.float64)


def gt(values: np.ndarray, limit: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=-np.inf) > limit


def lt(values: np.ndarray, limit: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=np.inf) < limit


def lower(severity: str) -> str:
    """The severity one step down: what a rule that held too briefly to be sure is reported at."""
    return {CRITICAL: WARN, WARN: INFO}.get(severity, INFO)


def short_tail(steps: np.ndarray, points: Optional[np.ndarray], min_length: int) -> Optional[Tuple[int, int]]:
    """(k, n) when the steps a span rule fired on (`points` among `steps`) never make `min_length`
    consecutive logged steps and count only because the last k of all n reach the last step
    (`series.sustained`); None when the rule held as it is stated.
    """
    if points is None or len(steps) == 0:
        return None
    runs = series_lib.true_runs(np.isin(steps, points))
    if not runs or any(b - a + 1 >= min_length for a, b in runs):
        return None
    a, b = runs[-1]
    return b - a + 1, len(steps)


def tail_text(tails: Sequence[Tuple[int, int]], min_length: int) -> str:
    """What held instead of the rule, for a person: 'for only the last 2 of 3 logged steps ...'."""
    ks, ns = sorted({k for k, _ in tails}), sorted({n for _, n in tails})
    k = str(ks[0]) if len(ks) == 1 else f"{ks[0]} to {ks[-1]}"
    of = f" of {ns[0]}" if len(ns) == 1 else ""
    plural = "s" if ks[-1] > 1 or of else ""
    return (f"for only the last {k}{of} logged step{plural}, too few to be sure "
            f"(the rule asks for {min_length} in a row)")


def group_sustained(rd: RunData, kind: str, severity: str, role: Optional[str], hits: List[Hit],
                    threshold: float, what: str, advice: str, min_length: int,
                    stated: Optional[str] = None) -> List[Finding]:
    """`group` for a rule that must hold `min_length` consecutive logged steps.

    Layers where it did make one finding, its text `stated` (`what` with the
    rule's step count, where the text names it). Layers where it holds only
    for a shorter run reaching the last logged step (training may have stopped
    because of it) make another, a severity lower, whose text says what held.
    """
    layers = _by_name(rd)
    tails = {h.layer: short_tail(_steps_of(layers, role, h.layer), h.points, min_length) for h in hits}
    sure = [h for h in hits if tails[h.layer] is None]
    unsure = [h for h in hits if tails[h.layer] is not None]
    out = []
    f = group(rd, kind, severity, role, sure, threshold, stated or what, advice)
    if f is not None:
        out.append(f)
    f = group(rd, kind, lower(severity), role, unsure, threshold, what, advice)
    if f is not None:
        held = [tails[h.layer] for h in unsure]
        f.message += f", {tail_text(held, min_length)}"
        f.evidence["too_few_steps"] = {"steps_needed": min_length,
                                       "layers": {h.layer: {"last": tails[h.layer][0], "of": tails[h.layer][1]}
                                                  for h in unsure}}
        out.append(f)
    return out


def _by_name(rd: RunData) -> Dict[str, Layer]:
    """The run's layers by name, the first of a name as `RunData.layer` finds it: one lookup a hit,
    not a scan of every layer (a run of thousands of layers has thousands of hits)."""
    out: Dict[str, Layer] = {}
    for layer in rd.layers:
        out.setdefault(layer.name, layer)
    return out


def _steps_of(layers: Dict[str, Layer], role: Optional[str], name: str) -> np.ndarray:
    layer = layers.get(name)
    rdata = layer.roles.get(role) if layer is not None else None
    return rdata.table.steps if rdata is not None else np.zeros(0, dtype=np.int64)


def gather(rd: RunData, kind: str, severity: str, parts: Sequence[Tuple[Optional[str], List[Hit]]],
           threshold: float, what: str, advice: str) -> Optional[Finding]:
    """One finding for one problem found in several roles (and run-level scalars, role None).

    A layer found in several roles is listed once, its span the union of its
    roles' spans; its evidence says the span of each role. When the roles
    differ the finding's role is None and `Finding.role_points` keeps each
    row's own steps, so a weight cell is not covered for its gradient's problem.
    """
    parts = [(role, hits) for role, hits in parts if hits]
    if not parts:
        return None
    merged: Dict[str, Hit] = {}
    by_role: Dict[str, Dict[str, Hit]] = {}
    for role, hits in parts:
        for h in hits:
            by_role.setdefault(role, {})[h.layer] = h
            m = merged.get(h.layer)
            if m is None:
                merged[h.layer] = dataclasses.replace(h, detail=dict(h.detail))
                continue
            if h.first < m.first:
                m.value, m.step, m.after, m.threshold = h.value, h.step, h.after, h.threshold
            m.first, m.last = min(m.first, h.first), max(m.last, h.last)
            if h.points is not None:
                m.points = h.points if m.points is None else np.union1d(m.points, h.points)
    # Run-level scalars (role None) have no row: a role is needed only to tell rows apart.
    row_roles = sorted({role for role, _ in parts if role is not None})
    role = row_roles[0] if len(row_roles) == 1 else None
    f = group(rd, kind, severity, role, list(merged.values()), threshold, what, advice)
    if len(by_role) > 1:
        f.message = f"{_subject(f.layers, by_role)} {what} {when_text(f)}"
        for part_role, hits in by_role.items():
            for name, h in hits.items():
                f.evidence["layers"][name].setdefault("roles", {})[part_role or "scalar"] = {
                    "first_step": h.first, "last_step": h.last, **h.detail}
    if len(row_roles) > 1:
        layers = _by_name(rd)
        f.role_points = {r: {name: h.points if h.points is not None else _span_steps(layers, r, h)
                             for name, h in by_role[r].items()} for r in row_roles}
    return f


def _subject(layers: List[str], by_role: Dict[Optional[str], Dict[str, Hit]]) -> str:
    """'layers `fc1.weight`, `fc2.weight` (gradients and weights) and scalar `loss`': rows and scalars
    apart, whichever comes first in `layers` first."""
    scalars = set(by_role.get(None, {}))
    rows = [name for name in layers if name not in scalars]
    roles = [f"{r}s" for r in by_role if r is not None]
    parts = []
    if rows:
        parts.append(f"{labelled('layer', rows)} ({and_text(roles)})")
    if scalars:
        parts.append(labelled("scalar", [name for name in layers if name in scalars]))
    if rows and scalars and layers[0] in scalars:
        parts.reverse()
    return " and ".join(parts)


def and_text(words: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _span_steps(layers: Dict[str, Layer], role: str, h: Hit) -> np.ndarray:
    """A row's logged steps from `h.first` to `h.last`, for a hit that names no exact steps."""
    steps = _steps_of(layers, role, h.layer)
    return steps[(steps >= h.first) & (steps <= h.last)]
