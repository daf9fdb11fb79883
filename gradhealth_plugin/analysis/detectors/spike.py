"""A one-off outlier in a layer's norm series or the loss: a robust z-score
against a rolling median (seed 004).
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

import numpy as np

from ...reading.runs import RunData
from ..finding import INFO, Finding
from ..spans import Hit, group
from ..spikes import scan
from . import periodic_spikes

KIND = "spike"
ORDER = 90
SEVERITY = INFO
LABEL = "Spike"
METRIC = "l2"
NEEDS = ()
ADVICE = "A single batch produced an outlier: check that batch's data; clipping bounds its effect."
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    """One finding per episode: spikes of one role at adjacent logged steps are one event (a loss
    diverging over steps 9 to 12), and spikes on a periodic pattern's grid belong to that pattern."""
    z = limits["spike_z"]
    found = scan(rd, limits)
    folded = periodic_spikes.members(found)
    singles = sorted((key for key in found.single if key not in folded), key=lambda k: k[0])
    out = []
    for role in dict.fromkeys(r for _, r in singles):
        for episode in _episodes(rd, [(step, found.single[(step, r)]) for step, r in singles if r == role], role):
            hits = periodic_spikes.one_hit_per_series(episode)
            plural = "s" if len(hits) == 1 and role is None else ""
            out.append(group(rd, KIND, SEVERITY, role, hits, z,
                             f"spike{plural} (robust z-score above {z:g} against the rolling median)", ADVICE))
    return out


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
