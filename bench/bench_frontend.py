"""Times the Gradient Health tab's heatmap in headless Chromium.

Serves the built bundle (gradhealth_plugin/static/index.js) behind TensorBoard's
plugin_entry.html and Content-Security-Policy, with synthetic JSON for runs of
500 layers x 1,000 steps and 2,000 layers x 5,000 steps, and measures inside the
page:

* load: navigation to first heatmap on screen (fetch, JSON parse, colouring, paint);
* draw: rebuilding and repainting the heatmap from loaded data (cell colours,
  rasterisation, axis, labels), until the canvas can be read back;
* zoom: repainting after zooming to half the steps;
* hover: one mousemove over a cell (hit test, tooltip text and layout, outline).

Targets: draw 500 x 1,000 in <= 100 ms, <= 16 ms per hover.

    .venv/bin/python bench/bench_frontend.py [--sizes 500x1000,2000x5000] [--hovers 200]

Uses Debian's Chromium at /usr/bin/chromium; nothing downloads a browser.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
BUNDLE = REPO / "gradhealth_plugin" / "static" / "index.js"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TARGET_DRAW_MS = 100.0
TARGET_HOVER_MS = 16.0


def _dev_server():
    """The frontend's mock server module: the same entry page and CSP as TensorBoard 2.21."""
    spec = importlib.util.spec_from_file_location("gh_dev_serve", REPO / "frontend" / "dev" / "serve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic_heatmap(name: str, rows: int, cols: int, seed: int = 0) -> bytes:
    """A health heatmap: mostly ok, a few layers drifting to warn, a few critical streaks, some holes."""
    rng = np.random.default_rng(seed)
    score = rng.uniform(0.62, 1.0, size=(rows, cols))
    status = np.ones((rows, cols), dtype=np.int64)
    warn_rows = rng.choice(rows, size=max(1, rows // 20), replace=False)
    for r in warn_rows:
        start = rng.integers(0, cols)
        score[r, start:] = rng.uniform(0.26, 0.6, size=cols - start)
        status[r, start:] = 2
    for r in rng.choice(rows, size=max(1, rows // 50), replace=False):
        a = rng.integers(0, cols)
        b = min(cols, a + rng.integers(1, max(2, cols // 10)))
        score[r, a:b] = rng.uniform(0.0, 0.25, size=b - a)
        status[r, a:b] = 3
    holes = rng.random((rows, cols)) < 0.01
    status[holes] = 0
    rule_names = np.array([None, "", "vanishing_gradients", "exploding_gradients"], dtype=object)
    values = np.round(score, 4).astype(object)
    values[holes] = None
    quality = np.where(holes, 0, 2)
    body = {
        "run": name, "role": "gradient", "metric": "health",
        "layers": [f"block_{i // 4}/layer_{i}/kernel" for i in range(rows)],
        "steps": list(range(0, cols * 10, 10)),
        "values": values.tolist(),
        "status": status.tolist(),
        "rules": rule_names[status].tolist(),
        "status_names": ["no_data", "ok", "warn", "critical"],
        "quality": "estimated",
        "quality_cells": quality.tolist(),
        "quality_names": ["no_data", "exact", "estimated", "upper_bound", "lower_bound"],
        "scale": "linear",
    }
    return json.dumps(body, separators=(",", ":")).encode()


def serve(runs: dict, dev) -> ThreadingHTTPServer:
    bundle = BUNDLE.read_bytes()
    runs_body = json.dumps({"runs": [
        {"run": name, "layers": [], "roles": ["gradient"], "steps_kept": cols, "last_step": (cols - 1) * 10,
         "worst_severity": "critical", "worst_status": "critical", "findings": {"critical": 1}}
        for name, (_, cols, _) in runs.items()
    ]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def send(self, body: bytes, ctype: str, headers=()):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path, _, query = self.path.partition("?")
            params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            prefix = "/data/plugin/gradhealth/"
            if path == "/data/plugin_entry.html":
                self.send(dev.ENTRY_HTML.encode(), "text/html", [("Content-Security-Policy", dev.CSP)])
            elif path == prefix + "index.js":
                self.send(bundle, "text/javascript")
            elif path == prefix + "runs":
                self.send(runs_body, "application/json")
            elif path == prefix + "heatmap":
                self.send(runs[params.get("run", "")][2], "application/json")
            elif path == prefix + "findings":
                self.send(json.dumps({"run": params.get("run", ""), "findings": []}).encode(), "application/json")
            else:
                self.send_error(404)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


DRAW_JS = """() => {
    const t0 = performance.now();
    window.__gradhealth.redraw();
    // Reading a pixel back waits for every queued canvas operation.
    document.querySelector(".gh-hm-body").getContext("2d").getImageData(0, 0, 1, 1);
    return performance.now() - t0;
}"""

ZOOM_JS = """(range) => {
    const t0 = performance.now();
    window.__gradhealth.zoomTo(range);
    document.querySelector(".gh-hm-body").getContext("2d").getImageData(0, 0, 1, 1);
    return performance.now() - t0;
}"""

HOVER_JS = """([rows, cols, n]) => {
    const port = document.querySelector(".gh-hm-port");
    const times = [];
    let seed = 1;
    const rand = (k) => { seed = (seed * 16807) % 2147483647; return seed % k; };
    for (let i = 0; i < n; i++) {
        const layerIndex = rand(rows);
        const step = rand(cols) * 10;
        const layer = `block_${Math.floor(layerIndex / 4)}/layer_${layerIndex}/kernel`;
        const c = window.__gradhealth.cellCenter(layer, step);
        if (!c) continue;
        const t0 = performance.now();
        port.dispatchEvent(new MouseEvent("mousemove", { clientX: c.x, clientY: c.y, bubbles: true }));
        // Forces style and layout of the tooltip, as the next frame would.
        document.querySelector(".gh-tooltip").getBoundingClientRect();
        times.push(performance.now() - t0);
    }
    return times;
}"""


def bench(sizes, hovers: int, repeats: int) -> list:
    from playwright.sync_api import sync_playwright

    dev = _dev_server()
    runs = {}
    for rows, cols in sizes:
        t0 = time.perf_counter()
        name = f"bench_{rows}x{cols}"
        runs[name] = (rows, cols, synthetic_heatmap(name, rows, cols))
        print(f"generated {name}: {len(runs[name][2]) / 1e6:.1f} MB of JSON in {time.perf_counter() - t0:.1f} s",
              flush=True)
    server = serve(runs, dev)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, (rows, cols, _) in runs.items():
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                errors = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                t0 = time.perf_counter()
                page.goto(f"{base}/data/plugin_entry.html?name=gradhealth#run={name}")
                page.wait_for_function("Number(document.documentElement.dataset.ghDrawn || 0) > 0", timeout=300_000)
                load_ms = (time.perf_counter() - t0) * 1000
                draws = [page.evaluate(DRAW_JS) for _ in range(repeats)]
                zooms = [page.evaluate(ZOOM_JS, [0, cols * 5]) for _ in range(repeats)]
                page.evaluate("() => window.__gradhealth.zoomTo(null)")
                times = page.evaluate(HOVER_JS, [rows, cols, hovers])
                if errors:
                    raise RuntimeError(f"{name}: page errors: {errors}")
                results.append({
                    "name": name, "rows": rows, "cols": cols, "load_ms": load_ms,
                    "draw_ms": statistics.median(draws), "draw_max_ms": max(draws),
                    "zoom_ms": statistics.median(zooms),
                    "hover_mean_ms": statistics.fmean(times), "hover_p95_ms": float(np.percentile(times, 95)),
                    "hover_max_ms": max(times), "hovers": len(times),
                })
                page.close()
            browser.close()
    finally:
        server.shutdown()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500x1000,2000x5000", help="comma-separated LAYERSxSTEPS")
    parser.add_argument("--hovers", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    results = bench(sizes, args.hovers, args.repeats)
    print()
    print(f"{'heatmap':>14} {'load':>9} {'draw':>9} {'draw max':>9} {'zoom':>9} "
          f"{'hover mean':>11} {'hover p95':>10} {'hover max':>10}")
    for r in results:
        print(f"{r['rows']:>6} x {r['cols']:<5} {r['load_ms']:>7.0f}ms {r['draw_ms']:>7.1f}ms {r['draw_max_ms']:>7.1f}ms "
              f"{r['zoom_ms']:>7.1f}ms {r['hover_mean_ms']:>9.2f}ms {r['hover_p95_ms']:>8.2f}ms {r['hover_max_ms']:>8.2f}ms")
    small = next((r for r in results if (r["rows"], r["cols"]) == (500, 1000)), None)
    if small:
        print()
        print(f"500 x 1,000 draw: {small['draw_ms']:.1f} ms (target <= {TARGET_DRAW_MS:.0f} ms) "
              f"{'OK' if small['draw_ms'] <= TARGET_DRAW_MS else 'OVER'}")
    worst_hover = max(r["hover_p95_ms"] for r in results)
    print(f"hover p95 (worst size): {worst_hover:.2f} ms (target <= {TARGET_HOVER_MS:.0f} ms) "
          f"{'OK' if worst_hover <= TARGET_HOVER_MS else 'OVER'}")


if __name__ == "__main__":
    main()
