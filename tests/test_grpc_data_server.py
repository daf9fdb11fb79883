"""The plugin on a data server TensorBoard did not start itself (``--grpc_data_provider``).

TensorBoard can read from a separately started data server: the Rust
``tensorboard_data_server`` shipped in the ``tensorboard-data-server`` wheel,
local or remote. The plugin only talks to the data provider, so its routes
must work there unchanged. One difference matters: TensorBoard passes its
sampling flags (and the 500 samples gradhealth asks for in
``GradHealthLoader.fix_flags``) only to a data server it starts; a server
started by hand keeps its own default for other plugins' tensors, 100 per
tag, unless it is given ``--samples-per-plugin=gradhealth=500``.

Both processes listen on 127.0.0.1 only and are stopped by their pid.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest

from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run
from tests.processes import free_port, stop

HOST = "127.0.0.1"
TENSORBOARD = pathlib.Path(sys.executable).with_name("tensorboard")
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
HIST_STEPS = 30
OWN_STEPS = 150  # more than the data server's default of 100 samples for another plugin's tensors
DATA_SERVER_DEFAULT_SAMPLES = 100
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _binary() -> str:
    from tensorboard.data import server_ingester

    binary = server_ingester.get_server_binary()
    if binary is None:
        pytest.skip("no tensorboard_data_server binary (install the tensorboard-data-server wheel)")
    return binary.path


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> pathlib.Path:
    from gradhealth_plugin.writing import format as fmt
    from gradhealth_plugin.writing.reference import stats_numpy

    root = tmp_path_factory.mktemp("grpc_logdir")
    rng = np.random.default_rng(11)
    events = []
    for step in range(HIST_STEPS):
        scale = 1e-2 if step < 20 else 1e4  # explodes at step 20
        events.append(event(step, hist_value("gradients/dense/kernel", normal_buckets(rng, scale)),
                            hist_value("weights/dense/kernel", normal_buckets(rng, 0.1)),
                            hist_value("gradients/dense_1/kernel", normal_buckets(rng, 1e-3)),
                            scalar_value("loss", 1.0 / (step + 1))))
    write_run(root / "hist", events)
    own = []
    for step in range(OWN_STEPS):
        vector = stats_numpy(rng.normal(size=256) * 1e-2)
        meta = fmt.summary_metadata("gradient", "fc1.weight", position=0, shape=[16, 16])
        value = fmt.tensor_summary(fmt.tag_for("gradient", "fc1.weight"), vector, meta).value[0]
        own.append(event(step, value))
    write_run(root / "own", own)
    return root


class DataServer:
    """``tensorboard_data_server --logdir D --host 127.0.0.1 --port 0 --port-file F``."""

    def __init__(self, logdir: pathlib.Path, workdir: pathlib.Path, extra=()):
        port_file = workdir / f"port_{time.monotonic_ns()}"
        self._log = open(workdir / f"data_server_{time.monotonic_ns()}.log", "wb")
        # --die-after-stdin: the server exits when this process does, whatever happens to it.
        self.proc = subprocess.Popen(
            [_binary(), "--logdir", str(logdir), "--host", HOST, "--port", "0", "--port-file", str(port_file),
             "--die-after-stdin", *extra],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"data server exited with {self.proc.returncode}")
            text = port_file.read_text() if port_file.exists() else ""
            if text.endswith("\n"):
                self.port = int(text)
                break
            time.sleep(0.1)
        else:
            self.stop()
            raise AssertionError("data server wrote no port file")
        self.address = f"{HOST}:{self.port}"

    def stop(self) -> None:
        stop(self.proc, timeout=STOP_TIMEOUT)
        if self.proc.stdin:
            self.proc.stdin.close()
        self._log.close()


class TensorBoard:
    """``tensorboard --grpc_data_provider 127.0.0.1:PORT --host 127.0.0.1 --port P``."""

    def __init__(self, address: str, log_path: pathlib.Path):
        self.port = free_port()
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [str(TENSORBOARD), "--grpc_data_provider", address, "--host", HOST, "--port", str(self.port)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))

    def get(self, route: str, **params):
        url = f"http://{HOST}:{self.port}/data/plugin/gradhealth/{route}"
        url += "?" + urllib.parse.urlencode(params) if params else ""
        try:
            with _OPENER.open(url, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def wait_ready(self, expected: dict) -> dict:
        """Until the runs route lists every expected run at its last step; returns the runs."""
        deadline = time.monotonic() + READY_TIMEOUT
        seen = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"tensorboard exited: {self.log_path.read_text()[-2000:]}")
            try:
                status, body = self.get("runs")
                if status == 200:
                    seen = {r["run"]: r for r in body["runs"]}
                    if {run: r["last_step"] for run, r in seen.items()} == expected:
                        return seen
            except (urllib.error.URLError, ConnectionError, socket.timeout, ValueError):
                pass  # not up yet
            time.sleep(0.5)
        raise AssertionError(f"not ready: saw {seen}\n{self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        stop(self.proc, timeout=STOP_TIMEOUT)
        self._log.close()


@pytest.fixture(scope="module")
def remote(logdir, tmp_path_factory):
    """A data server with gradhealth's sampling, and TensorBoard reading from it."""
    work = tmp_path_factory.mktemp("grpc_work")
    server = DataServer(logdir, work, ["--samples-per-plugin", "gradhealth=500"])
    try:
        tb = TensorBoard(server.address, work / "tensorboard.log")
        try:
            runs = tb.wait_ready({"hist": HIST_STEPS - 1, "own": OWN_STEPS - 1})
            yield tb, runs
        finally:
            tb.stop()
    finally:
        server.stop()


