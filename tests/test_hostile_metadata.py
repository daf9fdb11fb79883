"""Hostile summaries and failing runs: what cannot be read is reported, everything else is served.

gradhealth's own summaries are written with the real protos (`writing.format.summary_metadata`,
`tensor_summary`) and then corrupted: metadata naming an unknown role, shapes that are not
shapes, string tensors. Such a tag is listed in its run's summary as ``unreadable`` with why,
and the run's other tags are served by every route, under both TensorBoard loaders and in the
CLI. A run whose analysis fails anyway is listed with its error and the other runs are
unaffected. Non-finite numbers are null in every answer; a layer named "" can be opened.
"""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest

from gradhealth_plugin import cli
from gradhealth_plugin.analysis import findings as findings_lib
from gradhealth_plugin.reading import provider as provider_lib
from gradhealth_plugin.writing import format as fmt
from gradhealth_plugin.writing.reference import stats_numpy
from tests.test_bad_input import (ROLES, append_events, call, event, hist_value, normal_buckets, scalar_value, sweep,
                                  write_run)

STEPS = range(6)
GOOD = "fc2.weight"  # the layer every hostile run also logs, correctly
BAD = "fc1.weight"


def _vector(rng, std: float = 10.0) -> np.ndarray:
    """A weight's statistics; a std of 10 is far from He and Glorot for a 16x16 kernel (an init_scale finding)."""
    return stats_numpy(rng.normal(size=256) * std)


def own_value(layer: str, vector, *, role: str = "weight", shape=(16, 16), patch=None):
    """A gradhealth summary value written with the format's own protos, its metadata then corrupted.

    ``patch`` replaces keys of the metadata JSON; a ``vector`` that is not numbers is stored
    as the tensor it is (a string tensor).
    """
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    meta = fmt.summary_metadata(role, layer, position=0, shape=shape)
    if patch is not None:
        meta.plugin_data.content = json.dumps(dict(json.loads(meta.plugin_data.content), **patch)).encode()
    tag = fmt.tag_for(role, layer)
    if np.asarray(vector).dtype.kind not in "biuf":
        return summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=tensor_util.make_tensor_proto(vector))
    return fmt.tensor_summary(tag, vector, meta).value[0]


# name -> (how the bad tag is written, words its "why" must hold)
HOSTILE = {
    "role_optimizer_state": (dict(patch={"role": "optimizer_state"}), 'role "optimizer_state"'),
    "role_empty": (dict(patch={"role": ""}), 'role ""'),
    "shape_strings": (dict(patch={"shape": ["a", "b"]}), "shape must be a list of integers"),
    "shape_null": (dict(patch={"shape": [None, 3]}), "shape must be a list of integers"),
    "shape_nested": (dict(patch={"shape": [[1], [2]]}), "shape must be a list of integers"),
    "shape_zero": (dict(patch={"shape": [5, 0]}), "positive dimensions"),
    # json.dumps writes Python's big integer as it is: a 401-digit dimension.
    "shape_huge": (dict(patch={"shape": [10 ** 400, 2]}), "more elements than a tensor can hold"),
    "string_tensor": (dict(vector=np.array([b"a", b"b"], dtype=object)), "holds text"),
}


def _hostile_run(root, name: str, rng) -> str:
    """A run logging GOOD correctly and BAD as the case says; returns the bad tag."""
    spec, _ = HOSTILE[name]
    events = []
    for step in STEPS:
        bad = dict(spec)
        vector = bad.pop("vector", _vector(rng))
        events.append(event(step, own_value(BAD, vector, **bad), own_value(GOOD, _vector(rng))))
    write_run(root / name, events)
    return fmt.tag_for("weight", BAD)


def _string_histogram_run(root, rng) -> str:
    """A string tensor under TensorBoard's histograms plugin, next to a good histogram."""
    events = [event(step, hist_value("gradients/dense/kernel", np.array([[b"a", b"b", b"c"]], dtype=object), None),
                    hist_value("gradients/dense_1/kernel", normal_buckets(rng)))
              for step in STEPS]
    write_run(root / "string_histogram", events)
    return "gradients/dense/kernel"


def _write_case(root, run: str, rng) -> None:
    if run == "string_histogram":
        _string_histogram_run(root, rng)
    else:
        _hostile_run(root, run, rng)


def _good_run(root, rng) -> None:
    write_run(root / "good", [event(step, own_value(GOOD, _vector(rng))) for step in STEPS])


