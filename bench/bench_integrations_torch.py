"""Training-step cost of gradhealth_plugin.torch.watch on a small MLP and a small CNN (CPU).

    python bench/bench_integrations_torch.py [--repeats 5] [--steps 400] [--threads 1]

Each repeat builds four identical copies of the model (same initial weights,
same batches): one not watched and three watched with every_n_steps N = 1, 10,
100. It steps them in turn, one step each, round after round: a shared
machine's load drifts over seconds, and interleaving single steps makes every
copy see the same drift (the order is shuffled every round). After `--warmup` rounds (not timed; step 0 is logged
there, and the event file is opened then), `--steps` rounds are timed.

Printed per model:

* ratio N: the median over repeats of mean step time of the copy watched at N
  divided by mean step time of the unwatched copy (means, because the logged
  steps are the cost and are rare);
* logged / other: median time of a logged step and of a step that is not
  logged, for the N = 10 copy, against the unwatched copy's median step.
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

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradhealth_plugin.torch import unwatch, watch  # noqa: E402

EVERY = (1, 10, 100)


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))


MODELS = {
    "mlp 784-256-128-10 (235k params), batch 128": (mlp, (128, 784)),
    "cnn 2 conv + 2 fc (155k params), 3x32x32, batch 32": (cnn, (32, 3, 32, 32)),
}


def repeat(build, shape, steps, warmup, root, seed):
    """Per-step times of each copy: {None or N: [seconds]}, and which steps of each copy were logged."""
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(*shape, generator=g), torch.randint(0, 10, (shape[0],), generator=g))
               for _ in range(8)]
    copies = {}
    for n in (None,) + EVERY:
        torch.manual_seed(0)
        model = build()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        handle = watch(model, os.path.join(root, f"n{n}"), optimizer=optimizer, every_n_steps=n) if n else None
        copies[n] = (model, optimizer, handle)
    times = {n: [] for n in copies}
    logged = {n: [] for n in copies}
    order = list(copies)
    rng = random.Random(seed)
    for i in range(warmup + steps):
        x, y = batches[i % len(batches)]
        # A fresh order each round: a copy stepped right after the N=1 copy finds its data evicted
        # from the caches, and a fixed (or rotated) order would always put the same copy there.
        rng.shuffle(order)
        for n in order:
            model, optimizer, _ = copies[n]
            t0 = time.perf_counter()
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            t1 = time.perf_counter()
            if i >= warmup:
                times[n].append(t1 - t0)
                logged[n].append(bool(n) and i % n == 0)
    for n, (_, _, handle) in copies.items():
        if handle is not None:
            unwatch(handle)
            assert handle.errors == 0, handle.problems
    return times, logged


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400, help="timed rounds per repeat (a multiple of 100)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; {args.repeats} repeats x {args.steps} interleaved rounds, "
          f"{args.warmup} warm-up rounds")
    wanted = args.models.split(",")
    root = tempfile.mkdtemp(prefix="gh_bench_torch_")
    try:
        for label, (build, shape) in MODELS.items():
            if label.split()[0] not in wanted:
                continue
            ratios = {n: [] for n in EVERY}
            base_steps, logged_steps, other_steps = [], [], []
            for r in range(args.repeats):
                times, logged = repeat(build, shape, args.steps, args.warmup, os.path.join(root, f"{r}"), seed=r)
                base = statistics.fmean(times[None])
                for n in EVERY:
                    ratios[n].append(statistics.fmean(times[n]) / base)
                base_steps += times[None]
                logged_steps += [t for t, lg in zip(times[10], logged[10]) if lg]
                other_steps += [t for t, lg in zip(times[10], logged[10]) if not lg]
            base_median = statistics.median(base_steps)
            extra = statistics.median(logged_steps) - statistics.median(other_steps)
            print(f"\n{label}")
            print(f"  unwatched step {base_median * 1e3:.2f} ms (median); N=10 copy: logged step "
                  f"{statistics.median(logged_steps) * 1e3:.2f} ms, other step "
                  f"{statistics.median(other_steps) * 1e3:.2f} ms (medians)")
            for n in EVERY:
                spread = sorted(ratios[n])
                print(f"  N={n:<4d} step-time ratio {statistics.median(ratios[n]):.3f}  "
                      f"(repeats {spread[0]:.3f} .. {spread[-1]:.3f}; "
                      f"logged-step cost / N alone: +{100 * extra / (n * base_median):.1f}%)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
