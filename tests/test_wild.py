"""The real-world corpus: event files public projects committed (``shared/wild/README.md``).

Many TensorFlow, Keras and PyTorch versions wrote these. Every run must be
served, every histogram tag must land on a layer in the role its writer meant
(``labels.tsv``; a tag whose role is not recognised is a row of role "other",
never in a wrong role), every route must answer, and no warning may claim a problem that an
independent reading of the raw histograms does not show.
"""

from __future__ import annotations

import csv
import math
import pathlib
from typing import Dict, List, Tuple

import numpy as np
import pytest

from gradhealth_plugin import plugin
from gradhealth_plugin.analysis import metrics
from gradhealth_plugin.reading import tags as tags_lib
from tests.conftest import WILD

pytestmark = pytest.mark.skipif(not WILD.is_dir(), reason=f"real-world event-file corpus not found at {WILD}")

W, A = tags_lib.WEIGHT, tags_lib.ACTIVATION
OTHER = "other"
# Labels: each histogram tag's true role, from the code of the repository that wrote it.
# The corpus's own labels.tsv covers the repositories added last; tests/data/wild_labels.tsv
# covers the first ones in the same columns, with exact layer names and kinds where the
# writer's code fixes them. Tests read the labels, never a list of folders or name patterns:
# a repository added to the corpus is tested by what its labels say.
OWN_LABELS = pathlib.Path(__file__).parent / "data" / "wild_labels.tsv"
# Fraction of labelled tags whose served role matches the label. Open-world role
# inference must raise it; nothing may lower it.
ROLE_RECALL_FLOOR = 0.95

RMSPROP = "congvmit__model_investigation/tensorboard/v8"
SGD = "congvmit__model_investigation/tensorboard/v0"
JUNIOR = ("juniorliu95__tensorboatdtest/logstrain", "juniorliu95__tensorboatdtest/logstest")
SUMMARY_STATS = {"mean": "mean", "stddev_1": "std", "max": "max", "min": "min"}
EDGE_RTOL = 2.5e-7


def _read_labels(path: pathlib.Path) -> Dict[Tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(row["run_dir"], row["tag"]): row for row in csv.DictReader(f, delimiter="\t")}


@pytest.fixture(scope="session")
def labels() -> Dict[Tuple[str, str], dict]:
    shared = _read_labels(WILD / "labels.tsv") if (WILD / "labels.tsv").is_file() else {}
    own = _read_labels(OWN_LABELS)
    assert not set(shared) & set(own), "a tag is labelled twice"
    return {**shared, **own}


@pytest.fixture(scope="session")
def wild(plugin_client):
    return plugin_client(WILD)


@pytest.fixture(scope="session")
def wild_runs(wild) -> Dict[str, dict]:
    return {r["run"]: r for r in wild.ok("/runs")["runs"]}


def _raw_tensors(wild, run: str, tag: str) -> Tuple[np.ndarray, List[np.ndarray]]:
    from tensorboard.util import tensor_util

    events = sorted(wild.multiplexer.Tensors(run, tag), key=lambda e: e.step)
    return np.array([e.step for e in events]), [tensor_util.make_ndarray(e.tensor_proto) for e in events]


def _histogram_tags(wild, run: str) -> List[str]:
    return sorted(wild.multiplexer.PluginRunToTagToContent("histograms").get(run, {}))


def _served(summary: dict) -> Dict[str, Tuple[str, str, str]]:
    """tag -> (layer, role, kind) as the runs route serves it; unclassified tags have role "other"."""
    served = {tag: (layer["name"], role, layer["kind"])
              for layer in summary["layers"] for role, r in layer["roles"].items() for tag in r["tags"]}
    served.update({tag: ("", OTHER, "") for tag in summary["unclassified"]})
    return served


