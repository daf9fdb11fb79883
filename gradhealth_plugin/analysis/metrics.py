"""Per-step statistics of a tensor, from histogram buckets or exact summaries.

Everything here is a pure function over whole numpy arrays: one call computes a
metric for every logged step of a tag at once.

Estimates from buckets assume values spread uniformly inside each bucket, which
is exact for the count, exact for min/max only when the writer put the data's
range on the outer edges (TF2 does), and an estimate within a bucket width for
everything else. Where a bucket straddles zero wider than `SMALL` on
either side, the zero fraction can only be bounded from above; such values carry the quality
``upper_bound``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Collection, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

# Quality codes of a metric value.
NO_DATA = 0
EXACT = 1
ESTIMATED = 2
UPPER_BOUND = 3
LOWER_BOUND = 4
# Only in answers, never in a table: a statistic of the finite values alone, at a step whose tensor
# held NaN or Inf (`shown_quality`).
FINITE_ONLY = 5
# Only in answers, never in a table: an update ratio whose lower bound is 0 (`update_ratio_lower_bound`: the
# weights' histograms show no change bigger than they resolve). A ratio is never negative, so such a bound
# proves nothing: the value is not judged, and the tab shows it so, never as a very low ratio.
NOT_JUDGED = 6
QUALITY_NAMES = ("no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only", "not_judged")
# Codes that say what a cell is rather than how its value was had: a heatmap's summary of its values
# counts them only where they are all there is (`present_qualities`).
_ASIDE = (FINITE_ONLY, NOT_JUDGED)


def proves(quality: np.ndarray, above: bool) -> np.ndarray:
    """Where a value of `quality` can prove a rule's line crossed: a rule firing above its line is proven
    only by a value known above it (exact, estimated, or a lower bound), one firing below only by a value
    known below it (an upper bound, not a lower one). An upper bound above the line proves nothing."""
    return np.asarray(quality) != (UPPER_BOUND if above else LOWER_BOUND)


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
    """Metric values (N,) with a quality code per value; NaN where no data.

    `stack_tables` makes one of several equally long tables, every array then
    (rows, N): the analysis judges a run's layers together that way. The
    `DERIVED` statistics are not held: `get` and `quality_of` compute them.
    """

    steps: np.ndarray
    values: Dict[str, np.ndarray]
    quality: Dict[str, np.ndarray]
    # Wall time of the first kept step: tags written one after the other in a
    # training loop carry the model's order in it.
    first_wall: Optional[float] = None
    # Per row, the std `std_rel_first` is relative to where that is not the first finite one
    # of the std column (`judged` leaves it out where the tensor held NaN or Inf): of shape () for one
    # tensor, (rows,) for stacked tables. None: the std column's own.
    std_first: Optional[np.ndarray] = None

    def get(self, name: str) -> np.ndarray:
        if name in self.values:
            return self.values[name]
        if name in DERIVED and "std" in self.values:
            return derived(self, name)[0]
        return np.full(np.shape(self.steps), np.nan)

    def quality_of(self, name: str) -> np.ndarray:
        if name in self.quality:
            return self.quality[name]
        if name in DERIVED and "std" in self.values:
            return derived(self, name)[1]
        return np.zeros(np.shape(self.steps), dtype=np.uint8)

    def has(self, name: str) -> bool:
        """Whether the table holds `name`, or derives it from a column it holds."""
        return name in self.values or (name in DERIVED and "std" in self.values)


# Statistics a table computes from its std column when asked rather than holds: a column of float64
# values and one of quality codes fewer per tensor, 9 bytes per logged step (45 MB on a run of
# 1,000 tensors x 5,000 kept steps), for a few array passes over the rows a request reads.
DERIVED = frozenset({"std_rel_first"})
# The columns a derived statistic is computed from, and those its answers read (`shown_quality`).
DERIVED_FROM = ("std", "nonfinite")


def first_stds(std: np.ndarray) -> np.ndarray:
    """Per row (the last axis), the first finite std, the one growth is measured from; NaN for a row
    without one, or whose first is 0: a tensor constant where first logged (a bias or a norm scale at its
    initial value, whatever its name says) has no spread to grow from, so its growth is not judged."""
    if std.shape[-1] == 0:
        return np.full(std.shape[:-1], np.nan)
    ok = np.isfinite(std)
    first = np.take_along_axis(std, np.argmax(ok, axis=-1)[..., None], axis=-1)[..., 0]
    return np.where(ok.any(axis=-1) & (first > 0), first, np.nan)


def derived(table: MetricTable, name: str) -> tuple:
    """(values, quality) of the `DERIVED` statistic `name` of a table holding a std column."""
    if name != "std_rel_first":
        raise KeyError(name)
    return std_rel_first(table)


def std_rel_first(table: MetricTable) -> tuple:
    """(values, quality) of `std_rel_first`: each row's std over its first finite std (`first_stds`,
    `MetricTable.std_first` where set). NaN, no data, where that is not finite: a row without such a
    std or whose first is 0, a step without a std."""
    std = table.values["std"]
    first = table.std_first if table.std_first is not None else first_stds(std)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        rel = std / np.expand_dims(first, -1)
    known = np.isfinite(rel)
    return np.where(known, rel, np.nan), np.where(known, table.quality_of("std"), NO_DATA).astype(np.uint8)


# What still speaks for a tensor at a step where it held NaN or Inf: how many values it had and how
# many of them were not finite. Every other statistic there is of the finite values left, whatever
# they are (zeros, a few survivors): the `nonfinite` finding's step alone, no other rule judges it.
SPEAKS_AT_NONFINITE = frozenset({"count", "nonfinite"})


def nonfinite_steps(table: MetricTable, at: Union[slice, tuple] = slice(None)) -> np.ndarray:
    """Where the tensor held NaN or Inf (the table's shape, so also for stacked tables), at its steps `at`
    (of a stacked table: its rows and steps)."""
    return _held_nonfinite(table.get("nonfinite")[at])


def _held_nonfinite(counts: np.ndarray) -> np.ndarray:
    """Where `nonfinite` counts say NaN or Inf was held: above 0 (NaN, no count, compares false)."""
    return np.greater(counts, 0)


def judged(table: MetricTable) -> MetricTable:
    """The table as the rules judge it: at a step whose tensor held NaN or Inf every statistic but
    `SPEAKS_AT_NONFINITE` is NaN (not judged). The table itself where it never held one."""
    bad = nonfinite_steps(table)
    if not bad.any():
        return table
    values = {name: v if name in SPEAKS_AT_NONFINITE else np.where(bad, np.nan, v) for name, v in table.values.items()}
    quality = {name: q if name in SPEAKS_AT_NONFINITE else np.where(bad, NO_DATA, q).astype(np.uint8)
               for name, q in table.quality.items()}
    # Growth stays measured from the first std logged, also where that step is no longer judged.
    std_first = table.std_first
    if std_first is None and "std" in table.values:
        std_first = first_stds(table.values["std"])
    return MetricTable(steps=table.steps, values=values, quality=quality, first_wall=table.first_wall,
                       std_first=std_first)


def shown_quality(table: MetricTable, name: str, at: Union[slice, tuple] = slice(None)) -> np.ndarray:
    """`quality_of(name)[at]` for an answer: `FINITE_ONLY` where the tensor held NaN or Inf and the value
    (if any) is of its finite values alone, so "max |x| 0" there never reads as the tensor's truth.
    Also where it has no value there (every value NaN/Inf): such a step held data, and the tab marks
    it as NaN/Inf, never as "no data". `NOT_JUDGED` where an update ratio's lower bound is 0.
    `at`: the steps answered (a zoom's window)."""
    quality = _finite_only(table.quality_of(name)[at], lambda: table.get("nonfinite")[at], name)
    return _not_judged(quality, lambda: table.get(name)[at], name)


def shown_qualities(tables: Sequence[MetricTable], name: str, at: slice = slice(None)) -> np.ndarray:
    """`shown_quality` of tables logged at the same steps, a row each, in one pass over the rows."""
    quality = np.array([t.quality_of(name)[at] for t in tables], dtype=np.uint8).reshape(len(tables), -1)
    nonfinite = lambda: np.array([t.get("nonfinite")[at] for t in tables], dtype=np.float64).reshape(quality.shape)
    values = lambda: np.array([t.get(name)[at] for t in tables], dtype=np.float64).reshape(quality.shape)
    return _not_judged(_finite_only(quality, nonfinite, name), values, name)


def _not_judged(quality: np.ndarray, values: Callable[[], np.ndarray], name: str) -> np.ndarray:
    """`quality` with `NOT_JUDGED` where an update ratio is a lower bound of 0 (`values`, read only then)."""
    bound = quality == LOWER_BOUND
    if name != "update_ratio" or not bound.any():
        return quality
    return np.where(bound & (values() == 0), NOT_JUDGED, quality).astype(np.uint8)


def _finite_only(quality: np.ndarray, nonfinite: Callable[[], np.ndarray], name: str) -> np.ndarray:
    """`quality` with `FINITE_ONLY` where the `nonfinite` counts (read only for a metric they concern) say so."""
    if name in SPEAKS_AT_NONFINITE:
        return quality
    bad = _held_nonfinite(nonfinite())
    if not bad.any():
        return quality
    return np.where(bad, FINITE_ONLY, quality).astype(np.uint8)


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


as_buckets = _as_buckets  # for the cell route's buckets, read the same way as the metrics read them


def buckets_problem(shape: Sequence[int]) -> Optional[str]:
    """Why a tensor of this shape holds no histogram buckets, or None: ``[k, 3]`` buckets, or 3k numbers in a row,
    as `as_buckets` reads them."""
    if (len(shape) == 2 and shape[1] == 3) or (len(shape) == 1 and shape[0] % 3 == 0):
        return None
    return f"has shape {list(shape)}, not [k, 3] histogram buckets"


# What makes a histogram's buckets no histogram at all, by the code `malformed` gives (0: nothing). No
# writer logs such buckets; reading the rest of them as the data would draw a distribution nobody logged.
MALFORMED = ("", "NaN counts", "infinite counts", "negative counts", "bucket edges decrease")


def malformed(left: np.ndarray, right: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Per row of (N, K) buckets, the `MALFORMED` code of what makes it no histogram, 0 where nothing does.

    A count that is NaN, infinite or negative counts nothing; a bucket holding values
    whose right edge lies below its left edge holds them nowhere. Empty buckets may
    be anything (the Rust loader's first bucket of a v1 histogram runs backwards,
    empty), and NaN or Inf edges are what TensorFlow writes for a tensor holding NaN
    or Inf: neither is malformed. The first code in `MALFORMED`'s order wins.
    """
    with np.errstate(invalid="ignore"):
        backwards = (count > 0) & np.isfinite(left) & np.isfinite(right) & (left > right)
        found = (np.isnan(count), np.isinf(count), count < 0, backwards)
    codes = np.zeros(len(count), dtype=np.uint8)
    for code in range(len(found), 0, -1):
        codes = np.where(found[code - 1].any(axis=1), np.uint8(code), codes)
    return codes


def stack_histograms(steps: Sequence[int], wall_times: Sequence[float], arrays: Sequence[np.ndarray]) -> Histograms:
    """Pads ragged ``[k_i, 3]`` bucket arrays into one (N, K) batch; anything else reads as no buckets.

    `arrays` may be one array, the N tensors stacked along its first axis.
    """
    n = len(arrays)
    shapes = {arrays.shape[1:]} if isinstance(arrays, np.ndarray) else {getattr(a, "shape", None) for a in arrays}
    if len(shapes) == 1:
        (shape,) = shapes
        if shape is not None and len(shape) == 2 and shape[0] > 0 and shape[1] == 3:
            # Every step has the same [k, 3] buckets (TF2 always does): one copy, no padding.
            planes = np.moveaxis(np.asarray(arrays, dtype=np.float64), 2, 0).copy()
            lo, hi = written_range(planes[0], planes[1])
            return Histograms(
                steps=np.asarray(steps, dtype=np.int64),
                wall_times=np.asarray(wall_times, dtype=np.float64),
                left=planes[0], right=planes[1], count=planes[2], lo=lo, hi=hi,
            )
    shaped = [_as_buckets(a) for a in arrays]
    lengths = np.fromiter((a.shape[0] for a in shaped), dtype=np.int64, count=n)
    k = int(lengths.max()) if n else 0
    padded = np.zeros((n, max(k, 1), 3))
    for i, a in enumerate(shaped):  # one block copy per step: cheaper than scattering every bucket
        padded[i, :len(a)] = a
    left, right, count = np.moveaxis(padded, 2, 0).copy()
    lo, hi = written_range(left, right, np.arange(left.shape[1]) < lengths[:, None])
    return Histograms(
        steps=np.asarray(steps, dtype=np.int64),
        wall_times=np.asarray(wall_times, dtype=np.float64),
        left=left, right=right, count=count, lo=lo, hi=hi,
    )


def written_range(left: np.ndarray, right: np.ndarray, real: Optional[np.ndarray] = None) -> tuple:
    """Per row, the range the writer put its values in: (lo, hi), NaN without a finite bucket.

    lo is the left edge of the bucket with the lowest right edge, hi the right
    edge of the bucket with the highest left edge: the first and the last
    bucket of a sorted histogram, found without relying on the order. For a v1
    histogram the Rust loader starts with a degenerate bucket [min, limit_0]
    (left > right) and ends with [limit, max], so these are the data's min and
    max. `real` masks out padding.
    """
    if real is None and left.size and np.isfinite(left[:, 0]).all() and np.isfinite(right[:, -1]).all():
        # Every writer's usual output, sorted buckets between finite ends, in two passes.
        with np.errstate(invalid="ignore"):
            ordered = (left <= right).all() and (right[:, :-1] <= left[:, 1:]).all()
        if ordered:
            return left[:, 0].copy(), right[:, -1].copy()
    finite = np.isfinite(left) & np.isfinite(right)
    if real is not None:
        finite &= real
    low_right = np.where(finite, right, np.inf).min(axis=1, keepdims=True)
    high_left = np.where(finite, left, -np.inf).max(axis=1, keepdims=True)
    lo = np.where(finite & (right == low_right), left, np.inf).min(axis=1)
    hi = np.where(finite & (left == high_left), right, -np.inf).max(axis=1)
    has = finite.any(axis=1)
    return np.where(has, lo, np.nan), np.where(has, hi, np.nan)


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


def _uniform_power_sums(a: np.ndarray, b: np.ndarray, kmax: int) -> list:
    """[h_1, ..., h_kmax] with h_k = sum_j a^j b^(k-j), so that E[x^k] = h_k / (k + 1) for x uniform on [a, b].

    This is (b^(k+1) - a^(k+1)) / (b - a) with the division done algebraically:
    v1 grids put 1e-12-wide buckets next to zero, and far from the mean the
    difference of powers cancels to noise (std off by 2% at mean 1e4). Built as
    h_k = b^k + a h_(k-1): a few multiplications per order, where a power
    function per term costs several times more on large runs. A point mass
    where a == b.
    """
    h = a + b
    out = [h]
    b_k = b
    for _ in range(kmax - 1):
        b_k = b_k * b
        h = b_k + a * h
        out.append(h)
    return out


def _compact_buckets(valid: np.ndarray, kept: np.ndarray, *arrays: np.ndarray) -> tuple:
    """Moves each row's valid buckets to the front and drops the columns no row uses.

    v1 histograms (PyTorch, tensorboardX) come on a fixed exponential grid of
    several hundred buckets, most of them empty, and every metric costs per
    bucket. `kept` is the number of valid buckets per row; invalid buckets must
    already carry zero count and edges.
    """
    width = int(kept.max()) if kept.size else 0
    if width >= 0.75 * valid.shape[1]:
        return (valid,) + arrays
    order = np.argsort(~valid, axis=1, kind="stable")[:, :max(width, 1)]
    return tuple(np.take_along_axis(x, order, axis=1) for x in (valid,) + arrays)


def _overlap_fraction(a: np.ndarray, b: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Share of a uniform [a, b] bucket lying inside [lo, hi]."""
    width = b - a
    inside = np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = inside / width
    point = ((a >= lo) & (a <= hi)).astype(np.float64)
    return np.where(width > 0, share, point)


def _row_sums(n: int, rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return np.bincount(rows, weights=weights, minlength=n)[:n].astype(np.float64)


def histogram_metrics(h: Histograms, no_data: Optional[np.ndarray] = None) -> MetricTable:
    """Estimates every metric at every step of `h` from its buckets; a step where `no_data` (a mask) is set
    has none, its count and non-finite count included (its histogram is no histogram: `malformed`).

    Large runs have hundreds of tags x hundreds of steps x 30-500 buckets, so
    the work per bucket is kept to a few dozen array passes: the rare cases
    (non-finite values, legacy point masses, buckets at zero or within 1e-6 of
    it) are computed on just the buckets they concern.

    A value that overflows (edges near 1e308) is no estimate: it becomes NaN
    with quality ``no_data``, so every value is finite or NaN.
    """
    # Overflow and 0/0 are expected on hostile buckets and handled below, not reported.
    if no_data is not None and no_data.any():
        h = emptied(h, no_data)  # nothing is computed from buckets that are not the data
    else:
        no_data = None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return _histogram_metrics(h, no_data)


def emptied(h: Histograms, rows: np.ndarray) -> Histograms:
    """`h` with every bucket of the `rows` (a mask) empty, as a tensor of no buckets reads."""
    keep = ~rows[:, None]
    return dataclasses.replace(h, left=np.where(keep, h.left, 0.0), right=np.where(keep, h.right, 0.0),
                               count=np.where(keep, h.count, 0.0))


# The metrics buckets give, in the order their table lists them.
_HISTOGRAM_METRICS = ("count", "mean", "std", "min", "max", "max_abs", "mean_abs", "l2", "skewness", "kurtosis",
                      "zero_fraction", "small_fraction", "nonfinite")


def _histogram_metrics(h: Histograms, no_data: Optional[np.ndarray]) -> MetricTable:
    n = len(h.steps)
    edges_finite = np.isfinite(h.left) & np.isfinite(h.right)
    valid, c, a, b = _usable_buckets(h, edges_finite)
    total = c.sum(axis=1)
    has = total > 0
    safe_total = np.where(has, total, 1.0)
    nonfinite_rows = ~edges_finite.all(axis=1)
    nonfinite_counted = _nonfinite_counted(h, nonfinite_rows)
    nonfinite = np.where(nonfinite_rows, np.maximum(nonfinite_counted, 1.0), 0.0)
    raw1, raw2 = _uniform_power_sums(a, b, 2)
    moments, extremes = _moments(c, a, b, raw1, raw2, safe_total), _extremes(valid, a, b)
    near_zero, quality = _near_zero(n, valid, c, a, b, raw1, safe_total)
    parts = {"count": total, **moments, **extremes, **near_zero, "nonfinite": nonfinite}
    values = {name: parts[name] for name in _HISTOGRAM_METRICS}
    estimated = np.full(n, ESTIMATED, dtype=np.uint8)
    quality = {**{name: estimated for name in values}, **quality}
    # The writer leaves out the values it could not bin.
    quality["count"] = np.where(nonfinite_rows, LOWER_BOUND, EXACT).astype(np.uint8)
    quality["nonfinite"] = np.where(nonfinite_counted > 0, EXACT, LOWER_BOUND).astype(np.uint8)
    quality["nonfinite"] = np.where(nonfinite_rows, quality["nonfinite"], EXACT).astype(np.uint8)
    for name in values:
        known = np.isfinite(values[name]) if name in ("count", "nonfinite") else has & np.isfinite(values[name])
        if no_data is not None:
            known &= ~no_data
        values[name] = np.where(known, values[name], np.nan)
        quality[name] = np.where(known, quality[name], NO_DATA).astype(np.uint8)
    first_wall = float(h.wall_times[0]) if len(h.wall_times) else None
    return MetricTable(steps=h.steps, values=values, quality=quality, first_wall=first_wall)


def _usable_buckets(h: Histograms, edges_finite: np.ndarray) -> tuple:
    """(valid, count, left, right): the buckets that carry data, compacted, invalid ones zeroed."""
    # Empty padding, zero and negative counts, and degenerate buckets (left > right,
    # as the Rust loader reports for v1 histograms) carry no data.
    valid = edges_finite & np.isfinite(h.count) & (h.count > 0) & (h.right >= h.left)
    left, right = (clamp_to_range(h.left, h.right, h.lo, h.hi) if h.lo is not None and h.hi is not None
                   else (h.left, h.right))
    c = np.where(valid, h.count, 0.0)
    a = np.where(valid, left, 0.0)
    b = np.where(valid, right, 0.0)
    kept = valid.sum(axis=1)
    valid, c, a, b = _compact_buckets(valid, kept, c, a, b)
    # TensorBoard's TF2 histogram before its fixed-shape rewrite (late 2021) wrote
    # a tensor whose values are all equal as the lone bucket [v - 0.5, v + 0.5].
    # Read as a spread it invents std 0.29 and |max| 0.5, and an all-zero
    # (vanished) gradient looks alive; it is the point mass v.
    lone_rows = np.flatnonzero(kept == 1)
    if len(lone_rows):
        la, lb, lv = a[lone_rows], b[lone_rows], valid[lone_rows]
        centre = (la + lb) / 2
        legacy = lv & (np.abs(lb - la - 1.0) <= 4 * np.finfo(np.float64).eps * np.maximum(1.0, np.abs(centre)))
        a[lone_rows] = np.where(legacy, centre, la)
        b[lone_rows] = np.where(legacy, centre, lb)
    return valid, c, a, b


def _nonfinite_counted(h: Histograms, nonfinite_rows: np.ndarray) -> np.ndarray:
    """Non-finite values the buckets count, per step.

    A non-finite edge means the writer saw NaN or Inf. TF2 then writes NaN
    edges with zero counts, so the number of such values is only bounded below.
    """
    if not nonfinite_rows.any():
        return np.zeros(len(h.steps))
    # Only a bucket with no finite edge can count non-finite values: one finite
    # edge ([min, inf] from TF2 or the v1 migration) holds the finite values the
    # writer could bin, with the infinite ones left out.
    no_finite_edge = ~(np.isfinite(h.left) | np.isfinite(h.right))
    return np.where(no_finite_edge & np.isfinite(h.count) & (h.count > 0), h.count, 0.0).sum(axis=1)


def _moments(c, a, b, raw1, raw2, safe_total) -> Dict[str, np.ndarray]:
    """mean, std, skewness, kurtosis and L2 norm of values spread evenly inside each bucket."""
    mean = (c * raw1).sum(axis=1) / 2 / safe_total
    da = a - mean[:, None]
    db = b - mean[:, None]
    h2, h3, h4 = _uniform_power_sums(da, db, 4)[1:]
    m2 = (c * h2).sum(axis=1) / 3 / safe_total
    m3 = (c * h3).sum(axis=1) / 4 / safe_total
    m4 = (c * h4).sum(axis=1) / 5 / safe_total
    var = np.maximum(m2, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(var > 0, m3 / var ** 1.5, np.nan)
        kurt = np.where(var > 0, m4 / var ** 2 - 3.0, np.nan)
    l2 = np.sqrt(np.maximum((c * raw2).sum(axis=1) / 3, 0.0))
    return {"mean": mean, "std": np.sqrt(var), "l2": l2, "skewness": skew, "kurtosis": kurt}


def _extremes(valid, a, b) -> Dict[str, np.ndarray]:
    big = np.finfo(np.float64).max
    vmin = np.where(valid, a, big).min(axis=1)
    vmax = np.where(valid, b, -big).max(axis=1)
    return {"min": vmin, "max": vmax, "max_abs": np.maximum(np.abs(vmin), np.abs(vmax))}


def _near_zero(n: int, valid, c, a, b, raw1, safe_total) -> tuple:
    """({mean_abs, zero_fraction, small_fraction}, their qualities): the metrics the buckets at zero decide."""
    # E|x| is |centre| for a bucket on one side of zero; the (at most few)
    # buckets containing zero are corrected below.
    abs_sum = (c * np.abs(raw1)).sum(axis=1) / 2
    # Zero fraction: buckets [0, 0] hold exact zeros, and so, to within SMALL, does a bucket at zero no wider
    # than that on either side (PyTorch's and TF1's grid: [0, 1e-12]); a wider bucket at zero (TF2's
    # [0, max/30]) holds small values too and bounds it from above only.
    zr, zc = np.nonzero(valid & (a <= 0) & (b >= 0))
    za, zb, zw = a[zr, zc], b[zr, zc], c[zr, zc]
    straddle_zero = _row_sums(n, zr, zw)
    exact_zero = _row_sums(n, zr, zw * ((za >= -SMALL) & (zb <= SMALL)))
    inside = (za < 0) & (zb > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        e_abs = np.where(inside, (za * za + zb * zb) / (2 * (zb - za)), 0.0)
    abs_sum += _row_sums(n, zr, zw * np.where(inside, e_abs - np.abs(za + zb) / 2, 0.0))

    sr, sc = np.nonzero(valid & (b >= -SMALL) & (a <= SMALL))
    sa, sb, sw = a[sr, sc], b[sr, sc], c[sr, sc]
    small_est = _row_sums(n, sr, sw * _overlap_fraction(sa, sb, -SMALL, SMALL)) / safe_total
    fully_in = _row_sums(n, sr, sw * ((sa >= -SMALL) & (sb <= SMALL)))
    touching = _row_sums(n, sr, sw)
    values = {"mean_abs": abs_sum / safe_total, "zero_fraction": straddle_zero / safe_total,
              "small_fraction": small_est}
    quality = {"zero_fraction": np.where(straddle_zero == exact_zero, EXACT, UPPER_BOUND).astype(np.uint8),
               "small_fraction": np.where(fully_in == touching, EXACT, ESTIMATED).astype(np.uint8)}
    return values, quality


def update_ratio_from_histograms(update: MetricTable, weight: MetricTable) -> tuple:
    """||update|| / ||weight|| at the steps both were logged, from their L2 norms."""
    common, iu, iw = np.intersect1d(update.steps, weight.steps, return_indices=True)
    ratio = np.full(len(weight.steps), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio[iw] = update.values["l2"][iu] / weight.values["l2"][iw]
    quality = np.where(np.isfinite(ratio), ESTIMATED, NO_DATA).astype(np.uint8)
    return ratio, quality


def l2_bounds(h: Histograms) -> tuple:
    """Per step, (smallest, largest) L2 norm that values lying inside their buckets can have.

    Every value lies in its bucket (TF2 and v1 writers bin by these edges), so
    sum(count * min x^2) <= ||w||^2 <= sum(count * max x^2) over the buckets: a
    proven interval, unlike the uniform estimate in `histogram_metrics`. The
    edges are widened by 1e-9 of the largest |edge| for the writers' rounding.
    NaN where a value could not be binned (non-finite) or there is no bucket.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        edges_finite = np.isfinite(h.left) & np.isfinite(h.right)
        valid, c, a, b = _usable_buckets(h, edges_finite)
        slack = 1e-9 * np.max(np.maximum(np.abs(a), np.abs(b)), axis=1, initial=0.0)[:, None]
        a, b = a - slack, b + slack
        a2, b2 = a * a, b * b
        low = np.where((a <= 0) & (b >= 0), 0.0, np.minimum(a2, b2))
        high = np.sqrt((c * np.maximum(a2, b2)).sum(axis=1))
        low = np.sqrt((c * low).sum(axis=1))
    known = valid.any(axis=1) & edges_finite.all(axis=1) & np.isfinite(high)
    return np.where(known, low, np.nan), np.where(known, high, np.nan)


def update_ratio_lower_bound(weight: MetricTable) -> tuple:
    """(ratio, quality) per logged step of a weight row with no update tags: a lower bound.

    With r_k = ||u_k|| / ||w_k|| the update-to-weight ratio of each step k
    between two logged steps t1 < t2 (n = t2 - t1 steps), the triangle
    inequality gives ||w_k|| (1 - r_k) <= ||w_k+1|| <= ||w_k|| (1 + r_k), so
    over the n steps:
      growth, g = ||w2|| / ||w1|| > 1:  mean r_k >= g^(1/n) - 1  (mean >= geometric mean);
      shrink, q = ||w2|| / ||w1|| < 1:  mean r_k >= (1 - q) / n  (prod(1 - r_k) >= 1 - sum r_k).
    The norms are the interval the buckets prove (`l2_bounds`), or exact where
    logged, each taken at the end that makes the bound smallest. So the value
    at t2 is a proven lower bound of the mean update ratio per step between the
    two logged steps; NaN at the first step and without bounds or exact norms.
    """
    ratio, quality = update_ratio_lower_bounds([weight])
    return ratio[0], quality[0]


def update_ratio_lower_bounds(weights: Sequence[MetricTable]) -> tuple:
    """`update_ratio_lower_bound` of equally long weight tables at once: (ratio, quality), a row each.

    A run of thousands of kernels pays a dozen numpy calls in all, not per layer.
    """
    rows, n = len(weights), (len(weights[0].steps) if weights else 0)
    ratio = np.full((rows, n), np.nan)
    if n < 2:
        return ratio, np.zeros((rows, n), dtype=np.uint8)
    exact = np.array([w.quality_of("l2") for w in weights]) == EXACT
    l2 = np.array([w.get("l2") for w in weights], dtype=np.float64)
    low = np.where(exact, l2, np.array([w.get("l2_low") for w in weights], dtype=np.float64))
    high = np.where(exact, l2, np.array([w.get("l2_high") for w in weights], dtype=np.float64))
    gap = np.diff(np.array([w.steps for w in weights], dtype=np.int64), axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        grew = low[:, 1:] / high[:, :-1]
        shrank = high[:, 1:] / low[:, :-1]
        bound = np.where(grew > 1, grew ** (1 / gap) - 1, np.where(shrank < 1, (1 - shrank) / gap, 0.0))
        known = np.isfinite(grew) & np.isfinite(shrank) & (gap > 0)
    ratio[:, 1:] = np.where(known & np.isfinite(bound), bound, np.nan)
    quality = np.where(np.isfinite(ratio), LOWER_BOUND, NO_DATA).astype(np.uint8)
    return ratio, quality


def merge_exact(base: MetricTable, steps: np.ndarray, exact: Mapping[str, np.ndarray]) -> MetricTable:
    """Overlays exact values (from scalars or gradhealth summaries) on a table.

    Steps present in either side appear in the result; where both have a value,
    the exact one wins.
    """
    steps = np.asarray(steps, dtype=np.int64)
    if len(base.steps) == 0 and np.all(steps[1:] > steps[:-1]):
        return _exact_table(steps, exact)
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
    # An exact std moves the std the growth is measured from; else the base's stays.
    return MetricTable(steps=all_steps, values=values, quality=quality,
                       std_first=None if "std" in exact else base.std_first)


def _exact_table(steps: np.ndarray, exact: Mapping[str, np.ndarray]) -> MetricTable:
    """`merge_exact` onto no rows, for steps already ascending and unique: the values are kept as they
    are rather than copied (a long run's own summaries would otherwise be held twice while its tables
    are built), as read-only views, so that no table can write into what another holds. A column
    with no gap, or nothing but gaps, has one quality code, held once."""
    values: Dict[str, np.ndarray] = {}
    quality: Dict[str, np.ndarray] = {}
    for name, ex in exact.items():
        v = np.asarray(ex, dtype=np.float64).view()
        v.flags.writeable = False
        values[name] = v
        gaps = np.isnan(v)
        quality[name] = (np.where(gaps, NO_DATA, EXACT).astype(np.uint8) if 0 < gaps.sum() < len(v)
                         else np.broadcast_to(np.uint8(NO_DATA if len(v) and gaps[0] else EXACT), v.shape))
    return MetricTable(steps=steps, values=values, quality=quality)


def empty_table() -> MetricTable:
    return MetricTable(steps=np.zeros(0, dtype=np.int64), values={}, quality={})


def stack_tables(tables: Sequence[MetricTable], only: Optional[Collection[str]] = None) -> MetricTable:
    """Equally long tables as one, a row each: every metric any of them has (of `only`, if given), NaN (no
    data) where one lacks it.

    The quality codes are stacked too where any table has them (the rules read them: a lower bound
    under a floor proves nothing); answers read each table's own.
    """
    names = dict.fromkeys(name for t in tables for name in t.values if only is None or name in only)
    if not tables:
        return MetricTable(steps=np.zeros(0, dtype=np.int64), values={}, quality={})
    shape = (len(tables), len(tables[0].steps))
    missing = np.full(shape[1], np.nan)

    def column(name: str) -> np.ndarray:
        # One concatenation and a reshape: about half what building the 2-D array row by row costs.
        rows = np.concatenate([t.values.get(name, missing) for t in tables])
        return rows.astype(np.float64, copy=False).reshape(shape)

    def codes(name: str) -> np.ndarray:
        return np.concatenate([t.quality_of(name) for t in tables]).astype(np.uint8, copy=False).reshape(shape)

    qualities = dict.fromkeys(name for t in tables for name in t.quality if only is None or name in only)
    std_first = None
    if any(t.std_first is not None for t in tables):  # judged tables: each row keeps the std it is measured from
        std_first = np.array([first_stds(t.get("std")) if t.std_first is None else t.std_first for t in tables],
                             dtype=np.float64)
    return MetricTable(steps=np.concatenate([t.steps for t in tables]).astype(np.int64, copy=False).reshape(shape),
                       values={name: column(name) for name in names}, quality={name: codes(name) for name in qualities},
                       std_first=std_first)


def present_qualities(codes: np.ndarray) -> List[str]:
    """The names of the qualities among `codes`, in code order (exact, estimated, upper_bound,
    lower_bound): what a heatmap's values are, for the tab to word ("exact values and upper bounds").
    `FINITE_ONLY` (a NaN/Inf step's) and `NOT_JUDGED` count only where they are all there is: they say
    nothing of how the others were had."""
    return [QUALITY_NAMES[int(c)] for c in _present(codes)]


def _present(codes: np.ndarray) -> np.ndarray:
    """The codes among `codes` but no data, those `_ASIDE` only where nothing else is."""
    present = np.unique(codes[codes != NO_DATA])
    had = present[~np.isin(present, _ASIDE)]
    return had if len(had) else present


def summarize_quality(codes: np.ndarray) -> Optional[str]:
    """One word for a set of quality codes: exact, estimated, mixed, or None if no data. "mixed" is exact
    beside anything else (estimated values or bounds): `present_qualities` says which. `FINITE_ONLY` and
    `NOT_JUDGED` count only where they are all there is."""
    present = _present(codes)
    if len(present) == 0:
        return None
    if len(present) == 1:
        return QUALITY_NAMES[int(present[0])]
    if EXACT in present:
        return "mixed"
    return "estimated"


# Standard deviations of counting noise a valley and a peak are given (see `bimodal_dip`).
_DIP_Z = 2.0


def bimodal_dip(h: Histograms, bins: int = 24) -> np.ndarray:
    """Per step: the deepest valley between two modes, as valley / lower peak.

    Buckets are re-binned to `bins` equal bins over each step's range so that
    30-bucket TF2 and 500-bucket PyTorch histograms are judged alike, as
    densities so that a bin collecting two source buckets is no peak. 1 means
    unimodal; near 0, two well-separated modes; NaN, no valid bucket. A mode
    must reach a fifth of the tallest bin, so a stray tail bin is no mode.

    Counts are read as counts, with a counting noise of about their square
    root: a valley is the most its bin could hold (count + 2 sqrt(count)) over
    the least the lower peak could (count - 2 sqrt(count)). A flat histogram of
    a few thousand weights has bins that differ by twice as much by chance
    alone (the tallest of 24 noisy bins over the lowest), and none of it is a
    valley; two real clusters with an empty gap between them stay near 0.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return _bimodal_dip(h, bins)


def _bimodal_dip(h: Histograms, bins: int) -> np.ndarray:
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
    position = np.nan_to_num((mid - base[:, None]) / span[:, None] * bins, nan=0.0, posinf=bins - 1, neginf=0.0)
    idx = np.clip(position, 0, bins - 1).astype(np.int64)
    flat = (np.arange(n)[:, None] * bins + idx).ravel()
    counts = np.bincount(flat, weights=c.ravel(), minlength=n * bins).reshape(n, bins)
    widths = np.bincount(flat, weights=np.where(valid, h.right - h.left, 0.0).ravel(),
                         minlength=n * bins).reshape(n, bins)
    density = np.where(widths > 0, counts / widths, counts)
    # A bin no bucket reached holds nothing over its nominal width (for the noise below).
    per = np.where(widths > 0, widths, np.where(counts > 0, 1.0, span[:, None] / bins))
    noise = _DIP_Z * np.sqrt(np.maximum(counts, 1.0)) / per
    floor = 0.2 * density.max(axis=1, keepdims=True)
    modes = np.where((density > 0) & (density >= floor), np.maximum(density - noise, 0.0), 0.0)
    # Over all pairs of modes i < j, the lowest bin m between them over the lower
    # mode: for each valley bin m that is its density's upper bound over the
    # lower bound of the lower of the tallest mode left of it and right of it.
    left = np.maximum.accumulate(modes, axis=1)[:, :-2]
    right = np.maximum.accumulate(modes[:, ::-1], axis=1)[:, ::-1][:, 2:]
    peak = np.minimum(left, right)
    ratio = np.where(peak > 0, (density + noise)[:, 1:-1] / peak, 1.0)
    # No valid bucket, no verdict: 1 ("unimodal") would count as data and make an empty histogram look healthy.
    return np.where(valid.any(axis=1), np.minimum(ratio.min(axis=1), 1.0), np.nan)
