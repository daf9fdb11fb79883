"""The sweep route and ``gradhealth report --by-hparams``: hyperparameters read through the data provider,
one line per run, the clear splits; under both loaders."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from gradhealth_plugin import cli
from tests.conftest import WILD
from tests.test_bad_input import call, event, hist_value, normal_buckets, scalar_value, write_run

STEPS = 60
LEARNING_RATES = (0.001, 0.01, 0.3, 1.0)
OPTIMIZERS = ("sgd", "adam")
EXPLODES_FROM = 30


def _session_start(values: dict):
    """The HParams plugin's session start info summary, as hp.hparams writes it."""
    from tensorboard.plugins.hparams import summary_v2 as hp

    return hp.hparams_pb(values, start_time_secs=1_000_000).value


def _trial(run_dir, lr: float, optimizer: str) -> None:
    """Three layers' gradients; from EXPLODES_FROM on, they blow up a million-fold where lr >= 0.3."""
    rng = np.random.default_rng(int(lr * 1000) + len(optimizer))
    events = [event(0, *_session_start({"learning_rate": lr, "optimizer": optimizer}))]
    for step in range(STEPS):
        scale = 1e-2 * (1e6 if lr >= 0.3 and step >= EXPLODES_FROM else 1.0)
        values = [hist_value(f"gradients/dense_{i}/kernel", normal_buckets(rng, scale=scale)) for i in range(3)]
        events.append(event(step, *values, scalar_value("loss", 1.0 / (1 + step))))
    write_run(run_dir, events)


@pytest.fixture(scope="module")
def sweep_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    for lr in LEARNING_RATES:
        for optimizer in OPTIMIZERS:
            _trial(root / f"lr{lr}_{optimizer}", lr, optimizer)
    # A run without hyperparameters still takes part.
    write_run(root / "plain", [event(s, hist_value("gradients/dense_0/kernel",
                                                     normal_buckets(np.random.default_rng(s)))) for s in range(STEPS)])
    return root


def test_sweep_route_lines_and_split(sweep_logdir, loader_client):
    body = loader_client(sweep_logdir).ok("/sweep")
    assert body["hparams"] == [{"name": "learning_rate", "type": "number"}, {"name": "optimizer", "type": "text"}]
    rows = {r["run"]: r for r in body["runs"]}
    assert set(rows) == {f"lr{lr}_{o}" for lr in LEARNING_RATES for o in OPTIMIZERS} | {"plain"}
    assert rows["plain"]["hparams"] == {} and rows["plain"]["hparams_from"] is None
    hot = rows["lr1.0_sgd"]
    assert hot["hparams"] == {"learning_rate": 1.0, "optimizer": "sgd"}
    assert hot["hparams_from"] == {"source": "own", "run": "lr1.0_sgd"}
    assert hot["worst_status"] == "critical" and hot["worst"]["kind"] == "exploding_gradients"
    (exploding,) = [k for k in hot["kinds"] if k["kind"] == "exploding_gradients"]
    assert exploding["first_step_text"] == str(EXPLODES_FROM) and exploding["layer"].startswith("dense_")
    # The strip: the worst status per step, critical from the explosion on.
    strip = hot["strip"]
    assert strip["steps_text"] == [str(s) for s in range(STEPS)]
    assert set(strip["status"][:EXPLODES_FROM]) == {1} and set(strip["status"][EXPLODES_FROM:]) == {3}
    assert not any(k["kind"] == "exploding_gradients" for k in rows["lr0.01_adam"]["kinds"])
    sentences = [s["sentence"] for s in body["splits"]]
    assert "Exploding gradients in 4 of 4 runs with learning_rate >= 0.3, in 0 of 4 below" in sentences
    assert not any("optimizer" in s for s in sentences)


def test_the_sweep_of_unchanged_data_analyses_nothing_again(sweep_logdir, plugin_client, monkeypatch):
    from gradhealth_plugin.serving import responses

    client = plugin_client(sweep_logdir)
    first = client.ok("/sweep")
    built = []
    original = responses.sweep_row
    monkeypatch.setattr(responses, "sweep_row", lambda *a: built.append(a) or original(*a))
    assert client.ok("/sweep") == first
    assert built == []


