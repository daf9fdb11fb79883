"""Warm heatmap requests: what a repeated request for unchanged data costs, in real TensorBoard processes.

    python bench/bench_warm.py                  # both loaders, about a minute each

Every request lists the run's tags through the data provider to know whether its data
changed. Runs: ``mixed``, 50 layers x 200 steps with gradhealth summaries and TF2
histograms of the same layers (two plugins listed); ``own``, the same layers'
gradhealth summaries only; ``rank0`` .. ``rank3``, one training of four ranks (20 layers
x 200 steps each). Per loader: the cold heatmap and the warm one (median of ``--repeats``).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import sys
import tempfile

import numpy as np

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import bench_big_run as big  # noqa: E402  (gradhealth-summary writer, requests)
import bench_scale as scale  # noqa: E402  (TensorBoard launcher, probe plugin, TF2 writer)

LAYERS, STEPS, RANKS, RANK_LAYERS = 50, 200, 4, 20


def build(root: pathlib.Path) -> dict:
    """Writes the runs; returns run -> (plugin, tags, last step) for `wait_loaded`."""
    rng = np.random.default_rng(0)
    names = [f"model.layer_{i}.weight" for i in range(LAYERS)]
    big.write_gradhealth_run(root / "own", names, STEPS, rng)
    big.write_gradhealth_run(root / "mixed", names, STEPS, rng)
    series = [s for s in scale._tf2_series(LAYERS, STEPS, rng) if s.role == "gradient"]
    scale.RunWriter(root / "mixed", series, "tf2", 30).write_steps(0, STEPS, first_ever=True)
    for r in range(RANKS):
        big.write_gradhealth_run(root / f"rank{r}", names[:RANK_LAYERS], STEPS, rng)
    expected = {"own": (big.GH_PLUGIN, LAYERS, STEPS - 1), "mixed": (big.GH_PLUGIN, LAYERS, STEPS - 1)}
    expected.update({f"rank{r}": (big.GH_PLUGIN, RANK_LAYERS, STEPS - 1) for r in range(RANKS)})
    return expected


def measure(load_fast: str, logdir: pathlib.Path, expected: dict, repeats: int, logs: pathlib.Path) -> dict:
    server = scale.Server(logdir, load_fast, True, logs / f"tb_{load_fast}.log", big.SAMPLES)
    gh = "/data/plugin/gradhealth/heatmap"
    out = {}
    try:
        big.wait_loaded(server, expected, 600)
        big.wait_loaded(server, {"mixed": ("histograms", LAYERS, STEPS - 1)}, 600)
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
    args = parser.parse_args(argv)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ghwarm_"))
    try:
        (tmp / "logs").mkdir()
        expected = build(tmp / "logdir")
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
