"""End to end: the real ``tensorboard`` server, once per loader, on one logdir.

TensorBoard 2.21 reads a logdir with either its Python loader
(``--load_fast=false``) or its Rust data server (``--load_fast=true``). The
tab reads only through the data provider, so both must give the same answers.
The logdir holds the bundled TF2 exploding demo (``demo/runs/exploding``: TF2
histograms, float64, 30 buckets) and a tensorboardX run (v1 HistogramProto,
whose low end the two loaders convert differently; see the note above ``FAMILIES``). Each run has
fewer than 100 logged steps per tag, the Rust loader's default histogram
reservoir, so neither loader drops a sample.
"""

from __future__ import annotations

import json
import math
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

import numpy as np
import pytest
from tests.processes import free_port

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "demo" / "runs" / "exploding"
TENSORBOARD = pathlib.Path(sys.executable).with_name("tensorboard")
HOST = "127.0.0.1"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
LOADERS = ("false", "true")
# v1 histograms reach the Python loader as float32 bucket edges and the Rust
# loader as float64: metrics computed from them agree to about 1e-7.
REL_TOL = 1e-5
ABS_TOL = 1e-12
TBX_RUN = "tbx"
TBX_STEPS = range(0, 60, 5)

# Direct connections only: a proxy from the environment must not see loopback requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _write_tbx_run(run_dir: pathlib.Path) -> None:
    """A tensorboardX run: ``<name>/data`` weights, ``<name>/grad`` gradients, ReLU activations."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(7)
    writer = SummaryWriter(str(run_dir))
    try:
        for step in TBX_STEPS:
            decay = 0.9 ** (step / 5)
            for i, (fan_in, fan_out) in enumerate(((16, 32), (32, 32), (32, 4))):
                w = rng.normal(size=(fan_out, fan_in)) * math.sqrt(2.0 / fan_in)
                writer.add_histogram(f"fc{i}.weight/data", w, step)
                writer.add_histogram(f"fc{i}.weight/grad", rng.normal(size=(fan_out, fan_in)) * 1e-2 * decay, step)
                writer.add_histogram(f"fc{i}.bias/data", rng.normal(size=fan_out) * 1e-2, step)
                writer.add_histogram(f"fc{i}.bias/grad", rng.normal(size=fan_out) * 1e-3 * decay, step)
            writer.add_histogram("activations/relu0", np.maximum(rng.normal(size=(64, 32)), 0.0), step)
            writer.add_scalar("train/loss", 1.0 / (1 + step), step)
    finally:
        writer.close()


def _last_steps(logdir: pathlib.Path) -> dict:
    """The last step each run logged, read from its event files."""
    from tensorboard.backend.event_processing import event_file_loader

    last = {}
    for path in sorted(logdir.rglob("*tfevents*")):
        run = path.parent.relative_to(logdir).as_posix()
        for event in event_file_loader.EventFileLoader(str(path)).Load():
            if event.HasField("summary") and event.summary.value:
                last[run] = max(last.get(run, -1), event.step)
    return last


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> pathlib.Path:
    assert any(SAMPLE.rglob("*tfevents*")), f"no sample runs in {SAMPLE}: run demo/make_runs.py"
    root = tmp_path_factory.mktemp("e2e_logdir")
    shutil.copytree(SAMPLE, root / "tf2")
    _write_tbx_run(root / TBX_RUN)
    return root


class Server:
    """One ``tensorboard`` process on the loopback interface."""

    def __init__(self, logdir: pathlib.Path, load_fast: str, log_path: pathlib.Path, extra_flags=()) -> None:
        self.load_fast = load_fast
        self.log_path = log_path
        self.port = free_port()
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [str(TENSORBOARD), "--logdir", str(logdir), "--host", HOST, "--port", str(self.port),
             f"--load_fast={load_fast}", *extra_flags],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def log_tail(self, chars: int = 3000) -> str:
        self._log.flush()
        return self.log_path.read_bytes()[-chars:].decode("utf-8", "replace")

    def get(self, path: str, **params) -> tuple:
        """GET a path; returns (status, body bytes)."""
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with _OPENER.open(url, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def json(self, path: str, **params):
        status, body = self.get(path, **params)
        assert status == 200, f"{self}: GET {path} {params} -> {status}: {body[:500]!r}"
        return json.loads(body)

    def gh(self, route: str, **params):
        return self.json(f"/data/plugin/gradhealth/{route}", **params)

    def wait_ready(self, expected_last_steps: dict) -> None:
        """Until the tab is listed and every run is loaded to its last logged step."""
        deadline = time.monotonic() + READY_TIMEOUT
        previous, seen = None, None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                status, body = self.get("/data/plugins_listing")
                if status == 200 and "gradhealth" in json.loads(body):
                    status, body = self.get("/data/plugin/gradhealth/runs")
                    if status == 200:
                        seen = {r["run"]: r["last_step"] for r in json.loads(body)["runs"]}
                        # Loaders read files in order, so the last step loaded means the whole
                        # file is; one more identical answer guards against a reload in progress.
                        if seen == expected_last_steps and body == previous:
                            return
                        previous = body
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                pass  # not listening yet
            time.sleep(0.5)
        raise AssertionError(
            f"{self} not ready within {READY_TIMEOUT:.0f} s; runs seen {seen}, "
            f"expected {expected_last_steps}\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        self._log.close()

    def __str__(self) -> str:
        return f"tensorboard --load_fast={self.load_fast} on port {self.port}"


def started_servers(logdir: pathlib.Path, logs: pathlib.Path, settings: dict):
    """Servers on one logdir, one per setting name -> (load_fast, extra flags), started
    together, each ready; stopped on exit by the process ids started here."""
    assert TENSORBOARD.exists(), f"{TENSORBOARD} missing: install tensorboard into this interpreter's environment"
    expected = _last_steps(logdir)
    started = {}
    try:
        for name, (load_fast, flags) in settings.items():
            started[name] = Server(logdir, load_fast, logs / f"{name}.log", extra_flags=flags)
        for server in started.values():
            server.wait_ready(expected)
        yield started
    finally:
        for server in started.values():
            server.stop()


def both_loaders(logdir: pathlib.Path, logs: pathlib.Path):
    """Both loaders' servers on one logdir with default flags, keyed by --load_fast value."""
    yield from started_servers(logdir, logs, {load_fast: (load_fast, ()) for load_fast in LOADERS})