def test_a_sweep_of_more_runs_than_the_reader_keeps_analyses_nothing_again(sweep_logdir, plugin_client,
                                                                            monkeypatch):
    """The reader keeps the data of a few runs (64); a sweep's lines are kept by run and data version."""
    from gradhealth_plugin.analysis import findings
    from gradhealth_plugin.reading import provider

    monkeypatch.setattr(provider, "_CACHE_RUNS", 2)
    client = plugin_client(sweep_logdir)
    first = client.ok("/sweep")
    analysed = []
    original = findings.find
    monkeypatch.setattr(findings, "find", lambda *a: analysed.append(a[0].run) or original(*a))
    assert client.ok("/sweep") == first
    assert analysed == []


def test_the_wild_tf_custom_loop_with_hparams_shows_its_hyperparameters(loader_client):
    logdir = WILD / "congvmit__model_investigation"
    if not logdir.exists():
        pytest.skip("shared/wild is not here")
    rows = {r["run"]: r for r in loader_client(logdir).ok("/sweep")["runs"]}
    assert rows["tensorboard/v0"]["hparams"] == {"learning_rate": 0.1, "n_hidden_1": 128.0, "n_hidden_2": 256.0,
                                                 "optimizer": "sgd"}
    assert rows["tensorboard/v8"]["hparams"] == {"learning_rate": 0.01, "n_hidden_1": 128.0, "n_hidden_2": 64.0,
                                                 "optimizer": "rmsprop"}


def test_an_add_hparams_sub_run_is_attached_to_its_parent(tmp_path, loader_client):
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "trial_a"
    with SummaryWriter(str(run)) as writer:
        for step in range(20):
            writer.add_histogram("grads/fc.weight", torch.randn(64) * 1e-2, step)
            writer.add_scalar("loss", 1.0 / (1 + step), step)
        writer.add_hparams({"lr": 0.1, "optimizer": "sgd", "nesterov": True}, {"hparam/loss": 0.05})
    (sub,) = [p.name for p in run.iterdir() if p.is_dir()]  # named by a timestamp
    body = loader_client(tmp_path).ok("/sweep")
    rows = {r["run"]: r for r in body["runs"]}
    assert set(rows) == {"trial_a"}  # the sub-run is no line of its own
    assert rows["trial_a"]["hparams"] == {"lr": 0.1, "nesterov": True, "optimizer": "sgd"}
    assert rows["trial_a"]["hparams_from"] == {"source": "sub-run", "run": f"trial_a/{sub}"}


def test_hparams_metadata_that_cannot_be_parsed_leaves_the_run_without_hyperparameters(tmp_path, plugin_client):
    from tensorboard.compat.proto import summary_pb2

    value = summary_pb2.Summary.Value(tag="_hparams_/session_start_info")
    value.metadata.plugin_data.plugin_name = "hparams"
    value.metadata.plugin_data.content = b"\xff\xfe not a proto"
    value.tensor.dtype = 7  # DT_STRING
    value.tensor.tensor_shape.SetInParent()
    value.tensor.string_val.append(b"")
    rng = np.random.default_rng(0)
    write_run(tmp_path / "run", [event(0, value)] + [
        event(s, hist_value("gradients/dense_0/kernel", normal_buckets(rng))) for s in range(10)])
    status, body = call(plugin_client(tmp_path), "/sweep")
    assert status == 200 and body["hparams"] == [] and body["runs"][0]["hparams"] == {}


# --- the CLI ---------------------------------------------------------------------------------------

def _cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_report_by_hparams_text(sweep_logdir, capsys):
    code, out, err = _cli(capsys, "report", sweep_logdir, "--by-hparams")
    assert code == 0, err
    header, *lines = out.splitlines()
    assert header.split()[:5] == ["run", "learning_rate", "optimizer", "worst", "kinds"]
    hot = next(line for line in lines if line.startswith("lr1.0_sgd "))
    assert hot.split()[1:4] == ["1", "sgd", "critical"] and f"exploding_gradients ({EXPLODES_FROM}, dense_" in hot
    assert "  Exploding gradients in 4 of 4 runs with learning_rate >= 0.3, in 0 of 4 below" in lines


