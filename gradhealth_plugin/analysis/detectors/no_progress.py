"""A loss that does not improve over the run (seed 003's CI alerts; SageMaker
Debugger's LossNotDecreasing): the median of its last tenth of logged values
not clearly below that of its first tenth, even allowing for the loss's noise between logged
values (a bouncing per-batch loss early in training proves no stall). Every loss tag must fail: a
training loss that improves while a validation loss does not is overfitting,
not a stalled run. A loss with NaN or Inf is the `nonfinite` finding's.
"""

from __future__ import annotations

from typing import List, Mapping, Optional

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from ..finding import WARN, Finding
from ..spans import layers_text

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
        if verdict is not None and rd.scalar_other_axis(tag):
            verdict.update(axis="other", own_first_step=int(own[0]), own_last_step=int(own[-1]))
        if verdict is not None and verdict["k"] == 1 and verdict["spread"] > needed:
            # With under 20 values each tenth is one value: only a flat loss (every value within
            # the improvement asked for of their median) proves a stall; a few early per-batch
            # losses that have not fallen yet prove nothing.
            verdict = None
        if verdict is not None:
            judged[tag] = verdict
    # Stalled only when even the noise cannot hide an improvement: a per-batch loss early in
    # training bounces by more than the improvement asked for, and proves nothing yet.
    if not judged or any(v["improvement"] + v["noise_margin"] >= needed for v in judged.values()):
        return []
    tags = sorted(judged, key=lambda t: (-judged[t]["points"], t))
    onset = judged[tags[0]]
    # Worse by more than the noise allows: the loss rose, which says more than "stalled".
    worse = onset["improvement"] + onset["noise_margin"] < 0
    first, last = min(v["first_step"] for v in judged.values()), max(v["last_step"] for v in judged.values())
    subject = layers_text(tags)
    return [Finding(
        run=rd.run, kind=KIND, severity=SEVERITY, layers=tags, first_step=first, last_step=last,
        evidence={"threshold": needed, "value": onset["improvement"], "step": onset["last_step"],
                  "layers": judged},
        message=(f"the loss {'gets worse' if worse else 'does not improve'} ({subject}): the median of its last "
                 f"tenth of {onset['points']} logged values is {onset['last_median']:.4g} against "
                 f"{onset['first_median']:.4g} in its first tenth ({-onset['improvement']:+.1%}; an improvement of at "
                 f"least {needed:.0%} expected) from step {first} to step {last}"
                 # Where it turned: a loss that fell and rose again was fine up to there.
                 + (f"; it was lowest, {onset['lowest']:.4g}, at step {onset['lowest_step']}" if worse else "")),
        advice=ADVICE, role=None, spans={t: (judged[t]["first_step"], judged[t]["last_step"]) for t in tags})]


def _judge(steps: np.ndarray, values: np.ndarray, points: int) -> Optional[dict]:
    """First and last tenth of one loss series, and how much lower the last is; None where it cannot be judged."""
    if len(values) < max(points, 2) or not np.isfinite(values).all():
        return None
    k = max(1, len(values) // 10)
    head, tail = float(np.median(values[:k])), float(np.median(values[-k:]))
    if head == 0:
        return None
    # The loss's noise from one logged value to the next (robust, and blind to a steady trend),
    # and the standard error of the difference of two medians of k such values.
    noise = 1.4826 * float(np.median(np.abs(np.diff(values)))) / np.sqrt(2)
    margin = 1.2533 * noise * np.sqrt(2 / k) / abs(head)
    return {"first_median": head, "last_median": tail, "improvement": (head - tail) / abs(head),
            "noise_margin": float(margin), "k": int(k),
            "spread": float(np.max(np.abs(values - np.median(values))) / abs(head)),
            "points": int(len(values)), "first_step": int(steps[0]), "last_step": int(steps[-1]),
            "lowest": float(values.min()), "lowest_step": int(steps[int(np.argmin(values))])}
