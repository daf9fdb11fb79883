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
from .finding import Finding

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
    if len(layers) <= 3:
        return ", ".join(layers)
    return f"{', '.join(layers[:3])} and {len(layers) - 3} more"


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
    subject = f"{layers_text(layers)} {role + 's' if role else ''}".strip()
    when = f"at step {first}" if first == last else f"from step {first} to step {last}"
    if onset.after is not None and onset.first == first:
        # Sampled logs: the onset is only known to lie between two kept steps.
        when += f" (it began after step {onset.after}: the steps in between were not kept)"
        evidence["onset_after"] = onset.after
    return Finding(run=rd.run, kind=kind, severity=severity, layers=layers, first_step=first, last_step=last,
                   evidence=evidence, message=f"{subject} {what} {when}", advice=advice, role=role,
                   spans={h.layer: (h.first, h.last) for h in hits},
                   points={h.layer: h.points for h in hits if h.points is not None})


def role_tables(rd: RunData, role: str,
                kinds: Optional[tuple] = None) -> Iterator[Tuple[Layer, metrics.MetricTable]]:
    """(layer, metric table) of every layer with logged steps in `role`, of the tensor `kinds` given."""
    for layer in rd.layers:
        rdata = layer.roles.get(role)
        if rdata is None or len(rdata.table.steps) == 0:
            continue
        if kinds is not None and layer.kind not in kinds:
            continue
        yield layer, rdata.table


@dataclasses.dataclass(frozen=True)
class Test:
    """One trigger of a span rule: a metric past a limit at a step."""

    metric: str
    limit: float
    above: bool = True
    inclusive: bool = False  # >= (<=) instead of > (<)
    use_abs: bool = False

    def values(self, table: metrics.MetricTable) -> np.ndarray:
        values = table.get(self.metric)
        return np.abs(values) if self.use_abs else values

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
    layers = list(role_tables(rd, role, kinds))
    found = {}
    # Layers of equal length are tested together, a row each; only rows where a test fired go on.
    for rows in series_lib.same_length([len(table.steps) for _, table in layers]):
        values = [stack([layers[i][1] for i in rows], t.values) for t in tests]
        fired = np.array([t.fired(v) for t, v in zip(tests, values)])
        for r in np.nonzero(fired.any(axis=(0, 2)))[0].tolist():
            layer, table = layers[rows[r]]
            spans = series_lib.sustained(fired[:, r].any(axis=0), min_length)
            if spans:
                found[int(rows[r])] = _span_hit(layer.name, table.steps, spans, tests, [v[r] for v in values],
                                                fired[:, r])
    return [found[i] for i in sorted(found)]


def stack(items: Sequence, column: Callable[..., np.ndarray]) -> np.ndarray:
    """One row per item of `column(item)`: a 2-D float array, the columns being equally long."""
    return np.array([column(item) for item in items], dtype=np.float64)


def _span_hit(name: str, steps: np.ndarray, spans: List[Tuple[int, int]], tests: Sequence[Test],
              values: List[np.ndarray], fired: np.ndarray) -> Hit:
    bounds = np.array(spans)
    edges = np.zeros(len(steps) + 1, dtype=np.int64)
    np.add.at(edges, bounds[:, 0], 1)
    np.add.at(edges, bounds[:, 1] + 1, -1)
    inside = np.cumsum(edges[:-1]) > 0
    a, b = spans[0][0], spans[-1][1]
    k = int(np.argmax(fired[:, a]))
    test, v = tests[k], values[k]
    worst = np.nanargmax if test.above else np.nanargmin
    j = int(worst(np.where(inside & fired[k], v, np.nan)))
    return Hit(name, int(steps[a]), int(steps[b]), float(v[j]), int(steps[j]),
               {"metric": f"|{test.metric}|" if test.use_abs else test.metric}, steps[inside],
               threshold=test.limit, after=kept_before(steps, a))


def gt(values: np.ndarray, limit: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=-np.inf) > limit


def lt(values: np.ndarray, limit: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=np.inf) < limit
