"""Bad logdirs and bad requests: every route answers JSON with 200, 400 or 404, never 500.

Each logdir below is written with TensorBoard's own protos and record writer,
loaded by TensorBoard's Python loader in-process (``conftest.PluginClient``),
and every route is asked about it: ``runs``, ``heatmap`` for every role and a
few metrics, ``cell``, ``series`` and ``findings``. Bad data must show as a
clear status (``no_data`` cells, a ``nonfinite`` finding), not as numbers the
buckets do not support. Each request runs under a timeout so a hang fails
the test instead of stalling the suite.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import os
import pathlib
import shutil
import threading
import time

import numpy as np
import pytest

REQUEST_TIMEOUT = 60.0
ROLES = ("gradient", "weight", "activation", "update")
SOME_METRICS = ("health", "mean", "std", "max_abs", "zero_fraction", "nonfinite", "count")
NO_DATA = 0  # index of "no_data" in status_names
CRITICAL = 3
HTML = "<img src=x onerror=alert(1)>"

_file_ids = itertools.count()


# --------------------------------------------------------------------------- writing event files

def hist_value(tag: str, buckets, dtype=np.float64):
    """A TF2-style histogram summary value: a tensor under the histograms plugin, whatever its shape."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.histogram import metadata as hist_metadata
    from tensorboard.util import tensor_util

    array = np.asarray(buckets) if dtype is None else np.asarray(buckets, dtype=dtype)
    value = summary_pb2.Summary.Value(tag=tag, tensor=tensor_util.make_tensor_proto(array))
    value.metadata.CopyFrom(hist_metadata.create_summary_metadata(display_name="", description=""))
    return value


def scalar_value(tag: str, x: float):
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.Summary.Value(tag=tag, simple_value=float(x))


def event(step: int, *values, wall_time=None):
    from tensorboard.compat.proto import event_pb2, summary_pb2

    return event_pb2.Event(step=step, wall_time=1_000_000.0 + step if wall_time is None else wall_time,
                           summary=summary_pb2.Summary(value=list(values)))


def new_event_file(run_dir: pathlib.Path) -> pathlib.Path:
    """An empty event file (version header only), named as TensorBoard's writers name them."""
    from tensorboard.compat.proto import event_pb2

    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / f"events.out.tfevents.{1_700_000_000 + next(_file_ids)}.test.{os.getpid()}.0.v2"
    append_events(path, [event_pb2.Event(wall_time=1_000_000.0, file_version="brain.Event:2")])
    return path


def append_events(path: pathlib.Path, events) -> None:
    """Appends whole TFRecord-framed events (TensorBoard's RecordWriter) to a file."""
    from tensorboard.summary.writer import record_writer

    with open(path, "ab") as f:
        writer = record_writer.RecordWriter(f)
        for e in events:
            writer.write(e.SerializeToString())


def write_run(run_dir: pathlib.Path, events) -> pathlib.Path:
    path = new_event_file(run_dir)
    append_events(path, events)
    return path


def normal_buckets(rng, scale=1e-2, n=1000, k=30):
    x = rng.normal(size=n) * scale
    edges = np.linspace(x.min(), x.max(), k + 1)
    counts, _ = np.histogram(x, edges)
    return np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1)


# --------------------------------------------------------------------------- calling the routes

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="bad-input")


def call(client, route: str, **params):
    """(status, JSON body) of one request, or a test failure if it takes longer than REQUEST_TIMEOUT."""
    future = _POOL.submit(client.raw, route, **params)
    try:
        response = future.result(timeout=REQUEST_TIMEOUT)
    except concurrent.futures.TimeoutError:
        pytest.fail(f"{route} {params} did not answer within {REQUEST_TIMEOUT:.0f} s")
    text = response.get_data(as_text=True)
    assert response.status_code in (200, 400, 404), (route, params, response.status_code, text[:500])
    assert response.mimetype == "application/json", (route, params, response.mimetype)
    assert "Traceback" not in text, (route, params, text[:500])
    return response.status_code, json.loads(text)


def sweep(client) -> dict:
    """Asks every route about every run, role, layer and a few metrics; returns what it saw per run."""
    status, body = call(client, "/runs")
    assert status == 200
    seen = {}
    for summary in body["runs"]:
        run = summary["run"]
        seen[run] = {"summary": summary, "heatmaps": {}}
        for role in ROLES:
            for metric in SOME_METRICS:
                status, hm = call(client, "/heatmap", run=run, role=role, metric=metric)
                assert status == 200, (run, role, metric, hm)
                check_heatmap_shape(hm)
                seen[run]["heatmaps"][(role, metric)] = hm
        status, found = call(client, "/findings", run=run)
        assert status == 200
        seen[run]["findings"] = found["findings"]
        for layer in summary["layers"][:20]:
            for role in layer["roles"]:
                status, series = call(client, "/series", run=run, layer=layer["name"], metric="mean", role=role)
                assert status == 200, series
                s = series["series"][role]
                assert len(s["steps"]) == len(s["values"]) == len(s["quality"]) == len(s["status"])
                for step in s["steps"][:3] + s["steps"][-1:]:
                    status, cell = call(client, "/cell", run=run, layer=layer["name"], step=step, role=role)
                    assert status == 200, cell
                    check_cell(cell)
            status, _ = call(client, "/series", run=run, layer=layer["name"], metric="health")
            assert status == 200
            status, dist = call(client, "/distribution", run=run, layer=layer["name"])
            assert status == 200, dist
            for d in dist["distributions"].values():
                assert len(d["steps"]) == len(d["steps_text"]) == len(d["values"])
                assert all(v is None or np.isfinite(v) for row in d["values"] for v in row)
    return seen


