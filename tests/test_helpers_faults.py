"""The logging helpers under real faults: a full disk, the log directory removed or replaced by a file,
an infinite weight with warnings turned into errors.

Training must end exactly where it ends without logging; every failure is
counted (``errors``), listed by kind (``problems``, whose counts add up to
``errors``) and warned about once. The full disk is a real 256 KiB tmpfs,
mounted for the test and unmounted after it.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest

from gradhealth_plugin.writing import format as fmt

DISK = "256k"


@pytest.fixture
def tiny_disk(tmp_path):
    """A directory on a 256 KiB tmpfs."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a {DISK} tmpfs: {(done.stderr or done.stdout).strip()}")
    try:
        yield mount
    finally:
        # Lazy: a writer the test could not close must not leave the mount behind.
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def counted(problems):
    """How many failures `problems` reports: one per line, or the count a line gives."""
    total = 0
    for line in problems:
        match = re.search(r"\((\d+) failures of this kind\)$", line)
        total += int(match.group(1)) if match else 1
    return total


def gradhealth_warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("gradhealth_plugin") and r.levelno >= logging.WARNING]


def assert_reported(helper, caplog):
    assert helper.errors > 0
    assert counted(helper.problems) == helper.errors, helper.problems
    assert len(gradhealth_warnings(caplog)) == 1, gradhealth_warnings(caplog)


def assert_disk_full(disk):
    assert shutil.disk_usage(disk).free < 16 * 1024, "the disk never filled up: the test tests nothing"


def logged_steps(logdir):
    """Steps of the gradhealth gradient summaries readable under `logdir`."""
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    steps = set()
    for tag in acc.Tags()[event_accumulator.TENSORS]:
        if tag.startswith(fmt.TAG_PREFIX + "gradient/"):
            steps.update(e.step for e in acc.Tensors(tag))
    return steps


def remove(run, fault):
    shutil.rmtree(run)
    if fault == "replaced_by_a_file":
        run.write_text("not a directory")


# ---------------------------------------------------------------------------
# The TensorFlow custom-loop helper


def _tf_loop(logdir, compiled, steps, fault_at=None, fault=None):
    """Trains `steps` steps logging every step into `logdir` (None: no logging); (logger, weights, losses)."""
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from gradhealth_plugin.tf import GradientHealthLogger

    keras.backend.clear_session()
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(3)])
    optimizer = keras.optimizers.SGD(0.05)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    rng = np.random.default_rng(7)
    x = tf.constant(rng.normal(size=(32, 8)), tf.float32)
    y = tf.constant(rng.integers(0, 3, 32))
    variables = model.trainable_variables
    gh = GradientHealthLogger(str(logdir), every_n_steps=1) if logdir is not None else None

    def train_step(x, y):
        with tf.GradientTape() as tape:
            h = model.layers[0](x, training=True)
            loss = loss_fn(y, model.layers[1](h, training=True))
        grads = tape.gradient(loss, variables)
        if gh is None:
            optimizer.apply_gradients(zip(grads, variables))
        else:
            with gh.step(optimizer.iterations, grads, variables, activations={"hidden": h}):
                optimizer.apply_gradients(zip(grads, variables))
        return loss

    fn = tf.function(train_step) if compiled else train_step
    losses = []
    for step in range(steps):
        if step == fault_at:
            remove(logdir, fault)
        losses.append(float(fn(x, y)))
    if gh is not None:
        gh.close()
    return gh, [v.numpy() for v in variables], losses


def _assert_same_training(got, expected):
    _, weights, losses = got
    _, weights_ref, losses_ref = expected
    assert losses == losses_ref
    for a, b in zip(weights, weights_ref):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("compiled", [True, False], ids=["tf_function", "eager"])
def test_tf_helper_on_a_full_disk_counts_failures_and_training_goes_on(tiny_disk, caplog, compiled):
    steps = 120
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        run = _tf_loop(tiny_disk / "run", compiled, steps)
    assert_disk_full(tiny_disk)
    _assert_same_training(run, _tf_loop(None, compiled, steps))
    assert_reported(run[0], caplog)
    # TensorFlow's own error, or the event file found short of what was written.
    assert re.search(r"No space left on device|disk full", run[0].problems[0])


@pytest.mark.parametrize("fault", ["removed", "replaced_by_a_file"])
def test_tf_helper_when_the_log_directory_goes_away(tmp_path, caplog, fault):
    run = tmp_path / "run"
    steps, fault_at = 40, 10
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        got = _tf_loop(run, True, steps, fault_at=fault_at, fault=fault)
    _assert_same_training(got, _tf_loop(None, True, steps))
    assert_reported(got[0], caplog)
    if fault == "removed":
        # The step that found it gone is lost; then a new event file in the directory made again.
        assert logged_steps(run) == set(range(fault_at + 1, steps))
    else:
        assert run.is_file()


# ---------------------------------------------------------------------------
# The Keras callback


