"""The plugin's own memory on a long run, request by request, and the tab's requests timed side by side.

    python bench/bench_plugin_memory.py LOGDIR                        # this checkout
    python bench/bench_plugin_memory.py LOGDIR --code /path/to/old    # and another, side by side

LOGDIR is one `bench_big_run.py` wrote (its `logdir` folder, with run `gh`). Prints figures; it is not
a test and asserts nothing. See bench/README.md ("Memory on a long run").

Each checkout is measured in its own process (``PYTHONPATH`` set to it): the plugin on TensorBoard's
``GrpcDataProvider`` and a Rust data server, as `tests/conftest.py`'s ``RustPluginClient`` starts them,
with ``--samples`` gradhealth samples kept. The routes are called through a werkzeug test client
asking for gzip, as a browser does, so the answers are never decoded in the process measured. After
each request: the process's resident memory (VmRSS) and its peak so far (VmHWM), in MB, and the CPU
seconds the process spent on it. The data
server is another process and not counted (`bench_big_run.py` counts it).

Then, after those, the tab's own requests are timed (seconds, wall and the process's CPU): its first heatmap request (the
compact layout, 768 columns and the rows of a first screen, as `bench_big_run.py`'s
browser asks) and ZOOMS zooms into windows of 1,000 steps it has not asked before (median). Each
checkout in turn on the same machine: on a shared one, compare the checkouts, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = "gh"
# (label, route, params) in order: the run list reads and analyses the run; then heatmaps of its gradients.
REQUESTS = (
    ("/runs (read and analyse)", "/runs", {}),
    ("/findings", "/findings", {"run": RUN}),
    ("heatmap l2, 2,000 columns, compact", "/heatmap", {"metric": "l2", "columns": 2000, "layout": "compact"}),
    ("heatmap health, 2,000 columns, rows", "/heatmap", {"columns": 2000}),
    ("heatmap l2, 2,000 columns, rows", "/heatmap", {"metric": "l2", "columns": 2000}),
    ("heatmap health, every step, rows", "/heatmap", {}),
    ("heatmap l2, every step, rows", "/heatmap", {"metric": "l2"}),
)
TAB = {"role": "gradient", "layout": "compact", "columns": 768}
ZOOMS = 12


def _memory_mb() -> tuple:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return tuple(int(fields[k].split()[0]) // 1024 for k in ("VmRSS", "VmHWM"))


def _measure(logdir: str, samples: int) -> dict:
    from tests.conftest import RustPluginClient
    from gradhealth_plugin.writing import format as metadata

    RustPluginClient.READY_TIMEOUT = 7200
    client = RustPluginClient(logdir, samples={metadata.PLUGIN_NAME: samples})
    out = [("loaded (not the plugin's)", 200, 0, *_memory_mb(), 0.0)]
    try:
        for label, route, params in REQUESTS:
            if route == "/heatmap":
                params = {"run": RUN, "role": "gradient", **params}
            cpu = time.process_time()
            response = client._client(route).get(route, query_string=params, headers={"Accept-Encoding": "gzip"})
            sent = len(response.get_data())
            out.append((label, response.status_code, sent, *_memory_mb(), time.process_time() - cpu))
        times = [_timed(client, rows="0:54", blocks="0:54")]
        times += [_timed(client, start=500 * i, end=500 * i + 1000, rows="0:56", blocks="")
                  for i in range(1, ZOOMS + 1)]
    finally:
        client.close()
    zooms = times[1:]
    return {"memory": out, "first": times[0][0], "first_cpu": times[0][1],
            "zoom": statistics.median(t for t, _ in zooms), "zoom_cpu": statistics.median(c for _, c in zooms)}


def _timed(client, **params) -> tuple:
    """Seconds for one gzipped heatmap answer the tab would ask for (`TAB` and `params`): wall, and this
    process's CPU (what other jobs on a shared machine change least; the data server's is not counted)."""
    started, cpu = time.perf_counter(), time.process_time()
    response = client._client("/heatmap").get("/heatmap", query_string={"run": RUN, **TAB, **params},
                                               headers={"Accept-Encoding": "gzip"})
    response.get_data()
    if response.status_code != 200:
        raise RuntimeError(f"heatmap {params}: HTTP {response.status_code}")
    return time.perf_counter() - started, time.process_time() - cpu


def _run_checkout(code: str, logdir: str, samples: int) -> dict:
    env = dict(os.environ, PYTHONPATH=code, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "_measure", logdir, str(samples)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measuring {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--samples", type=int, default=5000, help="gradhealth samples kept a tag (0: every one)")
    parser.add_argument("--code", action="append", default=[],
                        help="another checkout of gradhealth to measure on the same logdir (repeatable)")
    args = parser.parse_args(argv)
    results = [(code, _run_checkout(code, args.logdir, args.samples)) for code in args.code + [REPO]]
    print(f"\n{args.logdir}, run {RUN!r}: the plugin's process after each request, MB resident / peak so far "
          "(the request's CPU s)\n")
    print("| request | sent (gzip) | " + " | ".join(code for code, _ in results) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in results) + " |")
    for i, (label, status, sent, *_) in enumerate(results[-1][1]["memory"]):
        rows = [r["memory"][i] for _, r in results]
        cells = [f"{row[3]:,} / {row[4]:,} ({row[5]:.2f})" if row[1] == 200 else f"HTTP {row[1]}" for row in rows]
        print(f"| {label} | {sent / 2 ** 20:.2f} MB | " + " | ".join(cells) + " |")
    peaks = [max(row[4] for row in r["memory"]) - r["memory"][0][4] for _, r in results]
    print("\npeak above the loaded process, MB: " + ", ".join(f"{code} {p:,}" for (code, _), p in zip(results, peaks)))
    if len(peaks) > 1:
        print("ratios to the first: " + ", ".join(f"{p / peaks[0]:.2f}" for p in peaks))
    print("the tab's first heatmap request, s (CPU s): "
          + ", ".join(f"{code} {r['first']:.3f} ({r['first_cpu']:.3f})" for code, r in results))
    print(f"a zoom's answer (median of {ZOOMS}), s (CPU s): "
          + ", ".join(f"{code} {r['zoom']:.3f} ({r['zoom_cpu']:.3f})" for code, r in results))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_measure":
        print(json.dumps(_measure(sys.argv[2], int(sys.argv[3]))))
        sys.exit(0)
    sys.exit(main())