def check_heatmap_shape(hm: dict) -> None:
    rows, cols = len(hm["layers"]), len(hm["steps"])
    for key in ("values", "status", "rules", "quality_cells"):
        assert len(hm[key]) == rows, key
        assert all(len(row) == cols for row in hm[key]), key
    assert hm["steps"] == sorted(set(hm["steps"]))
    for values, statuses in zip(hm["values"], hm["status"]):
        for v, s in zip(values, statuses):
            assert v is None or np.isfinite(v)
            if s == NO_DATA and hm["metric"] == "health":
                assert v is None, "a no-data cell must not carry a score"


def check_cell(cell: dict) -> None:
    for role in cell["roles"].values():
        for metric in role["metrics"].values():
            assert metric["value"] is None or np.isfinite(metric["value"])
            if metric["quality"] == "no_data":
                assert metric["value"] is None


def cells(seen_run: dict, role: str, metric: str = "health") -> dict:
    """(layer, step) -> (value, status, rule) of one heatmap."""
    hm = seen_run["heatmaps"][(role, metric)]
    return {(layer, step): (hm["values"][i][j], hm["status"][i][j], hm["rules"][i][j])
            for i, layer in enumerate(hm["layers"]) for j, step in enumerate(hm["steps"])
            if hm["quality_cells"][i][j] != NO_DATA or hm["status"][i][j] != NO_DATA}


def layer_cells(seen_run: dict, role: str, layer: str, metric: str = "health") -> list:
    hm = seen_run["heatmaps"][(role, metric)]
    i = hm["layers"].index(layer)
    return list(zip(hm["steps"], hm["values"][i], hm["status"][i], hm["rules"][i]))


# --------------------------------------------------------------------------- the corpus

GOOD = "gradients/good/kernel"


def _good_events(rng, steps=range(5)):
    return [event(s, hist_value(GOOD, normal_buckets(rng))) for s in steps]


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_empty_histograms_are_no_data(tmp_path, plugin_client, rng):
    # TF2 writes an all-zero [30, 3] tensor for an empty tensor; a [0, 3] tensor has no buckets at all.
    write_run(tmp_path / "run", _good_events(rng) + [
        event(s, hist_value("gradients/empty/kernel", np.zeros((30, 3))),
              hist_value("weights/none/kernel", np.zeros((0, 3)))) for s in range(5)])
    seen = sweep(plugin_client(tmp_path))["run"]
    assert all(status == NO_DATA and value is None
               for _, value, status, _ in layer_cells(seen, "gradient", "empty/kernel"))
    assert all(status == NO_DATA for _, _, status, _ in layer_cells(seen, "weight", "none/kernel"))
    assert all(value is None for _, value, _, _ in layer_cells(seen, "gradient", "empty/kernel", "mean"))
    assert all(status != NO_DATA for _, _, status, _ in layer_cells(seen, "gradient", "good/kernel"))
    assert not [f for f in seen["findings"] if "empty/kernel" in f["layers"]]


def test_single_bucket_and_point_masses(tmp_path, plugin_client, rng):
    write_run(tmp_path / "run", _good_events(rng) + [
        event(s, hist_value("gradients/one/kernel", [[1.0, 2.0, 10.0]]),
              # All values equal: TF2 now writes equal edges, before late 2021 one bucket [v - 0.5, v + 0.5].
              hist_value("weights/const/kernel", [[0.25, 0.25, 0.0]] * 29 + [[0.25, 0.25, 64.0]]),
              hist_value("weights/legacy/kernel", [[-0.5, 0.5, 64.0]])) for s in range(5)])
    client = plugin_client(tmp_path)
    seen = sweep(client)["run"]
    mean = {layer: v for (layer, _), (v, _, _) in cells(seen, "gradient", "mean").items()}
    assert mean["one/kernel"] == pytest.approx(1.5)
    std = cells(seen, "weight", "std")
    assert all(v == 0 for (layer, _), (v, _, _) in std.items() if layer in ("const/kernel", "legacy/kernel"))
    _, cell = call(client, "/cell", run="run", layer="legacy/kernel", step=0, role="weight")
    assert cell["roles"]["weight"]["metrics"]["max_abs"]["value"] == 0.0


def test_zero_and_negative_counts(tmp_path, plugin_client, rng):
    edges = np.linspace(-1, 1, 31)
    zero = np.stack([edges[:-1], edges[1:], np.zeros(30)], axis=1)
    negative = np.stack([edges[:-1], edges[1:], -np.ones(30)], axis=1)
    mixed = np.stack([edges[:-1], edges[1:], np.where(np.arange(30) < 15, -5.0, 2.0)], axis=1)
    write_run(tmp_path / "run", _good_events(rng) + [
        event(s, hist_value("gradients/zero/kernel", zero), hist_value("gradients/negative/kernel", negative),
              hist_value("gradients/mixed/kernel", mixed)) for s in range(5)])
    seen = sweep(plugin_client(tmp_path))["run"]
    # An empty histogram is a tensor of no values: no data, said by its cells.
    zero = layer_cells(seen, "gradient", "zero/kernel")
    assert all(status == NO_DATA and value is None for _, value, status, _ in zero)
    # A negative count is no count: such buckets are no histogram, not a histogram of their other buckets.
    assert {u["tag"]: u["why"] for u in seen["summary"]["unreadable"]} == {
        "gradients/negative/kernel": "negative counts at step 0", "gradients/mixed/kernel": "negative counts at step 0"}
    assert [layer["name"] for layer in seen["summary"]["layers"]] == ["good/kernel", "zero/kernel"]


