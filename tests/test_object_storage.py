"""Logs in object storage: an ``s3://`` logdir on a local S3-compatible server (moto's server mode on
127.0.0.1), read by a real ``tensorboard`` (Python loader) serving the tab and by ``gradhealth report``.

The same runs are copied to a local directory; every answer from the bucket must equal the answer
from the local copy, and the bucket's ``gradhealth.json`` must be read as a local one is.

TensorBoard reads ``s3://`` through its own boto3 file layer only where TensorFlow is not installed
(TensorFlow's file systems have no ``s3://`` without tensorflow-io), so the server here runs with
TensorFlow hidden, as on a TensorBoard host without it. The CLI needs no such help: it picks
TensorBoard's own layer for ``s3://`` itself, and is run here with TensorFlow importable.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

from tests.test_e2e_tensorboard import _last_steps  # noqa: E402
from tests.processes import free_port, stop

REPO = pathlib.Path(__file__).resolve().parents[1]
DEMO = REPO / "demo" / "runs"
HOST = "127.0.0.1"
BUCKET = "team-logs"
PREFIX = "experiments/runs"
URL = f"s3://{BUCKET}/{PREFIX}"
# Rejected with one problem naming the file: proof the file was read from wherever the logdir is.
CONFIG = {"thresholds": {"no_such_threshold": 1}}
TIMEOUT = 60.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def local_logdir(tmp_path_factory) -> pathlib.Path:
    """Two demo experiments (TF2 histograms; Keras with gradhealth summaries) and a gradhealth.json."""
    root = tmp_path_factory.mktemp("s3_local")
    for name in ("exploding", "healthy"):
        shutil.copytree(DEMO / name, root / name)
    (root / "gradhealth.json").write_text(json.dumps(CONFIG))
    return root


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory, local_logdir):
    """The environment naming a local S3-compatible server holding the local logdir under URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    env = dict(os.environ, S3_ENDPOINT=f"http://{HOST}:{port}", AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1", AWS_REGION="us-east-1",
               NO_PROXY=HOST, no_proxy=HOST, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        client = boto3.client("s3", endpoint_url=env["S3_ENDPOINT"], region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.3)
        for path in sorted(p for p in local_logdir.rglob("*") if p.is_file()):
            client.upload_file(str(path), BUCKET, f"{PREFIX}/{path.relative_to(local_logdir).as_posix()}")
        yield env
    finally:
        stop(proc)


def _tensorboard(logdir: str, env: dict, log: pathlib.Path):
    """A Python-loader tensorboard process on the loopback interface; (process, port)."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", HOST, "--port", str(port),
             "--load_fast=false", "--reload_interval=1"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    return proc, port


def _get(port: int, route: str, **params) -> dict:
    url = f"http://{HOST}:{port}/data/plugin/gradhealth/{route}?{urllib.parse.urlencode(params)}"
    with _OPENER.open(url, timeout=30) as response:
        assert response.status == 200, url
        return json.loads(response.read())


def _wait_loaded(proc, port: int, expected: dict, log: pathlib.Path) -> None:
    """Until every run is listed at its last logged step, twice alike (no reload in progress)."""
    deadline, previous, seen = time.monotonic() + TIMEOUT, None, None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"tensorboard exited:\n{log.read_text()[-3000:]}"
        try:
            body = _get(port, "runs")
            seen = {r["run"]: r["last_step"] for r in body["runs"]}
            if seen == expected and body == previous:
                return
            previous = body
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        time.sleep(0.5)
    raise AssertionError(f"runs seen {seen}, expected {expected}\n{log.read_text()[-3000:]}")


def _no_tensorflow(tmp: pathlib.Path) -> str:
    """A directory whose ``tensorflow`` package fails to import: a TensorBoard host without TensorFlow."""
    package = tmp / "tensorflow"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('raise ImportError("TensorFlow is not installed on this host")\n')
    return str(tmp)


def _without_paths(value, paths):
    """The answer with the logdirs' own names replaced, so answers from two places compare."""
    text = json.dumps(value, sort_keys=True)
    for path in paths:
        text = text.replace(path, "<logdir>")
    return json.loads(text)


def test_tab_reads_an_s3_logdir_as_a_local_one(s3_env, local_logdir, tmp_path):
    expected = _last_steps(local_logdir)
    pythonpath = os.pathsep.join([_no_tensorflow(tmp_path / "no_tf"), str(REPO)])
    env = dict(s3_env, PYTHONPATH=pythonpath)
    started = {}
    try:
        for name, logdir in (("s3", URL), ("local", str(local_logdir))):
            started[name] = (*_tensorboard(logdir, env, tmp_path / f"{name}.log"), tmp_path / f"{name}.log")
        for proc, port, log in started.values():
            _wait_loaded(proc, port, expected, log)
        s3_port, local_port = started["s3"][1], started["local"][1]
        paths = [URL, str(local_logdir)]
        runs = _get(s3_port, "runs")
        assert [p for p in runs["config_problems"] if f"{URL}/gradhealth.json" in p and "no_such_threshold" in p]
        assert _without_paths(runs, paths) == _without_paths(_get(local_port, "runs"), paths)
        for run in expected:
            for route, params in (("findings", {}), ("heatmap", {"metric": "health"})):
                assert _get(s3_port, route, run=run, **params) == _get(local_port, route, run=run, **params)
        critical = [f for f in _get(s3_port, "findings", run="exploding/unclipped")["findings"]
                    if f["kind"] == "exploding_gradients"]
        assert critical and critical[0]["severity"] == "critical"
    finally:
        for proc, _, _ in started.values():
            stop(proc)


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradhealth_plugin.cli", *args], env=env, capture_output=True,
                          text=True, timeout=240, stdin=subprocess.DEVNULL)


def test_cli_reports_an_s3_logdir_as_a_local_one(s3_env, local_logdir):
    env = dict(s3_env, PYTHONPATH=str(REPO))  # TensorFlow importable: the CLI must not need it hidden
    remote = _cli("report", URL, "--format", "json", env=env)
    assert remote.returncode == 0, remote.stderr
    local = _cli("report", str(local_logdir), "--format", "json", env=env)
    assert local.returncode == 0, local.stderr
    report = json.loads(remote.stdout)
    assert [p for p in report["config_problems"] if f"{URL}/gradhealth.json" in p]
    paths = [URL, str(local_logdir)]
    assert _without_paths(report, paths) == _without_paths(json.loads(local.stdout), paths)
    assert {r["run"] for r in report["runs"]} == set(_last_steps(local_logdir))

    check = _cli("check", URL, "--run", "exploding/unclipped", env=env)
    assert check.returncode == 1 and "exploding_gradients" in check.stdout, check.stderr


def test_cli_names_a_missing_bucket_in_one_line(s3_env):
    result = _cli("report", "s3://no-such-bucket/runs", env=dict(s3_env, PYTHONPATH=str(REPO)))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "NoSuchBucket" in lines[0], result.stderr
