"""Many-tags benchmark: the first request on a run of 20,000 histogram tags, in-process.

    python bench/bench_many_tags.py                       # 10,000 layers x (gradient + weight) x 20 steps
    python bench/bench_many_tags.py --code /path/to/old   # also time another checkout, for a before/after table
    python bench/bench_many_tags.py --profile             # and print where the cold request's time goes

Prints figures; it is not a test and asserts nothing about time. See bench/README.md.

The logdir has one run of 10,000 dense layers, each logging its gradient and
its weight as TF2-format histograms (30 equal buckets) for 20 steps: 20,000
tags, 400,000 histograms. A few layers explode, vanish or grow, so that the
findings and the cell statuses have work to do. Events are framed with
`bench_scale`'s batched TFRecord writer.

Each checkout is measured in its own process (``PYTHONPATH`` set to it), on
TensorBoard's Python loader in that process (``EventMultiplexer`` and
``MultiplexerDataProvider``, as `tensorboard --load_fast=false` serves them),
the plugin's routes called through a werkzeug test client. Loading the event
files is done once and not counted. *cold* is the first ``/runs`` plus the
first ``/heatmap`` (gradient, health) of a new plugin instance, whose caches are
empty (median of ``--repeats`` new instances); *warm* is the same two requests
again. *read floor* is the data provider's own ``read_tensors`` of every
histogram tag of the run in one call: the decoding no plugin reading the
histograms can avoid. Each repeat times the floor right before its cold
requests, in the same process, so that *cold / floor* (of CPU time) stays
comparable when other jobs load the machine and wall times double.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import os
import pathlib
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from typing import List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scale  # noqa: E402 - a sibling script, not a package

REPO = pathlib.Path(__file__).resolve().parents[1]
RUN = "many"
TARGET_COLD = 4.0  # seconds, first /runs + /heatmap


def _series(layers: int, steps: int, rng) -> List[bench_scale.TagSeries]:
    """Gradient and weight of `layers` dense layers; every 1000th explodes, vanishes or grows."""
    t = np.arange(steps, dtype=np.float64)
    out = []
    for i in range(layers):
        fan = 64 + 16 * (i % 8)
        size = fan * fan
        g_std = 1e-3 * (0.5 + rng.random()) * (1 + 0.3 * rng.standard_normal(steps)).clip(0.3)
        g_mean = 0.05 * g_std * rng.standard_normal(steps)
        w_std = math.sqrt(2.0 / fan) * (1 + 0.01 * t)
        if i % 1000 == 1:  # explodes in the last quarter
            g_std = np.where(t >= 0.75 * steps, g_std * 1e7, g_std)
        if i % 1000 == 2:  # vanishes after the first third
            g_std = np.where(t > steps / 3, 1e-9, g_std)
            g_mean = np.where(t > steps / 3, 0.0, g_mean)
        if i % 1000 == 3:  # weights grow
            w_std = w_std * (1 + 0.5 * t)
        out.append(bench_scale.TagSeries(f"gradients/layer_{i}/kernel", "gradient", size, g_mean, g_std))
        out.append(bench_scale.TagSeries(f"weights/layer_{i}/kernel", "weight", size, np.zeros(steps), w_std))
    return out


def build_logdir(root: pathlib.Path, layers: int, steps: int, buckets: int) -> None:
    """Writes the logdir, or keeps it when its manifest matches."""
    params = {"layers": layers, "steps": steps, "buckets": buckets, "version": 1}
    manifest = root / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()) == params:
        print(f"reusing the logdir {root} ({params})")
        return
    shutil.rmtree(root / RUN, ignore_errors=True)
    manifest.unlink(missing_ok=True)
    t0 = time.perf_counter()
    writer = bench_scale.RunWriter(root / RUN, _series(layers, steps, np.random.default_rng(0)), "tf2", buckets)
    n = writer.write_steps(0, steps, first_ever=True, chunk=5)
    print(f"wrote run {RUN}: {n:,} histogram events, {writer.path.stat().st_size / 1e6:,.0f} MB "
          f"in {time.perf_counter() - t0:.1f} s")
    manifest.write_text(json.dumps(params))


# --------------------------------------------------------------------------- one checkout, in its own process

def _measure(logdir: str, repeats: int, profile: bool, provider_only: bool = False) -> dict:
    """Times the routes of the gradhealth importable in this process (see the module docstring)."""
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.data import provider
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from gradhealth_plugin import plugin

    t0 = time.perf_counter()
    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        tensor_size_guidance=dict(plugin.DEFAULT_SAMPLES_PER_PLUGIN))
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    dp = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    load = time.perf_counter() - t0

    def new_client():
        # As TensorBoard's Python loader makes it: the multiplexer beside its data provider.
        context = base_plugin.TBContext(logdir=logdir, data_provider=dp,
                                        multiplexer=None if provider_only else multiplexer)
        apps = plugin.GradHealthPlugin(context).get_plugin_apps()
        return lambda route, **params: werkzeug_test.Client(apps[route], wrappers.Response).get(
            route, query_string=params)

    def first_requests(get) -> tuple:
        """(wall, CPU, CPU in full garbage collections) seconds of the tab's first two requests, the
        heatmap's with every page of it."""
        full = []  # CPU time of each full collection, which passes over everything TensorBoard loaded

        def timed(phase, info):
            if info["generation"] == 2:
                full.append(time.process_time() if phase == "start" else time.process_time() - full.pop())

        gc.callbacks.append(timed)
        t, cpu = time.perf_counter(), time.process_time()
        try:
            for route, params in (("/runs", {}), ("/heatmap", {"run": RUN, "role": "gradient", "metric": "health"})):
                while params is not None:  # an answer past the cell cap comes in pages; the tab asks for each
                    response = get(route, **params)
                    assert response.status_code == 200, (route, response.get_data(as_text=True)[:300])
                    page = response.get_json().get("page")
                    params = {**params, **page["next"]} if page else None
        finally:
            gc.callbacks.remove(timed)
        return time.perf_counter() - t, time.process_time() - cpu, sum(full)

    ctx = tb_context.RequestContext()
    tags = list(dp.list_tensors(ctx, experiment_id="", plugin_name="histograms")[RUN])

    def read_floor() -> tuple:
        """(wall, CPU) seconds of the data provider decoding every histogram of the run."""
        t, cpu = time.perf_counter(), time.process_time()
        dp.read_tensors(ctx, experiment_id="", plugin_name="histograms", downsample=1_000_000,
                        run_tag_filter=provider.RunTagFilter(runs=[RUN], tags=tags))
        return time.perf_counter() - t, time.process_time() - cpu

    floor, cold, warm = [], [], []
    for _ in range(repeats):
        floor.append(read_floor())
        get = new_client()
        cold.append(first_requests(get))
        warm.append(first_requests(get))
    out = {"tags": len(tags), "load": load, "floor": statistics.median(f[0] for f in floor),
           "floor_cpu": statistics.median(f[1] for f in floor), "cold": statistics.median(c[0] for c in cold),
           "cold_cpu": statistics.median(c[1] for c in cold), "cold_all": [round(c[0], 2) for c in cold],
           "ratio_cpu": statistics.median(c[1] / f[1] for c, f in zip(cold, floor)),
           "warm": statistics.median(w[0] for w in warm), "warm_cpu": statistics.median(w[1] for w in warm),
           "cold_gc": statistics.median(c[2] for c in cold)}
    if profile:
        prof = cProfile.Profile()
        get = new_client()
        prof.enable()
        first_requests(get)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(35)
        out["profile"] = text.getvalue()
    return out