def test_nan_and_inf_show_as_nonfinite(tmp_path, plugin_client, rng):
    edges = np.linspace(-1, 1, 31)
    ok_counts = np.full(30, 3.0)
    # TF2 writes NaN edges and zero counts when the tensor holds a NaN.
    nan_edges = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    inf_edge = np.stack([edges[:-1], edges[1:], ok_counts], axis=1)
    inf_edge[-1, 1] = np.inf
    nan_count = np.stack([edges[:-1], edges[1:], ok_counts], axis=1)
    nan_count[3, 2] = np.nan
    inf_count = np.stack([edges[:-1], edges[1:], ok_counts], axis=1)
    inf_count[4, 2] = np.inf
    bad_later = [normal_buckets(rng) for _ in range(3)] + [nan_edges, nan_edges]
    write_run(tmp_path / "run", _good_events(rng) + [
        event(s, hist_value("gradients/nan/kernel", bad_later[s]), hist_value("gradients/inf_edge/kernel", inf_edge),
              hist_value("gradients/nan_count/kernel", nan_count), hist_value("gradients/inf_count/kernel", inf_count),
              hist_value("weights/all_nan/kernel", np.full((30, 3), np.nan)))
        for s in range(5)])
    seen = sweep(plugin_client(tmp_path))["run"]
    nonfinite = [f for f in seen["findings"] if f["kind"] == "nonfinite"]
    flagged = {layer for f in nonfinite for layer in f["layers"]}
    assert {"nan/kernel", "inf_edge/kernel"} <= flagged
    nan_cells = layer_cells(seen, "gradient", "nan/kernel")
    assert [status for _, _, status, _ in nan_cells] == [1, 1, 1, CRITICAL, CRITICAL]
    assert [rule for _, _, _, rule in nan_cells][3:] == ["nonfinite", "nonfinite"]
    assert min(f["first_step"] for f in nonfinite if "nan/kernel" in f["layers"]) <= 3
    # NaN edges say the tensor held NaN or Inf (TensorFlow then writes finite counts); a NaN or infinite
    # count counts nothing, whatever the edges: no histogram, which no NaN in the data makes.
    assert {u["tag"]: u["why"] for u in seen["summary"]["unreadable"]} == {
        "gradients/nan_count/kernel": "NaN counts at step 0", "gradients/inf_count/kernel": "infinite counts at step 0",
        "weights/all_nan/kernel": "NaN counts at step 0"}


def test_cell_says_a_histogram_with_nan_edges_cannot_be_drawn(tmp_path, loader_client, rng):
    # A histogram with NaN edges was logged: the cell must not say the step holds exact statistics only.
    nan_edges = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    tf_nan = np.array([[np.nan, np.inf, 2.0], [np.inf, np.inf, 0.0], [np.inf, np.inf, 0.0]])  # TF2 on [1, inf, 2]
    partly = normal_buckets(rng)
    partly[5, :2] = np.nan
    hists = {2: nan_edges, 3: tf_nan, 4: partly}
    write_run(tmp_path / "run", [event(s, hist_value("gradients/dense/kernel", hists.get(s, normal_buckets(rng))))
                                 for s in range(6)])
    client = loader_client(tmp_path)
    notes = {}
    for step in range(6):
        status, cell = call(client, "/cell", run="run", layer="dense/kernel", step=step, role="gradient")
        assert status == 200, cell
        role = cell["roles"]["gradient"]
        notes[step] = role["histogram_note"]
        assert all(None not in b for b in role["histogram"])  # no bucket without a place on the axis
        if step in (2, 3):
            assert role["histogram"] == [] and role["histogram_step"] == step
    assert notes[2] == notes[3] and "cannot be drawn" in notes[2] and "NaN or Inf" in notes[2]
    assert notes[4] is not None and "not drawn" in notes[4]
    assert notes[0] is notes[1] is notes[5] is None


def test_buckets_holding_values_between_decreasing_edges_are_no_histogram(tmp_path, plugin_client, rng):
    swapped = np.array([[1.0, -1.0, 50.0], [2.0, 1.0, 50.0]])  # every bucket degenerate
    partly = np.array([[0.0, 1.0, 10.0], [3.0, 2.0, 50.0], [1.0, 2.0, 10.0]])
    # Empty buckets may run backwards: the Rust loader's first bucket of a v1 histogram does.
    empty_backwards = np.array([[0.5, -7.0, 0.0], [0.5, 1.0, 10.0], [1.0, 2.0, 10.0]])
    write_run(tmp_path / "run", _good_events(rng) + [
        event(s, hist_value("gradients/swapped/kernel", swapped), hist_value("gradients/partly/kernel", partly),
              hist_value("gradients/empty_backwards/kernel", empty_backwards))
        for s in range(5)])
    seen = sweep(plugin_client(tmp_path))["run"]
    assert {u["tag"]: u["why"] for u in seen["summary"]["unreadable"]} == {
        "gradients/swapped/kernel": "bucket edges decrease at step 0",
        "gradients/partly/kernel": "bucket edges decrease at step 0"}
    assert seen["summary"]["unreadable_steps"] == []
    counts = {layer: v for (layer, _), (v, _, _) in cells(seen, "gradient", "count").items()}
    assert counts["empty_backwards/kernel"] == 20.0


