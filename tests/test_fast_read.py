"""Under TensorBoard's Python loader, histograms are read straight from its multiplexer.

`provider.Reader._read_tensors` decodes a tag's samples together (`provider._decoded`)
where every one is a float tensor of one dtype and shape, and leaves every other tag
to the data provider's ``read_tensors``. Nothing may tell the two apart: the same
datums, and byte for byte the same answers on every route, on odd histograms
(float32, float16, legacy TF1 protos, one bucket, empty, NaN edges, text, ragged,
mixed dtypes), the demo runs and the real-world corpus.

Also here, what else makes a run of many tags cheap to read: series whole at first
sight counted together, and the collector paused while a run is analysed.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tests.conftest import REPO, WILD, PluginClient
from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

RUN = "odd"


def _legacy_value(tag: str, buckets: np.ndarray):
    """A TF1 HistogramProto summary (what tensorboardX and TF 1.x write), from [k, 3] buckets."""
    from tensorboard.compat.proto import summary_pb2

    histo = summary_pb2.HistogramProto(min=float(buckets[0, 0]), max=float(buckets[-1, 1]),
                                       num=float(buckets[:, 2].sum()), sum=0.0, sum_squares=1.0,
                                       bucket_limit=buckets[:, 1].tolist(), bucket=buckets[:, 2].tolist())
    return summary_pb2.Summary.Value(tag=tag, histo=histo)


def _text_value(tag: str):
    """A string tensor under the histograms plugin: no numbers at all."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.histogram import metadata as hist_metadata
    from tensorboard.util import tensor_util

    value = summary_pb2.Summary.Value(tag=tag, tensor=tensor_util.make_tensor_proto(np.array([b"a", b"b", b"c"])))
    value.metadata.CopyFrom(hist_metadata.create_summary_metadata(display_name="", description=""))
    return value


# Tags the multiplexer's samples can be decoded together for, and the ones left to the provider.
DECODED = ("f64/kernel", "f32/kernel", "one_bucket/kernel", "nan_edges/kernel", "legacy/kernel", "vector/kernel",
           "rewritten/kernel", "f64/kernel/gradient", "f32/kernel/gradient", "one_bucket/kernel/gradient")
# float16 values are written in the proto's half_val, not in its tensor_content.
PROVIDED = ("f16/kernel", "reshaped/kernel", "empty/kernel", "ragged/kernel", "mixed/kernel", "text/kernel",
            "legacy_ragged/kernel")


def _odd_run(root, rng):
    """One run of odd histograms, a gradient and a weight per layer, and a loss."""
    events = []
    for step in range(8):
        b = normal_buckets(rng, k=30)
        nan_edges = b.copy()
        nan_edges[3, 0] = np.nan
        values = [
            hist_value("f64/kernel", b),
            hist_value("f32/kernel", b, dtype=np.float32),
            hist_value("f16/kernel", b, dtype=np.float16),
            hist_value("one_bucket/kernel", [[-0.5, 0.5, 100.0]]),
            hist_value("nan_edges/kernel", nan_edges),
            hist_value("empty/kernel", np.zeros((0, 3))),
            hist_value("ragged/kernel", normal_buckets(rng, k=10 + step)),
            hist_value("mixed/kernel", b, dtype=np.float32 if step % 2 else np.float64),
            hist_value("vector/kernel", np.arange(10.0) * step),
            # As many bytes every step, in another shape every other step.
            hist_value("reshaped/kernel", b if step % 2 else b.reshape(-1)),
            _text_value("text/kernel"),
            _legacy_value("legacy/kernel", normal_buckets(rng, k=12)),
            _legacy_value("legacy_ragged/kernel", normal_buckets(rng, k=5 + step)),
            scalar_value("loss", 1.0 / (step + 1)),
        ]
        for name in ("f64", "f32", "one_bucket"):
            values.append(hist_value(f"{name}/kernel/gradient", normal_buckets(rng, scale=1e-3 * (step + 1))))
        events.append(event(step, *values))
        if step == 3:  # a step written twice: the Python loader keeps both samples
            events.append(event(step, hist_value("rewritten/kernel", b), wall_time=2_000_000.0))
        events.append(event(step, hist_value("rewritten/kernel", normal_buckets(rng))))
    write_run(root / RUN, events)
    return root


@pytest.fixture(scope="module")
def odd_logdir(tmp_path_factory):
    return _odd_run(tmp_path_factory.mktemp("fast_read"), np.random.default_rng(11))


