"""The real-world corpus: event files public projects committed (``shared/wild/README.md``).

Many TensorFlow, Keras and PyTorch versions wrote these. Every run must be
served, every histogram tag must land on a layer in the role its folder's
writer meant (or be listed as unclassified), every route must answer, and no
status may claim a problem the data does not show.
"""

from __future__ import annotations

import math
import re
from typing import Dict, List, Tuple

import numpy as np
import pytest

from gradhealth_plugin import metrics, plugin
from gradhealth_plugin import tags as tags_lib
from tests.conftest import WILD

pytestmark = pytest.mark.skipif(not WILD.is_dir(), reason=f"real-world event-file corpus not found at {WILD}")

W, A = tags_lib.WEIGHT, tags_lib.ACTIVATION
_KERAS_V1 = [(r"^(\w+)/kernel_0$", W, r"\1/kernel", "kernel"), (r"^(\w+)/bias_0$", W, r"\1/bias", "bias")]
# folder -> [(tag pattern, role or None for unclassified, expected layer, expected kind)]
FOLDER_RULES: Dict[str, List[tuple]] = {
    "TheCodeheadMT__TensorBoard-Tutorial": [
        (r"^(\w+)/kernel_0/histogram$", W, r"\1/kernel", "kernel"),
        (r"^(\w+)/bias_0/histogram$", W, r"\1/bias", "bias")],
    "ZeroToMax-ZYZ__study_tensorboard": [
        (r"^MyLinearLayer/Weights_Distribution$", W, "MyLinearLayer/Weights_Distribution", "kernel")],
    "MorvanZhou__tutorials": [
        (r"^(layer\d)/weights/\1/weights$", W, r"\1/weights", "kernel"),
        (r"^(layer\d)/biases/\1/biases$", W, r"\1/biases", "bias"),
        (r"^(layer\d)/\1/outputs$", A, r"\1", "output")],
    "golbin__TensorFlow-Tutorials": [
        (r"^(layer\d|output)/Weights$", W, r"\1/Weights", "kernel"),
        (r"^(?:layer1/X|output/Model)$", None, None, None)],
    "Alwaysproblem__tensorboard-review": _KERAS_V1 + [
        (r"^(\w+)/kernel:0$", W, r"\1/kernel", "kernel"), (r"^(\w+)/bias:0$", W, r"\1/bias", "bias")],
    "juniorliu95__tensorboatdtest": [
        (r"^(layer\d)/weights/summaries/histogram$", W, r"\1/weights", "kernel"),
        (r"^(layer\d)/bias/summaries/histogram$", W, r"\1/bias", "bias"),
        (r"^(layer\d)/Wx_plus_b/preactivate$", A, r"\1/preactivate", "preactivation"),
        (r"^(layer\d)/activations$", A, r"\1", "output")],
    "motokimura__pytorch_tensorboard": [
        (r"^(\w+)/weight$", W, r"\1/weight", "kernel"), (r"^(\w+)/bias$", W, r"\1/bias", "bias")],
    "Nivesara__project_fashion_mnist": _KERAS_V1,
    "congvmit__model_investigation": [
        (r"^(h\d|logits)/weights$", W, r"\1/weights", "kernel"), (r"^(h\d|logits)/bias$", W, r"\1/bias", "bias")],
}
# Keras' TensorBoard callback logs weights only; Alwaysproblem's logs_grad holds weights despite its name.
WEIGHT_ONLY_FOLDERS = ("TheCodeheadMT__TensorBoard-Tutorial", "Alwaysproblem__tensorboard-review",
                       "Nivesara__project_fashion_mnist", "ZeroToMax-ZYZ__study_tensorboard",
                       "motokimura__pytorch_tensorboard", "congvmit__model_investigation", "golbin__TensorFlow-Tutorials")

RMSPROP = "congvmit__model_investigation/tensorboard/v8"
SGD = "congvmit__model_investigation/tensorboard/v0"
# The only warnings the corpus earns: under RMSprop the weight std of every kernel
# ends 3.3-3.5x its first logged value (the same net under SGD stays below 3x).
EXPECTED_WARNINGS = {(RMSPROP, W, layer, "weight_growth") for layer in ("h1/weights", "h2/weights", "logits/weights")}
JUNIOR = ("juniorliu95__tensorboatdtest/logstrain", "juniorliu95__tensorboatdtest/logstest")
SUMMARY_STATS = {"mean": "mean", "stddev_1": "std", "max": "max", "min": "min"}
EDGE_RTOL = 2.5e-7


