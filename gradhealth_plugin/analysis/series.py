"""Pure numpy helpers over metric series: runs, rolling baselines, spikes, periods.

Steps are the logged step numbers, uneven after TensorBoard's reservoir
sampling; nothing here assumes even spacing.
"""

from __future__ import annotations

import warnings

from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def true_runs(mask: np.ndarray, min_length: int = 1) -> List[Tuple[int, int]]:
    """(start, end) index pairs, inclusive, of runs of True at least `min_length` long."""
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return []
    padded = np.concatenate([[0], mask.astype(np.int8), [0]])
    edges = np.diff(padded)
    starts = np.nonzero(edges == 1)[0]
    ends = np.nonzero(edges == -1)[0] - 1
    keep = (ends - starts + 1) >= min_length
    return list(zip(starts[keep].tolist(), ends[keep].tolist()))


def sustained(mask: np.ndarray, min_length: int) -> List[Tuple[int, int]]:
    """Runs of at least `min_length` steps, or a shorter run that reaches the last step.

    A condition that starts near the end of what was logged is still reported:
    the training may have stopped because of it.
    """
    runs = true_runs(mask, 1)
    n = len(mask)
    return [(a, b) for a, b in runs if b - a + 1 >= min_length or (b == n - 1 and b - a + 1 >= min(2, n))]


def sustained_rows(mask: np.ndarray, min_length: int) -> np.ndarray:
    """`sustained` of each row of a 2-D mask, as a mask: the entries inside the runs it keeps."""
    mask = np.asarray(mask, dtype=bool)
    n = mask.shape[1]
    if n == 0:
        return mask.copy()
    idx = np.arange(n)
    # Per entry, where its run of True starts and ends: the latest break before it, the earliest after it.
    start = np.maximum.accumulate(np.where(mask, 0, idx + 1), axis=1)
    end = np.minimum.accumulate(np.where(mask, n - 1, idx - 1)[:, ::-1], axis=1)[:, ::-1]
    length = end - start + 1
    return mask & ((length >= min_length) | ((end == n - 1) & (length >= min(2, n))))


# Most window values built at once (float64): series are stacked into rows and cut
# into chunks of rows below this, so a long series or many rows never hold more.
_WINDOW_BUDGET = 1 << 21