@pytest.fixture(scope="module")
def hostile_logdir(tmp_path_factory):
    """One run per hostile case, a string histogram run, and a run with nothing wrong."""
    root = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(5)
    for run in CASES:
        _write_case(root, run, rng)
    _good_run(root, rng)
    return root


CASES = list(HOSTILE) + ["string_histogram"]


def _by_run(body: dict) -> dict:
    return {r["run"]: r for r in body["runs"]}


def _expected_unreadable(run: str) -> tuple:
    """(bad tag, words of why, layers served) of one hostile run."""
    if run == "string_histogram":
        return "gradients/dense/kernel", "holds text", ["dense_1/kernel"]
    return fmt.tag_for("weight", BAD), HOSTILE[run][1], [GOOD]


@pytest.mark.parametrize("run", CASES)
def test_an_unreadable_tag_is_reported_and_the_rest_served(tmp_path, loader_client, run):
    rng = np.random.default_rng(5)
    _write_case(tmp_path, run, rng)
    _good_run(tmp_path, rng)
    client = loader_client(tmp_path)
    seen = sweep(client)  # every route on every run: 200, 400 or 404 JSON, never a trace
    summary = seen[run]["summary"]
    tag, why, served = _expected_unreadable(run)
    assert [u["tag"] for u in summary["unreadable"]] == [tag]
    assert why in summary["unreadable"][0]["why"]
    assert [layer["name"] for layer in summary["layers"]] == served
    assert tag not in summary["unclassified"]
    assert seen["good"]["summary"]["unreadable"] == []
    if run != "string_histogram":
        # The good layer is still judged: its std is far from He and Glorot.
        assert [f["layers"] for f in seen[run]["findings"] if f["kind"] == "init_scale"] == [[GOOD]]
    for role in ROLES:
        assert all(layer in served for layer in seen[run]["heatmaps"][(role, "health")]["layers"])


def test_cli_reports_unreadable_tags(hostile_logdir, capsys):
    code = cli.main(["report", "--format", "json", str(hostile_logdir)])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    runs = {r["run"]: r for r in json.loads(out)["runs"]}
    for run in CASES:
        tag, why, served = _expected_unreadable(run)
        assert [u["tag"] for u in runs[run]["unreadable"]] == [tag], run
        assert why in runs[run]["unreadable"][0]["why"], run
        assert runs[run]["layers"] == served, run

    code = cli.main(["report", str(hostile_logdir)])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    assert f"\n  unreadable tag {fmt.tag_for('weight', BAD)}: role \"optimizer_state\" is not one of" in out

    code = cli.main(["check", "--fail-on", "critical", str(hostile_logdir)])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err


def test_a_histogram_readable_again_is_served(tmp_path, plugin_client):
    """Text at steps 3-5, then a restart at step 2: TensorBoard purges the later steps, and the tag,
    unreadable before, is read afresh."""
    from tensorboard.compat.proto import event_pb2

    def start(step):
        return event_pb2.Event(step=step, wall_time=1_000_000.0 + step,
                               session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))

    rng = np.random.default_rng(10)
    text = np.array([[b"a", b"b", b"c"]], dtype=object)
    path = write_run(tmp_path / "run", [start(0)] + [
        event(step, hist_value("gradients/dense/kernel", text, None),
              hist_value("gradients/dense_1/kernel", normal_buckets(rng))) for step in (3, 4, 5)])
    client = plugin_client(tmp_path)
    assert [u["tag"] for u in client.ok("/runs")["runs"][0]["unreadable"]] == ["gradients/dense/kernel"]
    append_events(path, [start(2), event(2, hist_value("gradients/dense/kernel", normal_buckets(rng)),
                                         hist_value("gradients/dense_1/kernel", normal_buckets(rng)))])
    client.reload()
    summary = client.ok("/runs")["runs"][0]
    assert summary["unreadable"] == []
    assert [layer["name"] for layer in summary["layers"]] == ["dense/kernel", "dense_1/kernel"]
    assert client.ok("/cell", run="run", layer="dense/kernel", step=2)["roles"]["gradient"]["histogram"]


# --------------------------------------------------------------------------- the metadata itself

def _content(**patch) -> bytes:
    return json.dumps(dict(json.loads(fmt.metadata_content("weight", "fc", 0, (3, 4))), **patch)).encode()