@pytest.fixture(scope="session")
def wild(plugin_client):
    return plugin_client(WILD)


@pytest.fixture(scope="session")
def wild_runs(wild) -> Dict[str, dict]:
    return {r["run"]: r for r in wild.ok("/runs")["runs"]}


def _folder(run: str) -> str:
    return run.split("/")[0]


def _raw_tensors(wild, run: str, tag: str) -> Tuple[np.ndarray, List[np.ndarray]]:
    from tensorboard.util import tensor_util

    events = sorted(wild.multiplexer.Tensors(run, tag), key=lambda e: e.step)
    return np.array([e.step for e in events]), [tensor_util.make_ndarray(e.tensor_proto) for e in events]


def _histogram_tags(wild, run: str) -> List[str]:
    return sorted(wild.multiplexer.PluginRunToTagToContent("histograms").get(run, {}))


def test_every_run_is_served(wild_runs):
    on_disk = {p.parent.relative_to(WILD).as_posix() for p in WILD.rglob("events.out.tfevents.*")}
    assert set(wild_runs) == on_disk
    assert {_folder(r) for r in wild_runs} == set(FOLDER_RULES)
    for run, summary in wild_runs.items():
        assert summary["layers"], run
        assert summary["steps_kept"] > 0 and summary["last_step"] is not None, run


def test_every_histogram_tag_is_on_one_layer_or_unclassified(wild, wild_runs):
    scalar_listing = wild.multiplexer.PluginRunToTagToContent("scalars")
    for run, summary in wild_runs.items():
        placed = [tag for layer in summary["layers"] for r in layer["roles"].values() for tag in r["tags"]]
        scalars = set(scalar_listing.get(run, {}))
        hist_placed = [t for t in placed if t not in scalars]
        assert sorted(hist_placed + summary["unclassified"]) == _histogram_tags(wild, run), run


def test_each_folder_gets_the_roles_its_writer_meant(wild, wild_runs):
    for run, summary in wild_runs.items():
        by_tag = {r["tags"][0]: (layer["name"], role, layer["kind"])
                  for layer in summary["layers"] for role, r in layer["roles"].items()}
        for tag in _histogram_tags(wild, run):
            rules = [(m, rule) for rule in FOLDER_RULES[_folder(run)] for m in [re.match(rule[0], tag)] if m]
            assert len(rules) == 1, (run, tag, "matches no expectation" if not rules else "matches several")
            m, (_, role, layer, kind) = rules[0]
            if role is None:
                assert tag in summary["unclassified"], (run, tag)
            else:
                assert by_tag.get(tag) == (m.expand(layer), role, kind), (run, tag)
        expected_unclassified = ["layer1/X", "output/Model"] if _folder(run) == "golbin__TensorFlow-Tutorials" else []
        assert summary["unclassified"] == expected_unclassified, run


def test_weight_only_writers_give_weight_only_runs(wild_runs):
    for run, summary in wild_runs.items():
        if _folder(run) in WEIGHT_ONLY_FOLDERS:
            assert summary["roles"] == [W], run
        else:
            assert summary["roles"] == [W, A], run


def test_tf1_variable_summaries_merge_as_exact_weight_metrics(wild, wild_runs):
    for run in JUNIOR:
        layers = {layer["name"]: layer for layer in wild_runs[run]["layers"]}
        for var in ("layer1/weights", "layer1/bias", "layer2/weights", "layer2/bias"):
            weight = layers[var]["roles"][W]
            assert weight["source"] == "histogram+scalar"
            assert set(weight["tags"]) == {f"{var}/summaries/histogram"} | {f"{var}/summaries/{s}" for s in SUMMARY_STATS}
            for stat, metric in SUMMARY_STATS.items():
                steps, values = _raw_tensors(wild, run, f"{var}/summaries/{stat}")
                series = wild.ok("/series", run=run, layer=var, metric=metric, role=W)["series"][W]
                idx = np.searchsorted(series["steps"], steps)
                assert np.array_equal(np.asarray(series["steps"])[idx], steps)
                assert [series["quality"][i] for i in idx] == ["exact"] * len(steps)
                assert [series["values"][i] for i in idx] == [float(v) for v in values]


