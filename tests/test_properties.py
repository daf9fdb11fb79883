"""Properties of the bucket estimates, over generated bucket arrays (hypothesis).

The metrics read a histogram as values spread uniformly inside each bucket.
For buckets [a_i, b_i] holding c_i values, N = sum c_i and widths
w_i = b_i - a_i, any data consistent with the buckets has

* |mean - mean_estimate| <= sum_i c_i w_i / (2N): every value lies within
  w_i / 2 of its bucket's centre;
* |std - std_estimate| <= sqrt(sum_i c_i w_i^2 / (3N)): std is 1-Lipschitz in
  the quadratic transport (W2) distance, and a value anywhere in [a, b] is at
  root-mean-square distance at most w / sqrt(3) from a uniform value on [a, b]
  (the worst case is a value on an edge: E(U - a)^2 = w^2 / 3).

Splitting bucket j at an interior point with its count shared in proportion
to the two widths describes the same piecewise-uniform density, so the
estimates must not move beyond rounding. Sharing the count in any other
proportion only moves mass inside [a_j, b_j], by at most w_j for a share
c_j / N of the values: the mean moves by at most (c_j / N) w_j and the std by
at most w_j sqrt(c_j / N).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradhealth_plugin.analysis import metrics

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Rounding slack: the estimates sum a few dozen terms per bucket in float64.
REL = 1e-9

any_float = st.floats(allow_nan=True, allow_infinity=True, width=64)
edge = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_subnormal=False)


@st.composite
def hostile_arrays(draw):
    """Anything a corrupt or unusual event file could hold where a [k, 3] histogram should be."""
    kind = draw(st.sampled_from(["k3", "k3", "k3", "flat", "other"]))
    if kind == "k3":
        return draw(hnp.arrays(np.float64, st.tuples(st.integers(0, 40), st.just(3)), elements=any_float))
    if kind == "flat":
        return draw(hnp.arrays(np.float64, st.integers(0, 12), elements=any_float))
    return draw(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5), elements=any_float))


@st.composite
def histograms(draw, min_buckets=1, max_buckets=30):
    """Finite, sorted, non-overlapping buckets with integer counts (a real writer's output)."""
    k = draw(st.integers(min_buckets, max_buckets))
    start = draw(edge)
    widths = draw(hnp.arrays(np.float64, k, elements=st.floats(1e-3, 10.0)))
    edges = start + np.concatenate([[0.0], np.cumsum(widths)])
    counts = draw(hnp.arrays(np.float64, k, elements=st.integers(0, 10 ** 6).map(float)))
    return np.stack([edges[:-1], edges[1:], counts], axis=1)


def _table(arrays):
    arrays = list(arrays)
    n = len(arrays)
    h = metrics.stack_histograms(np.arange(n), np.zeros(n), arrays)
    return h, metrics.histogram_metrics(h)


@SETTINGS
@given(st.lists(hostile_arrays(), min_size=0, max_size=6))
def test_any_bucket_array_gives_finite_values_or_no_data(arrays):
    h, table = _table(arrays)
    n = len(arrays)
    assert len(table.steps) == n
    for name, values in table.values.items():
        quality = table.quality[name]
        assert values.shape == (n,) and quality.shape == (n,), name
        assert np.all(np.isfinite(values) | np.isnan(values)), (name, values)
        assert np.all(np.isnan(values) == (quality == metrics.NO_DATA)), (name, values, quality)
        assert np.all(quality < len(metrics.QUALITY_NAMES)), name
    dip = metrics.bimodal_dip(h)
    assert dip.shape == (n,)
    assert np.all(np.isnan(dip) | ((dip >= 0) & (dip <= 1)))
    assert np.all(table.values["count"][np.isfinite(table.values["count"])] >= 0)
    assert np.all(table.values["nonfinite"] >= 0)


@SETTINGS
@given(histograms(), st.randoms(use_true_random=False),
       st.lists(st.sampled_from(["nan_count", "negative", "nan_edge", "inf_edge", "swap", "zero"]), max_size=3),
       st.data())
def test_metrics_do_not_depend_on_bucket_order(buckets, random, damage, data):
    buckets = buckets.copy()
    for what in damage:  # also with the kinds of bad buckets the metrics must leave out
        i = data.draw(st.integers(0, len(buckets) - 1))
        if what == "nan_count":
            buckets[i, 2] = np.nan
        elif what == "negative":
            buckets[i, 2] = -buckets[i, 2] - 1
        elif what == "nan_edge":
            buckets[i, 0] = np.nan
        elif what == "inf_edge":
            buckets[i, 1] = np.inf
        elif what == "swap":
            buckets[i, :2] = buckets[i, 1::-1]
        else:
            buckets[i, 2] = 0
    order = list(range(len(buckets)))
    random.shuffle(order)
    _, a = _table([buckets])
    _, b = _table([buckets[order]])
    scale = float(np.nanmax(np.abs(np.where(np.isfinite(buckets[:, :2]), buckets[:, :2], 0)))) or 1.0
    for name in a.values:
        va, vb = a.values[name][0], b.values[name][0]
        assert np.isnan(va) == np.isnan(vb), (name, va, vb)
        assert a.quality[name][0] == b.quality[name][0], name
        if np.isnan(va) or name in ("skewness", "kurtosis"):
            continue
        tol = REL * (scale ** 2 if name == "l2" else scale) + (1e-9 if "fraction" in name else 0)
        if name in ("std", "std_rel_first"):
            tol = 1e-6 * abs(va) + REL * scale
        assert abs(va - vb) <= tol, (name, va, vb)
    for name in ("skewness", "kurtosis"):
        va, vb = a.values[name][0], b.values[name][0]
        if not np.isnan(va) and a.values["std"][0] > 1e-3 * scale:
            assert vb == pytest.approx(va, rel=1e-6, abs=1e-6), name
    assert metrics.bimodal_dip(metrics.stack_histograms([0], [0.0], [buckets]))[0] == pytest.approx(
        metrics.bimodal_dip(metrics.stack_histograms([0], [0.0], [buckets[order]]))[0], nan_ok=True)


def _legacy_point(buckets: np.ndarray) -> bool:
    """One non-empty bucket exactly 1 wide: read as the point mass TensorBoard's old TF2 writer meant."""
    filled = buckets[buckets[:, 2] > 0]
    return len(filled) == 1 and filled[0, 1] - filled[0, 0] == 1.0


def _split(buckets: np.ndarray, j: int, t: float, share: float) -> np.ndarray:
    a, b, c = buckets[j]
    m = a + t * (b - a)
    parts = np.array([[a, m, c * share], [m, b, c * (1 - share)]])
    return np.concatenate([buckets[:j], parts, buckets[j + 1:]])


@SETTINGS
@given(histograms(min_buckets=2), st.data(), st.floats(0.01, 0.99))
def test_splitting_a_bucket_in_proportion_changes_nothing(buckets, data, t):
    j = data.draw(st.integers(0, len(buckets) - 1))
    assume(buckets[:, 2].sum() > 0 and not _legacy_point(buckets))
    a, b, _ = buckets[j]
    assume(a < a + t * (b - a) < b)
    split = _split(buckets, j, t, share=t)  # the count in proportion to the widths
    _, before = _table([buckets])
    _, after = _table([split])
    scale = float(np.abs(buckets[:, :2]).max())
    for name in ("mean", "mean_abs", "l2", "min", "max", "count"):  # zero_fraction is a bound, not a density estimate
        assert after.values[name][0] == pytest.approx(before.values[name][0], rel=1e-7, abs=REL * scale), name
    assert after.values["std"][0] == pytest.approx(before.values["std"][0], rel=1e-6, abs=REL * scale)


@SETTINGS
@given(histograms(min_buckets=2), st.data(), st.floats(0.01, 0.99), st.floats(0.0, 1.0))
def test_splitting_a_bucket_unevenly_stays_within_the_width_bound(buckets, data, t, share):
    j = data.draw(st.integers(0, len(buckets) - 1))
    total = buckets[:, 2].sum()
    assume(total > 0 and not _legacy_point(buckets))
    a, b, c = buckets[j]
    assume(a < a + t * (b - a) < b)
    _, before = _table([buckets])
    _, after = _table([_split(buckets, j, t, share)])
    width = b - a
    scale = float(np.abs(buckets[:, :2]).max())
    slack = 1e-7 * scale
    assert abs(after.values["mean"][0] - before.values["mean"][0]) <= c / total * width + slack
    assert abs(after.values["std"][0] - before.values["std"][0]) <= width * np.sqrt(c / total) + slack


@SETTINGS
@given(histograms(min_buckets=2))
def test_estimates_within_the_width_bound_of_data_at_the_bucket_edges(buckets):
    """The bound holds for the most extreme data the buckets allow: every value on an edge."""
    counts = buckets[:, 2].astype(np.int64)
    assume(0 < counts.sum() <= 10 ** 6)
    _, table = _table([buckets])
    w = buckets[:, 1] - buckets[:, 0]
    n = counts.sum()
    mean_bound = (counts * w).sum() / (2 * n)
    std_bound = np.sqrt((counts * w ** 2).sum() / (3 * n))
    scale = float(np.abs(buckets[:, :2]).max())
    for side in (0, 1):
        values = np.repeat(buckets[:, side], counts)
        assert abs(table.values["mean"][0] - values.mean()) <= mean_bound * (1 + 1e-9) + 1e-9 * scale
        assert abs(table.values["std"][0] - values.std()) <= std_bound * (1 + 1e-9) + 1e-7 * scale
