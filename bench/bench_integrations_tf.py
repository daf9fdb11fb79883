"""Step-time cost of gradhealth's Keras callback and TensorFlow custom-loop helper.

Trains a small MLP and a small CNN without logging and with logging every
N = 1, 10, 100 steps, and prints the time per training step relative to no
logging. All configurations train the same model in turns (with or without
the callback in ``fit``; with one train-step function each in the custom
loop), so they differ only by the logging. After a warm-up (which traces
every function and runs one logged step), every repeat runs each
configuration once, in shuffled order, for the same number of steps, timing
every step; `bench` says how the ratio is estimated from those times.

    .venv/bin/python bench/bench_integrations_tf.py [--repeats 7] [--steps 500] [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from gradhealth_plugin.keras import GradientHealthCallback  # noqa: E402
from gradhealth_plugin.tf import GradientHealthLogger  # noqa: E402

EVERY = (1, 10, 100)


def mlp():
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                             keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)], name="mlp")


def cnn():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10),
    ], name="cnn")


MODELS = {"mlp": (mlp, (64,), 128), "cnn": (cnn, (28, 28, 1), 64)}


def data(shape, batch, n=2048, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, *shape)).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch, drop_remainder=True)
    return dataset.prefetch(2), (x[:batch], y[:batch])


def compiled(make):
    model = make()
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class _Clock(keras.callbacks.Callback):
    """First in the callback list: the time between two batch starts is one whole step, callbacks included."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list = []

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append(time.perf_counter())

    def on_train_end(self, logs=None):
        self.starts.append(time.perf_counter())


class KerasCase:
    """One model trained by fit; each configuration is its own set of callbacks on that model."""

    def __init__(self, name: str, configs, root: str) -> None:
        make, shape, batch = MODELS[name]
        self.model = compiled(make)
        self.dataset, probe = data(shape, batch)
        self.clock = _Clock()
        self.callbacks = {every: [self.clock] if every is None else [
            self.clock, GradientHealthCallback(os.path.join(root, f"keras_{name}_{every}"), every_n_steps=every,
                                               probe_data=probe)] for every in configs}

    def run(self, every, steps: int):
        """(index of the first step, time of each step)."""
        first = int(self.model.optimizer.iterations.numpy())
        self.clock.starts = []
        self.model.fit(self.dataset, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False,
                       callbacks=self.callbacks[every])
        # The last interval also holds fit's end-of-training work, alike in every configuration.
        return first, np.diff(self.clock.starts)


class LoopCase:
    """One model trained by a GradientTape loop; each configuration is its own train-step function."""

    def __init__(self, name: str, configs, root: str) -> None:
        make, shape, batch = MODELS[name]
        self.model = model = make()
        self.optimizer = optimizer = keras.optimizers.Adam(1e-3)
        dataset, _ = data(shape, batch)
        self.iterator = iter(dataset)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        variables = model.trainable_variables

        def make_step(gh):
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True))
                grads = tape.gradient(loss, variables)
                with gh.step(optimizer.iterations, grads, variables) if gh else contextlib.nullcontext():
                    optimizer.apply_gradients(zip(grads, variables))
                return loss

            return train_step

        self.steps = {every: make_step(None if every is None else GradientHealthLogger(
            os.path.join(root, f"loop_{name}_{every}"), every_n_steps=every)) for every in configs}

    def run(self, every, steps: int):
        first = int(self.optimizer.iterations.numpy())
        train_step = self.steps[every]
        batches = [next(self.iterator) for _ in range(steps)]
        times = np.empty(steps)
        for k, (x, y) in enumerate(batches):
            start = time.perf_counter()
            train_step(x, y).numpy()
            times[k] = time.perf_counter() - start
        return first, times


def bench(kind, case_cls, name, steps, repeats, root) -> list:
    """Rows (kind, model, N, base, unlogged, logged step ms, ratio).

    Every step is timed. Within a repeat, a configuration's mean step time is
    estimated from the median logged and the median unlogged step,
    ((N - 1) * unlogged + logged) / N, and divided by the median step time
    without logging: a burst of load from elsewhere on the machine lands on a
    few steps and moves a median far less than a mean. The ratio reported is
    the median over the repeats.
    """
    configs = [None, *EVERY]
    case = case_cls(name, configs, root)
    for every in configs:
        # Traces everything and runs a logged step: starts at a multiple of every N.
        case.run(every, max(EVERY))
    shuffle = random.Random(0)
    ratios = {every: [] for every in EVERY}
    medians = {every: {"base": [], "unlogged": [], "logged": []} for every in EVERY}
    for _ in range(repeats):
        order = list(configs)
        shuffle.shuffle(order)
        measured = {every: case.run(every, steps) for every in order}
        base = float(np.median(measured[None][1]))
        for every in EVERY:
            first, times = measured[every]
            logged_mask = (first + np.arange(len(times))) % every == 0
            logged = float(np.median(times[logged_mask]))
            unlogged = float(np.median(times[~logged_mask])) if (~logged_mask).any() else logged
            ratios[every].append(((every - 1) * unlogged + logged) / every / base)
            for key, value in (("base", base), ("unlogged", unlogged), ("logged", logged)):
                medians[every][key].append(value)
    rows = []
    for every in EVERY:
        m = {key: statistics.median(values) * 1e3 for key, values in medians[every].items()}
        rows.append((kind, name, every, m["base"], m["unlogged"] if every > 1 else float("nan"), m["logged"],
                     statistics.median(ratios[every])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=500, help="steps per timed repeat (a multiple of 100)")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra- and inter-op threads (0: TensorFlow's default); 1 steadies the timings")
    args = parser.parse_args()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    root = tempfile.mkdtemp(prefix="gradhealth_bench_")
    rows = []
    try:
        for name in args.models.split(","):
            keras.utils.set_random_seed(0)
            rows += bench("keras fit + GradientHealthCallback", KerasCase, name, args.steps, args.repeats, root)
            rows += bench("tf custom loop + GradientHealthLogger", LoopCase, name, args.steps, args.repeats, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{args.repeats} repeats of {args.steps} steps each, medians; tf {tf.__version__}, keras {keras.__version__}, "
          f"{os.cpu_count()} CPUs, {args.threads or 'default'} TensorFlow threads")
    print("ms: median step time without logging (base), of steps not logged and of logged steps;")
    print("ratio: ((N - 1) * unlogged + logged) / N / base, the mean step time relative to no logging")
    print(f"{'integration':36} {'model':5} {'N':>4} {'base ms':>8} {'unlogged ms':>12} {'logged ms':>10} {'ratio':>7}")
    for kind, name, every, base, unlogged, logged, ratio in rows:
        print(f"{kind:36} {name:5} {every:>4} {base:>8.3f} {unlogged:>12.3f} {logged:>10.3f} {ratio:>7.3f}")


if __name__ == "__main__":
    main()
