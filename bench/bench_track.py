"""What the run track and the findings' covers cost: prints figures, asserts nothing.

    python bench/bench_track.py

1. `responses.downsample`, the thinning of a run-level scalar for the track route,
   on random series of 1,000 to 1,000,000 points (TensorBoard keeps 1,000 scalar
   samples per tag unless --samples_per_plugin=scalars=0 keeps them all).
2. The findings route on every demo run (`demo/runs`), warm, with the covers it
   now sends, next to the same findings without them (`to_json` alone), and the
   track route; medians of 5 requests, milliseconds.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gradhealth_plugin.serving import responses  # noqa: E402


def _median_ms(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def downsampling() -> None:
    rng = np.random.default_rng(0)
    print("downsample (1,000 bins)")
    for n in (1_000, 10_000, 100_000, 1_000_000):
        steps, values = np.arange(n, dtype=np.int64), rng.random(n)
        kept = len(responses.downsample(steps, values, responses.TRACK_BINS))
        print(f"  {n:>9,} points: {_median_ms(lambda: responses.downsample(steps, values, responses.TRACK_BINS)):7.1f} ms,"
              f" {kept:,} points sent")


def demo_routes() -> None:
    from tensorboard import context

    from tests.conftest import PluginClient

    client = PluginClient(REPO / "demo" / "runs")
    analyzer = client.plugin._analyzer
    ctx = context.RequestContext()
    print("demo runs, warm (ms): findings with covers | findings without | track")
    for run in analyzer.list_runs(ctx, ""):
        rd, found = analyzer.run(ctx, "", run)
        with_covers = _median_ms(lambda: responses.run_findings(rd, found))
        without = _median_ms(lambda: [responses.with_step_texts(f.to_json()) for f in found])
        track = _median_ms(lambda: responses.track(rd))
        print(f"  {run:<30} {with_covers:7.2f} {without:7.2f} {track:7.2f}")


if __name__ == "__main__":
    downsampling()
    demo_routes()