def _same_datums(fast, slow):
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        assert (a.step, a.wall_time) == (b.step, b.wall_time)
        assert a.numpy.dtype == b.numpy.dtype and a.numpy.shape == b.numpy.shape
        if b.numpy.dtype.kind == "f":
            np.testing.assert_array_equal(a.numpy, b.numpy)
        else:
            assert a.numpy.tolist() == b.numpy.tolist()


def test_decoded_tags_hold_what_read_tensors_gives(odd_logdir):
    from tensorboard import context as tb_context
    from tensorboard.data import provider as tb_provider

    from gradhealth_plugin.reading import provider, tables

    client = PluginClient(odd_logdir)
    dp = client.plugin._analyzer._reader._provider
    reader = provider.Reader(dp, multiplexer=client.multiplexer)
    ctx = tb_context.RequestContext()
    listed = list(dp.list_tensors(ctx, experiment_id="", plugin_name="histograms")[RUN])
    assert set(DECODED) | set(PROVIDED) <= set(listed)
    # Asked for with names of other plugins' tags and of no tag at all, as the provider is.
    asked = listed + ["loss", "no/such/tag"]
    fast = reader._read_tensors(ctx, "", "histograms", RUN, asked)
    slow = dp.read_tensors(ctx, experiment_id="", plugin_name="histograms", downsample=provider._ALL_SAMPLES,
                           run_tag_filter=tb_provider.RunTagFilter(runs=[RUN], tags=asked))[RUN]
    assert list(fast) == list(slow)  # the same tags, in the provider's order
    for tag in slow:
        _same_datums(fast[tag], slow[tag])
    assert len(fast["rewritten/kernel"]) == 9
    # The fast path was taken where it can be, and only there.
    assert {tag for tag, datums in fast.items() if isinstance(datums, tables.Samples)} == set(DECODED)
    assert reader._read_tensors(ctx, "", "histograms", "no such run", listed) == {}
    assert reader._read_tensors(ctx, "", "scalars", RUN, asked) == {}


def test_a_provider_that_is_not_the_multiplexers_own_is_read_through(odd_logdir):
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

    from gradhealth_plugin.reading import provider

    client = PluginClient(odd_logdir)
    other = plugin_event_multiplexer.EventMultiplexer()  # empty: read, it would find nothing
    reader = provider.Reader(data_provider.MultiplexerDataProvider(client.multiplexer, str(odd_logdir)),
                             multiplexer=other)
    read = reader._read_tensors(tb_context.RequestContext(), "", "histograms", RUN, ["f64/kernel"])
    assert len(read["f64/kernel"]) == 8


