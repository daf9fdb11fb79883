"""Step-time cost of `watch()` logging every 100 steps, before and after its summaries carried a histogram
(and the first 30 steps were all logged), both versions in one run.

"Before" is the package as of commit `BEFORE` (statistics only, every 100th step from step 0), taken
with ``git archive`` into a temporary directory; "after" is this checkout. Child processes, one per
version and repeat, alternate in shuffled order. Each builds two identical copies of a model, one not
watched and one watched with ``every_n_steps=100`` (the defaults otherwise), and steps them in turn,
one step each in a shuffled order, so both see the same drift of a shared machine's load. After 200
warm-up rounds (every step of the first 30 is logged there, after the change), ``--steps`` rounds are
timed:

* base: the median step of the unwatched copy;
* unlogged / logged: the median of the watched copy's steps that are not logged and that are;
* overhead at N = 100: ``(99 * unlogged + logged) / 100 / base - 1``, the mean step's cost;
* first 30 steps: what logging every one of them costs once (29 more logged steps than at N = 100
  alone, each ``logged - unlogged``), and that as a share of a 10,000-step run's time.

The TensorFlow helper and the Keras callback compute the same histogram with TensorFlow ops:
``bench/bench_tf_write_path.py --before <commit>`` times them before and after in the same way.

    .venv/bin/python bench/bench_histogram_overhead.py [--repeats 5] [--steps 1000] [--before <commit>]
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
BEFORE = "c18c1080d15927ede4f1856f1039decc0b9a5111"
EVERY = 100
FIRST = 30
RUN = 10_000


def child(root: str, steps: int, threads: int) -> dict:
    """Times one version (the package under `root`); returns its figures in ms per model."""
    sys.path.insert(0, root)
    import torch
    from torch import nn

    import gradhealth_plugin
    from gradhealth_plugin.torch import unwatch, watch

    assert os.path.dirname(os.path.dirname(os.path.abspath(gradhealth_plugin.__file__))) == os.path.abspath(root)
    torch.set_num_threads(threads)
    models = {
        "mlp": (lambda: nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                                      nn.Linear(128, 10)), (128, 784)),
        "cnn": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                      nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10)), (32, 3, 32, 32)),
    }
    out = {}
    logdir = tempfile.mkdtemp(prefix="gradhealth_bench_hist_")
    for name, (build, shape) in models.items():
        g = torch.Generator().manual_seed(0)
        batches = [(torch.randn(*shape, generator=g), torch.randint(0, 10, (shape[0],), generator=g))
                   for _ in range(8)]
        copies = {}
        for watched in (False, True):
            torch.manual_seed(0)
            model = build()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            handle = watch(model, os.path.join(logdir, name), optimizer=optimizer, every_n_steps=EVERY) \
                if watched else None
            copies[watched] = (model, optimizer, handle)
        times = {False: [], True: []}
        logged = []
        rng = random.Random(0)
        warmup = 2 * EVERY
        for i in range(warmup + steps):
            x, y = batches[i % len(batches)]
            order = [False, True]
            rng.shuffle(order)
            for watched in order:
                model, optimizer, _ = copies[watched]
                start = time.perf_counter()
                loss = nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if i >= warmup:
                    times[watched].append(time.perf_counter() - start)
            if i >= warmup:
                logged.append(i % EVERY == 0)
        handle = copies[True][2]
        unwatch(handle)
        assert handle.errors == 0
        base = statistics.median(times[False]) * 1e3
        unlogged = statistics.median(t for t, lg in zip(times[True], logged) if not lg) * 1e3
        logged_ms = statistics.median(t for t, lg in zip(times[True], logged) if lg) * 1e3
        out[name] = {"base": base, "unlogged": unlogged, "logged": logged_ms,
                     "overhead": ((EVERY - 1) * unlogged + logged_ms) / EVERY / base - 1}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="timed rounds per child (a multiple of 100)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--before", default=BEFORE, help="commit whose package is 'before'")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.threads)))
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
                                       "--steps", str(args.steps), "--threads", str(args.threads)],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
                results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"repeat {repeat + 1}/{args.repeats}: {name} done", file=sys.stderr, flush=True)
    print(f"{args.repeats} repeats x {args.steps} rounds, every_n_steps={EVERY}, {args.threads} torch thread(s), "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          f"before = {args.before[:12]}, after = this checkout")
    print("medians over repeats; ms: median step unwatched (base), of unlogged and of logged steps")
    print(f"{'model':5} {'version':8} {'base ms':>8} {'unlogged':>9} {'logged':>8} {'N=100':>7} "
          f"{'first 30 steps':>15} {'of 10k steps':>13}")
    for model in ("mlp", "cnn"):
        for name in ("before", "after"):
            rows = [r[model] for r in results[name]]
            m = {key: statistics.median(r[key] for r in rows) for key in ("base", "unlogged", "logged", "overhead")}
            # Logging each of the first 30 steps adds 29 logged steps to what N = 100 logs (step 0).
            dense = (FIRST - 1) * (m["logged"] - m["unlogged"]) if name == "after" else 0.0
            print(f"{model:5} {name:8} {m['base']:>8.2f} {m['unlogged']:>9.2f} {m['logged']:>8.2f} "
                  f"{100 * m['overhead']:>+6.1f}% {dense:>12.0f} ms {100 * dense / (RUN * m['base']):>+12.2f}%")


if __name__ == "__main__":
    main()