@pytest.mark.parametrize("content, why", [
    (b"\xff", "not JSON"),
    (b"[" * 100_000, "not JSON"),
    (b"[1]", "not a JSON object"),
    (_content(version=3), "format version 3"),
    (_content(version=True), "format version true"),
    (_content(role=None), "role null"),
    (_content(role="other"), 'role "other"'),
    (_content(layer=3), "layer must be a string"),
    (_content(position="0"), "position must be an integer"),
    (_content(position=1.5), "position must be an integer"),
    (_content(shape=[True, 2]), "shape must be a list of integers"),
    (_content(shape=[2.0, 2]), "shape must be a list of integers"),
    (_content(shape="3x4"), "shape must be a list of integers"),
    (_content(shape=[-1, 4]), "positive dimensions"),
    (_content(shape=[2 ** 32, 2 ** 32]), "more elements"),
    (_content(shape=[1] * 10_000 + ["x"]), "..."),  # the message stays short whatever the shape
])
def test_metadata_that_is_not_the_format_says_why(content, why):
    with pytest.raises(fmt.MetadataError) as raised:
        fmt.read_metadata(content)
    assert fmt.parse_metadata(content) is None
    assert why in str(raised.value) and len(str(raised.value)) < 200 and "\n" not in str(raised.value)


@pytest.mark.parametrize("role", ("gradient", "weight", "activation", "update"))
def test_metadata_the_writers_write_is_read(role):
    meta = fmt.read_metadata(fmt.metadata_content(role, "", 2 ** 40, (2 ** 31, 2 ** 31)))
    assert (meta["role"], meta["layer"], meta["position"], meta["shape"]) == (role, "", 2 ** 40, [2 ** 31, 2 ** 31])
    assert fmt.parse_metadata(fmt.metadata_content(role, "x"))["role"] == role  # position and shape optional


# --------------------------------------------------------------------------- one run failing

@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_runs")
    rng = np.random.default_rng(6)
    for run in ("broken", "fine"):
        write_run(root / run, [event(step, own_value(GOOD, _vector(rng))) for step in STEPS])
    return root


class Failing:
    """Stands in for a function whose argument ``which(*args)`` names the run: raises for "broken"."""

    def __init__(self, original, which):
        self.original, self.which, self.calls = original, which, []

    def __call__(self, *args, **kwargs):
        run = self.which(*args)
        self.calls.append(run)
        if run == "broken":
            raise ValueError("could not convert string to float: b'a'")
        return self.original(*args, **kwargs)


def _assert_isolated(client, caplog, doing: str) -> None:
    with caplog.at_level(logging.ERROR, logger="gradhealth_plugin"):
        status, body = call(client, "/runs")
    assert status == 200
    runs = _by_run(body)
    assert set(runs) == {"broken", "fine"}
    assert runs["broken"] == {"run": "broken", "error": runs["broken"]["error"]}
    error = runs["broken"]["error"]
    assert f"run 'broken' could not be {doing}" in error and "ValueError" in error and "Traceback" not in error
    assert [layer["name"] for layer in runs["fine"]["layers"]] == [GOOD]
    assert any(r.exc_info and "broken" in r.getMessage() for r in caplog.records), "no traceback logged"
    # The run's own routes answer its error as JSON; the other run's answer as ever.
    for route, params in (("/findings", {}), ("/heatmap", {}), ("/series", dict(layer=GOOD, metric="mean")),
                          ("/cell", dict(layer=GOOD, step=0))):
        response = client.raw(route, run="broken", **params)
        text = response.get_data(as_text=True)
        assert response.status_code == 422 and response.mimetype == "application/json", (route, text)
        assert json.loads(text) == {"error": error} and "Traceback" not in text
        assert call(client, route, run="fine", **params)[0] == 200


def test_a_run_whose_analysis_fails_is_listed_with_its_error(two_runs, loader_client, monkeypatch, caplog):
    failing = Failing(findings_lib.find, lambda rd, limits: rd.run)
    monkeypatch.setattr(findings_lib, "find", failing)
    client = loader_client(two_runs)
    _assert_isolated(client, caplog, "analysed")
    # The failure is kept like findings, until the run's data changes: not analysed again per request.
    assert failing.calls.count("broken") == 1


def test_a_run_that_cannot_be_read_is_listed_with_its_error(two_runs, loader_client, monkeypatch, caplog):
    build = Failing(provider_lib.Reader._build, lambda reader, ctx, experiment_id, run, listings: run)
    monkeypatch.setattr(provider_lib.Reader, "_build", lambda *args: build(*args))
    _assert_isolated(loader_client(two_runs), caplog, "read")


# --------------------------------------------------------------------------- small ones

