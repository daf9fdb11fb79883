"""Pure numpy helpers over one metric series: runs, rolling baselines, spikes, periods.

Steps are the logged step numbers, uneven after TensorBoard's reservoir
sampling; nothing here assumes even spacing.
"""

from __future__ import annotations

import warnings

from typing import List, Optional, Tuple

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


def nanmedian_rows(win: np.ndarray) -> np.ndarray:
    """``np.nanmedian(win, axis=1)`` of a 2-D array, the same values, without its per-call cost.

    numpy's nanmedian goes through masked arrays for small rows, about 1 ms a call
    whatever the size: for a run judged after every logged step (``stop_on``) that
    was most of the time. Sorting puts NaN last, so a row's median is the middle
    of its first k (finite-or-infinite) values.
    """
    win = np.asarray(win, dtype=np.float64)
    n = win.shape[0]
    if win.shape[1] == 0:
        return np.full(n, np.nan)
    ordered = np.sort(win, axis=1)
    k = np.sum(~np.isnan(win), axis=1)
    rows = np.arange(n)
    lo = ordered[rows, np.maximum(k - 1, 0) // 2]
    hi = ordered[rows, np.minimum(k // 2, win.shape[1] - 1)]
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(k > 0, np.where(k % 2 == 1, lo, (lo + hi) / 2), np.nan)


def _windows(values: np.ndarray, half: int) -> np.ndarray:
    padded = np.concatenate([np.full(half, np.nan), values, np.full(half, np.nan)])
    return sliding_window_view(padded, 2 * half + 1).copy()


def centered_baseline(values: np.ndarray, half: int) -> Tuple[np.ndarray, np.ndarray]:
    """Rolling median and MAD of each point's neighbours, the point itself left out."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return values.copy(), values.copy()
    win = _windows(values, half)
    win[:, half] = np.nan
    # All-NaN windows (edges, gaps) are expected: their median is NaN, no warning wanted.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = nanmedian_rows(win)
        mad = nanmedian_rows(np.abs(win - med[:, None]))
    return med, mad


def trailing_median(values: np.ndarray, window: int, min_points: int = 3) -> np.ndarray:
    """Median of the previous `window` points (NaN until `min_points` exist)."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0:
        return values.copy()
    padded = np.concatenate([np.full(window, np.nan), values])
    win = sliding_window_view(padded, window)[:n]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = nanmedian_rows(win)
    enough = np.sum(~np.isnan(win), axis=1) >= min_points
    return np.where(enough, med, np.nan)


def noise_scale(values: np.ndarray, half: int) -> np.ndarray:
    """Robust standard deviation around zero of the values within `half` points of each point.

    A MAD over a handful of neighbours is too unsteady for a z-score: one
    window in twenty has less than half the true spread, so ordinary noise
    scores z > 6. This takes a wide window, drops values beyond 3 MADs (the
    outliers being looked for) and returns the RMS of the rest, corrected for
    the clipping. Noise changes slowly, so the scale is computed every
    ``half // 5`` points and held in between to keep long series cheap.
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0:
        return values.copy()
    stride = max(1, half // 5)
    padded = np.concatenate([np.full(half, np.nan), values, np.full(half, np.nan)])
    centres = np.minimum(np.arange(0, n, stride) + stride // 2, n - 1)
    win = np.abs(sliding_window_view(padded, 2 * half + 1)[centres])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mad = 1.4826 * nanmedian_rows(win)
        kept = np.where(win <= 3 * mad[:, None], win, np.nan)
        # 0.9866: the standard deviation of a normal distribution clipped at 3 sigma.
        rms = np.sqrt(np.nanmean(kept ** 2, axis=1)) / 0.9866
    return np.repeat(rms, stride)[:n]


def spikes(values: np.ndarray, z_threshold: float, window: int, min_ratio: float = 2.0) -> np.ndarray:
    """Indices of one-off upward outliers of a positive series (robust z on log10).

    The z-score compares each point with the median of its `window`
    neighbours and divides by the series' local noise (`noise_scale` over ten
    times as many points), floored at 0.03 decades so a flat series does not
    turn its smallest wiggle into a spike; a spike must also be `min_ratio`
    times its neighbourhood's median.
    """
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(values) & (values > 0)
    logv = np.where(ok, np.log10(np.where(ok, values, 1.0)), np.nan)
    half = max(1, int(window) // 2)
    med, _ = centered_baseline(logv, half)
    with np.errstate(invalid="ignore"):
        resid = logv - med
    scale = np.maximum(noise_scale(resid, 10 * half), 1.4826 * 0.02)
    with np.errstate(invalid="ignore"):
        z = resid / scale
        hit = ok & np.isfinite(z) & (z > z_threshold) & (resid > np.log10(min_ratio))
    return np.nonzero(hit)[0]


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
    # Largest P dividing every gap; try the smallest gap and its divisors.
    for divisor in range(1, 9):
        period = smallest / divisor
        if period < 2 or period != int(period):
            continue
        period = int(period)
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
        if period % interval == 0:
            for q in _primes(period // interval):
                finer = period // q
                refuting = np.count_nonzero((offset % finer == 0) & (offset % period != 0))
                if refuting < min_refuting:
                    return None, TOO_FEW_REGULAR
        return period, None
    return None, None


def _primes(n: int) -> List[int]:
    """The distinct prime factors of n (n >= 1)."""
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def logging_interval(steps: np.ndarray) -> Optional[int]:
    """The writer's step interval: the greatest common divisor of the gaps between kept steps.

    TensorBoard's reservoir only removes steps, so every kept gap is a whole
    multiple of the writer's interval; the smallest gap need not be the
    interval once steps were dropped, their common divisor is.
    """
    steps = np.unique(np.asarray(steps, dtype=np.int64))
    gaps = np.diff(steps)
    return int(np.gcd.reduce(gaps)) if len(gaps) else None


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
    steps = np.unique(np.asarray(kept_steps, dtype=np.int64))
    n = len(steps)
    if n == 0:
        return 0, False, False
    last = int(steps[-1]) if max_step is None else max(int(max_step), int(steps[-1]))
    interval = logging_interval(steps)
    if interval is None or (capacity is not None and n < capacity):
        return n, False, False
    if last == steps[-1] and np.all(np.diff(steps) == interval):
        return n, False, False
    first, bound = int(steps[0]), True
    if first_step is not None and first_step <= first:
        # The first step on this series' grid at or after the run's first step.
        first, bound = first - (first - int(first_step)) // interval * interval, False
    logged = max((last - first) // interval + 1, n)
    return int(logged), logged > n, bound
