"""A tensor's distribution over steps: percentiles of its histograms, as TensorBoard's
Distributions tab draws them (the median and the bands of one, two and three sigma
of a normal distribution, and the extremes).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .metrics import Histograms, clamp_to_range

# In percent; the normal distribution's 0, -3, -2, -1, 0, 1, 2, 3 sigma and 100, TensorBoard's choice.
PERCENTILES = (0.0, 6.68, 15.87, 30.85, 50.0, 69.15, 84.13, 93.32, 100.0)


def percentiles(h: Histograms, qs: Sequence[float] = PERCENTILES) -> np.ndarray:
    """(steps, len(qs)) values below which q percent of each step's counted values lie, NaN for a step
    without any; linear inside the bucket where the count reaches it.

    Buckets are taken in order of their left edge, clamped to the range the
    writer put its values in; empty and non-finite buckets count for nothing.
    """
    left, right = clamp_to_range(h.left, h.right, h.lo, h.hi)
    order = np.argsort(left, axis=1, kind="stable")
    left, right = np.take_along_axis(left, order, 1), np.take_along_axis(right, order, 1)
    count = np.take_along_axis(h.count, order, 1)
    usable = np.isfinite(left) & np.isfinite(right) & np.isfinite(count) & (count > 0)
    count = np.where(usable, count, 0.0)
    cum = np.cumsum(count, axis=1)
    total = cum[:, -1:] if cum.shape[1] else np.zeros((len(cum), 1))
    targets = total * (np.asarray(qs, dtype=np.float64) / 100.0)[None, :]  # (steps, q)
    # The first counted bucket whose cumulative count reaches each target.
    reached = (cum[:, None, :] >= targets[:, :, None] * (1 - 1e-12)) & usable[:, None, :]
    k = np.argmax(reached, axis=2)  # (steps, q)
    before = np.take_along_axis(cum, k, 1) - np.take_along_axis(count, k, 1)
    inside = np.take_along_axis(count, k, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.clip((targets - before) / inside, 0.0, 1.0)
    lo, hi = np.take_along_axis(left, k, 1), np.take_along_axis(right, k, 1)
    out = lo + frac * (hi - lo)
    return np.where((total > 0) & reached.any(axis=2), out, np.nan)
