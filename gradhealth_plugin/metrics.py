"""Per-step statistics of a tensor, from histogram buckets or exact summaries.

Everything here is a pure function over whole numpy arrays: one call computes a
metric for every logged step of a tag at once.

Estimates from buckets assume values spread uniformly inside each bucket, which
is exact for the count, exact for min/max only when the writer put the data's
range on the outer edges (TF2 does), and an estimate within a bucket width for
everything else. Where a bucket straddles zero, the zero fraction can only be
bounded from above; such values carry the quality ``upper_bound``.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

# Quality codes of a metric value.
NO_DATA = 0
EXACT = 1
ESTIMATED = 2
UPPER_BOUND = 3
LOWER_BOUND = 4
QUALITY_NAMES = ("no_data", "exact", "estimated", "upper_bound", "lower_bound")

# Values with |x| below this count as "vanished" (seeds 002 and 004).
SMALL = 1e-6

METRICS = (
    "count", "mean", "std", "min", "max", "max_abs", "mean_abs", "l2", "skewness", "kurtosis",
    "zero_fraction", "small_fraction", "nonfinite", "std_rel_first", "update_ratio",
)
# Metrics better drawn on a log colour scale.
LOG_METRICS = frozenset({"std", "max_abs", "mean_abs", "l2", "std_rel_first", "update_ratio"})


@dataclasses.dataclass
class Histograms:
    """The histograms of one tag at N steps, padded to K buckets.

    Padding and dropped buckets have count 0. `left`, `right`, `count` are
    float64 arrays of shape (N, K).
    """

    steps: np.ndarray
    wall_times: np.ndarray
    left: np.ndarray
    right: np.ndarray
    count: np.ndarray
    # Per step, the first bucket's left edge and the last bucket's right edge as
    # written (empty buckets included): the data's min and max for v1 histograms.
    lo: Optional[np.ndarray] = None
    hi: Optional[np.ndarray] = None


@dataclasses.dataclass
class MetricTable:
    """Metric values (N,) with a quality code per value; NaN where no data."""

    steps: np.ndarray
    values: Dict[str, np.ndarray]
    quality: Dict[str, np.ndarray]
    # Wall time of the first kept step: tags written one after the other in a
    # training loop carry the model's order in it.
    first_wall: Optional[float] = None

    def get(self, name: str) -> np.ndarray:
        if name in self.values:
            return self.values[name]
        return np.full(len(self.steps), np.nan)

    def quality_of(self, name: str) -> np.ndarray:
        if name in self.quality:
            return self.quality[name]
        return np.zeros(len(self.steps), dtype=np.uint8)


def _as_buckets(a) -> np.ndarray:
    """A ``[k, 3]`` float64 array, or no buckets for anything that is not one."""
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return np.zeros((0, 3))
    if arr.ndim == 1 and arr.size % 3 == 0:
        return arr.reshape(-1, 3)
    if arr.ndim != 2 or arr.shape[1] != 3:
        return np.zeros((0, 3))
    return arr


def stack_histograms(steps: Sequence[int], wall_times: Sequence[float], arrays: Sequence[np.ndarray]) -> Histograms:
    """Pads ragged ``[k_i, 3]`` bucket arrays into one (N, K) batch without a loop over steps."""
    n = len(arrays)
    shaped = [_as_buckets(a) for a in arrays]
    lengths = np.fromiter((a.shape[0] for a in shaped), dtype=np.int64, count=n)
    k = int(lengths.max()) if n else 0
    left = np.zeros((n, max(k, 1)))
    right = np.zeros((n, max(k, 1)))
    count = np.zeros((n, max(k, 1)))
    if n and k:
        flat = np.concatenate(shaped, axis=0)
        rows = np.repeat(np.arange(n), lengths)
        starts = np.cumsum(lengths) - lengths
        cols = np.arange(flat.shape[0]) - np.repeat(starts, lengths)
        left[rows, cols] = flat[:, 0]
        right[rows, cols] = flat[:, 1]
        count[rows, cols] = flat[:, 2]
    has = lengths > 0
    lo = np.where(has, left[:, 0], np.nan)
    hi = np.where(has, right[np.arange(n), np.maximum(lengths - 1, 0)], np.nan)
    return Histograms(
        steps=np.asarray(steps, dtype=np.int64),
        wall_times=np.asarray(wall_times, dtype=np.float64),
        left=left, right=right, count=count, lo=lo, hi=hi,
    )


def clamp_to_range(left: np.ndarray, right: np.ndarray, lo, hi) -> tuple:
    """Clamps bucket edges into the written range [lo, hi].

    A v1 histogram (PyTorch, tensorboardX, TF1) keeps the data's exact min and
    max on its outer edges, but the Rust loader also keeps the empty outer
    buckets, so the first non-empty bucket starts at a grid limit below the min
    (the Python loader trims them and puts the min back). Clamping makes both
    loaders' buckets describe the same data.
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    usable = np.isfinite(lo) & np.isfinite(hi) & (lo <= hi)
    lo_b = np.where(usable, lo, -np.inf)[..., None] if np.ndim(left) > np.ndim(lo) else np.where(usable, lo, -np.inf)
    hi_b = np.where(usable, hi, np.inf)[..., None] if np.ndim(left) > np.ndim(hi) else np.where(usable, hi, np.inf)
    with np.errstate(invalid="ignore"):
        return np.clip(left, lo_b, hi_b), np.clip(right, lo_b, hi_b)


