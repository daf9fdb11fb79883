"""Whether a run's data changed, told without listing it under TensorBoard's Python loader.

Under the Python loader the plugin has the multiplexer: a request for a run whose
kept events are the ones it saw last (`provider._Held`) is answered without asking
the data provider to list the run's tags. Every change is seen by the next request,
under both loaders: appended steps, a new tag at the last step, a deleted run, a
restart that purges steps (and leaves the last event kept as it was), and the
answers are the ones a fresh TensorBoard gives, with the multiplexer or without.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.conftest import PluginClient
from tests.test_bad_input import append_events, event, hist_value, normal_buckets, scalar_value, write_run
from tests.test_fast_read import _answers
from tests.test_warm_requests import _record

LAYERS = 3
STEPS = 8


def _values(rng, step: int, layers: int = LAYERS):
    return [hist_value(f"gradients/dense_{i}/kernel", normal_buckets(rng, 1e-2 * (i + 1) * (1 + step % 3)))
            for i in range(layers)] + [scalar_value("loss", 1.0 / (step + 1))]


def _start(step: int):
    """A SessionLog.START: the Python loader purges every kept event from its step on, after the first."""
    from tensorboard.compat.proto import event_pb2

    return event_pb2.Event(step=step, wall_time=1_000_000.0 + step,
                           session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))


def _logdir(root, rng):
    """Runs `run` (steps 0 .. STEPS-1, begun by a session start) and `other`."""
    write_run(root / "run", [_start(0)] + [event(s, *_values(rng, s)) for s in range(STEPS)])
    write_run(root / "other", [event(s, *_values(rng, s)) for s in range(STEPS)])
    return root


def _event_file(run_dir):
    return next(p for p in run_dir.iterdir() if "tfevents" in p.name)


def _seen(client) -> dict:
    """The answers a tab asks for: the run list, and each run's heatmap, findings and track."""
    out = {"runs": client.ok("/runs")}
    for entry in out["runs"]["runs"]:
        run = entry["run"]
        out[run] = (client.ok("/heatmap", run=run, role="gradient", metric="std"),
                    client.ok("/findings", run=run), client.ok("/track", run=run))
    return out


def _change(loader_client, client, logdir, tmp_path_factory, change):
    """Applies `change(root)` to the data `client` serves, as its loader's next reload shows it;
    returns a fresh client on the changed data, which has seen nothing before.

    The Python loader reloads its logdir. The Rust client loads its logdir once: a second data
    server on a changed copy stands for the first after its next reload, asked by the same
    plugin with its caches.
    """
    if loader_client.loader == "python":
        change(logdir)
        client.reload()
        return PluginClient(logdir)
    changed = tmp_path_factory.mktemp("changed")
    shutil.copytree(logdir, changed, dirs_exist_ok=True)
    change(changed)
    fresh = loader_client(changed)
    # The provider and the direct gRPC reads made from it: both point at the changed data server.
    reader, other = client.plugin._analyzer._reader, fresh.plugin._analyzer._reader
    reader._provider, reader._grpc = other._provider, other._grpc
    return fresh


def _warm_then_changed(loader_client, tmp_path, tmp_path_factory, change):
    """(what a warmed client served before `change`, after it, and what a fresh client serves after it)."""
    logdir = _logdir(tmp_path, np.random.default_rng(7))
    client = loader_client(logdir)
    before = _seen(client)
    assert _seen(client) == before  # warm: answered from what was kept
    fresh = _change(loader_client, client, logdir, tmp_path_factory, change)
    after = _seen(client)
    assert after == _seen(fresh)
    assert after != before
    return before, after


def test_appended_steps_are_seen(tmp_path, loader_client, tmp_path_factory):
    rng = np.random.default_rng(8)

    def append(root):
        append_events(_event_file(root / "run"), [event(s, *_values(rng, s)) for s in (STEPS, STEPS + 1)])

    before, after = _warm_then_changed(loader_client, tmp_path, tmp_path_factory, append)
    assert before["run"][0]["steps"][-1] == STEPS - 1 and after["run"][0]["steps"][-1] == STEPS + 1
    assert after["other"] == before["other"]


