"""Warm and zoom heatmap requests under the Python loader, in-process, for one checkout.

    python bench/bench_held.py --repo /path/to/checkout --logdir /tmp/held --steps 5000

A run of 1,000 layers x ``--steps`` steps of gradhealth summaries (written once, kept in
``--logdir``), every sample kept, read by TensorBoard's multiplexer and the plugin of
``--repo`` in this process. Prints the cold, warm (median of 5) and zoom (a tenth of the
run, median of 5) heatmap seconds. Run it once per checkout on the same logdir to compare
them; it asserts nothing.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
import urllib.parse

import numpy as np

LAYERS = 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default=str(pathlib.Path(__file__).resolve().parents[1]))
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args(argv)
    root = pathlib.Path(args.logdir)
    if not (root / "gh").exists():
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
        import bench_big_run as big

        (root / "gh").mkdir(parents=True)
        names = [f"block_{i // 10}/layer_{i % 10}/kernel" for i in range(LAYERS)]
        big.write_gradhealth_run(root / "gh", names, args.steps, np.random.default_rng(0))
    # The checkout measured, ahead of anything the writer put on the path.
    sys.path.insert(0, args.repo)
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as wtest

    from gradhealth_plugin import plugin

    print("plugin from", plugin.__file__)
    mx = plugin_event_multiplexer.EventMultiplexer(
        tensor_size_guidance={"gradhealth": 0, "histograms": 0}, size_guidance={"tensors": 0})
    mx.AddRunsFromDirectory(str(root))
    mx.Reload()
    ctx = base_plugin.TBContext(logdir=str(root), multiplexer=mx,
                                data_provider=data_provider.MultiplexerDataProvider(mx, str(root)))
    app = plugin.GradHealthPlugin(ctx).get_plugin_apps()["/heatmap"]

    def seconds(**params) -> float:
        env = wtest.EnvironBuilder(path="/heatmap", query_string=urllib.parse.urlencode(params)).get_environ()
        t = time.perf_counter()
        b"".join(app(env, lambda status, headers: None))
        return time.perf_counter() - t

    base = dict(run="gh", role="gradient", metric="health", columns=768, layout="compact")
    print(f"cold heatmap, s            {seconds(**base, rows='0:54', blocks='0:54'):.3f}")
    warm = [seconds(**base, rows="0:54", blocks="0:54") for _ in range(5)]
    print(f"warm heatmap, s (median)   {statistics.median(warm):.4f}")
    lo = args.steps // 2
    zoom = [seconds(**base, start=lo + k, end=lo + args.steps // 10 + k, rows="0:56", blocks="") for k in range(5)]
    print(f"zoom heatmap, s (median)   {statistics.median(zoom):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
