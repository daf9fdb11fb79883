"""gradhealth_plugin.keras.GradientHealthCallback in real ``model.fit`` runs.

A reference callback placed before it takes its own measurements at every
step: weights before and after the step (``.numpy()`` copies), gradients of
the probe batch with its own ``tf.GradientTape``, and each layer's output on
the probe batch, computed by calling the layers one by one. Every logged
number must equal `stats_numpy` of those.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from gradhealth_plugin.writing import format as fmt
from gradhealth_plugin.writing.reference import stats_numpy, update_ratio_numpy

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gradhealth_plugin.keras import GradientHealthCallback  # noqa: E402

N_IN, N_OUT = 6, 3
BATCH = 16
N_SAMPLES = 64  # 4 steps per epoch
EPOCHS = 2
EVERY = 3
UR = fmt.FIELDS.index("update_ratio")
FIELD = {name: i for i, name in enumerate(fmt.FIELDS)}
NAN_STEP = 3
# The middle kernel (256 x 256) is large enough to be reduced on its own while
# the other variables share segment reductions: rows must still come out in order.
H1, H2 = 256, 256


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
        for event in acc.Tensors(tag):
            key = (meta["role"], meta["layer"], event.step)
            assert key not in out, f"{key} logged twice"
            out[key] = (tensor_util.make_ndarray(event.tensor_proto), meta)
    return out


def assert_stats(actual, expected, rtol=1e-5):
    # float32 models: the callback's compiled pass and the reference's eager
    # pass may round differently in the last float32 bit.
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=1e-6, equal_nan=True)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N_SAMPLES, N_IN)).astype(np.float32)
    y = rng.integers(0, N_OUT, size=N_SAMPLES).astype(np.int64)
    return x, y


def _probe():
    x, y = _data(seed=1)
    return x[:BATCH], y[:BATCH]


class Sub(keras.Model):
    def __init__(self):
        super().__init__(name="sub")
        self.d1 = keras.layers.Dense(H1, activation="relu")
        self.d2 = keras.layers.Dense(H2, activation="relu")
        self.out = keras.layers.Dense(N_OUT)

    def call(self, x):
        return self.out(self.d2(self.d1(x)))


def build(kind):
    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    if kind == "sequential":
        model = keras.Sequential([keras.Input((N_IN,)), keras.layers.Dense(H1, activation="relu"),
                                  keras.layers.Dense(H2, activation="relu"), keras.layers.Dense(N_OUT)])
        chain = list(model.layers)
    elif kind == "functional":
        inp = keras.Input((N_IN,))
        h1 = keras.layers.Dense(H1, activation="relu")(inp)
        h2 = keras.layers.Dense(H2, activation="relu")(h1)
        model = keras.Model(inp, keras.layers.Dense(N_OUT)(h2), name="functional")
        chain = list(model.layers[1:])
    else:
        model = Sub()
        chain = [model.d1, model.d2, model.out]
    return model, chain


class Reference(keras.callbacks.Callback):
    """Measures what the logged numbers must equal, at every step, before gradhealth's callback runs."""

    def __init__(self, chain, probe, poison=None):
        super().__init__()
        self.chain, self.probe, self.poison = chain, probe, poison
        self.at = {}

    def on_train_batch_begin(self, batch, logs=None):
        model = self.model
        step = int(model.optimizer.iterations.numpy())
        if self.poison is not None:
            self.poison.assign(1.0 if step == NAN_STEP else 0.0)
        if not model.built:
            return
        x, y = (tf.constant(a) for a in self.probe)
        with tf.GradientTape() as tape:
            h, acts = x, {}
            for layer in self.chain:
                h = layer(h, training=True)
                acts[layer.path] = h.numpy()
            loss = model.compute_loss(x=x, y=y, y_pred=h, training=True)
        grads = tape.gradient(loss, model.trainable_variables)
        self.at[step] = {"before": [v.numpy().copy() for v in model.trainable_variables],
                         "grads": [g.numpy() for g in grads], "acts": acts}

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy()) - 1
        if step in self.at:
            self.at[step]["after"] = [v.numpy().copy() for v in self.model.trainable_variables]