def _fit(log_dir, epochs, fault_at=None, fault=None):
    """fit with Dropout and BatchNorm, logging every step into `log_dir` (None: no callback)."""
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from gradhealth_plugin.keras import GradientHealthCallback

    keras.backend.clear_session()
    keras.utils.set_random_seed(8)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dropout(0.3), keras.layers.BatchNormalization(),
                              keras.layers.Dense(3)])
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    rng = np.random.default_rng(8)
    x = rng.normal(size=(128, 8)).astype(np.float32)
    y = rng.integers(0, 3, 128)
    callbacks = []
    callback = None
    if log_dir is not None:
        if fault_at is not None:
            def on_begin(batch, logs=None):
                if int(model.optimizer.iterations.numpy()) == fault_at:
                    remove(log_dir / "train", fault)

            callbacks.append(keras.callbacks.LambdaCallback(on_train_batch_begin=on_begin))
        callback = GradientHealthCallback(str(log_dir), every_n_steps=1, probe_data=(x[:16], y[:16]))
        callbacks.append(callback)
    history = model.fit(x, y, batch_size=16, epochs=epochs, shuffle=False, verbose=0, callbacks=callbacks)
    del tf
    return callback, [v.numpy() for v in model.variables], history.history


def _assert_same_fit(got, expected):
    """Every variable (BatchNorm statistics included) and every metric as without the callback."""
    _, variables, history = got
    _, variables_ref, history_ref = expected
    assert history == history_ref
    for a, b in zip(variables, variables_ref):
        np.testing.assert_array_equal(a, b)


def test_keras_callback_on_a_full_disk_leaves_training_unchanged(tiny_disk, caplog):
    epochs = 8
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        got = _fit(tiny_disk, epochs)
    assert_disk_full(tiny_disk)
    _assert_same_fit(got, _fit(None, epochs))
    assert_reported(got[0], caplog)


@pytest.mark.parametrize("fault", ["removed", "replaced_by_a_file"])
def test_keras_callback_when_the_log_directory_goes_away(tmp_path, caplog, fault):
    epochs, fault_at = 4, 10
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        got = _fit(tmp_path, epochs, fault_at=fault_at, fault=fault)
    _assert_same_fit(got, _fit(None, epochs))
    assert_reported(got[0], caplog)
    if fault == "removed":
        assert logged_steps(tmp_path / "train") == set(range(fault_at + 1, epochs * 8))
    else:
        assert (tmp_path / "train").is_file()


# ---------------------------------------------------------------------------
# The PyTorch integration


def _torch_train(log_dir, steps, at_step=None):
    """Trains `steps` steps logging every step into `log_dir` (None: no logging), calling
    `at_step(step)` before each; (handle, weights, losses)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(9)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, str(log_dir), optimizer=optimizer, every_n_steps=1) if log_dir is not None else None
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g)
    losses = []
    for step in range(steps):
        if at_step is not None:
            at_step(step)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        if handle is not None:
            handle.flush()  # the event file's buffer reaches the disk every step
    if handle is not None:
        unwatch(handle)
    return handle, [p.detach().numpy().copy() for p in model.parameters()], losses


def test_torch_watch_on_a_full_disk_reports_every_failure(tiny_disk, caplog):
    steps = 150
    with caplog.at_level(logging.WARNING, logger="gradhealth_plugin"):
        handle, weights, losses = _torch_train(tiny_disk, steps)
    assert_disk_full(tiny_disk)
    _, weights_ref, losses_ref = _torch_train(None, steps)
    assert losses == losses_ref
    for a, b in zip(weights, weights_ref):
        np.testing.assert_array_equal(a, b)
    assert_reported(handle, caplog)


def test_torch_watch_logs_again_once_the_full_disk_has_room(tiny_disk):
    """The steps the full disk refused are lost and counted; once it has room, logging goes on, readable."""
    filler = tiny_disk / "filler"
    steps, full_from, room_from = 60, 10, 30

    def disk(step):
        if step == full_from:  # everything the disk has left goes to another file
            with open(filler, "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 1024)
                except OSError:
                    pass
            assert_disk_full(tiny_disk)
        if step == room_from:
            filler.unlink()

    handle, _, losses = _torch_train(tiny_disk, steps, at_step=disk)
    assert losses == _torch_train(None, steps)[2]
    assert handle.errors > 0, "the disk never refused a write: the test tests nothing"
    logged = logged_steps(tiny_disk)
    assert set(range(room_from, steps)) <= logged, sorted(set(range(room_from, steps)) - logged)
    assert set(range(full_from)) <= logged


def test_torch_watch_when_the_log_directory_goes_away(tmp_path):
    """As TensorFlow's writer: a deleted log directory is made again at the next flush."""
    run = tmp_path / "run"
    steps, fault_at = 20, 8
    _, _, losses = _torch_train(run, steps, at_step=lambda step: step == fault_at and shutil.rmtree(run))
    assert losses == _torch_train(None, steps)[2]
    assert set(range(fault_at + 1, steps)) <= logged_steps(run)


def test_torch_watch_logs_an_infinite_weight_under_warnings_as_errors(tmp_path):
    """A weight turned infinite changes by NaN: the step is logged, never lost to a numpy warning that
    ``-W error`` (or pytest's ``filterwarnings = error``) makes an exception."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(9)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    steps = 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        handle = watch(model, str(tmp_path), optimizer=optimizer, every_n_steps=1)
        for step in range(steps):
            if step == 2:
                with torch.no_grad():
                    model[0].weight[0, 0] = float("inf")
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        unwatch(handle)
    assert handle.errors == 0, handle.problems
    assert logged_steps(tmp_path) == set(range(steps))