@pytest.fixture(scope="module")
def servers(logdir, tmp_path_factory):
    """Both loaders' servers on the same logdir, once for the module."""
    yield from both_loaders(logdir, tmp_path_factory.mktemp("tensorboard_logs"))


def _runs(server) -> dict:
    return {r["run"]: r for r in server.gh("runs")["runs"]}


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _mismatches(a, b, path="") -> list:
    """Where two JSON answers differ: numbers within tolerance, everything else exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a)} != {sorted(b)}"]
        return [m for k in a for m in _mismatches(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [m for i, (x, y) in enumerate(zip(a, b)) for m in _mismatches(x, y, f"{path}[{i}]")]
    numbers = (int, float, type(None))
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return [] if _close(a, b) else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _assert_same(a, b, what: str) -> None:
    diffs = _mismatches(a, b)
    assert not diffs, f"{what}: the loaders differ at {len(diffs)} places, first: " + "; ".join(diffs[:8])


@pytest.mark.parametrize("load_fast", LOADERS)
def test_tab_is_listed_and_its_module_served(servers, load_fast):
    server = servers[load_fast]
    entry = server.json("/data/plugins_listing")["gradhealth"]
    assert entry["enabled"] is True
    assert entry["tab_name"] == "Gradient Health"
    mechanism = entry["loading_mechanism"]
    assert mechanism["type"] == "IFRAME"
    assert mechanism["module_path"] == "/data/plugin/gradhealth/index.js"
    status, body = server.get(mechanism["module_path"])
    assert status == 200 and len(body) > 1000, (status, body[:200])


def test_both_loaders_list_the_same_runs_and_layers(servers):
    python_runs, rust_runs = (_runs(servers[lf]) for lf in LOADERS)
    assert sorted(python_runs) == [TBX_RUN, "tf2/clipped", "tf2/unclipped"]
    for run in python_runs:
        assert python_runs[run]["layers"], f"{run}: no layers recognised"
    _assert_same(python_runs, rust_runs, "/runs")


# The loaders convert a v1 HistogramProto differently at its low end: when the
# writer's first bucket is empty (tensorboardX's, torch's), the Python loader
# drops it and starts the first non-empty bucket at the data's min; the Rust
# loader keeps it as a zero-count bucket [min, limit_0] (left > right) and
# starts the next bucket at limit_0, below the min. The metrics clamp edges to
# the written range, so both loaders must agree on these runs too.
FAMILIES = [pytest.param("tf2/", id="tf2-histograms"), pytest.param(TBX_RUN, id="v1-histograms")]


def _runs_of(server, prefix: str) -> dict:
    runs = {run: r for run, r in _runs(server).items() if run.startswith(prefix)}
    assert runs, f"no run starting with {prefix!r}"
    return runs


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("metric", ["health", "l2"])
def test_both_loaders_give_the_same_heatmaps(servers, metric, family):
    python_server, rust_server = (servers[lf] for lf in LOADERS)
    compared = 0
    for run, summary in _runs_of(python_server, family).items():
        for role in summary["roles"]:
            params = {"run": run, "role": role, "metric": metric}
            a = python_server.gh("heatmap", **params)
            b = rust_server.gh("heatmap", **params)
            assert a["layers"] == b["layers"], params
            assert a["steps"] == b["steps"], params
            assert a["status"] == b["status"], params
            assert a["rules"] == b["rules"], params
            _assert_same(a, b, f"heatmap {params}")
            compared += len(a["layers"]) * len(a["steps"])
    assert compared > 0


@pytest.mark.parametrize("family", FAMILIES)
def test_both_loaders_give_the_same_cells(servers, family):
    """One cell per layer and role, at the role's last step: metrics and histogram buckets."""
    python_server, rust_server = (servers[lf] for lf in LOADERS)
    for run, summary in _runs_of(python_server, family).items():
        for layer in summary["layers"]:
            for role in layer["roles"]:
                series = python_server.gh("series", run=run, layer=layer["name"], metric="l2", role=role)
                params = {"run": run, "layer": layer["name"], "step": series["series"][role]["steps"][-1],
                          "role": role}
                _assert_same(python_server.gh("cell", **params), rust_server.gh("cell", **params),
                             f"cell {params}")