def fit(kind, logdir, jit_compile="auto", every=EVERY, poison=False, extra_callbacks=(), probe=True):
    model, chain = build(kind)
    flag = tf.Variable(0.0, trainable=False) if poison else None
    base = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss(y_true, y_pred):
        value = base(y_true, y_pred)
        if flag is None:
            return value
        # NaN gradients for every variable while the flag is up; exactly zero otherwise.
        scale = tf.where(flag > 0, tf.constant(np.nan, tf.float32), tf.constant(0.0, tf.float32))
        return value + scale * tf.reduce_mean(y_pred)

    model.compile(keras.optimizers.Adam(1e-2), loss, jit_compile=jit_compile)
    reference = Reference(chain, _probe(), flag)
    callback = GradientHealthCallback(str(logdir), every_n_steps=every, first_steps=0,
                                      probe_data=_probe() if probe else None)
    x, y = _data()
    history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0,
                        callbacks=[reference, callback, *extra_callbacks])
    return model, reference, callback, history


def logged_steps(kind):
    total = EPOCHS * N_SAMPLES // BATCH
    steps = [s for s in range(0, total, EVERY)]
    # fit builds a subclassed model while tracing step 0: the callback logs step 1 instead.
    return [1] + steps[1:] if kind == "subclassed" else steps


RUNS = [("sequential", "auto"), ("functional", "auto"), ("subclassed", "auto"),
        ("sequential", True), ("functional", True), ("subclassed", True)]


_TRAINED = {}


def _trained(kind, jit, tmp_path_factory):
    """One fit per (kind, jit) per session; the Sequential run also has Keras' TensorBoard callback."""
    if (kind, jit) not in _TRAINED:
        logdir = tmp_path_factory.mktemp(f"keras_{kind}_{jit}")
        with_tb = (kind, jit) == ("sequential", "auto")
        extra = [keras.callbacks.TensorBoard(str(logdir), histogram_freq=1)] if with_tb else []
        model, reference, callback, _ = fit(kind, logdir, jit_compile=jit, extra_callbacks=extra)
        _TRAINED[(kind, jit)] = (kind, logdir, model, reference, callback)
    return _TRAINED[(kind, jit)]


