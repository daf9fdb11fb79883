"""exploding_gradients.py: the held baseline of norm series, all rows and explosions at once, against a
step-by-step reading of its definition on random series of every shape a norm takes."""

import numpy as np
import pytest

from gradhealth_plugin import config as config_lib
from gradhealth_plugin.analysis import limits, series
from gradhealth_plugin.analysis.detectors import exploding_gradients as exploding


def _reference(values, window, jump):
    """The held baseline one logged step at a time: before any explosion the median of the previous
    `window` values (NaN under 3 of them); an explosion starts where a value is more than `jump` times
    its baseline and holds that baseline until a value is back within `jump` of it; after one the median
    leaves out every value inside an explosion, the last held baseline standing in where it is not
    finite."""
    n = len(values)
    baseline, normal = np.full(n, np.nan), values.copy()
    held, exploding_now = None, False
    for i in range(n):
        if exploding_now and not values[i] <= held * jump:
            baseline[i], normal[i] = held, np.nan
            continue
        exploding_now = False
        prior = normal[max(0, i - window):i]
        prior = prior[~np.isnan(prior)]
        with np.errstate(invalid="ignore"):  # Inf and -Inf in one window: a NaN median
            median = float(np.median(prior)) if len(prior) >= 3 else np.nan
        baseline[i] = median if held is None or np.isfinite(median) else held
        with np.errstate(invalid="ignore", divide="ignore"):
            if values[i] / baseline[i] > jump:
                held, exploding_now = baseline[i], True
                normal[i] = np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        return baseline, values / baseline


def _series(rng, n):
    """One norm series of a random shape."""
    kind = rng.integers(9)
    calm = np.exp(rng.normal(0.0, 0.3, n))
    if kind == 0:  # noisy: swings of 100x from batch to batch
        values = np.exp(rng.normal(0.0, 2.5, n))
    elif kind == 1:  # flat
        values = np.full(n, rng.choice([0.0, 1.0, 3.5]))
    elif kind == 2:  # steps up and down
        values = calm * 10.0 ** np.cumsum(rng.choice([0, 0, 0, 0, -2, 2], n))
    elif kind == 3:  # an explosion after a calm span, that stays up or comes back
        at = rng.integers(n)
        values = calm.copy()
        values[at:at + rng.integers(1, n + 1)] *= 10.0 ** rng.uniform(1, 6)
    elif kind == 4:  # exploded, then vanished
        at = rng.integers(max(1, n - 2))
        values = calm.copy()
        values[at:at + 3] *= 1e5
        values[at + 3:] *= 1e-12
    elif kind == 5:  # explosions one after another, some adjacent
        values = calm * np.where(rng.random(n) < 0.2, 10.0 ** rng.uniform(0, 5, n), 1.0)
    elif kind == 6:  # growing without bound
        values = calm * np.exp(np.linspace(0, rng.uniform(1, 40), n))
    elif kind == 7:  # zeros, as dead layers log
        values = calm * (rng.random(n) < 0.5)
    else:
        values = calm
    # Non-finite values anywhere: NaN, Inf and -Inf after an overflow, and runs of NaN.
    odd = rng.random(n) < rng.choice([0.0, 0.05, 0.3])
    values = np.where(odd, rng.choice([np.nan, np.inf, -np.inf], n), values)
    if rng.random() < 0.3:
        at = rng.integers(n)
        values[at:at + rng.integers(1, 20)] = np.nan
    return values