def test_histogram_tensors_of_the_wrong_shape(tmp_path, plugin_client, rng):
    write_run(tmp_path / "run", _good_events(rng) + [
        event(s, hist_value("gradients/flat5/kernel", np.arange(5.0)),
              hist_value("gradients/pairs/kernel", np.ones((4, 2))),
              hist_value("gradients/cube/kernel", np.ones((2, 2, 3))),
              hist_value("gradients/scalar/kernel", 3.0),
              hist_value("gradients/text/kernel", np.array([b"a", b"b", b"c"], dtype=object), dtype=None))
        for s in range(5)])
    seen = sweep(plugin_client(tmp_path))["run"]
    # No step of these is a histogram of any shape: each tag is reported unreadable, saying why, not drawn.
    unreadable = {u["tag"]: u["why"] for u in seen["summary"]["unreadable"]}
    assert unreadable == {
        "gradients/flat5/kernel": "the tensor at step 0 has shape [5], not [k, 3] histogram buckets",
        "gradients/pairs/kernel": "the tensor at step 0 has shape [4, 2], not [k, 3] histogram buckets",
        "gradients/cube/kernel": "the tensor at step 0 has shape [2, 2, 3], not [k, 3] histogram buckets",
        "gradients/scalar/kernel": "the tensor at step 0 has shape [], not [k, 3] histogram buckets",
        "gradients/text/kernel": "the tensor at step 0 holds text, not numbers"}
    assert [layer["name"] for layer in seen["summary"]["layers"]] == ["good/kernel"]


def test_a_histogram_tag_of_the_wrong_shape_at_some_steps_keeps_the_others(tmp_path, plugin_client, rng):
    write_run(tmp_path / "run", [event(s, hist_value(GOOD, normal_buckets(rng) if s % 2 else np.arange(5.0)))
                                 for s in range(4)])
    seen = sweep(plugin_client(tmp_path))["run"]
    assert seen["summary"]["unreadable"] == []
    assert seen["summary"]["unreadable_steps"] == [{
        "tag": GOOD, "steps": 2, "of": 4, "first_step": 0,
        "why": "the tensor at step 0 has shape [5], not [k, 3] histogram buckets"}]
    assert [status == NO_DATA for _, _, status, _ in layer_cells(seen, "gradient", "good/kernel")] == [
        True, False, True, False]


def _bad_at(rng, steps: int, bad: dict) -> list:
    """A gradient tag's histograms at `steps` steps, `bad` (step -> buckets) in place of some."""
    return [bad.get(s, normal_buckets(rng)) for s in range(steps)]


def test_malformed_steps_are_said_and_the_rest_of_the_tag_read(tmp_path, loader_client, rng):
    edges = np.linspace(-1.0, 1.0, 31)
    negative = np.stack([edges[:-1], edges[1:], np.where(np.arange(30) == 4, -2.0, 3.0)], axis=1)
    decreasing = np.stack([edges[1:], edges[:-1], np.full(30, 3.0)], axis=1)
    nan_count = np.stack([edges[:-1], edges[1:], np.where(np.arange(30) == 9, np.nan, 3.0)], axis=1)
    some = _bad_at(rng, 8, {3: negative, 5: decreasing})
    every = [decreasing, negative, nan_count]
    write_run(tmp_path / "run", [event(s, hist_value("gradients/some/kernel", some[s]),
                                       *([hist_value("gradients/every/kernel", every[s])] if s < 3 else []))
                                 for s in range(8)])
    client = loader_client(tmp_path)
    seen = sweep(client)["run"]
    summary = seen["summary"]
    assert summary["unreadable"] == [{"tag": "gradients/every/kernel", "why": "bucket edges decrease at step 0"}]
    assert summary["unreadable_steps"] == [{"tag": "gradients/some/kernel", "steps": 2, "of": 8, "first_step": 3,
                                            "why": "negative counts at step 3"}]
    assert [layer["name"] for layer in summary["layers"]] == ["some/kernel"]
    assert [status == NO_DATA for _, _, status, _ in layer_cells(seen, "gradient", "some/kernel")] == [
        s in (3, 5) for s in range(8)]
    assert [v is None for _, v, _, _ in layer_cells(seen, "gradient", "some/kernel", "count")] == [
        s in (3, 5) for s in range(8)]
    for step, why in ((3, "negative counts"), (5, "bucket edges decrease")):
        role = client.ok("/cell", run="run", layer="some/kernel", step=step)["roles"]["gradient"]
        assert role["histogram"] == [] and f"no histogram: {why}." in role["histogram_note"], role
        assert all(m["value"] is None for m in role["metrics"].values())
    assert client.ok("/cell", run="run", layer="some/kernel", step=4)["roles"]["gradient"]["histogram_note"] is None
    dist = client.ok("/distribution", run="run", layer="some/kernel")["distributions"]["gradient"]
    assert [all(v is None for v in row) for row in dist["values"]] == [s in (3, 5) for s in range(8)]


