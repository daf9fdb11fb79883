"""The TensorBoard plugin: routes, argument checking and JSON; nothing else."""

from __future__ import annotations

import functools
import logging
import os
from typing import Callable, Dict, List, Optional

import numpy as np
from tensorboard import plugin_util
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from . import config as config_lib
from . import analysis, data, findings, health, metrics
from . import rules as rules_lib
from . import tags as tags_lib
from .writing import format as metadata

logger = logging.getLogger(__name__)

_STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
HEATMAP_METRICS = ("health",) + metrics.METRICS


class BadRequest(Exception):
    """A missing or malformed query parameter (HTTP 400)."""


def _json_route(handler: Callable) -> Callable:
    """Wraps a handler: JSON out, 400/404 as JSON messages, never a stack trace."""

    @wrappers.Request.application
    @functools.wraps(handler)
    def wrapped(self, request):
        try:
            body = handler(self, request)
            return http_util.Respond(request, body, "application/json")
        except BadRequest as e:
            return http_util.Respond(request, {"error": str(e)}, "application/json", code=400)
        except data.NotFound as e:
            return http_util.Respond(request, {"error": str(e)}, "application/json", code=404)
        except Exception:  # noqa: BLE001 - a bug must not leak a trace to the client
            logger.exception("gradhealth: %s failed", request.path)
            return http_util.Respond(
                request, {"error": "internal error in the gradhealth plugin; see the TensorBoard log"},
                "application/json", code=500)

    return wrapped


def _param(request, name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise BadRequest(f"missing query parameter {name!r}")
    return value


def _choice(request, name: str, choices, default: Optional[str] = None) -> Optional[str]:
    value = request.args.get(name) or default
    if value is None:
        raise BadRequest(f"missing query parameter {name!r}")
    if value not in choices:
        raise BadRequest(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def _int_param(request, name: str) -> int:
    raw = _param(request, name)
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer step; got {raw!r}") from None


def _nullable(values: np.ndarray) -> list:
    """Float array to a JSON list, NaN and infinities as null."""
    values = np.asarray(values, dtype=np.float64)
    out = values.astype(object)
    out[~np.isfinite(values)] = None
    return out.tolist()


class GradHealthPlugin(base_plugin.TBPlugin):
    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext, config: Optional[config_lib.Config] = None) -> None:
        if config is None:
            config = config_lib.load(logdir=getattr(context, "logdir", None))
        self._analyzer = analysis.Analyzer(context.data_provider, config.limits, config.tag_rules,
                                           loader_samples(context))
        self._limits = dict(config.limits)

    def get_plugin_apps(self) -> Dict[str, Callable]:
        return {
            "/index.js": self._serve_index_js,
            "/runs": self._serve_runs,
            "/heatmap": self._serve_heatmap,
            "/cell": self._serve_cell,
            "/series": self._serve_series,
            "/findings": self._serve_findings,
        }

    def is_active(self) -> bool:
        return False  # superseded by data_plugin_names

    def data_plugin_names(self):
        return metadata.DATA_PLUGIN_NAMES

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=metadata.TAB_NAME)

    @wrappers.Request.application
    def _serve_index_js(self, request):
        with open(os.path.join(_STATIC_DIR, "index.js"), "rb") as f:
            return http_util.Respond(request, f.read(), "text/javascript")

    def _analysis(self, request):
        ctx = plugin_util.context(request.environ)
        eid = plugin_util.experiment_id(request.environ)
        return self._analyzer.run(ctx, eid, _param(request, "run"))

    def _run(self, request) -> data.RunData:
        return self._analysis(request)[0]

    @_json_route
    def _serve_runs(self, request):
        ctx = plugin_util.context(request.environ)
        eid = plugin_util.experiment_id(request.environ)
        runs = []
        for run in self._analyzer.list_runs(ctx, eid):
            try:
                rd, found = self._analyzer.run(ctx, eid, run)
            except data.NotFound:
                continue  # removed between the listing and the read
            runs.append(_run_summary(rd, found))
        return {"runs": runs}

    @_json_route
    def _serve_findings(self, request):
        rd, found = self._analysis(request)
        return {"run": rd.run, "findings": [f.to_json() for f in found]}

    @_json_route
    def _serve_heatmap(self, request):
        rd = self._run(request)
        available = rd.roles()
        role = _choice(request, "role", tags_lib.ROLES, default=available[0] if available else tags_lib.GRADIENT)
        metric = _choice(request, "metric", HEATMAP_METRICS, default="health")
        return heatmap(rd, role, metric)

    @_json_route
    def _serve_cell(self, request):
        rd = self._run(request)
        layer_name = _param(request, "layer")
        step = _int_param(request, "step")
        layer, roles = _layer_roles(request, rd, layer_name)
        out = {}
        for name, rdata in roles.items():
            hits = np.nonzero(rdata.table.steps == step)[0]
            if len(hits):
                buckets = None
                if rdata.histogram_tag is not None:
                    buckets = self._analyzer.histogram_at(
                        plugin_util.context(request.environ), plugin_util.experiment_id(request.environ),
                        rd.run, rdata.histogram_tag, step)
                out[name] = _cell(rdata, int(hits[0]), buckets)
        if not out:
            raise data.NotFound(f"layer {layer_name!r} of run {rd.run!r} has no data at step {step}")
        return {"run": rd.run, "layer": layer.name, "group": layer.group, "kind": layer.kind, "step": step,
                "roles": out}

    @_json_route
    def _serve_series(self, request):
        rd = self._run(request)
        layer_name = _param(request, "layer")
        metric = _choice(request, "metric", HEATMAP_METRICS)
        layer, roles = _layer_roles(request, rd, layer_name)
        role = request.args.get("role") or None
        series = {}
        for name, rdata in roles.items():
            values = rdata.health.score if metric == "health" else rdata.table.get(metric)
            quality = rdata.table.quality_of(metric) if metric != "health" else np.where(
                rdata.health.status == health.NO_DATA, metrics.NO_DATA, metrics.ESTIMATED)
            series[name] = {
                "steps": rdata.table.steps.tolist(),
                "values": _nullable(values),
                "quality": [metrics.QUALITY_NAMES[q] for q in quality],
                "status": rdata.health.status.tolist(),
            }
        if role is not None and not series:
            raise data.NotFound(f"layer {layer_name!r} has no {role} data")
        return {"run": rd.run, "layer": layer.name, "metric": metric, "series": series,
                "status_names": list(health.STATUS_NAMES),
                "thresholds": {name: _thresholds(name, metric, self._limits) for name in series}}


