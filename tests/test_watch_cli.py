"""``gradhealth watch``: following a live logdir while real trainings write it.

The live tests start ``gradhealth watch`` as subprocesses (one printing JSON
lines, one with ``--exit-on-first --exec``), wait until they watch, then train
in this process (`live_training`): a healthy MLP, then one whose learning rate
jumps 10,000-fold at step 20 (NaN from logged step 25 on). The training pauses
after each logged step (longer from the jump on), and the alert must arrive
before the training logged its third step after the onset.
"""

import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from gradhealth_plugin import alerts, live
from gradhealth_plugin.writing.reference import stats_numpy
from tests import live_training as lt

REPO = pathlib.Path(__file__).resolve().parents[1]
DIVERGE_AT = 20
STEPS = 50
PAUSE = 0.6  # seconds after each logged step; the watchers poll every 0.2 s
# From the divergence on, where the alert is timed in logged steps: a poll (reading the logdir and judging
# it) takes well under this on an idle machine but can take over a second with every core busy, and the
# claim is about the watcher keeping up with a training's logging, not about the machine's load.
SLOW_PAUSE = 2.0
READY_TIMEOUT = 120.0

DUMP_ENV = """import json, os, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({k: v for k, v in os.environ.items() if k.startswith("GRADHEALTH_")}) + "\\n")
"""


