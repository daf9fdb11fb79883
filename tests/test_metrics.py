"""Bucket metrics against numpy on the raw arrays, for histograms written by the real writers.

Known arrays go through TF2's ``tf.summary.histogram`` (30 equal buckets over the
data range) and PyTorch's ``SummaryWriter.add_histogram`` (v1 protos on TF's
exponential bucket grid, hundreds of buckets), are read back through the
plugin's ``cell`` route, and every metric is compared with numpy on the array
that was written. Tolerances are derived from the widths of the buckets that
actually hold the data, so a coarse histogram is allowed a larger error than a
fine one, and an ``exact`` quality label is held to float precision.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional, Tuple

import numpy as np
import pytest

from gradhealth_plugin.analysis import findings, health, metrics
from gradhealth_plugin.analysis import limits as rules
from gradhealth_plugin.analysis.detectors import CELL_RULES
from gradhealth_plugin.reading import tags as tags_lib

N = 10_000
STEPS = (0, 1, 2)
CONSTANT = np.float32(0.37)
FINITE_CASES = ("normal", "uniform", "relu", "heavy_tailed", "constant", "zeros")
NONFINITE_CASES = ("nan", "inf", "neg_inf")
WRITER_CASES = {"tf2": FINITE_CASES + NONFINITE_CASES, "torch": FINITE_CASES}
PAIRS = [(w, c) for w, cases in WRITER_CASES.items() for c in cases]
FINITE_PAIRS = [(w, c) for w, c in PAIRS if c in FINITE_CASES]
COMPARED = ("count", "mean", "std", "min", "max", "max_abs", "mean_abs", "l2", "skewness", "kurtosis",
            "zero_fraction", "small_fraction", "nonfinite")
# Edges pass through float32 on the v1 path (TensorBoard's histogram migration).
EDGE_RTOL = 2.5e-7
LIMITS = rules.thresholds()


def make_array(case: str, step: int) -> np.ndarray:
    rng = np.random.default_rng([sorted(FINITE_CASES + NONFINITE_CASES).index(case), step, 2024])
    if case == "normal":
        x = rng.normal(0.0, 0.05, N)
    elif case == "uniform":
        x = rng.uniform(-1.0, 1.0, N)
    elif case == "relu":
        x = np.maximum(rng.normal(0.0, 1.0, N), 0.0)
    elif case == "heavy_tailed":
        x = rng.standard_t(3, N)
    elif case == "constant":
        x = np.full(N, CONSTANT)
    elif case == "zeros":
        x = np.zeros(N)
    else:
        x = rng.normal(0.0, 0.05, N)
        bad = rng.choice(N, size=10, replace=False)
        x[bad] = {"nan": np.nan, "inf": np.inf, "neg_inf": -np.inf}[case]
    return x.astype(np.float32)


@pytest.fixture(scope="session")
def metric_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("metrics_logdir")
    import tensorflow as tf
    import torch
    from torch.utils.tensorboard import SummaryWriter

    tf_writer = tf.summary.create_file_writer(str(logdir / "tf2"))
    with tf_writer.as_default():
        for step in STEPS:
            for case in WRITER_CASES["tf2"]:
                tf.summary.histogram(f"gradients/{case}", tf.constant(make_array(case, step)), step=step)
    tf_writer.close()

    torch_writer = SummaryWriter(str(logdir / "torch"))
    for step in STEPS:
        for case in WRITER_CASES["torch"]:
            torch_writer.add_histogram(f"gradients/{case}", torch.from_numpy(make_array(case, step)), global_step=step)
    torch_writer.close()
    return logdir


@pytest.fixture(scope="session")
def metric_client(metric_logdir, plugin_client):
    return plugin_client(metric_logdir)


@pytest.fixture(scope="session")
def cells(metric_client) -> Dict[Tuple[str, str, int], dict]:
    out = {}
    for writer, case in PAIRS:
        for step in STEPS:
            body = metric_client.ok("/cell", run=writer, layer=case, step=step, role="gradient")
            out[(writer, case, step)] = body["roles"]["gradient"]
    return out


def true_metrics(x: np.ndarray) -> Dict[str, float]:
    x = x.astype(np.float64)
    finite = x[np.isfinite(x)]
    mean = finite.mean()
    d = finite - mean
    m2, m3, m4 = (d ** 2).mean(), (d ** 3).mean(), (d ** 4).mean()
    return {
        "count": float(x.size), "mean": mean, "std": math.sqrt(m2), "min": finite.min(), "max": finite.max(),
        "max_abs": np.abs(finite).max(), "mean_abs": np.abs(finite).mean(), "l2": math.sqrt((finite ** 2).sum()),
        "skewness": m3 / m2 ** 1.5 if m2 > 0 else math.nan,
        "kurtosis": m4 / m2 ** 2 - 3.0 if m2 > 0 else math.nan,
        "zero_fraction": float((x == 0).mean()), "small_fraction": float((np.abs(x) < metrics.SMALL).mean()),
        "nonfinite": float((~np.isfinite(x)).sum()),
    }


def assign_to_buckets(values: np.ndarray, buckets: np.ndarray) -> np.ndarray:
    """Bucket index of each value, pairing sorted values with buckets by cumulative count.

    Both writers bin monotonically, so the k-th smallest value sits in the bucket
    whose cumulative count first exceeds k.
    """
    cum = np.cumsum(buckets[:, 2])
    return np.searchsorted(cum, np.arange(len(values)), side="right")


def _corners(f, intervals):
    out = [f(*corner) for corner in np.array(np.meshgrid(*intervals)).T.reshape(-1, len(intervals))]
    return min(out), max(out)


def derived_bounds(x: np.ndarray, buckets: np.ndarray) -> Dict[str, float]:
    """Worst-case |estimate - truth| per metric, from the widths of the buckets holding each value.

    A value x in bucket [a, b] is modelled as uniform on [a, b]: the model's mean
    of the bucket is within (b - a) / 2 of x, and any model point within b - a of
    x. The central-moment bounds follow by the mean-value theorem on (x - mu)^k,
    with mu itself off by at most the mean half-width.
    """
    xs = np.sort(x[np.isfinite(x)].astype(np.float64))
    idx = assign_to_buckets(xs, buckets)
    a, b = buckets[idx, 0], buckets[idx, 1]
    w = b - a + EDGE_RTOL * np.maximum(np.abs(a), np.abs(b))
    n = len(xs)
    half = (w / 2).mean()
    spread = 0.5 + 1 / math.sqrt(12)
    d = xs - xs.mean()
    delta = w + half
    dm = {k: (k * delta * (np.abs(d) + delta) ** (k - 1)).mean() for k in (2, 3, 4)}
    m2, m3, m4 = (d ** 2).mean(), (d ** 3).mean(), (d ** 4).mean()
    if m2 > 0 and m2 - dm[2] > 0:
        m2_range = (m2 - dm[2], m2 + dm[2])
        skew = m3 / m2 ** 1.5
        lo, hi = _corners(lambda p, q: p / q ** 1.5, [(m3 - dm[3], m3 + dm[3]), m2_range])
        skew_bound = max(abs(lo - skew), abs(hi - skew))
        kurt = m4 / m2 ** 2
        lo, hi = _corners(lambda p, q: p / q ** 2, [(max(m4 - dm[4], 0.0), m4 + dm[4]), m2_range])
        kurt_bound = max(abs(lo - kurt), abs(hi - kurt))
    else:
        skew_bound = kurt_bound = math.inf if m2 > 0 else 0.0
    # A bucket straddling zero holds values no further from zero than its width.
    straddle = (buckets[:, 0] <= 0) & (buckets[:, 1] >= 0) & (buckets[:, 2] > 0)
    reach = (buckets[straddle, 1] - buckets[straddle, 0]).max(initial=0.0)
    zero_slack = float(((xs != 0) & (np.abs(xs) <= reach * (1 + EDGE_RTOL))).sum()) / n
    partial = (b >= -metrics.SMALL) & (a <= metrics.SMALL) & ~((a >= -metrics.SMALL) & (b <= metrics.SMALL))
    return {
        "count": 0.0,
        "mean": half, "mean_abs": half,
        "std": spread * math.sqrt((w ** 2).mean()),
        "l2": spread * math.sqrt((w ** 2).sum()),
        "min": w[0], "max": w[-1], "max_abs": max(w[0], w[-1]),
        "skewness": skew_bound, "kurtosis": kurt_bound,
        "zero_fraction": zero_slack,
        "small_fraction": float(partial.mean()),
        "nonfinite": 0.0,
    }


SMOOTH_CASES = ("normal", "uniform")


def smooth_bounds(x: np.ndarray, buckets: np.ndarray, sigmas: float = 6.0) -> Dict[str, float]:
    """|estimate - truth| for std, skewness and kurtosis when the data is smooth across buckets.

    Then a value's offset from the model's point, r = u - x with u uniform in the
    bucket, is close to zero-mean noise of variance w^2/6 that does not depend on
    x. It biases the central moments to m2 + s2, m3, m4 + 6 m2 s2 + E r^4
    (s2 = E w^2 / 6, E r^4 = E w^4 / 15), and spreads each m_k by about
    k sqrt(E[d^(2k-2) w^2 / 6] / n). The bound is the worst corner of
    bias +- `sigmas` spreads.
    """
    xs = np.sort(x.astype(np.float64))
    idx = assign_to_buckets(xs, buckets)
    w = buckets[idx, 1] - buckets[idx, 0]
    n = len(xs)
    d = xs - xs.mean()
    m2, m3, m4 = (d ** 2).mean(), (d ** 3).mean(), (d ** 4).mean()
    s2 = (w ** 2).mean() / 6
    centre = {2: m2 + s2, 3: m3, 4: m4 + 6 * m2 * s2 + (w ** 4).mean() / 15}
    spread = {k: sigmas * k * math.sqrt((d ** (2 * k - 2) * w ** 2 / 6).mean() / n) for k in (2, 3, 4)}
    box = {k: (centre[k] - spread[k], centre[k] + spread[k]) for k in (2, 3, 4)}
    assert box[2][0] > 0
    std = math.sqrt(m2)
    skew, kurt = m3 / m2 ** 1.5, m4 / m2 ** 2 - 3
    s_lo, s_hi = _corners(lambda p, q: p / q ** 1.5, [box[3], box[2]])
    k_lo, k_hi = _corners(lambda p, q: p / q ** 2 - 3, [box[4], box[2]])
    return {
        "std": max(abs(math.sqrt(box[2][0]) - std), abs(math.sqrt(box[2][1]) - std)),
        "skewness": max(abs(s_lo - skew), abs(s_hi - skew)),
        "kurtosis": max(abs(k_lo - kurt), abs(k_hi - kurt)),
    }


@dataclasses.dataclass
class Comparison:
    writer: str
    case: str
    step: int
    truth: Dict[str, float]
    estimate: Dict[str, Optional[float]]
    quality: Dict[str, str]
    bound: Dict[str, float]
    buckets: np.ndarray


@pytest.fixture(scope="session")
def comparisons(cells) -> Dict[Tuple[str, str, int], Comparison]:
    out = {}
    for (writer, case, step), cell in cells.items():
        x = make_array(case, step)
        buckets = np.array(cell["histogram"] or np.zeros((0, 3)), dtype=np.float64).reshape(-1, 3)
        finite_buckets = buckets[np.isfinite(buckets).all(axis=1)]
        out[(writer, case, step)] = Comparison(
            writer=writer, case=case, step=step, truth=true_metrics(x),
            estimate={m: cell["metrics"][m]["value"] for m in COMPARED},
            quality={m: cell["metrics"][m]["quality"] for m in COMPARED},
            bound=derived_bounds(x, finite_buckets) if case in FINITE_CASES else {},
            buckets=finite_buckets,
        )
    return out


def _error(c: Comparison, metric: str) -> float:
    est, truth = c.estimate[metric], c.truth[metric]
    if est is None or math.isnan(truth):
        return 0.0 if (est is None and math.isnan(truth)) else math.inf
    return abs(est - truth)


@pytest.mark.parametrize("writer,case", FINITE_PAIRS)
def test_buckets_hold_the_written_values(comparisons, writer, case):
    for step in STEPS:
        c = comparisons[(writer, case, step)]
        assert c.buckets[:, 2].sum() == N
        xs = np.sort(make_array(case, step).astype(np.float64))
        idx = assign_to_buckets(xs, c.buckets)
        a, b = c.buckets[idx, 0], c.buckets[idx, 1]
        tol = EDGE_RTOL * np.maximum(np.abs(a), np.abs(b)) + 1e-300
        outside = (xs < a - tol) | (xs > b + tol)
        assert not outside.any(), (step, xs[outside][:5], a[outside][:5], b[outside][:5])


@pytest.mark.parametrize("writer,case", FINITE_PAIRS)
def test_metrics_within_bucket_width_bounds(comparisons, writer, case):
    failures = []
    for step in STEPS:
        c = comparisons[(writer, case, step)]
        for metric in COMPARED:
            bound = c.bound[metric]
            slack = 1e-9 * max(abs(c.truth[metric]) if math.isfinite(c.truth[metric]) else 0.0, 1e-300)
            if metric == "zero_fraction" and c.quality[metric] == "upper_bound":
                # An upper bound may only err upwards.
                err = c.estimate[metric] - c.truth[metric]
                if not -slack <= err <= bound + slack:
                    failures.append((step, metric, c.estimate[metric], c.truth[metric], bound))
                continue
            if _error(c, metric) > bound + slack:
                failures.append((step, metric, c.estimate[metric], c.truth[metric], bound))
    assert not failures, failures


@pytest.mark.parametrize("writer,case", FINITE_PAIRS)
def test_exact_quality_is_exact(comparisons, writer, case):
    checked = 0
    for step in STEPS:
        c = comparisons[(writer, case, step)]
        for metric in COMPARED:
            if c.quality[metric] != "exact":
                continue
            checked += 1
            assert _error(c, metric) <= 1e-12 * max(abs(c.truth[metric]), 1.0), (step, metric, c.estimate[metric],
                                                                                c.truth[metric])
    assert checked >= len(STEPS)  # at least count is exact at every step


@pytest.mark.parametrize("writer,case", FINITE_PAIRS)
def test_range_sits_on_the_outer_edges(comparisons, writer, case):
    # Both writers put the data's min and max on the outer edges, so these are far
    # tighter than the one-bucket-width bound.
    for step in STEPS:
        c = comparisons[(writer, case, step)]
        for metric in ("min", "max", "max_abs"):
            assert _error(c, metric) <= EDGE_RTOL * abs(c.truth[metric]), (step, metric, c.estimate[metric],
                                                                           c.truth[metric])


@pytest.mark.parametrize("writer,case", [(w, c) for w in WRITER_CASES for c in SMOOTH_CASES])
def test_shape_metrics_on_smooth_data_are_second_order(comparisons, writer, case):
    # The worst-case bounds allow any placement inside a bucket; on smooth data the
    # estimator's own assumption holds and its error must be far smaller.
    for step in STEPS:
        c = comparisons[(writer, case, step)]
        bounds = smooth_bounds(make_array(case, step), c.buckets)
        for metric, bound in bounds.items():
            assert _error(c, metric) <= bound, (step, metric, c.estimate[metric], c.truth[metric], bound)


def uniform_model(buckets: np.ndarray, points: int = 2000) -> Dict[str, float]:
    """The uniform-within-bucket moments by midpoint-rule integration, independent of metrics.py."""
    a, b, c = buckets[:, 0], buckets[:, 1], buckets[:, 2]
    frac = (np.arange(points) + 0.5) / points
    x = (a[:, None] + (b - a)[:, None] * frac[None, :]).ravel()
    wt = np.repeat(c / points, points)
    total = wt.sum()
    mean = (wt * x).sum() / total
    d = x - mean
    m2, m3, m4 = ((wt * d ** k).sum() / total for k in (2, 3, 4))
    return {
        "mean": mean, "std": math.sqrt(m2), "mean_abs": (wt * np.abs(x)).sum() / total,
        "l2": math.sqrt((wt * x * x).sum()),
        "skewness": m3 / m2 ** 1.5 if m2 > 0 else math.nan,
        "kurtosis": m4 / m2 ** 2 - 3 if m2 > 0 else math.nan,
        "min": a.min(), "max": b.max(),
    }


@pytest.mark.parametrize("writer,case", FINITE_PAIRS)
def test_estimates_are_the_uniform_bucket_model(comparisons, writer, case):
    for step in STEPS:
        c = comparisons[(writer, case, step)]
        model = uniform_model(c.buckets)
        for metric, expected in model.items():
            got = c.estimate[metric]
            if math.isnan(expected):
                assert got is None, (step, metric, got)
                continue
            scale = {"mean": model["std"], "skewness": 1.0, "kurtosis": 1.0}.get(metric, abs(expected))
            assert got == pytest.approx(expected, rel=1e-5, abs=1e-5 * scale), (step, metric)


@pytest.mark.parametrize("writer", sorted(WRITER_CASES))
def test_relu_zero_fraction_is_an_upper_bound_unless_the_bucket_at_zero_is_within_small(comparisons, writer):
    for step in STEPS:
        c = comparisons[(writer, "relu", step)]
        truth = c.truth["zero_fraction"]
        assert 0.45 < truth < 0.55
        assert c.estimate["zero_fraction"] >= truth
        if writer == "tf2":
            # The first of 30 buckets [0, max/30] also holds the smallest positive values.
            assert c.quality["zero_fraction"] == "upper_bound"
            assert c.estimate["zero_fraction"] > truth
        else:
            # TF's bucket grid has an edge at 0 and a first bucket [0, 1e-12]: zeros to within SMALL.
            assert c.quality["zero_fraction"] == "exact"
            assert c.estimate["zero_fraction"] == pytest.approx(truth, abs=1.0 / N)


@pytest.mark.parametrize("writer", sorted(WRITER_CASES))
def test_constant_has_zero_spread_and_no_shape(cells, writer):
    for step in STEPS:
        m = cells[(writer, "constant", step)]["metrics"]
        assert m["count"] == {"value": N, "quality": "exact"}
        assert m["std"]["value"] == 0.0
        assert m["min"]["value"] == m["max"]["value"] == pytest.approx(float(CONSTANT), rel=1e-7)
        assert m["mean"]["value"] == pytest.approx(float(CONSTANT), rel=1e-7)
        for shape in ("skewness", "kurtosis"):
            assert m[shape] == {"value": None, "quality": "no_data"}
        assert m["zero_fraction"] == {"value": 0.0, "quality": "exact"}


@pytest.mark.parametrize("writer", sorted(WRITER_CASES))
def test_all_zero_array(cells, writer):
    for step in STEPS:
        m = cells[(writer, "zeros", step)]["metrics"]
        assert m["zero_fraction"] == {"value": 1.0, "quality": "exact"}
        assert m["small_fraction"] == {"value": 1.0, "quality": "exact"}
        for metric in ("mean", "std", "l2", "mean_abs", "max_abs", "min", "max"):
            assert m[metric]["value"] == 0.0, metric
        assert m["skewness"]["value"] is None and m["kurtosis"]["value"] is None


@pytest.mark.parametrize("case", NONFINITE_CASES)
def test_nonfinite_input_is_flagged_critical(cells, case):
    for step in STEPS:
        cell = cells[("tf2", case, step)]
        m = cell["metrics"]
        truth = float((~np.isfinite(make_array(case, step))).sum())
        assert m["nonfinite"]["value"] > 0
        if m["nonfinite"]["quality"] == "exact":
            assert m["nonfinite"]["value"] == truth
        else:
            assert m["nonfinite"]["quality"] == "lower_bound"
            assert m["nonfinite"]["value"] <= truth
        assert cell["status"] == "critical"
        assert cell["rule"] == "nonfinite"
        assert cell["score"] is not None and cell["score"] <= 0.25
        # TF2 cannot place any value once the range is infinite: nothing may be invented. No value, yet a
        # step of the tensor's NaN/Inf ("finite_only"), never one without data.
        for metric in ("mean", "std", "skewness", "kurtosis", "l2", "min", "max"):
            assert m[metric] == {"value": None, "quality": "finite_only"}, metric
        # A count of what the writer did bin is at most the tensor size, never claimed exact.
        assert m["count"]["value"] <= N and m["count"]["quality"] != "exact"


def test_nan_input_is_written_as_nan_edges_with_zero_counts(cells):
    # The premise of the lower bound: TF2 records NaN input without counting it.
    buckets = cells[("tf2", "nan", 0)]["histogram"]
    assert buckets == [] or all(b[2] == 0 for b in buckets)


def test_torch_writer_uses_hundreds_of_buckets(comparisons):
    kept = [len(comparisons[("torch", case, 0)].buckets) for case in ("normal", "uniform", "heavy_tailed")]
    assert min(kept) > 100
    assert all(len(comparisons[("tf2", case, 0)].buckets) <= 30 for case in FINITE_CASES)


# --- stack_histograms -------------------------------------------------------------------------


def test_stack_pads_ragged_and_empty_histograms():
    h = metrics.stack_histograms(
        [5, 6, 7, 8],
        [1.0, 2.0, 3.0, 4.0],
        [np.array([[0.0, 1.0, 2.0], [1.0, 2.0, 3.0]]), np.zeros((0, 3)), [], np.array([[-1.0, 0.0, 4.0]] * 3)],
    )
    assert h.left.shape == h.right.shape == h.count.shape == (4, 3)
    assert h.steps.tolist() == [5, 6, 7, 8] and h.steps.dtype == np.int64
    assert h.count.tolist() == [[2, 3, 0], [0, 0, 0], [0, 0, 0], [4, 4, 4]]
    assert h.left[0].tolist() == [0, 1, 0] and h.right[3].tolist() == [0, 0, 0]
    t = metrics.histogram_metrics(h)
    assert t.values["count"].tolist() == [5, 0, 0, 12]
    assert np.isnan(t.values["mean"][1:3]).all()
    assert (t.quality["mean"][1:3] == metrics.NO_DATA).all()
    assert t.values["mean"][0] == pytest.approx((2 * 0.5 + 3 * 1.5) / 5)
    assert t.values["mean"][3] == pytest.approx(-0.5)


def test_stack_of_nothing():
    h = metrics.stack_histograms([], [], [])
    assert h.count.shape[0] == 0
    t = metrics.histogram_metrics(h)
    assert len(t.steps) == 0 and len(t.values["mean"]) == 0


def test_stack_accepts_flat_bucket_lists():
    h = metrics.stack_histograms([0], [0.0], [[0.0, 2.0, 4.0, 2.0, 4.0, 4.0]])
    assert h.count.tolist() == [[4.0, 4.0]]


def test_zero_and_negative_counts_carry_no_data():
    h = metrics.stack_histograms([0], [0.0], [np.array([[-5.0, -4.0, -3.0], [0.0, 2.0, 10.0], [7.0, 8.0, 0.0]])])
    t = metrics.histogram_metrics(h)
    assert t.values["count"][0] == 10
    assert t.values["min"][0] == 0.0 and t.values["max"][0] == 2.0
    assert t.values["mean"][0] == pytest.approx(1.0)


@pytest.mark.parametrize("value", [0.0, -0.0364896953105927, 3.5, 1e6])
def test_legacy_single_value_bucket_is_a_point_mass(value):
    # TensorBoard before late 2021 wrote an all-equal tensor as [v - 0.5, v + 0.5].
    t = metrics.histogram_metrics(metrics.stack_histograms([0], [0.0], [[[value - 0.5, value + 0.5, 64.0]]]))
    assert t.values["count"][0] == 64
    for name in ("mean", "min", "max"):
        assert t.values[name][0] == pytest.approx(value, abs=1e-12), name
    assert t.values["std"][0] == 0.0
    assert np.isnan(t.values["skewness"][0]) and t.quality["skewness"][0] == metrics.NO_DATA
    assert t.values["max_abs"][0] == pytest.approx(abs(value), abs=1e-12)
    if value == 0.0:
        # An all-zero gradient must read as vanished, not as spread over [-0.5, 0.5].
        assert t.values["zero_fraction"][0] == 1.0 and t.quality["zero_fraction"][0] == metrics.EXACT
        assert t.values["small_fraction"][0] == 1.0 and t.values["mean_abs"][0] == 0.0
        h = findings.cell_health(t, tags_lib.GRADIENT, tags_lib.KIND_KERNEL, LIMITS)
        assert h.rule.tolist() == ["vanishing_gradients"]


def test_width_one_buckets_among_others_stay_spread():
    two = [[0.0, 1.0, 5.0], [1.0, 2.0, 5.0]]
    narrow = [[0.0, 0.999, 5.0]]
    t = metrics.histogram_metrics(metrics.stack_histograms([0, 1], [0.0, 0.0], [two, narrow]))
    assert t.values["std"][0] == pytest.approx(math.sqrt(1 / 3))
    assert t.values["std"][1] == pytest.approx(0.999 / math.sqrt(12))
    assert t.values["min"].tolist() == [0.0, 0.0] and t.values["max"].tolist() == [2.0, 0.999]


def test_left_greater_than_right_buckets_are_dropped():
    buckets = np.array([[0.0, 1.0, 4.0], [3.0, 2.0, 100.0], [1.0, 2.0, 4.0]])
    t = metrics.histogram_metrics(metrics.stack_histograms([0], [0.0], [buckets]))
    assert t.values["count"][0] == 8
    assert t.values["mean"][0] == pytest.approx(1.0)
    assert t.values["std"][0] == pytest.approx(math.sqrt(1 / 3))
    assert t.values["max"][0] == 2.0


def test_nan_and_inf_edges_do_not_crash_and_are_flagged():
    nan_row = np.array([[np.nan, np.nan, 0.0]] * 3)
    inf_row = np.array([[-0.5, np.inf, 9.0], [np.inf, np.inf, 0.0]])
    neg_inf_row = np.array([[-np.inf, np.nan, 0.0], [np.nan, 0.5, 0.0]])
    fine_row = np.array([[-1.0, 1.0, 4.0]])
    nan_counted = np.array([[0.0, 1.0, 4.0], [np.nan, np.nan, 2.0]])
    with np.errstate(all="raise"):
        t = metrics.histogram_metrics(metrics.stack_histograms(
            range(5), [0.0] * 5, [nan_row, inf_row, neg_inf_row, fine_row, nan_counted]))
    nonfinite, quality = t.values["nonfinite"], t.quality["nonfinite"]
    assert nonfinite[:3].tolist() == [1.0, 1.0, 1.0]
    assert quality[:3].tolist() == [metrics.LOWER_BOUND] * 3
    assert nonfinite[3] == 0 and quality[3] == metrics.EXACT
    # A bucket with no finite edge is the only place a writer can count non-finite values.
    assert nonfinite[4] == 2 and quality[4] == metrics.EXACT
    assert np.isnan(t.values["mean"][:3]).all()
    assert t.values["mean"][3] == 0.0 and t.values["mean"][4] == 0.5
    assert t.quality["count"][:3].tolist() == [metrics.LOWER_BOUND] * 3
    assert t.quality["count"][3] == metrics.EXACT


# --- merge_exact ------------------------------------------------------------------------------


def _table(steps, **values):
    n = len(steps)
    return metrics.MetricTable(
        steps=np.asarray(steps, dtype=np.int64),
        values={k: np.asarray(v, dtype=np.float64) for k, v in values.items()},
        quality={k: np.where(np.isnan(np.asarray(v, dtype=np.float64)), metrics.NO_DATA, metrics.ESTIMATED)
                 .astype(np.uint8) for k, v in values.items()} if n else {},
    )


def test_merge_exact_overlays_and_extends_steps():
    base = _table([0, 10, 20], mean=[1.0, 2.0, 3.0], std=[0.5, 0.5, 0.5])
    merged = metrics.merge_exact(base, np.array([30, 10]), {"mean": np.array([9.0, 7.0])})
    assert merged.steps.tolist() == [0, 10, 20, 30]
    assert merged.values["mean"].tolist() == [1.0, 7.0, 3.0, 9.0]
    assert merged.quality["mean"].tolist() == [metrics.ESTIMATED, metrics.EXACT, metrics.ESTIMATED, metrics.EXACT]
    assert merged.values["std"][:3].tolist() == [0.5, 0.5, 0.5] and np.isnan(merged.values["std"][3])
    assert merged.quality["std"][3] == metrics.NO_DATA


def test_merge_exact_nan_does_not_override():
    base = _table([0, 1], mean=[1.0, 2.0])
    merged = metrics.merge_exact(base, np.array([0, 1]), {"mean": np.array([np.nan, 5.0])})
    assert merged.values["mean"].tolist() == [1.0, 5.0]
    assert merged.quality["mean"].tolist() == [metrics.ESTIMATED, metrics.EXACT]


def test_merge_exact_std_recomputes_std_rel_first():
    base = _table([0, 1, 2], std=[1.0, 2.0, 4.0])
    assert base.get("std_rel_first").tolist() == [1.0, 2.0, 4.0]
    merged = metrics.merge_exact(base, np.array([0]), {"std": np.array([2.0])})
    assert merged.get("std_rel_first").tolist() == [1.0, 1.0, 2.0]
    assert merged.quality_of("std_rel_first")[0] == metrics.EXACT


def test_merge_exact_onto_empty_table():
    merged = metrics.merge_exact(metrics.empty_table(), np.array([3, 1, 2]), {"max": np.array([0.3, 0.1, 0.2])})
    assert merged.steps.tolist() == [1, 2, 3]
    assert merged.values["max"].tolist() == [0.1, 0.2, 0.3]
    assert (merged.quality["max"] == metrics.EXACT).all()


# --- findings.cell_health -----------------------------------------------------------------------

_RULE_IDS = [f"{r.name}:{r.metric}:{'above' if r.above else 'below'}" for r in CELL_RULES]


def _kind_for(rule):
    if rule.kinds is not None:
        return rule.kinds[0]
    return tags_lib.KIND_KERNEL if rule.roles[0] == tags_lib.WEIGHT else tags_lib.KIND_OTHER


def _around(rule, signed=1.0):
    """A value just short of firing and one just past, for one rule."""
    limit = LIMITS[rule.threshold] if rule.threshold else 0.0
    if not rule.threshold:
        return 0.0, 1.0
    eps = 1e-3
    short, past = (limit * (1 - eps), limit * (1 + eps)) if rule.above else (limit * (1 + eps), limit * (1 - eps))
    return signed * short, signed * past


@pytest.mark.parametrize("rule", CELL_RULES, ids=_RULE_IDS)
def test_cell_rule_fires_just_past_its_threshold(rule):
    short, past = _around(rule)
    for role in rule.roles:
        # l2 is read by no rule; it makes both steps hold data whatever the rule's metric.
        t = _table([0, 1], l2=[1.0, 1.0], **{rule.metric: [short, past]})
        h = findings.cell_health(t, role, _kind_for(rule), LIMITS)
        assert h.status.tolist() == [health.OK, rule.status], role
        assert h.rule.tolist() == ["", rule.name]
        assert 0.6 < h.score[0] <= 1.0
        band = (0.0, 0.25) if rule.status == health.CRITICAL else (0.25, 0.6)
        assert band[0] <= h.score[1] <= band[1]


@pytest.mark.parametrize("rule", [r for r in CELL_RULES if r.use_abs], ids=lambda r: r.threshold)
def test_abs_rules_fire_on_negative_values(rule):
    short, past = _around(rule, signed=-1.0)
    h = findings.cell_health(_table([0, 1], **{rule.metric: [short, past]}), rule.roles[0], _kind_for(rule), LIMITS)
    assert h.status.tolist() == [health.OK, rule.status]


@pytest.mark.parametrize("rule", [r for r in CELL_RULES if r.kinds is not None], ids=lambda r: r.threshold)
def test_cell_rules_skip_exempt_kinds(rule):
    _, past = _around(rule)
    exempt = [k for k in (tags_lib.KIND_BIAS, tags_lib.KIND_NORM, tags_lib.KIND_PREACTIVATION, tags_lib.KIND_OUTPUT,
                          tags_lib.KIND_KERNEL) if k not in rule.kinds]
    assert exempt
    for kind in exempt:
        h = findings.cell_health(_table([0], **{rule.metric: [past]}), rule.roles[0], kind, LIMITS)
        assert h.status.tolist() == [health.OK], kind


def test_biases_and_norm_params_are_exempt_from_weight_shape_rules():
    t = _table([0], std_rel_first=[50.0], mean=[5.0], skewness=[8.0])
    for kind in (tags_lib.KIND_BIAS, tags_lib.KIND_NORM):
        assert findings.cell_health(t, tags_lib.WEIGHT, kind, LIMITS).status.tolist() == [health.OK]
    assert findings.cell_health(t, tags_lib.WEIGHT, tags_lib.KIND_KERNEL, LIMITS).status.tolist() == [health.WARN]


def test_rules_do_not_fire_for_other_roles():
    t = _table([0], max_abs=[1e9], small_fraction=[1.0], mean_abs=[0.0], zero_fraction=[1.0])
    h = findings.cell_health(t, tags_lib.WEIGHT, tags_lib.KIND_KERNEL, LIMITS)
    assert h.status.tolist() == [health.OK]


def test_critical_wins_over_warn_and_no_data_is_no_data():
    t = _table([0, 1], max_abs=[1e9, np.nan], small_fraction=[1.0, np.nan])
    h = findings.cell_health(t, tags_lib.GRADIENT, tags_lib.KIND_KERNEL, LIMITS)
    assert h.status.tolist() == [health.CRITICAL, health.NO_DATA]
    assert h.rule.tolist() == ["exploding_gradients", None]
    assert np.isnan(h.score[1])


def test_overridden_threshold_moves_the_boundary():
    limits = rules.thresholds({"exploding_max_abs": 10.0})
    t = _table([0, 1], max_abs=[9.9, 10.1])
    h = findings.cell_health(t, tags_lib.GRADIENT, tags_lib.KIND_KERNEL, limits)
    assert h.status.tolist() == [health.OK, health.CRITICAL]


# --- measured errors --------------------------------------------------------------------------

# How each metric's error is normalised in the report: by |truth|, by the data's std,
# or left absolute (already dimensionless).
_NORMALISER = {"mean": "std", "skewness": "abs", "kurtosis": "abs", "zero_fraction": "abs",
               "small_fraction": "abs", "nonfinite": "abs"}


def error_table(comparisons) -> Dict[Tuple[str, str, str], Tuple[float, float]]:
    """(writer, case, metric) -> (max normalised error over the steps, max share of the derived bound used)."""
    table: Dict[Tuple[str, str, str], Tuple[float, float]] = {}
    for (writer, case, step), c in comparisons.items():
        if case not in FINITE_CASES:
            continue
        for metric in COMPARED:
            err = _error(c, metric)
            kind = _NORMALISER.get(metric, "rel")
            scale = {"rel": abs(c.truth[metric]), "std": c.truth["std"], "abs": 1.0}[kind]
            norm = err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
            used = err / c.bound[metric] if c.bound[metric] > 0 else (0.0 if err == 0 else math.inf)
            old = table.get((writer, case, metric), (0.0, 0.0))
            table[(writer, case, metric)] = (max(old[0], norm), max(old[1], used))
    return table


def test_measured_error_report(comparisons, capsys):
    table = error_table(comparisons)
    assert len(table) == len(WRITER_CASES) * len(FINITE_CASES) * len(COMPARED)
    assert all(math.isfinite(err) and used <= 1.0 + 1e-9 for err, used in table.values())
    lines = ["", f"gradhealth bucket metrics vs numpy on the written arrays: max error over {len(STEPS)} steps of "
                 f"{N} values; mean in units of std, skewness/kurtosis/fractions absolute, others relative to |truth|"]
    for writer in sorted(WRITER_CASES):
        sizes = [len(c.buckets) for (w, case, _), c in comparisons.items() if w == writer and case in FINITE_CASES]
        lines.append(f"{writer}: {min(sizes)}..{max(sizes)} non-empty buckets")
        lines.append(f"  {'metric':<15}" + "".join(f"{case:>13}" for case in FINITE_CASES) + f"{'bound used':>12}")
        for metric in COMPARED:
            cells = [table[(writer, case, metric)] for case in FINITE_CASES]
            lines.append(f"  {metric:<15}" + "".join(f"{err:>13.3g}" for err, _ in cells)
                         + f"{max(used for _, used in cells):>12.1%}")
    with capsys.disabled():
        print("\n".join(lines))


# --- update-to-weight ratio from update histograms -------------------------------------------------

UPDATE_STEPS = (0, 1, 2)
UPDATE_PARAMS = ("fc.weight", "fc.bias")


@pytest.fixture(scope="session")
def update_run(tmp_path_factory):
    """nn.Linear(100, 100) trained with SGD; each step logs ``weights/<name>`` (before the step) and
    ``updates/<name>`` (after - before), through TF2's ``tf.summary.histogram`` (run ``tf2``) and
    PyTorch's ``SummaryWriter.add_histogram`` (run ``torch``). Returns (logdir, {(name, step): (w, u)})."""
    import tensorflow as tf
    import torch
    from torch.utils.tensorboard import SummaryWriter

    logdir = tmp_path_factory.mktemp("update_logdir")
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("fc", torch.nn.Linear(100, 100))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    truth = {}
    for step in UPDATE_STEPS:
        x, y = torch.randn(64, 100, generator=g), torch.randn(64, 100, generator=g)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        before = {n: p.detach().clone().numpy() for n, p in model.named_parameters()}
        optimizer.step()
        for n, p in model.named_parameters():
            truth[(n, step)] = (before[n], p.detach().numpy() - before[n])
    tf_writer = tf.summary.create_file_writer(str(logdir / "tf2"))
    with tf_writer.as_default():
        for (name, step), (w, u) in truth.items():
            tf.summary.histogram(f"weights/{name}", tf.constant(w), step=step)
            tf.summary.histogram(f"updates/{name}", tf.constant(u), step=step)
    tf_writer.close()
    torch_writer = SummaryWriter(str(logdir / "torch"))
    for (name, step), (w, u) in truth.items():
        torch_writer.add_histogram(f"weights/{name}", torch.from_numpy(w), global_step=step)
        torch_writer.add_histogram(f"updates/{name}", torch.from_numpy(u), global_step=step)
    torch_writer.close()
    return logdir, truth


