"""A repeated request for unchanged data: what it asks of the data provider, under both loaders.

Every request lists the run's tags to learn whether its data changed (under the Python
loader only when its multiplexer says the run changed: test_versions.py); a warm request
reads no tensor, asks each plugin's listing once and all of them at once, and a
rank of a training lists its training's runs once. New data on the provider is seen
by the next request.
"""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest

from tests.conftest import PluginClient

from tests.test_bad_input import append_events, event, hist_value, normal_buckets, scalar_value, write_run

LAYERS = 3


def _step_event(rng, step: int):
    values = [hist_value(f"gradients/dense_{i}/kernel", normal_buckets(rng, 1e-2 * (i + 1))) for i in range(LAYERS)]
    return event(step, *values, scalar_value("loss", 1.0 / (step + 1)))


class Recorder:
    """A data provider that passes every call through and records what was asked of it."""

    def __init__(self, inner):
        self._inner = inner
        self._lock = threading.Lock()
        self.calls = []  # (method, plugin or None, runs of the filter or None)

    def _record(self, method, kwargs):
        flt = kwargs.get("run_tag_filter")
        runs = None if flt is None or flt.runs is None else tuple(sorted(flt.runs))
        with self._lock:
            self.calls.append((method, kwargs.get("plugin_name"), runs))

    def __getattr__(self, name):
        inner = getattr(self._inner, name)
        if not name.startswith(("list_", "read_")):
            return inner

        def recorded(ctx=None, **kwargs):
            self._record(name, kwargs)
            return inner(ctx, **kwargs)

        return recorded

    def named(self, prefix):
        return [c for c in self.calls if c[0].startswith(prefix)]


class _Direct:
    """A reader around the provider (the Python loader's multiplexer, the Rust data server's gRPC stub)
    whose reads a Recorder counts as the provider's ``read_tensors``."""

    def __init__(self, inner, recorder: Recorder):
        self.inner, self._recorder = inner, recorder

    def tensors(self, *args):
        plugin, run = args[-3], args[-2]
        self._recorder._record("read_tensors", {"plugin_name": plugin, "run_tag_filter": _Runs((run,))})
        return self.inner.tensors(*args)


class _Runs:
    def __init__(self, runs):
        self.runs = runs


def _record(client) -> Recorder:
    """The client's plugin asks its provider through a Recorder from now on (its caches are kept),
    and the reads around the provider are recorded as its reads."""
    reader = client.plugin._analyzer._reader
    recorder = Recorder(reader._provider)
    reader._provider = recorder
    for name in ("_grpc", "_multiplexer"):
        if getattr(reader, name) is not None:
            setattr(reader, name, _Direct(getattr(reader, name), recorder))
    return recorder


def _counted_client(loader_client, logdir):
    """A client whose tensor reads all go through its data provider, where a Recorder counts them:
    under the Python loader, without the multiplexer, whose fast path reads around the provider."""
    return PluginClient(logdir, multiplexer=False) if loader_client.loader == "python" else loader_client(logdir)


@pytest.fixture
def logdir(tmp_path):
    rng = np.random.default_rng(3)
    write_run(tmp_path / "run", [_step_event(rng, s) for s in range(12)])
    return tmp_path


def test_a_warm_request_reads_nothing_and_lists_each_plugin_once(logdir, loader_client):
    client = loader_client(logdir)
    params = dict(run="run", role="gradient", columns=8, layout="compact")
    first = client.raw("/heatmap", **params).get_data()
    recorder = _record(client)
    assert client.raw("/heatmap", **params).get_data() == first
    assert recorder.named("read_") == [], "a warm request read tensors"
    if loader_client.loader == "python":
        # The multiplexer tells the run is unchanged (test_versions.py): nothing is listed.
        assert recorder.named("list_") == []
        return
    # The run alone, each plugin once: what the data version is known from.
    assert sorted(recorder.named("list_")) == [("list_scalars", "scalars", ("run",)),
                                               ("list_tensors", "gradhealth", ("run",)),
                                               ("list_tensors", "histograms", ("run",))]


class _Together:
    """A provider whose listings answer only once all three plugins' listings are being asked:
    asked one after another, the first waits in vain and the request fails."""

    def __init__(self, inner):
        self._inner = inner
        self._barrier = threading.Barrier(3, timeout=20)

    def __getattr__(self, name):
        inner = getattr(self._inner, name)
        if name not in ("list_tensors", "list_scalars"):
            return inner

        def together(ctx=None, **kwargs):
            self._barrier.wait()
            return inner(ctx, **kwargs)

        return together


