"""Cold analysis benchmark: the first `/runs` and `/findings` of every run of a logdir, in-process.

    python bench/bench_cold_analysis.py /path/to/logdir                       # this checkout
    python bench/bench_cold_analysis.py /path/to/logdir --code /path/to/old   # and another, side by side

Prints figures; it is not a test and asserts nothing about time. See bench/README.md.

Each checkout is measured in its own process (``PYTHONPATH`` set to it), on
TensorBoard's Python loader with its default sampling (``EventMultiplexer``
beside ``MultiplexerDataProvider``, as the tests' ``PluginClient`` builds them),
the routes called through a werkzeug test client. Loading the event files is
done once and not counted. *cold* is ``/runs`` then ``/findings`` of each run on
a new plugin instance, whose caches are empty (median of ``--repeats`` new
instances); *findings* is the CPU time of the detectors together and of the
slowest ones, summed over the runs. CPU times are given beside wall times: on a
shared machine wall times move with the other jobs, CPU times much less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _measure(logdir: str, repeats: int) -> dict:
    """Times the routes of the gradhealth importable in this process (see the module docstring)."""
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from gradhealth_plugin import plugin
    from gradhealth_plugin.analysis import detectors

    t0 = time.perf_counter()
    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={})
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    dp = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    load = time.perf_counter() - t0

    # CPU seconds of each detector, through its module's `detect` (the registry calls it by module).
    spent = defaultdict(float)
    for module in detectors.DETECTORS:
        def timed(rd, limits, _detect=module.detect, _kind=module.KIND):
            cpu = time.process_time()
            try:
                return _detect(rd, limits)
            finally:
                spent[_kind] += time.process_time() - cpu
        module.detect = timed

    def cold() -> tuple:
        context = base_plugin.TBContext(logdir=logdir, data_provider=dp, multiplexer=multiplexer)
        apps = plugin.GradHealthPlugin(context).get_plugin_apps()

        def get(route, **params):
            response = werkzeug_test.Client(apps[route], wrappers.Response).get(route, query_string=params)
            assert response.status_code == 200, (route, response.get_data(as_text=True)[:300])
            return json.loads(response.get_data(as_text=True))

        spent.clear()
        t, cpu = time.perf_counter(), time.process_time()
        runs = [r["run"] for r in get("/runs")["runs"]]
        runs_wall, runs_cpu = time.perf_counter() - t, time.process_time() - cpu
        for run in runs:
            get("/findings", run=run)
        return runs_wall, runs_cpu, time.perf_counter() - t, time.process_time() - cpu, dict(spent)

    results = [cold() for _ in range(repeats)]
    kinds = sorted(results[0][4], key=lambda k: -results[0][4][k])
    med = lambda i: statistics.median(r[i] for r in results)  # noqa: E731
    return {"load": load, "runs": med(0), "runs_cpu": med(1), "all": med(2), "all_cpu": med(3),
            "detectors_cpu": statistics.median(sum(r[4].values()) for r in results),
            "each": [f"{r[0]:.2f} ({r[1]:.2f})" for r in results],
            "by_kind": {k: statistics.median(r[4].get(k, 0.0) for r in results) for k in kinds}}


def _run_checkout(code: str, logdir: str, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=code, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, __file__, "_measure", logdir, str(repeats)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measuring {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--repeats", type=int, default=3, help="new plugin instances timed per checkout (median)")
    parser.add_argument("--code", action="append", default=[],
                        help="another checkout of gradhealth to time on the same logdir (repeatable)")
    parser.add_argument("--top", type=int, default=3, help="detectors listed one by one, slowest first")
    args = parser.parse_args(argv)
    results = [(code, _run_checkout(code, args.logdir, args.repeats)) for code in args.code + [REPO]]
    print(f"\n{args.logdir}, Python loader, in-process (seconds, wall (CPU); median of {args.repeats} "
          "new plugin instances)\n")
    print("| checkout | load (not counted) | cold /runs | each | cold /runs + every /findings | detectors, CPU "
          "| slowest detectors, CPU |")
    print("| --- | ---: | ---: | --- | ---: | ---: | --- |")
    for code, r in results:
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(r["by_kind"].items())[:args.top])
        print(f"| {code} | {r['load']:.1f} | {r['runs']:.2f} ({r['runs_cpu']:.2f}) | {', '.join(r['each'])} | {r['all']:.2f} "
              f"({r['all_cpu']:.2f}) | {r['detectors_cpu']:.2f} | {top} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_measure":
        print(json.dumps(_measure(sys.argv[2], int(sys.argv[3]))))
        sys.exit(0)
    sys.exit(main())