def nanmedian_rows(win: np.ndarray) -> np.ndarray:
    """``np.nanmedian(win, axis=-1)``, the same values, without its per-call cost.

    numpy's nanmedian goes through masked arrays for small rows, about 1 ms a call
    whatever the size: for a run judged after every logged step (``stop_on``) that
    was most of the time. Sorting puts NaN last, so a row's median is the middle
    of its first k (finite-or-infinite) values.
    """
    win = np.asarray(win, dtype=np.float64)
    lead, width = win.shape[:-1], win.shape[-1]
    if width == 0:
        return np.full(lead, np.nan)
    win = win.reshape(-1, width)
    n = win.shape[0]
    ordered = np.sort(win, axis=1)
    k = np.sum(~np.isnan(win), axis=1)
    rows = np.arange(n)
    lo = ordered[rows, np.maximum(k - 1, 0) // 2]
    hi = ordered[rows, np.minimum(k // 2, win.shape[1] - 1)]
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(k > 0, np.where(k % 2 == 1, lo, (lo + hi) / 2), np.nan).reshape(lead)


def same_length(lengths: Sequence[int], points_per_value: int = 1) -> Iterator[np.ndarray]:
    """Indices of equally long series, group by group, in chunks of at most `_WINDOW_BUDGET`
    window values (a series of n values holding ``n * points_per_value`` of them).

    The per-series helpers below work along the last axis, so one call does a
    whole group stacked into rows: a run's layers usually share their steps,
    and a run of 10,000 layers is then a handful of numpy calls instead of
    10,000 times as many.
    """
    by_length: Dict[int, List[int]] = {}
    for i, n in enumerate(lengths):
        by_length.setdefault(int(n), []).append(i)
    for n, members in by_length.items():
        chunk = max(1, _WINDOW_BUDGET // max(1, n * points_per_value))
        for start in range(0, len(members), chunk):
            yield np.array(members[start:start + chunk], dtype=np.int64)


def stacked(rows: Sequence[np.ndarray], points_per_value: int = 1) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """(indices into `rows`, those rows as a 2-D float array) for each group of `same_length`."""
    for idx in same_length([len(row) for row in rows], points_per_value):
        n = len(rows[idx[0]])
        yield idx, np.array([rows[i] for i in idx], dtype=np.float64).reshape(len(idx), n)


def _pad(values: np.ndarray, before: int, after: int) -> np.ndarray:
    """NaN padding along the last axis."""
    lead = values.shape[:-1]
    return np.concatenate([np.full(lead + (before,), np.nan), values, np.full(lead + (after,), np.nan)], axis=-1)


def _centered_median(values: np.ndarray, half: int) -> Tuple[np.ndarray, np.ndarray]:
    """(median of each point's neighbours, their windows), along the last axis."""
    win = sliding_window_view(_pad(values, half, half), 2 * half + 1, axis=-1).copy()
    win[..., half] = np.nan
    # All-NaN windows (edges, gaps) are expected: their median is NaN, no warning wanted.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return nanmedian_rows(win), win


def centered_baseline(values: np.ndarray, half: int) -> Tuple[np.ndarray, np.ndarray]:
    """Rolling median and MAD of each point's neighbours, the point itself left out.

    Along the last axis: a 2-D array is one series per row.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.shape[-1] == 0:
        return values.copy(), values.copy()
    med, win = _centered_median(values, half)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mad = nanmedian_rows(np.abs(win - med[..., None]))
    return med, mad


def trailing_median(values: np.ndarray, window: int, min_points: int = 3) -> np.ndarray:
    """Median of the previous `window` points (NaN until `min_points` exist), along the last axis."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[-1]
    if n == 0:
        return values.copy()
    win = sliding_window_view(_pad(values, window, 0), window, axis=-1)[..., :n, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = nanmedian_rows(win)
    enough = np.sum(~np.isnan(win), axis=-1) >= min_points
    return np.where(enough, med, np.nan)


def noise_scale(values: np.ndarray, half: int) -> np.ndarray:
    """Robust standard deviation around zero of the values within `half` points of each point.

    A MAD over a handful of neighbours is too unsteady for a z-score: one
    window in twenty has less than half the true spread, so ordinary noise
    scores z > 6. This takes a wide window, drops values beyond 3 MADs (the
    outliers being looked for) and returns the RMS of the rest, corrected for
    the clipping. Noise changes slowly, so the scale is computed every
    ``half // 5`` points and held in between to keep long series cheap.
    Along the last axis.
    """
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[-1]
    if n == 0:
        return values.copy()
    stride = _noise_stride(half)
    centres = np.minimum(np.arange(0, n, stride) + stride // 2, n - 1)
    win = np.abs(sliding_window_view(_pad(values, half, half), 2 * half + 1, axis=-1)[..., centres, :])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mad = 1.4826 * nanmedian_rows(win)
        kept = np.where(win <= 3 * mad[..., None], win, np.nan)
        # 0.9866: the standard deviation of a normal distribution clipped at 3 sigma.
        rms = np.sqrt(np.nanmean(kept ** 2, axis=-1)) / 0.9866
    return np.repeat(rms, stride, axis=-1)[..., :n]


def _noise_stride(half: int) -> int:
    return max(1, half // 5)


def _side_baseline(logv: np.ndarray, width: int) -> np.ndarray:
    """The higher of two medians: of the `width` points before each point and of the `width` after it
    (the one side there is at an end, or where the other is all gaps), along the last axis.

    A value must stand above both sides to be a spike: a level shift, down or
    up, has one side at its own level, so neither its last value before nor its
    first after reads as an outlier, as against a centred median half made of
    the other level. Each side takes a whole window: the higher of two medians
    of half a window of noisy points sits well above the series' level and hides spikes.
    """
    win = sliding_window_view(_pad(logv, width, width), 2 * width + 1, axis=-1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # fmax keeps the known side where the other is NaN.
        return np.fmax(nanmedian_rows(win[..., :width]), nanmedian_rows(win[..., width + 1:]))


def _log_positive(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(finite positive mask, log10 of those values with NaN elsewhere)."""
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(values) & (values > 0)
    return ok, np.where(ok, np.log10(np.where(ok, values, 1.0)), np.nan)


def spike_mask(values: np.ndarray, z_threshold: float, window: int, min_ratio: float = 2.0) -> np.ndarray:
    """Where a positive series has a one-off upward outlier (robust z on log10), along the last axis.

    A spike stands above the values on both sides of it: the z-score compares
    each point with the higher of the medians of its `window` points before and
    its `window` after (`_side_baseline`) and divides by the series' local noise
    (`noise_scale` of the residuals from the median of its `window` centred
    neighbours, over ten times as many points), floored at 0.03 decades so a flat series does not turn its
    smallest wiggle into a spike; a spike must also be `min_ratio` times that
    baseline.
    """
    ok, logv = _log_positive(values)
    half = max(1, int(window) // 2)
    if logv.shape[-1] == 0:
        return ok
    med, _ = _centered_median(logv, half)
    with np.errstate(invalid="ignore"):
        resid = logv - _side_baseline(logv, int(window))
        scale = np.maximum(noise_scale(logv - med, 10 * half), 1.4826 * 0.02)
        z = resid / scale
        return ok & np.isfinite(z) & (z > z_threshold) & (resid > np.log10(min_ratio))


def spike_jump(values: np.ndarray, window: int) -> np.ndarray:
    """Each point of a positive series over the higher of the medians of its neighbours before and after
    it, as `spike_mask` compares them; NaN where both are unknown. Along the last axis."""
    ok, logv = _log_positive(values)
    base = _side_baseline(logv, int(window))
    with np.errstate(invalid="ignore", over="ignore"):
        return 10.0 ** (logv - base)


def spike_window_points(window: int) -> int:
    """Window values `spike_mask` builds per point of a series (for `stacked`)."""
    half = max(1, int(window) // 2)
    return max(2 * int(window) + 1, -(-(20 * half + 1) // _noise_stride(10 * half)))


def spikes(values: np.ndarray, z_threshold: float, window: int, min_ratio: float = 2.0) -> np.ndarray:
    """Indices of one-off upward outliers of a positive series (see `spike_mask`)."""
    return np.nonzero(spike_mask(values, z_threshold, window, min_ratio))[0]


TOO_FEW_REGULAR = "too few regular samples to judge a period"


def estimate_period(spike_steps: np.ndarray, logged_steps: np.ndarray, min_spikes: int = 3,
                    min_coverage: float = 0.6) -> Optional[int]:
    """The period, in steps, of spikes that recur regularly; None if they do not (see `judge_period`)."""
    return judge_period(spike_steps, logged_steps, min_spikes, min_coverage)[0]


def judge_period(spike_steps: np.ndarray, logged_steps: np.ndarray, min_spikes: int = 3,
                 min_coverage: float = 0.6, min_refuting: int = 2) -> Tuple[Optional[int], Optional[str]]:
    """(period, None) for spikes that recur regularly; (None, reason) when they recur but
    the kept steps cannot tell the period; (None, None) when they do not recur.

    Works on step numbers, not indices, so uneven sampling and missing steps
    are fine: a candidate period P is accepted when every gap between spikes is
    a whole multiple of P, and most logged steps that fall on the grid
    ``first_spike + k * P`` are spikes (random spikes share no such grid).

    After TensorBoard's random sampling, spikes every P steps can all be kept
    at multiples of 2P or 3P. A period P is therefore only stated when, for
    each prime q dividing P / (the writer's interval), at least `min_refuting`
    kept steps lie on the finer grid of P / q but off the grid of P and are
    not spikes: they show the spikes do not recur every P / q steps. Without
    them the period could be any such divisor, and the answer is the reason.
    """
    spike_steps = np.unique(np.asarray(spike_steps, dtype=np.int64))
    logged = np.unique(np.asarray(logged_steps, dtype=np.int64))
    if len(spike_steps) < min_spikes:
        return None, None
    gaps = np.diff(spike_steps)
    smallest = int(gaps.min())
    interval = logging_interval(logged) or 1
    span = logged[(logged >= spike_steps[0]) & (logged <= spike_steps[-1])]
    # Largest P dividing every gap; try the smallest gap and its divisors (in integers: a
    # step past 2**53 has no exact float).
    for divisor in range(1, 9):
        if smallest % divisor or smallest // divisor < 2:
            continue
        period = smallest // divisor
        if np.any(gaps % period):
            continue
        offset = span - spike_steps[0]
        on_grid = span[offset % period == 0]
        if len(on_grid) == 0:
            continue
        hits = np.isin(on_grid, spike_steps).mean()
        # The grid must also be sparse among the logged steps, or "every step" is a period.
        grid_share = len(on_grid) / max(1, len(span))
        if hits < min_coverage or grid_share > 0.5:
            return None, None
        if period % interval == 0 and not _finer_grids_refuted(offset, period, period // interval, min_refuting):
            return None, TOO_FEW_REGULAR
        return period, None
    return None, None


def _finer_grids_refuted(offset: np.ndarray, period: int, ratio: int, min_refuting: int) -> bool:
    """Whether, for each prime q dividing `ratio` (a divisor of `period`), at least
    `min_refuting` offsets lie on the grid of period / q but off the grid of period.

    An offset lies there exactly when period / gcd(offset, period) is q, so the
    only primes that can pass are the values of that quotient the kept steps
    take: the work is bounded by the steps kept, where factoring `ratio` by
    trial division would take sqrt(ratio) steps, and step numbers are the
    writer's to choose (up to 2**63).
    """
    if min_refuting <= 0:
        return True
    quotients, counts = np.unique(period // np.gcd(offset, period), return_counts=True)
    rest = ratio
    for q in quotients[counts >= min_refuting].tolist():
        if q > 1 and rest % q == 0 and _is_prime(q):
            while rest % q == 0:
                rest //= q
    return rest == 1


# Miller-Rabin with these witnesses is exact below 3.3e24, so for every int64.
_WITNESSES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _is_prime(n: int) -> bool:
    """Whether n is prime, in time logarithmic in n (deterministic Miller-Rabin)."""
    if n < 2:
        return False
    for p in _WITNESSES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _WITNESSES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def logging_interval(steps: np.ndarray) -> Optional[int]:
    """The writer's step interval: the greatest common divisor of the gaps between kept steps.

    TensorBoard's reservoir only removes steps, so every kept gap is a whole
    multiple of the writer's interval; the smallest gap need not be the
    interval once steps were dropped, their common divisor is. A denser start
    (gradhealth's integrations log every step at first, then every N-th) does
    not count: the interval is the one the writer kept to after it.
    """
    gaps = np.diff(_sorted_unique(steps))
    return int(np.gcd.reduce(gaps[denser_start(gaps):])) if len(gaps) else None


def denser_start(gaps: np.ndarray) -> int:
    """How many leading gaps belong to a denser start, 0 when there is none.

    A denser start is a run of at least 3 equal gaps at the beginning, after
    which the logging became sparser for good: the count returned is the last
    j at which every gap before is smaller than every gap from j on (the gap
    from the dense steps to the first sparse one is left out with them).
    Random drops by TensorBoard's sampling leave no such run of equal gaps
    followed by only larger ones.
    """
    gaps = np.asarray(gaps)
    if len(gaps) < 4:
        return 0
    run = int(np.argmax(gaps != gaps[0])) if np.any(gaps != gaps[0]) else len(gaps)
    if run < 3 or run == len(gaps):
        return 0
    before = np.maximum.accumulate(gaps)[:-1]  # largest of gaps[:j], j = 1 .. len - 1
    after = np.minimum.accumulate(gaps[::-1])[::-1][1:]  # smallest of gaps[j:]
    j = np.nonzero(before < after)[0] + 1
    j = j[j >= run]
    return int(j[-1]) if len(j) else 0


def _sorted_unique(steps) -> np.ndarray:
    """The steps ascending, each once: as they come from a table, without sorting again."""
    steps = np.asarray(steps, dtype=np.int64)
    return steps if len(steps) < 2 or bool(np.all(steps[1:] > steps[:-1])) else np.unique(steps)


def logged_steps(kept_steps: np.ndarray, max_step: Optional[int], capacity: Optional[float] = None,
                 first_step: Optional[int] = None) -> Tuple[int, bool, bool]:
    """(steps the writer logged, whether TensorBoard dropped some, whether the count is only a lower bound).

    Nothing was dropped when the kept steps are evenly spaced up to the last
    logged step (``max_step``; both loaders always keep the last one), or when
    fewer steps were kept than the loader's reservoir holds (``capacity``; None
    when it is not known). Otherwise the writer logged every
    ``logging_interval`` steps up to ``max_step`` from its first step. The
    reservoir drops the first steps as readily as any other, so the first
    kept step is not the first logged one: ``first_step`` is the run's first
    step where a series that lost nothing shows it (its loss, say); without
    it the count starts at the first kept step and is a lower bound.
    """
    steps = _sorted_unique(kept_steps)
    n = len(steps)
    if n < 2 or (capacity is not None and n < capacity):
        return n, False, False
    last = int(steps[-1]) if max_step is None else max(int(max_step), int(steps[-1]))
    gaps = np.diff(steps)
    interval = int(np.gcd.reduce(gaps))
    if last == steps[-1] and np.all(gaps == interval):
        return n, False, False
    first, bound = int(steps[0]), True
    if first_step is not None and first_step <= first:
        # The first step on this series' grid at or after the run's first step.
        first, bound = first - (first - int(first_step)) // interval * interval, False
    logged = max((last - first) // interval + 1, n)
    return int(logged), logged > n, bound
