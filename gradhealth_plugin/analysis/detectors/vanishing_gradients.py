"""Gradients that vanish for several consecutive logged steps (seeds 002, 003, 004).

A step whose gradient holds NaN or Inf is not judged (`metrics.judged`, as for every kind): whatever
is left of its values after an overflow (zeros) is the `nonfinite` finding's, not vanishing.
Gradients that shrank since the start no more than the logged loss did (`convergence.fitting`:
a loss fallen `fitting_loss_drop` times or more, the gradients at most `fitting_gradient_slack`
times further) are a note, a finding of their own: a loss near zero has gradients near zero.
The layers whose gradients fell much further keep the finding, which says so.

A tensor whose gradient is tiny from its first logged step while a layer of another module before it
in the model gets gradients is not starved by depth: the backward signal reached past it, so the loss
barely depends on this tensor (an attention key bias, which softmax cancels; an unused or zeroed
parameter). That is a note of its own, with its own advice, not vanishing gradients.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import convergence, health, metrics
from ..finding import CRITICAL, INFO, WARN, Finding
from ..limits import Line
from ..spans import Hit, Test, group_sustained, layers_text, role_tables, span_hits

KIND = "vanishing_gradients"
ORDER = 30
SEVERITY = WARN  # critical when every gradient vanishes
MAX_SEVERITY = CRITICAL
LABEL = "Vanishing gradients"
METRIC = "mean_abs"
NEEDS = (tags_lib.GRADIENT,)
ADVICE = ("Use ReLU-family activations with He init instead of sigmoid/tanh, add BatchNorm "
          "(LayerNorm for small batches) and residual connections, and check the learning rate.")
BYPASSED_ADVICE = ("Layers before it get gradients, so the signal is not lost on its way to the input. Expected "
                   "for an attention key bias (softmax cancels it); otherwise check that the tensor takes part in "
                   "the forward pass, is not multiplied by zero, and that the branch it sits on does not saturate.")
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
    bypassed = _bypassed(rd, hits, tests, steps_needed)
    fits = convergence.fitting(rd, tags_lib.GRADIENT, [h for h in hits if h.layer not in bypassed], limits)
    fitted = [h for h in hits if fits.get(h.layer, {}).get("explained")]
    kept = [h for h in hits if h.layer not in bypassed and not fits.get(h.layer, {}).get("explained")]
    out = group_sustained(rd, KIND, SEVERITY, tags_lib.GRADIENT, kept, small, what, ADVICE, steps_needed, stated)
    total = sum(1 for _ in role_tables(rd, tags_lib.GRADIENT))
    if len(kept) == total and total > 1:
        for f in out:  # every gradient vanishes: a level up, whether or not long enough to be sure
            f.severity = CRITICAL if f.severity == WARN else WARN
    passed = [h for h in hits if h.layer in bypassed]
    for f in group_sustained(rd, KIND, INFO, tags_lib.GRADIENT, passed, small, what, BYPASSED_ADVICE,
                             steps_needed, stated):
        past = {name: bypassed[name] for name in f.layers}
        f.evidence["signal_reaches"] = past
        many = len(past) > 1
        f.message += (f"; tiny from {'their' if many else 'its'} first logged step while layers before "
                      f"{'them' if many else 'it'} get gradients ({layers_text(sorted(set(past.values())))}), "
                      f"so the backward signal reaches past {'them' if many else 'it'} and the loss barely "
                      f"depends on {'these tensors' if many else 'this tensor'}")
        out.append(f)
    # The loss's fall explains these: a note per loss tag, apart from the layers it does not explain.
    for tag in dict.fromkeys(fits[h.layer]["tag"] for h in fitted):
        out += group_sustained(rd, KIND, INFO, tags_lib.GRADIENT, [h for h in fitted if fits[h.layer]["tag"] == tag],
                               small, what, ADVICE, steps_needed, stated)
    for f in out:
        convergence.describe_fitting(f, fits, limits)
    return out



def _bypassed(rd: RunData, hits: Sequence[Hit], tests: Sequence[Test], steps_needed: int) -> Dict[str, str]:
    """The hits tiny from their layer's first logged step that a layer of another module before them in
    model order outlives: its gradients pass no test, provably, at every step of theirs it logged (and
    at least `steps_needed` of them, or all). Each such hit's layer -> the nearest such earlier layer."""
    rows = rd.role_rows(tags_lib.GRADIENT)
    position: Dict[str, int] = {}
    for i, (layer, _) in enumerate(rows):
        position.setdefault(layer.name, i)
    tiny = {h.layer for h in hits}
    healthy = [i for i, (layer, _) in enumerate(rows) if layer.name not in tiny]
    out: Dict[str, str] = {}
    for h in hits:
        i = position[h.layer]
        layer, table = rows[i]
        if h.points is None or not len(table.steps) or h.first != int(table.steps[0]):
            continue
        for j in reversed([j for j in healthy if j < i]):
            other, other_table = rows[j]
            if other.group != layer.group and _passes_no_test(other_table, h.points, tests, steps_needed):
                out[h.layer] = other.name
                break
    return out


def _passes_no_test(table: metrics.MetricTable, steps: np.ndarray, tests: Sequence[Test], needed: int) -> bool:
    """Whether `table` logged at least `needed` of `steps` (or all of them) and, at each it logged, every
    test's metric is known on its healthy side."""
    common = np.intersect1d(steps, table.steps)
    if len(common) < min(needed, len(steps)):
        return False
    at = np.searchsorted(table.steps, common)
    for t in tests:
        values = table.get(t.metric)[at]
        values = np.abs(values) if t.use_abs else values
        known = metrics.proves(table.quality_of(t.metric)[at], not t.above) & np.isfinite(values)
        if not (known & ~t.fired(values)).all():
            return False
    return True
