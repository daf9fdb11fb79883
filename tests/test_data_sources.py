"""Where one layer has several sources, the exact one sets the step axis."""

import time

import numpy as np

from gradhealth_plugin.writing.events import SummaryFileWriter
from gradhealth_plugin.writing.reference import stats_numpy


def test_exact_summaries_are_not_mixed_with_histograms_on_another_step_axis(plugin_client, tmp_path):
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.histogram import summary_v2

    rng = np.random.default_rng(0)
    writer = SummaryFileWriter(str(tmp_path / "train"))
    # Keras' own TensorBoard callback: weight histograms per epoch (steps 0..9) ...
    for epoch in range(10):
        writer._ensure().add_event(event_pb2.Event(step=epoch, wall_time=time.time(), summary=summary_v2.histogram_pb(
            "sequential/dense/kernel/histogram", rng.normal(0, 0.1, (8, 4)), buckets=30)))
    # ... and gradhealth's callback: exact statistics per optimizer step.
    for step in (0, 100, 200):
        w = rng.normal(0, 0.1, (8, 4))
        writer.write_stats(step, "weight", "sequential/dense/kernel", stats_numpy(w), position=0, shape=(8, 4))
    writer.close()

    client = plugin_client(tmp_path, samples={"gradhealth": 500})
    heatmap = client.ok("/heatmap", run="train", role="weight", metric="std")
    assert heatmap["layers"] == ["sequential/dense/kernel"]
    assert heatmap["steps"] == [0, 100, 200]
    assert heatmap["quality"] == "exact"
