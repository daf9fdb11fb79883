"""Big-run benchmark: the heatmap of a long run with many layers, at a column budget.

    python bench/bench_big_run.py                 # 100 layers x 2,500 steps: a few minutes
    python bench/bench_big_run.py --full          # 1,000 layers x 10,000 steps (hours to write and load)
    python bench/bench_big_run.py --no-browser    # without headless Chromium

Three runs (``--runs``), every step kept unless ``--samples`` says how many TensorBoard keeps:
``gh``, gradhealth summaries written with gradhealth's own writer
(`SummaryFileWriter`), one layer exploding, one vanishing and one NaN at a single
step; ``tf2``, the same layers' gradients as TF2 histograms (the records
``tf.summary.histogram`` writes, framed by bench_scale.py's writer); ``gpt2``, 150
tensors named as GPT-2 small's (``transformer.h.0.attn.c_attn.weight``, ...).

Per loader (Python: ``--load_fast=false``; Rust data server: ``--load_fast=true``), one
TensorBoard process without the plugin and one with it (bench_scale.py's `Server`, the
same probe plugin): cold heatmap (first request, and again after the plugin's caches are
dropped) against the data provider's own read of the same tags (the floor), warm
against cold, the answer's size at the column budget (JSON, and gzipped as sent: an answer
past the plugin's cell cap comes in pages, each asked for in turn, and the largest page
and the number of pages are printed), the
answers with rows as the tab asks for them (the rows in view at 1600 x 1000, its first
request, a scroll's, and the whole run) for health and for the gradient norm (noise in
every cell), and peak memory with the plugin against TensorBoard alone. Then, in headless Chromium on
the TensorBoard page, the time from the tab's heatmap request to its first paint, and
from a zoom to the zoom window's own columns drawn. Prints figures and the ratios
against issue 15's targets; asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import shutil
import statistics
import sys
import time
import urllib.parse
import urllib.request
from typing import Dict, List

import numpy as np

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import bench_scale as scale  # noqa: E402  (its TensorBoard launcher, probe plugin and TF2 writer)

GH, TF2, GPT2 = "gh", "tf2", "gpt2"
GH_PLUGIN = "gradhealth"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
def samples_flag(kept: int) -> List[str]:
    """TensorBoard's flag keeping `kept` samples per tag (0: every one) of both plugins' tags."""
    return [f"--samples_per_plugin=gradhealth={kept},histograms={kept}"]
# Targets of issue 15.
MAX_BYTES = 2 * 2 ** 20
MAX_WARM = 0.02
MAX_COLD = 1.25
MAX_PAINT_S = 1.5
MAX_ZOOM_S = 0.3
MAX_MEMORY = 1.2
# The tab at 1600 x 1000: TensorBoard's bar leaves its frame about 936 pixels high, the heatmap 62% of
# that (heatmap.ts maxViewHeight) in rows of 13 pixels (layout.ts ROW_MIN_H) once they do not fit; its
# first request asks for those rows and a quarter more below (app.ts rowMargin), as rows and as blocks.
TAB_FRAME_HEIGHT = 936
VIEW_ROWS = int(0.62 * TAB_FRAME_HEIGHT) // 13
MARGIN_ROWS = max(8, -(-VIEW_ROWS // 4))
# A metric whose every cell is noise at 4 significant digits, as real gradient norms are: the most bytes a
# cell in the rows layout (the compact one sends 3 bytes a value whatever its digits).
NOISY_METRIC = "l2"


def gpt2_names() -> List[str]:
    """150 parameter names as GPT-2 small's (12 blocks of 12, embeddings, final norm, head)."""
    block = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
             "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
             "mlp.c_proj.weight", "mlp.c_proj.bias"]
    names = ["transformer.wte.weight", "transformer.wpe.weight"]
    names += [f"transformer.h.{i}.{p}" for i in range(12) for p in block]
    return names + ["transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight", "lm_head.bias"]