def _run_checkout(code: str, logdir: pathlib.Path, repeats: int, profile: bool, provider_only: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=code, TF_CPP_MIN_LOG_LEVEL="3")
    argv = ([sys.executable, __file__, "_measure", str(logdir), str(repeats)] + (["--profile"] if profile else [])
            + (["--provider-only"] if provider_only else []))
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measuring {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--buckets", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3, help="new plugin instances timed per checkout (median)")
    parser.add_argument("--code", action="append", default=[],
                        help="another checkout of gradhealth to time on the same logdir (repeatable)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one cold request per checkout")
    parser.add_argument("--provider-only", action="store_true",
                        help="give the plugin the data provider alone (no multiplexer), as under other loaders")
    parser.add_argument("--logdir", help="where to write the logdir (kept, and reused when its size matches)")
    args = parser.parse_args(argv)
    bench_scale._check_framing()
    tmp, logdir, _ = bench_scale.work_dirs(args.logdir, "ghmany_")
    try:
        build_logdir(logdir, args.layers, args.steps, args.buckets)
        results = []
        for code in args.code + [str(REPO)]:
            r = _run_checkout(code, logdir, args.repeats, args.profile, args.provider_only)
            results.append((code, r))
            if args.profile:
                print(f"--- profile of a cold request, {code}\n{r['profile']}")
        print(f"\n{results[0][1]['tags']:,} histogram tags x {args.steps} steps, Python loader, in-process "
              f"(seconds; cold is the median of {args.repeats} new plugin instances)\n")
        print(f"| checkout | load (not counted) | read floor, wall (CPU) | cold /runs + /heatmap (each) | cold, CPU "
              f"| of it full GCs | cold CPU / floor CPU | cold CPU - floor CPU | warm (CPU) "
              f"| cold / target ({TARGET_COLD:g} s) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for code, r in results:
            each = ", ".join(f"{c:.2f}" for c in r["cold_all"])
            print(f"| {code} | {r['load']:.1f} | {r['floor']:.2f} ({r['floor_cpu']:.2f}) | {r['cold']:.2f} ({each}) "
                  f"| {r['cold_cpu']:.2f} | {r.get('cold_gc', float('nan')):.2f} | {r['ratio_cpu']:.2f} "
                  f"| {r['cold_cpu'] - r['floor_cpu']:.2f} "
                  f"| {r['warm']:.2f} ({r['warm_cpu']:.2f}) | {r['cold'] / TARGET_COLD:.2f} |")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_measure":
        result = _measure(sys.argv[2], int(sys.argv[3]), "--profile" in sys.argv[4:], "--provider-only" in sys.argv[4:])
        print(json.dumps(result))
        sys.exit(0)
    sys.exit(main())
