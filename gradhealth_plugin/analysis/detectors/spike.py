"""A one-off outlier in a layer's norm series or the loss: a robust z-score
against the rolling medians of the values before and after (seed 004).

A spike is a note, but a norm's spike that jumps `spike_warn_jump` (100x) or
more above the medians of the values on both sides is a warning: far past the several-fold
swings of healthy gradient norms between batches. A loss is left at info
whatever its jump: near its floor it moves by factors without harm.

Run-level scalars on different step axes never share a finding, and one on
another axis than the layers' is told at its own steps. A loss spike's advice
says what one of its values is, from its step axis (`_advice`).
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from ..finding import INFO, WARN, Finding
from ..spans import Hit, group, labelled, scalar_axis, written_text
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
        for spikes in _by_axis(rd, [(step, found.single[(step, r)]) for step, r in singles if r == role], role):
            for episode in _episodes(rd, spikes, role):
                hits = periodic_spikes.one_hit_per_series(episode)
                large = [h for h in hits if _large(rd, h, role, jump)]
                for severity, part in ((WARN, large), (SEVERITY, [h for h in hits if h not in large])):
                    if part:
                        out.extend(_finding(rd, role, severity, part, z, jump))
    return out


def _finding(rd: RunData, role: Optional[str], severity: str, part: List[Hit], z: float,
             jump: float) -> List[Finding]:
    """The findings of one episode's spikes of one severity: one per kind of series, whose advice
    differs (`_advice`)."""
    out = []
    kinds: dict = {}
    for h in part:
        kinds.setdefault(_advice(rd, h.layer) if role is None else ADVICE, []).append(h)
    for advice, hits in kinds.items():
        plural = "s" if len(hits) == 1 and role is None else ""
        what = f"spike{plural} (robust z-score above {z:g} against the medians of the values before and after)"
        if severity == WARN:
            top = max(h.detail["jump"] for h in hits)
            what = (f"spike{plural} {top:.0f}x above the values before and after them (at least {jump:g}x)")
        f = group(rd, KIND, severity, role, hits, z, what, advice)
        if severity == WARN:
            f.evidence["jump_threshold"] = jump
        own = sorted({s for h in hits for s in h.detail.get("own_spike_steps", ())})
        if own:
            # A series on another step axis: its own steps, as its chart shows them, never the layers'.
            f.axis = scalar_axis(rd, f.layers, own[0], own[-1])
            f.message = (f"{labelled('scalar', f.layers)}, {f.axis.per()}: {what} {f.axis.span(own[0], own[-1])} "
                         f"({written_text(rd, f.first_step, f.last_step)})")
            f.evidence.update(own_first_step=own[0], own_last_step=own[-1])
        out.append(f)
    return out


def _by_axis(rd: RunData, spikes: List[Tuple[int, List[Hit]]],
             role: Optional[str]) -> List[List[Tuple[int, List[Hit]]]]:
    """Run-level scalars' spikes split by step axis (`RunData.scalar_axis_groups`): series counting steps
    differently never share a finding, nor a "step N". A row's spikes stay together."""
    if role is not None:
        return [spikes]
    names = list(dict.fromkeys(h.layer for _, hits in spikes for h in hits))
    out = []
    for members in rd.scalar_axis_groups(names):
        mine = [(step, [h for h in hits if h.layer in members]) for step, hits in spikes]
        out.append([(step, hits) for step, hits in mine if hits])
    return out


# What a spike in a loss says depends on what one of its values is. One logged on another step axis
# than the layers' (Keras' per-epoch scalars beside per-iteration rows) is an epoch's mean or an
# evaluation, over many batches: no one batch's data makes it jump. On the layers' own axis the data
# cannot tell one batch's loss from an average logged as often.
EPOCH_ADVICE = ("This loss is logged on another step axis than the training steps: each value is an epoch's "
                "average or an evaluation, over many batches, so no single batch made it jump; the model "
                "itself did for a while. Look at the per-step loss and gradient norms around it; lower the "
                "learning rate or clip gradients if they jump there too.")
LOSS_ADVICE = ("If each value is one batch's loss, that batch produced the outlier: check its data; clipping "
               "bounds its effect. If each is an average over an epoch or an evaluation, no single batch made it "
               "jump: the model itself did for a while; lower the learning rate or clip gradients.")


def _advice(rd: RunData, tag: str) -> str:
    """A run-level scalar spike's advice: a norm's as a row's; a loss's by what its step axis shows."""
    if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS:
        return ADVICE
    return EPOCH_ADVICE if rd.scalar_other_axis(tag) else LOSS_ADVICE


def _large(rd: RunData, h: Hit, role: Optional[str], jump: float) -> bool:
    """Whether a series' spike is a warning: a norm (a row's, or a gradient-norm scalar) jumping `jump`
    times or more above the medians of the values on both sides."""
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