def test_a_new_tag_at_the_last_step_is_seen(tmp_path, loader_client, tmp_path_factory):
    # At the last step's step and wall time: no kept event of the other tags changes.
    rng = np.random.default_rng(9)

    def new_tag(root):
        append_events(_event_file(root / "run"),
                      [event(STEPS - 1, hist_value("gradients/dense_9/kernel", normal_buckets(rng)))])

    before, after = _warm_then_changed(loader_client, tmp_path, tmp_path_factory, new_tag)
    assert "dense_9/kernel" not in before["run"][0]["layers"]
    assert after["run"][0]["layers"][-1] == "dense_9/kernel"


def test_a_deleted_run_is_seen(tmp_path, loader_client, tmp_path_factory):
    before, after = _warm_then_changed(loader_client, tmp_path, tmp_path_factory,
                                       lambda root: shutil.rmtree(root / "other"))
    assert [r["run"] for r in before["runs"]["runs"]] == ["other", "run"]
    assert [r["run"] for r in after["runs"]["runs"]] == ["run"]
    assert after["run"] == before["run"]


def test_a_restart_that_purges_is_seen(tmp_path, loader_client, tmp_path_factory):
    """A restart at step 5 after steps 0..7, 20, then 3 again: the Python loader drops the kept events
    from step 5 on, and the last one kept (step 3's) stays as it was; only their count tells."""
    rng = np.random.default_rng(10)

    def restart(root):
        append_events(_event_file(root / "run"), [event(20, *_values(rng, 20)), event(3, *_values(rng, 3))])

    def purge(root):
        append_events(_event_file(root / "run"), [_start(5)])

    logdir = _logdir(tmp_path, np.random.default_rng(7))
    restart(logdir)
    client = loader_client(logdir)
    before = _seen(client)
    assert _seen(client) == before
    fresh = _change(loader_client, client, logdir, tmp_path_factory, purge)
    after = _seen(client)
    assert after == _seen(fresh)
    if loader_client.loader == "python":
        assert before["run"][0]["steps"] == [0, 1, 2, 3, 4, 5, 6, 7, 20]
        assert after["run"][0]["steps"] == [0, 1, 2, 3, 4]


def test_a_warm_request_lists_nothing_under_the_python_loader(tmp_path):
    rng = np.random.default_rng(11)
    _logdir(tmp_path, rng)
    for name in ("rank0", "rank1"):
        write_run(tmp_path / name, [event(s, *_values(rng, s)) for s in range(STEPS)])
    client = PluginClient(tmp_path)
    before = _seen(client)
    recorder = _record(client)
    assert _seen(client) == before
    # Ranks' requests still ask which runs TensorBoard holds (no tag is listed for it).
    assert {c[0] for c in recorder.calls} == {"list_runs"}
    assert client.ok("/runs")["runs"] == before["runs"]["runs"]
    # Changed data is listed (and read) again: the listing is what tells what changed.
    append_events(_event_file(tmp_path / "run"), [event(STEPS, *_values(rng, STEPS))])
    client.reload()
    assert client.ok("/heatmap", run="run", role="gradient", metric="std")["steps"][-1] == STEPS
    assert ("list_tensors", "histograms", ("run",)) in recorder.calls


def test_the_answers_are_the_same_with_the_multiplexer_and_without(tmp_path):
    rng = np.random.default_rng(12)
    logdir = _logdir(tmp_path, rng)
    fast, slow = PluginClient(logdir), PluginClient(logdir, multiplexer=False)
    assert fast.plugin._analyzer._reader._held_in is not None
    assert slow.plugin._analyzer._reader._held_in is None
    changes = [
        [event(s, *_values(rng, s)) for s in (STEPS, STEPS + 1)],
        [event(STEPS + 1, hist_value("gradients/dense_9/kernel", normal_buckets(rng)))],
        [event(30, *_values(rng, 30)), event(4, *_values(rng, 4))],
        [_start(6)],
    ]
    for i in range(len(changes) + 1):
        a, b = _answers(fast), _answers(slow)
        assert a == _answers(fast)  # warm
        assert a.keys() == b.keys()
        differ = [key for key in a if a[key] != b[key]]
        assert not differ, (i, differ[:5])
        if i < len(changes):
            append_events(_event_file(logdir / "run"), changes[i])
            fast.reload()
            slow.reload()