def test_the_three_listings_are_asked_at_once(logdir, loader_client):
    # The Rust data server answers a listing of more than one tag about 40 ms late: asked at
    # once, a request waits for that once rather than once per plugin.
    client = loader_client(logdir)
    reader = client.plugin._analyzer._reader
    reader._provider = _Together(reader._provider)
    hm = client.ok("/heatmap", run="run", role="gradient")
    assert hm["layers"] == [f"dense_{i}/kernel" for i in range(LAYERS)]
    assert client.ok("/heatmap", run="run", role="gradient") == hm


def test_a_warm_request_sees_new_steps(logdir, loader_client, tmp_path_factory):
    client = _counted_client(loader_client, logdir)
    before = client.ok("/heatmap", run="run", role="gradient", metric="std")
    assert before["steps"][-1] == 11
    rng = np.random.default_rng(4)
    if loader_client.loader == "python":
        append_events(next((logdir / "run").iterdir()), [_step_event(rng, 12)])
        client.reload()
        recorder = _record(client)
    else:
        # The Rust client loads its logdir once: a second data server on the grown logdir stands
        # for the first after its next reload, asked by the same plugin with its caches.
        grown = tmp_path_factory.mktemp("grown")
        shutil.copytree(logdir / "run", grown / "run")
        append_events(next((grown / "run").iterdir()), [_step_event(rng, 12)])
        fresh = loader_client(grown)
        recorder = _record(client)
        recorder._inner = fresh.plugin._analyzer._reader._provider
        if fresh.plugin._analyzer._reader._grpc is not None:
            client.plugin._analyzer._reader._grpc.inner = fresh.plugin._analyzer._reader._grpc
    after = client.ok("/heatmap", run="run", role="gradient", metric="std")
    assert after["steps"][-1] == 12
    assert after["values"][0][:-1] == before["values"][0]
    # Only the tags that grew are read again.
    assert sorted(runs for _, plugin, runs in recorder.named("read_tensors")) == [("run",)]


def test_a_rank_lists_its_training_once(tmp_path, loader_client):
    rng = np.random.default_rng(5)
    for name in ("rank0", "rank1", "rank2", "other"):
        write_run(tmp_path / name, [_step_event(rng, s) for s in range(6)])
    client = loader_client(tmp_path)
    params = dict(run="rank1", role="gradient")
    first = client.ok("/heatmap", **params)
    recorder = _record(client)
    assert client.ok("/heatmap", **params) == first
    assert client.ok("/findings", run="rank1")["run"] == "rank1"
    listed = recorder.named("list_")
    # Per request: the runs TensorBoard names (no tag listed), then one listing of the training's runs.
    training = ("rank0", "rank1", "rank2")
    # Under the Python loader the training's runs are not listed while unchanged (test_versions.py).
    tags = [] if loader_client.loader == "python" else [("list_scalars", "scalars", training),
                                                        ("list_tensors", "gradhealth", training),
                                                        ("list_tensors", "histograms", training)]
    assert sorted(listed, key=repr) == sorted(2 * ([("list_runs", None, None)] + tags), key=repr)
    assert recorder.named("read_") == []


def test_a_rank_sees_another_rank_change(tmp_path, loader_client, tmp_path_factory):
    """A request for one rank reads another rank's new steps: the training's judgement is made
    again when any rank's data changed."""
    rng = np.random.default_rng(6)
    for name in ("rank0", "rank1"):
        write_run(tmp_path / name, [_step_event(rng, s) for s in range(10)])
    client = _counted_client(loader_client, tmp_path)
    before = client.ok("/findings", run="rank1")
    steps = [_step_event(rng, s) for s in range(10, 14)]
    if loader_client.loader == "python":
        append_events(next((tmp_path / "rank0").iterdir()), steps)
        client.reload()
    else:
        grown = tmp_path_factory.mktemp("grown_ranks")
        for name in ("rank0", "rank1"):
            shutil.copytree(tmp_path / name, grown / name)
        append_events(next((grown / "rank0").iterdir()), steps)
        reader, other = client.plugin._analyzer._reader, loader_client(grown).plugin._analyzer._reader
        reader._provider, reader._grpc = other._provider, other._grpc
    recorder = _record(client)
    after = client.ok("/findings", run="rank1")
    assert after["run"] == before["run"] == "rank1"
    # rank0's new steps were read (its listing changed) by rank1's request, and rank1 was not read again.
    assert [runs for _, plugin, runs in recorder.named("read_tensors")] == [("rank0",)]
