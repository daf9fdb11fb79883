"""Times the sweep at 200 runs: the ``sweep`` route and the tab's Sweep view in headless Chromium.

Writes a logdir of N trials (default 200) without TensorFlow: each has its
hyperparameters (learning rate, optimizer, seed) as ``hp.hparams`` writes them and
3 layers' gradient histograms over 100 steps; trials with learning rate >= 0.3
explode from step 50. One real TensorBoard process (the Python loader) serves it.

Prints:

* route: the first ``GET sweep`` (every run analysed), then again (nothing changed: nothing analysed);
* page: the click on Sweep until the table is built (the request, parsing, 200 rows with their strips),
  a click on a column header (sort), a kind chosen in the filter, text typed in the filter, each as
  the time the page's own handler took (median of 5).

    .venv/bin/python bench/bench_sweep.py [--runs 200]

Uses Debian's Chromium at /usr/bin/chromium; nothing downloads a browser.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time
import urllib.request

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.test_bad_input import event, hist_value, normal_buckets, write_run  # noqa: E402
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, Tab, _serve  # noqa: E402
from tests.test_sweep_routes import _session_start  # noqa: E402

STEPS = 100
LEARNING_RATES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
OPTIMIZERS = ("sgd", "adam", "rmsprop", "adagrad", "nadam")


def write_logdir(root: pathlib.Path, n: int) -> None:
    for i in range(n):
        lr, opt = LEARNING_RATES[i % len(LEARNING_RATES)], OPTIMIZERS[(i // len(LEARNING_RATES)) % len(OPTIMIZERS)]
        rng = np.random.default_rng(i)
        events = [event(0, *_session_start({"learning_rate": lr, "optimizer": opt, "seed": float(i)}))]
        for step in range(STEPS):
            scale = 1e-2 * (1e6 if lr >= 0.3 and step >= STEPS // 2 else 1.0)
            events.append(event(step, *[hist_value(f"gradients/dense_{k}/kernel", normal_buckets(rng, scale=scale))
                                        for k in range(3)]))
        write_run(root / f"trial_{i}", events)


def timed_get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        r.read()
    return (time.perf_counter() - start) * 1000


def in_page_ms(tab, action: str, repeats: int = 5) -> float:
    """Median time of `action` (JavaScript run synchronously in the tab's frame, `t` its document)."""
    times = [tab.frame.evaluate(f"() => {{ const t = document; const s = performance.now(); {action}; "
                                "return performance.now() - s; }") for _ in range(repeats)]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="gh-sweep-bench-") as tmp:
        logdir = pathlib.Path(tmp) / "logdir"
        start = time.perf_counter()
        write_logdir(logdir, args.runs)
        print(f"{args.runs} trials x 3 layers x {STEPS} steps written in {time.perf_counter() - start:.1f} s")
        server = _serve(logdir, lambda runs: len(runs) >= args.runs, pathlib.Path(tmp))
        base = next(server)
        try:
            url = f"{base}/data/plugin/gradhealth/sweep"
            print(f"route: first GET sweep {timed_get(url):.0f} ms, again {timed_get(url):.0f} ms")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                tab = Tab(page, base)
                tab.open()
                start = time.perf_counter()
                tab.ui.locator(".gh-sweep-button").click()
                tab.frame.wait_for_function("Number(document.documentElement.dataset.ghSweepDrawn || 0) > 0",
                                            timeout=120_000)
                shown = (time.perf_counter() - start) * 1000
                rows = tab.frame.evaluate("document.querySelectorAll('.gh-sweep-table tbody tr').length")
                request = tab.frame.evaluate("performance.getEntriesByType('resource')"
                                            ".filter(e => e.name.includes('/sweep')).pop().duration")
                print(f"page: Sweep click to {rows} rows built {shown:.0f} ms, of which the request {request:.0f} ms")
                sort = in_page_ms(tab, "t.querySelector(\"th[data-column='hp:learning_rate']\").click()")
                print(f"page: sort by a column {sort:.1f} ms")
                kind = in_page_ms(tab, "const k = t.querySelector('.gh-sweep-controls select'); "
                                       "k.value = k.options[k.options.length - 1].value; "
                                       "k.dispatchEvent(new Event('change'))")
                print(f"page: filter by a kind {kind:.1f} ms")
                text = in_page_ms(tab, "const i = t.querySelector('.gh-sweep-controls input'); "
                                       "i.value = i.value ? '' : 'adam 0.3'; i.dispatchEvent(new Event('input'))")
                print(f"page: filter by text {text:.1f} ms")
                browser.close()
        finally:
            server.close()


if __name__ == "__main__":
    main()
