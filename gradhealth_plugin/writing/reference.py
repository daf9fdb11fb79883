"""The exact statistics of a gradhealth vector in numpy: the definition every integration matches.

The PyTorch kernels and the TensorFlow statistics compute the same `FIELDS`
on the device; their tests compare them with these functions.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .format import FIELDS, HISTOGRAM_BUCKETS, SMALL, histogram_numpy


def stats_numpy(x: np.ndarray, before: Optional[np.ndarray] = None) -> np.ndarray:
    """The vector a summary holds for an array (the reference the integrations match): the exact
    statistics `FIELDS`, then the histogram (`format.histogram_numpy`).

    Moments and norms are over the finite values; NaN and Inf are counted, not
    propagated, so one bad value does not hide the rest of the tensor.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    finite = x[np.isfinite(x)]
    n = finite.size
    out = np.full(len(FIELDS) + HISTOGRAM_BUCKETS, np.nan)
    out[len(FIELDS):] = histogram_numpy(x, np.max(np.abs(finite)) if n else np.nan, n)
    out[FIELDS.index("count")] = x.size
    out[FIELDS.index("nan_count")] = np.isnan(x).sum()
    out[FIELDS.index("inf_count")] = np.isinf(x).sum()
    if n:
        mean = finite.mean()
        centered = finite - mean
        var = np.mean(centered ** 2)
        std = np.sqrt(var)
        values = {
            "mean": mean, "std": std, "min": finite.min(), "max": finite.max(),
            "l2": np.sqrt(np.sum(finite ** 2)),
            "zero_fraction": np.mean(finite == 0), "small_fraction": np.mean(np.abs(finite) < SMALL),
            "skewness": np.mean(centered ** 3) / var ** 1.5 if var > 0 else np.nan,
            "kurtosis": np.mean(centered ** 4) / var ** 2 - 3 if var > 0 else np.nan,
            "mean_abs": np.mean(np.abs(finite)), "max_abs": np.max(np.abs(finite)),
        }
        for name, value in values.items():
            out[FIELDS.index(name)] = value
    if before is not None:
        out[FIELDS.index("update_ratio")] = update_ratio_numpy(before, x)
    return out


def update_ratio_numpy(before: np.ndarray, after: np.ndarray) -> float:
    """||after - before|| / ||before||, NaN when ||before|| is 0."""
    before = np.asarray(before, dtype=np.float64).ravel()
    after = np.asarray(after, dtype=np.float64).ravel()
    norm = np.linalg.norm(before)
    return float(np.linalg.norm(after - before) / norm) if norm > 0 else float("nan")