def _base_vector() -> np.ndarray:
    """gradhealth's statistics vector of a standard normal tensor (gradhealth's own reference numpy)."""
    from gradhealth_plugin.writing import reference

    return np.asarray(reference.stats_numpy(np.random.default_rng(0).standard_normal(4096)), dtype=np.float64)


def write_gradhealth_run(run_dir: pathlib.Path, names: List[str], steps: int, rng) -> int:
    """Gradients of `names` at every step through `SummaryFileWriter`: scaled copies of one vector,
    one layer exploding in the last tenth, one vanishing after a third, one NaN at a single step."""
    from gradhealth_plugin.writing import format as fmt
    from gradhealth_plugin.writing.events import SummaryFileWriter

    base = _base_vector()
    at = {name: i for i, name in enumerate(fmt.FIELDS)}
    scaled = [at[f] for f in ("mean", "std", "min", "max", "l2", "mean_abs", "max_abs")]
    n = len(names)
    explode, vanish, nan_layer, nan_step = n // 3, n // 2, (2 * n) // 3, (3 * steps) // 5 + 7
    writer = SummaryFileWriter(str(run_dir))
    written = 0
    factors = 1e-3 * (0.5 + rng.random(n))
    for step in range(steps):
        noise = 1 + 0.2 * rng.standard_normal(n).clip(-3, 3)
        for i, name in enumerate(names):
            k = factors[i] * noise[i]
            if i == explode and step > 0.9 * steps:
                k *= 1e7
            if i == vanish and step > steps / 3:
                k = 1e-10
            v = base.copy()
            v[scaled] *= k
            if i == vanish and step > steps / 3:
                v[at["small_fraction"]] = 1.0
            if i == nan_layer and step == nan_step:
                v[at["nan_count"]] = 3.0
            writer.write_stats(step, "gradient", name, v, wall_time=1.7e9 + step * 0.5 + i * 1e-5)
            written += 1
    writer.close()
    if writer.errors:
        raise RuntimeError(f"the writer failed {writer.errors} times")
    return written


def build_logdir(root: pathlib.Path, args) -> Dict[str, tuple]:
    """Writes the three runs unless the manifest says they are there; returns run -> (plugin, tags, last step)."""
    params = {"layers": args.layers, "steps": args.steps, "gpt2_steps": args.gpt2_steps, "version": 1}
    runs = args.runs.split(",")
    if runs != [GH, TF2, GPT2]:
        params["runs"] = runs
    manifest = root / "manifest.json"
    layer_names = [f"model.layer_{i}.weight" for i in range(args.layers)]
    expected = {GH: (GH_PLUGIN, args.layers, args.steps - 1), TF2: ("histograms", args.layers, args.steps - 1),
                GPT2: (GH_PLUGIN, len(gpt2_names()), args.gpt2_steps - 1)}
    expected = {run: expected[run] for run in runs}
    if manifest.exists() and json.loads(manifest.read_text()) == params:
        print(f"reusing the logdir {root} ({params})")
        return expected
    for run in (GH, TF2, GPT2):
        shutil.rmtree(root / run, ignore_errors=True)
    rng = np.random.default_rng(0)
    for run, names, steps in ((GH, layer_names, args.steps), (GPT2, gpt2_names(), args.gpt2_steps)):
        if run not in runs:
            continue
        t0 = time.perf_counter()
        n = write_gradhealth_run(root / run, names, steps, rng)
        size = sum(p.stat().st_size for p in (root / run).iterdir())
        print(f"wrote run {run}: {n:,} gradhealth summaries, {size / 1e6:,.0f} MB in {time.perf_counter() - t0:.0f} s")
    if TF2 in runs:
        t0 = time.perf_counter()
        series = [s for s in scale._tf2_series(args.layers, args.steps, rng) if s.role == "gradient"]
        writer = scale.RunWriter(root / TF2, series, "tf2", 30)
        n = writer.write_steps(0, args.steps, first_ever=True)
        print(f"wrote run {TF2}: {n:,} TF2 histograms, {writer.path.stat().st_size / 1e6:,.0f} MB "
              f"in {time.perf_counter() - t0:.0f} s")
    manifest.write_text(json.dumps(params))
    return expected