def test_every_run_is_served(wild_runs):
    on_disk = {p.parent.relative_to(WILD).as_posix() for p in WILD.rglob("events.out.tfevents.*")}
    assert set(wild_runs) == on_disk
    for run, summary in wild_runs.items():
        assert summary["last_step"] is not None, run
        assert (summary["steps_kept"] > 0) == bool(summary["layers"]), run


def test_labels_name_tags_the_corpus_holds(wild, labels):
    # A label file out of step with the event files would make every test below vacuous.
    runs = {run for run, _ in labels}
    assert runs, "no labels read"
    for run in runs:
        assert {tag for r, tag in labels if r == run} <= set(_histogram_tags(wild, run)), run
    assert {row["role"] for row in labels.values()} <= set(tags_lib.ROLES) | {OTHER}


def test_every_histogram_tag_is_a_row(wild, wild_runs):
    # Unknown names included: a tag no rule recognises is a row of role "other", never dropped.
    scalar_listing = wild.multiplexer.PluginRunToTagToContent("scalars")
    for run, summary in wild_runs.items():
        placed = [tag for layer in summary["layers"] for r in layer["roles"].values() for tag in r["tags"]]
        scalars = set(scalar_listing.get(run, {}))
        assert sorted(t for t in placed if t not in scalars) == _histogram_tags(wild, run), run
        assert summary["unclassified"] == [], run


def _told_by_data(summary: dict) -> set:
    return {tag for layer in summary["layers"] for r in layer["roles"].values() if r.get("decided_by") == "data"
            for tag in r["tags"]}


def test_a_recognised_role_is_the_writers_role(wild_runs, labels):
    # Recognition by name may still miss a tag (its row then has role "other"), but never gives it a
    # wrong role. Roles told by the data alone are guesses, measured in tests/test_data_roles.py.
    for (run, tag), label in labels.items():
        if tag in _told_by_data(wild_runs[run]):
            continue
        _, role, _ = _served(wild_runs[run])[tag]
        assert role in (label["role"], OTHER), (run, tag, label["role"], role)


def test_role_recall_does_not_fall(wild_runs, labels):
    missed = [(run, tag, label["role"]) for (run, tag), label in labels.items()
              if _served(wild_runs[run])[tag][1] != label["role"]]
    recall = 1 - len(missed) / len(labels)
    assert recall >= ROLE_RECALL_FLOOR, (recall, missed)


def test_exact_labels_give_layer_and_kind(wild_runs, labels):
    exact = {key: label for key, label in labels.items() if label.get("kind")}
    assert exact
    for (run, tag), label in exact.items():
        assert _served(wild_runs[run])[tag] == (label["layer"], label["role"], label["kind"]), (run, tag)


def test_gradient_and_weight_of_one_parameter_share_a_row(wild_runs, labels):
    by_layer: Dict[Tuple[str, str], Dict[str, str]] = {}
    for (run, tag), label in labels.items():
        if label["role"] in (tags_lib.GRADIENT, W, tags_lib.UPDATE):
            by_layer.setdefault((run, label["layer"]), {})[label["role"]] = tag
    pairs = [(run, tags) for (run, _), tags in by_layer.items() if len(tags) > 1]
    assert pairs
    for run, tags in pairs:
        served = _served(wild_runs[run])
        assert len({served[tag][0] for tag in tags.values()}) == 1, (run, tags)


def test_served_roles_are_labelled_roles(wild_runs, labels):
    for run, summary in wild_runs.items():
        labelled = {label["role"] for (r, _), label in labels.items() if r == run}
        if labelled:
            assert set(summary["roles"]) <= labelled, run


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


def _warned_cells(wild, wild_runs) -> Dict[Tuple[str, str, str, str], List[int]]:
    """(run, role, layer, rule) -> the steps where the heatmap says warn."""
    cells: Dict[Tuple[str, str, str, str], List[int]] = {}
    for run, summary in wild_runs.items():
        for role in summary["roles"]:
            hm = wild.ok("/heatmap", run=run, role=role)
            for i, layer in enumerate(hm["layers"]):
                for j, s in enumerate(hm["status"][i]):
                    if s == 2:
                        cells.setdefault((run, role, layer, hm["rules"][i][j]), []).append(hm["steps"][j])
    return cells


