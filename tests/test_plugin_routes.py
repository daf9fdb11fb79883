"""Every route of the plugin through werkzeug's test client, on a logdir TF2 wrote.

Run ``mlp``: a small MLP trained with a TF2 custom loop logs ``gradients/<var.name>``,
``weights/<var.name>`` and ``activations/<layer>`` histograms every 5 steps; the
``dense/bias`` gradient only every 10 steps (so its heatmap row has holes), one
gradient is blown up at the last logged step (critical), and a ReLU with a large negative
bias is mostly dead (warn). Run ``weights_only`` has weight histograms only.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradhealth_plugin import plugin
from gradhealth_plugin.analysis import metrics
from gradhealth_plugin.reading import tags as tags_lib

LOGGED = (0, 5, 10, 15, 20, 25)
BIAS_GRAD_STEPS = (0, 10, 20)
EXPLODE_STEP = LOGGED[-1]  # blown up at the last logged step, it never comes back: an explosion
KERNELS = ("dense/kernel", "dense_1/kernel")
PARAMS = ("dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias")
STATUS_NAMES = ["no_data", "ok", "warn", "critical"]


@pytest.fixture(scope="session")
def routes_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("routes_logdir")
    import tensorflow as tf

    tf.random.set_seed(7)
    rng = np.random.default_rng(7)
    x = tf.constant(rng.normal(size=(256, 4)), tf.float32)
    y = tf.constant(rng.integers(0, 3, 256))
    params = [
        tf.Variable(tf.random.normal((4, 16), stddev=0.5), name="dense/kernel"),
        tf.Variable(tf.zeros(16), name="dense/bias"),
        tf.Variable(tf.random.normal((16, 3), stddev=0.3), name="dense_1/kernel"),
        tf.Variable(tf.zeros(3), name="dense_1/bias"),
    ]
    w1, b1, w2, b2 = params
    writer = tf.summary.create_file_writer(str(logdir / "mlp"))
    with writer.as_default():
        for step in range(LOGGED[-1] + 1):
            with tf.GradientTape() as tape:
                hidden = tf.nn.relu(x @ w1 + b1)
                logits = hidden @ w2 + b2
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, params)
            if step in LOGGED:
                tf.summary.scalar("loss", loss, step=step)
                for v, g in zip(params, grads):
                    if v is w2 and step == EXPLODE_STEP:
                        g = g * 1e7
                    if v is not b1 or step in BIAS_GRAD_STEPS:
                        tf.summary.histogram(f"gradients/{v.name}", g, step=step)
                    tf.summary.histogram(f"weights/{v.name}", v, step=step)
                tf.summary.histogram("activations/dense", hidden, step=step)
                # Every unit dead: TF2's histogram of an all-zero tensor is [0, 0], an exact zero fraction
                # (a bucket [0, max/30] of a few survivors would only bound it, and judge nothing).
                tf.summary.histogram("activations/dead_relu", tf.nn.relu(x @ w1 - 100.0), step=step)
            for v, g in zip(params, grads):
                v.assign_sub(0.1 * g)
    writer.close()

    writer = tf.summary.create_file_writer(str(logdir / "weights_only"))
    with writer.as_default():
        for step in range(3):
            tf.summary.histogram("weights/w:0", rng.normal(0, 0.1, 1000), step=step)
    writer.close()
    return logdir


@pytest.fixture(scope="session")
def client(routes_logdir, plugin_client):
    return plugin_client(routes_logdir)


def _run(client, name):
    return next(r for r in client.ok("/runs")["runs"] if r["run"] == name)


# --- runs ------------------------------------------------------------------------------------


def test_runs_lists_every_run_with_layers_and_roles(client):
    body = client.ok("/runs")
    assert set(body) == {"runs", "config_problems"} and body["config_problems"] == []
    assert [r["run"] for r in body["runs"]] == ["mlp", "weights_only"]
    mlp = _run(client, "mlp")
    for key in ("layers", "roles", "scalars", "unclassified", "steps_kept", "last_step", "worst_status"):
        assert key in mlp, key
    assert mlp["roles"] == ["gradient", "weight", "activation"]
    assert mlp["steps_kept"] == len(LOGGED) and mlp["last_step"] == LOGGED[-1]
    assert mlp["unclassified"] == []
    assert mlp["scalars"] == {"loss": ["loss"]}
    layers = {layer["name"]: layer for layer in mlp["layers"]}
    assert set(layers) == set(PARAMS) | {"dense", "dead_relu"}
    for name in PARAMS:
        assert set(layers[name]["roles"]) == {"gradient", "weight"}
        # Nothing dropped: as many steps logged as kept.
        assert layers[name]["roles"]["weight"] == {"tags": [f"weights/{name}:0"], "source": "histogram",
                                                   "steps": len(LOGGED), "steps_logged": len(LOGGED),
                                                   "steps_logged_at_least": False, "dropped_by": [],
                                                   "decided_by": "convention"}
    assert mlp["steps_logged"] == len(LOGGED) and mlp["sampling"] is None
    assert layers["dense/bias"]["roles"]["gradient"]["steps"] == len(BIAS_GRAD_STEPS)
    assert layers["dense/kernel"]["kind"] == "kernel" and layers["dense/bias"]["kind"] == "bias"
    assert layers["dense/kernel"]["group"] == "dense"
    assert set(layers["dead_relu"]["roles"]) == {"activation"} and layers["dead_relu"]["kind"] == "output"
    assert sorted(layer["order"] for layer in mlp["layers"]) == list(range(len(layers)))


def test_runs_worst_status(client):
    assert _run(client, "mlp")["worst_status"] == "critical"
    only = _run(client, "weights_only")
    assert only["worst_status"] == "ok"
    assert only["roles"] == ["weight"] and only["steps_kept"] == 3 and only["last_step"] == 2


# --- heatmap ---------------------------------------------------------------------------------


def _check_heatmap_shape(hm, run, role, metric):
    assert hm["run"] == run and hm["role"] == role and hm["metric"] == metric
    rows, cols = len(hm["layers"]), len(hm["steps"])
    assert hm["steps"] == sorted(set(hm["steps"]))
    for key in ("values", "status", "rules"):
        assert len(hm[key]) == rows and all(len(row) == cols for row in hm[key]), key
    assert all(v is None or (isinstance(v, float) and math.isfinite(v)) or isinstance(v, int)
               for row in hm["values"] for v in row)
    assert all(s in (0, 1, 2, 3) for row in hm["status"] for s in row)
    for srow, rrow, vrow in zip(hm["status"], hm["rules"], hm["values"]):
        for s, r, v in zip(srow, rrow, vrow):
            assert (r is None) == (s == 0), (s, r)
            # A warn or critical cell names the finding kind; an ok cell names one only where its cell rule held.
            assert r != "" or s == 1, (s, r)
            if s == 0:
                assert v is None
    assert hm["status_names"] == STATUS_NAMES
    assert hm["scale"] == ("log" if metric in metrics.LOG_METRICS else "linear")
    assert hm["quality"] in (None, "exact", "estimated", "mixed", "upper_bound", "lower_bound", "finite_only", "not_judged",
                             "no_data")


@pytest.mark.parametrize("role", tags_lib.ROLES)
def test_heatmap_every_role_and_metric(client, role):
    for run in ("mlp", "weights_only"):
        for metric in plugin.HEATMAP_METRICS:
            hm = client.ok("/heatmap", run=run, role=role, metric=metric)
            _check_heatmap_shape(hm, run, role, metric)
            if role in _run(client, run)["roles"]:
                assert hm["layers"], (run, role)
            else:
                assert hm["layers"] == [] and hm["values"] == []


def test_heatmap_rows_and_columns(client):
    hm = client.ok("/heatmap", run="mlp", role="gradient", metric="max_abs")
    assert hm["layers"] == list(PARAMS)
    assert hm["steps"] == list(LOGGED)
    assert hm["quality"] == "estimated"
    bias = hm["layers"].index("dense/bias")
    for j, step in enumerate(LOGGED):
        assert (hm["status"][bias][j] == 0) == (step not in BIAS_GRAD_STEPS)
        assert (hm["values"][bias][j] is None) == (step not in BIAS_GRAD_STEPS)


def test_heatmap_names_the_qualities_it_holds(client):
    """"mixed" is exact beside anything else: the answer names which, so the tab never calls bounds estimates."""
    hm = client.ok("/heatmap", run="mlp", role="gradient", metric="zero_fraction")
    # A gradient straddling zero in its buckets gives only an upper bound of its zero fraction.
    assert (hm["quality"], hm["qualities"]) == ("mixed", ["exact", "upper_bound"])
    hm = client.ok("/heatmap", run="mlp", role="gradient", metric="small_fraction")
    assert (hm["quality"], hm["qualities"]) == ("mixed", ["exact", "estimated"])
    hm = client.ok("/heatmap", run="mlp", role="gradient", metric="max_abs", layout="compact", rows="0:1")
    assert (hm["quality"], hm["qualities"]) == ("estimated", ["estimated"])
    assert client.ok("/heatmap", run="mlp", role="gradient", metric="update_ratio")["qualities"] == []


def test_heatmap_statuses_cover_every_code(client):
    grad = client.ok("/heatmap", run="mlp", role="gradient")
    act = client.ok("/heatmap", run="mlp", role="activation")
    codes = {s for hm in (grad, act) for row in hm["status"] for s in row}
    assert codes == {0, 1, 2, 3}
    exploded = grad["layers"].index("dense_1/kernel")
    col = grad["steps"].index(EXPLODE_STEP)
    assert grad["status"][exploded][col] == 3 and grad["rules"][exploded][col] == "exploding_gradients"
    assert grad["values"][exploded][col] <= 0.25
    assert [s for j, s in enumerate(grad["status"][exploded]) if j != col] == [1] * (len(LOGGED) - 1)
    dead = act["layers"].index("dead_relu")
    assert act["status"][dead] == [2] * len(LOGGED) and set(act["rules"][dead]) == {"dead_units"}
    alive = act["layers"].index("dense")
    assert act["status"][alive] == [1] * len(LOGGED)
    for hm in (grad, act):
        for srow, vrow in zip(hm["status"], hm["values"]):
            for s, v in zip(srow, vrow):
                band = {1: (0.6, 1.0), 2: (0.25, 0.6), 3: (0.0, 0.25)}.get(s)
                if band:
                    assert band[0] <= v <= band[1], (s, v)


def test_a_cells_rule_is_named_alike_by_the_cell_and_both_heatmap_layouts(client):
    """The cells' rules are held as codes into a table of names: decoded, every layout and the cell
    name the finding kind that decided the cell (None without data, "" when ok), whatever code the
    kind was given."""
    from gradhealth_plugin.analysis import health
    from tests.test_heatmap_lod import _from_compact

    health.rule_code("a_rule_no_cell_names")  # a code before any kind of this run's is given one
    named = set()
    for role in ("gradient", "activation"):
        rows = client.ok("/heatmap", run="mlp", role=role)
        compact = _from_compact(client.ok("/heatmap", run="mlp", role=role, layout="compact"))
        assert compact["rules"] == rows["rules"], role
        for i, layer in enumerate(rows["layers"]):
            for j, step in enumerate(rows["steps"]):
                rule, status = rows["rules"][i][j], rows["status"][i][j]
                assert rule == {0: None, 1: ""}.get(status, rule), (role, layer, step)
                if status:
                    cell = client.ok("/cell", run="mlp", layer=layer, step=step, role=role)["roles"][role]
                    assert cell["rule"] == rule, (role, layer, step)
                named.add(rule)
    exploded = client.ok("/cell", run="mlp", layer="dense_1/kernel", step=EXPLODE_STEP, role="gradient")
    assert exploded["roles"]["gradient"]["rule"] == "exploding_gradients"
    assert named == {None, "", "exploding_gradients", "dead_units"}


def test_heatmap_defaults_to_first_role_and_health(client):
    hm = client.ok("/heatmap", run="mlp")
    assert hm["role"] == "gradient" and hm["metric"] == "health" and hm["quality"] == "estimated"
    assert client.ok("/heatmap", run="weights_only")["role"] == "weight"


def test_heatmap_cell_and_series_agree(client):
    hm = client.ok("/heatmap", run="mlp", role="weight", metric="std")
    for i, layer in enumerate(hm["layers"]):
        series = client.ok("/series", run="mlp", layer=layer, metric="std", role="weight")["series"]["weight"]
        assert series["steps"] == hm["steps"]
        # The heatmap sends 4 significant digits; the series and the cell every digit.
        assert hm["values"][i] == pytest.approx(series["values"], rel=5e-4)
        assert series["status"] == hm["status"][i]
        for j, step in enumerate(hm["steps"]):
            cell = client.ok("/cell", run="mlp", layer=layer, step=step, role="weight")["roles"]["weight"]
            assert hm["values"][i][j] == pytest.approx(cell["metrics"]["std"]["value"], rel=5e-4)
            assert cell["status"] == STATUS_NAMES[hm["status"][i][j]]


# --- cell ------------------------------------------------------------------------------------


def test_cell_shape(client):
    body = client.ok("/cell", run="mlp", layer="dense/kernel", step=5)
    assert {k: body[k] for k in ("run", "layer", "group", "kind", "step")} == {
        "run": "mlp", "layer": "dense/kernel", "group": "dense", "kind": "kernel", "step": 5}
    assert set(body["roles"]) == {"gradient", "weight"}
    for role, cell in body["roles"].items():
        assert cell["tags"] == [f"{'gradients' if role == 'gradient' else 'weights'}/dense/kernel:0"]
        assert cell["source"] == "histogram"
        assert cell["status"] in STATUS_NAMES[1:] and cell["rule"] is not None
        assert 0.0 <= cell["score"] <= 1.0
        for name in ("count", "mean", "std", "min", "max", "max_abs", "mean_abs", "l2", "skewness", "kurtosis",
                     "zero_fraction", "small_fraction", "nonfinite"):
            entry = cell["metrics"][name]
            assert set(entry) == {"value", "quality"}
            assert entry["quality"] in metrics.QUALITY_NAMES
        assert cell["metrics"]["count"] == {"value": 64, "quality": "exact"}
        buckets = cell["histogram"]
        assert 1 <= len(buckets) <= 30 and all(len(b) == 3 for b in buckets)
        assert sum(b[2] for b in buckets) == 64
        assert all(b[0] <= b[1] for b in buckets)
        assert buckets[0][0] == cell["metrics"]["min"]["value"]
        assert buckets[-1][1] == cell["metrics"]["max"]["value"]


def test_cell_role_filter(client):
    body = client.ok("/cell", run="mlp", layer="dense/bias", step=5, role="weight")
    assert set(body["roles"]) == {"weight"}
    # dense/bias has no gradient at step 5: only its weight answers.
    assert set(client.ok("/cell", run="mlp", layer="dense/bias", step=5)["roles"]) == {"weight"}
    assert set(client.ok("/cell", run="mlp", layer="dense/bias", step=10)["roles"]) == {"gradient", "weight"}


def test_cell_of_the_exploded_step(client):
    cell = client.ok("/cell", run="mlp", layer="dense_1/kernel", step=EXPLODE_STEP, role="gradient")
    g = cell["roles"]["gradient"]
    assert g["status"] == "critical" and g["rule"] == "exploding_gradients"
    assert g["metrics"]["max_abs"]["value"] > 1e3


# --- series ----------------------------------------------------------------------------------


def test_series_shape(client):
    body = client.ok("/series", run="mlp", layer="dense/bias", metric="mean_abs")
    assert body["run"] == "mlp" and body["layer"] == "dense/bias" and body["metric"] == "mean_abs"
    assert body["status_names"] == STATUS_NAMES
    assert set(body["series"]) == {"gradient", "weight"}
    for role, s in body["series"].items():
        assert set(s) == {"steps", "steps_text", "values", "quality", "status"}
        n = len(s["steps"])
        assert len(s["values"]) == len(s["quality"]) == len(s["status"]) == n
        assert all(q in metrics.QUALITY_NAMES for q in s["quality"])
        assert all(st_ in (0, 1, 2, 3) for st_ in s["status"])
    assert body["series"]["gradient"]["steps"] == list(BIAS_GRAD_STEPS)
    assert body["series"]["weight"]["steps"] == list(LOGGED)


def test_series_role_filter_and_health(client):
    body = client.ok("/series", run="mlp", layer="dense_1/kernel", metric="health", role="gradient")
    assert set(body["series"]) == {"gradient"}
    s = body["series"]["gradient"]
    assert all(0.0 <= v <= 1.0 for v in s["values"])
    assert s["status"][LOGGED.index(EXPLODE_STEP)] == 3
    assert set(s["quality"]) == {"estimated"}


def test_series_quality_labels(client):
    s = client.ok("/series", run="mlp", layer="dense/kernel", metric="count", role="weight")["series"]["weight"]
    assert s["quality"] == ["exact"] * len(LOGGED) and s["values"] == [64] * len(LOGGED)
    # TF2's lowest bucket [0, max/30] of a live ReLU bounds its zero share; an all-zero tensor's [0, 0] is exact.
    s = client.ok("/series", run="mlp", layer="dense", metric="zero_fraction", role="activation")["series"]
    assert set(s["activation"]["quality"]) == {"upper_bound"}
    s = client.ok("/series", run="mlp", layer="dead_relu", metric="zero_fraction")["series"]["activation"]
    assert set(s["quality"]) == {"exact"} and set(s["values"]) == {1.0}


# --- findings --------------------------------------------------------------------------------


def test_findings_route(client):
    body = client.ok("/findings", run="mlp")
    assert body["run"] == "mlp"
    kinds = {(f["kind"], f["severity"]) for f in body["findings"]}
    assert ("exploding_gradients", "critical") in kinds and ("dead_units", "warn") in kinds
    assert client.ok("/findings", run="weights_only")["findings"] == []


# --- errors ----------------------------------------------------------------------------------

_GOOD_CELL = {"run": "mlp", "layer": "dense/kernel", "step": "5"}
_GOOD_SERIES = {"run": "mlp", "layer": "dense/kernel", "metric": "std"}


def _without(params, key):
    return {k: v for k, v in params.items() if k != key}


ERRORS = [
    # unknown things -> 404
    ("/heatmap", {"run": "nope"}, 404),
    ("/cell", dict(_GOOD_CELL, run="nope"), 404),
    ("/series", dict(_GOOD_SERIES, run="nope"), 404),
    ("/findings", {"run": "nope"}, 404),
    ("/cell", dict(_GOOD_CELL, layer="nope"), 404),
    ("/cell", dict(_GOOD_CELL, layer=""), 404),  # a layer may be named "": this run has none
    ("/series", dict(_GOOD_SERIES, layer="nope"), 404),
    ("/cell", dict(_GOOD_CELL, step="3"), 404),
    ("/cell", dict(_GOOD_CELL, step="-5"), 404),
    ("/cell", dict(_GOOD_CELL, step=str(10 ** 30)), 404),
    ("/cell", dict(_GOOD_CELL, layer="dense/bias", step="5", role="gradient"), 404),
    ("/cell", dict(_GOOD_CELL, role="update"), 404),
    ("/series", dict(_GOOD_SERIES, role="update"), 404),
    ("/series", dict(_GOOD_SERIES, layer="dead_relu", role="weight"), 404),
    # missing parameters -> 400
    ("/heatmap", {}, 400),
    ("/heatmap", {"run": ""}, 400),
    ("/findings", {}, 400),
    ("/cell", _without(_GOOD_CELL, "run"), 400),
    ("/cell", _without(_GOOD_CELL, "layer"), 400),
    ("/cell", _without(_GOOD_CELL, "step"), 400),
    ("/series", _without(_GOOD_SERIES, "run"), 400),
    ("/series", _without(_GOOD_SERIES, "layer"), 400),
    ("/series", _without(_GOOD_SERIES, "metric"), 400),
    ("/series", dict(_GOOD_SERIES, metric=""), 400),
    # unknown role or metric -> 400
    ("/heatmap", {"run": "mlp", "role": "gradients"}, 400),
    ("/heatmap", {"run": "mlp", "metric": "variance"}, 400),
    ("/heatmap", {"run": "mlp", "role": "weight", "metric": "HEALTH"}, 400),
    ("/cell", dict(_GOOD_CELL, role="bias"), 400),
    ("/series", dict(_GOOD_SERIES, role="Weight"), 400),
    ("/series", dict(_GOOD_SERIES, metric="nope"), 400),
    # steps that are not integers -> 400
    ("/cell", dict(_GOOD_CELL, step="abc"), 400),
    ("/cell", dict(_GOOD_CELL, step="1.5"), 400),
    ("/cell", dict(_GOOD_CELL, step=""), 400),
    ("/cell", dict(_GOOD_CELL, step="5.0"), 400),
    ("/cell", dict(_GOOD_CELL, step="1e3"), 400),
    ("/cell", dict(_GOOD_CELL, step="0x10"), 400),
    ("/cell", dict(_GOOD_CELL, step="nan"), 400),
]


def _assert_json_error(response, expected):
    codes = expected if isinstance(expected, tuple) else (expected,)
    text = response.get_data(as_text=True)
    assert response.status_code in codes, (response.status_code, text)
    assert response.mimetype == "application/json"
    body = json.loads(text)
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"].strip()
    assert "Traceback" not in text and 'File "' not in text
    return body["error"]


@pytest.mark.parametrize("route,params,expected", ERRORS,
                         ids=[f"{r}-{'&'.join(f'{k}={v}' for k, v in p.items())}" for r, p, _ in ERRORS])
def test_error_answers_are_json(client, route, params, expected):
    _assert_json_error(client.raw(route, **params), expected)


def test_error_messages_name_the_problem(client):
    assert "nope" in _assert_json_error(client.raw("/heatmap", run="nope"), 404)
    assert "'layer'" in _assert_json_error(client.raw("/cell", run="mlp", step="5"), 400)
    assert "'abc'" in _assert_json_error(client.raw("/cell", **dict(_GOOD_CELL, step="abc")), 400)
    assert "gradient" in _assert_json_error(client.raw("/series", **dict(_GOOD_SERIES, role="x")), 400)
    assert "step 3" in _assert_json_error(client.raw("/cell", **dict(_GOOD_CELL, step="3")), 404)


_ROUTE_VALUES = {
    "run": st.sampled_from(["mlp", "weights_only", "", "nope"]),
    "layer": st.sampled_from(list(PARAMS) + ["dense", "dead_relu", "", "nope"]),
    "role": st.sampled_from(list(tags_lib.ROLES) + ["", "nope"]),
    "metric": st.sampled_from(list(plugin.HEATMAP_METRICS) + ["", "nope"]),
    "step": st.one_of(st.sampled_from([str(s) for s in LOGGED] + ["", "1.5", "-1", "abc"]),
                      st.integers(-2 ** 70, 2 ** 70).map(str)),
}
_ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(route=st.sampled_from(["/heatmap", "/cell", "/series", "/findings"]),
       params=st.dictionaries(st.sampled_from(sorted(_ROUTE_VALUES)),
                              st.one_of(_ANY_TEXT, st.just("")), max_size=5)
       | st.fixed_dictionaries({}, optional=_ROUTE_VALUES))
def test_no_query_makes_a_server_error(client, route, params):
    response = client.raw(route, **params)
    if response.status_code == 200:
        json.loads(response.get_data(as_text=True))
    else:
        _assert_json_error(response, (400, 404))


def test_runs_ignores_query_parameters(client):
    assert client.ok("/runs", run="nope", role="bad") == client.ok("/runs")


# --- static ----------------------------------------------------------------------------------


def test_index_js_is_served_as_javascript(client):
    response = client.raw("/index.js")
    assert response.status_code == 200
    assert response.mimetype in ("text/javascript", "application/javascript")
    assert len(response.get_data()) > 100


def test_heatmap_rows_say_how_their_role_was_decided(tmp_path, plugin_client):
    import tensorflow as tf

    rng = np.random.default_rng(3)
    writer = tf.summary.create_file_writer(str(tmp_path / "run"))
    with writer.as_default():
        for step in range(3):
            tf.summary.histogram("weights/dense/kernel", rng.normal(0, 0.1, 64), step=step)  # convention
            tf.summary.histogram("W_extra", rng.normal(0, 0.1, 16), step=step)  # name words
            tf.summary.histogram("input/images", rng.uniform(0, 1, 64), step=step)  # nothing: "other"
    writer.close()
    client = plugin_client(tmp_path)
    weights = client.ok("/heatmap", run="run", role="weight", metric="health")
    assert dict(zip(weights["layers"], weights["decided_by"])) == {"dense/kernel": "convention", "W_extra": "name"}
    other = client.ok("/heatmap", run="run", role="other", metric="health")
    assert other["layers"] == ["input/images"] and other["decided_by"] == ["fallback"]
    (summary,) = client.ok("/runs")["runs"]
    assert {layer["name"]: layer["roles"] for layer in summary["layers"]}["input/images"]["other"]["decided_by"] == "fallback"


def test_answers_are_the_json_tensorboard_would_write(client):
    # Answers are written without TensorBoard's cleansing walk, byte for byte as it writes them;
    # one holding NaN (answers send null) still goes through it.
    from tensorboard.backend import json_util

    for route, params in (("/runs", {}), ("/heatmap", {"run": "mlp", "metric": "mean"}), ("/findings", {"run": "mlp"}),
                          ("/series", {"run": "mlp", "layer": "dense/kernel", "metric": "l2"}),
                          ("/cell", {"run": "mlp", "layer": "dense/kernel", "step": 5}), ("/vocabulary", {})):
        response = client.raw(route, **params)
        text = response.get_data(as_text=True)
        assert response.status_code == 200 and response.mimetype == "application/json"
        # The heatmap, the largest answer, is written without spaces.
        separators = (",", ":") if route == "/heatmap" else None
        assert text == json.dumps(json_util.Cleanse(json.loads(text)), separators=separators), route
    nan = {"value": float("nan")}
    assert plugin._json_text(nan) is nan and plugin._json_text({"value": None}) == '{"value": null}'


def test_a_data_server_that_stopped_answering_is_a_503_for_every_route(routes_logdir):
    from tests.conftest import RustPluginClient

    rust = RustPluginClient(routes_logdir)
    try:
        assert rust.raw("/runs").status_code == 200
        rust.proc.kill()  # TensorBoard's data server gone: nothing wrong with the request or the run
        rust.proc.wait(timeout=10)
        for route, params in (("/runs", {}), ("/sweep", {}), ("/findings", {"run": "weights_only"}),
                              ("/heatmap", {"run": "weights_only", "role": "weight"}),
                              ("/cell", {"run": "weights_only", "layer": "w:0", "step": 1, "role": "weight"})):
            response = rust.raw(route, **params)
            body = json.loads(response.get_data())
            assert response.status_code == 503 and response.mimetype == "application/json", (route, body)
            assert body["error"].startswith("TensorBoard's data server is not answering (UNAVAILABLE"), body
    finally:
        rust.close()


def test_a_validation_half_says_which_run_holds_its_layers(keras_halves_logdir, loader_client):
    # Keras' TensorBoard callback writes <dir>/train (weights, scalars) and <dir>/validation (scalars only):
    # the validation run could never hold layers, so how to log them is no help; where they are is.
    runs = {r["run"]: r for r in loader_client(keras_halves_logdir).ok("/runs")["runs"]}
    for fit in ("adam", "sgd"):
        half, train = runs[f"{fit}/validation"], runs[f"{fit}/train"]
        assert half["layers_in"] == f"{fit}/train", half  # its own folder's train run, not the other fit's
        assert half["verdict_word"] == "scalars only"
        assert half["verdict"] == f"scalars only: the validation half of {fit}; its layers are in {fit}/train"
        assert f"its layers are in {fit}/train" in half["coverage_note"]
        assert "Log gradients" not in half["coverage_note"] and "Weight growth" not in half["coverage_note"]
        # The train run holds layers itself: nothing points away from it.
        assert train["layers_in"] is None and train["verdict_word"] == "no warnings"


def test_a_fits_log_dir_given_as_the_logdir_pairs_its_top_level_halves(keras_fit_logdir, keras_halves_logdir,
                                                                       plugin_client):
    # `tensorboard --logdir <a fit's log_dir>` makes Keras' halves the top-level runs train and validation:
    # the validation half still names the run holding its layers, as one folder down.
    runs = {r["run"]: r for r in plugin_client(keras_fit_logdir).ok("/runs")["runs"]}
    validation = runs["validation"]
    assert set(runs) == {"train", "validation"} and runs["train"]["layers"] and not validation["layers"]
    assert validation["layers_in"] == "train" and validation["verdict_word"] == "scalars only"
    assert "the validation half of the logdir; its layers are in train" in validation["verdict"]
    nested = {r["run"]: r for r in plugin_client(keras_halves_logdir).ok("/runs")["runs"]}
    assert nested["adam/validation"]["layers_in"] == "adam/train"


def test_a_run_no_rule_could_judge_is_not_judged_never_without_warnings(tensorboardx_samples_logdir,
                                                                         loader_client):
    # Histograms of random samples, no role, no loss: every rule needing a role or the loss is not judged,
    # so "no warnings" (drawn green) would speak for rules that never ran. Two histograms were logged, of
    # unknown role: "no data logged" would be wrong too.
    (run,) = loader_client(tensorboardx_samples_logdir).ok("/runs")["runs"]
    assert run["layers"] and run["roles"] == ["other"], run
    assert run["verdict_word"] == "not judged"
    assert run["verdict"] == ("not judged (no gradient, weight, activation or loss recognised; 2 histogram tags of"
                              " unknown role: a tag rule in gradhealth.json sets a tag's role)"), run["verdict"]


# Said where no row is a gradient: the gradient rules were not judged, and why.
GRADIENTS_NOT_JUDGED = "exploding and vanishing gradients not judged"


@pytest.mark.parametrize("which, unknown", [
    # Weights ``net/<name>`` and gradients ``net_g/<name>``: two tags name each parameter (16 tags), and
    # ``logit_scale``, named like no weight, has no role under either prefix.
    ("torch_own_prefixes_logdir", 18),
    # Weights ``weights/<name>``, gradients ``backward/<module>/<i>``: no word tells the 9 gradients.
    ("torch_unnamed_gradients_logdir", 9)])
def test_a_run_whose_gradients_are_not_recognised_is_not_said_to_log_none(which, unknown, request, plugin_client):
    # The gradients may well be among the histograms of unknown role: "no gradients logged" would be wrong,
    # and a person needs to hear how to give them their role.
    (run,) = plugin_client(request.getfixturevalue(which)).ok("/runs")["runs"]
    assert "gradient" not in run["roles"] and not run["gradients_judged"], run["roles"]
    assert run["verdict_word"] == "no warnings", run["verdict"]
    assert run["verdict"] == (f"no warnings (gradients not recognised among {unknown} histogram tags of unknown role:"
                              f" {GRADIENTS_NOT_JUDGED}; a tag rule in gradhealth.json sets a tag's role)")


def test_a_run_without_gradients_and_nothing_of_unknown_role_logged_none(keras_fit_logdir, plugin_client):
    # Keras' callback logs weights only, every tag's role known: "no gradients logged" is exactly right.
    runs = {r["run"]: r for r in plugin_client(keras_fit_logdir).ok("/runs")["runs"]}
    assert runs["train"]["verdict"].startswith(f"no warnings (no gradients logged: {GRADIENTS_NOT_JUDGED})")