@pytest.mark.parametrize("writer", ["tf2", "torch"])
def test_update_ratio_from_update_and_weight_histograms(update_run, plugin_client, writer):
    """||u|| / ||w|| from the two histograms' L2 norms, within what their buckets can resolve."""
    logdir, truth = update_run
    client = plugin_client(logdir)
    for (name, step), (w, u) in truth.items():
        roles = client.ok("/cell", run=writer, layer=name, step=step)["roles"]
        assert set(roles) >= {"weight", "update"}, roles.keys()
        ratio = roles["weight"]["metrics"]["update_ratio"]
        assert ratio["quality"] == "estimated", (name, step, ratio)
        # The L2 norm of each histogram is off by at most its bucket-width bound.
        bounds = []
        for x, role in ((u, "update"), (w, "weight")):
            buckets = np.array(roles[role]["histogram"], dtype=np.float64).reshape(-1, 3)
            norm = true_metrics(x)["l2"]
            err = derived_bounds(x, buckets)["l2"]
            assert err < 0.5 * norm, (role, norm, err)  # the histograms resolve the norms at all
            bounds.append((norm - err, norm + err))
        (u_lo, u_hi), (w_lo, w_hi) = bounds
        exact = float(np.linalg.norm(u) / np.linalg.norm(w))
        assert 1e-3 < exact < 0.1  # SGD on this layer: far from 1, so the inverse is far off too
        assert u_lo / w_hi <= ratio["value"] <= u_hi / w_lo, (name, step, ratio["value"], exact)
        assert ratio["value"] == pytest.approx(exact, rel=0.1), (name, step, ratio["value"], exact)


