"""What comparing the ranks of one training costs.

1. `analysis.ranks.find` on generated runs: each rank is a run of LAYERS layers whose
   gradient rows hold STEPS logged steps (the tables the analysis judges; reading them is
   what every run costs anyway). The time of one comparison (the best of a few) for several
   world sizes; the analyzer makes it once per data version of the training's runs.
2. A heatmap request on a rank of a 16-rank training against one on a run alone (same
   data), under TensorBoard's Python loader and its Rust data server: every request on a
   rank checks whether any rank's data changed.

    .venv/bin/python bench/bench_ranks.py
"""

from __future__ import annotations

import time

import numpy as np

from gradhealth_plugin.analysis import limits, metrics, ranks
from gradhealth_plugin.reading import runs
from gradhealth_plugin.reading import tags as T

LAYERS = 200
STEPS = 1000
REPEATS = 3


def _run(name: str, norms: np.ndarray) -> runs.RunData:
    steps = np.arange(STEPS, dtype=np.int64) * 10
    layers = []
    for i in range(LAYERS):
        values = {"l2": norms[i], "count": np.full(STEPS, 1000.0)}
        quality = {k: np.full(STEPS, metrics.EXACT, dtype=np.uint8) for k in values}
        table = metrics.MetricTable(steps=steps, values=values, quality=quality)
        layers.append(runs.Layer(name=f"layer_{i}", group="", kind=T.KIND_KERNEL, order=i,
                                 roles={T.GRADIENT: runs.RoleData(tags=[f"g/{i}"], source="gradhealth", table=table)}))
    return runs.RunData(run=name, layers=layers, scalars={}, unclassified=[], steps_kept=STEPS,
                        last_step=int(steps[-1]))


def main() -> None:
    rng = np.random.default_rng(0)
    lim = limits.thresholds()
    print(f"{LAYERS} layers x {STEPS} logged steps per rank, one rank's layer_7 not reduced")
    for world in (2, 8, 32):
        shared = rng.lognormal(0.0, 1.0, (LAYERS, STEPS))
        members = []
        for r in range(world):
            norms = shared.copy()
            if r == world - 1:
                norms[7] *= 1.5
            members.append((f"rank{r}", _run(f"exp/rank{r}", norms)))
        best = float("inf")
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            found = ranks.find("exp/rank*", members, lim)
            best = min(best, time.perf_counter() - t0)
        flagged = {run: [f.layers for f in fs] for run, fs in found.items()}
        print(f"world size {world:3d}: {best * 1e3:8.1f} ms per comparison; flagged {flagged}")


def requests() -> None:
    import pathlib
    import tempfile

    from tests.conftest import PluginClient, RustPluginClient
    from tests.test_bad_input import event, hist_value, normal_buckets, write_run

    rng = np.random.default_rng(0)
    buckets = [[normal_buckets(rng) for _ in range(20)] for _ in range(50)]
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        events = [event(s, *[hist_value(f"grads/l{i}", buckets[s][i]) for i in range(20)]) for s in range(50)]
        for r in range(16):
            write_run(root / f"exp/rank{r}", events)
        write_run(root / "alone", events)
        print("16 ranks + 1 run alone, 20 layers x 50 steps each: mean of 10 heatmap requests after /runs")
        for name, make in (("python loader", PluginClient), ("rust data server", RustPluginClient)):
            client = make(root)
            client.ok("/runs")
            for run in ("alone", "exp/rank3"):
                t0 = time.perf_counter()
                for _ in range(10):
                    client.ok("/heatmap", run=run, role="gradient")
                print(f"{name:16s} {run:10s} {(time.perf_counter() - t0) / 10 * 1e3:7.1f} ms")
            if hasattr(client, "close"):
                client.close()


if __name__ == "__main__":
    main()
    requests()
