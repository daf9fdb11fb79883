"""The ``gradhealth`` command line on logdirs written with TF2 ``tf.summary``.

Logdirs (written once per session):

* ``main``: runs ``healthy``, ``broken/train`` (max |g| > 1e3 from step 30,
  NaN loss from step 40), ``warn_only`` (weight std growing 5x: warn, nothing
  critical) and ``periodic`` (a grad-norm scalar logged every step with a
  spike every 50 steps, histograms every 50 steps: a logging artefact).
* ``long``: one run with 600 histogram steps of a tiny tensor.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gradhealth_plugin import cli
from gradhealth_plugin.analysis import limits

FINDING_KEYS = {"run", "kind", "severity", "layers", "first_step", "last_step", "message", "advice", "evidence"}
RUNS = {"healthy", "broken/train", "warn_only", "periodic"}
STEPS = 60


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


def _write(path, steps, histograms, scalars):
    """Writes `histograms(step)` / `scalars(step)` (dicts tag -> value) at each step, with tf.summary."""
    tf = _tf()

    # Traced once per tag: an eager histogram op costs ~20 ms, a traced one ~2 ms.
    @tf.function(reduce_retracing=True)
    def histogram(tag, value, step):
        tf.summary.histogram(tag, value, step=step)

    path.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(path))
    with writer.as_default():
        for step in steps:
            for tag, value in histograms(step).items():
                histogram(tag, tf.constant(value, tf.float32), tf.constant(step, tf.int64))
            for tag, value in scalars(step).items():
                tf.summary.scalar(tag, value, step=step)
    writer.close()


def _mlp_run(path, seed, grad_scale=lambda step: 1.0, weight_scale=lambda step: 1.0, loss_nan_from=None):
    """Three dense kernels: gradients (mean |g| ~ 1e-2, slowly decaying, noisy) and weights (std 0.1)."""
    rng = np.random.default_rng(seed)
    base_w = [rng.normal(0.0, 0.1, (20, 20)).astype(np.float32) for _ in range(3)]
    noise = np.exp(rng.normal(0.0, 0.2, (STEPS, 3)))

    def hists(step):
        out = {}
        for i in range(3):
            decay = 1.0 - 0.5 * step / STEPS
            g = rng.normal(0.0, 1e-2 * decay * noise[step, i], (20, 20)) * grad_scale(step)
            out[f"gradients/dense_{i}/kernel"] = g.astype(np.float32)
            # Trained weights move a little every step (identical ones would be a frozen layer).
            out[f"weights/dense_{i}/kernel"] = base_w[i] * weight_scale(step) * (1 + 1e-3 * step / STEPS)
        return out

    def scalars(step):
        loss = 2.0 * np.exp(-step / 40.0)
        if loss_nan_from is not None and step >= loss_nan_from:
            loss = float("nan")
        return {"loss": loss}

    _write(path, range(STEPS), hists, scalars)


def _periodic_run(path, n=450, period=50):
    """A global grad-norm scalar every step (10% noise, 5x spikes every `period`), histograms every `period`."""
    rng = np.random.default_rng(7)
    norm = np.exp(rng.normal(0.0, 0.1, n))
    norm[(np.arange(n) % period == 0) & (np.arange(n) > 0)] *= 5.0
    g = rng.normal(0.0, 1e-2, (20, 20)).astype(np.float32)
    w = rng.normal(0.0, 0.1, (20, 20)).astype(np.float32)

    def hists(step):
        moved = w * np.float32(1 + 1e-3 * step / n)  # trained weights move a little
        return {"gradients/dense/kernel": g, "weights/dense/kernel": moved} if step % period == 0 else {}

    _write(path, range(n), hists, lambda step: {"global_grad_norm": float(norm[step]), "loss": 1.0 / (1 + step)})


@pytest.fixture(scope="session")
def main_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_main")
    _mlp_run(root / "healthy", 0)
    _mlp_run(root / "broken" / "train", 1, grad_scale=lambda s: 1e6 if s >= 30 else 1.0, loss_nan_from=40)
    _mlp_run(root / "warn_only", 2, weight_scale=lambda s: 5.0 if s >= 30 else 1.0)
    _periodic_run(root / "periodic")
    return root


@pytest.fixture(scope="session")
def long_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_long")
    rng = np.random.default_rng(3)
    g = rng.normal(0.0, 1e-2, 8).astype(np.float32)
    _write(root / "run", range(600), lambda step: {"gradients/dense/kernel": g * (1 + 0.1 * np.sin(step))},
           lambda step: {})
    return root


@pytest.fixture()
def run_cli(capsys):
    """cli.main in-process: (exit code, stdout, stderr)."""

    def call(*argv):
        code = cli.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def _report(run_cli, *argv):
    code, out, err = run_cli("report", "--format", "json", *argv)
    assert code == 0, err
    return json.loads(out)


def _by_run(payload, run):
    return [f for f in payload["findings"] if f["run"] == run]


def _kinds(findings, severity=None):
    return {f["kind"] for f in findings if severity is None or f["severity"] == severity}


# --- report ----------------------------------------------------------------------------------------

def test_report_json_shape(main_logdir, run_cli):
    payload = _report(run_cli, main_logdir)
    assert set(payload) == {"runs", "findings", "config_problems"}
    assert payload["config_problems"] == []
    assert {r["run"] for r in payload["runs"]} == RUNS  # relative to the logdir, nested runs with "/"
    for r in payload["runs"]:
        assert not os.path.isabs(r["run"])
    assert payload["findings"]
    for f in payload["findings"]:
        assert FINDING_KEYS <= set(f), f
        assert f["run"] in RUNS
        assert f["severity"] in ("info", "warn", "critical")
        assert isinstance(f["layers"], list) and f["layers"]
        assert f["first_step"] <= f["last_step"]
        assert f["message"] and f["advice"]
        assert {"value", "threshold", "step"} <= set(f["evidence"])
        if f["kind"] == "periodic_spikes":
            assert "period" in f and "artefact" in f
        else:
            assert "period" not in f and "artefact" not in f


def test_report_json_layers_and_steps(main_logdir, run_cli):
    payload = _report(run_cli, main_logdir)
    healthy = next(r for r in payload["runs"] if r["run"] == "healthy")
    assert healthy["layers"] == ["dense_0/kernel", "dense_1/kernel", "dense_2/kernel"]
    assert healthy["roles"] == ["gradient", "weight"]
    assert healthy["steps_kept"] == STEPS and healthy["last_step"] == STEPS - 1


def test_report_healthy_run_has_no_warning(main_logdir, run_cli):
    found = _by_run(_report(run_cli, main_logdir), "healthy")
    assert {f["severity"] for f in found} <= {"info"}, found


def test_report_broken_run(main_logdir, run_cli):
    found = _by_run(_report(run_cli, main_logdir), "broken/train")
    exploding = [f for f in found if f["kind"] == "exploding_gradients"]
    nan = [f for f in found if f["kind"] == "nonfinite"]
    assert len(exploding) == 1 and len(nan) == 1
    ex, nf = exploding[0], nan[0]
    assert ex["severity"] == "critical" and ex["first_step"] == 30
    assert sorted(ex["layers"]) == ["dense_0/kernel", "dense_1/kernel", "dense_2/kernel"]
    assert ex["evidence"]["value"] > ex["evidence"]["threshold"] == 1e3
    assert nf["layers"] == ["loss"] and nf["first_step"] == 40 and nf["severity"] == "critical"
    assert ex["cause"] == nf["cause"] == "learning_rate_too_high"
    assert found[0]["severity"] == "critical"  # most severe first


def test_report_warn_only_run(main_logdir, run_cli):
    found = _by_run(_report(run_cli, main_logdir), "warn_only")
    # The weights jump 5x in one step: they grow, and their norm alone proves the update too large.
    assert _kinds(found, "warn") == {"weight_growth", "update_ratio"}
    assert _kinds(found, "critical") == set()
    growth = next(f for f in found if f["kind"] == "weight_growth")
    assert growth["first_step"] == 30 and growth["evidence"]["value"] == pytest.approx(5.0, rel=0.05)
    ratio = next(f for f in found if f["kind"] == "update_ratio")
    assert (ratio["first_step"], ratio["last_step"]) == (30, 30) and ratio["evidence"]["quality"] == "lower_bound"


def test_report_periodic_spikes_are_a_logging_artefact(main_logdir, run_cli):
    found = _by_run(_report(run_cli, main_logdir), "periodic")
    periodic = [f for f in found if f["kind"] == "periodic_spikes"]
    assert len(periodic) == 1
    f = periodic[0]
    assert f["period"] == 50 and f["artefact"] is True and f["severity"] == "info"
    assert f["layers"] == ["global_grad_norm"]
    assert {g["severity"] for g in found} <= {"info"}


def test_report_single_run_logdir_names_it_dot(main_logdir, run_cli):
    payload = _report(run_cli, main_logdir / "healthy")
    assert [r["run"] for r in payload["runs"]] == ["."]


def test_report_run_filter(main_logdir, run_cli):
    payload = _report(run_cli, main_logdir, "--run", "broken/train")
    assert [r["run"] for r in payload["runs"]] == ["broken/train"]
    assert {f["run"] for f in payload["findings"]} == {"broken/train"}


def test_report_text(main_logdir, run_cli):
    code, out, err = run_cli("report", main_logdir)
    assert code == 0, err
    for run in RUNS:
        assert f"run {run}:" in out
    lines = out.splitlines()
    healthy = next(line for line in lines if line.startswith("run healthy:"))
    broken = next(line for line in lines if line.startswith("run broken/train:"))
    warn = next(line for line in lines if line.startswith("run warn_only:"))
    assert "healthy" in healthy.split(":", 1)[1] and "CRITICAL" not in healthy and "WARN" not in healthy
    assert "CRITICAL" in broken and "WARN" in warn
    assert "[critical] exploding_gradients:" in out and "[critical] nonfinite:" in out
    assert "advice:" in out
    assert "{" not in out  # text, not JSON


def test_report_counts_tensors_per_role_as_the_tab_shows_them(tmp_path, run_cli):
    """Two gradients, three weights and one activation: per role the rows of its heatmap, not one count of
    layers over all roles (five layers here)."""
    rng = np.random.default_rng(5)
    w = [rng.normal(0.0, 0.1, (8, 8)).astype(np.float32) for _ in range(3)]

    def hists(step):
        out = {f"weights/dense_{i}/kernel": w[i] * (1 + 1e-3 * step) for i in range(3)}
        out.update({f"gradients/dense_{i}/kernel": rng.normal(0.0, 1e-2, (8, 8)).astype(np.float32) for i in range(2)})
        out["activations/relu_0"] = np.maximum(rng.normal(0.0, 1.0, 64), 0.0).astype(np.float32)
        return out

    _write(tmp_path / "run", range(12), hists, lambda step: {})
    code, out, err = run_cli("report", tmp_path)
    assert code == 0, err
    (head,) = [line for line in out.splitlines() if line.startswith("run run:")]
    assert " - 2 gradient, 3 weight, 1 activation tensors, 12 steps kept, " in head, head


# --- check -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("run,fail_on,code", [
    ("healthy", "warn", 0), ("healthy", "critical", 0),
    ("broken/train", "warn", 1), ("broken/train", "critical", 1),
    ("warn_only", "warn", 1), ("warn_only", "critical", 0),
    ("periodic", "warn", 0),
])
def test_check_exit_codes(main_logdir, run_cli, run, fail_on, code):
    got, out, err = run_cli("check", main_logdir, "--run", run, "--fail-on", fail_on)
    assert got == code, (out, err)
    if code == 1:
        assert f"{run}: [" in out
        assert err.strip().startswith("gradhealth:")
    else:
        assert "nothing at" in out


def test_check_default_fails_on_warn(main_logdir, run_cli):
    assert run_cli("check", main_logdir, "--run", "warn_only")[0] == 1
    assert run_cli("check", main_logdir / "healthy")[0] == 0


def test_check_whole_logdir_fails_if_any_run_does(main_logdir, run_cli):
    code, out, _ = run_cli("check", main_logdir, "--fail-on", "critical")
    assert code == 1
    assert "broken/train: [critical]" in out and "warn_only" not in out


# --- one run read alone ------------------------------------------------------------------------------

@pytest.fixture()
def reads(monkeypatch):
    """What the CLI reads: the runs it loads into TensorBoard's multiplexer and the event files it opens
    (to load them or to look into them), each file by its real path."""
    from tensorboard.backend.event_processing import event_file_loader, plugin_event_multiplexer

    seen = {"runs": [], "files": []}
    add_run, open_file = plugin_event_multiplexer.EventMultiplexer.AddRun, event_file_loader.RawEventFileLoader.__init__

    def spy_add_run(self, path, name=None):
        seen["runs"].append(name)
        return add_run(self, path, name)

    def spy_open(self, file_path, *args, **kwargs):
        seen["files"].append(os.path.realpath(file_path))
        return open_file(self, file_path, *args, **kwargs)

    monkeypatch.setattr(plugin_event_multiplexer.EventMultiplexer, "AddRun", spy_add_run)
    monkeypatch.setattr(event_file_loader.RawEventFileLoader, "__init__", spy_open)
    return seen


def _under(files, logdir, run):
    folder = os.path.realpath(os.path.join(logdir, run)) + os.sep
    return [f for f in files if f.startswith(folder) and os.sep not in f[len(folder):]]


@pytest.mark.parametrize("command", ["report", "check"])
def test_one_run_asked_for_is_the_only_one_read(main_logdir, run_cli, reads, command):
    code, out, err = run_cli(command, main_logdir, "--run", "broken/train",
                             *(["--format", "json"] if command == "report" else []))
    assert code == (0 if command == "report" else 1), err
    assert reads["runs"] == ["broken/train"]
    assert reads["files"] and reads["files"] == _under(reads["files"], main_logdir, "broken/train")
    if command == "report":
        assert {f["run"] for f in json.loads(out)["findings"]} == {"broken/train"}
    else:
        assert out.startswith("broken/train: [critical]"), out


def test_an_unknown_run_is_said_before_any_event_file_is_read(main_logdir, run_cli, reads):
    line = _one_line_error(*run_cli("report", main_logdir, "--run", "nope"))
    assert "nope" in line and all(run in line for run in RUNS)
    assert reads == {"runs": [], "files": []}


def test_a_validation_half_names_its_train_run_which_is_looked_into_not_loaded(keras_halves_logdir, run_cli,
                                                                                reads):
    payload = _report(run_cli, keras_halves_logdir, "--run", "sgd/validation")
    assert payload["runs"][0]["layers_in"] == "sgd/train"
    assert reads["runs"] == ["sgd/validation"]
    # The train run is read up to its first histogram, once; the other fit not at all.
    assert not [f for f in reads["files"] if "adam" in os.path.relpath(f, os.path.realpath(keras_halves_logdir))]
    assert len(_under(reads["files"], keras_halves_logdir, "sgd/train")) == 1


def test_a_rank_is_read_with_its_trainings_other_ranks_only(ranks_logdir, run_cli, reads):
    from tests import ranks_training

    payload = _report(run_cli, ranks_logdir, "--run", "skipped/rank1")
    assert sorted(reads["runs"]) == ["skipped/rank0", "skipped/rank1"]
    # Judged across the ranks as in the whole logdir's report.
    assert [f["layers"] for f in payload["findings"] if f["kind"] == "rank_divergence"] == [[ranks_training.SKIPPED]]


def test_one_runs_sweep_line_reads_the_run_its_hyperparameters_are_in(run_cli, reads):
    from tests.conftest import REPO

    sweep = REPO / "demo" / "runs" / "sweep"
    payload = _report(run_cli, sweep, "--run", "lr_1_sgd/train", "--by-hparams")
    assert sorted(reads["runs"]) == ["lr_1_sgd", "lr_1_sgd/train"]
    (line,) = payload["sweep"]["runs"]
    assert line["hparams"] == {"learning_rate": 1.0, "optimizer": "sgd"}
    assert line["hparams_from"] == {"source": "parent", "run": "lr_1_sgd"}


# --- usage errors ----------------------------------------------------------------------------------

def _one_line_error(code, out, err):
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gradhealth")
    return lines[0]


def test_missing_logdir(tmp_path, run_cli):
    line = _one_line_error(*run_cli("report", tmp_path / "nope"))
    assert "nope" in line


def test_logdir_is_a_file(tmp_path, run_cli):
    path = tmp_path / "events.txt"
    path.write_text("x")
    _one_line_error(*run_cli("check", path))


def test_empty_logdir(tmp_path, run_cli):
    line = _one_line_error(*run_cli("check", tmp_path))
    assert "no TensorBoard event files" in line


def test_unknown_run(main_logdir, run_cli):
    line = _one_line_error(*run_cli("report", main_logdir, "--run", "nope"))
    assert "nope" in line and "healthy" in line  # names the runs there are


@pytest.mark.parametrize("argv", [
    [],
    ["frobnicate"],
    ["report"],
    ["report", ".", "--format", "xml"],
    ["check", ".", "--fail-on", "info"],
    ["check", ".", "--bogus"],
])
def test_bad_arguments(argv, run_cli):
    line = _one_line_error(*run_cli(*argv))
    assert "usage:" not in line


@pytest.mark.parametrize("content", ['{"thresholds": {"spike_window": 5}', '["spike_window"]'])
def test_config_that_is_not_a_json_object(main_logdir, tmp_path, run_cli, content):
    config = tmp_path / "gradhealth.json"
    config.write_text(content)
    line = _one_line_error(*run_cli("check", main_logdir / "healthy", "--config", config))
    assert str(config) in line


def test_config_problems_are_said_and_the_rest_applies(main_logdir, tmp_path, run_cli):
    config = tmp_path / "gradhealth.json"
    config.write_text('{"thresholds": {"no_such_threshold": 1, "spike_window": NaN, "vanishing_steps": 1e400,'
                      ' "exploding_max_abs": 0.01}, "tag_rules": [{"pattern": "^(?P<layer>zz)?gradients/",'
                      ' "role": "weight"}]}')
    code, out, err = run_cli("check", main_logdir / "healthy", "--config", config)
    assert code == 1  # the 0.01 limit applies: the healthy run's max |g| of about 0.05 explodes
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert [line for line in lines if str(config) in line] == [
        f"gradhealth: {config}: rule 0: bad pattern '^(?P<layer>zz)?gradients/': its layer group is optional, "
        "so a tag it matches may get no row name; make the group required; rule ignored",
        f"gradhealth: {config}: unknown threshold \"no_such_threshold\"; ignored (known: "
        + ", ".join(sorted(limits.DEFAULTS)) + ")",
        f"gradhealth: {config}: spike_window must be an integer from 3 to 1000; got NaN; using 11",
        f"gradhealth: {config}: vanishing_steps must be an integer from 1 to 1000000; got Infinity; using 5",
    ]
    payload = _report(run_cli, main_logdir / "healthy", "--config", config)
    assert len(payload["config_problems"]) == 4 and "spike_window must be" in payload["config_problems"][2]
    assert "exploding_gradients" in _kinds(payload["findings"])


def test_config_thresholds_are_honoured(main_logdir, tmp_path, run_cli):
    # The healthy run's max |g| is about 0.05: a 0.01 limit makes it explode.
    config = tmp_path / "gradhealth.json"
    config.write_text('{"thresholds": {"exploding_max_abs": 0.01}}')
    assert run_cli("check", main_logdir / "healthy", "--config", config)[0] == 1


# --- sampling --------------------------------------------------------------------------------------

def test_all_steps_reads_past_the_default_sample(long_logdir, run_cli):
    default = _report(run_cli, long_logdir)["runs"][0]
    every = _report(run_cli, long_logdir, "--all-steps")["runs"][0]
    assert default["steps_kept"] == 500  # TensorBoard's default histogram sample
    assert every["steps_kept"] == 600
    assert default["last_step"] == every["last_step"] == 599


@pytest.fixture(scope="session")
def nan_beyond_sample_logdir(tmp_path_factory):
    """3,000 steps of one layer's gradients, NaN at step 2345: a step TensorBoard's 500-step sample drops."""
    from tests.test_bad_input import event, hist_value, normal_buckets, write_run

    root = tmp_path_factory.mktemp("cli_nan_beyond_sample")
    rng = np.random.default_rng(3)
    nan = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    base = normal_buckets(rng)
    write_run(root / "long", [event(s, hist_value("gradients/dense/kernel", nan if s == 2345 else base))
                              for s in range(3000)])
    return root


def test_check_reads_every_step_by_default(nan_beyond_sample_logdir, run_cli):
    # A gate must not pass over a step it never read: the NaN is at a step the default sample drops.
    code, out, err = run_cli("check", nan_beyond_sample_logdir, "--fail-on", "critical")
    assert code == 1, (out, err)
    assert "NaN or Inf values at step 2,345" in out or "NaN or Inf values at step 2345" in out, out
    assert "sampling" not in out  # nothing was dropped, so nothing to say about it


def test_check_sampled_says_what_it_did_not_read(nan_beyond_sample_logdir, run_cli):
    code, out, err = run_cli("check", nan_beyond_sample_logdir, "--fail-on", "critical", "--sampled")
    assert code == 0, (out, err)  # the sampled read never saw step 2345 ...
    lines = [line for line in out.splitlines() if "sampling kept" in line]
    # ... and says so, in one line.
    assert lines == [lines[0]] and lines[0].startswith("long: TensorBoard's sampling kept 500 of "), out
    assert "without --sampled" in lines[0]
    assert run_cli("check", nan_beyond_sample_logdir, "--sampled", "--all-steps")[0] == 2


def test_report_says_sampling_in_one_line(nan_beyond_sample_logdir, run_cli):
    code, out, _ = run_cli("report", nan_beyond_sample_logdir)
    assert code == 0
    assert sum("sampling kept 500 of " in line for line in out.splitlines()) == 1, out
    # What was not read is not called healthy.
    assert "run long: no warnings in the 500 steps read of " in out, out


def test_runs_route_verdict_is_not_healthy_over_dropped_steps(nan_beyond_sample_logdir, main_logdir, plugin_client):
    run = plugin_client(nan_beyond_sample_logdir).ok("/runs")["runs"][0]
    assert run["sampling"] is not None and run["worst_status"] == "ok"
    assert run["verdict"].startswith("no warnings in the 500 steps read of "), run["verdict"]
    # Where every logged step was read, healthy is healthy.
    runs = {r["run"]: r for r in plugin_client(main_logdir).ok("/runs")["runs"]}
    assert runs["healthy"]["sampling"] is None and runs["healthy"]["verdict"] == "healthy"


@pytest.fixture(scope="session")
def sampled_loss_logdir(tmp_path_factory):
    """A loss at each of 3,000 steps (more than TensorBoard's 1,000 scalar samples) beside gradients
    every 100 steps (all kept): the rows are whole, the loss is not."""
    from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

    root = tmp_path_factory.mktemp("cli_sampled_loss")
    rng = np.random.default_rng(4)
    base = normal_buckets(rng)
    write_run(root / "run", [event(s, scalar_value("loss", 2.0 / (1 + s / 300)),
                                   *([hist_value("gradients/dense/kernel", base)] if s % 100 == 0 else []))
                             for s in range(3000)])
    return root


def test_a_sampled_loss_is_said_by_the_tab_and_report(sampled_loss_logdir, loader_client, run_cli):
    run = loader_client(sampled_loss_logdir).ok("/runs")["runs"][0]
    assert run["sampling"] is None  # every row step was kept ...
    sampling = run["scalars_sampling"]  # ... but not every loss point (how many the loader keeps varies)
    (kept,) = [series.pop("kept") for series in sampling["series"]]
    assert kept < 3000 and sampling["series"] == [{"tag": "loss", "logged": 3000, "logged_at_least": False}]
    assert sampling["message"] == (f"TensorBoard kept {kept:,} of 3,000 logged points of loss (random samples); "
                                   "--samples_per_plugin=scalars=0 keeps every point")
    assert sampling["kept_text"] == f"TensorBoard kept {kept:,} of 3,000 logged points of loss (random samples)"
    code, out, _ = run_cli("report", sampled_loss_logdir)
    # The command's own flag first, TensorBoard's named as TensorBoard's, as for sampled rows.
    message = "TensorBoard kept 1,000 of 3,000 logged points of loss (random samples); " \
              "--all-steps reads every point (tensorboard: --samples_per_plugin=scalars=0)"
    assert code == 0 and [line.strip() for line in out.splitlines() if "points of loss" in line] == [message], out
    assert _report(run_cli, sampled_loss_logdir)["runs"][0]["scalars_sampling"]["message"] == message
    every = _report(run_cli, sampled_loss_logdir, "--all-steps")["runs"][0]
    assert every["scalars_sampling"] is None


# --- the tab and the CLI agree ---------------------------------------------------------------------

def test_plugin_findings_route_matches_cli(main_logdir, run_cli, plugin_client):
    payload = _report(run_cli, main_logdir)
    client = plugin_client(main_logdir)
    for run in RUNS:
        route = client.ok("/findings", run=run)
        assert route["run"] == run
        # Through JSON both ways: the route and the CLI serialise the same findings.
        assert json.loads(json.dumps(route["findings"])) == _by_run(payload, run), run


# --- the installed console script ------------------------------------------------------------------

def _console():
    script = shutil.which("gradhealth", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "gradhealth_plugin.cli"]


def _subprocess(*argv, prefix=(), timeout=300):
    env = dict(os.environ)
    for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS"):  # the CLI must quiet TensorFlow itself
        env.pop(name, None)
    return subprocess.run(list(prefix) + _console() + [str(a) for a in argv], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_console_script(main_logdir, run_cli):
    proc = _subprocess("report", "--format", "json", main_logdir)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == _report(run_cli, main_logdir)
    assert _subprocess("check", main_logdir, "--run", "broken/train", "--fail-on", "critical").returncode == 1


@pytest.mark.parametrize("argv", [["check", "{tmp}/nope"], ["check", "{tmp}"], ["report", "{tmp}", "--fail-on", "x"]])
def test_console_script_usage_errors_are_one_line(tmp_path, argv):
    # A real process: nothing TensorFlow prints on import may bury the reason.
    proc = _subprocess(*[a.format(tmp=tmp_path) for a in argv])
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("gradhealth: ")


def test_a_weights_only_run_is_not_called_healthy(keras_fit_logdir, run_cli):
    # Keras' callback logs weights only: nothing in those logs can show exploding or
    # vanishing gradients, so "healthy" would claim what was never looked at.
    code, out, _ = run_cli("report", keras_fit_logdir)
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("run train:"))
    assert "healthy" not in line and "no gradients logged" in line
    assert "Exploding gradients" in out and "Vanishing gradients" in out
    payload = _report(run_cli, keras_fit_logdir)
    train = next(r for r in payload["runs"] if r["run"] == "train")
    assert {"exploding_gradients", "vanishing_gradients", "depth_vanishing"} <= set(train["not_judged"])
    assert "weight_growth" not in train["not_judged"]
    assert run_cli("check", keras_fit_logdir)[0] == 0  # check keeps its exit codes


def test_runs_of_scalars_only_are_their_header_alone_at_the_end(keras_fit_logdir, run_cli):
    # Keras' validation folder logs scalars only: a paragraph of rules not judged for each such run says
    # nothing the first did not; each is its header alone, after the runs with layers, naming the run beside
    # it that holds its layers (a fit's log_dir given as the logdir: its halves are the top-level runs).
    code, out, _ = run_cli("report", keras_fit_logdir)
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[-1].startswith("run validation: scalars only: the validation half of the logdir; its layers are "
                                "in train - no layer steps, scalars to "), out
    assert sum("Not judged" in line for line in lines) == 1  # the train run's own note stays
    validation = next(r for r in _report(run_cli, keras_fit_logdir)["runs"] if r["run"] == "validation")
    assert validation["layers"] == [] and validation["coverage_note"]  # the JSON report keeps each run whole


def _line_word(word):
    # The text report spells a severity in capitals, the word the tab's badge shows in lower case.
    return word.upper() if word in ("warn", "critical") else word


@pytest.mark.parametrize("which", ["keras_halves_logdir", "tensorboardx_samples_logdir"])
def test_the_report_says_the_word_the_runs_route_says(which, request, run_cli, plugin_client):
    # One function words a run for the tab's badge and for the report: they can never disagree.
    logdir = request.getfixturevalue(which)
    route = {r["run"]: r for r in plugin_client(logdir).ok("/runs")["runs"]}
    payload = _report(run_cli, logdir)
    assert {r["run"]: r["verdict_word"] for r in payload["runs"]} == {
        name: r["verdict_word"] for name, r in route.items()}
    assert {r["run"]: r["verdict"] for r in payload["runs"]} == {name: r["verdict"] for name, r in route.items()}
    _, out, _ = run_cli("report", logdir)
    for name, r in route.items():
        (line,) = [line for line in out.splitlines() if line.startswith(f"run {name}: ")]
        word, notes = r["verdict_word"].partition(" (notes only)")[:2]
        # The word leads; where it has notes, the reasons come between it and "(notes only)".
        assert line.startswith(f"run {name}: {_line_word(word)}") and (notes in line.split(" - ")[0]), line


# A run's header: "run NAME: VERDICT - what it holds", its steps last.
_HEADER = re.compile(r"^run (\S+): (.+) - (.*(?:steps kept|scalars to).*)$")


@pytest.mark.parametrize("which", ["keras_halves_logdir", "keras_sigmoid_at_chance_logdir"])
def test_both_halves_of_a_keras_fit_have_headers_of_one_format(which, request, run_cli):
    # Train and validation, with a finding or without: every run a header of one format, its verdict the
    # route's (a validation half's says where its layers are), then what it holds.
    logdir = request.getfixturevalue(which)
    payload = _report(run_cli, logdir)
    _, out, _ = run_cli("report", logdir)
    headers = {m.group(1): m for m in map(_HEADER.match, out.splitlines()) if m}
    assert set(headers) == {r["run"] for r in payload["runs"]}, out
    for r in payload["runs"]:
        verdict = r["verdict"] if r["verdict_word"] not in ("warn", "critical") else r["verdict_word"].upper()
        assert headers[r["run"]].group(2) == verdict, (r["run"], out)
        # A half of scalars only holds no layer step: no "0 layers (no roles), 0 steps kept".
        assert ("steps kept" in headers[r["run"]].group(3)) == bool(r["layers"]), headers[r["run"]].group(0)
    assert "0 layers" not in out and "(no roles)" not in out


def test_a_validation_half_is_pointed_to_its_train_run_not_told_to_log_layers(keras_halves_logdir, run_cli):
    payload = _report(run_cli, keras_halves_logdir, "--run", "sgd/validation")
    (half,) = payload["runs"]
    # Named from the listing of every run: the train run need not be reported beside it.
    assert half["layers_in"] == "sgd/train" and half["verdict_word"] == "scalars only"
    assert "Log gradients" not in half["coverage_note"]
    code, out, _ = run_cli("report", keras_halves_logdir)
    assert code == 0
    last = {fit: _report(run_cli, keras_halves_logdir, "--run", f"{fit}/validation")["runs"][0]["last_step"]
            for fit in ("adam", "sgd")}
    assert out.strip().splitlines()[-2:] == [
        f"run {fit}/validation: scalars only: the validation half of {fit}; its layers are in {fit}/train - "
        f"no layer steps, scalars to {last[fit]:,}" for fit in ("adam", "sgd")], out
    assert "Log gradients" in out  # the train runs' own note, on weights without gradients, stays


def test_a_run_no_rule_could_judge_says_not_judged(tensorboardx_samples_logdir, run_cli):
    code, out, _ = run_cli("report", tensorboardx_samples_logdir)
    assert code == 0
    # Two histograms of unknown role were logged: none of a known role, and no loss.
    assert out.startswith("run .: not judged (no gradient, weight, activation or loss recognised; 2 histogram tags"
                          " of unknown role: a tag rule in gradhealth.json sets a tag's role) - "), out
    assert "no warnings" not in out


def test_a_run_whose_gradients_are_not_recognised_is_not_said_to_log_none(torch_unnamed_gradients_logdir, run_cli):
    # Gradients logged as ``backward/<module>/<i>``, words nothing recognises: they are among the 9 tags of
    # unknown role, and the report says so, with how to set their role, in its text and its JSON.
    verdict = ("no warnings (gradients not recognised among 9 histogram tags of unknown role: exploding and"
               " vanishing gradients not judged; a tag rule in gradhealth.json sets a tag's role)")
    code, out, _ = run_cli("report", torch_unnamed_gradients_logdir)
    assert code == 0
    assert out.startswith(f"run .: {verdict} - "), out
    assert "no gradients logged" not in out
    (run,) = _report(run_cli, torch_unnamed_gradients_logdir)["runs"]
    assert run["verdict_word"] == "no warnings" and run["verdict"] == verdict


def test_a_run_with_gradients_judges_every_gradient_kind(main_logdir, run_cli):
    payload = _report(run_cli, main_logdir / "healthy")
    healthy = next(r for r in payload["runs"] if r["run"] == ".")
    assert not {"exploding_gradients", "vanishing_gradients", "depth_vanishing"} & set(healthy["not_judged"])


# --- what cannot be read ---------------------------------------------------------------------------

def _small_run(run_dir):
    """A run of 10 steps written with TensorBoard's record writer (no TensorFlow needed)."""
    from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

    rng = np.random.default_rng(0)
    return write_run(run_dir, [event(s, hist_value("gradients/fc1", normal_buckets(rng)),
                                     scalar_value("loss", 1.0 / (s + 1))) for s in range(10)])


def _odd_counts_run(run_dir):
    """A run of 10 steps: a good gradient, one whose counts are negative at every step, and one whose
    bucket edges decrease at steps 4 and 7 (written with TensorBoard's record writer)."""
    from tests.test_bad_input import event, hist_value, normal_buckets, write_run

    rng = np.random.default_rng(1)
    negative = normal_buckets(rng) * np.array([1.0, 1.0, -1.0])

    def some(s):
        buckets = normal_buckets(rng)
        return buckets[:, [1, 0, 2]] if s in (4, 7) else buckets

    return write_run(run_dir, [event(s, hist_value("gradients/fc1", normal_buckets(rng)),
                                     hist_value("gradients/fc2", negative), hist_value("gradients/fc3", some(s)))
                               for s in range(10)])


UNREADABLE_LINES = ["unreadable tag gradients/fc2: negative counts at step 0",
                    "unreadable steps of tag gradients/fc3: 2 of 10 steps read hold no histogram and are no data;"
                    " the first: bucket edges decrease at step 4"]


def test_report_and_check_say_what_cannot_be_read_a_line_per_tag(tmp_path, run_cli):
    _odd_counts_run(tmp_path / "odd")
    code, out, err = run_cli("report", tmp_path)
    assert code == 0, err
    assert [line.strip() for line in out.splitlines() if "unreadable" in line] == UNREADABLE_LINES
    payload = _report(run_cli, tmp_path)["runs"][0]
    assert payload["unreadable"] == [{"tag": "gradients/fc2", "why": "negative counts at step 0"}]
    assert payload["unreadable_steps"] == [{"tag": "gradients/fc3", "steps": 2, "of": 10, "first_step": 4,
                                            "why": "bucket edges decrease at step 4"}]
    assert payload["layers"] == ["fc1", "fc3"]
    for argv in (["check", tmp_path], ["check", tmp_path, "--sampled"]):
        code, out, err = run_cli(*argv)
        assert code in (0, 1) and "Traceback" not in err, err
        said = [line for line in out.splitlines() if "unreadable" in line]
        assert said == [f"odd: {line}" for line in UNREADABLE_LINES]


def _reports_good(out):
    assert "run good:" in out, out


def _skipped(err, *names):
    """The stderr lines saying what was skipped: one per name, each naming it."""
    lines = [line for line in err.strip().splitlines() if "skipped" in line]
    assert len(lines) == len(names), err
    for line, name in zip(lines, names):
        assert line.startswith("gradhealth: skipped") and str(name) in line, line
    assert "Traceback" not in err
    return lines


def test_a_dangling_symlink_does_not_hide_the_event_file_next_to_it(tmp_path, run_cli):
    _small_run(tmp_path / "good")
    link = tmp_path / "good" / "events.out.tfevents.0.dangling"
    link.symlink_to(tmp_path / "nowhere")
    code, out, err = run_cli("report", tmp_path)
    assert code == 0, err
    _reports_good(out)
    assert "dangling symlink" in _skipped(err, link)[0]


def test_a_file_as_a_path_component_is_a_one_line_error(tmp_path, run_cli):
    (tmp_path / "file").write_text("x")
    line = _one_line_error(*run_cli("report", tmp_path / "file" / "run"))
    assert "not a directory" in line


def test_an_unlistable_directory_is_skipped(tmp_path, run_cli, monkeypatch):
    # Tests run as root, which chmod 000 does not stop: the refusal is made at the boundary the CLI
    # reads directories through (os.scandir) instead. tests below use a process without root's
    # read override to do the same for real.
    _small_run(tmp_path / "good")
    _small_run(tmp_path / "secret")
    real_scandir = os.scandir

    def scandir(path="."):
        if isinstance(path, (str, os.PathLike)) and os.fspath(path) == str(tmp_path / "secret"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, out, err = run_cli("report", tmp_path)
    assert code == 0, err
    _reports_good(out)
    assert "run secret:" not in out
    assert "Permission denied" in _skipped(err, tmp_path / "secret")[0]


def test_any_failure_is_one_line_and_exit_2(main_logdir, run_cli, monkeypatch):
    from gradhealth_plugin.serving import analyzer

    def fail(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(analyzer.Analyzer, "run", fail)
    line = _one_line_error(*run_cli("check", main_logdir / "healthy"))
    assert line == "gradhealth: error: RuntimeError: boom second line"


def test_help_states_the_exit_codes(run_cli, capsys):
    for argv in (["--help"], ["check", "--help"], ["report", "--help"]):
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        assert exited.value.code == 0
        out = capsys.readouterr().out
        assert "exit codes:" in out and "1  check: a finding reached --fail-on" in out and "2  an error" in out


def test_a_fifo_named_like_an_event_file_is_skipped(tmp_path):
    # A real process with a timeout: opening a FIFO without a writer blocks forever.
    _small_run(tmp_path / "good")
    fifo = tmp_path / "good" / "events.out.tfevents.1.fifo"
    os.mkfifo(fifo)
    proc = _subprocess("report", tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    _reports_good(proc.stdout)
    assert "not a regular file" in _skipped(proc.stderr, fifo)[0]


def _unprivileged():
    """argv prefix running a command as root without its power to read what it has no permission for."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0:
        return []
    if setpriv is None:
        pytest.skip("running as root without setpriv: chmod cannot make a file unreadable here")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    if subprocess.run(prefix + ["true"], capture_output=True).returncode != 0:
        pytest.skip("setpriv cannot drop root's read override here")
    return prefix


@pytest.fixture
def locked(tmp_path):
    """Paths made unreadable in the test; their permissions are given back for the cleanup."""
    paths = []
    yield paths
    for path in paths:
        path.chmod(0o755)


def test_unreadable_directory_and_file_are_skipped_for_real(tmp_path, locked):
    prefix = _unprivileged()
    _small_run(tmp_path / "good")
    _small_run(tmp_path / "secret")
    hidden = _small_run(tmp_path / "mixed")
    _small_run(tmp_path / "mixed")  # a readable file beside an unreadable one
    for path in (tmp_path / "secret", hidden):
        path.chmod(0)
        locked.append(path)
    proc = _subprocess("report", tmp_path, prefix=prefix)
    assert proc.returncode == 0, proc.stderr
    _reports_good(proc.stdout)
    assert "run mixed:" in proc.stdout and "run secret:" not in proc.stdout
    lines = _skipped(proc.stderr, hidden, tmp_path / "secret")
    assert all(line.endswith("Permission denied") for line in lines)


def test_unreadable_logdir_is_a_one_line_error_for_real(tmp_path, locked):
    prefix = _unprivileged()
    _small_run(tmp_path / "logs" / "good")
    (tmp_path / "logs").chmod(0)
    locked.append(tmp_path / "logs")
    proc = _subprocess("check", tmp_path / "logs", prefix=prefix)
    assert proc.returncode == 2
    assert proc.stdout == ""
    logdir = str(tmp_path / "logs")
    assert proc.stderr.strip().splitlines() == [f"gradhealth: cannot read logdir {logdir!r}: Permission denied"]


# --- notes that repeat, and a module called twice in forward ------------------------------------------------

def _shared_relu_net(torch):
    """A seeded MLP whose one ReLU module runs after both hidden layers (logged `relu` and `relu[1]`)."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.out = torch.nn.Linear(8, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 1)
            self.relu = torch.nn.ReLU()

        def forward(self, x):
            return self.out(self.relu(self.fc2(self.relu(self.fc1(x)))))

    torch.manual_seed(0)
    return Net()


def _shared_relu_run(run_dir, scale_at: dict, steps: int = 80) -> None:
    """A torch MLP whose one ReLU module runs after both hidden layers (logged `relu` and `relu[1]`), trained
    with SGD on one fixed batch, every step logged. `scale_at`: step -> factor its loss is multiplied by
    (the learning rate divided by the same): the gradients alone jump there, 30x, a note each time."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    model = _shared_relu_net(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, str(run_dir), optimizer=opt, every_n_steps=1)
    writer = SummaryWriter(str(run_dir))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    for step in range(steps):
        factor = scale_at.get(step, 1.0)
        for group in opt.param_groups:
            group["lr"] = 0.05 / factor
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        (loss * factor).backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
    writer.close()
    unwatch(handle)


@pytest.fixture(scope="session")
def notes_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("notes")
    _shared_relu_run(root / "notes", {23: 30.0, 41: 30.0, 66: 30.0})
    return root


def test_report_folds_notes_of_one_kind_and_role_into_one_line_after_the_first(notes_logdir, run_cli):
    spikes = [f for f in _report(run_cli, notes_logdir)["findings"] if f["kind"] == "spike"]
    # The JSON keeps one finding per event.
    assert [(f["severity"], f["role"], f["first_step"]) for f in spikes] == [
        ("info", "gradient", 23), ("info", "gradient", 41), ("info", "gradient", 66)]
    code, out, _ = run_cli("report", notes_logdir)
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("  [info] spike:")]
    assert len(lines) == 2, out
    assert lines[0].endswith("at step 23"), lines[0]
    # The same six parameters spike both times: named in model order, as the findings name them.
    layers = spikes[1]["layers"]
    assert spikes[2]["layers"] == layers and len(layers) == 6, spikes
    assert lines[1] == (f"  [info] spike: 2 more like it at steps 41, 66, in `{layers[0]}`, `{layers[1]}`, "
                        f"`{layers[2]}` and {len(layers) - 3} more"), lines[1]
    # One advice for the three.
    assert out.count("advice: " + spikes[0]["advice"]) == 1, out


def _layer_spikes_run(run_dir, spikes: dict, factor: float = 1000.0, steps: int = 80, nan_at: dict = None,
                      loss_peaks: tuple = ()) -> None:
    """The MLP of `_shared_relu_run`, trained plainly, but at each step of `spikes` (step -> parameter names)
    those parameters' logged gradients are `factor` times their own: a warning spike each (a one-off jump of
    100x or more), in that layer only. The update is the usual one, so nothing else spikes after it.
    `nan_at` (step -> parameter names): one NaN in those logged gradients, the loss logged as NaN there.
    `loss_peaks`: steps whose loss is logged 50x its value (training itself unchanged)."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    model = _shared_relu_net(torch)
    params = dict(model.named_parameters())
    now = {"step": 0}
    nan_at = nan_at or {}

    def logged(g, name):
        if name in spikes.get(now["step"], ()):
            g = g * factor
        if name in nan_at.get(now["step"], ()):
            g = g.clone()
            g.view(-1)[0] = float("nan")
        return g

    for name, p in params.items():
        p.register_hook(lambda g, name=name: logged(g, name))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, str(run_dir), optimizer=opt, every_n_steps=1)

    def restore(optimizer, args, kwargs):
        # Registered after the watch's hook, so it runs once the gradients are logged.
        for name in spikes.get(now["step"], ()):
            params[name].grad = params[name].grad / factor
        for name in nan_at.get(now["step"], ()):
            params[name].grad = torch.nan_to_num(params[name].grad, nan=0.0)

    opt.register_step_pre_hook(restore)
    writer = SummaryWriter(str(run_dir))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    for step in range(steps):
        now["step"] = step
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        logged_loss = loss.item() * (50.0 if step in loss_peaks else 1.0)
        writer.add_scalar("loss", float("nan") if step in nan_at else logged_loss, step)
    writer.close()
    unwatch(handle)


# Three warning spikes of `fc2.bias` and one of `fc1.bias`, which comes first in the model.
LAYER_SPIKES = {23: ["fc2.bias"], 41: ["fc2.bias"], 55: ["fc1.bias"], 66: ["fc2.bias"]}


@pytest.fixture(scope="session")
def warn_spikes_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("warn_spikes")
    _layer_spikes_run(root / "spikes", LAYER_SPIKES)
    return root


def test_report_folds_repeated_warning_spikes_naming_each_layer_in_model_order(warn_spikes_logdir, run_cli):
    spikes = [f for f in _report(run_cli, warn_spikes_logdir)["findings"] if f["kind"] == "spike"]
    # The JSON keeps one finding per event, each about its own layer.
    assert [(f["severity"], f["first_step"], f["layers"]) for f in spikes] == [
        ("warn", step, names) for step, names in LAYER_SPIKES.items()], spikes
    code, out, _ = run_cli("report", warn_spikes_logdir)
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("  [warn] spike:")]
    assert len(lines) == 2, out
    assert lines[0].startswith("  [warn] spike: layer `fc2.bias`: ") and lines[0].endswith("at step 23"), lines[0]
    # Every layer of the folded warnings is named, in model order (fc2.bias spikes more often, fc1.bias comes first).
    assert lines[1] == "  [warn] spike: 3 more like it at steps 41, 55, 66, in `fc1.bias`, `fc2.bias`", lines[1]
    assert out.count("advice: " + spikes[0]["advice"]) == 1, out


def test_report_keeps_warnings_of_a_kind_that_is_not_one_event_each_apart():
    """Weights updating too fast and weights barely moving are both update_ratio warnings about weights:
    never one folded line."""
    from gradhealth_plugin.analysis.finding import Finding

    def finding(kind, severity, layer, step):
        return Finding(run="r", kind=kind, severity=severity, layers=[layer], first_step=step, last_step=step,
                       evidence={}, message="", advice="", role="weight")

    found = [finding("update_ratio", "warn", "a", 0), finding("update_ratio", "warn", "b", 100),
             finding("spike", "warn", "a", 5), finding("spike", "warn", "b", 9), finding("spike", "critical", "c", 9)]
    folded = [(f.first_step, [m.first_step for m in more]) for f, more in cli._fold_notes(found)]
    assert folded == [(0, []), (100, []), (5, [9]), (9, [])], folded


def test_report_says_what_a_modules_later_call_in_forward_is(notes_logdir, run_cli):
    code, out, _ = run_cli("report", notes_logdir)
    assert code == 0 and "`relu[1]`" in out, out
    assert ("  `relu[1]` is the second call of module `relu` in forward: a module called several times in one "
            "forward pass (a shared ReLU) is logged once per call, `[1]` for the second\n") in out, out


def test_report_judges_no_weight_whose_parameter_another_tag_names(torch_own_prefixes_logdir, run_cli):
    payload = _report(run_cli, torch_own_prefixes_logdir)
    (run,) = payload["runs"]
    assert run["roles"] == ["other"]
    assert "two tags that name one parameter cannot both be its weights" in run["coverage_note"]
    # A gradient's first histogram is no initialisation, nor its change a weight update.
    assert not {f["kind"] for f in payload["findings"]} & {"init_scale", "update_ratio", "weight_growth"}
    code, out, _ = run_cli("report", torch_own_prefixes_logdir)
    assert code == 0 and "16 histograms name parameters that another tag names too" in out


def _loss_records(path):
    """The bytes of a SummaryWriter file after its header record: its loss events, whole TFRecords."""
    data = path.read_bytes()
    header = 12 + int.from_bytes(data[:8], "little") + 4  # length, its CRC, the record, its CRC
    assert len(data) > header, "the writer's file holds no loss"
    return data[header:]


def test_report_reads_a_folder_two_writers_write_while_one_grows(torch_two_writers_logdir, tmp_path, run_cli,
                                                                 caplog):
    """The SummaryWriter's file sorts first and keeps growing while the report reads watch()'s file: every
    file is read whole, with no warning from a loader that reads one file per folder."""
    import threading

    logdir = tmp_path / "logdir"
    shutil.copytree(torch_two_writers_logdir / "flushed", logdir / "run")
    ours = next((logdir / "run").glob("*.gradhealth"))
    # Named as the two writers' files of one process in one second are: the writer's sorts first.
    writers_file = next(p for p in (logdir / "run").iterdir() if p != ours).rename(ours.with_suffix(""))
    records = _loss_records(writers_file)
    done = threading.Event()

    def training():  # the writer flushing the same loss events again and again, as a training writes on
        while not done.wait(0.002):
            with open(writers_file, "ab") as f:
                f.write(records)

    thread = threading.Thread(target=training)
    thread.start()
    try:
        for _ in range(3):
            code, out, err = run_cli("report", "--format", "json", logdir)
            assert code == 0, err
            said = err + caplog.text
            assert "updated even though" not in said and "gradhealth-" not in said, said
            payload = json.loads(out)
            run = next(r for r in payload["runs"] if r["run"] == "run")
            assert "no_progress" not in run["not_judged"], run  # the loss was read
            assert run["layers"]
    finally:
        done.set()
        thread.join()


def test_report_says_the_loss_is_not_read_yet_while_its_writer_buffers(torch_two_writers_logdir, run_cli):
    code, out, err = run_cli("report", torch_two_writers_logdir)
    assert code == 0, err
    buffering = torch_two_writers_logdir / "buffering"
    waiting = [p.name for p in buffering.iterdir() if not p.name.endswith(".gradhealth")]
    assert len(waiting) == 1
    lines = [line for line in err.splitlines() if "no loss read yet" in line]
    # Only the run whose loss is in a buffer: the flushed one has its loss.
    assert len(lines) == 1 and "'buffering'" in lines[0] and waiting[0] in lines[0], err
    assert "run buffering:" in out and "run flushed:" in out
