"""A loss that does not improve over the run (seed 003's CI alerts; SageMaker
Debugger's LossNotDecreasing): the median of its last tenth of logged values
not clearly below the lower of its first value and its first tenth's median, even allowing for the
loss's noise between logged values (a bouncing per-batch loss early in training proves no stall). The
first value guards against a loss a learning rate too high blew up right away: its first tenth's median
is the blow-up's, and a loss that ends far above where it began would seem to improve on it. A first
value lower only by the loss's noise is no start of its own. Against a first value that is one, the loss
gets worse also where its last tenth lies above it in so many values that a sign test puts the chance of
that, for a loss no higher than its start, under 1%: a blown-up loss bounces by about its own level. A
tenth of fewer than three values (under 30 logged) proves nothing either way, since one stray value
moves its median: the loss's progress is not judged, as in the first steps of a healthy run whose loss
has barely begun to fall. Every loss tag must fail: a
training loss that improves while a validation loss does not is overfitting,
not a stalled run. A loss is judged for progress up to its first NaN or Inf (what follows is the
`nonfinite` finding's): a loss stuck for most of a run before it blew up made no progress either.

A loss that fell and then settled at chance has stalled there, and is told as a stall at chance level,
a warning as any stall: every loss series, up to its first NaN or Inf, stays within 1% of one ln k
(k = 2..10) over at least its last third, a third of at least 8 values that does not fall at more of its
steps than the sign test allows by chance (a healthy classifier starts at ln k). Loss series on different step axes (Keras' per-epoch
`epoch_loss` beside per-iteration series) get one finding each, told at their own steps and naming
their axis ("per epoch", "per iteration": `Finding.axis`).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import math

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from ..finding import WARN, Axis, Finding
from ..spans import layers_text, scalar_axis, written_text

KIND = "no_progress"
ORDER = 130
SEVERITY = WARN
LABEL = "No progress"
# A run-level finding: no layer's chart shows the loss. The norm is the nearest look at whether anything moves.
METRIC = "l2"
NEEDS = (tags_lib.SCALAR_LOSS,)
ADVICE = ("Training makes no progress. Check that gradients flow (log them: a deep sigmoid or tanh net can stall "
          "with vanishing gradients while its weights look fine), that the learning rate is neither tiny nor so "
          "large that the loss bounces, and that the labels match the inputs.")
# A loss that settled at ln k: a classifier guessing, if the model has k classes.
CHANCE_ADVICE = ("A classifier whose loss sits at ln k predicts each class's frequency and has learnt nothing from "
                 "its inputs. Check that the labels match the inputs, that gradients reach the early layers (a deep "
                 "sigmoid or tanh net can stall with vanishing gradients), and that the learning rate is not tiny. "
                 "Ignore this if the model does not have k classes.")
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    points, needed = int(limits["no_progress_points"]), limits["no_progress_improvement"]
    judged = {}
    for tag, (own, values) in rd.scalar_series.items():
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS:
            continue
        # The finding's steps are the layers': a loss logged per epoch is placed where it was written.
        verdict = _judge(rd.scalar_steps(tag), np.asarray(values, dtype=np.float64), points)
        if verdict is not None:
            verdict["sampled"] = _sampled(rd, tag)
        if verdict is not None and verdict["worse"] and verdict["nonfinite_step"] is not None:
            # Rising into its NaN is the blow-up the nonfinite finding tells, not a stall.
            verdict = None
        if verdict is not None and rd.scalar_other_axis(tag):
            # Its message counts its own steps, as its chart does.
            mine = _judge(np.asarray(own), np.asarray(values, dtype=np.float64), points)
            verdict.update(axis="other", own_first_step=mine["first_step"], own_last_step=mine["last_step"],
                           own_lowest_step=mine["lowest_step"], own_nonfinite_step=mine["nonfinite_step"])
        if verdict is not None:
            judged[tag] = verdict
    # Stalled only when even the noise cannot hide an improvement: a per-batch loss early in
    # training bounces by more than the improvement asked for, and proves nothing yet; a loss proven
    # worse than its start (`_judge`) did not improve, whatever its noise.
    if not judged or any(v["improvement"] + v["noise_margin"] >= needed and not v["worse"] for v in judged.values()):
        return _chance(rd, points)
    # One finding per step axis: a loss counted in epochs never shares a "step N" with one counted in
    # iterations.
    groups = rd.scalar_axis_groups(list(judged))
    return [_stalled(rd, {t: judged[t] for t in tags}, needed, len(groups) > 1) for tags in groups]


def _stalled(rd: RunData, judged: Dict[str, dict], needed: float, several: bool) -> Finding:
    """The no-progress finding over loss series of one step axis (`several`: of more than one the run's
    losses count steps on)."""
    tags = sorted(judged, key=lambda t: (-judged[t]["points"], t))
    onset = judged[tags[0]]
    worse = onset["worse"]
    first, last = min(v["first_step"] for v in judged.values()), max(v["last_step"] for v in judged.values())
    own = {k: onset.get(f"own_{k}", onset[k]) for k in ("first_step", "last_step", "lowest_step", "nonfinite_step")}
    axis = _axis(rd, judged, several)
    at = axis or Axis("step", False, first, last)
    return Finding(
        run=rd.run, kind=KIND, severity=SEVERITY, layers=tags, first_step=first, last_step=last,
        evidence={"threshold": needed, "value": onset["improvement"], "step": onset["last_step"],
                  "layers": judged},
        message=(f"the loss {'gets worse' if worse else 'does not improve'} ({_subject(tags, axis)}): "
                 f"{_windows({**onset, **own}, at.unit)} "
                 f"({-onset['improvement']:+.1%}; an improvement of at least {needed:.0%} expected) "
                 + _steps_text(rd, at, first, last)
                 # Where it turned: a loss that fell and rose again was fine up to there.
                 + (f"; it was lowest, {onset['lowest']:.4g}, {at.span(own['lowest_step'], own['lowest_step'])}"
                    if worse else "")
                 + ("" if worse else _uniform_guess(onset["last_median"]))),
        advice=ADVICE, role=None, spans={t: (judged[t]["first_step"], judged[t]["last_step"]) for t in tags},
        axis=axis)


def _axis(rd: RunData, judged: Mapping[str, dict], several: bool) -> Optional[Axis]:
    """The step axis of losses that count steps alike, on their own steps; None where it is the layers'
    plain steps and the run's losses count no other (nothing to tell apart)."""
    axis = scalar_axis(rd, list(judged), min(v.get("own_first_step", v["first_step"]) for v in judged.values()),
                       max(v.get("own_last_step", v["last_step"]) for v in judged.values()))
    return axis if several or axis.other or axis.unit != "step" else None


