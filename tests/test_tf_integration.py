"""gradhealth_plugin.tf in real TensorFlow custom loops, eager and inside tf.function.

Every logged number is checked against `stats_numpy` of the tensors
the loop itself returned at that step, and the plugin's routes read them back
as exact values.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from gradhealth_plugin.writing import format as fmt
from gradhealth_plugin.writing.names import output_name, parameter_layers, scoped_name
from gradhealth_plugin.writing.reference import stats_numpy, update_ratio_numpy
from tests.logdirs import ACTIVATION_KEYS

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gradhealth_plugin.tf import (  # noqa: E402
    GradientHealthLogger, stats_many_tf, stats_tf, update_ratio_tf, variable_name, weight_stats_many_tf)

STEPS = 8
EVERY = 3
LOGGED = (0, 3, 6)
NAN_STEP = 3
UR = fmt.FIELDS.index("update_ratio")


def read_vectors(logdir):
    """{(role, layer, step): (vector, metadata dict)} of every gradhealth summary under `logdir`."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()[event_accumulator.TENSORS]:
        meta = fmt.parse_metadata(acc.SummaryMetadata(tag).plugin_data.content)
        if meta is None:
            continue
        assert tag == fmt.tag_for(meta["role"], meta["layer"])
        for event in acc.Tensors(tag):
            key = (meta["role"], meta["layer"], event.step)
            assert key not in out, f"{key} logged twice"
            out[key] = (tensor_util.make_ndarray(event.tensor_proto), meta)
    return out


def weight_reference(before, after):
    vector = stats_numpy(before)
    vector[UR] = update_ratio_numpy(before, after)
    return vector


def assert_stats(actual, expected, rtol=1e-7):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=1e-12, equal_nan=True)


# ---------------------------------------------------------------------------
# stats_tf against the numpy reference


@pytest.mark.parametrize("values", [
    np.random.default_rng(0).normal(size=(17, 5)).astype(np.float32),
    np.array([np.nan, 1.0, np.inf, 0.0, -2.0, 1e-7, -np.inf], np.float32),
    np.array([np.nan, np.nan]),
    np.zeros(6),
    np.full(4, 3.5),
    np.array([], np.float32),
    np.arange(-3, 9, dtype=np.int32),
    np.array([1e300, -1e300, 2.0]),
], ids=["normal", "nonfinite", "all_nan", "zeros", "constant", "empty", "int", "huge"])
def test_stats_tf_matches_numpy(values):
    with np.errstate(all="ignore"):  # the reference overflows on "huge" as TensorFlow does
        expected = stats_numpy(values)
    assert_stats(stats_tf(values).numpy(), expected, rtol=1e-12)
    assert_stats(tf.function(stats_tf)(tf.constant(values)).numpy(), expected, rtol=1e-12)


def test_update_ratio_matches_numpy():
    rng = np.random.default_rng(1)
    before = rng.normal(size=(6, 3))
    after = before + rng.normal(scale=1e-3, size=(6, 3))
    assert_stats(stats_tf(after, before).numpy(), stats_numpy(after, before), rtol=1e-12)
    assert np.isnan(update_ratio_tf(np.zeros(3), np.ones(3)).numpy())
    assert np.isnan(update_ratio_tf(np.array([np.nan, 1.0]), np.ones(2)).numpy())


def test_many_tensors_at_once_match_numpy():
    """Small tensors share segment reductions (empty and non-finite ones among them); large ones are alone."""
    rng = np.random.default_rng(2)
    tensors = [rng.normal(size=(3, 4)).astype(np.float32), np.array([], np.float32),
               np.array([np.nan, 2.0, np.inf], np.float32), rng.normal(size=(300, 300)).astype(np.float32),
               np.zeros(7, np.float32), rng.normal(size=50).astype(np.float32), np.array([], np.float32)]
    expected = np.stack([stats_numpy(t) for t in tensors])
    assert_stats(stats_many_tf(tensors).numpy(), expected, rtol=1e-12)
    compiled = tf.function(stats_many_tf, autograph=False)
    assert_stats(compiled([tf.constant(t) for t in tensors]).numpy(), expected, rtol=1e-12)
    afters = [t * 1.01 + 0.001 for t in tensors]
    rows = weight_stats_many_tf(tensors, afters).numpy()
    for i, (before, after) in enumerate(zip(tensors, afters)):
        want = stats_numpy(before)
        want[UR] = update_ratio_numpy(before, after)
        assert_stats(rows[i], want, rtol=1e-10)