def _uniform_moment(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """E[x^k] for x uniform on [a, b]; a point mass where a == b."""
    # (b^(k+1) - a^(k+1)) / ((k+1)(b-a)) with the division done algebraically: v1
    # grids put 1e-12-wide buckets next to zero, and far from the mean the
    # difference of powers cancels to noise (std off by 2% at mean 1e4).
    return sum(a ** j * b ** (k - j) for j in range(k + 1)) / (k + 1)


def _uniform_abs_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E[|x|] for x uniform on [a, b]."""
    width = b - a
    with np.errstate(divide="ignore", invalid="ignore"):
        straddle = (a * a + b * b) / (2 * width)
    return np.where(a >= 0, (a + b) / 2, np.where(b <= 0, -(a + b) / 2, np.where(width > 0, straddle, 0.0)))


def _overlap_fraction(a: np.ndarray, b: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Share of a uniform [a, b] bucket lying inside [lo, hi]."""
    width = b - a
    inside = np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = inside / width
    point = ((a >= lo) & (a <= hi)).astype(np.float64)
    return np.where(width > 0, share, point)


def histogram_metrics(h: Histograms) -> MetricTable:
    """Estimates every metric at every step of `h` from its buckets."""
    n = len(h.steps)
    edges_finite = np.isfinite(h.left) & np.isfinite(h.right)
    counts_ok = np.isfinite(h.count) & (h.count > 0)
    # Empty padding, zero and negative counts, and degenerate buckets (left > right,
    # as the Rust loader reports for v1 histograms) carry no data.
    valid = edges_finite & counts_ok & (h.right >= h.left)
    left, right = (clamp_to_range(h.left, h.right, h.lo, h.hi) if h.lo is not None and h.hi is not None
                   else (h.left, h.right))
    c = np.where(valid, h.count, 0.0)
    a = np.where(valid, left, 0.0)
    b = np.where(valid, right, 0.0)
    # TensorBoard's TF2 histogram before its fixed-shape rewrite (late 2021) wrote
    # a tensor whose values are all equal as the lone bucket [v - 0.5, v + 0.5].
    # Read as a spread it invents std 0.29 and |max| 0.5, and an all-zero
    # (vanished) gradient looks alive; it is the point mass v.
    centre = (a + b) / 2
    lone = valid & (valid.sum(axis=1, keepdims=True) == 1)
    legacy_point = lone & (np.abs(b - a - 1.0) <= 4 * np.finfo(np.float64).eps * np.maximum(1.0, np.abs(centre)))
    a = np.where(legacy_point, centre, a)
    b = np.where(legacy_point, centre, b)

    total = c.sum(axis=1)
    has = total > 0
    safe_total = np.where(has, total, 1.0)
    # A non-finite edge means the writer saw NaN or Inf. TF2 then writes NaN
    # edges with zero counts, so the number of such values is only bounded below.
    nonfinite_rows = (~edges_finite).any(axis=1)
    # Only a bucket with no finite edge can count non-finite values: one finite
    # edge ([min, inf] from TF2 or the v1 migration) holds the finite values the
    # writer could bin, with the infinite ones left out.
    no_finite_edge = ~np.isfinite(h.left) & ~np.isfinite(h.right)
    nonfinite_counted = np.where(no_finite_edge & np.isfinite(h.count) & (h.count > 0), h.count, 0.0).sum(axis=1)
    nonfinite = np.where(nonfinite_rows, np.maximum(nonfinite_counted, 1.0), 0.0)

    mean = (c * (a + b) / 2).sum(axis=1) / safe_total
    da = a - mean[:, None]
    db = b - mean[:, None]
    m2 = (c * _uniform_moment(da, db, 2)).sum(axis=1) / safe_total
    m3 = (c * _uniform_moment(da, db, 3)).sum(axis=1) / safe_total
    m4 = (c * _uniform_moment(da, db, 4)).sum(axis=1) / safe_total
    var = np.maximum(m2, 0.0)
    std = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(var > 0, m3 / var ** 1.5, np.nan)
        kurt = np.where(var > 0, m4 / var ** 2 - 3.0, np.nan)
    raw2 = (c * _uniform_moment(a, b, 2)).sum(axis=1)
    l2 = np.sqrt(np.maximum(raw2, 0.0))
    mean_abs = (c * _uniform_abs_mean(a, b)).sum(axis=1) / safe_total
    big = np.finfo(np.float64).max
    vmin = np.where(valid, a, big).min(axis=1)
    vmax = np.where(valid, b, -big).max(axis=1)
    max_abs = np.maximum(np.abs(vmin), np.abs(vmax))

    # Zero fraction: buckets [0, 0] hold exact zeros; a bucket straddling zero bounds it.
    exact_zero = (c * ((a == 0) & (b == 0))).sum(axis=1)
    straddle_zero = (c * ((a <= 0) & (b >= 0))).sum(axis=1)
    zero_fraction = straddle_zero / safe_total
    zero_quality = np.where(straddle_zero == exact_zero, EXACT, UPPER_BOUND).astype(np.uint8)

    small_est = (c * _overlap_fraction(a, b, -SMALL, SMALL)).sum(axis=1) / safe_total
    fully_in = (c * ((a >= -SMALL) & (b <= SMALL))).sum(axis=1)
    touching = (c * ((b >= -SMALL) & (a <= SMALL))).sum(axis=1)
    small_quality = np.where(fully_in == touching, EXACT, ESTIMATED).astype(np.uint8)

    values = {
        "count": total,
        "mean": mean, "std": std, "min": vmin, "max": vmax, "max_abs": max_abs,
        "mean_abs": mean_abs, "l2": l2, "skewness": skew, "kurtosis": kurt,
        "zero_fraction": zero_fraction, "small_fraction": small_est, "nonfinite": nonfinite,
    }
    estimated = np.full(n, ESTIMATED, dtype=np.uint8)
    quality = {name: estimated for name in values}
    # The writer leaves out the values it could not bin.
    quality["count"] = np.where(nonfinite_rows, LOWER_BOUND, EXACT).astype(np.uint8)
    quality["zero_fraction"] = zero_quality
    quality["small_fraction"] = small_quality
    quality["nonfinite"] = np.where(nonfinite_counted > 0, EXACT, LOWER_BOUND).astype(np.uint8)
    quality["nonfinite"] = np.where(nonfinite_rows, quality["nonfinite"], EXACT).astype(np.uint8)
    for name in values:
        if name not in ("count", "nonfinite"):
            values[name] = np.where(has, values[name], np.nan)
            quality[name] = np.where(has & np.isfinite(values[name]), quality[name], NO_DATA).astype(np.uint8)
    add_std_rel_first(values, quality)
    first_wall = float(h.wall_times[0]) if len(h.wall_times) else None
    return MetricTable(steps=h.steps, values=values, quality=quality, first_wall=first_wall)


def add_std_rel_first(values: Dict[str, np.ndarray], quality: Dict[str, np.ndarray]) -> None:
    """Adds std relative to the first step with a positive, finite std."""
    std = values.get("std")
    if std is None or len(std) == 0:
        return
    ok = np.isfinite(std) & (std > 0)
    if not ok.any():
        values["std_rel_first"] = np.full(len(std), np.nan)
        quality["std_rel_first"] = np.zeros(len(std), dtype=np.uint8)
        return
    first = std[np.argmax(ok)]
    values["std_rel_first"] = std / first
    quality["std_rel_first"] = np.where(np.isfinite(std), quality["std"], NO_DATA).astype(np.uint8)


def update_ratio_from_histograms(update: MetricTable, weight: MetricTable) -> tuple:
    """||update|| / ||weight|| at the steps both were logged, from their L2 norms."""
    common, iu, iw = np.intersect1d(update.steps, weight.steps, return_indices=True)
    ratio = np.full(len(weight.steps), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio[iw] = update.values["l2"][iu] / weight.values["l2"][iw]
    quality = np.where(np.isfinite(ratio), ESTIMATED, NO_DATA).astype(np.uint8)
    return ratio, quality


def merge_exact(base: MetricTable, steps: np.ndarray, exact: Mapping[str, np.ndarray]) -> MetricTable:
    """Overlays exact values (from scalars or gradhealth summaries) on a table.

    Steps present in either side appear in the result; where both have a value,
    the exact one wins.
    """
    all_steps = np.union1d(base.steps, steps).astype(np.int64)
    n = len(all_steps)
    ib = np.searchsorted(all_steps, base.steps)
    ie = np.searchsorted(all_steps, steps)
    values: Dict[str, np.ndarray] = {}
    quality: Dict[str, np.ndarray] = {}
    for name in set(base.values) | set(exact):
        v = np.full(n, np.nan)
        q = np.zeros(n, dtype=np.uint8)
        if name in base.values:
            v[ib] = base.values[name]
            q[ib] = base.quality_of(name)
        if name in exact:
            ex = np.asarray(exact[name], dtype=np.float64)
            known = ~np.isnan(ex)
            v[ie[known]] = ex[known]
            q[ie[known]] = EXACT
        values[name] = v
        quality[name] = q
    if "std" in exact:
        add_std_rel_first(values, quality)
    return MetricTable(steps=all_steps, values=values, quality=quality)


def empty_table() -> MetricTable:
    return MetricTable(steps=np.zeros(0, dtype=np.int64), values={}, quality={})


def summarize_quality(codes: np.ndarray) -> Optional[str]:
    """One word for a set of quality codes: exact, estimated, mixed, or None if no data."""
    present = np.unique(codes[codes != NO_DATA])
    if len(present) == 0:
        return None
    if len(present) == 1:
        return QUALITY_NAMES[int(present[0])]
    if EXACT in present:
        return "mixed"
    return "estimated"


def bimodal_dip(h: Histograms, bins: int = 24) -> np.ndarray:
    """Per step: the deepest valley between two modes, as valley / lower peak.

    Buckets are re-binned to `bins` equal bins over each step's range so that
    30-bucket TF2 and 500-bucket PyTorch histograms are judged alike, as
    densities so that a bin collecting two source buckets is no peak. 1 means
    unimodal; near 0, two well-separated modes. A mode must reach a fifth of
    the tallest bin, so a stray tail bin is no mode.
    """
    n = h.left.shape[0]
    if n == 0:
        return np.ones(0)
    valid = (h.count > 0) & np.isfinite(h.left) & np.isfinite(h.right) & (h.right >= h.left)
    c = np.where(valid, h.count, 0.0)
    lo = np.where(valid, h.left, np.inf).min(axis=1)
    hi = np.where(valid, h.right, -np.inf).max(axis=1)
    span = np.where(np.isfinite(hi - lo) & (hi > lo), hi - lo, 1.0)
    base = np.where(np.isfinite(lo), lo, 0.0)
    mid = np.where(valid, (h.left + h.right) / 2, 0.0)
    idx = np.clip(((mid - base[:, None]) / span[:, None] * bins).astype(np.int64), 0, bins - 1)
    rows = np.repeat(np.arange(n), h.left.shape[1])
    counts = np.zeros((n, bins))
    widths = np.zeros((n, bins))
    np.add.at(counts, (rows, idx.ravel()), c.ravel())
    np.add.at(widths, (rows, idx.ravel()), np.where(valid, h.right - h.left, 0.0).ravel())
    with np.errstate(divide="ignore", invalid="ignore"):
        density = np.where(widths > 0, counts / widths, counts)
    floor = 0.2 * density.max(axis=1, keepdims=True)
    peak_ok = (density > 0) & (density >= floor)
    best = np.ones(n)
    for i in range(bins - 2):  # a fixed number of bins; every step at once
        # valley[:, k] = lowest bin strictly between i and j = i + 2 + k
        valley = np.minimum.accumulate(density[:, i + 1:bins - 1], axis=1)
        right = density[:, i + 2:]
        peak = np.minimum(density[:, i:i + 1], right)
        ok = peak_ok[:, i:i + 1] & peak_ok[:, i + 2:]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(ok, valley / peak, 1.0)
        best = np.minimum(best, ratio.min(axis=1))
    return best
