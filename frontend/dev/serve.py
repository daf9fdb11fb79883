"""Mock of the gradhealth plugin routes for working on the frontend alone.

Serves the built bundle the way TensorBoard 2.21 does (same plugin_entry.html,
same Content-Security-Policy) with deterministic fake data, so the page can be
checked in a browser without a log directory or a running TensorBoard.

    python3 dev/serve.py [--port 6007] [--scenario normal|empty|error]

then open http://127.0.0.1:6007/, which redirects to the page TensorBoard
would put in its iframe.
Run "broken" answers every heatmap request with an error; run "eval" has only
unclassified tags. In every heatmap, the third layer explodes late in training
and the sixth goes quiet for a while; findings, cells (with histograms) and
series follow the same story.
"""

import argparse
import base64
import hashlib
import json
import math
import pathlib
import random
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

HERE = pathlib.Path(__file__).resolve().parent
BUNDLE = HERE.parent.parent / "gradhealth_plugin" / "static" / "index.js"
RUNS_FIXTURE = HERE / "fixtures" / "runs.json"

STATUS_NAMES = ["no_data", "ok", "warn", "critical"]
LOG_METRICS = {"std", "max_abs", "mean_abs", "l2", "update_ratio", "nonfinite", "count"}

# As in tensorboard/backend/application.py and http_util.py.
ENTRY_SCRIPT = 'import("./index.js").then((m) => void m.render());'
ENTRY_HTML = (
    '<!DOCTYPE html>\n<head><base href="plugin/gradhealth/" /></head>\n'
    "<body><script type=\"module\">%s</script></body>\n" % ENTRY_SCRIPT
)
SCRIPT_SHA = base64.b64encode(hashlib.sha256(ENTRY_SCRIPT.encode()).digest()).decode()
CSP = ";".join(
    [
        "default-src 'self'",
        "font-src 'self' data:",
        "frame-src 'self'",
        "img-src 'self' data: blob:",
        "object-src 'none'",
        "style-src 'self' data: 'unsafe-inline'",
        "connect-src 'self'",
        "script-src 'self' 'unsafe-eval' 'sha256-%s'" % SCRIPT_SHA,
    ]
)


def load_runs(scenario):
    if scenario == "empty":
        return {"runs": []}
    body = json.loads(RUNS_FIXTURE.read_text())
    for run in body["runs"]:
        found = findings(run)
        counts = {sev: sum(1 for f in found if f["severity"] == sev) for sev in ("info", "warn", "critical")}
        worst = next((sev for sev in ("critical", "warn", "info") if counts[sev]), None)
        run["findings"] = counts
        run["worst_severity"] = worst
        run["worst_status"] = "no_data" if not run["roles"] else {"critical": "critical", "warn": "warn"}.get(worst, "ok")
    return body


def role_layers(run, role):
    return [layer["name"] for layer in run["layers"] if role in layer["roles"]]