def test_ten_thousand_tags_in_one_run(tmp_path, plugin_client):
    buckets = [[-1.0, 0.0, 5.0], [0.0, 1.0, 5.0]]
    values = [hist_value(f"gradients/layer_{i}/kernel", buckets) for i in range(5000)]
    values += [hist_value(f"misc_{i}", buckets) for i in range(5000)]  # no role: rows of role "other"
    write_run(tmp_path / "run", [event(0, v) for v in values])
    client = plugin_client(tmp_path)
    status, body = call(client, "/runs")
    assert status == 200
    (summary,) = body["runs"]
    assert len(summary["layers"]) == 10000 and summary["unclassified"] == []
    assert sum("other" in layer["roles"] for layer in summary["layers"]) == 5000
    status, hm = call(client, "/heatmap", run="run", role="gradient", metric="mean")
    assert status == 200 and len(hm["layers"]) == 5000 and hm["steps"] == [0]
    check_heatmap_shape(hm)
    assert call(client, "/findings", run="run")[0] == 200
    assert call(client, "/cell", run="run", layer="layer_4999/kernel", step=0)[0] == 200
    assert call(client, "/series", run="run", layer="layer_0/kernel", metric="l2")[0] == 200


def test_long_unicode_and_html_tag_names(tmp_path, plugin_client, rng):
    long_name = "x" * 2000
    names = [f"gradients/{long_name}/kernel", "gradients/слой_1/kernel", "weights/层/偏置",
             "gradients/🔥emoji🔥/kernel", f"gradients/{HTML}/kernel", f"activations/{HTML}",
             "gradients/a&b\"c'd/kernel", "gradients/ spaces and\ttab /kernel"]
    write_run(tmp_path / ("run " + HTML), [event(s, *[hist_value(n, normal_buckets(rng)) for n in names])
                                         for s in range(3)])
    client = plugin_client(tmp_path)
    seen = sweep(client)
    (run,) = seen
    assert run == "run " + HTML
    layers = {layer["name"] for layer in seen[run]["summary"]["layers"]}
    assert {f"{long_name}/kernel", "слой_1/kernel", "层/偏置", f"{HTML}/kernel", HTML} <= layers
    for layer in (f"{long_name}/kernel", f"{HTML}/kernel", "🔥emoji🔥/kernel"):
        status, cell = call(client, "/cell", run=run, layer=layer, step=2)
        assert status == 200 and cell["layer"] == layer
    response = client.raw("/heatmap", run=run, role="activation")
    # Served as JSON, never as something a browser would render.
    assert response.mimetype == "application/json"
    assert json.loads(response.get_data(as_text=True))["layers"] == [HTML]


