"""The threads that ask the data provider for a request (`reading.workers`): they answer like an
executor's, and never hold up TensorBoard's exit.

The exit test runs a real ``tensorboard`` with the plugin, reading from a data
server (``--grpc_data_provider``) started here whose listings answer only when the
test lets them: a data server that answers slowly (loading a large logdir, remote,
hung). A request is waiting on it when TensorBoard is told to stop; TensorBoard's
own request threads are daemons, so the process must exit as it does without the
plugin, not when the data server answers. Both processes listen on 127.0.0.1 only; TensorBoard is
stopped by its pid.
"""

from __future__ import annotations

import concurrent.futures
import gc
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from gradhealth_plugin.reading.workers import Workers
from tests.processes import HOST, free_port, stop

TENSORBOARD = pathlib.Path(sys.executable).with_name("tensorboard")
READY_TIMEOUT = 60.0
# How long a stopped TensorBoard may take to exit. With TensorFlow installed, TensorBoard's own
# teardown takes 1-9 s on a busy 2-core machine, with or without the plugin and with or without
# a call in flight; a listing waiting in a thread joined at exit held it until the data server
# answered (here: until the test gave up at this bound).
EXIT_BOUND = 30.0
# The most a stalled listing waits for the test to release it: far past the bound.
STALL = 120.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _threads(name: str):
    return [t for t in threading.enumerate() if t.name.startswith(name + "_")]


def test_calls_answer_through_their_futures():
    workers = Workers(2, "gh-test-answers")

    def fail():
        raise ValueError("no such run")

    futures = [workers.submit(pow, 2, n) for n in range(10)]
    failed = workers.submit(fail)
    assert [f.result(timeout=10) for f in futures] == [2 ** n for n in range(10)]
    with pytest.raises(ValueError, match="no such run"):
        failed.result(timeout=10)


def test_at_most_count_daemon_threads_and_calls_wait_their_turn():
    workers = Workers(3, "gh-test-count")
    release = threading.Event()
    started = []
    futures = [workers.submit(lambda n=n: (started.append(n), release.wait(30), n)[2]) for n in range(8)]
    deadline = time.monotonic() + 10
    while len(started) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    threads = _threads("gh-test-count")
    assert len(threads) == 3 and len(started) == 3
    # Daemons: the interpreter does not wait for them at exit.
    assert all(t.daemon for t in threads)
    release.set()
    assert [f.result(timeout=10) for f in futures] == list(range(8))
    assert sorted(started) == list(range(8))


def test_threads_end_once_the_workers_are_dropped():
    workers = Workers(2, "gh-test-drop")
    assert [f.result(timeout=10) for f in [workers.submit(abs, -1), workers.submit(abs, -2)]] == [1, 2]
    assert _threads("gh-test-drop")
    del workers
    gc.collect()
    deadline = time.monotonic() + 10
    while _threads("gh-test-drop") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _threads("gh-test-drop")


class _StalledDataServer:
    """A gRPC data server with no runs whose tag listings answer only once `release` is set."""

    def __init__(self) -> None:
        import grpc
        from tensorboard.data.proto import data_provider_pb2, data_provider_pb2_grpc

        self.asked = threading.Event()
        self.release = threading.Event()
        server = self

        class Servicer(data_provider_pb2_grpc.TensorBoardDataProviderServicer):
            def ListPlugins(self, request, context):
                return data_provider_pb2.ListPluginsResponse()

            def ListRuns(self, request, context):
                return data_provider_pb2.ListRunsResponse()

            def ListScalars(self, request, context):
                server.asked.set()
                server.release.wait(STALL)
                return data_provider_pb2.ListScalarsResponse()

            def ListTensors(self, request, context):
                server.asked.set()
                server.release.wait(STALL)
                return data_provider_pb2.ListTensorsResponse()

        self._pool = concurrent.futures.ThreadPoolExecutor(8, "stalled-data-server")
        self._server = grpc.server(self._pool)
        data_provider_pb2_grpc.add_TensorBoardDataProviderServicer_to_server(Servicer(), self._server)
        self.port = self._server.add_insecure_port(f"{HOST}:0")
        self._server.start()

    def close(self) -> None:
        self.release.set()
        self._server.stop(grace=None)
        self._pool.shutdown(wait=True)


def _get(url: str, timeout: float):
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError, OSError):
        return None


# SIGTERM only: after SIGINT (Ctrl-C) a clean clone's run once took longer than the bound to exit, for a
# cause not found yet (it exited by itself later), so Ctrl-C is not claimed here.
@pytest.mark.parametrize("sig", [signal.SIGTERM], ids=["SIGTERM"])
def test_tensorboard_exits_without_waiting_for_the_data_servers_answer(tmp_path, sig):
    assert TENSORBOARD.exists(), f"{TENSORBOARD} missing: install tensorboard into this interpreter's environment"
    data_server = _StalledDataServer()
    port = free_port()
    log_path = tmp_path / "tensorboard.log"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(TENSORBOARD), "--grpc_data_provider", f"{HOST}:{data_server.port}", "--host", HOST,
             "--port", str(port)], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://{HOST}:{port}/data/plugin/gradhealth"
    try:
        # The vocabulary reads nothing from the data server: it answers once the plugin is loaded.
        deadline = time.monotonic() + READY_TIMEOUT
        while _get(f"{base}/vocabulary", timeout=5) != 200:
            assert proc.poll() is None, log_path.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, f"not ready: {log_path.read_text(errors='replace')[-2000:]}"
            time.sleep(0.3)
        # The tab's first request: it lists the runs' tags, and the data server has not answered yet.
        threading.Thread(target=_get, args=(f"{base}/runs", STALL), daemon=True).start()
        assert data_server.asked.wait(30), "the plugin never listed the runs' tags"
        proc.send_signal(sig)
        try:
            proc.wait(timeout=EXIT_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"tensorboard still running {EXIT_BOUND:.0f} s after {sig.name}, "
                        "waiting for the data server's answer")
        assert proc.returncode == 0, log_path.read_text(errors="replace")[-2000:]
    finally:
        data_server.release.set()
        stop(proc)
        data_server.close()