def test_report_by_hparams_json_matches_the_route(sweep_logdir, capsys, plugin_client):
    code, out, err = _cli(capsys, "report", sweep_logdir, "--by-hparams", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    route = plugin_client(sweep_logdir).ok("/sweep")
    assert report["sweep"]["splits"] == route["splits"]
    assert report["sweep"]["hparams"] == route["hparams"]
    assert [r["hparams"] for r in report["sweep"]["runs"]] == [r["hparams"] for r in route["runs"]]


def test_report_without_by_hparams_has_no_sweep(sweep_logdir, capsys, tmp_path):
    shutil.copytree(sweep_logdir / "lr1.0_sgd", tmp_path / "one")
    code, out, err = _cli(capsys, "report", tmp_path, "--format", "json")
    assert code == 0, err
    assert "sweep" not in json.loads(out)


def test_the_demo_sweep_logged_as_seed_003_shows_its_split(capsys):
    """demo/runs/sweep: hp.KerasCallback writes into the trial, Keras into trial/train and /validation."""
    from tests.conftest import REPO

    code, out, err = _cli(capsys, "report", REPO / "demo" / "runs" / "sweep", "--by-hparams", "--format", "json")
    assert code == 0, err
    sweep = json.loads(out)["sweep"]
    rows = {r["trial"]: r for r in sweep["runs"]}
    assert rows["lr_0.3_sgd"]["hparams"] == {"learning_rate": 0.3, "optimizer": "sgd"}
    assert rows["lr_0.3_sgd"]["hparams_from"] == {"source": "parent", "run": "lr_0.3_sgd"}
    assert rows["lr_0.3_sgd"]["parts"] == ["lr_0.3_sgd/train", "lr_0.3_sgd/validation"]
    assert [s["sentence"] for s in sweep["splits"]] == [
        "Warnings or worse in 4 of 4 runs with learning_rate >= 0.3, in 0 of 4 below",
        "Update-to-weight ratio in 4 of 4 runs with learning_rate >= 0.3, in 0 of 4 below"]


# --- the order of the lines and Keras' trials ---------------------------------------------------------

@pytest.fixture(scope="module")
def ordered_logdir(tmp_path_factory):
    """Runs named so that name order and string order of their values both differ from value order."""
    root = tmp_path_factory.mktemp("ordered")
    rng = np.random.default_rng(1)
    for i, (lr, name) in enumerate([(0.1, "lr_2"), (1e-3, "lr_10"), (0.01, "lr_1"), (0.1, "lr_10")]):
        events = [event(0, *_session_start({"learning_rate": lr, "schedule": name}))]
        events += [event(s, hist_value("gradients/dense_0/kernel", normal_buckets(rng))) for s in range(10)]
        write_run(root / f"trial_{chr(ord('a') + i)}", events)
    return root


ORDERED = [(0.001, "lr_10"), (0.01, "lr_1"), (0.1, "lr_2"), (0.1, "lr_10")]


def test_sweep_lines_are_ordered_by_value_numbers_by_size_text_naturally(ordered_logdir, loader_client):
    body = loader_client(ordered_logdir).ok("/sweep")
    assert [(r["hparams"]["learning_rate"], r["hparams"]["schedule"]) for r in body["runs"]] == ORDERED


def test_report_by_hparams_orders_the_lines_alike(ordered_logdir, capsys):
    code, out, err = _cli(capsys, "report", ordered_logdir, "--by-hparams")
    assert code == 0, err
    lines = out.split("\n\n")[0].splitlines()[1:]
    assert [tuple(line.split()[1:3]) for line in lines] == [("0.001", "lr_10"), ("0.01", "lr_1"), ("0.1", "lr_2"),
                                                          ("0.1", "lr_10")]


def test_a_keras_fit_with_validation_is_one_line_per_trial(loader_client):
    """demo/runs/sweep, written by model.fit with hp.KerasCallback and validation data: each trial's
    train and validation runs are one line, which opens the training run and holds what either found."""
    from tests.conftest import REPO

    body = loader_client(REPO / "demo" / "runs" / "sweep").ok("/sweep")
    trials = [(r.get("trial"), r["run"], r.get("parts")) for r in body["runs"]]
    assert trials == [(f"lr_{lr}_{opt}", f"lr_{lr}_{opt}/train", [f"lr_{lr}_{opt}/train", f"lr_{lr}_{opt}/validation"])
                      for lr in ("0.001", "0.01", "0.3", "1") for opt in ("adam", "sgd")]
    hot = body["runs"][-1]
    assert hot["hparams"] == {"learning_rate": 1.0, "optimizer": "sgd"}
    assert hot["worst_status"] == "critical" and hot["strip"]["steps"]
    (nonfinite,) = [k for k in hot["kinds"] if k["kind"] == "nonfinite"]
    # The layers turn NaN at step 20; Keras' epoch_loss, NaN from its epoch 0, sets no step of its own.
    assert nonfinite["run"] == "lr_1_sgd/train" and nonfinite["first_step"] == 20
    assert [s["sentence"] for s in body["splits"]] == [
        "Warnings or worse in 4 of 4 runs with learning_rate >= 0.3, in 0 of 4 below",
        "Update-to-weight ratio in 4 of 4 runs with learning_rate >= 0.3, in 0 of 4 below"]


def test_a_finding_only_the_validation_run_has_shows_on_the_trials_line(tmp_path, plugin_client):
    rng = np.random.default_rng(2)
    write_run(tmp_path / "trial", [event(0, *_session_start({"learning_rate": 0.1}))])
    write_run(tmp_path / "trial" / "train", [
        event(s, hist_value("gradients/dense_0/kernel", normal_buckets(rng)), scalar_value("epoch_loss", 1.0 / (1 + s)))
        for s in range(10)])
    write_run(tmp_path / "trial" / "validation",
              [event(s, scalar_value("epoch_loss", float("nan") if s >= 5 else 1.0)) for s in range(10)])
    (row,) = plugin_client(tmp_path).ok("/sweep")["runs"]
    assert (row["trial"], row["run"]) == ("trial", "trial/train")
    assert row["worst_status"] == "critical" and row["worst"]["run"] == "trial/validation"
    assert [(k["kind"], k["run"], k["first_step"]) for k in row["kinds"]] == [("nonfinite", "trial/validation", 5)]


def test_a_kinds_onset_and_first_layer_are_those_of_its_worst_findings(plugin_client):
    """demo/runs/dead_relu/relu: act1 has dead units from step 0, but only as an info note; the warning
    is act2/act3 from step 30. The line's chip says warn, from 30, at act2, as `report --by-hparams` does."""
    from tests.conftest import REPO

    client = plugin_client(REPO / "demo" / "runs" / "dead_relu")
    (row,) = [r for r in client.ok("/sweep")["runs"] if r["run"] == "relu"]
    findings = client.ok("/findings", run="relu")["findings"]
    rank = {"info": 1, "warn": 2, "critical": 3}
    for k in row["kinds"]:
        of_kind = [f for f in findings if f["kind"] == k["kind"]]
        worst = max(rank[f["severity"]] for f in of_kind)
        assert k["severity"] == next(s for s, r in rank.items() if r == worst)
        assert k["first_step"] == min(f["first_step"] for f in of_kind if rank[f["severity"]] == worst)
        assert k["count"] == len(of_kind)
    (dead,) = [k for k in row["kinds"] if k["kind"] == "dead_units"]
    assert (dead["severity"], dead["first_step"], dead["layer"]) == ("warn", 30, "act2")
    assert any(f["kind"] == "dead_units" and f["severity"] == "info" and f["first_step"] == 0 for f in findings)


def test_report_by_hparams_says_the_onset_of_a_kinds_worst_findings(capsys):
    from tests.conftest import REPO

    assert cli.main(["report", str(REPO / "demo" / "runs" / "dead_relu"), "--by-hparams"]) in (0, 1, 2)
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("relu ")]
    assert "dead_units (30, act2)" in line