def _sheppard_std(arrays: List[np.ndarray]) -> np.ndarray:
    """Std from bucket midpoints minus Sheppard's w^2/12, with numpy alone."""
    out = []
    for b in arrays:
        left, right, count = b[:, 0], b[:, 1], b[:, 2]
        mid, n = (left + right) / 2, count.sum()
        mu = (count * mid).sum() / n
        out.append(math.sqrt((count * (mid - mu) ** 2).sum() / n - (count * (right - left) ** 2).sum() / n / 12))
    return np.array(out)


def _grows(arrays: List[np.ndarray]) -> np.ndarray:
    # The rule's own 3x std and |mean| > 1, with the 30-bucket estimate's ~1% slack at the threshold.
    ratio = _sheppard_std(arrays) / _sheppard_std(arrays[:1])[0]
    mean = np.array([(b[:, 2] * (b[:, 0] + b[:, 1]) / 2).sum() / b[:, 2].sum() for b in arrays])
    return (ratio > 3 * 0.99) | (np.abs(mean) > 0.99)


def _mostly_zero(arrays: List[np.ndarray]) -> np.ndarray:
    # Counts in buckets lying wholly within |x| <= 1e-6 are certainly near zero: a lower bound
    # of the zero fraction, so a warning above 70% must show here as well.
    near = [b[:, 2][(np.abs(b[:, 0]) <= 1e-6) & (np.abs(b[:, 1]) <= 1e-6)].sum() / b[:, 2].sum() for b in arrays]
    return np.array(near) > 0.7


def _skewed(arrays: List[np.ndarray]) -> np.ndarray:
    # Skewness from bucket midpoints; fine v1 grids put it within a few percent of the truth.
    out = []
    for b in arrays:
        mid, count = (b[:, 0] + b[:, 1]) / 2, b[:, 2]
        n = count.sum()
        mu = (count * mid).sum() / n
        sd = math.sqrt((count * (mid - mu) ** 2).sum() / n)
        out.append(abs((count * (mid - mu) ** 3).sum() / n) / sd ** 3 if sd > 0 else 0.0)
    return np.array(out) > 2 * 1.05


