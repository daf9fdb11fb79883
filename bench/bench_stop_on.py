"""What ``stop_on`` adds to training at every-100-steps logging, before/after in one run (CPU).

    .venv/bin/python bench/bench_stop_on.py [--repeats 7] [--steps 500] [--threads 1] [--frameworks torch,keras]

Each model is trained with gradhealth logging every N = 100 steps three ways:
without ``stop_on`` (before), with ``stop_on="critical"`` and with
``stop_on="warn"`` (after). ``stop_on`` does nothing on the 99 steps that are
not logged; on a logged step it judges the run (`live.LiveRun.judge`).

* PyTorch (`watch`): three copies of the model (same weights, same batches)
  are stepped in turn, one step each, every step timed.
* Keras (`GradientHealthCallback` in ``fit``): one model per configuration,
  each repeat runs every configuration's ``fit`` once in shuffled order, a
  clock callback timing each step with every callback's work included.

Within a repeat a configuration's mean step time is estimated from its median
logged and median unlogged step, ``(99 * unlogged + logged) / 100`` (a burst of
load from elsewhere moves a median far less than a mean); "after / before" is
that estimate with ``stop_on`` over the one without, median over the repeats.

A repeat holds only a few logged steps, and the judge's work grows with the
logged steps it keeps (the first and the last `live.HISTORY`). So the script
also times the judge alone on the same model's rows once `HISTORY` + 50
logged steps are kept, and prints that against 100 unlogged steps: the
steady-state cost of a long run.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

EVERY = 100
CONFIGS = (None, "critical", "warn")


def _estimate(times: np.ndarray, logged: np.ndarray) -> tuple:
    """(median logged, median unlogged, estimated mean step time) of one configuration in one repeat."""
    lg, un = float(np.median(times[logged])), float(np.median(times[~logged]))
    return lg, un, ((EVERY - 1) * un + lg) / EVERY


def _full_history_judge(live_run, repeats: int = 20) -> float:
    """Seconds one judge takes once the run keeps HISTORY + 1 logged steps of these rows."""
    from gradhealth_plugin import live

    rng = np.random.default_rng(0)
    rows = {tag: row.vectors[row.n - 1].copy() for tag, row in live_run._rows.items()}
    meta = {tag: (row.role, row.layer, row.position, row.shape) for tag, row in live_run._rows.items()}
    copy = live.LiveRun(live_run.alert, "bench", limits=live_run._limits)
    times = []
    for k in range(live.HISTORY + 50 + repeats):
        for tag, vector in rows.items():
            role, layer, position, shape = meta[tag]
            copy.add(k * EVERY, role, layer, vector * (1 + 0.01 * rng.normal()), position, shape)
        start = time.perf_counter()
        copy.judge()
        if k >= live.HISTORY + 50:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_torch(steps: int, repeats: int, root: str) -> list:
    import torch
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    def mlp():
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))

    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(128, 784, generator=g), torch.randint(0, 10, (128,), generator=g)) for _ in range(8)]
    results = {c: [] for c in CONFIGS}
    judges = {}
    for r in range(repeats):
        copies = {}
        for config in CONFIGS:
            torch.manual_seed(0)
            model = mlp()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            handle = watch(model, os.path.join(root, f"torch_{r}_{config}"), optimizer=opt, every_n_steps=EVERY,
                           stop_on=config)
            copies[config] = (model, opt, handle)
        times = {c: [] for c in CONFIGS}
        order = list(CONFIGS)
        rng = random.Random(r)
        warmup = 10
        for i in range(warmup + steps):
            x, y = batches[i % len(batches)]
            rng.shuffle(order)
            for config in order:
                model, opt, _ = copies[config]
                start = time.perf_counter()
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if i >= warmup:
                    times[config].append(time.perf_counter() - start)
        logged = (np.arange(warmup, warmup + steps) % EVERY) == 0
        for config in CONFIGS:
            results[config].append(_estimate(np.array(times[config]), logged))
        for config, (_, _, handle) in copies.items():
            if config is not None and config not in judges:
                judges[config] = _full_history_judge(handle._live)
            unwatch(handle)
            assert handle.errors == 0 and not handle.should_stop, (handle.problems, handle.stop_message)
    return _rows("torch watch, mlp 784-256-128-10, batch 128", results, judges)


def bench_keras(steps: int, repeats: int, root: str) -> list:
    import keras
    import tensorflow as tf

    from gradhealth_plugin.keras import GradientHealthCallback

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.starts = []

        def on_train_batch_begin(self, batch, logs=None):
            self.starts.append(time.perf_counter())

        def on_train_end(self, logs=None):
            self.starts.append(time.perf_counter())

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=2048)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(128, drop_remainder=True).prefetch(2)
    cases = {}
    for config in CONFIGS:
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                                  keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
        model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        clock = Clock()
        callback = GradientHealthCallback(os.path.join(root, f"keras_{config}"), every_n_steps=EVERY,
                                          probe_data=(x[:128], y[:128]), stop_on=config)
        cases[config] = (model, clock, callback)
        # Traces everything; later fits start half-way between logged steps, so that a fit's own
        # start-up cost (in its first step) never lands on a logged step.
        model.fit(dataset, epochs=1, steps_per_epoch=EVERY + EVERY // 2, verbose=0, callbacks=[clock, callback])
    results = {c: [] for c in CONFIGS}
    shuffle = random.Random(0)
    for _ in range(repeats):
        order = list(CONFIGS)
        shuffle.shuffle(order)
        for config in order:
            model, clock, callback = cases[config]
            first = int(model.optimizer.iterations.numpy())
            clock.starts = []
            model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[clock, callback])
            times = np.diff(clock.starts)[1:]
            results[config].append(_estimate(times, (first + 1 + np.arange(len(times))) % EVERY == 0))
    judges = {}
    for config, (_, _, callback) in cases.items():
        assert callback.errors == 0 and callback.stopped_by is None, callback.stop_message
        if config is not None:
            judges[config] = _full_history_judge(callback._live)
    return _rows("keras fit, mlp 64-256-256-10, batch 128", results, judges)


def _rows(label: str, results: dict, judges: dict) -> list:
    before = results[None]
    rows = []
    for config in CONFIGS:
        logged = statistics.median(lg for lg, _, _ in results[config])
        unlogged = statistics.median(un for _, un, _ in results[config])
        ratio = statistics.median(est / b_est for (_, _, est), (_, _, b_est) in zip(results[config], before))
        # What stop_on adds to a logged step, spread over the 100 steps: unlogged steps run the same code
        # with and without it, so this leaves out their noise.
        added = statistics.median((lg - b_lg) / (EVERY * b_un) for (lg, _, _), (b_lg, b_un, _)
                                  in zip(results[config], before))
        judge = judges.get(config)
        steady = judge / (EVERY * unlogged) if judge is not None else None
        rows.append((label, config, unlogged * 1e3, logged * 1e3, ratio, added, judge, steady))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=500, help="timed steps per repeat (a multiple of 100)")
    parser.add_argument("--threads", type=int, default=1, help="torch / TensorFlow threads (0: their default)")
    parser.add_argument("--frameworks", default="torch,keras")
    args = parser.parse_args()
    wanted = args.frameworks.split(",")
    if args.threads and "torch" in wanted:
        import torch

        torch.set_num_threads(args.threads)
    if args.threads and "keras" in wanted:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    root = tempfile.mkdtemp(prefix="gradhealth_bench_stop_on_")
    rows = []
    try:
        if "torch" in wanted:
            rows += bench_torch(args.steps, args.repeats, root)
        if "keras" in wanted:
            rows += bench_keras(args.steps, args.repeats, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"logging every {EVERY} steps; {args.repeats} repeats x {args.steps} steps; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, {args.threads or 'default'} thread(s)")
    print("unlogged / logged: median step ms; after/before: mean step time with stop_on over without (see the")
    print("docstring); added: (logged with - logged without) / 100 unlogged steps without; judge: one judge")
    print("with HISTORY logged steps kept, ms and as a share of 100 unlogged steps")
    print(f"{'integration':44} {'stop_on':9} {'unlogged':>9} {'logged':>8} {'after/before':>13} {'added':>7} "
          f"{'judge':>7} {'judge/100 steps':>16}")
    for label, config, unlogged, logged, ratio, added, judge, steady in rows:
        judge_text = f"{judge * 1e3:7.2f}" if judge is not None else f"{'-':>7}"
        steady_text = f"{100 * steady:15.2f}%" if steady is not None else f"{'-':>16}"
        print(f"{label:44} {str(config):9} {unlogged:9.3f} {logged:8.2f} {ratio:13.3f} {100 * added:6.2f}% "
              f"{judge_text} {steady_text}")


if __name__ == "__main__":
    main()