def _answers(client, max_layers=None) -> dict:
    """(route, params) -> (status, body bytes) of every route on every run, role and layer."""
    out = {}

    def get(route, **params):
        response = client.raw(route, **params)
        body = response.get_data()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        assert response.status_code in (200, 400, 404) and b"Traceback" not in body, (route, params, body[:300])
        out[(route, tuple(sorted(params.items())))] = (response.status_code, body)
        return json.loads(body)

    runs = get("/runs")
    get("/sweep")
    for entry in runs["runs"]:
        run = entry["run"]
        get("/findings", run=run)
        get("/track", run=run)
        for role in entry.get("roles", []):
            heatmaps = [get("/heatmap", run=run, role=role, metric=m) for m in ("health", "mean", "std", "nonfinite")]
            get("/heatmap", run=run, role=role, metric="health", columns=3)
            steps = heatmaps[0]["steps"]
            picks = sorted({steps[0], steps[len(steps) // 2], steps[-1]}) if steps else []
            layers = [layer for layer in entry["layers"] if role in layer["roles"]][:max_layers]
            for layer in layers:
                get("/distribution", run=run, layer=layer["name"], role=role)
                get("/series", run=run, layer=layer["name"], metric="max_abs", role=role)
                for step in picks:
                    get("/cell", run=run, layer=layer["name"], step=step, role=role)
    return out


def _assert_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    differ = [key for key in a if a[key] != b[key]]
    assert not differ, differ[:5]


def _assert_same_answers(logdir, samples=None, max_layers=None):
    fast = PluginClient(logdir, samples=samples)
    slow = PluginClient(logdir, samples=samples, multiplexer=False)
    assert fast.plugin._analyzer._reader._multiplexer is not None
    assert slow.plugin._analyzer._reader._multiplexer is None
    a, b = _answers(fast, max_layers), _answers(slow, max_layers)
    _assert_equal(a, b)
    return a


def test_odd_histograms_answer_the_same_read_either_way(odd_logdir):
    answers = _assert_same_answers(odd_logdir)
    summary = json.loads(answers[("/runs", ())][1])["runs"][0]
    # Read either way, text and a vector of 10 numbers (no [k, 3] buckets) are reported and the rest served.
    assert [u["tag"] for u in summary["unreadable"]] == ["text/kernel", "vector/kernel"]
    names = {layer["name"] for layer in summary["layers"]}
    assert {"f64/kernel", "f32/kernel", "f16/kernel", "legacy/kernel", "nan_edges/kernel"} <= names, names


def test_demo_runs_answer_the_same_read_either_way():
    runs = REPO / "demo" / "runs"
    if not any(runs.rglob("*tfevents*")):
        pytest.skip(f"no demo runs in {runs}")
    _assert_same_answers(runs, max_layers=6)


@pytest.mark.skipif(not WILD.is_dir(), reason=f"real-world event-file corpus not found at {WILD}")
@pytest.mark.parametrize("samples", [None, {"histograms": 7, "scalars": 7}])
def test_wild_runs_answer_the_same_read_either_way(samples):
    _assert_same_answers(WILD, samples=samples, max_layers=6)


def _tag_sampling_one_by_one(kept_steps, max_steps, samples):
    """`runs.tag_sampling` as it reads every series alone with `series.logged_steps`."""
    from gradhealth_plugin.analysis import series

    def logged(key, steps, first=None):
        return series.logged_steps(steps, max_steps.get(key), samples.get(key[0]), first)

    out = {key: logged(key, steps) for key, steps in kept_steps.items()}
    whole = [steps for key, steps in kept_steps.items() if len(steps) and not out[key][1]]
    first = int(min(int(steps[0]) for steps in whole)) if whole else None
    if first is not None:
        out.update({key: logged(key, kept_steps[key], first) for key, found in out.items() if found[1]})
    return out


def test_series_found_whole_together_count_as_found_one_by_one():
    from gradhealth_plugin.reading import runs

    rng = np.random.default_rng(8)
    for trial in range(200):
        kept, listed = {}, {}
        samples = {"histograms": [3.0, 5.0, np.inf][trial % 3], "scalars": 4.0}  # no capacity for gradhealth
        for i in range(int(rng.integers(1, 30))):
            plugin = ("histograms", "scalars", "gradhealth")[int(rng.integers(3))]
            n = int(rng.integers(0, 7))
            gaps = rng.choice([1, 2, 3, 10], size=max(n - 1, 0)) if rng.random() < 0.5 else np.full(max(n - 1, 0), 5)
            steps = int(rng.integers(0, 20)) + np.concatenate([[0], np.cumsum(gaps)]).astype(np.int64)[:n]
            if n > 2 and rng.random() < 0.1:  # a step twice, or out of order
                steps[1] = steps[2 if rng.random() < 0.5 else 0]
            kept[(plugin, f"t{i}")] = steps
            last = int(steps.max()) if n else 0
            listed[(plugin, f"t{i}")] = [None, last, last + int(rng.integers(1, 30)), last - 1][int(rng.integers(4))]
        assert runs.tag_sampling(kept, listed, samples) == _tag_sampling_one_by_one(kept, listed, samples), trial


def test_the_collector_is_paused_while_a_run_is_analysed_and_resumed_after(odd_logdir, monkeypatch):
    # A run of many tags makes hundreds of thousands of objects the analysis drops again: collecting
    # meanwhile sets off full collections over everything TensorBoard loaded.
    import gc

    from gradhealth_plugin.analysis import findings

    seen = []
    real = findings.find

    def recording(rd, limits, only=None):
        seen.append(gc.isenabled())
        return real(rd, limits, only)

    monkeypatch.setattr(findings, "find", recording)
    assert gc.isenabled()
    PluginClient(odd_logdir).ok("/findings", run=RUN)
    assert seen == [False] and gc.isenabled()


# Under the Rust data server, the plugin sends the gRPC provider's own request through its stub and
# decodes each tag's samples together (`provider._Grpc`): the same datums, the same answers.

class _ProviderOnly:
    """The plugin's routes on a Rust client's data provider, every read through ``read_tensors``."""

    def __init__(self, rust) -> None:
        from tensorboard.plugins import base_plugin
        from werkzeug import test as werkzeug_test
        from werkzeug import wrappers

        from gradhealth_plugin import plugin

        dp = rust.plugin._analyzer._reader._provider
        self.plugin = plugin.GradHealthPlugin(base_plugin.TBContext(logdir="", data_provider=dp), None)
        self.plugin._analyzer._reader._grpc = None
        apps = self.plugin.get_plugin_apps()
        self.raw = lambda route, **params: werkzeug_test.Client(apps[route], wrappers.Response).get(
            route, query_string=params)


# Layers per run and role whose own routes are compared under the data server: each request there pays
# its listing's ~40 ms, and every layer of a run is read in the same bulk reads as the first two.
RUST_LAYERS = 2


def _assert_same_answers_rust(logdir, samples=None, max_layers=None):
    from tests.conftest import RustPluginClient

    fast = RustPluginClient(logdir, samples=samples)
    try:
        assert fast.plugin._analyzer._reader._grpc is not None
        a, b = _answers(fast, max_layers), _answers(_ProviderOnly(fast), max_layers)
    finally:
        fast.close()
    _assert_equal(a, b)
    return a


def test_grpc_reads_hold_what_the_grpc_providers_read_tensors_gives(odd_logdir):
    from tensorboard import context as tb_context
    from tensorboard.data import provider as tb_provider

    from gradhealth_plugin.reading import provider, tables
    from tests.conftest import RustPluginClient

    client = RustPluginClient(odd_logdir)
    try:
        reader = client.plugin._analyzer._reader
        dp = reader._provider
        ctx = tb_context.RequestContext()
        listed = list(dp.list_tensors(ctx, experiment_id="", plugin_name="histograms")[RUN])
        assert set(DECODED) | set(PROVIDED) <= set(listed)
        asked = listed + ["loss", "no/such/tag"]
        fast = reader._read_tensors(ctx, "", "histograms", RUN, asked)
        slow = dp.read_tensors(ctx, experiment_id="", plugin_name="histograms", downsample=provider._ALL_SAMPLES,
                               run_tag_filter=tb_provider.RunTagFilter(runs=[RUN], tags=asked))[RUN]
        assert list(fast) == list(slow)  # the same tags, in the provider's order
        for tag in slow:
            _same_datums(fast[tag], slow[tag])
        # Decoded together wherever the data server hands a float tensor's bytes: at least the tags the
        # multiplexer's are decoded for (it writes legacy histograms as float64 tensors, float16 too).
        together = {tag for tag, datums in fast.items() if isinstance(datums, tables.Samples)}
        assert set(DECODED) <= together and "text/kernel" not in together, together
        assert not together & {"ragged/kernel", "mixed/kernel", "empty/kernel", "legacy_ragged/kernel"}
        assert reader._read_tensors(ctx, "", "histograms", "no such run", listed) == {}
        assert reader._read_tensors(ctx, "", "scalars", RUN, asked) == {}
    finally:
        client.close()


def test_odd_histograms_answer_the_same_read_either_way_from_the_rust_data_server(odd_logdir):
    answers = _assert_same_answers_rust(odd_logdir)
    summary = json.loads(answers[("/runs", ())][1])["runs"][0]
    assert [u["tag"] for u in summary["unreadable"]] == ["text/kernel", "vector/kernel"]


def test_demo_runs_answer_the_same_read_either_way_from_the_rust_data_server():
    runs = REPO / "demo" / "runs"
    if not any(runs.rglob("*tfevents*")):
        pytest.skip(f"no demo runs in {runs}")
    _assert_same_answers_rust(runs, max_layers=RUST_LAYERS)


@pytest.mark.skipif(not WILD.is_dir(), reason=f"real-world event-file corpus not found at {WILD}")
@pytest.mark.parametrize("samples", [None, {"histograms": 7, "scalars": 7}])
def test_wild_runs_answer_the_same_read_either_way_from_the_rust_data_server(samples):
    _assert_same_answers_rust(WILD, samples=samples, max_layers=RUST_LAYERS)


def test_a_failed_grpc_read_is_told_as_the_providers_error():
    # The data server gone or refusing: the plugin says what TensorBoard's provider says of it.
    import grpc
    from tensorboard import context as tb_context
    from tensorboard import errors
    from tensorboard.data import grpc_provider

    from gradhealth_plugin.reading import provider

    class Refused(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.NOT_FOUND

        def details(self):
            return "no such experiment"

    class Stub:
        asked = 0

        def ReadTensors(self, request):
            Stub.asked += 1
            raise Refused()

    reader = provider.Reader(grpc_provider.GrpcDataProvider("nowhere", Stub()))
    assert reader._grpc is not None
    with pytest.raises(errors.NotFoundError):
        reader._read_tensors(tb_context.RequestContext(), "", "histograms", RUN, ["f64/kernel"])
    assert Stub.asked == 2  # once through the stub, once by the provider
