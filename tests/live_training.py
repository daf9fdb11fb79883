"""Tiny trainings on CPU for the alert tests: healthy, or driven to diverge at a known step.

`train_torch` and `train_keras` train a small ReLU MLP on fixed synthetic data,
logging every `EVERY` steps with gradhealth's own integration (not each of the first steps, as by default). With
``diverge_at`` the learning rate is raised 10,000-fold from that step on: the
gradients explode, then turn NaN. Each returns a `Result` with when every
logged step was written (flushed to disk) and, for PyTorch, the true onset:
the first logged step whose raw gradients break the contract's triggers
(max |g| above 1e3, or NaN/Inf), read from the tensors themselves.

``pause`` sleeps after each logged step, so that a watcher following the
logdir can be timed against the training's progress; ``slow_pause``, when given,
replaces it from ``diverge_at`` on, where the watcher is timed.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Dict, Optional

import numpy as np

EVERY = 5
STEPS = 80
BATCH = 32
LR = 0.05
DIVERGED_LR_FACTOR = 1e4
EXPLODING_MAX_ABS = 1e3


@dataclasses.dataclass
class Result:
    logged_at: Dict[int, float]  # logged step -> time.monotonic() once it was on disk
    onset: Optional[int]  # first logged step whose raw gradients exploded or turned non-finite
    last_step: int  # the last step trained
    owner: object = None  # the WatchHandle or the callback
    error: Optional[BaseException] = None  # what the training loop raised, if anything

    def logged_index(self, step: int) -> int:
        return sorted(self.logged_at).index(step)

    def logged_step(self, index: int) -> int:
        return sorted(self.logged_at)[index]


def _pause(step: int, diverge_at: Optional[int], pause: float, slow_pause: Optional[float]) -> float:
    """Seconds to sleep after logged `step`: `slow_pause` from the divergence on, where a watcher is timed
    (its polls take longer on a loaded machine), `pause` before it, so the run leading up to it stays short."""
    if slow_pause is not None and diverge_at is not None and step >= diverge_at:
        return slow_pause
    return pause


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH * 8, 16)).astype(np.float32)
    # Labels a linear map of the inputs decides: a healthy run learns them (its loss falls),
    # where random labels would leave it stalled, which is a finding of its own (no_progress).
    y = np.argmax(x @ rng.normal(size=(16, 4)), axis=1)
    return x, y


def train_torch(run_dir: str, steps: int = STEPS, diverge_at: Optional[int] = None, pause: float = 0.0,
                slow_pause: Optional[float] = None, with_optimizer: bool = True, loss_file: bool = False,
                **watch_kwargs) -> Result:
    """With ``loss_file`` the loss is written every step into a second event file of the run, as a
    ``SummaryWriter`` next to ``watch`` writes it (created after gradhealth's, so it is the newer file)."""
    import torch
    from torch import nn

    from gradhealth_plugin.torch import TrainingStopped, unwatch, watch
    from gradhealth_plugin.writing.events import SummaryFileWriter

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    handle = watch(model, run_dir, optimizer=opt if with_optimizer else None, every_n_steps=EVERY, first_steps=0,
                   **watch_kwargs)
    x, y = (torch.from_numpy(a) for a in _data())
    losses = SummaryFileWriter(run_dir, filename_suffix=".loss") if loss_file else None
    logged_at, onset, error, step = {}, None, None, 0
    try:
        for step in range(steps):
            if diverge_at is not None and step == diverge_at:
                for group in opt.param_groups:
                    group["lr"] = LR * DIVERGED_LR_FACTOR
            i = slice((step % 8) * BATCH, (step % 8 + 1) * BATCH)
            loss = nn.functional.cross_entropy(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            if step % EVERY == 0 and onset is None:
                grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
                if not torch.isfinite(grads).all() or grads.abs().max() > EXPLODING_MAX_ABS:
                    onset = step
            if with_optimizer:
                opt.step()
            else:
                with torch.no_grad():
                    for p in model.parameters():
                        p -= opt.param_groups[0]["lr"] * p.grad
            if losses is not None:
                losses.write_scalar(step, "loss", loss.item())
            if step % EVERY == 0:
                handle.flush()
                if losses is not None:
                    losses.flush()
                logged_at[step] = time.monotonic()
                time.sleep(_pause(step, diverge_at, pause, slow_pause))
            if handle.should_stop:
                break
    except TrainingStopped as e:
        error = e
    finally:
        unwatch(handle)
        if losses is not None:
            losses.close()
    return Result(logged_at, onset, step, handle, error)


def train_keras(log_dir: str, steps: int = STEPS, diverge_at: Optional[int] = None, pause: float = 0.0,
                slow_pause: Optional[float] = None, **callback_kwargs) -> Result:
    """``fit`` with one epoch per logged step (the callback flushes its events at each epoch's end)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    from gradhealth_plugin.keras import GradientHealthCallback

    keras.utils.set_random_seed(0)
    x, y = _data()
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
    model.compile(optimizer=keras.optimizers.SGD(LR),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    gradhealth = GradientHealthCallback(log_dir, every_n_steps=EVERY, first_steps=0, probe_data=(x[:BATCH], y[:BATCH]),
                                        **callback_kwargs)
    logged_at: Dict[int, float] = {}
    trained = []

    class Pace(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if diverge_at is not None and epoch * EVERY >= diverge_at:
                self.model.optimizer.learning_rate.assign(LR * DIVERGED_LR_FACTOR)

        def on_train_batch_end(self, batch, logs=None):
            trained.append(batch)

        def on_epoch_end(self, epoch, logs=None):
            # After gradhealth's own on_epoch_end, which wrote and flushed the epoch's logged step.
            logged_at[epoch * EVERY] = time.monotonic()
            time.sleep(_pause(epoch * EVERY, diverge_at, pause, slow_pause))

    model.fit(x[:BATCH * EVERY], y[:BATCH * EVERY], batch_size=BATCH, epochs=steps // EVERY, shuffle=False,
              callbacks=[gradhealth, Pace()], verbose=0)
    return Result(logged_at, None, len(trained) - 1, gradhealth)


def train_tf(run_dir: str, steps: int = STEPS, diverge_at: Optional[int] = None, **logger_kwargs) -> Result:
    """A custom ``tf.GradientTape`` loop inside ``tf.function``, logged with `GradientHealthLogger`; stops when
    the logger's ``should_stop`` turns True. The onset is read from the raw gradients, as for PyTorch."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    from gradhealth_plugin.tf import GradientHealthLogger

    keras.utils.set_random_seed(0)
    x, y = _data()
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
    optimizer = keras.optimizers.SGD(LR)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    gh = GradientHealthLogger(run_dir, every_n_steps=EVERY, first_steps=0, **logger_kwargs)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        flat = tf.concat([tf.reshape(g, [-1]) for g in grads], 0)
        exploded = tf.logical_or(tf.logical_not(tf.reduce_all(tf.math.is_finite(flat))),
                                 tf.reduce_max(tf.abs(flat)) > EXPLODING_MAX_ABS)
        with gh.step(optimizer.iterations, grads, model.trainable_variables):
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return exploded

    logged_at, onset, step = {}, None, 0
    for step in range(steps):
        if diverge_at is not None and step == diverge_at:
            optimizer.learning_rate.assign(LR * DIVERGED_LR_FACTOR)
        # The batches `train_keras` feeds fit, in its order: the same divergence, NaN from step 24.
        i = slice((step % EVERY) * BATCH, (step % EVERY + 1) * BATCH)
        exploded = bool(train_step(x[i], y[i]))
        if step % EVERY == 0:
            if exploded and onset is None:
                onset = step
            logged_at[step] = time.monotonic()
        if gh.should_stop:
            break
    gh.close()
    return Result(logged_at, onset, step, gh)