def _layer_roles(request, rd: data.RunData, layer_name: str):
    """The layer and its roles, narrowed to ``role=`` when given (empty means every role)."""
    role = request.args.get("role") or None
    if role is not None:
        _choice(request, "role", tags_lib.ROLES)
    layer = rd.layer(layer_name)
    if layer is None:
        raise data.NotFound(f"run {rd.run!r} has no layer {layer_name!r}")
    return layer, {name: r for name, r in layer.roles.items() if role is None or name == role}


def _run_summary(rd: data.RunData, found: List[findings.Finding]) -> dict:
    worst = max((findings.SEVERITY_RANK[f.severity] for f in found), default=0)
    has_data = any(len(r.table.steps) for layer in rd.layers for r in layer.roles.values())
    counts = {sev: sum(1 for f in found if f.severity == sev) for sev in findings.SEVERITY_RANK}
    return {
        "run": rd.run,
        "layers": [
            {"name": layer.name, "group": layer.group, "kind": layer.kind, "order": layer.order,
             "roles": {role: {"tags": r.tags, "source": r.source, "steps": int(len(r.table.steps)),
                              # Logged against kept: they differ where TensorBoard's sampling dropped steps.
                              "steps_logged": int(r.steps_logged if r.steps_logged is not None else len(r.table.steps)),
                              "steps_logged_at_least": bool(r.logged_at_least),
                              "dropped_by": list(r.dropped_by)}
                       for role, r in layer.roles.items()}}
            for layer in rd.layers
        ],
        "roles": rd.roles(),
        "scalars": rd.scalars,
        "unclassified": rd.unclassified,
        "steps_kept": rd.steps_kept,
        "steps_logged": rd.steps_logged,
        "sampling": rd.sampling,
        "last_step": rd.last_step,
        "worst_severity": ([None] + list(findings.SEVERITY_RANK))[worst],
        "worst_status": ("critical" if worst == 3 else "warn" if worst == 2 else "ok") if has_data else "no_data",
        "findings": counts,
    }