def test_shown_qualities_of_rows_at_once_are_each_tables_own():
    steps = np.arange(6, dtype=np.int64)
    exact = np.full(6, metrics.EXACT, dtype=np.uint8)

    def tensor(nonfinite):
        values = {"max_abs": np.ones(6), "count": np.full(6, 10.0)}
        if nonfinite is not None:
            values["nonfinite"] = np.asarray(nonfinite, dtype=np.float64)
        return metrics.MetricTable(steps=steps, values=values, quality={k: exact.copy() for k in values})

    tables = [tensor([0, 3, 0, np.nan, 0, 10]), tensor(None), tensor([0] * 6)]
    for name in ("max_abs", "count"):
        for at in (slice(None), slice(1, 4)):
            one_by_one = [metrics.shown_quality(t, name, at).tolist() for t in tables]
            assert metrics.shown_qualities(tables, name, at).tolist() == one_by_one
    assert metrics.shown_qualities(tables, "max_abs")[0].tolist() == [1, 5, 1, 1, 1, 5]


# --- std_rel_first: computed from the std column when asked, never stored ---------------------------

GROWTH_STEPS = 12


def _growth_array(tag: str, step: int) -> np.ndarray:
    """Weights whose first std comes at different steps: 'late' is all zeros (std 0) for its first
    steps, 'empty' holds no value at all (no std) for its first, 'nonfinite' holds a NaN at step 0 only."""
    x = np.random.default_rng([len(tag), step]).normal(0.0, 0.02 * (1 + step), 64)
    if tag == "late" and step < 4:
        x = np.zeros(64)
    if tag == "empty" and step < 3:
        x = np.zeros(0)
    if tag == "nonfinite" and step == 0:
        x[5] = np.inf
    return x.astype(np.float32)


