"""Writes the bundled sample logdir: two short TF2 training runs of one MLP.

* ``healthy``: ReLU, He initialisation, Adam with learning rate 1e-3.
* ``exploding``: the same model and data with Adam's learning rate at 1.0, a
  thousand times too high. The first logged step still looks normal; from the
  next one on, the largest |gradient| is above 1e3 (seed 002's explosion line)
  for about half the run.

Both runs use a ``tf.GradientTape`` loop and log, every 10 steps,
``gradients/<var.name>`` and ``weights/<var.name>`` histograms (the weights as
they were when the gradient was computed), and the loss every step::

    python demo/make_sample.py [--out demo/runs/sample]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN's kernels may change round-off between CPUs; without them a rerun writes the same numbers.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SEED = 20240501
N_SAMPLES = 1024
N_FEATURES = 16
WIDTHS = (64, 64, 64, 1)
BATCH = 64
STEPS = 300
# Fewer than 100 logged steps per tag: TensorBoard's Rust loader keeps at most 100 histograms per tag.
LOG_EVERY = 10

RUNS = {
    "healthy": {"learning_rate": 1e-3},
    "exploding": {"learning_rate": 1.0},
}


def make_data(seed: int):
    """A smooth nonlinear regression target with a little noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N_SAMPLES, N_FEATURES)).astype(np.float32)
    proj = rng.normal(size=(N_FEATURES, 4)) / np.sqrt(N_FEATURES)
    h = x @ proj
    y = np.sin(h[:, 0]) + 0.5 * h[:, 1] * h[:, 2] + np.tanh(h[:, 3])
    y = (y + 0.1 * rng.normal(size=N_SAMPLES)).astype(np.float32)[:, None]
    return x, y


class Dense(tf.Module):
    """A fully connected layer whose variables are named as Keras 2 named them (``dense_1/kernel:0``)."""

    def __init__(self, fan_in: int, fan_out: int, name: str, relu: bool):
        super().__init__(name=name)
        with tf.name_scope(name):
            self.kernel = tf.Variable(
                tf.random.normal([fan_in, fan_out], stddev=np.sqrt(2.0 / fan_in)), name="kernel")  # He
            self.bias = tf.Variable(tf.zeros([fan_out]), name="bias")
        self.relu = relu

    def __call__(self, x):
        y = tf.matmul(x, self.kernel) + self.bias
        return tf.nn.relu(y) if self.relu else y


class MLP(tf.Module):
    """Four Dense layers, ReLU between them, a linear output."""

    def __init__(self):
        super().__init__(name="mlp")
        sizes = (N_FEATURES,) + WIDTHS
        self.dense_layers = [
            Dense(sizes[i], sizes[i + 1], "dense" if i == 0 else f"dense_{i}", relu=i < len(WIDTHS) - 1)
            for i in range(len(WIDTHS))
        ]

    def __call__(self, x):
        for layer in self.dense_layers:
            x = layer(x)
        return x

    def ordered_variables(self):
        return [v for layer in self.dense_layers for v in (layer.kernel, layer.bias)]


def train(run_dir: pathlib.Path, learning_rate: float, steps: int = STEPS) -> dict:
    tf.keras.utils.set_random_seed(SEED)
    x, y = make_data(SEED)
    model = MLP()
    variables = model.ordered_variables()
    opt = tf.keras.optimizers.Adam(learning_rate)
    batches = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N_SAMPLES, seed=SEED).repeat().batch(BATCH)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
        grads = tape.gradient(loss, variables)
        opt.apply_gradients(zip(grads, variables))
        return loss, grads

    writer = tf.summary.create_file_writer(str(run_dir))
    peak = 0.0
    with writer.as_default():
        for step, (xb, yb) in enumerate(batches.take(steps)):
            logged = step % LOG_EVERY == 0
            before = [tf.identity(v) for v in variables] if logged else None
            loss, grads = train_step(xb, yb)
            tf.summary.scalar("loss", loss, step=step)
            if logged:
                for var, value, grad in zip(variables, before, grads):
                    tf.summary.histogram(f"gradients/{var.name}", grad, step=step)
                    tf.summary.histogram(f"weights/{var.name}", value, step=step)
                peak = max(peak, max(float(tf.reduce_max(tf.abs(g))) for g in grads))
    writer.close()
    return {"final_loss": float(loss), "max_abs_grad": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "runs" / "sample"), help="logdir to (re)write")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.experimental.enable_op_determinism()
    out = pathlib.Path(args.out)
    for name, params in RUNS.items():
        run_dir = out / name
        if run_dir.exists():
            shutil.rmtree(run_dir)  # event files append: a rerun must not leave the old run beside the new one
        result = train(run_dir, **params)
        print(f"{name}: final loss {result['final_loss']:.4g}, largest |gradient| {result['max_abs_grad']:.3g}")


if __name__ == "__main__":
    main()
