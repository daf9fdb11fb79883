"""Histograms in gradhealth's own summaries (format version 2) and the distribution route.

A real PyTorch training logged with `watch()` writes each tensor's compact
histogram beside its exact statistics; the cell route then answers a
histogram for those rows and the distribution route the percentiles over
steps, under both TensorBoard loaders. Files of format version 1 (no
histogram) are still read, without one.
"""

import json

import numpy as np
import pytest

from gradhealth_plugin.analysis import distribution, metrics
from gradhealth_plugin.writing import format as fmt
from gradhealth_plugin.writing.events import SummaryFileWriter
from gradhealth_plugin.writing.reference import stats_numpy
from tests.test_bad_input import call

torch = pytest.importorskip("torch")
nn = torch.nn

STEPS = 8
EVERY = 2


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """A small ReLU network trained 8 steps with watch(every_n_steps=2); its first weights kept."""
    from gradhealth_plugin.torch import unwatch, watch

    logdir = tmp_path_factory.mktemp("watched")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 300), nn.ReLU(), nn.Linear(300, 1))
    first = model[0].weight.detach().clone().numpy()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    handle = watch(model, str(logdir / "run"), optimizer=optimizer, every_n_steps=EVERY, first_steps=0)
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        x = torch.randn(64, 20, generator=g)
        loss = ((model(x) - 1) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    unwatch(handle)
    assert handle.errors == 0, handle.problems
    return {"logdir": logdir, "first_weight": first}


def test_a_watched_row_has_a_histogram_in_its_cell(watched, loader_client):
    client = loader_client(watched["logdir"])
    role = client.ok("/cell", run="run", layer="0.weight", step=0, role="weight")["roles"]["weight"]
    assert role["source"] == "gradhealth"
    buckets = np.array(role["histogram"])
    assert len(buckets) > 5 and role["histogram_step"] == 0 and role["histogram_axis"] == "row"
    assert role["histogram_buckets"] == "octaves"  # the tab draws them on a symmetric log axis
    # Scaled to the tensor's values, between its exact min and max.
    w = watched["first_weight"]
    assert buckets[:, 2].sum() == pytest.approx(w.size)
    assert buckets[0, 0] == pytest.approx(w.min()) and buckets[-1, 1] == pytest.approx(w.max())
    # The same counts the reference computes (all 6,000 values are sampled at 4,096 places).
    expected = fmt.histogram_of(stats_numpy(w))
    np.testing.assert_allclose(buckets, expected, rtol=1e-6)


def test_a_relu_output_histogram_holds_its_zeros(watched, loader_client):
    client = loader_client(watched["logdir"])
    role = client.ok("/cell", run="run", layer="1", step=2, role="activation")["roles"]["activation"]
    buckets = np.array(role["histogram"])
    zero_fraction = role["metrics"]["zero_fraction"]["value"]
    # The bucket around zero holds the exact zeros, and nothing is below zero.
    at_zero = buckets[(buckets[:, 0] <= 0) & (buckets[:, 1] >= 0)]
    assert buckets[:, 0].min() == 0.0
    assert at_zero[:, 2].sum() / buckets[:, 2].sum() == pytest.approx(zero_fraction, abs=0.02)


def test_the_distribution_route_gives_percentiles_over_steps(watched, loader_client):
    client = loader_client(watched["logdir"])
    body = client.ok("/distribution", run="run", layer="0.weight")
    assert body["percentiles"] == list(distribution.PERCENTILES)
    for role in ("gradient", "weight"):
        d = body["distributions"][role]
        assert d["source"] == "gradhealth" and d["axis"] == "row"
        assert d["steps"] == list(range(0, STEPS, EVERY)) and d["steps_text"] == [str(s) for s in d["steps"]]
        values = np.array(d["values"], dtype=float)
        assert values.shape == (len(d["steps"]), len(distribution.PERCENTILES))
        assert np.all(np.diff(values, axis=1) >= 0)
    # The first weights: the extremes exact, the quartile-ish bands near numpy's percentiles.
    w = watched["first_weight"].ravel()
    first = np.array(body["distributions"]["weight"]["values"][0])
    assert first[0] == pytest.approx(w.min()) and first[-1] == pytest.approx(w.max())
    spread = w.max() - w.min()
    np.testing.assert_allclose(first[1:-1], np.percentile(w, distribution.PERCENTILES[1:-1]), atol=0.03 * spread)


def test_the_distribution_of_a_histogram_row(tmp_path, loader_client):
    from tests.test_bad_input import event, hist_value, write_run

    rng = np.random.default_rng(0)
    events = []
    for step in range(3):
        x = rng.normal(size=5000) * (step + 1)
        edges = np.linspace(x.min(), x.max(), 31)
        counts, _ = np.histogram(x, edges)
        events.append(event(step, hist_value("gradients/dense/kernel", np.stack([edges[:-1], edges[1:], counts], 1))))
    write_run(tmp_path / "hist", events)
    client = loader_client(tmp_path)
    cell = client.ok("/cell", run="hist", layer="dense/kernel", step=0)["roles"]["gradient"]
    assert cell["histogram_buckets"] == "linear" and len(cell["histogram"]) > 20
    d = client.ok("/distribution", run="hist", layer="dense/kernel")["distributions"]["gradient"]
    assert d["source"] == "histogram" and d["steps"] == [0, 1, 2]
    medians = [row[4] for row in d["values"]]
    sigmas = [(row[6] - row[2]) / 2 for row in d["values"]]  # 84.13th minus 15.87th percentile: 2 sigma
    assert np.allclose(medians, 0, atol=0.1) and np.allclose(sigmas, [1, 2, 3], rtol=0.05)


def _version_1_run(run_dir):
    """A run written as version 1 of the format: 15-field vectors, metadata version 1."""
    writer = SummaryFileWriter(str(run_dir))
    rng = np.random.default_rng(0)
    for step in range(3):
        vector = stats_numpy(rng.normal(size=256))[:len(fmt.FIELDS)]
        meta = fmt.summary_metadata("weight", "dense/kernel", 0, (16, 16))
        content = json.loads(meta.plugin_data.content)
        content["version"] = 1
        meta.plugin_data.content = json.dumps(content).encode()
        from tensorboard.compat.proto import event_pb2

        writer._ensure().add_event(event_pb2.Event(
            step=step, wall_time=1e6 + step,
            summary=fmt.tensor_summary(fmt.tag_for("weight", "dense/kernel"), vector, meta)))
    writer.close()


def test_version_1_files_are_read_without_a_histogram(tmp_path, loader_client):
    _version_1_run(tmp_path / "old")
    client = loader_client(tmp_path)
    summary = client.ok("/runs")["runs"][0]
    assert summary.get("unreadable", []) == []
    role = client.ok("/cell", run="old", layer="dense/kernel", step=1, role="weight")["roles"]["weight"]
    assert role["histogram"] is None and role["metrics"]["std"]["value"] == pytest.approx(1, rel=0.15)
    d = client.ok("/distribution", run="old", layer="dense/kernel")["distributions"]["weight"]
    assert d == {"source": None, "axis": "row", "steps": [], "steps_text": [], "values": [], "nonfinite": [],
                 "nonfinite_of": []}


def test_version_2_vectors_keep_the_version_1_fields_in_place():
    # A reader of version 1 reads the first len(FIELDS) numbers of a vector: they are the statistics.
    x = np.random.default_rng(0).normal(size=1000)
    vector = stats_numpy(x)
    assert len(vector) == fmt.VECTOR_WIDTH == len(fmt.FIELDS) + fmt.HISTOGRAM_BUCKETS
    values = fmt.vectors_to_table_values(vector[None, :])
    assert values["std"][0] == pytest.approx(x.std()) and values["max_abs"][0] == pytest.approx(np.abs(x).max())
    assert fmt.read_metadata(fmt.metadata_content("weight", "w"))["version"] == 2
    assert fmt.histogram_of(vector[:len(fmt.FIELDS)]) is None


@pytest.mark.parametrize("host", [True, False], ids=["numpy", "torch ops"])
def test_torch_histograms_count_what_the_reference_counts(host):
    # The CPU path (numpy) and the accelerator path (torch ops that read nothing back), on the CPU.
    from gradhealth_plugin.torch import kernels

    g = torch.Generator().manual_seed(0)
    tensors = [torch.randn(300, 50, generator=g), torch.randn(7, generator=g),
               torch.tensor([0.0, 0.0, 1.0, float("nan"), -2.0, 0.5, 0.25, -1e-9, float("inf")]),
               torch.relu(torch.randn(64, 32, generator=g)), torch.randn(20, 30, generator=g).t(),
               torch.randn(5000, generator=g).to(torch.bfloat16), torch.zeros(0), torch.zeros(10)]
    values = [t.to(torch.float64).numpy().ravel() for t in tensors]
    max_abs = [np.abs(v[np.isfinite(v)]).max() if np.isfinite(v).any() else np.nan for v in values]
    got = kernels._histograms(tensors, torch.tensor(max_abs, dtype=torch.float64), host=host).numpy()
    for v, m, counts in zip(values, max_abs, got):
        sample = v[fmt.sample_indices(v.size)] if v.size else v
        finite = sample[np.isfinite(sample)]
        expected = fmt.histogram_numpy(v, m, finite.size)  # scaled to the sample: its raw counts
        np.testing.assert_array_equal(counts, expected)


def test_percentiles_of_buckets():
    # Two steps: uniform on [0, 10] in ten buckets, and a point mass at 3.
    left = np.array([np.arange(10.0), np.r_[3.0, np.full(9, 0.0)]])
    right = np.array([np.arange(1.0, 11.0), np.r_[3.0, np.full(9, 0.0)]])
    count = np.array([np.full(10, 5.0), np.r_[7.0, np.zeros(9)]])
    h = metrics.stack_histograms([0, 1], [0, 0], [np.stack([lo, hi, c], 1) for lo, hi, c in zip(left, right, count)])
    p = distribution.percentiles(h, (0, 25, 50, 100))
    np.testing.assert_allclose(p, [[0, 2.5, 5, 10], [3, 3, 3, 3]])
    empty = metrics.stack_histograms([0], [0], [np.array([[0.0, 1.0, 0.0]])])
    assert np.isnan(distribution.percentiles(empty)).all()


def test_distribution_errors(watched, plugin_client):
    client = plugin_client(watched["logdir"])
    assert call(client, "/distribution", run="run", layer="nope")[0] == 404
    assert call(client, "/distribution", run="nope", layer="0.weight")[0] == 404
    assert call(client, "/distribution", run="run", layer="0.weight", role="bogus")[0] == 400
    status, body = call(client, "/distribution", run="run", layer="1", role="activation")
    assert status == 200 and list(body["distributions"]) == ["activation"]