@pytest.mark.parametrize("window,jump", [(11, 10.0), (3, 10.0), (5, 2.0), (20, 1.5)])
def test_held_rows_is_the_step_by_step_baseline(window, jump):
    rng = np.random.default_rng(window)
    jumped = 0
    for n in (1, 4, 13, 60, 150):
        values = np.array([_series(rng, n) for _ in range(100)])
        baseline, ratio = exploding.held_rows(values, series.trailing_median(values, window), window, jump)
        for r, row in enumerate(values):
            want_b, want_r = _reference(row, window, jump)
            np.testing.assert_array_equal(baseline[r], want_b, err_msg=f"row {r}: {row.tolist()}")
            np.testing.assert_array_equal(ratio[r], want_r, err_msg=f"row {r}: {row.tolist()}")
            jumped += bool((want_r > jump).any())
        # The detector's entry point, on the stacked rows and on one series alone, gives the same.
        rows_b, rows_r = exploding._jumps(values, window, jump)
        np.testing.assert_array_equal(rows_b, baseline)
        np.testing.assert_array_equal(rows_r, ratio)
        one_b, one_r = exploding._jumps(values[-1], window, jump)
        np.testing.assert_array_equal(one_b, baseline[-1])
        np.testing.assert_array_equal(one_r, ratio[-1])
    assert jumped > 100  # most series do jump, many more than once


def test_median_of_others_is_the_median_of_the_rest_of_each_column():
    rng = np.random.default_rng(0)
    for shape in [(0, 3), (1, 4), (2, 5), (3, 1), (6, 7), (9, 4)]:
        values = rng.choice([0.0, 1.0, 2.5, 2.5, np.inf, np.nan], shape) * rng.choice([1.0, 1.5], shape)
        want = np.full(shape, np.nan)
        for i, j in np.ndindex(*shape):
            rest = np.delete(values[:, j], i)
            rest = rest[~np.isnan(rest)]
            if len(rest):
                want[i, j] = np.median(rest)
        np.testing.assert_array_equal(exploding.median_of_others(values), want)


def test_the_others_median_taken_a_few_columns_at_a_time_is_the_whole_grids(monkeypatch):
    """Tables of different steps, as rows of a run: the median over a chunk of steps at a time, as over all."""
    from gradhealth_plugin.analysis import metrics

    rng = np.random.default_rng(1)
    tables = []
    for i in range(7):
        steps = np.sort(rng.choice(200, size=150, replace=False)).astype(np.int64)
        max_abs = rng.lognormal(size=len(steps)) * np.where(rng.random(len(steps)) < 0.05, np.nan, 1.0)
        tables.append(metrics.MetricTable(steps=steps, values={"max_abs": max_abs},
                                          quality={"max_abs": np.ones(len(steps), dtype=np.uint8)}))
    whole = exploding._others_max_abs(tables)
    monkeypatch.setattr(exploding, "_OTHERS_CELLS", 7 * 3)  # three steps a chunk: many chunks
    chunked = exploding._others_max_abs(tables)
    for a, b in zip(whole, chunked):
        np.testing.assert_array_equal(a, b)
    assert any(np.isfinite(a).any() for a in whole)


def _exploding(client, run):
    return [f for f in client.ok("/findings", run=run)["findings"] if f["kind"] == "exploding_gradients"]


def test_a_tiny_gradient_jumping_far_below_the_other_layers_is_no_explosion(plugin_client,
                                                                            torch_faded_in_branch_logdir):
    # The branch's gradients jump 30x at step 40 and stay up, past the running median, the earlier calm
    # levels and the batch noise, but their max |g| stays far below every other layer's.
    assert _exploding(plugin_client(torch_faded_in_branch_logdir), "small") == []


def test_a_tiny_gradient_jumping_to_the_other_layers_scale_is_an_explosion(plugin_client,
                                                                           torch_faded_in_branch_logdir):
    (f,) = _exploding(plugin_client(torch_faded_in_branch_logdir), "large")
    assert f["severity"] == "critical"
    assert f["layers"] == ["branch.weight", "branch.bias"] and f["first_step"] == 40, f
    for ev in f["evidence"]["layers"].values():
        assert ev["max_abs"] > ev["others_median_max_abs"], ev
    assert "a layer's max |g| above the other layers' median" in f["message"]


def test_exploding_peer_factor_zero_judges_every_jump(plugin_client, torch_faded_in_branch_logdir):
    config = config_lib.Config(tag_rules=[], limits=limits.thresholds({"exploding_peer_factor": 0}))
    (f,) = _exploding(plugin_client(torch_faded_in_branch_logdir, config=config), "small")
    assert f["layers"][0] == "branch.weight" and f["first_step"] == 40, f