def _subject(tags: List[str], axis: Optional[Axis]) -> str:
    """'`epoch_loss`, per epoch': the series, and the axis they count steps on where it needs saying."""
    return layers_text(tags) + (f", {axis.per()}" if axis is not None else "")


def _steps_text(rd: RunData, axis: Axis, first: int, last: int) -> str:
    """'from step 5 to step 99', 'from epoch 0 to epoch 29'; for losses on another step axis than the
    layers', where they were written on the rows' axis too."""
    span = axis.span(axis.first_step, axis.last_step)
    return f"{span} ({written_text(rd, first, last)})" if axis.other else span


def _chance(rd: RunData, points: int) -> List[Finding]:
    """A loss that settled at chance: every loss series whose values up to its first NaN or Inf stay
    within 1% of one ln k (k = 2..10) over at least their last third, one finding per step axis; none
    where any loss series with enough values to judge does not (a loss still falling has not settled).
    Settled there, it has stalled: a warning, as a stall is."""
    settled = {}
    for tag, (own, values) in rd.scalar_series.items():
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS:
            continue
        values = np.asarray(values, dtype=np.float64)
        verdict = _settled(rd.scalar_steps(tag), values, points)
        if verdict is None and _judgeable(values, points):
            return []
        if verdict is not None and rd.scalar_other_axis(tag):
            mine = _settled(np.asarray(own), values, points)
            verdict.update(axis="other", own_first_step=mine["first_step"], own_last_step=mine["last_step"])
        if verdict is not None:
            settled[tag] = verdict
    # One model has one number of classes.
    if not settled or len({v["classes"] for v in settled.values()}) > 1:
        return []
    out = []
    groups = rd.scalar_axis_groups(list(settled))
    for tags in groups:
        judged = {t: settled[t] for t in sorted(tags, key=lambda t: (-settled[t]["points"], t))}
        onset = next(iter(judged.values()))
        k = onset["classes"]
        first = min(v["first_step"] for v in judged.values())
        last = max(v["last_step"] for v in judged.values())
        axis = _axis(rd, judged, len(groups) > 1)
        out.append(Finding(
            run=rd.run, kind=KIND, severity=SEVERITY, layers=list(judged), first_step=first, last_step=last,
            evidence={"threshold": _GUESS_TOLERANCE, "value": onset["median"], "step": onset["first_step"],
                      "classes": k, "layers": judged},
            message=(f"the loss stalled at chance level ({_subject(list(judged), axis)}): its last "
                     f"{onset['settled']:,} of {onset['points']:,} logged values stay within "
                     f"{_GUESS_TOLERANCE:.0%} of ln {k} = {math.log(k):.4g} (median {onset['median']:.4g}), "
                     f"{_steps_text(rd, axis or Axis('step', False, first, last), first, last)}, and do not "
                     f"improve there; its first value was {onset['start']:.4g}; ln {k} is the cross-entropy of a "
                     f"uniform guess among {k} classes: if the model has {k}, it predicts no better than chance"),
            advice=CHANCE_ADVICE, role=None,
            spans={t: (v["first_step"], v["last_step"]) for t, v in judged.items()}, axis=axis))
    return out