def test_variable_names():
    v = tf.Variable(tf.zeros([2]), name="dense/kernel")
    assert variable_name(v) == "dense/kernel"
    layer = keras.layers.Dense(2, name="proj")
    layer.build((None, 3))
    assert variable_name(layer.kernel) == "proj/kernel"


def test_an_output_key_is_taken_apart_as_the_parameters_names():
    layers = parameter_layers(["mlp/dense_0/kernel", "mlp/dense_0/bias", "mlp/block/dense/kernel",
                               "head/dense/kernel", "Variable_1"])
    assert layers == ["mlp/dense_0", "mlp/block/dense", "head/dense"]
    for key in ("dense_0", "mlp/dense_0", "model/mlp/dense_0"):
        assert output_name(key, layers) == "mlp/dense_0"
    assert output_name("block/dense", layers) == "mlp/block/dense"
    assert output_name("dense", layers) == "dense"  # two layers fit: neither is guessed
    assert output_name("ense_0", layers) == "ense_0"  # whole parts, not characters
    assert output_name("hidden", layers) == "hidden"
    assert scoped_name("relu", ["mlp/dense_0", "mlp/dense_1"]) == "mlp/relu"
    assert scoped_name("relu", ["mlp/dense_0", "head/dense"]) == "relu"


# ---------------------------------------------------------------------------
# A Keras model trained with a GradientTape loop


