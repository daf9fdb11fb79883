"""``stop_on``: the integrations judge their own statistics with the tab's rules and stop a run early.

Real trainings on CPU (`live_training`): a ReLU MLP whose learning rate jumps
10,000-fold at step 20 (its gradients are NaN from the next logged step, 25),
and the same MLP left healthy. The stopped runs are then read back through the
plugin's routes, under both loaders, which must show why training stopped and
the finding it stopped on.
"""

import json

import numpy as np
import pytest

from gradhealth_plugin import alerts, live
from gradhealth_plugin.analysis import findings
from gradhealth_plugin.writing import format as metadata
from gradhealth_plugin.writing.reference import stats_numpy
from tests import live_training as lt

DIVERGE_AT = 20
ONSET = 25  # the first logged step after the learning rate jumped


@pytest.fixture(scope="module")
def torch_stopped(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("torch_stop")
    return logdir, lt.train_torch(str(logdir / "run"), diverge_at=DIVERGE_AT, stop_on="critical")


@pytest.fixture(scope="module")
def torch_healthy(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("torch_healthy")
    return logdir, lt.train_torch(str(logdir / "run"), stop_on="warn")


@pytest.fixture(scope="module")
def keras_stopped(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("keras_stop")
    return logdir, lt.train_keras(str(logdir), diverge_at=DIVERGE_AT, stop_on="critical")


def _assert_stopped_at_onset(result, onset):
    owner = result.owner
    f = owner.stopped_by
    assert f is not None and f.severity == "critical" and f.kind == "nonfinite"
    assert f.first_step == onset
    # Stopped at the logged step it was found at: well within two logged steps of the onset.
    assert onset <= result.last_step <= onset + 2 * lt.EVERY
    assert result.last_step < lt.STEPS - 1
    assert f"Training was stopped at step {onset}" in owner.stop_message
    assert f"[critical] nonfinite from step {onset}" in owner.stop_message


def _assert_routes_show_stop(client, run, owner):
    summary = {s["run"]: s for s in client.ok("/runs")["runs"]}[run]
    f = owner.stopped_by
    assert summary["stopped"] == {"step": f.first_step, "message": owner.stop_message}
    # The stop record is not a run-level scalar of its own.
    assert metadata.STOP_TAG not in [t for tags in summary["scalars"].values() for t in tags]
    tab = client.ok("/findings", run=run)["findings"]
    same = [t for t in tab if (t["kind"], t["role"], t["first_step"], t["layers"]) == (f.kind, f.role, f.first_step,
                                                                                       f.layers)]
    assert same and same[0]["severity"] == "critical", tab


def test_torch_stop_on_critical_stops_at_the_onset(torch_stopped):
    _, result = torch_stopped
    assert result.onset == ONSET  # from the raw gradients
    assert result.owner.should_stop
    _assert_stopped_at_onset(result, result.onset)
    assert result.error is None  # raise_on_stop was not asked for


def test_torch_stop_is_in_the_run_the_tab_reads(torch_stopped, loader_client):
    logdir, result = torch_stopped
    _assert_routes_show_stop(loader_client(logdir), "run", result.owner)


def test_report_json_says_why_training_stopped(torch_stopped, capsys):
    from gradhealth_plugin import cli

    logdir, result = torch_stopped
    assert cli.main(["report", str(logdir), "--format", "json"]) == 0
    run, = json.loads(capsys.readouterr().out)["runs"]
    assert run["stopped"] == {"step": ONSET, "message": result.owner.stop_message}


def test_report_text_says_why_training_stopped(torch_stopped, torch_healthy, capsys):
    from gradhealth_plugin import cli

    logdir, result = torch_stopped
    cli.main(["report", str(logdir)])
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("  stopped: ")] == [f"  stopped: {result.owner.stop_message}"]
    healthy, _ = torch_healthy
    assert cli.main(["report", str(healthy)]) == 0
    assert "stopped" not in capsys.readouterr().out


def test_torch_raise_on_stop_raises_from_the_optimizer_step(tmp_path):
    result = lt.train_torch(str(tmp_path / "run"), diverge_at=DIVERGE_AT, stop_on="critical", raise_on_stop=True)
    assert result.error is not None and result.error.finding is result.owner.stopped_by
    assert result.last_step == result.onset == ONSET
    assert str(result.error) == result.owner.stop_message


def test_torch_raise_on_stop_without_optimizer_raises_at_the_next_forward(tmp_path):
    # Without an optimizer a logged step's weights wait for their update: the step is judged,
    # and the exception raised, at the next forward pass.
    result = lt.train_torch(str(tmp_path / "run"), diverge_at=DIVERGE_AT, stop_on="critical", raise_on_stop=True,
                            with_optimizer=False)
    assert result.error is not None
    assert result.owner.stopped_by.first_step == result.onset == ONSET
    assert result.last_step == ONSET + 1


def test_torch_consecutive_steps_wait_for_the_finding_to_hold(tmp_path):
    alert = alerts.Alert("critical", kinds=["nonfinite"], consecutive=3)
    result = lt.train_torch(str(tmp_path / "run"), diverge_at=DIVERGE_AT, stop_on=alert)
    assert result.owner.stopped_by.first_step == ONSET
    assert result.last_step == ONSET + 2 * lt.EVERY
    assert "(3 consecutive logged steps)" in result.owner.stop_message


def test_torch_healthy_training_runs_to_the_end(torch_healthy, plugin_client):
    logdir, result = torch_healthy
    assert result.last_step == lt.STEPS - 1
    assert not result.owner.should_stop and result.owner.stopped_by is None
    assert result.owner.errors == 0
    assert plugin_client(logdir).ok("/runs")["runs"][0]["stopped"] is None


def test_keras_stop_on_critical_stops_fit_at_the_onset(keras_stopped):
    _, result = keras_stopped
    _assert_stopped_at_onset(result, ONSET)
    assert result.owner.errors == 0


def test_keras_stop_is_in_the_run_the_tab_reads(keras_stopped, loader_client):
    logdir, result = keras_stopped
    _assert_routes_show_stop(loader_client(logdir), "train", result.owner)


def test_keras_healthy_training_runs_to_the_end(tmp_path):
    result = lt.train_keras(str(tmp_path), stop_on="warn")
    assert result.last_step == lt.STEPS - 1
    assert result.owner.stopped_by is None and result.owner.errors == 0


@pytest.fixture(scope="module")
def tf_stopped(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("tf_stop")
    return logdir, lt.train_tf(str(logdir / "run"), diverge_at=DIVERGE_AT, stop_on="critical")


def test_tf_custom_loop_stop_on_critical_stops_at_the_onset(tf_stopped):
    _, result = tf_stopped
    assert result.onset == ONSET  # from the raw gradients
    assert result.owner.should_stop
    _assert_stopped_at_onset(result, result.onset)
    assert result.owner.errors == 0


def test_tf_custom_loop_stop_is_in_the_run_the_tab_reads(tf_stopped, loader_client):
    logdir, result = tf_stopped
    _assert_routes_show_stop(loader_client(logdir), "run", result.owner)


def test_tf_custom_loop_healthy_training_runs_to_the_end(tmp_path):
    result = lt.train_tf(str(tmp_path / "run"), stop_on="warn")
    assert result.last_step == lt.STEPS - 1
    assert not result.owner.should_stop and result.owner.stopped_by is None and result.owner.errors == 0


def test_stop_on_is_never_info_and_names_known_kinds(tmp_path):
    from torch import nn

    from gradhealth_plugin.keras import GradientHealthCallback
    from gradhealth_plugin.tf import GradientHealthLogger
    from gradhealth_plugin.torch import watch

    with pytest.raises(ValueError, match="never acted on"):
        watch(nn.Linear(2, 2), str(tmp_path), stop_on="info")
    with pytest.raises(ValueError, match="never acted on"):
        GradientHealthCallback(str(tmp_path), stop_on="info")
    with pytest.raises(ValueError, match="never acted on"):
        GradientHealthLogger(str(tmp_path), stop_on="info")
    with pytest.raises(ValueError, match="unknown finding kind"):
        alerts.Alert("warn", kinds=["exploding"])
    with pytest.raises(ValueError, match="positive integer"):
        alerts.Alert("warn", consecutive=0)


def _from_event_file(logdir, run):
    from gradhealth_plugin import cli

    analyses, *_ = cli._analyze(str(logdir), run, True, None)
    (rd, _), = analyses
    return rd


@pytest.mark.parametrize("which", ["torch_healthy", "torch_stopped"])
def test_live_run_builds_the_run_the_reader_builds(which, request):
    # A run judged in process: its tables are those the reading side makes from
    # the event file, and the detectors find the same on both.
    logdir, result = request.getfixturevalue(which)
    mine = result.owner._stop.live.run_data()
    read = _from_event_file(logdir, "run")
    rows = {(layer.name, role): r.table for layer in read.layers for role, r in layer.roles.items()}
    assert {(layer.name, role) for layer in mine.layers for role in layer.roles} == set(rows)
    assert [layer.name for layer in mine.layers] == [layer.name for layer in read.layers]
    for layer in mine.layers:
        assert layer.kind == read.layer(layer.name).kind
        for role, r in layer.roles.items():
            theirs = rows[(layer.name, role)]
            np.testing.assert_array_equal(r.table.steps, theirs.steps)
            assert set(r.table.values) == set(theirs.values)
            for name in r.table.values:
                np.testing.assert_array_equal(r.table.values[name], theirs.values[name], err_msg=name)
                np.testing.assert_array_equal(r.table.quality[name], theirs.quality[name], err_msg=name)
    alert = alerts.Alert("warn")
    key = lambda fs: sorted((f.kind, f.severity, f.role, f.first_step, f.last_step, tuple(f.layers)) for f in fs)
    limits = result.owner._stop.live._limits
    found = key(f for f in findings.find(mine, limits, alert.detectors()) if alert.wants(f))
    assert found == key(f for f in findings.find(read, limits) if alert.wants(f))
    assert bool(found) == (which == "torch_stopped")


def _gradient_rows(run, step, scale):
    for i in range(3):
        g = np.random.default_rng(step * 10 + i).normal(0, scale, (8, 8))
        run.add(step, "gradient", f"fc{i}.weight", stats_numpy(g), position=i, shape=(8, 8))


def test_every_gradient_vanishing_stops_on_critical():
    # Vanishing gradients are a warning that turns critical when every layer's gradients vanish:
    # stop_on="critical" must judge them too.
    run = live.LiveRun(alerts.Alert("critical"), "run")
    for step in range(0, 50, 5):
        _gradient_rows(run, step, 1e-2 if step < 20 else 1e-9)
        match = run.judge()
        if match is not None:
            break
    assert match is not None and match.finding.kind == "vanishing_gradients"
    assert match.finding.severity == "critical" and match.finding.first_step == 20


def test_history_keeps_the_first_and_the_latest_logged_steps():
    run = live.LiveRun(alerts.Alert("critical"), "run")
    every = 5
    total = live.HISTORY * 3
    for k in range(total):
        _gradient_rows(run, k * every, 1e-2)
        run.judge()
    steps = run.run_data().layers[0].roles["gradient"].table.steps
    assert steps[0] == 0 and steps[-1] == (total - 1) * every
    assert live.HISTORY // 2 <= len(steps) <= live.HISTORY + 1
    assert np.all(np.diff(steps[1:]) == every)  # the latest, without gaps
    # A late explosion is still found, after hundreds of logged steps.
    run.add(total * every, "gradient", "fc0.weight", stats_numpy(np.full((8, 8), 1e5)), position=0, shape=(8, 8))
    match = run.judge()
    assert match is not None and match.finding.kind == "exploding_gradients"
    assert match.finding.first_step == total * every