@pytest.mark.parametrize("load_fast", LOADERS)
def test_exploding_sample_run_is_critical(servers, load_fast):
    heatmap = servers[load_fast].gh("heatmap", run="tf2/unclipped", role="gradient", metric="max_abs")
    critical = heatmap["status_names"].index("critical")
    exploded = [(layer, step)
                for layer, values, statuses in zip(heatmap["layers"], heatmap["values"], heatmap["status"])
                for step, value, status in zip(heatmap["steps"], values, statuses)
                if value is not None and value > 1e3]
    assert exploded, "the exploding sample run never passes max |gradient| 1e3"
    assert all(heatmap["status"][heatmap["layers"].index(layer)][heatmap["steps"].index(step)] == critical
               for layer, step in exploded)
    assert heatmap["steps"][0] == 0 and all(row[0] != critical for row in heatmap["status"]), \
        "the first logged step of the exploding run should still be healthy"


@pytest.mark.parametrize("load_fast", LOADERS)
def test_errors_are_json(servers, load_fast):
    server = servers[load_fast]
    status, body = server.get("/data/plugin/gradhealth/heatmap")
    assert status == 400 and "error" in json.loads(body)
    status, body = server.get("/data/plugin/gradhealth/heatmap", run="no such run")
    assert status == 404 and "error" in json.loads(body)
