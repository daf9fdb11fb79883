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


def same_step_axis(steps: np.ndarray, walls: np.ndarray, other_steps: np.ndarray,
                   other_walls: np.ndarray) -> Optional[bool]:
    """True when `other` counts steps as the reference (`steps`, `walls`) does, False when it does
    not, None when the data cannot tell.

    One sentence: at the other series' steps inside the reference's step range,
    the reference's wall time (interpolated between its logged steps) and the
    other's must agree within half the reference's typical time between two
    logged steps, for at least three quarters of those steps. It cannot tell with fewer
    than two reference steps, when no other step falls in the reference's range,
    or when the reference's steps took no measurable time.
    """
    steps, walls = np.asarray(steps, dtype=np.float64), np.asarray(walls, dtype=np.float64)
    other_steps = np.asarray(other_steps, dtype=np.float64)
    other_walls = np.asarray(other_walls, dtype=np.float64)
    known = np.isfinite(walls)
    steps, walls = steps[known], walls[known]
    if len(steps) < 2:
        return None
    gaps = np.diff(walls)
    gaps = gaps[gaps > 0]
    if not len(gaps):
        return None
    tolerance = 0.5 * float(np.median(gaps))
    inside = (other_steps >= steps[0]) & (other_steps <= steps[-1]) & np.isfinite(other_walls)
    if not inside.any():
        return None
    expected = np.interp(other_steps[inside], steps, walls)
    agree = np.abs(other_walls[inside] - expected) <= tolerance
    return bool(agree.mean() >= _AGREEING_SHARE)


def nearest_in_time(walls: np.ndarray, wall: float) -> Optional[int]:
    """The index of the wall time closest to `wall` (the earlier one on a tie); None if there is none."""
    walls = np.asarray(walls, dtype=np.float64)
    if not len(walls) or not np.isfinite(wall):
        return None
    distance = np.abs(walls - wall)
    if not np.isfinite(distance).any():
        return None
    return int(np.nanargmin(distance))