# --------------------------------------------------------------------------- requests

def fetch(server: "scale.Server", path: str, **params) -> tuple:
    """(seconds, body bytes as sent with gzip accepted, the JSON as bytes)."""
    url = f"http://{scale.HOST}:{server.port}{path}?" + urllib.parse.urlencode(params)
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    t0 = time.perf_counter()
    with scale._OPENER.open(request, timeout=3600) as response:
        body = response.read()
        gzipped = response.headers.get("Content-Encoding") == "gzip"
    seconds = time.perf_counter() - t0
    return seconds, len(body), gzip.decompress(body) if gzipped else body


def get(server: "scale.Server", path: str, **params) -> tuple:
    """(seconds, body bytes as sent with gzip accepted, JSON bytes)."""
    seconds, sent, raw = fetch(server, path, **params)
    return seconds, sent, len(raw)


def fetch_pages(server: "scale.Server", path: str, **params) -> List[dict]:
    """A heatmap answer and each page its `page.next` names (an answer past the cap comes in pages):
    per page its seconds, bytes sent and JSON bytes, and its cells."""
    pages = []
    while True:
        seconds, sent, raw = fetch(server, path, **params)
        answer = json.loads(raw)
        pages.append({"s": seconds, "sent": sent, "json": len(raw), "cells": answer_cells(answer)})
        if "page" not in answer:
            return pages
        params = {**params, **answer["page"]["next"]}


def largest_page(pages: List[dict]) -> dict:
    """The largest page's bytes sent and JSON, the pages' count, their seconds together and JSON bytes a cell."""
    return {"sent": max(p["sent"] for p in pages), "json": max(p["json"] for p in pages), "pages": len(pages),
            "s": sum(p["s"] for p in pages),
            "per_cell": sum(p["json"] for p in pages) / max(1, sum(p["cells"] for p in pages))}


def answer_cells(answer: dict) -> int:
    """How many cells a heatmap answer holds: its rows (or the rows and blocks a row window sent) x columns."""
    rows = len(answer["rows_sent"]) + len(answer["blocks_sent"]) if "rows_sent" in answer else len(answer["layers"])
    return rows * len(answer["steps"])