@pytest.fixture(scope="module", params=RUNS, ids=[f"{k}-jit_{j}" for k, j in RUNS])
def trained(request, tmp_path_factory):
    return _trained(*request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def with_keras_tensorboard(tmp_path_factory):
    return _trained("sequential", "auto", tmp_path_factory)


def test_every_role_of_every_variable_is_logged_at_the_logged_steps(trained):
    kind, logdir, model, reference, callback = trained
    assert callback.errors == 0
    vectors = read_vectors(logdir / "train")
    names = [v.path for v in model.trainable_variables]
    steps = logged_steps(kind)
    for role in ("gradient", "weight"):
        assert {(n, s) for r, n, s in vectors if r == role} == {(n, s) for n in names for s in steps}
    activations = {n for r, n, s in vectors if r == "activation"}
    assert activations == {layer.path for layer in reference.chain}
    assert {s for r, n, s in vectors if r == "activation"} == set(steps)
    for i, name in enumerate(names):
        meta = vectors[("weight", name, steps[0])][1]
        assert meta["shape"] == list(model.trainable_variables[i].shape)
        assert vectors[("gradient", name, steps[0])][1]["position"] == meta["position"]
    # Model order, as the PyTorch integration: each layer's kernel, bias, then its output.
    order = []
    for layer in reference.chain:
        order += [v.path for v in layer.trainable_variables] + [layer.path]
    positions = [vectors[("weight" if name in names else "activation", name, steps[0])][1]["position"]
                 for name in order]
    assert positions == list(range(len(order)))


def test_logged_statistics_equal_the_models_tensors(trained):
    kind, logdir, model, reference, _ = trained
    vectors = read_vectors(logdir / "train")
    names = [v.path for v in model.trainable_variables]
    checked = 0
    for step in logged_steps(kind):
        at = reference.at[step]
        for i, name in enumerate(names):
            assert_stats(vectors[("gradient", name, step)][0], stats_numpy(at["grads"][i]))
            expected = stats_numpy(at["before"][i])
            expected[UR] = update_ratio_numpy(at["before"][i], at["after"][i])
            assert_stats(vectors[("weight", name, step)][0], expected)
            checked += 2
        acts = {n: v for (r, n, s), (v, _) in vectors.items() if r == "activation" and s == step}
        for layer_path, value in at["acts"].items():
            assert_stats(acts[layer_path], stats_numpy(value))
            checked += 1
    assert checked >= 3 * (2 * len(names) + 3)


def test_update_ratio_is_exactly_that_steps_update(trained):
    kind, logdir, model, reference, _ = trained
    vectors = read_vectors(logdir / "train")
    kernel = model.trainable_variables[0].path
    for step in logged_steps(kind):
        at = reference.at[step]
        measured = np.linalg.norm(at["after"][0] - at["before"][0]) / np.linalg.norm(at["before"][0])
        np.testing.assert_allclose(vectors[("weight", kernel, step)][0][UR], measured, rtol=1e-5)
        assert 1e-4 < measured < 1  # Adam at 1e-2 moved the kernel


def test_relu_activations_carry_their_zero_fraction(trained):
    kind, logdir, _, reference, _ = trained
    vectors = read_vectors(logdir / "train")
    step = logged_steps(kind)[0]
    first_relu = next(iter(reference.at[step]["acts"].items()))
    path, value = first_relu
    logged = next(v for (r, n, s), (v, _) in vectors.items() if r == "activation" and s == step and n == path)
    assert 0 < logged[FIELD["zero_fraction"]] < 1
    assert logged[FIELD["zero_fraction"]] == pytest.approx(np.mean(value == 0))


def test_plugin_shows_exact_values_from_gradhealth(trained, plugin_client):
    kind, logdir, model, reference, _ = trained
    client = plugin_client(logdir, samples={"gradhealth": 500})
    kernel = model.trainable_variables[0].path
    step = logged_steps(kind)[1]
    cell = client.ok("/cell", run="train", layer=kernel, step=step)
    for role in ("gradient", "weight"):
        data = cell["roles"][role]
        assert "gradhealth" in data["source"]
        for metric in ("mean", "std", "l2", "max_abs", "zero_fraction"):
            assert data["metrics"][metric]["quality"] == "exact"
    l2 = cell["roles"]["gradient"]["metrics"]["l2"]["value"]
    np.testing.assert_allclose(l2, np.linalg.norm(reference.at[step]["grads"][0].astype(np.float64)), rtol=1e-5)
    assert cell["roles"]["weight"]["metrics"]["update_ratio"]["quality"] == "exact"


def test_rows_pair_with_keras_tensorboard_histograms(with_keras_tensorboard, plugin_client):
    _, logdir, model, _, _ = with_keras_tensorboard
    assert list(logdir.glob("train/events.out.tfevents.*.v2")), "Keras' TensorBoard callback wrote nothing"
    client = plugin_client(logdir, samples={"gradhealth": 500})
    runs = {r["run"]: r for r in client.ok("/runs")["runs"]}
    layers = {layer["name"]: layer for layer in runs["train"]["layers"]}
    kernel = model.trainable_variables[0].path
    assert layers[kernel]["roles"]["weight"]["source"] == "gradhealth+histogram"
    assert layers[kernel]["roles"]["gradient"]["source"] == "gradhealth"
    assert not [n for n in layers if n.endswith("/histogram")]


def test_rows_are_the_custom_loop_helpers_with_layers_as_keys(keras_activation_keys_logdir):
    """The callback and `GradientHealthLogger` given each layer's output keyed by the layer write the
    same rows for one subclassed model, its ReLU layer without variables among them."""
    def rows(run):
        return {(role, layer) for role, layer, _ in read_vectors(keras_activation_keys_logdir / run)}

    assert ("activation", "mlp/relu_0") in rows("callback")
    assert rows("callback") == rows("by_layer")


def test_the_callback_does_not_change_training(tmp_path):
    """Dropout and BatchNorm included: the probe pass restores their state, so fit ends where it would have."""
    def run(with_callback):
        keras.backend.clear_session()
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((N_IN,)), keras.layers.Dense(12, activation="relu"),
                                  keras.layers.Dropout(0.3), keras.layers.BatchNormalization(),
                                  keras.layers.Dense(N_OUT)])
        model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        callbacks = ([GradientHealthCallback(str(tmp_path), every_n_steps=2, first_steps=0, probe_data=_probe())]
                     if with_callback else [])
        x, y = _data()
        history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=callbacks)
        return [v.numpy() for v in model.variables], history.history

    weights_with, history_with = run(True)
    weights_without, history_without = run(False)
    for a, b in zip(weights_with, weights_without):
        np.testing.assert_array_equal(a, b)
    assert history_with == history_without
    vectors = read_vectors(tmp_path / "train")
    assert {n for r, n, s in vectors if r == "activation"} == {
        "sequential/dense", "sequential/batch_normalization", "sequential/dense_1"}


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("keras_nan")
    model, reference, callback, history = fit("sequential", logdir, poison=True)
    return logdir, model, callback, history


