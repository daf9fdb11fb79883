"""A one-off outlier in a layer's norm series or the loss: a robust z-score
against a rolling median (seed 004).

A spike is a note, but a norm's spike that jumps `spike_warn_jump` (100x) or
more above the median of its neighbours is a warning: far past the several-fold
swings of healthy gradient norms between batches. A loss is left at info
whatever its jump: near its floor it moves by factors without harm.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from ..finding import INFO, WARN, Finding
from ..spans import Hit, group
from ..spikes import scan
from . import periodic_spikes

KIND = "spike"
ORDER = 90
SEVERITY = INFO
MAX_SEVERITY = WARN  # a norm's one-off jump of `spike_warn_jump` or more
LABEL = "Spike"
METRIC = "l2"
NEEDS = ()
ADVICE = "A single batch produced an outlier: check that batch's data; clipping bounds its effect."
CELL_RULES = ()
THRESHOLDS = ()
# One finding per event: a repeat of the same kind, role, severity and cause is the same problem again at
# another step, so the findings list and the report fold the repeats into one entry, warnings too.
EVENTS = True


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    """One finding per episode: spikes of one role at adjacent logged steps are one event (a loss
    diverging over steps 9 to 12), and spikes on a periodic pattern's grid belong to that pattern."""
    z, jump = limits["spike_z"], limits["spike_warn_jump"]
    found = scan(rd, limits)
    folded = periodic_spikes.members(found)
    singles = sorted((key for key in found.single if key not in folded), key=lambda k: k[0])
    out = []
    for role in dict.fromkeys(r for _, r in singles):
        for episode in _episodes(rd, [(step, found.single[(step, r)]) for step, r in singles if r == role], role):
            hits = periodic_spikes.one_hit_per_series(episode)
            large = [h for h in hits if _large(rd, h, role, jump)]
            for severity, part in ((WARN, large), (SEVERITY, [h for h in hits if h not in large])):
                if not part:
                    continue
                plural = "s" if len(part) == 1 and role is None else ""
                what = f"spike{plural} (robust z-score above {z:g} against the rolling median)"
                if severity == WARN:
                    top = max(h.detail["jump"] for h in part)
                    what = (f"spike{plural} {top:.0f}x above the median of their neighbours (at least {jump:g}x)")
                f = group(rd, KIND, severity, role, part, z, what, ADVICE)
                if severity == WARN:
                    f.evidence["jump_threshold"] = jump
                out.append(f)
    return out


def _large(rd: RunData, h: Hit, role: Optional[str], jump: float) -> bool:
    """Whether a series' spike is a warning: a norm (a row's, or a gradient-norm scalar) jumping `jump`
    times or more above its neighbours' median."""
    if role is None and rd.scalar_kinds.get(h.layer) != tags_lib.SCALAR_GRAD_NORM:
        return False
    return h.detail.get("jump", 0.0) >= jump


def _episodes(rd: RunData, spikes: List[Tuple[int, List[Hit]]], role: Optional[str]) -> List[List[List[Hit]]]:
    """Spike steps (ascending, with their hits) cut into episodes.

    A step continues the episode when none of the series spiking there had a
    calm logged step since the episode's last spike: each series' previous
    logged step is at or before it.
    """
    out: List[List[List[Hit]]] = []
    last = None
    for step, hits in spikes:
        before = [p for p in (_previous_step(rd, role, h.layer, step) for h in hits) if p is not None]
        if last is not None and before and max(before) <= last:
            out[-1].append(hits)
        else:
            out.append([hits])
        last = step
    return out


def _previous_step(rd: RunData, role: Optional[str], name: str, step: int) -> Optional[int]:
    """The logged step of one series before `step` (None for its first)."""
    if role is None:
        steps = rd.scalar_steps(name)
    else:
        steps = rd.layer(name).roles[role].table.steps
    i = int(np.searchsorted(steps, step))
    return int(steps[i - 1]) if i > 0 else None
