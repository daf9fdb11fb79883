"""Gradients that vanish for several consecutive logged steps (seeds 002, 003, 004).

A step whose gradient holds NaN or Inf is not judged: whatever is left of its
values after an overflow (NaN, zeros) is the `nonfinite` finding's, not vanishing.
Gradients that vanish where the logged loss has converged (`convergence`: fallen
by `converged_loss_drop` or more from its first value, to `converged_loss` or
less) are a note: a loss near zero has gradients near zero.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import convergence, health
from ..finding import CRITICAL, WARN, Finding
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
        convergence.as_note_if_converged(rd, f, limits, "gradients this small")
    return out


@dataclasses.dataclass(frozen=True)
class _Finite(Test):
    """A test that never holds at a step whose gradient has non-finite values."""

    def values(self, table: MetricTable) -> np.ndarray:
        return np.where(gt(table.get("nonfinite"), 0), np.nan, super().values(table))