def test_runs_and_sweep_lines_order_run_names_by_their_decimal_values(tmp_path, plugin_client):
    rng = np.random.default_rng(3)
    names = ["lr_0.01_adam", "lr_0.001_sgd", "lr_0.001_adam", "lr_0.3_adam"]
    for name in names:
        write_run(tmp_path / name, [event(s, hist_value("gradients/dense_0/kernel", normal_buckets(rng)))
                                    for s in range(5)])
    expected = ["lr_0.001_adam", "lr_0.001_sgd", "lr_0.01_adam", "lr_0.3_adam"]
    client = plugin_client(tmp_path)
    assert [r["run"] for r in client.ok("/runs")["runs"]] == expected
    assert [r["run"] for r in client.ok("/sweep")["runs"]] == expected


def test_a_long_runs_strip_bins_equal_stretches_of_steps_not_of_logged_steps(tmp_path, loader_client):
    # Every step of the first 200, then every 100th to 10,000: 298 logged steps, more than the strip's columns.
    steps = list(range(200)) + list(range(300, 10_001, 100))
    rng = np.random.default_rng(3)
    write_run(tmp_path / "dense_then_sparse",
              [event(s, hist_value("gradients/dense_0/kernel", normal_buckets(rng))) for s in steps])
    (line,) = loader_client(tmp_path).ok("/sweep")["runs"]
    strip = line["strip"]
    firsts, lasts = strip["steps"], strip["last_steps"]
    assert len(firsts) == len(lasts) == len(strip["status"]) <= 120
    # Each column holds the logged steps of one stretch of 10,001 / 120 (about 83) steps: the first 200
    # steps make three columns, not the half of the strip their 200 of 298 logged steps would fill.
    width = 10_001 / 120
    assert [int(s // width) for s in firsts] == sorted({int(s // width) for s in steps})
    assert firsts[:4] == [0, 84, 167, 300] and lasts[:3] == [83, 166, 199]
    assert lasts[-1] == 10_000 and strip["steps_text"][:4] == ["0", "84", "167", "300"]


def _told_in_own_axis(report: dict, k: dict) -> dict:
    """The finding a sweep kind was taken from: of its run and kind, at its severity and first step."""
    return next(f for f in report["findings"] if (f["run"], f["kind"], f["severity"], f["first_step"]) ==
                (k.get("run", f["run"]), k["kind"], k["severity"], k["first_step"]) and f.get("axis") == k["axis"])


def test_a_kind_told_in_its_own_step_axis_names_that_axis(capsys):
    """demo/runs/sweep's lr_1_sgd/validation, a Keras fit's validation half: its loss turns NaN, told per
    iteration and per epoch, written about step 28. Its sweep line names the onset on the finding's own
    axis, as the finding says it, not as a bare step 28 of the layers' axis."""
    from tests.conftest import REPO

    argv = ["report", REPO / "demo" / "runs" / "sweep", "--run", "lr_1_sgd/validation", "--by-hparams"]
    code, out, err = _cli(capsys, *argv, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    (line,) = report["sweep"]["runs"]
    (k,) = [k for k in line["kinds"] if k["kind"] == "nonfinite"]
    axis = _told_in_own_axis(report, k)["axis"]
    assert axis is not None and k["axis"] == axis
    assert k["onset_text"] == f"{axis['unit']} {axis['first_step']}" and k["first_step"] == 28
    assert line["worst"]["onset_text"] == k["onset_text"]
    code, out, err = _cli(capsys, *argv)
    assert f"nonfinite ({k['onset_text']}, " in out, out


def test_a_keras_trials_kind_found_per_iteration_names_it(keras_sigmoid_at_chance_logdir, plugin_client):
    """A real Keras fit: the validation half's stall is told from iteration 7, on its own axis; the trial's
    line says so beside the train half's steps (epochs), never as one of them."""
    client = plugin_client(keras_sigmoid_at_chance_logdir)
    (line,) = client.ok("/sweep")["runs"]
    findings = {"findings": [f for run in ("train", "validation") for f in client.ok("/findings", run=run)["findings"]]}
    told = [k for k in line["kinds"] if k["axis"] is not None]
    assert told, line["kinds"]
    for k in told:
        axis = _told_in_own_axis(findings, k)["axis"]
        assert k["onset_text"] == f"{axis['unit']} {axis['first_step']}"
    assert all(k["onset_text"] == f"step {k['first_step']}" for k in line["kinds"] if k["axis"] is None)
