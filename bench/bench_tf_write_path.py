"""Step-time cost of how the TensorFlow helpers write: summary ops in the graph (before) or the rows
leaving the graph through ``tf.py_function`` and written from Python (after), logging every 100 steps.

"Before" is the package as of commit `BEFORE` (the last one whose writes were summary ops inside the
training graph), taken with ``git archive`` into a temporary directory; "after" is this checkout.
Child processes, one per version and repeat, alternate in shuffled order; each imports its version
and times, after a warm-up that traces everything and runs logged steps:

* a custom ``tf.function`` loop with ``GradientHealthLogger(every_n_steps=100)`` (gradients,
  weights, update ratios and the two hidden activations), and the same loop without logging;
* ``fit`` with ``GradientHealthCallback(every_n_steps=100)`` (probe batch of the training batch
  size, activations on), and ``fit`` without it.

The model is the MLP of `bench_integrations_tf.py` (64-256-256-10, batch 128, Adam, one TensorFlow
thread). Every step is timed; per child, the mean step is estimated as
``(99 * median unlogged step + median logged step) / 100`` and divided by the median step without
logging (as in `bench_integrations_tf.py`); the table gives medians over the repeats.

    .venv/bin/python bench/bench_tf_write_path.py [--repeats 5] [--steps 1000] [--before <commit>]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEFORE = "455b1f8a37c61df03fcc6c01a6b4453d84e8b572"
EVERY = 100


def child(root: str, steps: int) -> dict:
    """Times one version (the package under `root`); returns its figures in ms."""
    sys.path.insert(0, root)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import keras

    import gradhealth_plugin
    from gradhealth_plugin.keras import GradientHealthCallback
    from gradhealth_plugin.tf import GradientHealthLogger

    assert os.path.dirname(os.path.dirname(os.path.abspath(gradhealth_plugin.__file__))) == os.path.abspath(root)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(0)
    logdir = tempfile.mkdtemp(prefix="gradhealth_bench_write_")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 64)).astype(np.float32)
    y = rng.integers(0, 10, 2048).astype(np.int64)
    batches = [(tf.constant(x[i:i + 128]), tf.constant(y[i:i + 128])) for i in range(0, 2048, 128)]

    def mlp():
        return keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                                 keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])

    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loop(gh):
        model, optimizer = mlp(), keras.optimizers.Adam(1e-3)
        variables = model.trainable_variables

        @tf.function
        def train_step(xb, yb):
            with tf.GradientTape() as tape:
                h1 = model.layers[0](xb)
                h2 = model.layers[1](h1)
                loss = loss_fn(yb, model.layers[2](h2))
            grads = tape.gradient(loss, variables)
            if gh is None:
                optimizer.apply_gradients(zip(grads, variables))
            else:
                with gh.step(optimizer.iterations, grads, variables, activations={"h1": h1, "h2": h2}):
                    optimizer.apply_gradients(zip(grads, variables))
            return loss

        def run(n):
            first = int(optimizer.iterations.numpy())
            times = np.empty(n)
            for k in range(n):
                xb, yb = batches[k % len(batches)]
                start = time.perf_counter()
                train_step(xb, yb).numpy()
                times[k] = time.perf_counter() - start
            return first, times

        return run

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.starts.append(time.perf_counter())

        def on_train_end(self, logs=None):
            self.starts.append(time.perf_counter())

    def fit(with_callback):
        model = mlp()
        model.compile(keras.optimizers.Adam(1e-3), loss_fn)
        clock = Clock()
        callbacks = [clock]
        if with_callback:
            callbacks.append(GradientHealthCallback(os.path.join(logdir, "keras"), every_n_steps=EVERY,
                                                    probe_data=(x[:128], y[:128])))
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(128, drop_remainder=True)

        def run(n):
            first = int(model.optimizer.iterations.numpy())
            clock.starts = []
            model.fit(dataset, epochs=1, steps_per_epoch=n, verbose=0, callbacks=callbacks)
            return first, np.diff(clock.starts)

        return run

    def figures(base_run, logged_run):
        base_run(2 * EVERY)
        logged_run(2 * EVERY)  # traces and logs twice
        _, base = base_run(steps)
        first, times = logged_run(steps)
        mask = (first + np.arange(len(times))) % EVERY == 0
        b, unlogged, logged = (float(np.median(t)) * 1e3 for t in (base, times[~mask], times[mask]))
        return {"base": b, "unlogged": unlogged, "logged": logged,
                "ratio": ((EVERY - 1) * unlogged + logged) / EVERY / b}

    out = {"loop": figures(loop(None), loop(GradientHealthLogger(os.path.join(logdir, "loop"),
                                                                  every_n_steps=EVERY))),
           "keras": figures(fit(False), fit(True))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="timed steps per configuration (multiple of 100)")
    parser.add_argument("--before", default=BEFORE, help="commit whose package is 'before'")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps)))
        return
    with tempfile.TemporaryDirectory(prefix="gradhealth_before_") as before_root:
        archive = subprocess.run(["git", "-C", REPO, "archive", args.before, "gradhealth_plugin"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", before_root], input=archive, check=True)
        roots = {"before": before_root, "after": REPO}
        results = {name: [] for name in roots}
        shuffle = random.Random(0)
        for repeat in range(args.repeats):
            order = list(roots)
            shuffle.shuffle(order)
            for name in order:
                done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", roots[name],
                                       "--steps", str(args.steps)], capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
                results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"repeat {repeat + 1}/{args.repeats}: {name} done", file=sys.stderr, flush=True)
    print(f"{args.repeats} repeats x {args.steps} steps, every_n_steps={EVERY}, MLP 64-256-256-10, batch 128, "
          f"one TensorFlow thread, {os.cpu_count()} CPUs; before = {args.before[:12]}, after = this checkout")
    print("ms: median step without logging (base), of unlogged and of logged steps; ratio: mean step / base")
    print(f"{'integration':28} {'version':8} {'base ms':>8} {'unlogged ms':>12} {'logged ms':>10} {'ratio':>7}")
    for kind, label in (("loop", "custom loop + Logger"), ("keras", "fit + Callback")):
        for name in ("before", "after"):
            rows = [r[kind] for r in results[name]]
            m = {key: statistics.median(r[key] for r in rows) for key in ("base", "unlogged", "logged", "ratio")}
            print(f"{label:28} {name:8} {m['base']:>8.3f} {m['unlogged']:>12.3f} {m['logged']:>10.3f} "
                  f"{m['ratio']:>7.3f}")


if __name__ == "__main__":
    main()