def test_tf1_histogram_estimates_match_the_exact_summaries(wild):
    # The writer logged exact mean/stddev/max/min next to each histogram, from the
    # same session run: ground truth for the bucket estimates on a real v1 histogram.
    spread = 0.5 + 1 / math.sqrt(12)
    for run in JUNIOR:
        for var in ("layer1/weights", "layer1/bias", "layer2/weights", "layer2/bias"):
            steps, arrays = _raw_tensors(wild, run, f"{var}/summaries/histogram")
            h = metrics.stack_histograms(steps, np.zeros(len(steps)), arrays)
            table = metrics.histogram_metrics(h)
            n = h.count.sum(axis=1)
            width = np.where(h.count > 0, h.right - h.left, 0.0)
            bounds = {
                "mean": (h.count * width / 2).sum(axis=1) / n,
                "std": spread * np.sqrt((h.count * width ** 2).sum(axis=1) / n),
            }
            for stat, metric in SUMMARY_STATS.items():
                s_steps, values = _raw_tensors(wild, run, f"{var}/summaries/{stat}")
                common, i_h, i_s = np.intersect1d(steps, s_steps, return_indices=True)
                assert len(common) == len(steps)
                est, truth = table.values[metric][i_h], np.asarray(values, dtype=np.float64)[i_s]
                if metric in bounds:
                    # float32 reductions in the writer: std of a constant tensor comes out ~1e-8.
                    limit = bounds[metric][i_h] + 1e-6 * np.abs(truth) + 1e-7
                else:
                    limit = EDGE_RTOL * np.abs(truth)
                assert (np.abs(est - truth) <= limit).all(), (run, var, metric, np.abs(est - truth).max())


def test_heatmap_for_every_run_role_and_metric(wild, wild_runs):
    for run, summary in wild_runs.items():
        for role in tags_lib.ROLES:
            for metric in plugin.HEATMAP_METRICS:
                hm = wild.ok("/heatmap", run=run, role=role, metric=metric)
                rows, cols = len(hm["layers"]), len(hm["steps"])
                assert (rows > 0) == (role in summary["roles"]), (run, role)
                assert len(hm["values"]) == len(hm["status"]) == rows
                assert all(len(r) == cols for r in hm["values"] + hm["status"] + hm["rules"])
                assert all(v is None or math.isfinite(v) for r in hm["values"] for v in r)
                assert all(s in (0, 1, 2, 3) for r in hm["status"] for s in r)
                if metric == "health" and rows:
                    assert any(v is not None for r in hm["values"] for v in r), (run, role)


def test_cell_and_series_for_every_layer(wild, wild_runs):
    for run, summary in wild_runs.items():
        for layer in summary["layers"]:
            for role in layer["roles"]:
                series = wild.ok("/series", run=run, layer=layer["name"], metric="count", role=role)["series"][role]
                for step in {series["steps"][0], series["steps"][-1]}:
                    cell = wild.ok("/cell", run=run, layer=layer["name"], step=step, role=role)["roles"][role]
                    count = cell["metrics"]["count"]["value"]
                    assert count is not None and count > 0, (run, layer["name"], step)
                    assert sum(b[2] for b in cell["histogram"]) == count
                    m = {k: v["value"] for k, v in cell["metrics"].items()}
                    # TF1's exact float32 reduce_mean of a constant can land an ulp outside [min, max].
                    slack = 1e-6 * max(abs(m["min"]), abs(m["max"]))
                    assert m["min"] - slack <= m["mean"] <= m["max"] + slack and m["std"] >= 0, (run, layer["name"])
        assert wild.ok("/findings", run=run)["run"] == run


def test_no_run_is_critical(wild, wild_runs):
    for run, summary in wild_runs.items():
        assert summary["worst_status"] != "critical", run
        for role in summary["roles"]:
            hm = wild.ok("/heatmap", run=run, role=role)
            assert all(s != 3 for r in hm["status"] for s in r), (run, role)
        assert all(f["severity"] != "critical" for f in wild.ok("/findings", run=run)["findings"]), run


def _warned_cells(wild, wild_runs):
    cells = {}
    for run, summary in wild_runs.items():
        for role in summary["roles"]:
            hm = wild.ok("/heatmap", run=run, role=role)
            for i, layer in enumerate(hm["layers"]):
                for j, s in enumerate(hm["status"][i]):
                    if s == 2:
                        cells.setdefault((run, role, layer, hm["rules"][i][j]), []).append(hm["steps"][j])
    return cells


