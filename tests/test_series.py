"""series.py: runs, baselines, spikes and periods on noisy, unevenly logged series."""

import warnings

import numpy as np
import pytest

from gradhealth_plugin.analysis import limits as rules
from gradhealth_plugin.analysis import series

Z = rules.DEFAULTS["spike_z"].value
WINDOW = int(rules.DEFAULTS["spike_window"].value)
# Healthy gradient norms swing about 30% from one step to the next (lognormal, sigma 0.3 in ln).
NOISE = 0.3


def _noise(rng, n, sigma=NOISE):
    return np.exp(rng.normal(0.0, sigma, n))


def _reservoir_steps(rng, n_steps, keep=0.6):
    """Steps 0..n_steps with about 40% dropped at random, as TensorBoard's reservoir leaves them."""
    size = int(keep * (n_steps + 1))
    return np.sort(rng.choice(n_steps + 1, size=size, replace=False)).astype(np.int64)


# --- true_runs / sustained ---------------------------------------------------------------------------

def test_true_runs_empty_and_all_false():
    assert series.true_runs(np.zeros(0, dtype=bool)) == []
    assert series.true_runs(np.zeros(7, dtype=bool)) == []


def test_true_runs_all_true_is_one_run():
    assert series.true_runs(np.ones(5, dtype=bool)) == [(0, 4)]


def test_true_runs_runs_touching_both_ends():
    mask = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1], dtype=bool)
    assert series.true_runs(mask) == [(0, 1), (3, 3), (6, 8)]


