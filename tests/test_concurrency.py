"""Concurrent requests while the logdir grows, and the cache that makes repeated requests cheap.

The routes run on TensorBoard's threaded server: many requests at once, while
the loader reloads in the background. Every answer must be complete and
consistent on its own (one snapshot of the data), and a run's steps may only
grow from one answer to the next. The cache (``reading.provider.Reader``) must read a tag
again only when what the data provider lists for it changed, and then compute
metrics only for the steps it has not seen.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

import numpy as np
import pytest

from gradhealth_plugin.analysis import metrics
from gradhealth_plugin.reading import cache as cache_lib
from tests.test_bad_input import (REQUEST_TIMEOUT, append_events, check_heatmap_shape, event, hist_value,
                                  normal_buckets, scalar_value, write_run)

LAYERS = 6
CONCURRENT = 32


def _step_event(rng, step: int):
    values = []
    for i in range(LAYERS):
        values.append(hist_value(f"gradients/dense_{i}/kernel", normal_buckets(rng, 1e-2 * (i + 1))))
        values.append(hist_value(f"weights/dense_{i}/kernel", normal_buckets(rng, 0.1)))
    values.append(hist_value("activations/relu_0", np.maximum(normal_buckets(rng, 1.0), 0.0)))
    values.append(scalar_value("loss", 1.0 / (step + 1)))
    return event(step, *values)


def _requests(layer_steps):
    """One of every route, with a few roles and metrics: 32 requests in all."""
    out = [("/runs", {})]
    out += [("/heatmap", {"run": "run", "role": role, "metric": metric})
            for role in ("gradient", "weight", "activation") for metric in ("health", "l2", "mean", "zero_fraction")]
    out += [("/findings", {"run": "run"})] * 3
    out += [("/series", {"run": "run", "layer": f"dense_{i}/kernel", "metric": m})
            for i in range(3) for m in ("l2", "health")]
    out += [("/cell", {"run": "run", "layer": f"dense_{i}/kernel", "step": s})
            for i in range(LAYERS) for s in layer_steps[:2]]
    return out[:CONCURRENT]


def _check(route: str, body: dict) -> None:
    if route == "/heatmap":
        check_heatmap_shape(body)
    elif route == "/series":
        for s in body["series"].values():
            assert len(s["steps"]) == len(s["values"]) == len(s["quality"]) == len(s["status"])
            assert s["steps"] == sorted(s["steps"])
    elif route == "/runs":
        (run,) = body["runs"]
        assert len(run["layers"]) == LAYERS + 1  # dense_i/kernel (gradient and weight) and relu_0
    elif route == "/cell":
        assert body["roles"]
    elif route == "/findings":
        assert isinstance(body["findings"], list)


def test_concurrent_requests_while_the_logdir_grows(tmp_path, plugin_client):
    rng = np.random.default_rng(3)
    path = write_run(tmp_path / "run", [_step_event(rng, s) for s in range(5)])
    client = plugin_client(tmp_path)
    stop = threading.Event()
    grown = []

    def grow():
        step = 5
        while not stop.is_set() and step < 400:
            append_events(path, [_step_event(rng, step)])
            step += 1
            client.reload()
            grown.append(step)

    writer = threading.Thread(target=grow)
    writer.start()
    results = []  # (started, finished, route, status, body)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
            for _ in range(3):  # three waves of 32 simultaneous requests
                def one(route, params):
                    started = time.monotonic()
                    status, body = client.get(route, **params)
                    return started, time.monotonic(), route, status, body

                futures = [pool.submit(one, route, params) for route, params in _requests([0, 1])]
                for future in futures:
                    results.append(future.result(timeout=REQUEST_TIMEOUT))
    finally:
        stop.set()
        writer.join(timeout=REQUEST_TIMEOUT)
    assert grown, "the logdir never grew during the requests"
    assert len(results) == 3 * CONCURRENT
    for _, _, route, status, body in results:
        assert status == 200, (route, body)
        _check(route, body)
    # A run's steps only grow: an answer that started after another finished has all of its steps.
    heatmaps = sorted((r for r in results if r[2] == "/heatmap"), key=lambda r: r[0])
    for i, (_, finished_a, _, _, a) in enumerate(heatmaps):
        for started_b, _, _, _, b in heatmaps[i + 1:]:
            if started_b > finished_a and a["role"] == b["role"]:
                assert set(a["steps"]) <= set(b["steps"])
                assert a["layers"] == b["layers"]


class CountingProvider:
    """A data provider that passes every call through and records the reads."""

    def __init__(self, inner):
        self._inner = inner
        self.reads = []  # (plugin, tags) per read_tensors call
        self.lists = []  # plugin per list_tensors and list_scalars call
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def list_tensors(self, ctx, **kwargs):
        with self._lock:
            self.lists.append(kwargs["plugin_name"])
        return self._inner.list_tensors(ctx, **kwargs)

    def list_scalars(self, ctx, **kwargs):
        with self._lock:
            self.lists.append(kwargs["plugin_name"])
        return self._inner.list_scalars(ctx, **kwargs)

    def read_tensors(self, ctx, **kwargs):
        with self._lock:
            self.reads.append((kwargs["plugin_name"], sorted(kwargs["run_tag_filter"].tags or ())))
        return self._inner.read_tensors(ctx, **kwargs)

    def histogram_reads(self):
        return [tags for plugin, tags in self.reads if plugin == "histograms"]


@pytest.fixture
def counted(tmp_path, plugin_client, monkeypatch):
    """A client whose plugin reads through a CountingProvider; also counts rows given to histogram_metrics."""
    from tensorboard.backend.event_processing import data_provider

    from gradhealth_plugin import plugin

    rng = np.random.default_rng(5)
    path = write_run(tmp_path / "run", [_step_event(rng, s) for s in range(20)])
    client = plugin_client(tmp_path)
    counter = CountingProvider(data_provider.MultiplexerDataProvider(client.multiplexer, str(tmp_path)))
    context = type("Context", (), {"data_provider": counter, "logdir": str(tmp_path)})()
    client.plugin = plugin.GradHealthPlugin(context)
    client._apps = client.plugin.get_plugin_apps()
    rows = []
    real = metrics.histogram_metrics

    def counting(h, *args, **kwargs):
        rows.append(len(h.steps))
        return real(h, *args, **kwargs)

    monkeypatch.setattr(metrics, "histogram_metrics", counting)
    return client, counter, rows, path, rng


def test_unchanged_data_is_not_read_again(counted):
    client, counter, rows, _, _ = counted
    first = client.ok("/heatmap", run="run", role="gradient", metric="l2")
    assert len(counter.histogram_reads()) >= 1 and sum(rows) == 20 * (2 * LAYERS + 1)
    answers = [client.ok(route, **params) for route, params in _requests([0, 1])]
    counter.reads.clear()
    rows.clear()
    client.reload()  # nothing new on disk
    assert [client.ok(route, **params) for route, params in _requests([0, 1])] == answers
    assert client.ok("/heatmap", run="run", role="gradient", metric="l2") == first
    assert counter.histogram_reads() == [], "unchanged tags were read again"
    assert rows == []


def test_the_runs_route_lists_the_runs_once(counted):
    # Each run is read by the route's one listing: listing 20,000 tags costs TensorBoard a tenth of a second.
    client, counter, _, path, rng = counted
    write_run(path.parent.parent / "other", [_step_event(rng, s) for s in range(5)])
    client.multiplexer.AddRunsFromDirectory(str(path.parent.parent))
    client.reload()
    runs = client.ok("/runs")["runs"]
    assert [r["run"] for r in runs] == ["other", "run"] and all("error" not in r for r in runs)
    assert sorted(counter.lists) == ["gradhealth", "histograms", "scalars"]


def test_only_the_tag_that_grew_is_read_and_only_its_new_steps_computed(counted):
    client, counter, rows, path, rng = counted
    client.ok("/findings", run="run")
    counter.reads.clear()
    rows.clear()
    append_events(path, [event(20, hist_value("gradients/dense_2/kernel", normal_buckets(rng, 1e3)))])
    client.reload()
    hm = client.ok("/heatmap", run="run", role="gradient", metric="max_abs")
    assert counter.histogram_reads() == [["gradients/dense_2/kernel"]]
    assert rows == [1], "metrics were recomputed for steps already computed"
    assert hm["steps"][-1] == 20
    row = hm["values"][hm["layers"].index("dense_2/kernel")]
    assert row[-1] > 1e2 and all(v is not None for v in row)
    # The old steps' values are the ones computed before, and the new one joins them.
    again = client.ok("/series", run="run", layer="dense_2/kernel", metric="max_abs", role="gradient")
    assert again["series"]["gradient"]["steps"] == list(range(21))
    findings = client.ok("/findings", run="run")["findings"]
    assert any(f["kind"] == "exploding_gradients" and "dense_2/kernel" in f["layers"] for f in findings)


def test_reused_rows_give_the_same_metrics_as_a_fresh_read(counted, plugin_client, tmp_path):
    client, _, _, path, rng = counted
    client.ok("/runs")
    append_events(path, [_step_event(rng, s) for s in range(20, 25)])
    client.reload()
    grown = client.ok("/heatmap", run="run", role="weight", metric="std")
    fresh = plugin_client(tmp_path).ok("/heatmap", run="run", role="weight", metric="std")
    assert grown == fresh


def test_tag_cache_is_bounded_and_thread_safe():
    cache = cache_lib.TagCache(max_bytes=10_000)

    def work(worker):
        for i in range(2000):
            key = ("e", "run", "histograms", f"t{(worker * 7 + i) % 50}")
            cache.put(key, (i,), i, 300)
            got = cache.get(key, (i,))
            assert got in (None, i)  # another worker may have replaced or evicted it since
            peeked = cache.peek(key)
            assert peeked is None or isinstance(peeked, int)

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    assert cache.nbytes <= 10_000
    assert cache.get(("e", "run", "histograms", "t0"), ("stale",)) is None


def test_tag_cache_keeps_one_entry_larger_than_its_bound():
    cache = cache_lib.TagCache(max_bytes=100)
    cache.put(("a",), (1,), "small", 60)
    cache.put(("b",), (1,), "big", 1000)
    assert cache.get(("a",), (1,)) is None  # least recently used goes first
    assert cache.get(("b",), (1,)) == "big"


def test_tags_are_sorted_into_layers_again_only_when_the_runs_tags_change(counted, monkeypatch):
    from gradhealth_plugin.reading import runs as runs_lib

    client, _, _, path, rng = counted
    calls = []
    real = runs_lib.classify_run_tags

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(runs_lib, "classify_run_tags", counting)
    client.ok("/runs")
    append_events(path, [_step_event(rng, 20)])
    client.reload()
    (run,) = client.ok("/runs")["runs"]
    assert run["last_step"] == 20
    assert len(calls) == 1, "a run that only grew had its tags classified again"
    append_events(path, [event(21, hist_value("gradients/dense_9/kernel", normal_buckets(rng, 1e-2)))])
    client.reload()
    (run,) = client.ok("/runs")["runs"]
    assert len(calls) == 2 and "gradients/dense_9/kernel" in calls[-1]
    assert "dense_9/kernel" in [layer["name"] for layer in run["layers"]]


def test_the_garbage_collector_runs_again_after_a_run_is_read_even_when_reading_fails(counted, monkeypatch):
    import gc

    from gradhealth_plugin.reading import runs as runs_lib

    client, _, _, _, _ = counted
    assert gc.isenabled()
    client.ok("/runs")
    assert gc.isenabled(), "reading a run left the garbage collector paused"

    def failing(*args, **kwargs):
        assert not gc.isenabled(), "the collector was not paused while the run was built"
        raise RuntimeError("crafted failure")

    monkeypatch.setattr(runs_lib, "build_run", failing)
    client.reload()
    client.plugin._analyzer._reader._cache.clear()
    status, body = client.get("/heatmap", run="run")
    assert status == 422 and "crafted failure" in body["error"]
    assert gc.isenabled(), "a failed read left the garbage collector paused"
    gc.disable()  # paused by the host: reading leaves it paused
    try:
        client.get("/heatmap", run="run")
        assert not gc.isenabled()
    finally:
        gc.enable()
