"""What the findings say together: spikes an explosion already explains are
dropped, and co-occurring symptoms name their likely cause (seed 004).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..reading import tags as tags_lib
from ..reading.runs import RunData
from .detectors import dead_units
from .finding import INFO, Finding

_POINTWISE = ("exploding_gradients", "nonfinite")


def drop_explained_spikes(findings: List[Finding]) -> List[Finding]:
    """Drops a spike at steps where the same series already explodes or turns non-finite."""
    # Per layer, the exact steps of point-wise findings and the (first, last) spans of those
    # without points: a span is tested by comparison, never expanded into its steps, whose
    # number is bounded only by the step numbers a writer chose.
    points: Dict[str, set] = {}
    spans: Dict[str, List[Tuple[int, int]]] = {}
    for f in findings:
        if f.kind in _POINTWISE:
            for layer in f.layers:
                steps = f.points.get(layer)
                if steps is not None:
                    points.setdefault(layer, set()).update(steps.tolist())
                else:
                    spans.setdefault(layer, []).append(f.spans[layer])

    def explained(layer: str, step: int) -> bool:
        return step in points.get(layer, ()) or any(first <= step <= last for first, last in spans.get(layer, ()))

    kept = []
    for f in findings:
        if f.kind == "spike":
            # A series stays in a spike episode while one of its spike steps is not explained.
            layers = [layer for layer in f.layers
                      if not all(explained(layer, step) for step in _spike_steps(f, layer))]
            if not layers:
                continue
            if len(layers) < len(f.layers):
                f.layers = layers
                f.spans = {layer: f.spans[layer] for layer in layers}
                f.first_step = min(f.spans[layer][0] for layer in layers)
                f.last_step = max(f.spans[layer][1] for layer in layers)
                f.points = {layer: p for layer, p in f.points.items() if layer in layers}
                f.evidence["layers"] = {k: v for k, v in f.evidence["layers"].items() if k in layers}
        kept.append(f)
    return kept


def _spike_steps(f: Finding, layer: str) -> List[int]:
    steps = f.points.get(layer)
    return steps.tolist() if steps is not None else [f.first_step]


# Symptoms of the same overshooting steps that make gradients explode and values overflow (seed 004):
# updates too large, weights growing, skewed or split in two, ReLUs knocked silent.
_OVERSHOOT = ("weight_growth", "update_ratio", "skewed_distribution", "dead_units", "bimodal_weights")


def name_causes(findings: List[Finding], since: Optional[int] = None) -> None:
    """Names a likely cause where symptoms co-occur: a learning rate too high, or dying ReLUs.

    A learning rate too high is named on the explosion and the non-finite
    values, and on every other warning of `_OVERSHOOT` that begins by the
    first non-finite step: after it, NaN leaves nothing to judge. Without
    non-finite values, exploding gradients together with updates too fast
    that began by the explosion's first step point to it too: it is named on
    both, and on every other warning of `_OVERSHOOT` that begins while the
    explosion lasts. `since` is the step a logged learning rate rose to its
    blow-up level (`learning_rate_jumps`): a symptom that began before it
    began under the earlier rate, which the run tolerated, and is not blamed
    on the new one.
    Dying ReLUs are named on the dead units and on the vanishing gradients
    that begin with them or later: gradients that vanished first were not
    stopped by units that died after. Where those dead units are already a
    symptom of a learning rate too high, the vanishing gradients share that
    cause: the units died of it.
    """
    judged = [f for f in findings if f.severity != INFO]
    kinds = {f.kind for f in judged}
    fast = [f for f in judged if f.kind == "update_ratio" and f.evidence.get("direction") == "too_high"]
    exploded = min((f.first_step for f in judged if f.kind == "exploding_gradients"), default=None)
    if "exploding_gradients" in kinds and "nonfinite" in kinds:
        overflow = min(f.first_step for f in judged if f.kind == "nonfinite")
        for f in judged:
            if f.kind in _POINTWISE:
                other = "exploding gradients" if f.kind != "exploding_gradients" else "non-finite values"
            elif _overshoot(f) and f.first_step <= overflow and (since is None or f.first_step >= since):
                other = "exploding gradients and non-finite values"
            else:
                continue
            f.cause = "learning_rate_too_high"
            f.message += f"; together with {other} this points to a learning rate that is too high"
    elif exploded is not None and fast and min(f.first_step for f in fast) <= exploded:
        # Updates already too fast when the gradients blew up: the optimiser's steps overshoot, which is
        # what a learning rate too high does (Adam's steps are about the rate whatever the gradient).
        began = min(f.first_step for f in fast)
        lasted = max(f.last_step for f in judged if f.kind == "exploding_gradients")
        for f in judged:
            if f.kind == "exploding_gradients":
                other = f"updates too fast from step {began}"
            elif _overshoot(f) and f.first_step <= lasted and (since is None or f.first_step >= since):
                other = "exploding gradients" if f in fast else "exploding gradients and updates too fast"
            else:
                continue
            f.cause = "learning_rate_too_high"
            f.message += f"; together with {other} this points to a learning rate that is too high"
        _name_dying_relus(judged)
    else:
        _name_dying_relus(judged)


def _name_dying_relus(judged: List[Finding]) -> None:
    """Names dying ReLUs on the dead units and on the vanishing gradients that begin with them or later;
    where the first dead units are named a symptom of a learning rate too high, those gradients are too."""
    dead = sorted((f for f in judged if f.kind == "dead_units"), key=lambda f: f.first_step)
    if not dead:
        return
    died = dead[0].first_step
    stopped = [f for f in judged if f.kind == "vanishing_gradients" and f.first_step >= died]
    if not stopped:
        return
    if dead[0].cause == "learning_rate_too_high":
        for f in stopped:
            f.cause = "learning_rate_too_high"
            f.message += (f"; ReLU units dead from step {died} stop the gradient, and they died with the overshoot "
                          "of a learning rate that is too high: this points to that learning rate, not to dying "
                          "ReLUs alone")
        return
    for f in stopped + [f for f in dead if f.cause is None]:
        f.cause = "dead_relu"
        f.message += "; dead ReLU units stop the gradient: this points to dying ReLUs"


def link_growth_to_fast_updates(findings: List[Finding]) -> None:
    """Names updates too fast as the cause of weight growth that began while they lasted.

    A weight whose growth crossed its limit at a step inside its own too-fast-updates span grew because
    of those updates: the growth finding says so (its first layers' steps and the updates' span), and,
    warned of together with the updates, takes their cause: a learning rate too high for those layers.
    """
    fast: Dict[str, Tuple[int, int]] = {}
    for f in findings:
        if f.kind == "update_ratio" and f.evidence.get("direction") == "too_high":
            for layer, (first, last) in f.spans.items():
                a, b = fast.get(layer, (first, last))
                fast[layer] = (min(a, first), max(b, last))
    if not fast:
        return
    for f in findings:
        if f.kind != "weight_growth" or f.severity == INFO:
            continue
        during = [layer for layer in f.layers if layer in fast and fast[layer][0] <= f.spans[layer][0] <= fast[layer][1]]
        if not during:
            continue
        first, last = min(fast[layer][0] for layer in during), max(fast[layer][1] for layer in during)
        who = ("it" if len(f.layers) == 1 else "they" if len(during) == len(f.layers)
               else f"{len(during)} of them")
        when = f"step {first}" if first == last else f"steps {first}-{last}"
        f.message += f"; {who} crossed the limit while updates were too fast ({when}, see update ratio): those updates grew them"
        f.evidence["grown_by_fast_updates"] = during
        if f.cause is None and len(during) == len(f.layers):
            f.cause = "learning_rate_too_high"


# What an explosion leaves behind in the layers it blew up: units saturated or silenced pass no gradient.
_AFTER_EXPLOSION = ("vanishing_gradients", "depth_vanishing")


def link_vanishing_to_explosion(findings: List[Finding]) -> None:
    """Names the explosion as the cause of gradients that vanish after it in the layers that exploded.

    One sentence: a layer whose gradients vanish only after they exploded vanished because of the
    explosion (its blown-up weights saturate or silence the units that pass the gradient). The
    finding's message says so, its evidence lists those layers (`after_explosion`), and where that
    holds for every layer it takes the explosion's cause, or the explosion itself as its cause.
    """
    exploded: Dict[str, int] = {}
    named: Optional[Finding] = None  # the explosion that names a cause, if one does
    for f in findings:
        if f.kind == "exploding_gradients" and f.severity != INFO:
            for layer in f.layers:
                first = f.spans.get(layer, (f.first_step, f.last_step))[0]
                exploded[layer] = min(exploded.get(layer, first), first)
            named = named or (f if f.cause is not None else None)
    if not exploded:
        return
    for f in findings:
        if f.kind not in _AFTER_EXPLOSION or f.severity == INFO:
            continue
        # A depth finding names the layer whose gradients vanish, then the deep one it is held against.
        vanished = f.layers[:1] if f.kind == "depth_vanishing" else f.layers
        after = [layer for layer in vanished
                 if layer in exploded and exploded[layer] < f.spans.get(layer, (f.first_step, f.last_step))[0]]
        if not after:
            continue
        who = "it" if len(vanished) == 1 else "they" if len(after) == len(vanished) else f"{len(after)} of them"
        f.message += (f"; {who} exploded first (from step {min(exploded[layer] for layer in after)}, see exploding "
                      f"gradients): the blow-up left {'it' if who == 'it' else 'them'} without gradient")
        f.evidence["after_explosion"] = after
        if f.cause is None and len(after) == len(vanished):
            f.cause = named.cause if named is not None else "exploding_gradients"
            if named is not None and "learning_rate_jump" in named.evidence:  # what its advice names
                f.evidence["learning_rate_jump"] = named.evidence["learning_rate_jump"]


def _overshoot(f: Finding) -> bool:
    # Updates too small, or none at all, are the opposite of an overshoot.
    return f.kind in _OVERSHOOT and f.evidence.get("direction") in (None, "too_high")
# What a learning rate that jumps makes blow up: gradients, non-finite values, a one-off spike.
_BLOW_UPS = ("exploding_gradients", "nonfinite", "spike")


def learning_rate_jumps(rd: RunData, findings: List[Finding], factor: float, window: int) -> List[tuple]:
    """(finding, tag, rise) for each blow-up a learning-rate jump came just before.

    Where a logged learning rate is `factor` times or more its earlier value at
    some point from `window` logged steps of the blow-up's own series before its
    first step up to that step (the steps its running median judges it against:
    the rise came while the series was calm), that is its rise: (step, ratio,
    before, after). A blow-up at its series' first logged step has no calm
    before it and is not judged.
    """
    rates = [(tag, rd.scalar_steps(tag), np.asarray(rd.scalar_series[tag][1], dtype=np.float64))
             for tag in rd.scalar_series if rd.scalar_kinds.get(tag) == tags_lib.SCALAR_LR]
    if not rates:
        return []
    jumps = []
    for f in findings:
        if f.kind not in _BLOW_UPS:
            continue
        since = _logged_before(rd, f, window)
        if since is None:
            continue
        for tag, steps, values in rates:
            rise = _rise(steps, values, since, f.first_step, factor)
            if rise is not None:
                jumps.append((f, tag, rise))
                break
    return jumps


def first_jump(jumps: List[tuple]) -> Optional[int]:
    """The step of the earliest learning-rate rise among `learning_rate_jumps`, None without one."""
    return min((rise[0] for _, _, rise in jumps), default=None)


def name_learning_rate_jumps(findings: List[Finding], jumps: List[tuple], factor: float) -> None:
    """Names each learning-rate jump of `learning_rate_jumps` as the cause of its blow-up: "the learning
    rate rose 100x at step 40, 2 steps before it began". A blow-up that begins inside one the jump caused
    (the loss's last value before it turns NaN) is part of it and shares its cause; so do the symptoms
    `name_causes` laid on a learning rate too high, from the earliest jump on."""
    for f, tag, rise in jumps:
        _name_jump(f, tag, rise, factor)
    if not jumps:
        return
    for f in findings:
        if f.kind in _BLOW_UPS and f.cause is None:
            inside = next(((tag, rise) for g, tag, rise in jumps if g.first_step <= f.first_step <= g.last_step), None)
            if inside is not None:
                _name_jump(f, *inside, factor)
    _, tag, rise = min(jumps, key=lambda j: j[2][0])
    for f in findings:
        if f.cause == "learning_rate_too_high" and f.first_step >= rise[0]:
            _name_jump(f, tag, rise, factor)


def _name_jump(f: Finding, tag: str, rise: tuple, factor: float) -> None:
    step, ratio, old, new = rise
    gap = f.first_step - step
    where = "as it began" if gap == 0 else f"{gap} step{'s' if gap != 1 else ''} before it began"
    f.cause = "learning_rate_jump"
    f.message += (f"; the learning rate ({tag}) rose {ratio:.3g}x at step {step} (from {old:.3g} to {new:.3g}), "
                  f"{where}: that jump is the likely cause")
    f.evidence["learning_rate_jump"] = {"tag": tag, "step": step, "factor": ratio, "from": old, "to": new,
                                        "threshold": factor}


def _logged_before(rd: RunData, f: Finding, window: int) -> Optional[int]:
    """The step `window` logged steps before `f`'s first one in the series it names (rows in its role, or
    any role where it gathers several; scalars), the earliest of them, or their first step where fewer
    were logged; None when none was logged before it."""
    found = []
    for name in f.layers:
        if name in rd.scalar_series:
            series = [np.asarray(rd.scalar_steps(name))]
        else:
            layer = rd.layer(name)
            if layer is None:
                continue
            series = [r.table.steps for role, r in layer.roles.items() if f.role is None or role == f.role]
        for steps in series:
            i = int(np.searchsorted(steps, f.first_step))
            if i > 0:
                found.append(int(steps[max(0, i - window)]))
    return min(found, default=None)


def _rise(steps: np.ndarray, values: np.ndarray, since: int, until: int, factor: float) -> Optional[tuple]:
    """(step, ratio, before, after) of the first learning-rate point in (since, until] that is `factor` times
    or more its value at `since` (its latest point at or before it, which must be positive); None if none is."""
    i = int(np.searchsorted(steps, since, side="right")) - 1
    if i < 0 or not np.isfinite(values[i]) or values[i] <= 0:
        return None
    j = int(np.searchsorted(steps, until, side="right"))
    with np.errstate(invalid="ignore"):
        up = np.flatnonzero(values[i + 1:j] >= factor * values[i])
    if not len(up):
        return None
    k = i + 1 + int(up[0])
    return int(steps[k]), float(values[k] / values[i]), float(values[i]), float(values[k])


def fold_after_nonfinite(findings: List[Finding]) -> List[Finding]:
    """Folds the findings that begin once the run turned non-finite for good into the earliest nonfinite finding.

    The `nonfinite` detector names the collapse step (None when every
    non-finite row recovered, as from a transient overflow). Vanishing, dead
    units, skew, growth and the like that begin there or later are computed on
    what NaN left of the tensors: they become the collapse's consequences, in
    its evidence, not problems of their own. An explosion at the collapse step
    is its cause, and stays.
    """
    collapses = [f for f in findings if f.kind == "nonfinite" and f.evidence.get("collapse_step") is not None]
    if not collapses:
        return findings
    first = min(collapses, key=lambda f: f.first_step)
    at = first.evidence["collapse_step"]
    folded = [f for f in findings if f.kind != "nonfinite" and
              (f.first_step > at or (f.first_step == at and f.kind != "exploding_gradients"))]
    if not folded:
        return findings
    first.evidence.setdefault("consequences", []).extend(
        {"kind": f.kind, "severity": f.severity, "layers": f.layers, "first_step": f.first_step,
         "last_step": f.last_step, "message": f.message} for f in folded)
    first.message += (f"; {len(folded)} later finding{'s' if len(folded) != 1 else ''} "
                      f"({', '.join(sorted({f.kind for f in folded}))}) follow from these values from step {at} "
                      "on and are listed in its evidence")
    gone = {id(f) for f in folded}
    return [f for f in findings if id(f) not in gone]


def advise_causes(findings: List[Finding]) -> None:
    """Leads the advice of every finding that names a cause with what fixes that cause, and of every
    note the data explain as no fault (`Finding.no_fault`) with that there is nothing to fix.

    A detector's advice is about its kind in general ("a single batch produced
    an outlier" for a spike); once a cause is named, the fix for the cause comes
    first, whatever the kind, and the kind's own advice follows for the case the
    cause is not the whole story. Advice the lead already holds is not repeated.
    A note that is no fault keeps the kind's advice only for when it would become one:
    "Nothing to fix while the loss keeps falling; if it stops falling with gradients this
    small: <the kind's advice>".
    """
    for f in findings:
        if f.no_fault is not None:
            holds, unless = f.no_fault
            lead = f"Nothing to fix {holds};"
            if not f.advice.startswith(lead):
                f.advice = f"{lead} {unless}: {f.advice}"
            continue
        said = _cause_advice(f)
        if said is None:
            continue
        lead, otherwise = said
        own = _unsaid(f.advice, lead)
        f.advice = lead if not own else f"{lead} {otherwise}: {own}"


def _unsaid(advice: str, lead: str) -> str:
    """`advice` without what `lead` already says: all of it when the lead holds it whole, or its first
    clause (up to the first comma) when the lead opens with that clause ("Lower the learning rate")."""
    if advice in lead:
        return ""
    first, _, rest = advice.partition(", ")
    if rest and lead.lower().startswith(first.lower()):
        return rest[:1].upper() + rest[1:]
    return advice


def _cause_advice(f: Finding) -> Optional[Tuple[str, str]]:
    """(what fixes the cause `f` names, what introduces its kind's own advice after it); None without a cause."""
    if f.cause == "learning_rate_jump":
        jump = f.evidence.get("learning_rate_jump") or {}
        where = (f" at step {jump['step']} ({jump['tag']} from {jump['from']:.3g} to {jump['to']:.3g})"
                 if {"step", "tag", "from", "to"} <= jump.keys() else "")
        return (f"Undo the learning-rate jump{where}, or warm the rate up to its new value over a few hundred steps "
                "instead of in one; if it still blows up at that rate, lower it.", "Should it persist without the jump")
    if f.cause == "learning_rate_too_high":
        return ("Lower the learning rate (3-10x is a usual first try) or warm it up from a small value; clipping "
                "gradients by global norm bounds each overshoot.", "Should it persist at a lower rate")
    if f.cause == "exploding_gradients":
        return ("Fix the explosion first (see exploding gradients): clip gradients by global norm or lower the "
                "learning rate; gradients that vanish after it were silenced by its blow-up.",
                "Should they vanish without the explosion")
    if f.cause == "dead_relu":
        return (f"Dead ReLU units stop the gradient: {dead_units.ADVICE}", "Should it persist with the units alive")
    return None
