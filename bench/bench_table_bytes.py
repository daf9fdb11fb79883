"""What a run's metric tables hold, in bytes, and the time of the requests that read `std_rel_first`.

    python bench/bench_table_bytes.py                         # this checkout: 300 layers x 1,000 steps
    python bench/bench_table_bytes.py --code /path/to/old     # and another checkout, side by side

Writes (once, into ``--logdir``, reused when its manifest matches) two runs of gradients and weights:
``gh``, gradhealth's own summaries of ``--layers`` layers at ``--steps`` steps (`SummaryFileWriter`, as
`bench_big_run.py` writes them: one layer exploding, one vanishing, one NaN at a step), and ``tf2``,
TF2 histograms of ``--tf2-layers`` layers at as many steps (bench_scale.py's writer). Each checkout is
measured in its own process (``PYTHONPATH`` set to it), the plugin on TensorBoard's Python loader with
every sample kept, the run read and analysed through the plugin's own analyzer.

Per run it prints the bytes its tables' value and quality columns hold (each buffer counted once, a
broadcast quality code as one byte), those of `std_rel_first` among them, and the CPU time (median of
``--repeats``, seconds) of the work that reads `std_rel_first`: the findings (the weight growth and
update ratio detectors), the cells' health (the cell rules on stacked tables), and the weights' heatmap
of `std_rel_first`, 2,000 columns, built without the plugin's caches. Prints figures; asserts nothing.
See bench/README.md ("Tables without `std_rel_first`").
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

BENCH = pathlib.Path(__file__).resolve().parent
REPO = BENCH.parent


def write_logdir(root: pathlib.Path, layers: int, steps: int, tf2_layers: int) -> None:
    """The two runs, unless the manifest says they are there."""
    sys.path.insert(0, str(BENCH))
    import bench_big_run as big  # noqa: E402  (its gradhealth writer)
    import bench_scale as scale  # noqa: E402  (its TF2 writer)

    params = {"layers": layers, "steps": steps, "tf2_layers": tf2_layers, "version": 2}
    manifest = root / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()) == params:
        return
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    names = [f"model.layer_{i}.weight" for i in range(layers)]
    big.write_gradhealth_run(root / "gh", names, steps, rng)
    _write_weights(root / "gh", names, steps, rng)  # a second events file of the run
    series = [s for s in scale._tf2_series(tf2_layers, steps, rng) if s.role in ("gradient", "weight")]
    scale.RunWriter(root / "tf2", series, "tf2", 30).write_steps(0, steps, first_ever=True)
    manifest.write_text(json.dumps(params))


def _write_weights(run_dir: pathlib.Path, names: list, steps: int, rng) -> None:
    """Weights of `names` through `SummaryFileWriter`: one vector scaled by a std growing 20% over the run."""
    sys.path.insert(0, str(REPO))
    from gradhealth_plugin.writing import format as fmt
    from gradhealth_plugin.writing import reference
    from gradhealth_plugin.writing.events import SummaryFileWriter

    base = np.asarray(reference.stats_numpy(rng.standard_normal(4096)), dtype=np.float64)
    at = {name: i for i, name in enumerate(fmt.FIELDS)}
    scaled = [at[f] for f in ("mean", "std", "min", "max", "l2", "mean_abs", "max_abs")]
    first = 0.02 * (0.5 + rng.random(len(names)))
    writer = SummaryFileWriter(str(run_dir))
    for step in range(steps):
        for i, name in enumerate(names):
            v = base.copy()
            v[scaled] *= first[i] * (1 + 0.2 * step / steps)
            writer.write_stats(step, "weight", name, v, wall_time=1.7e9 + step * 0.5 + i * 1e-5)
    writer.close()


def _held(a: np.ndarray) -> tuple:
    """(buffer address, bytes held): a broadcast array holds one element."""
    held = a.itemsize if a.ndim and 0 in a.strides else a.nbytes
    return a.__array_interface__["data"][0], held


def _median_time(fn, repeats: int) -> float:
    """CPU seconds, median of `repeats`: on a machine shared with other jobs wall times vary far more."""
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def measure(logdir: str, repeats: int) -> dict:
    """In this process (the checkout on ``PYTHONPATH``): per run, bytes held and times."""
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin

    from gradhealth_plugin import plugin
    from gradhealth_plugin.analysis import findings
    from gradhealth_plugin.serving import responses

    mux = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"gradhealth": 0, "histograms": 0})
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    context = base_plugin.TBContext(logdir=logdir, data_provider=data_provider.MultiplexerDataProvider(mux, logdir),
                                    multiplexer=mux)
    gh = plugin.GradHealthPlugin(context, None)
    out = {}
    for run in ("gh", "tf2"):
        rd, _ = gh._analyzer.run(tb_context.RequestContext(), "", run)
        tables = [r.table for layer in rd.layers for r in layer.roles.values()]
        columns = {_held(a) for t in tables for a in list(t.values.values()) + list(t.quality.values())}
        rel = {_held(a) for t in tables for d in (t.values, t.quality) for k, a in d.items() if k == "std_rel_first"}
        cells = sum(len(t.steps) for t in tables)
        limits = gh._limits

        def find():
            rd._role_rows.clear()  # the judged tables, as a fresh analysis builds them
            return findings.find(rd, limits)

        found = find()
        out[run] = {
            "rows": len(tables), "cells": cells,
            "column_mb": sum(b for _, b in columns) / 1e6, "std_rel_first_mb": sum(b for _, b in rel) / 1e6,
            "findings_s": _median_time(find, repeats),
            "health_s": _median_time(lambda: findings.decide_cells(rd, found, limits), repeats),
            "heatmap_s": _median_time(lambda: responses.heatmap(rd, "weight", "std_rel_first", columns=2000),
                                      repeats),
        }
    return out


def _run_checkout(code: str, logdir: str, repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": code}
    cmd = [sys.executable, __file__, "--measure", logdir, "--repeats", str(repeats)]
    done = subprocess.run(cmd, env=env, cwd=code, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=300)
    # TensorBoard's Python loader holds every sample: about 2.5 GB at 300 layers x 1,000 steps.
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--tf2-layers", type=int, default=50)
    parser.add_argument("--logdir", default="/tmp/gradhealth_table_bytes")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--code", action="append", default=[], help="another checkout to measure the same way")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeats)))
        return 0
    write_logdir(pathlib.Path(args.logdir), args.layers, args.steps, args.tf2_layers)
    for code in args.code + [str(REPO)]:
        results = _run_checkout(code, args.logdir, args.repeats)
        print(code)
        for run, r in results.items():
            print(f"  {run}: {r['rows']} rows, {r['cells']:,} cells: columns {r['column_mb']:.1f} MB "
                  f"(std_rel_first {r['std_rel_first_mb']:.1f} MB); findings {r['findings_s']:.3f} s, "
                  f"health {r['health_s']:.3f} s, heatmap of std_rel_first {r['heatmap_s']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