def _walk(value, path="$"):
    """Every (path, leaf) of a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, value


NON_FINITE_WORDS = {"nan", "inf", "-inf", "infinity", "-infinity"}


def _no_non_finite(body) -> None:
    for path, leaf in _walk(body):
        assert not (isinstance(leaf, float) and not math.isfinite(leaf)), path
        assert not (isinstance(leaf, str) and leaf.lower() in NON_FINITE_WORDS), (path, leaf)


def test_non_finite_numbers_are_null_in_every_answer(tmp_path, loader_client):
    """A NaN loss and infinite gradients: evidence, cells and series say null, never "nan"."""
    rng = np.random.default_rng(7)
    events = []
    for step in STEPS:
        grads = normal_buckets(rng, 1e-2 if step < 3 else 1e30)
        vector = _vector(rng)
        if step >= 3:
            vector[fmt.FIELDS.index("mean")] = np.nan
            vector[fmt.FIELDS.index("max_abs")] = np.inf
        events.append(event(step, hist_value("gradients/dense/kernel", grads), own_value(GOOD, vector),
                            scalar_value("loss", 1.0 if step < 3 else float("nan"))))
    write_run(tmp_path / "blowup", events)
    client = loader_client(tmp_path)
    seen = sweep(client)["blowup"]
    evidence = [f["evidence"] for f in seen["findings"] if f["kind"] == "nonfinite"]
    assert evidence and any(e["value"] is None for e in evidence), evidence
    _no_non_finite(client.ok("/runs"))
    _no_non_finite(client.ok("/findings", run="blowup"))
    for layer in (GOOD, "dense/kernel"):
        _no_non_finite(client.ok("/series", run="blowup", layer=layer, metric="mean"))
        _no_non_finite(client.ok("/series", run="blowup", layer=layer, metric="max_abs"))
        for step in STEPS:
            _no_non_finite(client.ok("/cell", run="blowup", layer=layer, step=step))
    for heatmap in seen["heatmaps"].values():
        _no_non_finite(heatmap)


def test_non_finite_numbers_are_null_in_the_cli_json(tmp_path, capsys):
    rng = np.random.default_rng(8)
    write_run(tmp_path / "blowup", [event(step, own_value(GOOD, _vector(rng)),
                                       scalar_value("loss", 1.0 if step < 3 else float("nan"))) for step in STEPS])
    assert cli.main(["report", "--format", "json", str(tmp_path)]) == 0
    out = capsys.readouterr().out

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    body = json.loads(out, parse_constant=refuse)
    assert any(f["kind"] == "nonfinite" for f in body["findings"])
    _no_non_finite(body)


def test_a_layer_named_empty_can_be_opened(tmp_path, loader_client):
    rng = np.random.default_rng(9)
    write_run(tmp_path / "run", [event(step, own_value("", _vector(rng)), own_value(GOOD, _vector(rng)))
                                 for step in STEPS])
    client = loader_client(tmp_path)
    layers = [layer["name"] for layer in client.ok("/runs")["runs"][0]["layers"]]
    assert "" in layers
    cell = client.ok("/cell", run="run", layer="", step=2)
    assert cell["layer"] == "" and cell["step"] == 2 and "weight" in cell["roles"]
    series = client.ok("/series", run="run", layer="", metric="std")
    assert series["layer"] == "" and len(series["series"]["weight"]["steps"]) == len(STEPS)
    # Absent is still missing: only a present, empty value names the layer "".
    assert client.get("/cell", run="run", step=2) == (400, {"error": "missing query parameter 'layer'"})
    assert client.get("/series", run="run", metric="std")[0] == 400



def test_the_cli_reports_the_other_runs_when_one_fails(two_runs, monkeypatch, capsys):
    from gradhealth_plugin import cli

    monkeypatch.setattr(findings_lib, "find", Failing(findings_lib.find, lambda rd, limits: rd.run))
    code = cli.main(["report", "--format", "json", str(two_runs)])
    out, err = capsys.readouterr()
    assert code == 2, err  # an error: one run could not be reported
    runs = {r["run"]: r for r in json.loads(out)["runs"]}
    assert set(runs) == {"broken", "fine"} and runs["fine"]["layers"]
    assert runs["broken"] == {"run": "broken", "error": runs["broken"]["error"]}
    assert "could not convert string to float" in runs["broken"]["error"]
    assert err.strip().splitlines() == [f"gradhealth: run 'broken' skipped: {runs['broken']['error']}"]
    assert "Traceback" not in out + err
    code = cli.main(["check", "--fail-on", "critical", str(two_runs)])
    out, err = capsys.readouterr()
    assert code == 2 and "1 run(s) could not be checked" in err, (out, err)
