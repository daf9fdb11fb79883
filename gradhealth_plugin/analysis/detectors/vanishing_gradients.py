"""Gradients that vanish for several consecutive logged steps (seeds 002, 003, 004).

A step whose gradient holds NaN or Inf is not judged: whatever is left of its
values after an overflow (NaN, zeros) is the `nonfinite` finding's, not vanishing.
Gradients that vanish where the logged loss has converged (fallen by
`converged_loss_drop` or more from its first value, to `converged_loss` or less)
are a note: a loss near zero has gradients near zero.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping, Optional

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import CRITICAL, INFO, WARN, Finding
from ..limits import Line
from ..metrics import MetricTable
from ..spans import Test, group_sustained, gt, role_tables, span_hits

KIND = "vanishing_gradients"
ORDER = 30
SEVERITY = WARN  # critical when every gradient vanishes
MAX_SEVERITY = CRITICAL
LABEL = "Vanishing gradients"
METRIC = "mean_abs"
NEEDS = (tags_lib.GRADIENT,)
ADVICE = ("Use ReLU-family activations with He init instead of sigmoid/tanh, add BatchNorm "
          "(LayerNorm for small batches) and residual connections, and check the learning rate.")
CELL_RULES = (
    health.CellRule(KIND, (tags_lib.GRADIENT,), "small_fraction", True, "vanishing_fraction", health.WARN, False),
    health.CellRule(KIND, (tags_lib.GRADIENT,), "mean_abs", False, "vanishing_abs", health.WARN, True),
)
THRESHOLDS = (
    Line(tags_lib.GRADIENT, "mean_abs", "vanishing_abs", "below"),
    Line(tags_lib.GRADIENT, "small_fraction", "vanishing_fraction", "above"),
)


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    small, fraction = limits["vanishing_abs"], limits["vanishing_fraction"]
    steps_needed = int(limits["vanishing_steps"])
    tests = (_Finite("small_fraction", fraction, inclusive=True), _Finite("mean_abs", small, above=False))
    hits = span_hits(rd, tags_lib.GRADIENT, tests, steps_needed)
    what = f"(>= {fraction:.0%} of |g| below {small:g} or mean |g| below {small:g}"
    out = group_sustained(rd, KIND, SEVERITY, tags_lib.GRADIENT, hits, small, f"vanish {what})", ADVICE,
                          steps_needed, stated=f"vanish {what} for {steps_needed}+ logged steps)")
    total = sum(1 for _ in role_tables(rd, tags_lib.GRADIENT))
    if len(hits) == total and total > 1:
        for f in out:  # every gradient vanishes: a level up, whether or not long enough to be sure
            f.severity = CRITICAL if f.severity == WARN else WARN
    for f in out:
        converged = _converged(rd, f.first_step, limits["converged_loss_drop"], limits["converged_loss"])
        if converged is not None:
            f.severity = INFO
            f.evidence["converged_loss"] = converged
            f.message += (f"; the loss has converged ({converged['tag']}: to {converged['value']:.3g} at step "
                          f"{converged['step']}, from {converged['first_value']:.3g} at step "
                          f"{converged['first_step']}): gradients this small are what a loss this close to zero "
                          "gives, not a fault")
    return out


def _converged(rd: RunData, onset: int, drop: float, tiny: float) -> Optional[dict]:
    """The first loss scalar whose latest finite value at or before `onset` is `tiny` or less and `drop`
    times or more below its first finite value (positive), with both values; None if no loss shows that."""
    for tag, (_, values) in rd.scalar_series.items():
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS:
            continue
        steps, values = rd.scalar_steps(tag), np.asarray(values, dtype=np.float64)
        finite = np.flatnonzero(np.isfinite(values) & (steps <= onset))
        if len(finite) < 2:
            continue
        first, at = values[finite[0]], values[finite[-1]]
        if first > 0 and abs(at) <= tiny and abs(at) * drop <= first:
            return {"tag": tag, "value": float(at), "step": int(steps[finite[-1]]), "first_value": float(first),
                    "first_step": int(steps[finite[0]]), "drop": drop, "threshold": tiny}
    return None


@dataclasses.dataclass(frozen=True)
class _Finite(Test):
    """A test that never holds at a step whose gradient has non-finite values."""

    def values(self, table: MetricTable) -> np.ndarray:
        return np.where(gt(table.get("nonfinite"), 0), np.nan, super().values(table))