def heatmap(rd: data.RunData, role: str, metric: str) -> dict:
    """The layers x steps matrix of one role and metric, compact for the tab."""
    steps = data.role_union_steps(rd, role)
    layers = [layer for layer in rd.layers if role in layer.roles]
    n_rows, n_cols = len(layers), len(steps)
    values = np.full((n_rows, n_cols), np.nan)
    status = np.zeros((n_rows, n_cols), dtype=np.uint8)
    rules = np.full((n_rows, n_cols), None, dtype=object)
    quality_codes: List[np.ndarray] = []
    cell_quality = np.full((n_rows, n_cols), metrics.NO_DATA, dtype=np.uint8)
    for i, layer in enumerate(layers):
        rdata = layer.roles[role]
        cols = np.searchsorted(steps, rdata.table.steps)
        values[i, cols] = rdata.health.score if metric == "health" else rdata.table.get(metric)
        status[i, cols] = rdata.health.status
        rules[i, cols] = rdata.health.rule
        if metric != "health":
            quality_codes.append(rdata.table.quality_of(metric))
            cell_quality[i, cols] = rdata.table.quality_of(metric)
        else:
            cell_quality[i, cols] = np.where(rdata.health.status == health.NO_DATA, metrics.NO_DATA,
                                             metrics.ESTIMATED)
    quality = metrics.summarize_quality(np.concatenate(quality_codes)) if quality_codes else None
    return {
        "run": rd.run, "role": role, "metric": metric,
        "layers": [layer.name for layer in layers],
        "steps": steps.tolist(),
        "values": [_nullable(row) for row in values],
        "status": status.tolist(),
        "rules": rules.tolist(),
        "status_names": list(health.STATUS_NAMES),
        "quality": "estimated" if metric == "health" else quality,
        # Per cell, an index into quality_names: the tab's tooltip says exact or estimated.
        "quality_cells": cell_quality.tolist(),
        "quality_names": list(metrics.QUALITY_NAMES),
        "scale": "log" if metric in metrics.LOG_METRICS else "linear",
    }


# Threshold lines the tab draws on a layer's metric chart: (role or None for any role, metric)
# -> (threshold name in rules_lib.DEFAULTS, which side is bad, mirrored at zero).
_SERIES_THRESHOLDS = {
    ("gradient", "max_abs"): (("exploding_max_abs", "above", False),),
    ("gradient", "mean_abs"): (("vanishing_abs", "below", False),),
    ("gradient", "small_fraction"): (("vanishing_fraction", "above", False),),
    ("activation", "zero_fraction"): (("dead_zero_fraction", "above", False),
                                      ("dead_info_zero_fraction", "above", False)),
    ("weight", "std_rel_first"): (("weight_std_growth", "above", False),),
    ("weight", "mean"): (("weight_abs_mean", "above", True),),
    ("weight", "skewness"): (("skewness", "above", True),),
    (None, "update_ratio"): (("update_ratio_high", "above", False), ("update_ratio_low", "below", False)),
}


def _thresholds(role: str, metric: str, limits: Dict[str, float]) -> List[dict]:
    """The configured thresholds that apply to one role's metric series, as lines to draw."""
    out = []
    for key in ((role, metric), (None, metric)):
        for name, side, mirrored in _SERIES_THRESHOLDS.get(key, ()):
            if name not in limits:
                continue
            value = float(limits[name])
            meaning = rules_lib.DEFAULTS[name].meaning if name in rules_lib.DEFAULTS else name
            out.append({"name": name, "value": value, "side": side, "meaning": meaning})
            if mirrored:
                out.append({"name": name, "value": -value, "side": "below", "meaning": meaning})
    return out


