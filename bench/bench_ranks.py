"""What comparing the ranks of one training costs: `analysis.ranks.find` on generated runs.

Each rank is a run of LAYERS layers whose gradient rows hold STEPS logged steps (the tables
the analysis judges; reading them is what every run costs anyway). Prints the time of one
comparison (the best of a few) for several world sizes; the analyzer makes it once per data
version of the training's runs.

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


if __name__ == "__main__":
    main()
