"""Long histogram runs under the real ``tensorboard --load_fast=true`` (the Rust data server).

The data server keeps 100 random samples per histogram tag unless told
otherwise; gradhealth's loader raises that to 500. Two runs of 1,000 logged
steps each, written by plain ``tf.summary.histogram`` and by torch's
``SummaryWriter.add_histogram`` (no gradhealth summaries), carry a gradient
spike every PERIOD steps. Three servers on one logdir:

- ``--samples_per_plugin=histograms=0``: every step kept, the period found exactly;
- default flags: 500 of 1,000 kept, said so with the flag, and the period still exact;
- ``--samples_per_plugin=histograms=100``: 100 of 1,000 kept, said so, and no wrong period.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from tests.test_e2e_tensorboard import started_servers

STEPS = 1000
# Under --samples_per_plugin=histograms=100 the data server's reservoir (seeded: the same steps on
# every run) keeps the spikes at steps 90, 630 and 900 only: all on a grid of 270 as well, the trap
# a period read from the gaps alone falls into. The test below checks the trap is still set.
PERIOD = 45
SPIKE = 6.0  # a spike is 6x the gradient's usual scale: a clear outlier, not an explosion
RUNS = ("tf", "torch")
GRADIENT_TAG = {"tf": "gradients/dense/kernel", "torch": "grads/fc1.weight"}
LAYER = {"tf": "dense/kernel", "torch": "fc1.weight"}
SETTINGS = {"all": ["--samples_per_plugin=histograms=0"], "default": [],
            "100": ["--samples_per_plugin=histograms=100"]}


def _gradient(rng, step: int) -> np.ndarray:
    scale = 1e-2 * (SPIKE if step % PERIOD == 0 and step > 0 else 1.0)
    return rng.normal(0.0, scale, size=400)


def _write_tf(run_dir: pathlib.Path) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(0)
    writer = tf.summary.create_file_writer(str(run_dir))
    with writer.as_default():
        for step in range(STEPS):
            tf.summary.histogram(GRADIENT_TAG["tf"], _gradient(rng, step), step=step)
            tf.summary.histogram("weights/dense/kernel", rng.normal(0.0, 0.1, size=400), step=step)
            tf.summary.scalar("loss", 1.0 / (1.0 + step), step=step)
    writer.close()


def _write_torch(run_dir: pathlib.Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(1)
    writer = SummaryWriter(str(run_dir))
    for step in range(STEPS):
        writer.add_histogram(GRADIENT_TAG["torch"], _gradient(rng, step), step)
        writer.add_histogram("fc1.weight", rng.normal(0.0, 0.1, size=400), step)
        writer.add_scalar("loss", 1.0 / (1.0 + step), step)
    writer.close()


@pytest.fixture(scope="session")
def long_logdir(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("long_histograms")
    _write_tf(root / "tf")
    _write_torch(root / "torch")
    return root


@pytest.fixture(scope="session")
def long_servers(long_logdir, tmp_path_factory):
    """One --load_fast=true server per sampling setting, started together, stopped by their pids."""
    logs = tmp_path_factory.mktemp("long_histograms_tb_logs")
    yield from started_servers(long_logdir, logs, {name: ("true", flags) for name, flags in SETTINGS.items()})


def _gradient_row(summary: dict, run: str) -> dict:
    """The runs route's entry for the spiking gradient's row."""
    return {layer["name"]: layer for layer in summary["layers"]}[LAYER[run]]["roles"]["gradient"]


def _runs(server) -> dict:
    return {r["run"]: r for r in server.gh("runs")["runs"]}


def _periodic(server, run: str) -> list:
    return [f for f in server.gh("findings", run=run)["findings"] if f["kind"] == "periodic_spikes"]


@pytest.mark.parametrize("run", RUNS)
def test_every_step_kept_and_the_period_found_exactly_when_all_are_kept(long_servers, run):
    server = long_servers["all"]
    summary = _runs(server)[run]
    row = _gradient_row(summary, run)
    assert row["steps"] == row["steps_logged"] == STEPS and row["dropped_by"] == []
    assert summary["sampling"] is None
    heatmap = server.gh("heatmap", run=run, role="gradient", metric="health")
    assert heatmap["steps"] == list(range(STEPS))
    periods = [f["period"] for f in _periodic(server, run)]
    assert periods == [PERIOD], _periodic(server, run)


@pytest.mark.parametrize("run", RUNS)
def test_default_flags_keep_500_say_so_and_find_the_period(long_servers, run):
    server = long_servers["default"]
    summary = _runs(server)[run]
    row = _gradient_row(summary, run)
    # gradhealth's loader raised the data server's 100 to the Python loader's 500.
    assert row["steps"] == 500 and row["steps_logged"] == STEPS and row["dropped_by"] == ["histograms"]
    sampling = summary["sampling"]
    assert sampling["kept_max"] == 500 and sampling["logged"] == STEPS and not sampling["logged_at_least"]
    assert sampling["flag"] == "--samples_per_plugin=histograms=0"
    assert "500 of 1,000 logged steps" in sampling["message"] and sampling["flag"] in sampling["message"]
    periods = [f["period"] for f in _periodic(server, run)]
    assert periods == [PERIOD], _periodic(server, run)


@pytest.mark.parametrize("run", RUNS)
def test_an_explicit_100_samples_is_kept_said_and_no_period_invented(long_servers, run):
    server = long_servers["100"]
    summary = _runs(server)[run]
    row = _gradient_row(summary, run)
    assert row["steps"] == 100 and row["steps_logged"] == STEPS
    assert "100 of 1,000 logged steps" in summary["sampling"]["message"]
    heatmap = server.gh("heatmap", run=run, role="gradient", metric="health")
    kept = np.array(heatmap["steps"])
    spikes_kept = kept[(kept % PERIOD == 0) & (kept > 0)]
    assert len(spikes_kept) >= 3 and np.gcd.reduce(np.diff(spikes_kept)) != PERIOD, (
        f"the kept spikes {spikes_kept.tolist()} no longer hide the period: this test would not catch a wrong one")
    (finding,) = _periodic(server, run)
    assert finding["period"] is None, finding
    assert "too few regular samples to judge a period" in finding["message"]
    assert "--samples_per_plugin=histograms=0" in finding["message"]