def findings(run):
    """The findings the fake heatmaps show: layer 2 explodes late, layer 5 goes quiet."""
    steps = steps_of(run)
    layers = role_layers(run, "gradient")
    if len(layers) < 6 or len(steps) < 10:
        return []
    n = len(steps)
    late, quiet_a, quiet_b = steps[int(0.6 * n) + 1], steps[int(0.3 * n) + 1], steps[int(0.7 * n)]
    return [
        {"run": run["run"], "kind": "exploding_gradients", "severity": "critical", "layers": [layers[2]],
         "first_step": late, "last_step": steps[-1], "role": "gradient",
         "message": "%s gradients explode (max |g| above 1000) from step %d to step %d" % (layers[2], late, steps[-1]),
         "advice": "Clip gradients by global norm, lower the learning rate.",
         "evidence": {"threshold": 1000.0, "layers": {layers[2]: {"first_step": late, "last_step": steps[-1]}}}},
        {"run": run["run"], "kind": "vanishing_gradients", "severity": "warn", "layers": [layers[5]],
         "first_step": quiet_a, "last_step": quiet_b, "role": "gradient",
         "message": "%s gradients vanish from step %d to step %d" % (layers[5], quiet_a, quiet_b),
         "advice": "Use ReLU with He init, add normalisation and residual connections.",
         "evidence": {"threshold": 1e-6, "layers": {layers[5]: {"first_step": quiet_a, "last_step": quiet_b}}}},
        {"run": run["run"], "kind": "spike", "severity": "info", "layers": [layers[0]],
         "first_step": steps[n // 2], "last_step": steps[n // 2], "role": "gradient",
         "message": "%s gradients spike at step %d" % (layers[0], steps[n // 2]),
         "advice": "Check that batch's data.", "evidence": {"layers": {layers[0]: {"step": steps[n // 2]}}}},
    ]


def track(run):
    """The run's loss: falling, with a spike where layer 2 starts to explode."""
    steps = steps_of(run)
    rng = random.Random("track|" + run["run"])
    late = int(0.6 * len(steps)) + 1
    values = [2.0 * math.exp(-3 * j / max(1, len(steps))) * (1 + 0.1 * rng.random()) * (8 if j == late else 1)
              for j in range(len(steps))]
    return {"run": run["run"], "series": [
        {"tag": "loss", "kind": "loss", "label": "loss", "axis": "row", "steps": steps,
         "steps_text": [str(s) for s in steps], "values": values, "logged": len(steps), "binned": False,
         "scale": "log", "nonfinite": [], "nonfinite_text": []}]}


def cell(run, role, layer, step):
    """One cell: the heatmap's numbers for it and a bell-shaped histogram whose width is its max |x|."""
    layers = role_layers(run, role)
    steps = steps_of(run)
    if layer not in layers or step not in steps:
        return None
    i, j = layers.index(layer), steps.index(step)
    health = heatmap(run, role, "health")
    if health["status"][i][j] == 0:
        return None
    width = heatmap(run, role, "max_abs")["values"][i][j] or 1.0
    edges = [width * (k / 15.0 - 1.0) for k in range(31)]
    buckets = [[edges[k], edges[k + 1], round(400 * math.exp(-((k - 14.5) / 5.0) ** 2))] for k in range(30)]
    metrics = {m: {"value": heatmap(run, role, m)["values"][i][j], "quality": "estimated"}
               for m in ("mean", "std", "max_abs", "l2")}
    return {
        "tags": ["%s/%s" % (role, layer)], "source": "histogram", "status": STATUS_NAMES[health["status"][i][j]],
        "score": health["values"][i][j], "rule": health["rules"][i][j], "metrics": metrics,
        "histogram": [b for b in buckets if b[2] > 0],
    }


def steps_of(run):
    if run["run"] == "long_run":
        rng = random.Random(7)
        steps, s = [], 0
        for _ in range(run["steps_kept"]):
            steps.append(s)
            s += rng.choice([4, 5, 5, 6])
        return steps
    return list(range(0, run["steps_kept"] * 10, 10))


_HEATMAPS = {}


def heatmap(run, role, metric):
    key = (run["run"], role, metric)
    if key not in _HEATMAPS:
        _HEATMAPS[key] = _heatmap(run, role, metric)
    return _HEATMAPS[key]


def _heatmap(run, role, metric):
    rng = random.Random("%s|%s|%s" % (run["run"], role, metric))
    layers = [layer["name"] for layer in run["layers"] if role in layer["roles"]]
    steps = steps_of(run)
    values, status, rules = [], [], []
    for i, _ in enumerate(layers):
        vrow, srow, rrow = [], [], []
        base = math.exp(rng.uniform(-9, 0))
        for j, _ in enumerate(steps):
            t = j / max(1, len(steps) - 1)
            missing = (j % 7 == 3 and i % 3 == 0) or (i == len(layers) - 1 and t < 0.2)
            if missing:
                vrow.append(None)
                srow.append(0)
                rrow.append(None)
                continue
            # Layer 2 explodes late in training, layer 5 goes quiet.
            if metric == "health":
                score = 0.95 - 0.1 * rng.random()
                if i == 2 and t > 0.6:
                    score = 0.15 + 0.1 * rng.random()
                elif i == 5 and 0.3 < t < 0.7:
                    score = 0.45 + 0.1 * rng.random()
                code = 1 if score >= 0.66 else 2 if score >= 0.33 else 3
                rule = "" if code == 1 else "exploding_gradients" if i == 2 else "vanishing_gradients"
                vrow.append(round(score, 4))
            else:
                v = base * math.exp(3 * t * (1 if i % 2 else -1)) * (1 + 0.2 * rng.random())
                if metric in ("mean", "skewness", "min"):
                    v = v * (1 if rng.random() > 0.4 else -1)
                code, rule = 1, ""
                vrow.append(v)
            srow.append(code)
            rrow.append(rule)
        values.append(vrow)
        status.append(srow)
        rules.append(rrow)
    return {
        "run": run["run"],
        "role": role,
        "metric": metric,
        "layers": layers,
        "steps": steps,
        "values": values,
        "status": status,
        "status_names": STATUS_NAMES,
        "quality": "estimated" if run["run"] == "long_run" else "exact",
        "quality_cells": [[0 if c == 0 else (2 if run["run"] == "long_run" else 1) for c in row] for row in status],
        "quality_names": ["no_data", "exact", "estimated", "upper_bound", "lower_bound"],
        "scale": "log" if metric in LOG_METRICS else "linear",
        "rules": rules,
    }


class Handler(BaseHTTPRequestHandler):
    scenario = "normal"

    def send(self, code, body, ctype, headers=()):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def json(self, code, obj):
        # allow_nan=False: browsers' JSON.parse rejects NaN and Infinity.
        self.send(code, json.dumps(obj, allow_nan=False), "application/json")

    def do_GET(self):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        prefix = "/data/plugin/gradhealth/"
        if url.path == "/":
            self.send(302, "", "text/plain", [("Location", "/data/plugin_entry.html?name=gradhealth")])
        elif url.path == "/data/plugin_entry.html":
            self.send(200, ENTRY_HTML, "text/html", [("Content-Security-Policy", CSP)])
        elif url.path == prefix + "index.js":
            self.send(200, BUNDLE.read_bytes(), "text/javascript; charset=utf-8")
        elif url.path == prefix + "vocabulary":
            # The real vocabulary: the tab reads kinds, labels and bands from it.
            from gradhealth_plugin.analysis import limits, vocabulary

            self.json(200, vocabulary.vocabulary(limits.thresholds()))
        elif url.path == prefix + "runs":
            if self.scenario == "error":
                self.json(500, {"error": "Failed to read the log directory: permission denied"})
            else:
                self.json(200, load_runs(self.scenario))
        elif url.path == prefix + "heatmap":
            runs = {r["run"]: r for r in load_runs(self.scenario)["runs"]}
            run = runs.get(q.get("run", ""))
            if run is None:
                self.json(404, {"error": "Unknown run: %r" % q.get("run")})
            elif run["run"] == "broken":
                self.json(400, {"error": "Run 'broken' has histograms with inconsistent bucket counts"})
            elif q.get("role") not in run["roles"]:
                self.json(400, {"error": "Run %r has no role %r" % (run["run"], q.get("role"))})
            else:
                self.json(200, heatmap(run, q["role"], q.get("metric", "health")))
        elif url.path in (prefix + "findings", prefix + "cell", prefix + "series", prefix + "track"):
            runs = {r["run"]: r for r in load_runs(self.scenario)["runs"]}
            run = runs.get(q.get("run", ""))
            route = url.path[len(prefix):]
            if run is None:
                self.json(404, {"error": "Unknown run: %r" % q.get("run")})
            elif route == "findings":
                self.json(200, {"run": run["run"], "findings": findings(run)})
            elif route == "track":
                self.json(200, track(run))
            elif route == "cell":
                role = q.get("role", "gradient")
                body = cell(run, role, q.get("layer", ""), int(q.get("step", "-1")))
                if body is None:
                    self.json(404, {"error": "layer %r has no %s data at step %s" % (q.get("layer"), role, q.get("step"))})
                else:
                    self.json(200, {"run": run["run"], "layer": q["layer"], "step": int(q["step"]),
                                    "roles": {role: body}})
            else:
                role = q.get("role", "gradient")
                metric = q.get("metric", "health")
                layers = role_layers(run, role)
                if q.get("layer") not in layers:
                    self.json(404, {"error": "layer %r has no %s data" % (q.get("layer"), role)})
                else:
                    i = layers.index(q["layer"])
                    values = heatmap(run, role, metric)
                    health = heatmap(run, role, "health")
                    thresholds = [{"name": "exploding_max_abs", "value": 1000.0, "side": "above",
                                   "meaning": "max |gradient| above this means the gradients explode"}] \
                        if (role, metric) == ("gradient", "max_abs") else []
                    self.json(200, {
                        "run": run["run"], "layer": q["layer"], "metric": metric,
                        "series": {role: {"steps": values["steps"], "values": values["values"][i],
                                          "quality": ["estimated"] * len(values["steps"]),
                                          "status": health["status"][i]}},
                        "status_names": STATUS_NAMES, "thresholds": {role: thresholds},
                    })
        else:
            self.json(404, {"error": "Not found: %s" % url.path})

    def log_message(self, fmt, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6007)
    parser.add_argument("--scenario", choices=["normal", "empty", "error"], default="normal")
    args = parser.parse_args()
    Handler.scenario = args.scenario
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print("serving on http://127.0.0.1:%d/ (%s)" % (args.port, args.scenario), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
