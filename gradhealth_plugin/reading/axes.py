"""Whether two series of one row count steps the same way, told from when they were written.

A layer's row can be fed by several writers: Keras' TensorBoard callback
logs its histograms once per epoch (step = epoch), gradhealth's summaries
and most scalars once per optimizer step. Both say "step 7", and mean
different moments. Wall times tell them apart: at a step both series count,
they were written at about the same time; a per-epoch step 7 was written
long after the per-iteration step 7.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

# Share of the other series' points, inside the reference's step range, that must
# have been written at the reference's time for the two to share an axis. Not all:
# a pause (garbage collection, a checkpoint) can delay one write; but with two
# points, both.
_AGREEING_SHARE = 0.75
# Which of the reference's times between logged steps counts as typical for the tolerance.
_TYPICAL_GAP_QUANTILE = 0.9
_GAPS_FOR_QUANTILE = 10


def same_step_axis(steps: np.ndarray, walls: np.ndarray, other_steps: np.ndarray,
                   other_walls: np.ndarray) -> Optional[bool]:
    """True when `other` counts steps as the reference (`steps`, `walls`) does, False when it does
    not, None when the data cannot tell.

    One sentence: at the other series' steps inside the reference's step range,
    the reference's wall time (interpolated between its logged steps) and the
    other's must agree within one and a half of the reference's typical times between
    two logged steps (the 90th percentile of ten or more, else the median) (a loop writes a step's loss after its histograms, up to its next
    logged step, and a pause can delay one write), for at least three quarters of those
    steps. When no other step falls in the reference's range, the reference's pace
    extended beyond its ends, at the other's points written while the reference was, can
    only prove another axis (Keras' epoch 1, written between iterations 56 and 84, is no
    iteration 1). It cannot tell with fewer
    than two reference steps, when no other step can be placed, or when the reference's
    steps took no measurable time.
    """
    steps, walls = np.asarray(steps, dtype=np.float64), np.asarray(walls, dtype=np.float64)
    other_steps = np.asarray(other_steps, dtype=np.float64)
    other_walls = np.asarray(other_walls, dtype=np.float64)
    known = np.isfinite(walls)
    steps, walls = steps[known], walls[known]
    if len(steps) < 2:
        return None
    gaps = np.diff(walls)
    moved = (gaps > 0) & (np.diff(steps) > 0)
    if not moved.any():
        return None
    # With many gaps the 90th percentile, not the median: on a busy machine a tenth of the
    # writes can be held up by the scheduler, and the share below must not turn that into
    # another axis. A few gaps have no such tail to measure; their median stands.
    quantile = _TYPICAL_GAP_QUANTILE if moved.sum() >= _GAPS_FOR_QUANTILE else 0.5
    tolerance = 1.5 * float(np.quantile(gaps[moved], quantile))
    placed = np.isfinite(other_walls)
    inside = (other_steps >= steps[0]) & (other_steps <= steps[-1]) & placed
    if inside.any():
        expected = np.interp(other_steps[inside], steps, walls)
        agree = np.abs(other_walls[inside] - expected) <= tolerance
        return bool(agree.mean() >= _AGREEING_SHARE)
    # Only points written while the reference was written: before or after it, a pause can explain anything.
    placed &= (other_walls >= walls.min()) & (other_walls <= walls.max())
    if not placed.any():
        return None
    pace = float(np.median(gaps[moved] / np.diff(steps)[moved]))  # seconds per step
    edge = np.where(other_steps[placed] < steps[0], 0, -1)
    expected = walls[edge] + (other_steps[placed] - steps[edge]) * pace
    agree = np.abs(other_walls[placed] - expected) <= tolerance
    return False if agree.mean() < _AGREEING_SHARE else None


def nearest_in_time(walls: np.ndarray, wall: float) -> Optional[int]:
    """The index of the wall time closest to `wall` (the earlier one on a tie); None if there is none."""
    walls = np.asarray(walls, dtype=np.float64)
    if not len(walls) or not np.isfinite(wall):
        return None
    distance = np.abs(walls - wall)
    if not np.isfinite(distance).any():
        return None
    return int(np.nanargmin(distance))


def nearest_steps(steps: np.ndarray, walls: np.ndarray, other_walls: np.ndarray) -> np.ndarray:
    """For each of `other_walls`, the step of the reference (`steps`, `walls`) written nearest in time
    (the earlier one on a tie): where another axis' points fall on the reference's axis. The reference's
    wall times need not all be known; with none known, every point falls on its first step."""
    steps, walls = np.asarray(steps), np.asarray(walls, dtype=np.float64)
    other_walls = np.asarray(other_walls, dtype=np.float64)
    known = np.isfinite(walls)
    if not known.any():
        return np.full(len(other_walls), steps[0] if len(steps) else 0, dtype=np.int64)
    steps, walls = steps[known], walls[known]
    # Wall times of one series ascend but for a clock step back; sorted, nearest is a neighbour.
    order = np.argsort(walls, kind="stable")
    steps, walls = steps[order], walls[order]
    right = np.clip(np.searchsorted(walls, other_walls), 0, len(walls) - 1)
    left = np.clip(right - 1, 0, len(walls) - 1)
    take_left = np.abs(other_walls - walls[left]) <= np.abs(walls[right] - other_walls)
    return np.where(take_left, steps[left], steps[right]).astype(np.int64)