@pytest.fixture(scope="module")
def growth_logdir(tmp_path_factory):
    """TF2 weight histograms of a few tags, few steps each: the reading path computes them in one batch."""
    import tensorflow as tf

    logdir = tmp_path_factory.mktemp("growth_logdir")
    writer = tf.summary.create_file_writer(str(logdir / "run"))
    with writer.as_default():
        for step in range(GROWTH_STEPS):
            for tag in ("plain", "late", "empty", "nonfinite", "later_start"):
                if tag == "later_start" and step < 5:
                    continue
                tf.summary.histogram(f"weights/{tag}/kernel", tf.constant(_growth_array(tag, step)), step=step)
    writer.close()
    return logdir


def _std_rel_first_as_stored(std: np.ndarray, std_quality: np.ndarray) -> tuple:
    """The std over the tensor's first finite std, NaN (no data) where that is not finite or the first is
    0 (a tensor constant where first logged has no spread to grow from). Written out step by step, apart
    from the code it checks."""
    finite = [s for s in std.tolist() if math.isfinite(s)]
    values, quality = [], []
    for s, q in zip(std.tolist(), std_quality.tolist()):
        with np.errstate(invalid="ignore", over="ignore"):
            rel = np.float64(s) / np.float64(finite[0]) if finite and finite[0] > 0 else np.nan
        values.append(float(rel) if math.isfinite(rel) else np.nan)
        quality.append(q if math.isfinite(rel) else metrics.NO_DATA)
    return np.array(values), np.array(quality, dtype=np.uint8)


