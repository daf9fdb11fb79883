"""Step numbers far apart: work is bounded by the points stored, never by the span of the steps.

A writer chooses its step numbers, up to 2**63 - 1. Two values at steps 0 and
2**62 are two points, and every route must treat them as two: nothing may
build a range of the steps in between or loop over a period's divisors. Each
logdir is read under TensorBoard's Python loader and its Rust data server
(`loader_client`), and every route is asked about every run (`sweep`, whose
requests fail the test after `REQUEST_TIMEOUT`).
"""

from __future__ import annotations

import numpy as np
import pytest

from gradhealth_plugin.writing import format as fmt
from gradhealth_plugin.writing.reference import stats_numpy

from tests.test_bad_input import call, event, hist_value, normal_buckets, scalar_value, sweep, write_run

FAR = (2 ** 40, 2 ** 62)
NAN = float("nan")


def _own(rng, role: str, layer: str):
    """A gradhealth summary value: exact statistics of a small tensor."""
    meta = fmt.summary_metadata(role, layer, position=0, shape=[16, 16])
    return fmt.tensor_summary(fmt.tag_for(role, layer), stats_numpy(rng.normal(size=256) * 1e-2), meta).value[0]


def _far_apart_logdir(root, far: int):
    """Runs logging only at step 0 and at `far`: a NaN loss, histograms of three roles, gradhealth summaries."""
    rng = np.random.default_rng(0)
    write_run(root / "loss", [event(s, scalar_value("loss", NAN)) for s in (0, far)])
    write_run(root / "histograms", [
        event(s, hist_value("gradients/dense/kernel", normal_buckets(rng, 1e-2)),
              hist_value("weights/dense/kernel", normal_buckets(rng, 0.1)),
              hist_value("activations/dense", np.abs(normal_buckets(rng, 1.0))))
        for s in (0, far)])
    write_run(root / "gradhealth", [
        event(s, _own(rng, "gradient", "fc1.weight"), _own(rng, "weight", "fc1.weight"))
        for s in (0, far)])


@pytest.mark.parametrize("far", FAR)
def test_two_values_far_apart_are_two_points(tmp_path, loader_client, far):
    _far_apart_logdir(tmp_path, far)
    client = loader_client(tmp_path)
    seen = sweep(client)
    assert set(seen) == {"loss", "histograms", "gradhealth"}

    # The NaN loss is one finding over the whole span; building that span's steps used to exhaust memory.
    (nan_loss,) = [f for f in seen["loss"]["findings"] if f["kind"] == "nonfinite"]
    assert nan_loss["layers"] == ["loss"] and (nan_loss["first_step"], nan_loss["last_step"]) == (0, far)

    for run, layer, roles in (("histograms", "dense/kernel", ("gradient", "weight")),
                              ("gradhealth", "fc1.weight", ("gradient", "weight"))):
        for role in roles:
            hm = seen[run]["heatmaps"][(role, "health")]
            assert hm["steps"] == [0, far], (run, role)
            assert hm["layers"] == [layer]
            status, cell = call(client, "/cell", run=run, layer=layer, step=far, role=role)
            assert status == 200 and cell["step"] == far
            assert call(client, "/cell", run=run, layer=layer, step=far - 1, role=role)[0] == 404
    summary = seen["histograms"]["summary"]
    assert summary["last_step"] == far and summary["steps_kept"] == 2


# Primes: the largest below 2**52 and below 2**62 / 3 (so that three periods fit in an int64 step).
PRIME_PERIODS = (4503599627370449, 1537228672809129233)


@pytest.mark.parametrize("period", PRIME_PERIODS)
def test_loss_spiking_with_a_huge_prime_period(tmp_path, loader_client, period):
    """A period is judged from the steps kept, not by factoring it: a prime near 2**62 took hours to factor.

    Its steps are also past 2**53, where a float cannot hold them: the period must be exact.
    """
    steps = np.concatenate([np.arange(30)] + [k * period + np.arange(15) for k in (1, 2, 3)])
    loss = 1.0 + 0.01 * np.sin(np.arange(len(steps)))
    spikes = np.searchsorted(steps, [period, 2 * period, 3 * period])
    loss[spikes] = 1000.0
    write_run(tmp_path / "run", [event(int(s), scalar_value("loss", v), wall_time=1e6 + i)
                                 for i, (s, v) in enumerate(zip(steps, loss))])
    seen = sweep(loader_client(tmp_path))["run"]
    (periodic,) = [f for f in seen["findings"] if f["kind"] == "periodic_spikes"]
    assert periodic["period"] == period
    assert periodic["evidence"]["layers"]["loss"]["spike_steps"] == [period, 2 * period, 3 * period]
