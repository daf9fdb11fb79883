"""Gradients that vanish for several consecutive logged steps (seeds 002, 003, 004).

A step whose gradient holds NaN or Inf is not judged (`metrics.judged`, as for every kind): whatever
is left of its values after an overflow (zeros) is the `nonfinite` finding's, not vanishing.
Gradients that shrank since the start no more than the logged loss did (`convergence.fitting`:
a loss fallen `fitting_loss_drop` times or more, the gradients at most `fitting_gradient_slack`
times further) are a note, a finding of their own: a loss near zero has gradients near zero.
The layers whose gradients fell much further keep the finding, which says so.

A tensor whose gradient is tiny from its first logged step while the nearest layer of another module
before it in the model gets gradients is not starved by depth: the backward signal reached past it,
so the loss barely depends on this tensor (an attention key bias, which softmax cancels; an unused
or zeroed parameter). So is a bias tiny from its first logged step beside its own kernel's gradients
a thousand times larger: the signal reaches the module and sums to zero over the bias, as a
normalisation or a softmax right after the layer makes it. Each is a note of its own, with its own
advice, not vanishing gradients.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

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
CANCELLED_ADVICE = ("Its own kernel gets gradients, so the signal reaches the module and sums to zero over the "
                    "bias: what comes right after the layer removes any shift common to its outputs (a "
                    "normalisation such as BatchNorm; a softmax over attention keys), and the bias learns nothing. "
                    "Drop it (use_bias=False, bias=False); otherwise check that it takes part in the forward pass.")
# A bias's gradient is the signal at its module's output summed; its kernel's, the same signal weighted by
# the module's inputs. Inputs of ordinary scale leave the two within a few decades of each other: a kernel's
# mean |g| this many times its bias's says the signal itself is alive and sums to zero over the bias.
CANCELLED_RATIO = 1e3
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
    for how, advice in (("before", BYPASSED_ADVICE), ("own_kernel", CANCELLED_ADVICE)):
        passed = [h for h in hits if bypassed.get(h.layer, ("", ""))[1] == how]
        for f in group_sustained(rd, KIND, INFO, tags_lib.GRADIENT, passed, small, what, advice,
                                 steps_needed, stated):
            past = {name: bypassed[name][0] for name in f.layers}
            f.evidence["signal_reaches"] = past
            f.message += _bypassed_text(how, past)
            out.append(f)
    # The loss's fall explains these: a note per loss tag, apart from the layers it does not explain.
    for tag in dict.fromkeys(fits[h.layer]["tag"] for h in fitted):
        out += group_sustained(rd, KIND, INFO, tags_lib.GRADIENT, [h for h in fitted if fits[h.layer]["tag"] == tag],
                               small, what, ADVICE, steps_needed, stated)
    for f in out:
        convergence.describe_fitting(f, fits, limits)
    return out


def _bypassed(rd: RunData, hits: Sequence[Hit], tests: Sequence[Test], steps_needed: int) -> Dict[str, Tuple[str, str]]:
    """The hits tiny from their layer's first logged step whose signal provably reached past them, each hit's
    layer -> (the layer that proves it, how): "own_kernel", for a bias, its module's kernel passing no test
    at every step of the hit's it logged (at least `steps_needed` of them, or all) with a mean |g|
    `CANCELLED_RATIO` times the bias's or more at each; else "before", the nearest layer of another module
    before it in model order, if it is no hit and passes no test at those steps.

    One candidate of each sort a hit: the cost stays a few table lookups a hit on runs of many layers."""
    rows = rd.role_rows(tags_lib.GRADIENT)
    position: Dict[str, int] = {}
    for i, (layer, _) in enumerate(rows):
        position.setdefault(layer.name, i)
    tiny = {h.layer for h in hits}
    kernels: Dict[str, int] = {}
    for j, (layer, _) in enumerate(rows):
        if layer.kind == tags_lib.KIND_KERNEL and layer.name not in tiny:
            kernels.setdefault(layer.group, j)
    out: Dict[str, Tuple[str, str]] = {}
    for h in hits:
        i = position[h.layer]
        layer, table = rows[i]
        if h.points is None or not len(table.steps) or h.first != int(table.steps[0]):
            continue
        # A bias's own kernel tells the more about it: the signal reached this very module.
        j = kernels.get(layer.group) if layer.kind == tags_lib.KIND_BIAS else None
        if j is not None:
            kernel, kernel_table = rows[j]
            if (_passes_no_test(kernel_table, h.points, tests, steps_needed)
                    and _dwarfs(kernel_table, table, h.points, CANCELLED_RATIO)):
                out[h.layer] = (kernel.name, "own_kernel")
                continue
        j = i - 1
        while j >= 0 and rows[j][0].group == layer.group:
            j -= 1
        if j >= 0 and rows[j][0].name not in tiny and _passes_no_test(rows[j][1], h.points, tests, steps_needed):
            out[h.layer] = (rows[j][0].name, "before")
    return out


def _dwarfs(big: metrics.MetricTable, small: metrics.MetricTable, steps: np.ndarray, ratio: float) -> bool:
    """Whether `big`'s mean |g| is known at least `ratio` times `small`'s at each of `steps` both logged: a lower
    bound or better for `big`, an upper bound or better for `small`."""
    a, b = _where_logged(steps, big.steps, small.steps)
    if not len(a):
        return False
    hi, lo = big.get("mean_abs")[a], small.get("mean_abs")[b]
    known = (metrics.proves(big.quality_of("mean_abs")[a], True)
             & metrics.proves(small.quality_of("mean_abs")[b], False) & np.isfinite(hi) & np.isfinite(lo))
    with np.errstate(invalid="ignore"):
        return bool((known & (hi >= ratio * lo)).all())


def _where_logged(steps: np.ndarray, *logged: np.ndarray) -> List[np.ndarray]:
    """For each of `logged` (sorted step arrays), the indices of the `steps` that every one of them holds."""
    found = [np.minimum(np.searchsorted(table_steps, steps), max(len(table_steps) - 1, 0)) for table_steps in logged]
    held = np.ones(len(steps), dtype=bool)
    for table_steps, at in zip(logged, found):
        held &= (table_steps[at] == steps) if len(table_steps) else False
    return [at[held] for at in found]


def _bypassed_text(how: str, past: Mapping[str, str]) -> str:
    """What the message adds for layers the signal reached past, `how` as `_bypassed` tells it."""
    many = len(past) > 1
    them, proof = ("them" if many else "it"), layers_text(sorted(set(past.values())))
    tensors = "these tensors" if many else "this tensor"
    if how == "before":
        return (f"; tiny from {'their' if many else 'its'} first logged step while layers before {them} get gradients "
                f"({proof}), so the backward signal reaches past {them} and the loss barely depends on {tensors}")
    return (f"; tiny from {'their' if many else 'its'} first logged step while {'their' if many else 'its'} own "
            f"kernel{'s get' if many else ' gets'} gradients over {CANCELLED_RATIO:,.0f}x larger ({proof}): the "
            f"signal reaches {'their modules' if many else 'the module'} and sums to zero over {tensors}, as a "
            f"normalisation or a softmax right after {'the layers' if many else 'the layer'} makes it")


def _passes_no_test(table: metrics.MetricTable, steps: np.ndarray, tests: Sequence[Test], needed: int) -> bool:
    """Whether `table` logged at least `needed` of `steps` (or all of them) and, at each it logged, every
    test's metric is known on its healthy side."""
    (at,) = _where_logged(steps, table.steps)
    if len(at) < min(needed, len(steps)):
        return False
    for t in tests:
        values = table.get(t.metric)[at]
        values = np.abs(values) if t.use_abs else values
        known = metrics.proves(table.quality_of(t.metric)[at], not t.above) & np.isfinite(values)
        if not (known & ~t.fired(values)).all():
            return False
    return True