def test_std_rel_first_is_derived_from_the_std_of_each_tag(loader_client, growth_logdir):
    """Tables read in one batch of tags whose first std comes at different steps (after zeros, after steps
    without any value, after a step holding an Inf, on a later first step) hold no `std_rel_first` column,
    and give the one they held: per tag, per row once stacked, and from the first std also where `judged`
    leaves that step out."""
    from tensorboard import context as tb_context

    client = loader_client(growth_logdir)
    rd, _ = client.plugin._analyzer.run(tb_context.RequestContext(), "", "run")
    tables = {layer.name: layer.roles["weight"].table for layer in rd.layers}
    assert len(tables) == 5
    same_length = []
    for name, table in tables.items():
        assert "std_rel_first" not in table.values and "std_rel_first" not in table.quality, name
        want, want_quality = _std_rel_first_as_stored(table.get("std"), table.quality_of("std"))
        np.testing.assert_array_equal(table.get("std_rel_first"), want, err_msg=name)
        np.testing.assert_array_equal(table.quality_of("std_rel_first"), want_quality, err_msg=name)
        assert table.has("std_rel_first")
        if len(table.steps) == GROWTH_STEPS:
            same_length.append((table, want, want_quality))
    late = tables["late/kernel"]
    # All zeros where first logged: no spread to grow from, its growth is not judged.
    assert np.isnan(late.get("std_rel_first")).all()
    assert np.isnan(tables["empty/kernel"].get("std_rel_first")[:3]).all()
    assert tables["empty/kernel"].get("std_rel_first")[3] == 1.0
    assert tables["later_start/kernel"].get("std_rel_first")[0] == 1.0

    stacked = metrics.stack_tables([t for t, _, _ in same_length])
    assert len(same_length) == 4 and "std_rel_first" not in stacked.values
    np.testing.assert_array_equal(stacked.get("std_rel_first"), np.array([w for _, w, _ in same_length]))
    np.testing.assert_array_equal(stacked.quality_of("std_rel_first"), np.array([q for _, _, q in same_length]))

    # A tensor holding an Inf at step 0, its std there of its finite values (as gradhealth's own summaries
    # give it): judged, that step is the non-finite rule's alone, and the growth after it is still
    # measured from the std logged there.
    plain = tables["plain/kernel"]
    held_inf = metrics.MetricTable(steps=plain.steps, values={**plain.values, "nonfinite": np.eye(1, GROWTH_STEPS)[0]},
                                   quality=plain.quality)
    judged = metrics.judged(held_inf)
    want, want_quality = _std_rel_first_as_stored(plain.get("std"), plain.quality_of("std"))
    assert np.isnan(judged.get("std")[0]) and want[0] == 1.0
    np.testing.assert_array_equal(judged.get("std_rel_first"), np.concatenate([[np.nan], want[1:]]))
    np.testing.assert_array_equal(judged.quality_of("std_rel_first"), np.concatenate([[0], want_quality[1:]]))
    both = metrics.stack_tables([judged, metrics.judged(late)])
    np.testing.assert_array_equal(both.get("std_rel_first"), np.array([judged.get("std_rel_first"),
                                                                       late.get("std_rel_first")]))

    series = client.ok("/series", run="run", layer="empty/kernel", metric="std_rel_first", role="weight")
    assert series["series"]["weight"]["values"][:4] == [None, None, None, 1.0]
    cell = client.ok("/cell", run="run", layer="empty/kernel", step=3, role="weight")
    assert cell["roles"]["weight"]["metrics"]["std_rel_first"] == {"value": 1.0, "quality": "estimated"}
    late_series = client.ok("/series", run="run", layer="late/kernel", metric="std_rel_first", role="weight")
    assert set(late_series["series"]["weight"]["values"]) == {None}