def _cell(rdata: data.RoleData, index: int, buckets: Optional[np.ndarray]) -> dict:
    table = rdata.table
    names = [m for m in metrics.METRICS if m in table.values]
    histogram = None
    if buckets is not None:
        # As the metrics see them: empty, padded and degenerate buckets carry no data.
        keep = np.isfinite(buckets[:, 2]) & (buckets[:, 2] != 0)
        if len(buckets):
            # The same edges the metrics use, so both loaders draw the same histogram.
            lo, hi = metrics.written_range(buckets[None, :, 0], buckets[None, :, 1])
            left, right = metrics.clamp_to_range(buckets[:, 0], buckets[:, 1], lo[0], hi[0])
            buckets = np.stack([left, right, buckets[:, 2]], axis=1)
        histogram = [_nullable(b) for b in buckets[keep]]
    return {
        "tags": rdata.tags,
        "source": rdata.source,
        "status": health.STATUS_NAMES[int(rdata.health.status[index])],
        "score": _nullable(rdata.health.score[index:index + 1])[0],
        "rule": rdata.health.rule[index],
        "metrics": {
            name: {"value": _nullable(table.values[name][index:index + 1])[0],
                   "quality": metrics.QUALITY_NAMES[int(table.quality_of(name)[index])]}
            for name in names
        },
        "histogram": histogram,
        # The row's kept steps against its writer's logged steps (they differ after sampling).
        "steps_kept": int(len(table.steps)),
        "steps_logged": int(rdata.steps_logged if rdata.steps_logged is not None else len(table.steps)),
        "steps_logged_at_least": bool(rdata.logged_at_least),
    }


def loader_samples(context: base_plugin.TBContext) -> Optional[Dict[str, int]]:
    """Samples per tag TensorBoard's loader keeps, by plugin, where this process knows them.

    They come from the flags (after `GradHealthLoader.fix_flags`), and scalars
    keep 1,000 under both loaders unless a flag says otherwise. A data server
    TensorBoard did not start (``--grpc_data_provider``) keeps its own: unknown.
    """
    flags = getattr(context, "flags", None)
    if flags is None or getattr(flags, "grpc_data_provider", ""):
        return None
    hints = dict(getattr(context, "sampling_hints", None) or getattr(flags, "samples_per_plugin", None) or {})
    hints.setdefault("scalars", _TENSORBOARD_SCALAR_SAMPLES)
    return {name: int(count) for name, count in hints.items() if isinstance(count, int)}


# TensorBoard's default samples per scalar tag, under both loaders.
_TENSORBOARD_SCALAR_SAMPLES = 1000


class GradHealthLoader(base_plugin.TBLoader):
    """Adds the ``--gradhealth_config`` flag and builds the plugin."""

    def define_flags(self, parser) -> None:
        group = parser.add_argument_group("gradhealth")
        group.add_argument(
            "--gradhealth_config", metavar="PATH", type=str, default="",
            help="JSON file with gradhealth tag rules and threshold overrides "
                 "(default: gradhealth.json at the root of --logdir, if present)")

    def fix_flags(self, flags) -> None:
        """Keeps enough samples per tag of gradhealth summaries and of histograms.

        TensorBoard keeps only 10 samples per tag of a third-party plugin's
        tensors by default (the Rust data server 100), and the Rust data server,
        which ``--load_fast=auto`` picks wherever it runs, keeps 100 random
        samples per histogram tag where the Python loader keeps 500: a period or
        an onset cannot be read from 100 random steps of a long run. Both are
        raised to the Python loader's histogram default under both loaders; the
        user's own ``--samples_per_plugin`` entries still win.
        """
        samples = getattr(flags, "samples_per_plugin", None)
        if isinstance(samples, dict):
            for plugin_name, count in metadata.DEFAULT_SAMPLES_PER_PLUGIN.items():
                samples.setdefault(plugin_name, count)

    def load(self, context: base_plugin.TBContext) -> GradHealthPlugin:
        flags = context.flags
        path = getattr(flags, "gradhealth_config", "") if flags else ""
        try:
            cfg = config_lib.load(path=path or None, logdir=getattr(context, "logdir", None))
        except ValueError as e:
            logger.error("gradhealth: %s; using the defaults", e)
            cfg = config_lib.load()
        return GradHealthPlugin(context, cfg)