def _model():
    keras.backend.clear_session()
    keras.utils.set_random_seed(3)
    return keras.Sequential([
        keras.Input((6,)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(12, activation="relu"),
        keras.layers.Dense(3),
    ], name="sequential")


def _data():
    rng = np.random.default_rng(5)
    x = tf.constant(rng.normal(size=(32, 6)), tf.float32)
    y = tf.constant(rng.integers(0, 3, 32))
    return x, y


def _train(logdir, compiled: bool, poison_step=None):
    """Trains STEPS steps with the one-line helper; returns what the loop saw at every step."""
    model = _model()
    optimizer = keras.optimizers.Adam(1e-2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    gh = GradientHealthLogger(str(logdir), every_n_steps=EVERY, first_steps=0)
    x, y = _data()
    variables = model.trainable_variables

    def train_step(x, y):
        step = tf.cast(tf.convert_to_tensor(optimizer.iterations), tf.int64)
        with tf.GradientTape() as tape:
            h, acts = x, {}
            for layer in model.layers:
                h = layer(h, training=True)
                acts[layer.path] = h
            loss = loss_fn(y, h)
        grads = tape.gradient(loss, variables)
        logged = list(grads)
        if poison_step is not None:
            logged[0] = tf.where(tf.equal(step, poison_step), grads[0] * np.nan, grads[0])
        with gh.step(optimizer.iterations, logged, variables, activations=acts):
            optimizer.apply_gradients(zip(grads, variables))
        return loss, grads, acts

    fn = tf.function(train_step) if compiled else train_step
    seen = {}
    for step in range(STEPS):
        before = [v.numpy().copy() for v in variables]
        _, grads, acts = fn(x, y)
        after = [v.numpy().copy() for v in variables]
        seen[step] = {"before": before, "after": after, "grads": [g.numpy() for g in grads],
                      "acts": {k: a.numpy() for k, a in acts.items()}}
    gh.flush()
    gh.close()
    names = [v.path for v in variables]
    shapes = [list(v.shape) for v in variables]
    return seen, names, shapes, list(acts)


@pytest.fixture(scope="module", params=["tf_function", "eager"])
def custom_loop(request, tmp_path_factory):
    logdir = tmp_path_factory.mktemp(f"tf_loop_{request.param}")
    seen, names, shapes, act_names = _train(logdir, compiled=request.param == "tf_function")
    return logdir, seen, names, shapes, act_names


def test_logs_exactly_the_logged_steps(custom_loop):
    logdir, _, names, _, act_names = custom_loop
    vectors = read_vectors(logdir)
    expected = {(role, n, s) for s in LOGGED for role in ("gradient", "weight") for n in names}
    expected |= {("activation", n, s) for s in LOGGED for n in act_names}
    assert set(vectors) == expected


def test_statistics_equal_the_loop_tensors(custom_loop):
    logdir, seen, names, shapes, act_names = custom_loop
    vectors = read_vectors(logdir)
    for step in LOGGED:
        at = seen[step]
        for i, name in enumerate(names):
            vector, meta = vectors[("gradient", name, step)]
            assert_stats(vector, stats_numpy(at["grads"][i]))
            assert meta["position"] == i and meta["shape"] == shapes[i]
            vector, meta = vectors[("weight", name, step)]
            assert_stats(vector, weight_reference(at["before"][i], at["after"][i]))
            assert meta["position"] == i and meta["shape"] == shapes[i]
            if np.any(at["before"][i]):  # a zero-initialised bias has no ratio at step 0
                assert 0 < vector[UR] < 1
        for j, name in enumerate(act_names):
            vector, meta = vectors[("activation", name, step)]
            assert_stats(vector, stats_numpy(at["acts"][name]))
            assert meta["position"] == len(names) + j


def test_plugin_reads_them_as_exact(custom_loop, plugin_client):
    logdir, seen, names, _, _ = custom_loop
    client = plugin_client(logdir, samples={"gradhealth": 500})
    cell = client.ok("/cell", run=".", layer=names[0], step=LOGGED[1])
    for role in ("gradient", "weight"):
        assert "gradhealth" in cell["roles"][role]["source"]
        for metric in ("mean", "std", "l2", "max_abs"):
            assert cell["roles"][role]["metrics"][metric]["quality"] == "exact"
    expected = stats_numpy(seen[LOGGED[1]]["grads"][0])
    got = cell["roles"]["gradient"]["metrics"]
    np.testing.assert_allclose(got["l2"]["value"], expected[fmt.FIELDS.index("l2")], rtol=1e-7)
    ratio = cell["roles"]["weight"]["metrics"]["update_ratio"]
    assert ratio["quality"] == "exact"
    np.testing.assert_allclose(ratio["value"], update_ratio_numpy(
        seen[LOGGED[1]]["before"][0], seen[LOGGED[1]]["after"][0]), rtol=1e-7)


# ---------------------------------------------------------------------------
# Activations keyed the ways a Keras 3 loop names a layer (tests/logdirs.py)

MLP_LAYERS = {"mlp/dense_0", "mlp/dense_1"}
MLP_OUTPUTS = {"path": MLP_LAYERS, "name": MLP_LAYERS | {"relu_0"}, "layer": MLP_LAYERS | {"mlp/relu_0"}}


@pytest.mark.parametrize("keys", ACTIVATION_KEYS)
def test_an_activation_is_named_as_its_layers_parameters(keras_activation_keys_logdir, keys):
    """Keyed by the layer's path, its name or the layer, an output is written under the layer its
    variables are filed under; a layer without variables keyed by name keeps the name, keyed by
    the layer it is named in the model's scope."""
    vectors = read_vectors(keras_activation_keys_logdir / f"by_{keys}")
    parameters = {layer for role, layer, _ in vectors if role == "gradient"}
    assert {layer.rsplit("/", 1)[0] for layer in parameters} == MLP_LAYERS
    assert {layer for role, layer, _ in vectors if role == "activation"} == MLP_OUTPUTS[keys]


def test_the_tab_files_each_output_with_its_layers_parameters(keras_activation_keys_logdir, plugin_client):
    runs = plugin_client(keras_activation_keys_logdir, samples={"gradhealth": 500}).ok("/runs")["runs"]
    by_run = {run["run"]: run["layers"] for run in runs}
    for keys in ACTIVATION_KEYS:
        layers = by_run[f"by_{keys}"]
        parameters = {layer["group"] for layer in layers if "gradient" in layer["roles"]}
        outputs = {layer["group"] for layer in layers if "activation" in layer["roles"]}
        assert parameters == MLP_LAYERS and parameters <= outputs, (keys, layers)


@pytest.fixture(scope="module")
def poisoned_loop(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("tf_loop_nan")
    seen, names, _, _ = _train(logdir, compiled=True, poison_step=NAN_STEP)
    return logdir, seen, names


def test_nan_gradient_is_counted_and_training_goes_on(poisoned_loop):
    logdir, seen, names = poisoned_loop
    vectors = read_vectors(logdir)
    vector, _ = vectors[("gradient", names[0], NAN_STEP)]
    assert vector[fmt.FIELDS.index("nan_count")] == vector[fmt.FIELDS.index("count")]
    assert np.isnan(vector[fmt.FIELDS.index("mean")])
    for step in LOGGED:
        if step != NAN_STEP:
            assert vectors[("gradient", names[0], step)][0][fmt.FIELDS.index("nan_count")] == 0
    assert len(seen) == STEPS and all(np.isfinite(w).all() for w in seen[STEPS - 1]["after"])


def test_nan_gradient_is_a_nonfinite_finding(poisoned_loop, plugin_client):
    logdir, _, names = poisoned_loop
    client = plugin_client(logdir, samples={"gradhealth": 500})
    found = client.ok("/findings", run=".")["findings"]
    nonfinite = [f for f in found if f["kind"] == "nonfinite"]
    assert nonfinite and nonfinite[0]["first_step"] == NAN_STEP
    assert names[0] in nonfinite[0]["layers"]
    cell = client.ok("/cell", run=".", layer=names[0], step=NAN_STEP, role="gradient")["roles"]["gradient"]
    assert "gradhealth" in cell["source"]
    assert cell["metrics"]["nonfinite"]["value"] > 0 and cell["metrics"]["nonfinite"]["quality"] == "exact"
    assert cell["status"] == "critical"


def test_log_without_snapshot_and_plain_tf_variables(tmp_path):
    """`log` alone: gradients and weights (no update ratio), tf.Variables named by TF."""
    w = tf.Variable(np.random.default_rng(0).normal(size=(4, 2)).astype(np.float32), name="layer/w")
    extra = [tf.Variable(tf.ones([2]), name="Variable"), tf.Variable(tf.ones([3]), name="Variable")]
    gh = GradientHealthLogger(str(tmp_path), every_n_steps=2, first_steps=0)

    @tf.function
    def step_fn(step):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * w) + tf.reduce_sum(extra[0]) + tf.reduce_sum(extra[1])
        grads = tape.gradient(loss, [w] + extra)
        gh.log(step, grads, [w] + extra)
        return grads

    grads = {s: step_fn(tf.constant(s, tf.int64)) for s in range(4)}
    gh.flush()
    vectors = read_vectors(tmp_path)
    assert {k[2] for k in vectors} == {0, 2}
    assert {k[1] for k in vectors} == {"layer/w", "Variable_1", "Variable_2"}
    assert_stats(vectors[("gradient", "layer/w", 2)][0], stats_numpy(grads[2][0].numpy()))
    weight = vectors[("weight", "layer/w", 0)][0]
    assert_stats(weight, stats_numpy(w.numpy()))
    assert np.isnan(weight[UR])


def test_unwritable_logdir_warns_once_and_training_goes_on(tmp_path, caplog):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        gh = GradientHealthLogger(str(blocker / "run"), every_n_steps=1)
        v = tf.Variable([1.0, 2.0])
        opt = keras.optimizers.SGD(0.1)

        @tf.function
        def step_fn():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(v * v)
            grads = tape.gradient(loss, [v])
            with gh.step(opt.iterations, grads, [v]):
                opt.apply_gradients(zip(grads, [v]))
            return loss

        losses = [float(step_fn()) for _ in range(3)]
        gh.flush()
        gh.close()
    assert not gh.enabled and losses[2] < losses[0]
    warnings = [r for r in caplog.records if r.name.startswith("gradhealth_plugin") and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


def test_bad_input_outside_tf_function_is_caught(tmp_path, caplog):
    gh = GradientHealthLogger(str(tmp_path), every_n_steps=1)
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        gh.log(0, [object()], [tf.Variable([1.0])])  # not a tensor: skipped, no error
        gh.log("not a step", [tf.constant([1.0])], [tf.Variable([1.0])])
    assert gh.errors == 1


def test_xla_compiled_step_with_logging_outside_the_compiled_part(tmp_path):
    model = _model()
    optimizer = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = _data()
    variables = model.trainable_variables
    gh = GradientHealthLogger(str(tmp_path), every_n_steps=2, first_steps=0)

    @tf.function(jit_compile=True)
    def gradients(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss, tape.gradient(loss, variables)

    @tf.function
    def train_step(x, y):
        loss, grads = gradients(x, y)
        with gh.step(optimizer.iterations, grads, variables):
            optimizer.apply_gradients(zip(grads, variables))
        return grads

    seen = {}
    for step in range(3):
        before = [v.numpy() for v in variables]
        grads = train_step(x, y)
        seen[step] = (before, [v.numpy() for v in variables], [g.numpy() for g in grads])
    gh.flush()
    vectors = read_vectors(tmp_path)
    assert {k[2] for k in vectors} == {0, 2}
    before, after, grads = seen[2]
    assert_stats(vectors[("gradient", variables[0].path, 2)][0], stats_numpy(grads[0]))
    assert_stats(vectors[("weight", variables[0].path, 2)][0], weight_reference(before[0], after[0]))


def test_logging_inside_a_jit_compiled_function_warns_and_the_step_still_runs(tmp_path, caplog):
    v = tf.Variable([1.0, 2.0])
    optimizer = keras.optimizers.SGD(0.1)
    gh = GradientHealthLogger(str(tmp_path), every_n_steps=1)

    @tf.function(jit_compile=True)
    def train_step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(v * v)
        grads = tape.gradient(loss, [v])
        with gh.step(optimizer.iterations, grads, [v]):
            optimizer.apply_gradients(zip(grads, [v]))
        return loss

    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        losses = [float(train_step()) for _ in range(3)]
    assert losses[2] < losses[0]
    assert sum("jit_compile" in r.getMessage() for r in caplog.records) == 1


def test_under_a_mirrored_strategy_each_step_is_logged_once(tmp_path):
    """Two replicas run the step; as with tf.summary, only the first writes. A process of its own:
    the two logical CPUs must be set up before TensorFlow starts."""
    import os
    import pathlib
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import numpy as np
        import tensorflow as tf
        import keras
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from gradhealth_plugin.tf import GradientHealthLogger
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
            optimizer = keras.optimizers.SGD(0.1)
        gh = GradientHealthLogger({str(tmp_path)!r}, every_n_steps=1)

        @tf.function
        def train_step(x):
            def replica(x):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(model(x) ** 2)
                grads = tape.gradient(loss, model.trainable_variables)
                with gh.step(optimizer.iterations, grads, model.trainable_variables):
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            return strategy.run(replica, args=(x,))

        data = tf.data.Dataset.from_tensor_slices(np.ones((48, 4), np.float32)).batch(16)
        for x in strategy.experimental_distribute_dataset(data):
            train_step(x)
        gh.close()
        assert gh.errors == 0, gh.problems
    """)
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    vectors = read_vectors(tmp_path)  # asserts that no (role, layer, step) is there twice
    assert {(role, step) for role, _, step in vectors} == {(r, s) for r in ("gradient", "weight") for s in range(3)}


@pytest.mark.parametrize("compiled", [True, False], ids=["tf_function", "eager"])
def test_record_if_false_writes_nothing_and_is_no_error(tmp_path, compiled):
    v = tf.Variable([1.0, 2.0])
    optimizer = keras.optimizers.SGD(0.1)
    gh = GradientHealthLogger(str(tmp_path), every_n_steps=1)

    def train_step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(v * v)
        grads = tape.gradient(loss, [v])
        with gh.step(optimizer.iterations, grads, [v]):
            optimizer.apply_gradients(zip(grads, [v]))
        return loss

    fn = tf.function(train_step) if compiled else train_step
    with tf.summary.record_if(False):
        for _ in range(2):
            fn()
    gh.close()
    assert gh.errors == 0, gh.problems
    assert read_vectors(tmp_path) == {}


@pytest.mark.parametrize("keyed", ["mapping", "pairs"])
def test_an_activation_keyed_by_none_goes_by_its_position(tmp_path, keyed):
    """An output keyed by None (an unnamed one) is ``activation_<i>``, never a row called "None"."""
    x = tf.constant(np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32))
    outputs = [tf.nn.relu(x), tf.tanh(x)]
    gh = GradientHealthLogger(str(tmp_path), every_n_steps=1, first_steps=0)
    acts = {None: outputs[0], "tanh_out": outputs[1]} if keyed == "mapping" else [(None, outputs[0]), ("tanh_out", outputs[1])]
    gh.log(0, activations=acts)
    gh.flush()
    vectors = read_vectors(tmp_path)
    assert {k[1] for k in vectors if k[0] == "activation"} == {"activation_0", "tanh_out"}
    assert_stats(vectors[("activation", "activation_0", 0)][0], stats_numpy(outputs[0].numpy()))