def test_only_the_expected_warnings(wild, wild_runs):
    cells = _warned_cells(wild, wild_runs)
    assert set(cells) == EXPECTED_WARNINGS
    for run, summary in wild_runs.items():
        assert summary["worst_status"] == ("warn" if run == RMSPROP else "ok"), run


def _sheppard_std(arrays: List[np.ndarray]) -> np.ndarray:
    """Std from bucket midpoints minus Sheppard's w^2/12, with numpy alone."""
    out = []
    for b in arrays:
        left, right, count = b[:, 0], b[:, 1], b[:, 2]
        mid, n = (left + right) / 2, count.sum()
        mu = (count * mid).sum() / n
        out.append(math.sqrt((count * (mid - mu) ** 2).sum() / n - (count * (right - left) ** 2).sum() / n / 12))
    return np.array(out)


def test_weight_growth_warning_is_supported_by_the_data(wild, wild_runs):
    cells = _warned_cells(wild, wild_runs)
    for (run, _, layer, _), warned_steps in cells.items():
        steps, arrays = _raw_tensors(wild, run, layer)
        ratio = _sheppard_std(arrays) / _sheppard_std(arrays[:1])[0]
        # The onset sits within the 30-bucket estimate's ~1% of the threshold; the end does not.
        assert (ratio[np.isin(steps, warned_steps)] > 3 * 0.99).all(), (layer, ratio)
        assert ratio[-1] > 3.2, layer
        assert (np.diff(ratio[np.searchsorted(steps, warned_steps[0]):]) > 0).all(), layer
        # TF2 writes the data's range on the outer edges: exact evidence of the spread.
        span = np.array([a[-1, 1] - a[0, 0] for a in arrays])
        assert span[-1] > 3 * span[0], layer
    for layer in ("h1/weights", "h2/weights", "logits/weights"):
        _, arrays = _raw_tensors(wild, SGD, layer)
        ratio = _sheppard_std(arrays) / _sheppard_std(arrays[:1])[0]
        assert (ratio < 3).all(), layer


@pytest.mark.parametrize("run,layer", [
    ("TheCodeheadMT__TensorBoard-Tutorial/archive/logs/imdb-model-1690485351/train", "L3_1_Dense_SIG/bias"),
    ("Alwaysproblem__tensorboard-review/logs_grad/standard/20200408-150751/train", "dense_1/bias"),
    ("MorvanZhou__tutorials/tensorflowTUT/tf15_tensorboard/logs", "layer2/biases"),
    # TF 2.1's writer: one bucket [v - 0.5, v + 0.5] for a single value.
    ("Alwaysproblem__tensorboard-review/logs/custom/20200328-162351", "out_layer/bias"),
])
def test_one_unit_biases_have_no_spread(wild, run, layer):
    get = lambda metric: wild.ok("/series", run=run, layer=layer, metric=metric, role=W)["series"][W]  # noqa: E731
    count, std, skew = get("count"), get("std"), get("skewness")
    assert set(count["values"]) == {1.0}
    assert set(std["values"]) == {0.0}
    assert set(skew["values"]) == {None} and set(skew["quality"]) == {"no_data"}
    mean, low, high = get("mean")["values"], get("min")["values"], get("max")["values"]
    assert mean == low == high


@pytest.mark.parametrize("run,sizes", [
    ("ZeroToMax-ZYZ__study_tensorboard/runs/histogram_experiment", {"MyLinearLayer/Weights_Distribution": 100}),
    ("motokimura__pytorch_tensorboard/runs/example",
     {"conv1/weight": 250, "conv1/bias": 10, "conv2/weight": 5000, "conv2/bias": 20,
      "fc1/weight": 16000, "fc1/bias": 50, "fc2/weight": 500, "fc2/bias": 10}),
])
def test_mostly_empty_bucket_grids_keep_exact_counts(wild, run, sizes):
    for layer, size in sizes.items():
        s = wild.ok("/series", run=run, layer=layer, metric="count", role=W)["series"][W]
        assert set(s["values"]) == {float(size)} and set(s["quality"]) == {"exact"}, layer
        std = wild.ok("/series", run=run, layer=layer, metric="std", role=W)["series"][W]["values"]
        assert all(v is not None and v > 0 for v in std), layer