def _judgeable(values: np.ndarray, points: int) -> bool:
    """Whether a loss has enough values before its first NaN or Inf to be judged for chance level."""
    bad = np.flatnonzero(~np.isfinite(values))
    return (bad[0] if len(bad) else len(values)) >= max(points, 3)


def _settled(steps: np.ndarray, values: np.ndarray, points: int) -> Optional[dict]:
    """Where a loss's values up to its first NaN or Inf stay within `_GUESS_TOLERANCE` of one ln k over
    at least their last third: k, and the stretch that does (from the earliest value after which
    every one does); None where they do not, or fewer than `points` values are there to judge."""
    if not _judgeable(values, points):
        return None
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        steps, values = steps[:bad[0]], values[:bad[0]]
    n = len(values)
    third = n - (2 * n) // 3
    if third - 1 < _LEAST_VALUES:
        # A healthy classifier starts at ln k: a few values there are its first steps, no proof of a stall,
        # and too few steps to tell whether it is still falling.
        return None
    # A loss that falls at more of its last third's steps than a sign test allows by chance is still
    # falling (a healthy classifier leaving ln k slowly), not settled there.
    steps_taken = np.diff(values[-third:])
    if _sign_test(int(np.count_nonzero(steps_taken < 0)), int(np.count_nonzero(steps_taken))):
        return None
    for k in _GUESS_CLASSES:
        inside = np.abs(values / math.log(k) - 1) <= _GUESS_TOLERANCE
        if not inside[-third:].all():
            continue
        outside = np.flatnonzero(~inside)
        i = int(outside[-1]) + 1 if len(outside) else 0
        return {"classes": k, "settled": n - i, "points": n, "median": float(np.median(values[i:])),
                "start": float(values[0]), "first_step": int(steps[i]), "last_step": int(steps[-1])}
    return None


def _sampled(rd: RunData, tag: str) -> bool:
    """Whether TensorBoard kept only some of the loss's logged points (`RunData.scalars_sampling`)."""
    return any(c["tag"] == tag for c in (rd.scalars_sampling or {}).get("series", ()))


def _windows(v: dict, unit: str = "step") -> str:
    """The two values compared, and over which values: the median of the last tenth against the first
    tenth's median, or against the first value where that was lower."""
    # A sampled loss's values are the ones TensorBoard kept, not every one logged.
    values = "kept values" if v.get("sampled") else "logged values"
    whole = v["nonfinite_step"] is None
    if v["from_first"]:
        start = f"{v['first_median']:.4g}, its first value ({unit} {v['first_step']}), below the median of its first "
    else:
        start = f"{v['first_median']:.4g} {'in' if whole else 'over'} its first "
    medians = f"is {v['last_median']:.4g} against {start}"
    if whole:
        return f"the median of its last tenth of {v['points']:,} {values} {medians}tenth"
    return (f"the median of its {v['k']} {values} before it turned NaN or Inf at {unit} {v['nonfinite_step']} "
            f"{medians}{v['k']}, a tenth of its {v['logged']:,} each")