def test_true_runs_min_length_is_inclusive():
    mask = np.array([1, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    assert series.true_runs(mask, min_length=3) == [(3, 5)]
    assert series.true_runs(mask, min_length=2) == [(0, 1), (3, 5)]
    assert series.true_runs(mask, min_length=4) == []


def test_true_runs_accepts_ints_and_single_element():
    assert series.true_runs(np.array([0, 2, 3, 0])) == [(1, 2)]
    assert series.true_runs(np.array([True])) == [(0, 0)]


def test_sustained_requires_min_length_in_the_middle():
    mask = np.zeros(20, dtype=bool)
    mask[5:9] = True  # 4 steps
    assert series.sustained(mask, 5) == []
    mask[9] = True  # 5 steps
    assert series.sustained(mask, 5) == [(5, 9)]


def test_sustained_keeps_a_short_run_that_reaches_the_end():
    # Training may have stopped because of it.
    mask = np.zeros(10, dtype=bool)
    mask[8:] = True
    assert series.sustained(mask, 5) == [(8, 9)]


def test_sustained_ignores_a_single_last_step():
    # One flagged step at the very end is not yet a condition.
    mask = np.zeros(10, dtype=bool)
    mask[9] = True
    assert series.sustained(mask, 5) == []


def test_sustained_single_step_series():
    assert series.sustained(np.array([True]), 5) == [(0, 0)]
    assert series.sustained(np.array([False]), 5) == []
    assert series.sustained(np.zeros(0, dtype=bool), 5) == []


@pytest.mark.parametrize("width", [1, 2, 3, 7, 9])
def test_sustained_rows_is_sustained_of_each_row(width):
    """Every mask of `width` steps at once, a row each: the mask of the steps inside the runs `sustained` keeps."""
    masks = ((np.arange(2 ** width)[:, None] >> np.arange(width)) & 1).astype(bool)
    for min_length in range(1, width + 2):
        got = series.sustained_rows(masks, min_length)
        for mask, row in zip(masks, got):
            expected = np.zeros(width, dtype=bool)
            for a, b in series.sustained(mask, min_length):
                expected[a:b + 1] = True
            assert row.tolist() == expected.tolist(), (mask.astype(int).tolist(), min_length)
    assert series.sustained_rows(np.zeros((3, 0), dtype=bool), 5).shape == (3, 0)


def test_sustained_reports_every_qualifying_run():
    mask = np.zeros(30, dtype=bool)
    mask[2:8] = True
    mask[10:12] = True  # too short, not at the end
    mask[20:26] = True
    assert series.sustained(mask, 5) == [(2, 7), (20, 25)]


# --- baselines -------------------------------------------------------------------------------------

def test_centered_baseline_leaves_the_point_out():
    values = np.array([1.0, 1.0, 1.0, 100.0, 1.0, 1.0, 1.0])
    med, mad = series.centered_baseline(values, 3)
    assert med[3] == 1.0 and mad[3] == 0.0
    assert series.centered_baseline(np.zeros(0), 3)[0].shape == (0,)


def test_trailing_median_uses_only_past_points():
    values = np.array([1.0, 2.0, 3.0, 100.0, 4.0])
    med = series.trailing_median(values, window=3, min_points=3)
    assert np.isnan(med[:3]).all()
    assert med[3] == 2.0  # median of 1, 2, 3: the 100 itself is not in its own baseline
    assert med[4] == 3.0  # median of 2, 3, 100


# --- spikes ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_spikes_finds_a_10x_outlier_in_noise(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 1001))
    values = _noise(rng, n)
    i = int(rng.integers(WINDOW, n - WINDOW))
    values[i] = 10.0  # ten times the series' noiseless level
    assert i in series.spikes(values, Z, WINDOW).tolist()


def test_spikes_finds_most_10x_outliers_over_many_seeds():
    # A 10x spike is only ~7 sigma above 30% noise; the rate guards the noise estimate's steadiness.
    found = 0
    for seed in range(100):
        rng = np.random.default_rng(1000 + seed)
        n = int(rng.integers(200, 1001))
        values = _noise(rng, n)
        i = int(rng.integers(1, n - 1))
        values[i] = 10.0
        found += i in series.spikes(values, Z, WINDOW).tolist()
    assert found >= 90


@pytest.mark.parametrize("seed", range(20))
def test_spikes_finds_nothing_in_pure_noise(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 1001))
    assert series.spikes(_noise(rng, n), Z, WINDOW).tolist() == []


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("direction", ["falling", "rising"])
def test_spikes_finds_nothing_in_a_smooth_early_trend(seed, direction):
    # Healthy early training: the norm moves 10x over the first 100 steps, then settles.
    rng = np.random.default_rng(seed)
    n = 600
    level = np.ones(n)
    level[:100] = np.logspace(1, 0, 100) if direction == "falling" else np.logspace(-1, 0, 100)
    assert series.spikes(level * _noise(rng, n), Z, WINDOW).tolist() == []


@pytest.mark.parametrize("seed", range(5))
def test_spikes_finds_nothing_when_early_noise_settles(seed):
    # Noise that shrinks from 40% to 10% over the first 100 steps must not make the early swings spikes.
    rng = np.random.default_rng(seed)
    n = 800
    sigma = np.interp(np.arange(n), [0, 100], [0.4, 0.1])
    level = np.ones(n)
    level[:100] = np.logspace(1, 0, 100)
    values = level * np.exp(rng.normal(0.0, 1.0, n) * sigma)
    assert series.spikes(values, Z, WINDOW).tolist() == []


def test_spikes_flat_series_and_small_wiggles():
    assert series.spikes(np.ones(300), Z, WINDOW).tolist() == []
    wiggle = 1.0 + 0.001 * np.sin(np.arange(300))
    assert series.spikes(wiggle, Z, WINDOW).tolist() == []


def test_spikes_needs_min_ratio_even_on_a_quiet_series():
    values = np.ones(300)
    values[150] = 1.8  # far above the noise, but less than 2x
    assert series.spikes(values, Z, WINDOW).tolist() == []
    values[150] = 2.5
    assert series.spikes(values, Z, WINDOW).tolist() == [150]


def test_spikes_ignores_dips_zeros_and_nonfinite_values():
    rng = np.random.default_rng(3)
    values = _noise(rng, 400)
    values[100] = 0.01  # a dip is not a spike
    values[200] = 0.0
    values[250] = np.nan
    values[300] = np.inf
    assert series.spikes(values, Z, WINDOW).tolist() == []


# A layer's max|g| around its block's weights being scaled down at one step (logged every 5 steps):
# the last normal value, 0.0024, was read as a spike 144x above a centred median half made of the tiny
# values after the drop.
STEP_DOWN = np.array([0.0031, 0.0036, 0.0029, 0.0033, 0.0041, 0.0035, 0.0027, 0.0030, 0.0044, 0.0038, 0.0032,
                      0.0024, 1.3e-7, 1.1e-7, 1.5e-7, 1.2e-7, 1.4e-7, 1.0e-7, 1.3e-7, 1.2e-7, 1.6e-7, 1.1e-7])


@pytest.mark.parametrize("direction", ["down", "up"])
def test_spikes_a_level_shift_is_no_spike_at_either_edge(direction):
    values = STEP_DOWN if direction == "down" else STEP_DOWN[::-1]
    assert series.spikes(values, Z, WINDOW).tolist() == []
    # Neither edge stands far above both of its sides.
    assert np.nanmax(series.spike_jump(values, WINDOW)) < 2.0


def test_spikes_a_one_off_beside_a_level_shift_is_still_found():
    values = STEP_DOWN.copy()
    values[5] *= 300.0  # one bad batch before the drop
    assert series.spikes(values, Z, WINDOW).tolist() == [5]
    assert series.spike_jump(values, WINDOW)[5] > 100.0
    # At the last value before the drop and the first after it, the one side there is.
    assert series.spikes(np.r_[STEP_DOWN[:11], 1.0, STEP_DOWN[12:]], Z, WINDOW).tolist() == [11]
    assert series.spikes(np.r_[STEP_DOWN[:12], 1.0, STEP_DOWN[13:]], Z, WINDOW).tolist() == [12]
    # Above the level after the drop but below the one before: not above both sides.
    assert series.spikes(np.r_[STEP_DOWN[:12], 1e-4, STEP_DOWN[13:]], Z, WINDOW).tolist() == []
    assert series.spikes(np.r_[STEP_DOWN, 1.0], Z, WINDOW).tolist() == [len(STEP_DOWN)]


def test_spikes_empty_and_short_series():
    assert series.spikes(np.zeros(0), Z, WINDOW).tolist() == []
    # Too short to know the noise: whatever comes back must be the only candidate.
    assert set(series.spikes(np.array([1.0, 50.0, 1.0]), Z, WINDOW).tolist()) <= {1}


def test_noise_scale_estimates_the_standard_deviation_despite_outliers():
    rng = np.random.default_rng(0)
    values = rng.normal(0.0, 0.2, 5000)
    values[::50] = 5.0  # 2% outliers
    scale = series.noise_scale(values, 50)
    assert scale.shape == values.shape
    assert np.median(scale) == pytest.approx(0.2, rel=0.1)


# --- estimate_period -------------------------------------------------------------------------------

@pytest.mark.parametrize("period", [7, 25, 50, 100])
@pytest.mark.parametrize("seed", range(5))
def test_estimate_period_recovers_the_exact_period_on_uneven_steps(period, seed):
    rng = np.random.default_rng(seed)
    logged = _reservoir_steps(rng, 3000)
    offset = int(rng.integers(0, period))
    spike_steps = logged[(logged - offset) % period == 0]
    # About 40% of the spikes fell on dropped steps.
    assert len(spike_steps) < 0.75 * (3000 // period)
    assert series.estimate_period(spike_steps, logged) == period


@pytest.mark.parametrize("period", [7, 25, 50, 100])
@pytest.mark.parametrize("seed", range(3))
def test_estimate_period_from_detected_spikes(period, seed):
    # End to end: spikes found in a noisy series logged at uneven steps give the period back.
    rng = np.random.default_rng(seed)
    logged = _reservoir_steps(rng, 3000)
    values = _noise(rng, len(logged))
    values[logged % period == 0] *= 10.0
    found = logged[series.spikes(values, Z, WINDOW)]
    assert series.estimate_period(found, logged) == period


@pytest.mark.parametrize("seed", range(20))
def test_estimate_period_none_for_random_spikes(seed):
    rng = np.random.default_rng(seed)
    logged = _reservoir_steps(rng, 3000)
    k = int(rng.integers(3, 40))
    spike_steps = np.sort(rng.choice(logged, size=k, replace=False))
    assert series.estimate_period(spike_steps, logged) is None


def test_estimate_period_none_with_fewer_than_three_spikes():
    logged = np.arange(1000)
    assert series.estimate_period(np.array([], dtype=np.int64), logged) is None
    assert series.estimate_period(np.array([100]), logged) is None
    assert series.estimate_period(np.array([100, 150]), logged) is None
    assert series.estimate_period(np.array([100, 150, 200]), logged) == 50


def test_estimate_period_none_when_most_grid_steps_are_not_spikes():
    # Gaps of 50 and 100, but most logged steps on the 50-grid are quiet: not a recurring pattern.
    logged = np.arange(1000)
    assert series.estimate_period(np.array([100, 150, 950]), logged) is None


def test_estimate_period_not_every_step():
    # Spikes on every logged step are a level shift, not a period.
    logged = np.arange(0, 200, 2)
    assert series.estimate_period(logged[10:20], logged) is None


# --- reading sampled steps ----------------------------------------------------------------------

def test_logged_steps_counts_the_writer_grid_when_samples_were_dropped():
    rng = np.random.default_rng(5)
    for interval in (1, 10):
        logged = np.arange(0, 1000 * interval, interval)
        kept = np.sort(rng.choice(logged[1:-1], 99, replace=False))
        kept = np.append(kept, logged[-1])  # the loaders always keep the last step
        assert series.logged_steps(kept, int(logged[-1]), first_step=0) == (1000, True, False)
        count, dropped, at_least = series.logged_steps(kept, int(logged[-1]))
        assert dropped and at_least and count == (logged[-1] - kept[0]) // interval + 1
        # Fewer kept than the reservoir holds: nothing can have been dropped, whatever the spacing.
        assert series.logged_steps(kept, int(logged[-1]), capacity=500) == (100, False, False)
    assert series.logged_steps(np.arange(0, 300, 3), 297) == (100, False, False)


def test_a_period_hidden_by_sampling_is_not_guessed():
    # Spikes every 45 steps, kept only at 90, 630 and 900: every gap is also a multiple of 270.
    kept = np.array([14, 25, 90, 107, 164, 301, 341, 400, 499, 630, 690, 777, 900, 999])
    assert series.judge_period([90, 630, 900], kept) == (None, series.TOO_FEW_REGULAR)
    # With the steps between kept (non-spikes on the grids of 135, 90 and 54), the period is readable.
    full = np.arange(0, 1000)
    spikes = np.arange(90, 1000, 270)
    assert series.judge_period(spikes, full) == (270, None)
    assert series.judge_period(np.arange(45, 1000, 45), full) == (45, None)


@pytest.mark.parametrize("steps,interval", [
    # gradhealth's integrations: every step of the first 30, then every 25th (or 10th, 100th).
    (np.r_[np.arange(30), np.arange(50, 2000, 25)], 25),
    (np.r_[np.arange(31), np.arange(40, 400, 10)], 10),
    (np.r_[np.arange(30), 100, 200, 300], 100),
    # TensorBoard's random drops leave no run of equal gaps followed by only larger ones.
    ([0, 25, 75, 100, 175], 25),
    ([0, 1, 3, 6, 10, 15], 1),
    (np.arange(0, 1000, 25), 25),
])
def test_logging_interval_after_a_denser_start(steps, interval):
    assert series.logging_interval(steps) == interval


def test_an_onset_after_a_denser_start_is_not_said_to_follow_dropped_steps():
    from gradhealth_plugin.analysis.spans import kept_before

    steps = np.r_[np.arange(30), np.arange(50, 2000, 25)].astype(np.int64)
    assert kept_before(steps, int(np.searchsorted(steps, 850))) is None
    sampled = np.array([0, 25, 50, 100, 125], dtype=np.int64)  # 75 dropped
    assert kept_before(sampled, 3) == 50
# --- many series at once: rows of a 2-D array give exactly the per-series results ------------------

def _rows_with_gaps(rng, rows, n):
    """Lognormal norms with NaN gaps, zeros, infinities and 10x outliers: every branch of the helpers."""
    values = _noise(rng, rows * n).reshape(rows, n)
    values[rng.random((rows, n)) < 0.05] = np.nan
    values[rng.random((rows, n)) < 0.02] = 0.0
    values[rng.random((rows, n)) < 0.01] = np.inf
    values[rng.random((rows, n)) < 0.03] *= 10.0
    values[0] = np.nan  # an all-NaN row
    return values


def _same(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


@pytest.mark.parametrize("n", [0, 1, 3, 12, 200])
def test_row_wise_helpers_equal_the_per_series_results(n):
    rng = np.random.default_rng(n)
    values = _rows_with_gaps(rng, 9, n)
    med, mad = series.centered_baseline(values, 3)
    for i, row in enumerate(values):
        m1, d1 = series.centered_baseline(row, 3)
        _same(med[i], m1)
        _same(mad[i], d1)
        _same(series.trailing_median(values, WINDOW)[i], series.trailing_median(row, WINDOW))
        _same(series.noise_scale(values, 50)[i], series.noise_scale(row, 50))
        _same(series.spike_mask(values, Z, WINDOW)[i], series.spike_mask(row, Z, WINDOW))
        assert series.spikes(row, Z, WINDOW).tolist() == np.nonzero(series.spike_mask(values, Z, WINDOW)[i])[0].tolist()


def test_stacked_groups_rows_by_length_in_bounded_chunks(monkeypatch):
    rng = np.random.default_rng(1)
    rows = [rng.normal(size=n) for n in (5, 3, 5, 0, 3, 5, 5, 5)]
    monkeypatch.setattr(series, "_WINDOW_BUDGET", 10)  # two rows of 5 per chunk
    seen = []
    for idx, block in series.stacked(rows):
        assert block.shape == (len(idx), len(rows[idx[0]])) and block.dtype == np.float64
        assert block.size <= 10 or len(idx) == 1
        for i, row in zip(idx.tolist(), block):
            _same(row, rows[i])
        seen += idx.tolist()
    assert sorted(seen) == list(range(len(rows)))
    lengths = [len(r) for r in rows]
    assert [g.tolist() for g in series.same_length(lengths)] == [[0, 2], [5, 6], [7], [1, 4], [3]]
    # Five window values per point: a row of five fills a chunk.
    assert [len(g) for g in series.same_length(lengths, points_per_value=5)] == [1] * 8


# --- periods past 2**53, and the prime check that replaced factoring ---------------------------------

def test_a_huge_prime_period_is_exact_and_quick():
    # A float cannot hold these steps; factoring the period by trial division took hours.
    for period in (4503599627370449, 1537228672809129233):
        logged = np.concatenate([np.arange(30)] + [k * period + np.arange(15) for k in (1, 2, 3)])
        spikes = np.array([period, 2 * period, 3 * period])
        assert series.judge_period(spikes, logged) == (period, None)
    # Spikes every 2P (P prime, 6P < 2**63): kept steps between them on the grid of P refute
    # "every P" only when two of them lie off the grid of 2P but on that of 2 (even offsets).
    p = 1537228672809129233
    spikes = np.array([2 * p, 4 * p, 6 * p])
    between = [3 * p, 5 * p, 2 * p + 1]  # odd multiples of P refute "every 2": q = 2 is settled
    assert series.judge_period(spikes, np.concatenate([spikes, between, [2 * p + 2]])) == \
        (None, series.TOO_FEW_REGULAR)
    assert series.judge_period(spikes, np.concatenate([spikes, between, [2 * p + 2, 2 * p + 4]])) == (2 * p, None)


def _prime_factors(n):
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _refuted_by_trial_division(offset, period, ratio, min_refuting):
    """The check as it was: factor `ratio`, count the kept steps on each finer grid."""
    return all(np.count_nonzero((offset % (period // q) == 0) & (offset % period != 0)) >= min_refuting
               for q in _prime_factors(ratio))


@pytest.mark.parametrize("seed", range(300))
def test_finer_grids_check_equals_factoring_the_period(seed):
    rng = np.random.default_rng(seed)
    interval = int(rng.choice([1, 2, 3, 10]))
    period = interval * int(rng.integers(2, 400))
    offset = np.unique(rng.integers(0, 20 * period // interval, size=int(rng.integers(1, 60))) * interval)
    min_refuting = int(rng.integers(1, 4))
    assert series._finer_grids_refuted(offset, period, period // interval, min_refuting) == \
        _refuted_by_trial_division(offset, period, period // interval, min_refuting)


def test_is_prime_matches_trial_division_and_known_large_numbers():
    assert [n for n in range(3000) if series._is_prime(n)] == [n for n in range(2, 3000) if _prime_factors(n) == [n]]
    for prime in (2 ** 61 - 1, 4503599627370449, 1537228672809129233, 9223372036854775783):
        assert series._is_prime(prime)
    # Carmichael numbers, a square of a prime, a product of two large primes.
    for composite in (561, 41041, 3215031751, (2 ** 31 - 1) ** 2, 4503599627370449 * 3):
        assert not series._is_prime(composite)


def test_logged_steps_of_unsorted_repeated_steps_equal_those_of_their_sorted_set():
    rng = np.random.default_rng(3)
    kept = np.sort(rng.choice(np.arange(0, 5000, 5), 300, replace=False))
    messy = rng.permutation(np.concatenate([kept, kept[:40]]))
    for args in ((None,), (5000,), (5000, 500), (5000, None, 0)):
        assert series.logged_steps(messy, *args) == series.logged_steps(kept, *args)
    assert series.logging_interval(messy) == series.logging_interval(kept) == 5


def test_nanmedian_rows_is_numpys_nanmedian():
    # The rolling medians' own row median: the same numbers as np.nanmedian, NaN, infinities, ties,
    # all-NaN rows and overflowing middles included.
    rng = np.random.default_rng(7)
    for _ in range(500):
        n, w = rng.integers(1, 20), rng.integers(1, 25)
        a = rng.normal(size=(n, w)) * 10.0 ** rng.uniform(-300, 308, size=(n, w))
        mask = rng.random((n, w))
        a[mask < rng.random() * 0.8] = np.nan
        a[mask > 0.97] = np.inf
        a[(mask > 0.94) & (mask < 0.95)] = -np.inf
        if rng.random() < 0.2:
            a = np.round(a / 1e300)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.nanmedian(a, axis=1)
        np.testing.assert_array_equal(series.nanmedian_rows(a), expected)
