"""Warm heatmap requests: what a repeated request for unchanged data costs, in real TensorBoard processes.

    python bench/bench_warm.py                  # both loaders, about a minute each
    python bench/bench_warm.py --in-process --layers 200 --steps 1000   # the Python loader, in this process

Every request lists the run's tags through the data provider to know whether its data
changed. Runs: ``mixed``, 50 layers x 200 steps with gradhealth summaries and TF2
histograms of the same layers (two plugins listed); ``own``, the same layers'
gradhealth summaries only; ``rank0`` .. ``rank3``, one training of four ranks (20 layers
x 200 steps each). Per loader: the cold heatmap and the warm one (median of ``--repeats``).
Prints figures; asserts nothing.

``--in-process``: the Python loader's multiplexer and the plugin in this process (no HTTP,
no other TensorBoard work): the cold heatmap, the warm one as served (the multiplexer tells
the run is unchanged, nothing is listed) and the warm one listing the run's tags as every
request did before (the plugin without that check), one after the other on the same data.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import bench_big_run as big  # noqa: E402  (gradhealth-summary writer, requests)
import bench_scale as scale  # noqa: E402  (TensorBoard launcher, probe plugin, TF2 writer)

RANKS, RANK_LAYERS = 4, 20
SIZE = [50, 200]  # layers, steps of `own` and `mixed` (--layers, --steps)


def build(root: pathlib.Path) -> dict:
    """Writes the runs; returns run -> (plugin, tags, last step) for `wait_loaded`."""
    layers, steps = SIZE
    rng = np.random.default_rng(0)
    names = [f"model.layer_{i}.weight" for i in range(layers)]
    big.write_gradhealth_run(root / "own", names, steps, rng)
    big.write_gradhealth_run(root / "mixed", names, steps, rng)
    series = [s for s in scale._tf2_series(layers, steps, rng) if s.role == "gradient"]
    scale.RunWriter(root / "mixed", series, "tf2", 30).write_steps(0, steps, first_ever=True)
    for r in range(RANKS):
        big.write_gradhealth_run(root / f"rank{r}", names[:RANK_LAYERS], steps, rng)
    expected = {"own": (big.GH_PLUGIN, layers, steps - 1), "mixed": (big.GH_PLUGIN, layers, steps - 1)}
    expected.update({f"rank{r}": (big.GH_PLUGIN, RANK_LAYERS, steps - 1) for r in range(RANKS)})
    return expected


def measure_in_process(logdir: pathlib.Path, repeats: int) -> dict:
    """run -> (cold s, warm s as served, warm s listing the run's tags), in this process."""
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin

    from gradhealth_plugin import plugin

    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"gradhealth": 0, "histograms": 0})
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    gh = plugin.GradHealthPlugin(base_plugin.TBContext(
        logdir=str(logdir), multiplexer=multiplexer,
        data_provider=data_provider.MultiplexerDataProvider(multiplexer, str(logdir))))
    analyzer, reader = gh._analyzer, gh._analyzer._reader
    ctx = tb_context.RequestContext()

    def heatmap(run: str) -> float:
        t0 = time.perf_counter()
        rd, _ = analyzer.run(ctx, "", run)
        analyzer.answer(rd, (run, "gradient"), lambda: gh.heatmap_impl(rd, "gradient", "health", columns=768,
                                                                        layout="compact"))
        return time.perf_counter() - t0

    out = {}
    for run in ("own", "mixed", "rank1"):
        cold = heatmap(run)
        warm = statistics.median(heatmap(run) for _ in range(repeats))
        held_in, reader._held_in = reader._held_in, None  # every request lists the run's tags
        try:
            listing = statistics.median(heatmap(run) for _ in range(repeats))
        finally:
            reader._held_in = held_in
        out[run] = (cold, warm, listing)
    return out


def measure(load_fast: str, logdir: pathlib.Path, expected: dict, repeats: int, logs: pathlib.Path) -> dict:
    layers, steps = SIZE
    server = scale.Server(logdir, load_fast, True, logs / f"tb_{load_fast}.log", big.SAMPLES)
    gh = "/data/plugin/gradhealth/heatmap"
    out = {}
    try:
        big.wait_loaded(server, expected, 600)
        big.wait_loaded(server, {"mixed": ("histograms", layers, steps - 1)}, 600)
        for run in ("own", "mixed", "rank1"):
            cold = big.get(server, gh, run=run, role="gradient", columns=768, layout="compact")[0]
            warm = statistics.median(big.get(server, gh, run=run, role="gradient", columns=768, layout="compact")[0]
                                     for _ in range(repeats))
            out[run] = (cold, warm)
    finally:
        server.stop()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loaders", default="false,true", help="--load_fast values, comma separated")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--layers", type=int, default=SIZE[0], help="layers of the runs own and mixed")
    parser.add_argument("--steps", type=int, default=SIZE[1], help="steps of the runs own and mixed")
    parser.add_argument("--in-process", action="store_true",
                        help="the Python loader in this process: warm as served against warm listing every request")
    args = parser.parse_args(argv)
    SIZE[:] = [args.layers, args.steps]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ghwarm_"))
    try:
        (tmp / "logs").mkdir()
        expected = build(tmp / "logdir")
        if args.in_process:
            r = measure_in_process(tmp / "logdir", args.repeats)
            print(f"in process, Python loader, {args.layers} layers x {args.steps} steps:")
            print(f"  {'run':<8} {'cold s':>8} {'warm ms':>8} {'listing ms':>11} {'warm/cold':>10}")
            for run, (cold, warm, listing) in r.items():
                print(f"  {run:<8} {cold:>8.3f} {warm * 1e3:>8.2f} {listing * 1e3:>11.2f} {warm / cold:>10.4f}")
            return 0
        for load_fast in args.loaders.split(","):
            r = measure(load_fast, tmp / "logdir", expected, args.repeats, tmp / "logs")
            print(f"--load_fast={load_fast}: {'run':<8} {'cold s':>8} {'warm ms':>8}")
            for run, (cold, warm) in r.items():
                print(f"{'':>19}{run:<8} {cold:>8.3f} {warm * 1e3:>8.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
