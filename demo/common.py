"""What every demo script shares: where runs go, fixed seeds, one CPU thread, the toy data sets.

Importing this module first sets the environment TensorFlow reads when it is
imported, so any demo script can be run on its own (``python demo/exploding.py``)
or through ``python demo/make_runs.py``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import time
from typing import Callable, Dict

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN's kernels may change round-off between CPUs; without them a rerun writes the same numbers.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RUNS = HERE / "runs"


def run_dir(out: pathlib.Path, story: str, run: str) -> pathlib.Path:
    """An empty directory for one run: event files append, so a rerun must not find the old ones."""
    path = pathlib.Path(out) / story / run
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def setup_tf(seed: int):
    """TensorFlow on one thread, deterministic ops, every seed fixed. Returns the ``tf`` module."""
    import keras
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass  # already initialised by an earlier demo in this process: the setting stays
    tf.config.experimental.enable_op_determinism()
    # Layer names count up per process (dense, dense_1, ...): every run names its layers alike.
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    return tf


def setup_torch(seed: int):
    """PyTorch on one thread (these matrices are too small to gain from more), seeded. Returns ``torch``."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    return torch


def teacher_classification(seed: int, n: int = 2048, n_in: int = 20, n_classes: int = 4, label_noise: float = 0.0):
    """Inputs and the labels a random two-layer ReLU teacher gives them: learnable, not trivially.

    `label_noise` is the share of labels replaced by random classes, which no
    model can learn except by memorising them.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, n_in)).astype(np.float32)
    w1 = rng.normal(size=(n_in, 32)) / np.sqrt(n_in)
    w2 = rng.normal(size=(32, n_classes)) / np.sqrt(32)
    y = np.argmax(np.maximum(x @ w1, 0) @ w2, axis=1).astype(np.int64)
    if label_noise:
        flip = rng.random(n) < label_noise
        y[flip] = rng.integers(0, n_classes, size=int(flip.sum()))
    return x, y


def regression(seed: int, n: int = 2048, n_in: int = 20):
    """A smooth nonlinear target with a little noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, n_in)).astype(np.float32)
    proj = rng.normal(size=(n_in, 4)) / np.sqrt(n_in)
    h = x @ proj
    y = np.sin(h[:, 0]) + 0.5 * h[:, 1] * h[:, 2] + np.tanh(h[:, 3])
    y = (y + 0.1 * rng.normal(size=n)).astype(np.float32)[:, None]
    return x, y


def batch_indices(seed: int, n: int, batch: int, steps: int) -> np.ndarray:
    """`steps` batches of `batch` indices, epoch after epoch of shuffled data: ``[steps, batch]``."""
    rng = np.random.default_rng(seed + 1)
    per_epoch = n // batch
    epochs = -(-steps // per_epoch)
    order = np.concatenate([rng.permutation(n)[: per_epoch * batch] for _ in range(epochs)])
    return order[: steps * batch].reshape(steps, batch)


def log_seed004_histograms(writer, model, outputs: Dict[str, object], step: int) -> None:
    """Seed 004's PyTorch logging: every parameter and its gradient, plus the hooked module outputs."""
    for name, param in model.named_parameters():
        writer.add_histogram(f"weights/{name}", param.data, step)
        writer.add_histogram(f"grads/{name}", param.grad, step)
    for name, output in outputs.items():
        writer.add_histogram(f"activations/{name}", output, step)


def cli(main: Callable[[pathlib.Path], Dict[str, dict]], doc: str) -> None:
    """``python demo/<story>.py [--out DIR]``: writes the story's runs under DIR/<story>/."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--out", default=str(RUNS), help="logdir to write the story's runs into (default demo/runs)")
    args = parser.parse_args()
    start = time.monotonic()
    report(main(pathlib.Path(args.out)))
    print(f"done in {time.monotonic() - start:.0f} s")


def report(results: Dict[str, dict]) -> None:
    for run, facts in results.items():
        print(f"  {run}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                       for k, v in facts.items()))