def _judge(steps: np.ndarray, values: np.ndarray, points: int) -> Optional[dict]:
    """First and last tenth of one loss series up to its first NaN or Inf, and how much lower the last is;
    None where it cannot be judged."""
    # A tenth is the whole series' (NaN and all): a run that blew up halfway is judged over tenths of its
    # length, not over the first few steps' fall that a tenth of its finite part would be.
    logged, k = len(values), max(1, len(values) // 10)
    bad = np.flatnonzero(~np.isfinite(values))
    nonfinite_step = int(steps[bad[0]]) if len(bad) else None
    if len(bad):
        steps, values = steps[:bad[0]], values[:bad[0]]
        if len(values) < 2 * k:  # the two tenths would overlap: it blew up too early to tell
            return None
    if len(values) < max(points, 2) or k < _LEAST_TENTH:
        # A median withstands one stray value only from three values on: tenths of fewer prove nothing
        # either way (the first steps of a healthy run are not yet a stall), and progress is not judged.
        return None
    # The start is the lower of the first tenth's median and the first value: a loss that rose right away
    # (blown up by a learning rate too high) is judged against where it began, not its blow-up.
    head, tail = float(np.median(values[:k])), float(np.median(values[-k:]))
    # The loss's noise from one logged value to the next (robust, and blind to a steady trend),
    # and the standard error of the difference of two medians of k such values (of one value and
    # a median of k, where the start is the first value).
    noise = 1.4826 * float(np.median(np.abs(np.diff(values)))) / np.sqrt(2)
    # A first value below the median by no more than 3 times that noise is one noisy value, no start
    # of its own: a flat loss would otherwise "get worse" whenever its first value came out low.
    from_first = bool(values[0] < head - 3 * noise)
    head = float(values[0]) if from_first else head
    if head == 0:
        return None
    median_se = 1.2533 * noise / np.sqrt(k)
    margin = float(np.hypot(noise if from_first else median_se, median_se)) / abs(head)
    improvement = (head - tail) / abs(head)
    # Against a first value that is a start of its own, the last tenth's values above it also prove the
    # loss worse: a blown-up loss bounces by about its own level, a noise that can hide the rise of its
    # median, but not that nearly every value lies above where it began.
    above = int(np.count_nonzero(values[-k:] > head))
    return {"first_median": head, "last_median": tail, "improvement": improvement,
            "noise_margin": float(margin), "k": int(k), "from_first": from_first, "above": above,
            # Worse by more than the noise allows: the loss rose, which says more than "stalled".
            "worse": bool(improvement + margin < 0 or (from_first and _sign_test(above, k))),
            "nonfinite_step": nonfinite_step, "logged": int(logged),
            "points": int(len(values)), "first_step": int(steps[0]), "last_step": int(steps[-1]),
            "lowest": float(values.min()), "lowest_step": int(steps[int(np.argmin(values))])}


# A sign test's level: so many of the last tenth's values above the start would come up by chance less than
# once in a hundred runs of a loss that sits at its start (each value as likely above it as below).
_SIGN_LEVEL = 0.01


# The fewest signs a sign test at `_SIGN_LEVEL` can decide on: n all on one side come up by chance 2**-n of
# the time, under 1% from 7 on. The last third holds at least that many steps (each a fall or not), or it is
# not judged as settled at chance.
_LEAST_VALUES = next(n for n in range(1, 64) if 0.5 ** n < _SIGN_LEVEL)
# The fewest values a tenth holds for its median to be read: three (one stray value cannot move it).
_LEAST_TENTH = 3


def _sign_test(hits: int, k: int) -> bool:
    """Whether `hits` of `k` values on one side (above a start, falls among steps) pass a one-sided sign test
    at `_SIGN_LEVEL`."""
    return math.fsum(math.comb(k, i) for i in range(hits, k + 1)) / 2.0 ** k < _SIGN_LEVEL


# A classifier that learns nothing predicts the classes' frequencies: with k balanced classes its
# cross-entropy is ln k. The hint is given within 1% of ln k (a stalled model is seldom exactly
# uniform), only for k whose ln k and ln(k + 1) lie at least 4 such tolerances apart, so that a level
# names one k: up to 10 classes.
_GUESS_TOLERANCE = 0.01
_GUESS_CLASSES = [k for k in range(2, 101) if math.log(k + 1) / math.log(k) - 1 >= 4 * _GUESS_TOLERANCE]


def _uniform_guess(level: float) -> str:
    """The hint that a stalled loss sits at ln k, a uniform guess among k classes; "" where it does not."""
    for k in _GUESS_CLASSES:
        if abs(level / math.log(k) - 1) <= _GUESS_TOLERANCE:
            return (f"; {level:.4g} is about ln {k} = {math.log(k):.4g}, the cross-entropy of a uniform guess among "
                    f"{k} classes, if the model has {k}: it predicts no better than chance")
    return ""
