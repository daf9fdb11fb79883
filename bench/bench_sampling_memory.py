"""Memory cost of keeping 500 histogram samples per tag instead of 100 (the Rust data server's default).

    python bench/bench_sampling_memory.py                      # the bench_scale logdir at its default size
    python bench/bench_scale.py --logdir /tmp/ghb --loaders true   # (writes a logdir this script can reuse)
    python bench/bench_sampling_memory.py --logdir /tmp/ghb    # reuse it
    python bench/bench_sampling_memory.py --small              # a quick run on a small logdir

Under ``--load_fast=true`` (what ``--load_fast=auto`` picks wherever the Rust data
server runs) TensorBoard keeps 100 random samples per histogram tag; gradhealth's
loader asks for 500, as the Python loader keeps. This starts TensorBoard with
gradhealth twice on the same logdir: once with ``--samples_per_plugin=histograms=100``
(TensorBoard's own default before gradhealth raises it) and once with default flags,
and prints the resident memory of the TensorBoard process and of the data server it
started: once everything is loaded, and after the tab's heatmap and findings of every
run were served. Processes are started by this script and stopped by their pid.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_scale  # noqa: E402 - a sibling script, not a package

SETTINGS = (("histograms=100 (TensorBoard's Rust default)", ["--samples_per_plugin=histograms=100"]),
            ("default flags (gradhealth keeps 500)", []))


def _mb(n: int) -> float:
    return n / 2 ** 20


def measure(logdir: pathlib.Path, writers, args, logs: pathlib.Path, load_fast: str) -> list:
    tags = {run: bench_scale._tags_of(w.series) for run, w in writers.items()}
    steps = {bench_scale.TF2_RUN: args.steps, bench_scale.TORCH_RUN: args.torch_steps}
    expected = {run: (len(tags[run]), steps[run] - 1) for run in tags}
    rows = []
    for i, (name, flags) in enumerate(SETTINGS):
        server = bench_scale.Server(logdir, load_fast, True, logs / f"tb_{load_fast}_{i}.log", flags)
        try:
            load_s = server.wait_loaded(expected, args.ready_timeout)
            time.sleep(2.0)  # let the loader settle after its last read
            loaded = server.memory()
            kept = {run: server.json(f"/data/plugin/{bench_scale.PROBE}/floor", run=run, chunk=64)["datums"]
                    for run in tags}
            for run in tags:
                server.timed_answer("/data/plugin/gradhealth/heatmap", run=run, role="gradient", metric="health")
                server.timed("/data/plugin/gradhealth/findings", run=run)
            served = server.memory()
        finally:
            server.stop()
        rows.append({"name": name, "load_s": load_s, "loaded": loaded, "served": served, "kept": kept})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--layers", type=int, default=300)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--buckets", type=int, default=30)
    parser.add_argument("--torch-layers", type=int, default=20)
    parser.add_argument("--torch-steps", type=int, default=300)
    parser.add_argument("--load-fast", default="true", help="--load_fast value (true: the Rust data server)")
    parser.add_argument("--logdir", help="where to write the logdir (kept, and reused when its size matches)")
    parser.add_argument("--ready-timeout", type=float, default=1800.0)
    args = parser.parse_args(argv)
    if args.small:
        args.layers, args.steps, args.torch_layers, args.torch_steps = 30, 1000, 4, 300
    bench_scale._check_framing()
    tmp, logdir, logs = bench_scale.work_dirs(args.logdir, "ghbench_mem_")
    try:
        writers = bench_scale.build_logdir(logdir, args)
        rows = measure(logdir, writers, args, logs, args.load_fast)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n--load_fast={args.load_fast}, logdir: {args.layers} layers x 3 roles x {args.steps} steps (tf2) "
          f"+ {args.torch_layers} x 3 x {args.torch_steps} (torch)")
    print("| setting | samples kept (tf2 / torch) | load s | RSS loaded: TensorBoard + data server (MB) "
          "| RSS after heatmap + findings | peak (VmHWM) |")
    for r in rows:
        lo, se = r["loaded"], r["served"]
        kept = " / ".join(f"{r['kept'][run]:,}" for run in (bench_scale.TF2_RUN, bench_scale.TORCH_RUN))
        print(f"| {r['name']} | {kept} | {r['load_s']:.0f} "
              f"| {_mb(lo['rss']):,.0f} + {_mb(lo['child_rss']):,.0f} = {_mb(lo['rss'] + lo['child_rss']):,.0f} "
              f"| {_mb(se['rss']):,.0f} + {_mb(se['child_rss']):,.0f} = {_mb(se['rss'] + se['child_rss']):,.0f} "
              f"| {_mb(se['hwm']):,.0f} + {_mb(se['child_hwm']):,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
