"""Gradients that vanish for several consecutive logged steps (seeds 002, 003, 004).

A step whose gradient holds NaN or Inf is not judged (`metrics.judged`, as for every kind): whatever
is left of its values after an overflow (zeros) is the `nonfinite` finding's, not vanishing.
Gradients that shrank since the start no more than the logged loss did (`convergence.fitting`:
a loss fallen `fitting_loss_drop` times or more, the gradients at most `fitting_gradient_slack`
times further) are a note, a finding of their own: a loss near zero has gradients near zero.
The layers whose gradients fell much further keep the finding, which says so.
"""

from __future__ import annotations

from typing import List, Mapping

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import convergence, health
from ..finding import CRITICAL, INFO, WARN, Finding
from ..limits import Line
from ..spans import Test, group_sustained, role_tables, span_hits

KIND = "vanishing_gradients"
ORDER = 30
SEVERITY = WARN  # critical when every gradient vanishes
MAX_SEVERITY = CRITICAL
LABEL = "Vanishing gradients"
METRIC = "mean_abs"
NEEDS = (tags_lib.GRADIENT,)
ADVICE = ("Use ReLU-family activations with He init instead of sigmoid/tanh, add BatchNorm "
          "(LayerNorm for small batches) and residual connections, and check the learning rate.")
STEPS_NEEDED = "vanishing_steps"
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
    tests = (Test("small_fraction", fraction, inclusive=True), Test("mean_abs", small, above=False))
    hits = span_hits(rd, tags_lib.GRADIENT, tests, steps_needed)
    what = f"vanish (>= {fraction:.0%} of |g| below {small:g} or mean |g| below {small:g}"
    what, stated = f"{what})", f"{what} for {steps_needed}+ logged steps)"
    fits = convergence.fitting(rd, tags_lib.GRADIENT, hits, limits)
    fitted = [h for h in hits if fits.get(h.layer, {}).get("explained")]
    kept = [h for h in hits if not fits.get(h.layer, {}).get("explained")]
    out = group_sustained(rd, KIND, SEVERITY, tags_lib.GRADIENT, kept, small, what, ADVICE, steps_needed, stated)
    total = sum(1 for _ in role_tables(rd, tags_lib.GRADIENT))
    if len(kept) == total and total > 1:
        for f in out:  # every gradient vanishes: a level up, whether or not long enough to be sure
            f.severity = CRITICAL if f.severity == WARN else WARN
    # The loss's fall explains these: a note per loss tag, apart from the layers it does not explain.
    for tag in dict.fromkeys(fits[h.layer]["tag"] for h in fitted):
        out += group_sustained(rd, KIND, INFO, tags_lib.GRADIENT, [h for h in fitted if fits[h.layer]["tag"] == tag],
                               small, what, ADVICE, steps_needed, stated)
    for f in out:
        convergence.describe_fitting(f, fits, limits)
    return out

