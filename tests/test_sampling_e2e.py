"""gradhealth summaries survive TensorBoard's default sampling, under both loaders.

TensorBoard keeps only 10 samples per tag of a third-party plugin's tensors by
default (100 under the Rust loader). The plugin's loader raises that for its own
summaries, so with default flags the tab must see every one of 150 logged steps,
at least as many as TensorBoard keeps for histograms of the same run.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np
import pytest

from gradhealth_plugin.writing.events import SummaryFileWriter
from gradhealth_plugin.writing.reference import stats_numpy
from tests.test_e2e_tensorboard import LOADERS, both_loaders

STEPS = 150
LAYER = "fc0.weight"


def _write_run(run_dir: pathlib.Path) -> None:
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.histogram import summary_v2

    rng = np.random.default_rng(3)
    writer = SummaryFileWriter(str(run_dir))
    for step in range(STEPS):
        grad = rng.normal(0, 1e-2, size=(16, 8))
        weight = rng.normal(0, 0.3, size=(16, 8))
        writer.write_stats(step, "gradient", LAYER, stats_numpy(grad), position=0, shape=(16, 8))
        # The same parameter's weights as an ordinary histogram: what TensorBoard keeps of those is the bar.
        writer._ensure().add_event(event_pb2.Event(
            step=step, wall_time=time.time(),
            summary=summary_v2.histogram_pb(f"weights/{LAYER}", weight, buckets=30)))
    writer.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("sampling_logdir")
    _write_run(logdir / "run")
    yield from both_loaders(logdir, tmp_path_factory.mktemp("sampling_tensorboard_logs"))


@pytest.mark.parametrize("load_fast", LOADERS)
def test_every_logged_gradhealth_step_is_kept_with_default_flags(servers, load_fast):
    (run,) = servers[load_fast].gh("runs")["runs"]
    (layer,) = [layer for layer in run["layers"] if layer["name"] == LAYER]
    kept_own = layer["roles"]["gradient"]["steps"]
    kept_histograms = layer["roles"]["weight"]["steps"]
    assert layer["roles"]["gradient"]["source"] == "gradhealth"
    assert kept_own == STEPS, f"TensorBoard kept {kept_own} of {STEPS} gradhealth steps"
    assert kept_own >= kept_histograms
    cell = servers[load_fast].gh("cell", run=run["run"], layer=LAYER, step=STEPS - 1, role="gradient")
    assert cell["roles"]["gradient"]["metrics"]["std"]["quality"] == "exact"