def test_nan_gradient_is_counted_and_fit_goes_on(poisoned):
    logdir, model, callback, history = poisoned
    assert len(history.history["loss"]) == EPOCHS and callback.errors == 0
    vectors = read_vectors(logdir / "train")
    names = [v.path for v in model.trainable_variables]
    for name in names:
        vector = vectors[("gradient", name, NAN_STEP)][0]
        assert vector[FIELD["nan_count"]] == vector[FIELD["count"]] > 0
        assert vectors[("gradient", name, 0)][0][FIELD["nan_count"]] == 0
    # The NaN update reached the weights: the next logged step sees them.
    assert vectors[("weight", names[0], NAN_STEP + EVERY)][0][FIELD["nan_count"]] > 0


def test_nan_gradient_is_a_nonfinite_finding(poisoned, plugin_client):
    logdir, model, _, _ = poisoned
    client = plugin_client(logdir, samples={"gradhealth": 500})
    found = client.ok("/findings", run="train")["findings"]
    nonfinite = [f for f in found if f["kind"] == "nonfinite"]
    assert nonfinite and min(f["first_step"] for f in nonfinite) == NAN_STEP
    kernel = model.trainable_variables[0].path
    assert any(kernel in f["layers"] for f in nonfinite)
    cell = client.ok("/cell", run="train", layer=kernel, step=NAN_STEP, role="gradient")["roles"]["gradient"]
    assert "gradhealth" in cell["source"] and cell["status"] == "critical"
    assert cell["metrics"]["nonfinite"]["value"] > 0 and cell["metrics"]["nonfinite"]["quality"] == "exact"


def test_unwritable_log_dir_warns_once_and_fit_goes_on(tmp_path, caplog):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        _, _, _, history = fit("sequential", blocker / "logs", every=1)
    assert len(history.history["loss"]) == EPOCHS
    warnings = [r for r in caplog.records if r.name.startswith("gradhealth_plugin") and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert not blocker.is_dir()


def test_without_probe_data_weights_and_update_ratios_are_still_logged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        model, reference, _, _ = fit("functional", tmp_path, probe=False)
    assert any("probe_data" in r.getMessage() for r in caplog.records)
    vectors = read_vectors(tmp_path / "train")
    assert {r for r, _, _ in vectors} == {"weight"}
    kernel = model.trainable_variables[0].path
    at = reference.at[EVERY]
    np.testing.assert_allclose(vectors[("weight", kernel, EVERY)][0][UR],
                               update_ratio_numpy(at["before"][0], at["after"][0]), rtol=1e-5)


def test_per_epoch_histograms_are_never_shown_as_an_iteration_step(with_keras_tensorboard, plugin_client):
    """Keras' callback logs weight histograms per epoch (steps 0, 1), gradhealth per iteration (0, 3, 6):
    the detail of iteration 3 shows the histogram written nearest in time, labelled with its own step."""
    from tensorboard.backend.event_processing import event_accumulator

    from gradhealth_plugin.writing import format as fmt

    _, logdir, model, _, _ = with_keras_tensorboard
    client = plugin_client(logdir, samples={"gradhealth": 500})
    kernel = model.trainable_variables[0].path
    acc = event_accumulator.EventAccumulator(str(logdir / "train"), size_guidance={"tensors": 0})
    acc.Reload()
    tag = next(t for t in acc.Tags()["tensors"] if t.startswith(kernel) and t.endswith("histogram"))
    keras_walls = {e.step: e.wall_time for e in acc.Tensors(tag)}
    assert sorted(keras_walls) == list(range(EPOCHS))
    own_walls = {e.step: e.wall_time for e in acc.Tensors(fmt.tag_for("weight", kernel))}
    for step in logged_steps("sequential"):
        role = client.ok("/cell", run="train", layer=kernel, step=step, role="weight")["roles"]["weight"]
        assert role["histogram_axis"] == "other", step
        nearest = min(keras_walls, key=lambda e: abs(keras_walls[e] - own_walls[step]))
        assert role["histogram_step"] == nearest
        assert role["histogram_seconds_from_step"] == pytest.approx(keras_walls[nearest] - own_walls[step], abs=1e-3)