def _norm_interval(arrays: List[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    # Every value lies in its bucket: its square between the bucket's smallest and largest square.
    lo, hi = [], []
    for b in arrays:
        a2, b2 = b[:, 0] ** 2, b[:, 1] ** 2
        smallest = np.where((b[:, 0] <= 0) & (b[:, 1] >= 0), 0.0, np.minimum(a2, b2))
        lo.append(math.sqrt((b[:, 2] * smallest).sum()))
        hi.append(math.sqrt((b[:, 2] * np.maximum(a2, b2)).sum()))
    return np.array(lo), np.array(hi)


def _moves_too_fast_or_never(arrays: List[np.ndarray], steps: np.ndarray, **_) -> np.ndarray:
    # Weights that never change: every edge and count the same at every step. Else the rule's
    # ceiling (0.1 per step) under a slightly wider norm interval than the rule's own.
    if all(np.array_equal(b, arrays[0]) for b in arrays):
        return np.ones(len(arrays), dtype=bool)
    lo, hi = _norm_interval(arrays)
    lo, hi = lo * (1 - 1e-6), hi * (1 + 1e-6)
    grew = (lo[1:] / hi[:-1]) ** (1.0 / np.diff(steps)) - 1
    shrank = (1 - hi[1:] / lo[:-1]) / np.diff(steps)
    return np.concatenate([[False], np.maximum(grew, shrank) > 0.1])


def _starts_off_scale(arrays: List[np.ndarray], steps: np.ndarray, wild, summary: dict, layer: str) -> np.ndarray:
    # The first logged std, 3x past both He and Glorot (with 2% slack), fans from the kernel's and its
    # bias's counts.
    row = next(entry for entry in summary["layers"] if entry["name"] == layer)
    bias = next(entry for entry in summary["layers"] if entry["group"] == row["group"] and entry["kind"] == "bias")
    _, bias_arrays = _row_histogram(wild, summary, bias["name"], W)
    fan_out = bias_arrays[0][:, 2].sum()
    fan_in = arrays[0][:, 2].sum() / fan_out
    std = _sheppard_std(arrays[:1])[0]
    refs = (math.sqrt(2 / fan_in), math.sqrt(2 / (fan_in + fan_out)))
    off = all(max(std / ref, ref / std) > 3 * 1.02 for ref in refs)
    return np.arange(len(arrays)) == 0 if off and steps[0] <= 1 else np.zeros(len(arrays), dtype=bool)


# Rule of a warned cell -> an independent check on the raw histograms of its row.
DATA_PROOFS = {"weight_growth": _grows, "dead_units": _mostly_zero, "skewed_distribution": _skewed,
               "update_ratio": _moves_too_fast_or_never, "init_scale": _starts_off_scale}
# The checks that need more than the row's histograms: its steps, and the run around it.
IN_CONTEXT = ("update_ratio", "init_scale")


def _row_histogram(wild, summary: dict, layer: str, role: str) -> Tuple[np.ndarray, List[np.ndarray]]:
    row = next(entry for entry in summary["layers"] if entry["name"] == layer)
    hist_tags = set(_histogram_tags(wild, summary["run"]))
    return _raw_tensors(wild, summary["run"], next(t for t in row["roles"][role]["tags"] if t in hist_tags))


def test_every_warning_is_supported_by_the_data(wild, wild_runs):
    cells = _warned_cells(wild, wild_runs)
    assert cells, "the corpus holds runs that earn warnings (RMSprop's weight growth among them)"
    for (run, role, layer, rule), warned_steps in cells.items():
        assert rule in DATA_PROOFS, (run, layer, f"no independent check for a {rule} warning")
        steps, arrays = _row_histogram(wild, wild_runs[run], layer, role)
        proven = (DATA_PROOFS[rule](arrays, steps, wild=wild, summary=wild_runs[run], layer=layer)
                  if rule in IN_CONTEXT else DATA_PROOFS[rule](arrays))
        assert proven[np.isin(steps, warned_steps)].all(), (run, layer, rule)
    for run, summary in wild_runs.items():
        if summary["roles"]:
            warned = any(key[0] == run for key in cells)
            assert summary["worst_status"] == ("warn" if warned else "ok"), run


def test_rmsprop_weights_grow_and_sgd_weights_do_not(wild, wild_runs):
    # One net, two optimizers: under RMSprop every kernel's std ends 3.3-3.5x its first
    # logged value; under SGD it stays below 3x: the SGD run never changes its weights at all.
    cells = _warned_cells(wild, wild_runs)
    kernels = ("h1/weights", "h2/weights", "logits/weights")
    assert {(layer, rule) for (run, _, layer, rule) in cells if run == RMSPROP} == {
        (layer, "weight_growth") for layer in kernels}
    assert {(layer, rule) for (run, _, layer, rule) in cells if run == SGD} == {
        (layer, "update_ratio") for layer in kernels}
    for (run, _, layer, _), warned_steps in cells.items():
        if run != RMSPROP:
            continue
        steps, arrays = _raw_tensors(wild, run, layer)
        ratio = _sheppard_std(arrays) / _sheppard_std(arrays[:1])[0]
        assert ratio[-1] > 3.2, layer
        assert (np.diff(ratio[np.searchsorted(steps, warned_steps[0]):]) > 0).all(), layer
        # TF2 writes the data's range on the outer edges: exact evidence of the spread.
        span = np.array([a[-1, 1] - a[0, 0] for a in arrays])
        assert span[-1] > 3 * span[0], layer
    for layer in kernels:
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