def test_an_event_added_and_purged_again_is_not_the_same_held(tmp_path):
    """The same kept events after an event was added and purged again: a listing made meanwhile
    saw the added one, so what was held before it must not match what is held after."""
    from gradhealth_plugin.reading import provider

    logdir = _logdir(tmp_path, np.random.default_rng(13))
    client = PluginClient(logdir)
    held = provider._Held(client.multiplexer, ["run"])
    assert provider._Held(client.multiplexer, ["run"]) == held
    append_events(_event_file(logdir / "run"), [event(STEPS, *_values(np.random.default_rng(1), STEPS)),
                                                _start(STEPS)])
    client.reload()
    kept = client.multiplexer.Tensors("run", "gradients/dense_0/kernel")
    assert [e.step for e in kept] == list(range(STEPS))
    assert provider._Held(client.multiplexer, ["run"]) != held
    assert provider._Held(client.multiplexer, ["other"]) == provider._Held(client.multiplexer, ["other"])


def test_what_is_held_is_read_from_the_reservoirs_without_copying_their_events(tmp_path, monkeypatch):
    """`_Held` takes each tag's count of kept events and its last one as ``Tensors`` gives them,
    without asking ``Tensors`` for them (a copy of every kept event, per tag and per request)."""
    from gradhealth_plugin.reading import provider

    logdir = _logdir(tmp_path, np.random.default_rng(14))
    client = PluginClient(logdir)
    acc = client.multiplexer.GetAccumulator("run")
    tags = [tag for tag in acc.AllSummaryMetadata() if tag in acc.tensors_by_tag]
    assert tags
    copied = {tag: acc.Tensors(tag) for tag in tags}
    assert provider._kept_count_and_last(acc, "no/such/tag") == (None, None)

    def no_copy(tag):
        raise AssertionError(f"every kept event of {tag} copied")

    monkeypatch.setattr(acc, "Tensors", no_copy)
    for tag in tags:
        count, last = provider._kept_count_and_last(acc, tag)
        assert (count, last) == (len(copied[tag]), copied[tag][-1])
        assert last is copied[tag][-1]


def test_a_request_naming_the_held_version_is_cut_from_it_without_listing(tmp_path, loader_client, tmp_path_factory):
    """``version=`` (a run's ``version`` in ``runs``): a zoom or a page of the data the tab shows."""
    rng = np.random.default_rng(12)
    logdir = _logdir(tmp_path, rng)
    client = loader_client(logdir)
    versions = {r["run"]: r["version"] for r in client.ok("/runs")["runs"]}
    held = versions["run"]
    # Named by the data: `other` was written with the same tags, steps and wall times.
    assert isinstance(held, str) and held == versions["other"]
    whole = dict(run="run", role="gradient", metric="std")
    zoom = dict(whole, start=2, end=5)
    shown = [client.ok("/heatmap", **whole), client.ok("/heatmap", **zoom), client.ok("/track", run="run"),
             client.ok("/findings", run="run")]

    def append(root):
        append_events(_event_file(root / "run"), [event(s, *_values(rng, s)) for s in (STEPS, STEPS + 1)])

    _change(loader_client, client, logdir, tmp_path_factory, append)
    recorder = _record(client)
    pinned = [client.ok("/heatmap", **whole, version=held), client.ok("/heatmap", **zoom, version=held),
              client.ok("/track", run="run", version=held), client.ok("/findings", run="run", version=held)]
    assert pinned == shown
    assert recorder.calls == [], "a request naming the version held listed or read the provider"
    # A version not held (an older one, a made-up one) is answered from the data as it is now.
    now = client.ok("/heatmap", **whole, version="0")
    assert now["steps"][-1] == STEPS + 1 and recorder.named("list_")
    # The run list names the new version; the old one is no longer held, and gets the new data too.
    newer = next(r["version"] for r in client.ok("/runs")["runs"] if r["run"] == "run")
    assert newer != held
    assert client.ok("/heatmap", **whole, version=held) == now
    assert client.ok("/heatmap", **whole, version=newer) == now