def wait_loaded(server: "scale.Server", expected: Dict[str, tuple], timeout: float) -> float:
    """Until every run lists its tags up to its last step, for its plugin; seconds since launch."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"TensorBoard exited with {server.proc.returncode}\n{server.log_tail()}")
        try:
            done = True
            for plugin in {p for p, _, _ in expected.values()}:
                status, body, _ = server.get(f"/data/plugin/{scale.PROBE}/status", timeout=120, plugin=plugin)
                seen = json.loads(body) if status == 200 else {}
                done &= all(run in seen and seen[run]["tags"] == tags and seen[run]["min_last_step"] == last
                            for run, (p, tags, last) in expected.items() if p == plugin)
            if done:
                return time.monotonic() - server.started
        except OSError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"not loaded within {timeout:.0f} s\n{server.log_tail()}")


def measure_loader(load_fast: str, logdir: pathlib.Path, expected: Dict[str, tuple], args,
                   logs: pathlib.Path) -> dict:
    r: dict = {"load_fast": load_fast, "runs": {}}
    server = scale.Server(logdir, load_fast, False, logs / f"tb_{load_fast}_without.log",
                          samples_flag(args.samples))
    try:
        r["load_s_without"] = wait_loaded(server, expected, args.ready_timeout)
        r["mem_without"] = server.memory()
    finally:
        server.stop()
    server = scale.Server(logdir, load_fast, True, logs / f"tb_{load_fast}_with.log", samples_flag(args.samples))
    gh = "/data/plugin/gradhealth/heatmap"
    try:
        r["load_s_with"] = wait_loaded(server, expected, args.ready_timeout)
        for run in expected:
            # Every row at the budget: the first answer (cold, then warm), and its pages past the cell cap.
            pages = fetch_pages(server, gh, run=run, role="gradient", columns=args.columns)
            m: dict = {"cold": pages[0]["s"], "budget": largest_page(pages)}
            m["warm"] = statistics.median(get(server, gh, run=run, role="gradient", columns=args.columns)[0]
                                          for _ in range(args.repeats))
            m["full"] = largest_page(fetch_pages(server, gh, run=run, role="gradient"))
            # The layout the tab asks for, at the same budget: bytes, then a zoom's answer built anew.
            m["compact"] = largest_page(fetch_pages(server, gh, run=run, role="gradient", columns=args.columns,
                                                    layout="compact"))
            last = expected[run][2]
            lo, hi = last // 2, last // 2 + max(10, last // 10)
            for layout in ("rows", "compact"):
                m[f"zoom_{layout}_s"] = get(server, gh, run=run, role="gradient", columns=args.zoom_columns,
                                            start=lo, end=hi, layout=layout)[0]
            m["row_lod"] = measure_rows(server, run, args)
            r["runs"][run] = m
        if args.browser and load_fast == args.browser_loader:
            try:
                r["browser"] = measure_browser(server, args)
            except Exception as e:  # noqa: BLE001 - the figures measured so far are still printed
                r["browser_error"] = f"{type(e).__name__}: {e}"
        # Before the floor: the probe's own reads of every tag would count as the plugin's.
        r["mem_with"] = server.memory()
        for run, (plugin, _, _) in expected.items():
            m = r["runs"][run]
            # Up to 64 tags per read, as gradhealth reads them, and every tag in one read where that passes
            # (the Rust data server refuses an answer over 256 MB); the faster is the floor.
            # Fewer tags per read on long runs: one answer of 64 tags x 10,000 steps passes gRPC's 256 MB.
            chunk = int(np.clip(200_000 // (expected[run][2] + 1), 1, 64))
            floors = [server.json(f"/data/plugin/{scale.PROBE}/floor", run=run, plugin=plugin, chunk=chunk)]
            status, body, _ = server.get(f"/data/plugin/{scale.PROBE}/floor", run=run, plugin=plugin)
            if status == 200:
                floors.append(json.loads(body))
            m["floor"] = min(f["read_s"] for f in floors) + min(f["list_s"] for f in floors)
            m["datums"] = floors[0]["datums"]
            server.json(f"/data/plugin/{scale.PROBE}/reset")
            m["cold_again"] = get(server, gh, run=run, role="gradient", columns=args.columns)[0]
    finally:
        server.stop()
    return r


def measure_rows(server: "scale.Server", run: str, args) -> List[dict]:
    """The tab's answers with rows (compact, at the column budget): the rows in view at 1600 x 1000, its
    first request (those and a margin), a scroll's (the next screenful), and the whole run, for health
    and a noisy metric: the largest page's bytes sent and before gzip, the pages, JSON bytes a cell, and
    the seconds of all pages (built anew: a new key)."""
    gh = "/data/plugin/gradhealth/heatmap"
    view, first = VIEW_ROWS, VIEW_ROWS + MARGIN_ROWS
    asks = [("rows in view", f"0:{view - 1}"), ("first request (+ margin)", f"0:{first - 1}"),
            ("scrolled a screen", f"{view}:{view + first - 1}"), ("whole run", None)]
    out = []
    for metric in ("health", NOISY_METRIC):
        for name, rows in asks:
            params = dict(run=run, role="gradient", metric=metric, columns=args.columns, layout="compact")
            if rows is not None:
                params.update(rows=rows, blocks=rows)
            out.append({"metric": metric, "ask": name, "rows": rows, **largest_page(fetch_pages(server, gh, **params))})
    return out


# --------------------------------------------------------------------------- the tab in Chromium

# Records, in every frame, when the tab marks a heatmap drawn (a synchronous paint) and a zoom's columns drawn.
_TIMES_SCRIPT = """(() => {
  const seen = { drawn: [], zoom: [] };
  window.__ghTimes = seen;
  const start = () => new MutationObserver((changes) => {
    for (const c of changes) {
      if (c.attributeName === "data-gh-drawn") seen.drawn.push(performance.now());
      if (c.attributeName === "data-gh-zoom-drawn") seen.zoom.push(performance.now());
    }
  }).observe(document.documentElement, { attributes: true });
  if (document.documentElement) start(); else document.addEventListener("DOMContentLoaded", start);
})();"""


def measure_browser(server: "scale.Server", args) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.add_init_script(_TIMES_SCRIPT)
            page.goto(f"http://{scale.HOST}:{server.port}/#gradhealth&p.gradhealth.run={GH}")
            page.wait_for_selector("iframe[src*='plugin_entry.html']", timeout=120_000)
            frame = None
            deadline = time.monotonic() + 600
            while frame is None and time.monotonic() < deadline:
                frame = next((f for f in page.frames if "plugin_entry.html" in f.url), None)
                time.sleep(0.2)
            if frame is None:
                raise RuntimeError(f"the tab's frame did not appear; frames: {[f.url for f in page.frames]}")
            frame.wait_for_function("window.__ghTimes && window.__ghTimes.drawn.length > 0", timeout=600_000)
            first = frame.evaluate("""() => {
                const e = performance.getEntriesByType("resource").filter((x) => x.name.includes("/heatmap?"));
                const h = window.__gradhealth.store.heatmaps[0];
                return { start: e[0].startTime, end: e[0].responseEnd, drawn: window.__ghTimes.drawn[0],
                         url: e[0].name, columns: h.steps.length, steps: h.windowSteps, rows: h.layers.length };
            }""")
            out["paint_s"] = (first["drawn"] - first["start"]) / 1000
            out["response_s"] = (first["end"] - first["start"]) / 1000
            out["shown"] = first
            # A zoom into a tenth of the run: the loaded columns at once, then the window's own.
            steps = args.steps
            lo, hi = steps // 2, steps // 2 + max(10, steps // 10)
            zoom = frame.evaluate("""([lo, hi]) => {
                const h = window.__gradhealth.store.heatmaps[0];
                const whole = !h.binned && h.windowSteps >= h.stepsTotal;
                const t0 = performance.now();
                const before = window.__ghTimes.zoom.length;
                window.__gradhealth.zoomTo([String(lo), String(hi)]);
                return { t0, coarse: performance.now() - t0, before, whole };
            }""", [lo, hi])
            out["zoom_coarse_s"] = zoom["coarse"] / 1000
            if zoom["whole"]:
                # Every step is loaded already: the zoom asks nothing and is drawn at once.
                out["zoom_s"] = out["zoom_coarse_s"]
            else:
                frame.wait_for_function(f"window.__ghTimes.zoom.length > {zoom['before']}", timeout=600_000)
                t1 = frame.evaluate("window.__ghTimes.zoom[window.__ghTimes.zoom.length - 1]")
                out["zoom_s"] = (t1 - zoom["t0"]) / 1000
            out["zoom_columns"] = frame.evaluate("window.__gradhealth.store.heatmaps[0].steps.length")
            if not zoom["whole"]:
                # Where the zoom's time goes: the wait before asking, the answer, reading and drawing it.
                asked = frame.evaluate("""() => {
                    const e = performance.getEntriesByType("resource").filter((x) => x.name.includes("/heatmap?"));
                    const z = e[e.length - 1];
                    return { start: z.startTime, end: z.responseEnd, url: z.name };
                }""")
                out["zoom_wait_s"] = (asked["start"] - zoom["t0"]) / 1000
                out["zoom_response_s"] = (asked["end"] - asked["start"]) / 1000
                out["zoom_read_draw_s"] = (t1 - asked["end"]) / 1000
                out["zoom_url"] = asked["url"].split("?", 1)[1]
        finally:
            browser.close()
    return out


# --------------------------------------------------------------------------- report

def _line(name: str, value: float, target: float) -> str:
    return f"  {name:<64} {value:9.3f}   target <= {target:<6g} {'met' if value <= target else 'MISSED'}"


def report(results: List[dict], expected: Dict[str, tuple], args) -> None:
    print()
    print(f"runs: {GH!r} {args.layers} layers x {args.steps} steps of gradhealth summaries; {TF2!r} the same as "
          f"TF2 histograms (30 buckets); {GPT2!r} {len(gpt2_names())} GPT-2 small tensors x {args.gpt2_steps} "
          f"steps; column budget {args.columns}; warm = median of {args.repeats}")
    for r in results:
        print()
        print(f"=== --load_fast={r['load_fast']} ===")
        print(f"  loaded in {r['load_s_without']:.0f} s without the plugin, {r['load_s_with']:.0f} s with it")
        print("  (every row's answer comes in pages past the cell cap: sizes are the largest page's)")
        print(f"  {'':<34} {'datums':>10} {'floor s':>9} {'cold s':>8} {'cold2 s':>8} {'warm s':>8} "
              f"{'sent MB':>8} {'JSON MB':>8} {'pages':>6} {'full-res sent/JSON MB, pages':>29}")
        for run, m in r["runs"].items():
            b, f = m["budget"], m["full"]
            print(f"  {run:<34} {m['datums']:>10,} {m['floor']:>9.3f} {m['cold']:>8.3f} {m['cold_again']:>8.3f} "
                  f"{m['warm']:>8.4f} {b['sent'] / 2 ** 20:>8.2f} {b['json'] / 2 ** 20:>8.2f} {b['pages']:>6} "
                  f"{f['sent'] / 2 ** 20:>10.2f} / {f['json'] / 2 ** 20:.2f}, {f['pages']}")
        mw, mo = r["mem_with"], r["mem_without"]
        tb_with, tb_without = mw["hwm"] + mw["child_hwm"], mo["hwm"] + mo["child_hwm"]
        print(f"  peak memory (VmHWM, TensorBoard + data server): {scale._mb(tb_without)} alone, "
              f"{scale._mb(tb_with)} with the plugin (TensorBoard process {scale._mb(mo['hwm'])} / "
              f"{scale._mb(mw['hwm'])}, data server {scale._mb(mo['child_hwm'])} / {scale._mb(mw['child_hwm'])})")
        print("  ratios:")
        print(f"  {'':<34} {'compact sent MB':>16} {'compact JSON MB':>16} {'pages':>6} {'JSON B/cell rows':>17} "
              f"{'compact':>8} {'zoom answer s rows':>19} {'compact':>8}")
        for run, m in r["runs"].items():
            c = m["compact"]
            print(f"  {run:<34} {c['sent'] / 2 ** 20:>16.2f} {c['json'] / 2 ** 20:>16.2f} {c['pages']:>6} "
                  f"{m['budget']['per_cell']:>17.2f} {c['per_cell']:>8.2f} {m['zoom_rows_s']:>19.3f} "
                  f"{m['zoom_compact_s']:>8.3f}")
        for run, m in r["runs"].items():
            b, c = m["budget"], m["compact"]
            print(f"  [{run}]")
            print(_line(f"largest page sent (gzip) at the budget, MB ({b['pages']} pages)", b["sent"] / 2 ** 20,
                        MAX_BYTES / 2 ** 20))
            print(_line("largest page JSON at the budget, MB (before gzip)", b["json"] / 2 ** 20, MAX_BYTES / 2 ** 20))
            print(_line(f"compact: largest page JSON at the budget, MB ({c['pages']} pages)", c["json"] / 2 ** 20,
                        MAX_BYTES / 2 ** 20))
            print(_line("warm / cold (first request)", m["warm"] / m["cold"], MAX_WARM))
            print(_line("cold (caches dropped) / data provider's read of the tags", m["cold_again"] / m["floor"],
                        MAX_COLD))
        print(f"  rows at the budget, compact (the tab's): {VIEW_ROWS} rows in view at 1600 x 1000, "
              f"{MARGIN_ROWS} more below in its first request; rows and blocks asked alike")
        for run, m in r["runs"].items():
            for x in m["row_lod"]:
                label = (f"[{run}] {x['metric']}: {x['ask']} ({x['rows'] or 'every row'}), {x['pages']} "
                         f"page{'s' if x['pages'] > 1 else ''}, {x['s']:.2f} s")
                print(_line(f"{label}: largest page sent MB", x["sent"] / 2 ** 20, MAX_BYTES / 2 ** 20))
                print(_line(f"{' ' * len(label)}  largest page JSON MB", x["json"] / 2 ** 20, MAX_BYTES / 2 ** 20))
                print(f"  {' ' * len(label)}  JSON bytes a cell {x['per_cell']:9.2f}")
        print(_line("peak memory with / without the plugin", tb_with / tb_without, MAX_MEMORY))
        if "browser_error" in r:
            print(f"  Chromium: not measured ({r['browser_error'][:300]})")
        b = r.get("browser")
        if b:
            s = b["shown"]
            print(f"  Chromium, run {GH!r}: {s['rows']} rows, {s['steps']} steps in {s['columns']} columns "
                  f"({s['url'].split('?', 1)[1]})")
            print(_line("tab: heatmap request to first paint, s", b["paint_s"], MAX_PAINT_S))
            print(f"  {'  of which the response':<64} {b['response_s']:9.3f}")
            print(_line("tab: zoom to the window's own columns drawn, s", b["zoom_s"], MAX_ZOOM_S))
            if "zoom_wait_s" in b:
                print(f"  {'  of which the wait before asking':<64} {b['zoom_wait_s']:9.3f}")
                print(f"  {'  of which the answer (server and transfer)':<64} {b['zoom_response_s']:9.3f}")
                print(f"  {'  of which reading and drawing it':<64} {b['zoom_read_draw_s']:9.3f}")
                print(f"  {'  the zoom asked':<64} {b['zoom_url']}")
            print(f"  {'  the loaded columns redrawn at once, s':<64} {b['zoom_coarse_s']:9.3f}")
            print(f"  {'  columns after the zoom':<64} {b['zoom_columns']:9d}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="1,000 layers x 10,000 steps, GPT-2 x 10,000 steps")
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--gpt2-steps", type=int, default=2500)
    parser.add_argument("--columns", type=int, default=2000)
    parser.add_argument("--zoom-columns", type=int, default=768, help="the budget of the zoom answers timed")
    parser.add_argument("--runs", default=f"{GH},{TF2},{GPT2}",
                        help="the runs to write and measure, comma separated (a 1,000 x 10,000 run of all three "
                             "does not fit in 24 GB with every step kept)")
    parser.add_argument("--samples", type=int, default=0,
                        help="samples TensorBoard keeps per tag (0: every step); 1,000 x 10,000 with every step "
                             "kept needs about 20 GB under the Rust data server")
    parser.add_argument("--loaders", default="false,true", help="--load_fast values to measure, comma separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-browser", dest="browser", action="store_false")
    parser.add_argument("--browser-loader", default="true", help="the --load_fast value the browser runs under")
    parser.add_argument("--logdir", help="where to write the logdir (kept, and reused when its size matches)")
    parser.add_argument("--ready-timeout", type=float, default=7200.0)
    args = parser.parse_args(argv)
    if args.full:
        args.layers, args.steps, args.gpt2_steps = 1000, 10_000, 10_000
    tmp, logdir, logs = scale.work_dirs(args.logdir, "ghbig_")
    try:
        expected = build_logdir(logdir, args)
        results = []
        for load_fast in args.loaders.split(","):
            t0 = time.perf_counter()
            results.append(measure_loader(load_fast, logdir, expected, args, logs))
            print(f"measured --load_fast={load_fast} in {time.perf_counter() - t0:.0f} s")
        report(results, expected, args)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