@pytest.fixture(scope="module")
def constant_start_logdir(tmp_path_factory):
    """gradhealth's `watch` on a torch `nn.Sequential(Linear, BatchNorm1d, ReLU, Linear)`, as torchvision's
    `downsample` is one: the BatchNorm's scale is named `1.weight`, like a kernel, and starts at 1.0 in
    every unit (std 0). 40 SGD steps, each logged, spread it; the kernels start random."""
    torch = pytest.importorskip("torch")
    from gradhealth_plugin.torch import watch

    torch.manual_seed(0)
    logdir = tmp_path_factory.mktemp("constant_start")
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    handle = watch(model, str(logdir / "run"), optimizer=optimizer, every_n_steps=1, activations=False)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    for _ in range(40):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    handle.remove()
    return logdir


def test_a_weight_constant_where_first_logged_is_not_judged_for_growth(constant_start_logdir, plugin_client):
    """The BatchNorm scale named like a kernel grows from a std of 0: no ratio, no weight growth, while the
    kernels' growth is measured from their first std."""
    client = plugin_client(constant_start_logdir)
    hm = client.ok("/heatmap", run="run", role="weight", metric="std_rel_first")
    rows = dict(zip(hm["layers"], hm["values"]))
    assert set(rows) >= {"0.weight", "1.weight", "3.weight"}, list(rows)
    assert all(v is None for v in rows["1.weight"]), rows["1.weight"]
    assert rows["0.weight"][0] == 1.0 and rows["3.weight"][0] == 1.0, (rows["0.weight"][:3], rows["3.weight"][:3])
    found = client.ok("/findings", run="run")["findings"]
    grown = [f for f in found if f["kind"] == "weight_growth"]
    assert not any("1.weight" in f["layers"] for f in grown), grown




def test_a_bound_proves_only_the_side_it_bounds():
    """An upper bound proves a value below a line, never above it; a lower bound the reverse."""
    quality = np.array([metrics.EXACT, metrics.ESTIMATED, metrics.UPPER_BOUND, metrics.LOWER_BOUND])
    assert metrics.proves(quality, above=True).tolist() == [True, True, False, True]
    assert metrics.proves(quality, above=False).tolist() == [True, True, True, False]