class Watcher:
    """``gradhealth watch LOGDIR ARGS`` in a subprocess, each output line kept with when it arrived."""

    def __init__(self, logdir, *args):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([sys.executable, "-m", "gradhealth_plugin.cli", "watch", str(logdir), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.out, self.err = [], []
        self._readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append((time.monotonic(), line.rstrip("\n")))

    def wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        while not any("gradhealth: watching" in line for _, line in self.err):
            assert self.proc.poll() is None, self.err
            assert time.monotonic() < deadline, self.err
            time.sleep(0.05)

    def wait(self, timeout=60.0) -> int:
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.wait()

    def events(self):
        return [(t, json.loads(line)) for t, line in self.out]


def _key(event):
    f = event["finding"]
    return f["kind"], f["role"], f["first_step"], f["layers"][0]


def _check_live(logdir, tmp_path, train, run):
    """Watchers on `logdir` while `train` writes a healthy run, then `run` diverging; returns what they saw."""
    env_file = tmp_path / "env.jsonl"
    (tmp_path / "dump_env.py").write_text(DUMP_ENV)
    plain = Watcher(logdir, "--on", "warn", "--format", "json", "--interval", "0.2", "--time-limit", "600")
    first = Watcher(logdir, "--on", "critical", "--exit-on-first", "--interval", "0.2", "--time-limit", "600",
                    "--exec", f"'{sys.executable}' '{tmp_path / 'dump_env.py'}' '{env_file}'")
    try:
        plain.wait_ready()
        first.wait_ready()
        result = train(run, diverge_at=DIVERGE_AT, pause=PAUSE, slow_pause=SLOW_PAUSE)
        time.sleep(10 * 0.2)  # more polls after the last step: nothing may be announced twice
        assert first.wait() == 1, first.err
    finally:
        plain.stop()
        first.stop()
    return plain, first, result, env_file


def _assert_alerted_once_in_time(plain, first, result, env_file, run, onset):
    events = plain.events()
    assert all(e["run"] == run for _, e in events), events  # nothing on the healthy run
    alerted = [(t, e) for t, e in events if e["event"] == "alert"]
    assert alerted and len(alerted) == len(events)  # a run that stays NaN does not recover
    keys = [_key(e) for _, e in alerted]
    assert len(keys) == len(set(keys)), keys  # each finding once
    assert {e["finding"]["kind"] for _, e in alerted} == {"nonfinite"}
    # One finding for the run; its layers' rows from the onset on (a loss scalar, where one is logged,
    # turns NaN earlier).
    assert {min(v["first_step"] for name, v in e["finding"]["evidence"]["layers"].items() if name != "loss")
            for _, e in alerted} == {onset}
    assert all(DIVERGE_AT < e["finding"]["first_step"] <= onset for _, e in alerted)
    # Within two logged steps of the onset: before the training logged the third one after it.
    k = result.logged_index(onset)
    assert all(t < result.logged_at[result.logged_step(k + 3)] for t, _ in alerted)

    # One alert (one of those), then exit 1, after running --exec with it in the environment.
    lines = [line for _, line in first.out]
    assert len(lines) == 1, lines
    env, = [json.loads(line) for line in env_file.read_text().splitlines()]
    said = json.loads(env["GRADHEALTH_FINDING"])
    # A finding the other watcher alerted too; the two read the run a poll apart, so a finding still
    # growing may count more steps in one's message than in the other's.
    assert _key({"finding": said}) in keys, (said, keys)
    assert lines[0].startswith(f"{run}: [critical] nonfinite from step {said['first_step']} (")
    assert lines[0].endswith("): " + said["message"]), (lines, said)
    assert env["GRADHEALTH_EVENT"] == "alert" and env["GRADHEALTH_RUN"] == run
    assert env["GRADHEALTH_KIND"] == "nonfinite" and env["GRADHEALTH_SEVERITY"] == "critical"
    assert env["GRADHEALTH_FIRST_STEP"] == str(said["first_step"])
    assert f"({env['GRADHEALTH_CONSECUTIVE_STEPS']} consecutive logged step" in lines[0]
    assert env["GRADHEALTH_LAYERS"] == ",".join(said["layers"]) and env["GRADHEALTH_MESSAGE"] == said["message"]
    assert pathlib.Path(env["GRADHEALTH_LOGDIR"]).resolve() == pathlib.Path(plain.proc.args[4]).resolve()


def test_torch_divergence_is_alerted_once_within_two_logged_steps(tmp_path):
    logdir = tmp_path / "logs"
    logdir.mkdir()

    def train(run, **kwargs):
        # Each run also writes its loss into a second event file, as a SummaryWriter beside watch() does.
        healthy = lt.train_torch(str(logdir / "healthy"), steps=STEPS, pause=PAUSE / 2, loss_file=True)
        assert healthy.last_step == STEPS - 1
        return lt.train_torch(str(logdir / run), steps=STEPS, loss_file=True, **kwargs)

    plain, first, result, env_file = _check_live(logdir, tmp_path, train, "diverging")
    assert result.onset == 25  # from the raw gradients
    _assert_alerted_once_in_time(plain, first, result, env_file, "diverging", result.onset)


def test_keras_divergence_is_alerted_once_within_two_logged_steps(tmp_path):
    logdir = tmp_path / "logs"
    logdir.mkdir()

    def train(run, **kwargs):
        healthy = lt.train_keras(str(logdir / "healthy"), steps=STEPS, pause=PAUSE / 2)
        assert healthy.last_step == STEPS - 1
        return lt.train_keras(str(logdir / run), steps=STEPS, **kwargs)

    plain, first, result, env_file = _check_live(logdir, tmp_path, train, "diverging")
    # The first logged step after the learning rate jumped.
    _assert_alerted_once_in_time(plain, first, result, env_file, "diverging/train", 25)


@pytest.fixture(scope="module")
def finished_logdir(tmp_path_factory):
    """A healthy run and one NaN from step 25 to its end (75), both finished."""
    logdir = tmp_path_factory.mktemp("finished")
    lt.train_torch(str(logdir / "healthy"))
    lt.train_torch(str(logdir / "diverged"), diverge_at=DIVERGE_AT)
    return logdir


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "gradhealth_plugin.cli", "watch", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_time_limit_ends_cleanly(finished_logdir):
    code, out, err = _cli(finished_logdir / "healthy", "--time-limit", "0.5", "--interval", "0.1")
    assert code == 0 and out == "", err


def test_exit_on_first_and_consecutive_steps(finished_logdir):
    # NaN from 25 to 75: 11 consecutive logged steps; asking for 12 alerts nothing.
    code, out, _ = _cli(finished_logdir, "--time-limit", "0", "--exit-on-first", "--consecutive", "12")
    assert code == 0 and out == ""
    code, out, _ = _cli(finished_logdir, "--time-limit", "0", "--exit-on-first", "--consecutive", "11",
                        "--kinds", "nonfinite,exploding_gradients")
    assert code == 1
    assert out.startswith("diverged: [critical] nonfinite from step 25 (11 consecutive logged steps): ")
    assert len(out.splitlines()) == 1


def test_logdir_that_does_not_exist_yet_is_waited_for(tmp_path):
    code, out, err = _cli(tmp_path / "later", "--time-limit", "0.3", "--interval", "0.1")
    assert code == 0 and out == ""
    assert "does not exist yet; waiting for it" in err


@pytest.mark.parametrize("args, says", [
    (["--kinds", "exploding"], "unknown finding kind(s) exploding"),
    (["--interval", "0"], "--interval must be a positive number"),
    (["--time-limit", "-1"], "--time-limit must be 0 or more"),
    (["--consecutive", "0"], "consecutive must be a positive integer"),
    (["--on", "info"], "invalid choice: 'info'"),
])
def test_bad_options_exit_2_with_one_line(tmp_path, args, says):
    code, out, err = _cli(tmp_path, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_logdir_that_is_a_file_exits_2(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    code, out, err = _cli(path, "--time-limit", "0")
    assert code == 2 and err.strip().splitlines() == [f"gradhealth: logdir {str(path)!r} is not a directory"]


# The announcer on runs built in process: once per finding, recovery, relapse, consecutive steps.

def _rows(run, step, scale):
    for i in range(3):
        g = np.random.default_rng(step * 10 + i).normal(0, 1e-2, (8, 8))
        if i == 0:
            g = g * scale
        run.add(step, "gradient", f"fc{i}.weight", stats_numpy(g), position=i, shape=(8, 8))


def _series(scales):
    """A run built by `live.LiveRun` after each logged step: (run data, findings) per step."""
    from gradhealth_plugin.analysis import findings

    run = live.LiveRun(alerts.Alert("critical"), "run")
    for k, scale in enumerate(scales):
        _rows(run, 5 * k, scale)
        rd = run.run_data()
        yield rd, findings.find(rd, run._limits)


def test_a_finding_is_announced_once_then_recovery_then_relapse():
    # fc0's gradients explode (max |g| > 1e3) at logged steps 20 and 25, then again at 50.
    scales = [1] * 4 + [1e6] * 2 + [1] * 4 + [1e6] + [1] * 2
    announcer = alerts.Announcer(alerts.Alert("critical"))
    said = [(rd.last_step, event) for rd, found in _series(scales) for event in announcer.update(rd, found)]
    kinds = [(step, type(e).__name__) for step, e in said]
    assert kinds == [(20, "Match"), (30, "Recovery"), (50, "Match"), (55, "Recovery")]
    assert said[0][1].key == said[2][1].key  # the same finding (onset 20), holding again
    assert said[0][1].finding.kind == "exploding_gradients" and said[0][1].steps == 1
    assert said[2][1].steps == 2  # it held at 20 and 25
    assert said[1][1].line() == ("run: recovered at step 30: no finding at critical or above holds any more "
                                 "(announced: exploding_gradients)")


def test_consecutive_steps_delay_the_alert_until_the_finding_held_them():
    scales = [1] * 4 + [1e6] * 3 + [1] * 2
    announcer = alerts.Announcer(alerts.Alert("critical", consecutive=3))
    said = [(rd.last_step, event) for rd, found in _series(scales) for event in announcer.update(rd, found)]
    assert [(step, type(e).__name__) for step, e in said] == [(30, "Match"), (35, "Recovery")]
    assert said[0][1].steps == 3 and "(3 consecutive logged steps)" in said[0][1].line()
    assert said[0][1].finding.first_step == 20


@pytest.mark.parametrize("consecutive, said_at", [(1, 40), (5, 40)])
def test_vanishing_is_said_once_it_held_as_the_rule_states(consecutive, said_at):
    # fc0's gradients vanish from logged step 20 on. The rule needs 5 consecutive logged steps: held only 2
    # at the end of what was logged it is a note, not a warning (as the tab says), so a warn alert waits for
    # the 5 as --consecutive 5 does.
    scales = [1] * 4 + [1e-9] * 6
    announcer = alerts.Announcer(alerts.Alert("warn", kinds=["vanishing_gradients"], consecutive=consecutive))
    said = [(rd.last_step, event) for rd, found in _series(scales) for event in announcer.update(rd, found)]
    assert [(step, e.finding.first_step, e.steps) for step, e in said] == [(said_at, 20, (said_at - 20) // 5 + 1)]


# What cannot be read: said as `gradhealth report` says it, once per tag, however often the run is read.

def _odd_counts_steps(rng, first):
    """Five steps from `first`: fc1 fine, fc2's counts negative at each, fc3's edges decreasing at the first."""
    from tests.test_bad_input import event, hist_value, normal_buckets

    events = []
    for step in range(first, first + 5):
        good = normal_buckets(rng)
        events.append(event(step, hist_value("gradients/fc1", good), hist_value("gradients/fc2", good * [1, 1, -1]),
                            hist_value("gradients/fc3", good[:, [1, 0, 2]] if step == first else good),
                            wall_time=time.time()))
    return events


def test_each_tag_that_cannot_be_read_is_said_once_however_often_the_run_grows(tmp_path, monkeypatch):
    import io
    import types

    from gradhealth_plugin import follow
    from tests.test_bad_input import append_events, new_event_file

    rng = np.random.default_rng(2)
    path = new_event_file(tmp_path / "run")
    append_events(path, _odd_counts_steps(rng, 0))
    slept = []

    def sleep(_):  # between polls: five more steps, until the third
        slept.append(1)
        if len(slept) == 3:
            raise KeyboardInterrupt
        append_events(path, _odd_counts_steps(rng, 5 * len(slept)))

    monkeypatch.setattr(follow, "time", types.SimpleNamespace(monotonic=time.monotonic, time=time.time, sleep=sleep))
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        follow.watch(follow.Options(logdir=str(tmp_path), alert=alerts.Alert("warn"), interval=0.01), out, err)
    assert len(slept) == 3 and "Traceback" not in err.getvalue()
    assert [line for line in out.getvalue().splitlines() if "unreadable" in line] == [
        "run: unreadable tag gradients/fc2: negative counts at step 0",
        "run: unreadable steps of tag gradients/fc3: 1 of 5 steps read hold no histogram and are no data;"
        " the first: bucket edges decrease at step 0"]


def test_watching_one_run_loads_it_and_its_training_alone(tmp_path):
    from gradhealth_plugin import follow
    from tests.test_bad_input import event, hist_value, normal_buckets, write_run

    rng = np.random.default_rng(3)
    for name in ("exp/rank0", "exp/rank1", "other", "exp2/rank1"):
        write_run(tmp_path / name, [event(s, hist_value("gradients/fc1", normal_buckets(rng))) for s in range(3)])
    loaded = {}
    for run in ("exp/rank1", "other", None):
        follower = follow.Follower(str(tmp_path))
        for _ in range(2):  # the first poll and a later one
            polled = [name for name, *_ in follower.poll(run)]
        loaded[run] = (sorted(polled), sorted(follower._multiplexer.Runs()))
    assert loaded == {"exp/rank1": (["exp/rank1"], ["exp/rank0", "exp/rank1"]), "other": (["other"], ["other"]),
                      None: (["exp/rank0", "exp/rank1", "exp2/rank1", "other"],
                             ["exp/rank0", "exp/rank1", "exp2/rank1", "other"])}