def test_truncated_event_file(tmp_path, plugin_client, rng):
    path = write_run(tmp_path / "run", _good_events(rng, range(10)))
    size = path.stat().st_size
    last = len(event(9, hist_value(GOOD, normal_buckets(rng))).SerializeToString()) + 16
    with open(path, "r+b") as f:
        f.truncate(size - last // 2)  # the last record is cut in the middle of its data
    seen = sweep(plugin_client(tmp_path))["run"]
    steps = seen["heatmaps"][("gradient", "health")]["steps"]
    assert steps == list(range(9))


def test_truncated_event_file_that_grows_again(tmp_path, plugin_client, rng):
    """A writer mid-record: the loader waits for the rest of the record and then reads it."""
    path = write_run(tmp_path / "run", _good_events(rng, range(5)))
    record = bytearray()
    from tensorboard.summary.writer import record_writer

    class Buf:
        def write(self, b):
            record.extend(b)

    record_writer.RecordWriter(Buf()).write(event(5, hist_value(GOOD, normal_buckets(rng))).SerializeToString())
    with open(path, "ab") as f:
        f.write(record[:len(record) // 2])
    client = plugin_client(tmp_path)
    assert sweep(client)["run"]["heatmaps"][("gradient", "health")]["steps"] == list(range(5))
    with open(path, "ab") as f:
        f.write(record[len(record) // 2:])
    client.reload()
    assert sweep(client)["run"]["heatmaps"][("gradient", "health")]["steps"] == list(range(6))


def test_run_deleted_between_reload_and_request(tmp_path, plugin_client, rng):
    write_run(tmp_path / "gone", _good_events(rng))
    write_run(tmp_path / "kept", _good_events(rng))
    client = plugin_client(tmp_path)
    shutil.rmtree(tmp_path / "gone")
    sweep(client)  # TensorBoard still holds what it loaded: answered from memory
    client.reload()
    sweep(client)
    for route, params in (("/heatmap", {"role": "gradient"}), ("/findings", {}),
                          ("/series", {"layer": "good/kernel", "metric": "l2"}),
                          ("/cell", {"layer": "good/kernel", "step": 1})):
        status, _ = call(client, route, run="gone", **params)
        assert status in (200, 404)


def test_file_appended_while_the_multiplexer_reloads(tmp_path, plugin_client, rng):
    path = write_run(tmp_path / "run", _good_events(rng, range(3)))
    client = plugin_client(tmp_path)
    payloads = [event(s, hist_value(GOOD, normal_buckets(rng)), scalar_value("loss", 1.0 / (s + 1))).SerializeToString()
                for s in range(3, 203)]
    done = threading.Event()

    def writer():
        from tensorboard.summary.writer import record_writer

        with open(path, "ab") as f:
            w = record_writer.RecordWriter(f)
            for i, p in enumerate(payloads):
                w.write(p)
                if i % 10 == 0:
                    f.flush()
                    time.sleep(0.001)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    previous = []
    try:
        while True:
            finished = done.is_set()
            client.reload()
            status, hm = call(client, "/heatmap", run="run", role="gradient", metric="l2")
            assert status == 200
            check_heatmap_shape(hm)
            assert hm["steps"][:len(previous)] == previous, "a run's steps must only grow"
            previous = hm["steps"]
            assert call(client, "/findings", run="run")[0] == 200
            if finished:
                break
    finally:
        thread.join(timeout=REQUEST_TIMEOUT)
    assert previous == list(range(203))


# --------------------------------------------------------------------------- bad requests

@pytest.fixture(scope="module")
def good_client(tmp_path_factory, plugin_client):
    root = tmp_path_factory.mktemp("good")
    write_run(root / "run", _good_events(np.random.default_rng(1)))
    return plugin_client(root)


@pytest.mark.parametrize("route, params, expected", [
    ("/heatmap", {}, 400),
    ("/heatmap", {"run": ""}, 400),
    ("/heatmap", {"run": "nope"}, 404),
    ("/heatmap", {"run": "run", "role": "bogus"}, 400),
    ("/heatmap", {"run": "run", "metric": "bogus"}, 400),
    ("/heatmap", {"run": "run", "role": HTML}, 400),
    ("/heatmap", {"run": HTML}, 404),
    ("/heatmap", {"run": "x" * 5000}, 404),
    ("/heatmap", {"run": "run", "role": "update"}, 200),  # a role the run does not have: an empty matrix
    ("/findings", {}, 400),
    ("/findings", {"run": "\u0000\ud7ff\uffff"}, 404),
    ("/cell", {"run": "run"}, 400),
    ("/cell", {"run": "run", "layer": "good/kernel"}, 400),
    ("/cell", {"run": "run", "layer": "good/kernel", "step": "abc"}, 400),
    ("/cell", {"run": "run", "layer": "good/kernel", "step": "1.5"}, 400),
    ("/cell", {"run": "run", "layer": "good/kernel", "step": str(10 ** 30)}, 404),
    ("/cell", {"run": "run", "layer": "good/kernel", "step": "-1"}, 404),
    ("/cell", {"run": "run", "layer": "good/kernel", "step": "99"}, 404),
    ("/cell", {"run": "run", "layer": "nope", "step": "1"}, 404),
    ("/cell", {"run": "run", "layer": "good/kernel", "step": "1", "role": "bogus"}, 400),
    ("/cell", {"run": "run", "layer": "good/kernel", "step": "1", "role": "weight"}, 404),
    ("/series", {"run": "run", "layer": "good/kernel"}, 400),
    ("/series", {"run": "run", "layer": "good/kernel", "metric": "bogus"}, 400),
    ("/series", {"run": "run", "layer": "nope", "metric": "l2"}, 404),
    ("/series", {"run": "run", "layer": "good/kernel", "metric": "l2", "role": "weight"}, 404),
    ("/series", {"run": "run", "layer": "good/kernel", "metric": "l2", "role": HTML}, 400),
])
def test_bad_requests_get_json_errors(good_client, route, params, expected):
    status, body = call(good_client, route, **params)
    assert status == expected, body
    if status != 200:
        assert isinstance(body.get("error"), str) and body["error"]


# --------------------------------------------------------------------------- every odd thing at once

def _own_value(layer: str, vector, version=None):
    """A gradhealth summary of a weight, its vector as given, its metadata's version replaced when given."""
    from gradhealth_plugin.writing import format as fmt

    meta = fmt.summary_metadata("weight", layer, position=0, shape=(16, 16))
    if version is not None:
        meta.plugin_data.content = json.dumps(dict(json.loads(meta.plugin_data.content), version=version)).encode()
    return fmt.tensor_summary(fmt.tag_for("weight", layer), vector, meta).value[0]


def _odd_histograms() -> dict:
    """tag -> a histogram tensor no writer should write, one per kind of damage."""
    edges = np.linspace(-1.0, 1.0, 31)

    def buckets(counts, e=edges):
        return np.stack([e[:-1], e[1:], np.broadcast_to(np.asarray(counts, dtype=np.float64), 30)], axis=1)

    nan_edges = buckets(0.0)
    nan_edges[:, :2] = np.nan
    inf_edge = buckets(3.0)
    inf_edge[-1, 1] = np.inf
    return {
        "gradients/empty/kernel": np.zeros((30, 3)), "gradients/no_buckets/kernel": np.zeros((0, 3)),
        "gradients/one_bucket/kernel": [[1.0, 2.0, 10.0]], "gradients/nan_edges/kernel": nan_edges,
        "gradients/inf_edge/kernel": inf_edge, "gradients/decreasing/kernel": buckets(3.0, edges[::-1]),
        "gradients/negative/kernel": buckets(-1.0), "gradients/fractional/kernel": buckets(0.25),
        "gradients/huge_count/kernel": buckets(np.where(np.arange(30) == 7, 1e300, 1.0)),
        "gradients/flat5/kernel": np.arange(5.0), "gradients/cube/kernel": np.ones((2, 2, 3)),
        "gradients/scalar/kernel": 3.0,
    }


# Tags of the odd logdir that are no histograms or no gradhealth vectors, and the words saying why.
ODD_UNREADABLE = {
    "gradients/flat5/kernel": "has shape [5], not [k, 3] histogram buckets",
    "gradients/cube/kernel": "has shape [2, 2, 3], not [k, 3] histogram buckets",
    "gradients/scalar/kernel": "has shape [], not [k, 3] histogram buckets",
    "gradients/decreasing/kernel": "bucket edges decrease at step 0",
    "gradients/negative/kernel": "negative counts at step 0",
    "gradients/text/kernel": "holds text, not numbers",
    "gradhealth/weight/short": "has shape [5], not a vector of 15 or 56 statistics",
    "gradhealth/weight/long": "has shape [168], not a vector of 15 or 56 statistics",
    "gradhealth/weight/empty": "has shape [0], not a vector of 15 or 56 statistics",
    "gradhealth/weight/v99": "format version 99",
    "gradhealth/weight/v_text": 'format version "2"',
}


def write_odd_run(run_dir: pathlib.Path, steps=range(4)) -> None:
    """Adds to a run, at its steps, every odd histogram and gradhealth summary this module knows of."""
    from gradhealth_plugin.writing.reference import stats_numpy

    rng = np.random.default_rng(11)
    events = []
    for step in steps:
        vector = stats_numpy(rng.normal(size=256))
        values = [hist_value(tag, b) for tag, b in _odd_histograms().items()]
        values += [hist_value("gradients/int_counts/kernel", np.array([[0, 1, 2], [1, 2, 3]], dtype=np.int64), None),
                   hist_value("gradients/half/kernel", normal_buckets(rng), np.float16),
                   hist_value("gradients/text/kernel", np.array([[b"a", b"b", b"c"]], dtype=object), None),
                   _own_value("short", vector[:5]), _own_value("long", np.concatenate([vector] * 3)),
                   _own_value("empty", vector[:0]), _own_value("v99", vector, version=99),
                   _own_value("v_text", vector, version="2"), _own_value("fine", vector)]
        events.append(event(step, *values))
    write_run(run_dir, events)


@pytest.fixture(scope="module")
def odd_logdir(tmp_path_factory, tf2_custom_loop_logdir):
    """A TF2 custom loop's run (``trained``) with every odd histogram and summary added at its steps, and
    beside it a run holding nothing but them (``odd``)."""
    root = tmp_path_factory.mktemp("odd")
    shutil.copytree(tf2_custom_loop_logdir, root / "trained")
    write_odd_run(root / "trained")
    write_odd_run(root / "odd")
    return root


def test_an_odd_logdir_reports_what_is_no_histogram_and_serves_the_rest(odd_logdir, loader_client):
    seen = sweep(loader_client(odd_logdir))
    for run in ("trained", "odd"):
        unreadable = {u["tag"]: u["why"] for u in seen[run]["summary"]["unreadable"]}
        assert set(unreadable) == set(ODD_UNREADABLE), unreadable
        for tag, words in ODD_UNREADABLE.items():
            assert words in unreadable[tag], (tag, unreadable[tag])
        layers = {layer["name"] for layer in seen[run]["summary"]["layers"]}
        assert {"flat5/kernel", "cube/kernel", "scalar/kernel", "short", "long", "empty", "decreasing/kernel",
                "negative/kernel"}.isdisjoint(layers)
        assert "fine" in layers and "nan_edges/kernel" in layers
        assert seen[run]["summary"]["unreadable_steps"] == []
    trained = {layer["name"] for layer in seen["trained"]["summary"]["layers"]}
    assert "sequential/dense/kernel" in trained  # the training's own tags are served beside them


# Values a query parameter is tried with: names the odd logdir has, and everything a parameter must refuse.
_HOSTILE_TEXT = ["", " ", "-", "0", "1", "-1", "3", "99", "1e9", "1000000000", "nan", "NaN", "inf", "-inf", "1.5",
                 "0x10", "+5", "\uff15", "1_000", str(2 ** 63), str(-2 ** 63 - 1), "9" * 5000, "-" + "9" * 30,
                 "3:1", "0:3", "0:999999999999999", "1,2,3", ",", "0:", "::", "x" * 3000, "\u0000", "\ud7ff\uffff",
                 HTML, "../../etc/passwd", "%00", "слой", "🔥", "rows", "blocks"]


# Each route's parameters, as `docs/http_api.md` lists them; the others take none.
_ROUTE_PARAMS = {"/heatmap": ("run", "role", "metric", "start", "end", "columns", "layout", "rows", "blocks"),
                 "/cell": ("run", "layer", "step", "role"), "/series": ("run", "layer", "metric", "role"),
                 "/distribution": ("run", "layer", "role"), "/findings": ("run",), "/track": ("run", "start", "end"),
                 "/runs": (), "/vocabulary": (), "/sweep": ()}


def _queries(route: str):
    """Query pairs for `route`: each of its parameters, or not, with a value it takes but for at most two of
    them, which get anything at all (so that each hostile value is read: a route stops at its first bad
    parameter); then a name it does not take, and a few of its names again (the first is read)."""
    from hypothesis import strategies as st

    from gradhealth_plugin import plugin
    from gradhealth_plugin.reading import tags as tags_lib
    from gradhealth_plugin.serving import responses

    layers = ["fine", "nan_edges/kernel", "decreasing/kernel", "huge_count/kernel", "empty/kernel",
              "one_bucket/kernel", "sequential/dense/kernel", "sequential/dense_2/bias"]
    steps = ["0", "1", "3", "-1", "99", str(2 ** 63 - 1), str(-2 ** 63)]
    valid = {"run": ["trained", "odd"], "layer": layers, "role": list(tags_lib.ROLES),
             "metric": list(plugin.HEATMAP_METRICS), "step": steps, "start": steps, "end": steps,
             "columns": ["1", "2", "7", "1000000000", "9" * 40], "layout": list(responses.HEATMAP_LAYOUTS),
             "rows": ["0", "0:3", "1,2", "0:999999999999999", ""], "blocks": ["0", "0:1", ""]}
    anything = st.one_of(st.sampled_from(_HOSTILE_TEXT + list(ODD_UNREADABLE)), st.integers(-2 ** 70, 2 ** 70).map(str),
                         st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
    names = _ROUTE_PARAMS[route]

    @st.composite
    def query(draw):
        present = [name for name in names if name == "run" or draw(st.integers(0, 4)) > 0]
        hostile = draw(st.sets(st.sampled_from(present), max_size=2)) if present else set()
        pairs = [(name, draw(anything if name in hostile else st.sampled_from(valid[name]))) for name in present]
        again = draw(st.lists(st.tuples(st.sampled_from(names + ("junk",)), anything), max_size=2))
        return pairs + again

    return query()


def _strict_json(text: str):
    """JSON as a browser's parser takes it: NaN and Infinity are no JSON."""
    def refuse(constant):
        raise AssertionError(f"{constant} in an answer")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module", params=("python", "rust"))
def odd_client(request, odd_logdir):
    from tests.conftest import PluginClient, RustPluginClient

    if request.param == "python":
        yield PluginClient(odd_logdir)
        return
    client = RustPluginClient(odd_logdir)
    yield client
    client.close()


@pytest.mark.parametrize("route", list(_ROUTE_PARAMS))
def test_no_query_on_an_odd_logdir_makes_a_server_error(odd_client, route):
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=60 if _ROUTE_PARAMS[route] else 10, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(_queries(route))
    def check(pairs):
        response = odd_client.query(route, pairs)
        text = response.get_data(as_text=True)
        assert response.status_code in (200, 400, 404), (route, pairs, response.status_code, text[:300])
        assert response.mimetype == "application/json", (route, pairs)
        assert "Traceback" not in text
        body = _strict_json(text)
        if response.status_code != 200:
            assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"].strip(), body

    check()


def test_the_report_gives_each_unreadable_tag_a_line(odd_logdir, capsys):
    from gradhealth_plugin import cli

    assert cli.main(["report", "--run", "odd", str(odd_logdir)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    lines = [line for line in out.splitlines() if line.startswith("  unreadable tag ")]
    assert len(lines) == len(ODD_UNREADABLE), out
    for tag, words in ODD_UNREADABLE.items():
        assert any(line.startswith(f"  unreadable tag {tag}: ") and words in line for line in lines), (tag, out)


@pytest.mark.parametrize("command", [["check"], ["check", "--sampled"], ["watch", "--time-limit", "0"],
                                     ["watch", "--time-limit", "0", "--format", "json"]])
def test_check_and_watch_give_each_unreadable_tag_a_line(odd_logdir, capsys, command):
    from gradhealth_plugin import cli

    code = cli.main(command[:1] + [str(odd_logdir), "--run", "odd"] + command[1:])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err and "error" not in err, err
    if "json" in command:
        said = {e["tag"]: e["why"] for e in map(json.loads, out.splitlines()) if e["event"] == "unreadable"}
        assert all(e["run"] == "odd" for e in map(json.loads, out.splitlines()))
    else:
        said = dict(line[len("odd: unreadable tag "):].split(": ", 1) for line in out.splitlines()
                    if line.startswith("odd: unreadable tag "))
    assert set(said) == set(ODD_UNREADABLE), out
    for tag, words in ODD_UNREADABLE.items():
        assert words in said[tag], (tag, said[tag])


def test_a_step_whose_vector_is_not_the_formats_is_no_data_in_every_route(tmp_path, loader_client):
    from gradhealth_plugin.writing.reference import stats_numpy

    rng = np.random.default_rng(4)
    vectors = [stats_numpy(rng.normal(size=256)) for _ in range(4)]
    vectors[2] = np.concatenate([vectors[2]] * 3)  # three vectors in one: its fields are not where they belong
    write_run(tmp_path / "run", [event(step, _own_value("w", v)) for step, v in enumerate(vectors)])
    client = loader_client(tmp_path)
    summary = client.ok("/runs")["runs"][0]
    assert summary["unreadable"] == []
    # Said, as a histogram tag's steps that hold no histogram are.
    [some] = summary["unreadable_steps"]
    shape = list(np.shape(vectors[2]))
    assert some == {"tag": "gradhealth/weight/w", "steps": 1, "of": 4, "first_step": 2,
                    "why": f"the tensor at step 2 has shape {shape}, not a vector of 15 or 56 statistics"}
    weight = client.ok("/cell", run="run", layer="w", step=2)["roles"]["weight"]
    assert weight["status"] == "no_data" and weight["histogram"] is None
    assert client.ok("/distribution", run="run", layer="w")["distributions"]["weight"]["steps"] == [0, 1, 3]
    assert client.ok("/cell", run="run", layer="w", step=3)["roles"]["weight"]["histogram"]


def test_the_report_says_a_summarys_steps_that_hold_no_vector(tmp_path, capsys):
    from gradhealth_plugin import cli
    from gradhealth_plugin.writing.reference import stats_numpy

    rng = np.random.default_rng(5)
    vectors = [stats_numpy(rng.normal(size=256)) for _ in range(5)]
    vectors[1] = vectors[1][:5]
    vectors[3] = vectors[3][:5]
    write_run(tmp_path / "run", [event(step, _own_value("w", v)) for step, v in enumerate(vectors)])
    assert cli.main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ("unreadable steps of tag gradhealth/weight/w: 2 of 5 steps read hold no statistics vector and are no"
            " data; the first: the tensor at step 1 has shape [5], not a vector of 15 or 56 statistics") in out, out
