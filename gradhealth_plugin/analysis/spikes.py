"""The spike scan shared by the `spike` and `periodic_spikes` detectors.

Every norm series is scanned once per run and limits: its spikes are either
one-offs, a recurring grid with a readable period, or a grid whose period the
kept steps cannot tell.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..reading import tags as tags_lib
from ..reading.runs import RunData
from . import series as series_lib
from .spans import Hit, role_tables


@dataclasses.dataclass
class Scan:
    # (step, role) -> one hit per series spiking at that step.
    single: Dict[Tuple[int, Optional[str]], List[Hit]]
    # (period, artefact, role) -> one hit per series spiking with that period.
    periodic: Dict[tuple, List[Hit]]
    # role -> series whose spikes recur but whose period the kept steps cannot tell.
    unjudged: Dict[Optional[str], List[Hit]]


_lock = threading.Lock()
# Keyed by the RunData object (a new object means new data), then by the limits used.
_scans: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def scan(rd: RunData, limits: Mapping[str, float]) -> Scan:
    """The run's spikes, computed once for both detectors."""
    key = (limits["spike_z"], limits["spike_window"], limits.get("steps_per_epoch", 0))
    with _lock:
        cached = _scans.get(rd, {}).get(key)
    if cached is None:
        cached = _scan(rd, limits)
        with _lock:
            _scans.setdefault(rd, {})[key] = cached
    return cached


def _series(rd):
    """(name, role, steps, values) of every norm series worth checking for spikes."""
    # Gradients, and rows of unknown role: a spike needs no role to be one.
    for role in (tags_lib.GRADIENT, tags_lib.OTHER):
        for layer, table in role_tables(rd, role):
            values = table.get("l2")
            if np.all(np.isnan(values)):
                values = table.get("max_abs")
            yield layer.name, role, table.steps, values, None
    for tag, (own, values) in rd.scalar_series.items():
        if rd.scalar_kinds.get(tag) in (tags_lib.SCALAR_GRAD_NORM, tags_lib.SCALAR_LOSS):
            # A series on another step axis is placed at the layers' steps written nearest in time,
            # its own steps kept for what its chart shows.
            yield tag, None, rd.scalar_steps(tag), values, (np.asarray(own) if rd.scalar_other_axis(tag) else None)


def _scan(rd: RunData, limits: Mapping[str, float]) -> Scan:
    z, window = limits["spike_z"], int(limits["spike_window"])
    epoch = int(limits.get("steps_per_epoch", 0) or 0) or None
    out = Scan({}, {}, {})
    checked = [s for s in _series(rd) if len(s[2]) >= window]
    found: List[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(checked)
    # Series of equal length are scanned together, a row each.
    for rows, values in series_lib.stacked([s[3] for s in checked], series_lib.spike_window_points(window)):
        for i, hit in zip(rows.tolist(), series_lib.spike_mask(values, z, window)):
            found[i] = np.nonzero(hit)[0]
    for (name, role, steps, values, own), idx in zip(checked, found):
        # The first logged value has no past to compare with, and early training is loud.
        idx = idx[idx > 0]
        if len(idx):
            _sort(out, rd.histogram_interval, epoch, name, role, steps, values, idx, window,
                  periodic=own is None, own=own)
    return out


def _sort(out: Scan, hist_interval, epoch, name, role, steps, values, idx, window: int,
          periodic: bool = True, own: Optional[np.ndarray] = None) -> None:
    """Files one series' spikes as unjudged, periodic or single. `periodic` False: single only, for a
    series whose steps were placed on the layers' axis by wall time (a period there would be only
    as exact as those times). `own`: such a series' own steps, each single spike's kept in its detail."""
    spike_steps = steps[idx]
    period, reason = series_lib.judge_period(spike_steps, steps) if periodic else (None, None)
    first = (name, int(spike_steps[0]), int(spike_steps[-1]), float(values[idx[0]]), int(spike_steps[0]))
    if period is None and reason is not None:
        # The spikes share a grid, but the kept steps cannot tell its period: say so, guess nothing.
        out.unjudged.setdefault(role, []).append(
            Hit(*first, {"spike_steps": spike_steps.tolist()[:50], "why": reason}, spike_steps))
    elif period is not None:
        artefact, why = is_artefact(period, series_lib.logging_interval(steps), hist_interval, epoch)
        out.periodic.setdefault((period, artefact, role), []).append(
            Hit(*first, {"spike_steps": spike_steps.tolist()[:50], "why": why}, spike_steps))
    else:
        # How far each spike jumps above its neighbours: a large one-off jump is a warning (`spike`).
        jump = series_lib.spike_jump(values, window)
        for i in idx:
            out.single.setdefault((int(steps[i]), role), []).append(
                Hit(name, int(steps[i]), int(steps[i]), float(values[i]), int(steps[i]),
                    {"jump": float(jump[i]), **({"own_step": int(own[i])} if own is not None else {})},
                    steps[i:i + 1]))


def is_artefact(period: int, own_interval: Optional[float], hist_interval: Optional[float],
                epoch: Optional[int]) -> tuple:
    """(artefact, why): whether the period is the epoch length or a multiple of the histogram logging interval."""
    if epoch and period == epoch:
        return True, f"the period equals the epoch length ({epoch} steps)"
    if hist_interval and own_interval and own_interval < hist_interval:
        if period == hist_interval:
            return True, f"the period equals the histogram logging interval ({hist_interval:g} steps)"
        if period % hist_interval == 0:
            return True, f"the period is {period / hist_interval:g}x the histogram logging interval ({hist_interval:g} steps)"
    return False, "the period matches neither the histogram logging interval nor the epoch length"