def test_runs_are_listed_as_with_a_local_logdir(remote):
    _, runs = remote
    hist = runs["hist"]
    assert {layer["name"] for layer in hist["layers"]} == {"dense/kernel", "dense_1/kernel"}
    assert hist["roles"] == ["gradient", "weight"]
    assert hist["scalars"]["loss"] == ["loss"]
    assert hist["steps_kept"] == HIST_STEPS


def test_heatmap_and_findings_work_unchanged(remote):
    tb, _ = remote
    status, hm = tb.get("heatmap", run="hist", role="gradient", metric="max_abs")
    assert status == 200
    assert hm["layers"] == ["dense/kernel", "dense_1/kernel"] and hm["steps"] == list(range(HIST_STEPS))
    critical = hm["status_names"].index("critical")
    assert [s == critical for s in hm["status"][0]] == [step >= 20 for step in range(HIST_STEPS)]
    status, body = tb.get("findings", run="hist")
    assert status == 200
    exploding = [f for f in body["findings"] if f["kind"] == "exploding_gradients"]
    assert exploding and exploding[0]["layers"] == ["dense/kernel"] and exploding[0]["first_step"] == 20
    status, cell = tb.get("cell", run="hist", layer="dense/kernel", step=25, role="gradient")
    assert status == 200 and len(cell["roles"]["gradient"]["histogram"]) > 1
    assert tb.get("heatmap", run="nope")[0] == 404


def test_all_gradhealth_summaries_kept_with_samples_per_plugin(remote):
    tb, runs = remote
    (layer,) = runs["own"]["layers"]
    assert layer["roles"]["gradient"]["source"] == "gradhealth"
    assert layer["roles"]["gradient"]["steps"] == OWN_STEPS
    status, series = tb.get("series", run="own", layer="fc1.weight", metric="std", role="gradient")
    assert status == 200
    assert series["series"]["gradient"]["quality"] == ["exact"] * OWN_STEPS


def test_data_server_default_keeps_100_gradhealth_samples(logdir, tmp_path):
    """Without --samples-per-plugin a hand-started data server keeps 100 of the 150 steps."""
    from tensorboard import context
    from tensorboard.data import provider as provider_lib
    from tensorboard.data import server_ingester
    from tensorboard.util import grpc_util

    server = DataServer(logdir, tmp_path)
    try:
        ingester = server_ingester.ExistingServerDataIngester(
            server.address, channel_creds_type=grpc_util.ChannelCredsType.LOCAL)
        provider = ingester.data_provider
        ctx = context.RequestContext()
        deadline = time.monotonic() + READY_TIMEOUT
        kept = 0
        while time.monotonic() < deadline:
            listing = provider.list_tensors(ctx, experiment_id="", plugin_name="gradhealth")
            if listing.get("own") and next(iter(listing["own"].values())).max_step == OWN_STEPS - 1:
                data = provider.read_tensors(ctx, experiment_id="", plugin_name="gradhealth", downsample=10 ** 6,
                                             run_tag_filter=provider_lib.RunTagFilter(runs=["own"]))
                kept = len(next(iter(data["own"].values())))
                break
            time.sleep(0.2)
        assert kept == DATA_SERVER_DEFAULT_SAMPLES
    finally:
        server.stop()
