"""The TensorBoard plugin: route wrappers that parse a request and call an ``*_impl`` method.

The answers are built in `serving.responses`, the analysis in `serving.analyzer`;
a bad parameter raises `tensorboard.errors.InvalidArgumentError` (400), an unknown
run, layer or step `tensorboard.errors.NotFoundError` (404).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from tensorboard import context as tb_context
from tensorboard import errors, plugin_util
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from . import config as config_lib
from .analysis import findings as findings_lib
from .analysis import vocabulary
from .analysis.finding import Finding
from .reading.cache import TagCache
from .reading.runs import Layer, RunData
from .reading import provider as provider_lib
from .reading import tags as tags_lib
from .serving import analyzer as analyzer_lib
from .serving import responses
from .serving import sweep as sweep_answer
from .writing import format as metadata

logger = logging.getLogger(__name__)

_STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
HEATMAP_METRICS = responses.HEATMAP_METRICS
TAB_NAME = "Gradient Health"
# TensorBoard enables the tab whenever any of these plugins has data.
DATA_PLUGIN_NAMES = ("histograms", "scalars", metadata.PLUGIN_NAME)
# Samples per tag the loader asks TensorBoard to keep unless the user's --samples_per_plugin
# names the plugin: the Python loader's histogram default, for gradhealth summaries (whose
# default is 10) and for histograms (the Rust data server keeps 100 of them otherwise).
DEFAULT_SAMPLES_PER_PLUGIN = {metadata.PLUGIN_NAME: 500, "histograms": 500}


def _message(error: errors.PublicError) -> str:
    """The error's own words: TensorBoard prefixes its code name ("Not found: "), which the tab does not show."""
    _, sep, detail = str(error).partition(": ")
    return detail if sep else str(error)


def _json_route(handler: Callable) -> Callable:
    """Wraps a route: JSON out, and its errors as ``{"error": message}`` with their status, never a stack trace.

    TensorBoard's application would answer a `tensorboard.errors.PublicError` in
    plain text; the tab reads JSON messages, so the route answers them itself.
    """

    @wrappers.Request.application
    @functools.wraps(handler)
    def wrapped(self, request):
        try:
            answer = handler(self, request)
            if isinstance(answer, _Encoded):
                return http_util.Respond(request, answer.gzipped, "application/json", content_encoding="gzip")
            return http_util.Respond(request, _json_text(answer), "application/json")
        except errors.PublicError as e:
            return http_util.Respond(request, {"error": _message(e)}, "application/json", code=e.http_code)
        except Exception as e:  # noqa: BLE001 - a bug must not leak a trace to the client
            down = analyzer_lib.unavailable(e)
            if down is not None:
                return http_util.Respond(request, {"error": _message(down)}, "application/json", code=down.http_code)
            logger.exception("gradhealth: %s failed", request.path)
            return http_util.Respond(
                request, {"error": "internal error in the gradhealth plugin; see the TensorBoard log"},
                "application/json", code=500)

    return wrapped


def _json_text(answer: object) -> object:
    """The answer as JSON text, or as it is where only TensorBoard's own cleansing can write it.

    `http_util.Respond` cleanses an object before writing it, visiting every
    value to replace NaN and bytes; answers send null for NaN, and on a run of
    20,000 tags that walk took three times as long as writing the JSON.
    """
    try:
        return json.dumps(answer, allow_nan=False)
    except (TypeError, ValueError):
        return answer


class _Encoded:
    """An answer already written as gzipped JSON (a cached one): sent as it is."""

    def __init__(self, gzipped: bytes) -> None:
        self.gzipped = gzipped


def _param(request, name: str, allow_empty: bool = False) -> str:
    """A required query parameter; with ``allow_empty``, present but empty is the name "" (a layer may be named so)."""
    value = request.args.get(name)
    if value is None or (value == "" and not allow_empty):
        raise errors.InvalidArgumentError(f"missing query parameter {name!r}")
    return value


def _choice(request, name: str, choices: Sequence[str], default: Optional[str] = None) -> str:
    value = request.args.get(name) or default
    if value is None:
        raise errors.InvalidArgumentError(f"missing query parameter {name!r}")
    if value not in choices:
        raise errors.InvalidArgumentError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def _role(request) -> Optional[str]:
    """The optional ``role=`` narrowing a layer's answer (None: every role)."""
    return _choice(request, "role", tags_lib.ROLES) if request.args.get("role") else None


# A step as the routes take it: an optional '-' and ASCII digits, nothing else. Python's
# int() would also take " 5", "1_000", "+5" and other scripts' digits ("５").
_STEP_PATTERN = re.compile(r"-?[0-9]+")
# TensorBoard records steps as signed 64-bit integers.
_STEP_RANGE = (-(2 ** 63), 2 ** 63 - 1)


def _int_param(request, name: str) -> int:
    raw = _param(request, name)
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    if not _STEP_PATTERN.fullmatch(raw):
        raise errors.InvalidArgumentError(
            f"{name} must be an integer step (ASCII digits, optionally after '-'); got {shown!r}")
    # Well formed but no step TensorBoard can record: found nowhere. Length first, as int()
    # of thousands of digits is slow (and refused past 4,300).
    if len(raw.lstrip("-").lstrip("0")) > 19 or not _STEP_RANGE[0] <= int(raw) <= _STEP_RANGE[1]:
        raise errors.NotFoundError(f"no step {shown}: TensorBoard's steps lie between -2**63 and 2**63-1")
    return int(raw)


def _window_param(request, name: str) -> Optional[int]:
    """An optional bound of a step window: an integer step as the routes take them (400 otherwise).
    A bound past TensorBoard's step range is clamped to it: a window reaching beyond every step."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    if not _STEP_PATTERN.fullmatch(raw):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise errors.InvalidArgumentError(
            f"{name} must be an integer step (ASCII digits, optionally after '-'); got {shown!r}")
    digits = raw.lstrip("-").lstrip("0")
    if len(digits) > 19:
        return _STEP_RANGE[0] if raw.startswith("-") else _STEP_RANGE[1]
    return min(max(int(raw), _STEP_RANGE[0]), _STEP_RANGE[1])


def _window(request) -> Tuple[Optional[int], Optional[int]]:
    """The optional step window [start, end] of the heatmap and the track (400 when start lies after end)."""
    start, end = _window_param(request, "start"), _window_param(request, "end")
    if start is not None and end is not None and start > end:
        raise errors.InvalidArgumentError(f"start ({start}) must not lie after end ({end})")
    return start, end


def _columns_param(request) -> Optional[int]:
    """The optional column budget of a heatmap: a whole number from 1, capped at `responses.MAX_COLUMNS`."""
    raw = request.args.get("columns")
    if raw is None or raw == "":
        return None
    if not re.fullmatch(r"[0-9]+", raw) or int(raw[:12]) < 1:
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise errors.InvalidArgumentError(f"columns must be a whole number from 1; got {shown!r}")
    # Length first: int() of thousands of digits is slow.
    return responses.MAX_COLUMNS if len(raw.lstrip("0")) > 9 else min(int(raw), responses.MAX_COLUMNS)


# A list of row (or block) numbers and inclusive spans of them: "0:39,120,130:140".
_SPANS_PATTERN = re.compile(r"[0-9]+(:[0-9]+)?(,[0-9]+(:[0-9]+)?)*")
# The most characters a `rows` or `blocks` list may have: thousands of spans, far more than a screen shows.
_MAX_SPANS_CHARS = 20_000


def _spans_param(request, name: str) -> Optional[List[Tuple[int, int]]]:
    """The optional rows (or blocks) of a heatmap wanted: numbers and inclusive spans `first:last`,
    comma separated; an empty value asks for none. A number past the last row is clamped by the answer."""
    raw = request.args.get(name)
    if raw is None:
        return None
    if raw == "":
        return []
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    if len(raw) > _MAX_SPANS_CHARS or not _SPANS_PATTERN.fullmatch(raw):
        raise errors.InvalidArgumentError(
            f"{name} must list numbers and spans first:last, comma separated (at most {_MAX_SPANS_CHARS:,} "
            f"characters); got {shown!r}")
    # Past 12 digits a number is beyond every run's rows: clamped, so int() never reads thousands of digits.
    number = lambda text: 10 ** 12 if len(text.lstrip("0")) > 12 else int(text)
    spans = []
    for item in raw.split(","):
        first, _, last = item.partition(":")
        span = (number(first), number(last or first))
        if span[0] > span[1]:
            raise errors.InvalidArgumentError(f"{name}: span {item!r} ends before it starts")
        spans.append(span)
    return spans


# The most bytes of heatmap cells kept for row windows: two heatmaps of 1,000 rows x 2,000 columns.
HEATMAP_CELLS_BYTES = 128 * 1024 * 1024


class GradHealthPlugin(base_plugin.TBPlugin):
    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext, config: Optional[config_lib.Config] = None) -> None:
        if config is None:
            config = config_lib.load_or_defaults(logdir=getattr(context, "logdir", None))
        # TensorBoard sets `multiplexer` under its Python loader only: read directly, it decodes faster.
        self._analyzer = analyzer_lib.Analyzer(context.data_provider, config.limits, config.tag_rules,
                                               loader_samples(context), getattr(context, "multiplexer", None))
        self._limits = dict(config.limits)
        self._heatmap_cells = TagCache(HEATMAP_CELLS_BYTES)
        self._config_problems = list(config.problems)

    def get_plugin_apps(self) -> Dict[str, Callable]:
        return {
            "/index.js": self._serve_index_js,
            "/runs": self._serve_runs,
            "/heatmap": self._serve_heatmap,
            "/cell": self._serve_cell,
            "/series": self._serve_series,
            "/distribution": self._serve_distribution,
            "/findings": self._serve_findings,
            "/track": self._serve_track,
            "/vocabulary": self._serve_vocabulary,
            "/sweep": self._serve_sweep,
        }

    def is_active(self) -> bool:
        return False  # superseded by data_plugin_names

    def data_plugin_names(self) -> Sequence[str]:
        return DATA_PLUGIN_NAMES

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME)

    @wrappers.Request.application
    def _serve_index_js(self, request):
        with open(os.path.join(_STATIC_DIR, "index.js"), "rb") as f:
            return http_util.Respond(request, f.read(), "text/javascript")

    def _analysis(self, request):
        """The requested run's data and findings (``run=``): as of ``version=`` (a run's ``version`` in
        ``runs``) where the server still holds that data version of the run, else as the provider has it now."""
        ctx = plugin_util.context(request.environ)
        eid = plugin_util.experiment_id(request.environ)
        run = _param(request, "run")
        version = request.args.get("version")
        pinned = self._analyzer.pinned(eid, run, version) if version else None
        return pinned if pinned is not None else self._analyzer.run(ctx, eid, run)

    # Route wrappers: parameters are parsed in the order their errors are reported (the run first).

    @_json_route
    def _serve_runs(self, request):
        return self.runs_impl(plugin_util.context(request.environ), plugin_util.experiment_id(request.environ))

    @_json_route
    def _serve_findings(self, request):
        return self.findings_impl(*self._analysis(request))

    @_json_route
    def _serve_sweep(self, request):
        return self.sweep_impl(plugin_util.context(request.environ), plugin_util.experiment_id(request.environ))

    @_json_route
    def _serve_track(self, request):
        rd, _ = self._analysis(request)
        start, end = _window(request)
        return self.track_impl(rd, start, end)

    @_json_route
    def _serve_vocabulary(self, request):
        return self.vocabulary_impl()

    @_json_route
    def _serve_heatmap(self, request):
        rd, _ = self._analysis(request)
        role = _choice(request, "role", tags_lib.ROLES, default=responses.default_role(rd))
        metric = _choice(request, "metric", HEATMAP_METRICS, default="health")
        start, end = _window(request)
        columns = _columns_param(request)
        layout = _choice(request, "layout", responses.HEATMAP_LAYOUTS, default=responses.LAYOUT_ROWS)
        rows, blocks = _spans_param(request, "rows"), _spans_param(request, "blocks")
        key = (plugin_util.experiment_id(request.environ), rd.run, role, metric, start, end, columns, layout,
               None if rows is None else tuple(rows), None if blocks is None else tuple(blocks))
        return _Encoded(self._analyzer.answer(
            rd, key, lambda: self.heatmap_impl(rd, role, metric, start, end, columns, layout, rows, blocks)))

    @_json_route
    def _serve_cell(self, request):
        rd, found = self._analysis(request)
        return self.cell_impl(plugin_util.context(request.environ), plugin_util.experiment_id(request.environ),
                              rd, _param(request, "layer", allow_empty=True), _int_param(request, "step"),
                              _role(request), found)

    @_json_route
    def _serve_series(self, request):
        rd, _ = self._analysis(request)
        return self.series_impl(rd, _param(request, "layer", allow_empty=True),
                                _choice(request, "metric", HEATMAP_METRICS), _role(request))

    @_json_route
    def _serve_distribution(self, request):
        rd, _ = self._analysis(request)
        return self.distribution_impl(plugin_util.context(request.environ), plugin_util.experiment_id(request.environ),
                                      rd, _param(request, "layer", allow_empty=True), _role(request))

    def runs_impl(self, ctx: tb_context.RequestContext, experiment: str) -> dict:
        """Every run's summary; a run removed between the listing and its read is left out.

        A run that fails is listed with its error (`responses.failed_run`, logged with the
        traceback) and the others are served as if it were not there.
        """
        summaries = []
        # One listing for the route: each run is read by it rather than listed again.
        listings = self._analyzer.listings(ctx, experiment)
        names = provider_lib.run_names(listings)
        for run in names:
            try:
                rd, found = self._analyzer.run(ctx, experiment, run, names, listings)
                # With the training many workers logged that the run is a rank of (None: it is none).
                summary = responses.run_summary(rd, found, self._analyzer.training_of(rd),
                                                self._analyzer.layers_in(ctx, experiment, run, listings))
                # Named back by the tab's requests about the run (`_analysis`).
                summary["version"] = self._analyzer.version_text(rd)
                summaries.append(summary)
            except errors.NotFoundError:
                continue
            except analyzer_lib.RunFailed as e:
                summaries.append(responses.failed_run(run, _message(e)))
            except Exception as e:  # noqa: BLE001 - one run's failure must not take the others down
                logger.exception("gradhealth: summarising run %r failed", run)
                summaries.append(responses.failed_run(run, analyzer_lib.failure(run, "summarised", e)))
        # What was rejected from gradhealth.json: the tab shows it above the run list.
        return {**responses.runs(summaries), "config_problems": self._config_problems}

    def sweep_impl(self, ctx: tb_context.RequestContext, experiment: str) -> dict:
        """Every run's sweep line with its hyperparameters, and the splits they make of the findings."""
        return sweep_answer.answer(self._analyzer, ctx, experiment)

    def findings_impl(self, rd: RunData, found: List[Finding]) -> dict:
        return responses.run_findings(rd, found)

    def track_impl(self, rd: RunData, start: Optional[int] = None, end: Optional[int] = None) -> dict:
        """The run's loss, global gradient norm and learning rate, for the track above the heatmap."""
        return responses.track(rd, start=start, end=end)

    def heatmap_impl(self, rd: RunData, role: str, metric: str, start: Optional[int] = None,
                     end: Optional[int] = None, columns: Optional[int] = None,
                     layout: str = responses.LAYOUT_ROWS, rows: Optional[responses.Spans] = None,
                     blocks: Optional[responses.Spans] = None) -> dict:
        # Every row's cells are kept per data version where rows are asked for, or an answer of every row
        # is cut into pages: the next rows a scroll or a page asks for are cut from them, not built again.
        key, version = (rd.run, role, metric, start, end, columns), self._analyzer.data_version(rd)
        cells = self._heatmap_cells.get(key, version)
        if cells is None:
            cells = responses.heatmap_cells(rd, role, metric, start, end, columns)
            n_rows, n_cols = cells.status.shape
            if rows is not None or blocks is not None or n_rows > responses.page_rows(n_cols, layout):
                self._heatmap_cells.put(key, version, cells, cells.nbytes)
        return responses.heatmap_answer(cells, layout, rows, blocks)

    def cell_impl(self, ctx: tb_context.RequestContext, experiment: str, rd: RunData, layer_name: str,
                  step: int, role: Optional[str], found: Sequence[Finding] = ()) -> dict:
        """One layer at one step, each role with its histogram there when it has one, and for an ok cell
        where a cell rule fired why that is no warning (`findings.held`, from the run's findings `found`)."""
        layer = _layer(rd, layer_name)
        rows = responses.rows_at(responses.layer_roles(layer, role), step)
        if not rows:
            raise errors.NotFoundError(f"layer {layer_name!r} of run {rd.run!r} has no data at step {step}")
        roles = {}
        for name, index in rows.items():
            row = layer.roles[name]
            shown = row.histogram_step_at(index)
            buckets = None if shown is None else self._analyzer.histogram_at(
                ctx, experiment, rd.run, row.histogram_tag, shown[0])
            own = buckets is None and row.own_tag is not None
            if own:
                # gradhealth's own summary carries a histogram (format version 2) on the row's axis.
                buckets = self._analyzer.histograms_of(ctx, experiment, rd.run, row.own_tag, own=True).get(step)
                shown = (step, None) if buckets is not None else shown
            held = findings_lib.held(row, index, found, layer.name, name, self._limits)
            read = findings_lib.rule_read(row, index, name, layer.kind, self._limits)
            roles[name] = responses.role_cell(row, index, buckets, shown, own, held, read)
        return responses.cell(rd, layer, step, roles)

    def distribution_impl(self, ctx: tb_context.RequestContext, experiment: str, rd: RunData, layer_name: str,
                          role: Optional[str]) -> dict:
        """One layer's distribution over steps per role: percentiles of its histograms at each step."""
        layer = _layer(rd, layer_name)
        out = {}
        for name, row in responses.layer_roles(layer, role).items():
            own = row.histogram_tag is None and row.own_tag is not None
            tag = row.own_tag if own else row.histogram_tag
            by_step = {} if tag is None else self._analyzer.histograms_of(ctx, experiment, rd.run, tag, own=own)
            out[name] = responses.role_distribution(row, by_step, own)
        return responses.distribution(rd, layer, out)

    def series_impl(self, rd: RunData, layer_name: str, metric: str, role: Optional[str]) -> dict:
        """One layer's metric over its steps per role, with the threshold lines that apply."""
        layer = _layer(rd, layer_name)
        roles = responses.layer_roles(layer, role)
        if role is not None and not roles:
            raise errors.NotFoundError(f"layer {layer_name!r} has no {role} data")
        lines = {name: vocabulary.series_thresholds(name, metric, self._limits) for name in roles}
        return responses.series(rd, layer, metric, roles, lines)

    def vocabulary_impl(self) -> dict:
        """The kinds, labels, chart metrics, severities, statuses, bands and threshold lines the tab reads."""
        return vocabulary.vocabulary(self._limits)


def _layer(rd: RunData, layer_name: str) -> Layer:
    layer = rd.layer(layer_name)
    if layer is None:
        raise errors.NotFoundError(f"run {rd.run!r} has no layer {layer_name!r}")
    return layer


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
            for plugin_name, count in DEFAULT_SAMPLES_PER_PLUGIN.items():
                samples.setdefault(plugin_name, count)

    def load(self, context: base_plugin.TBContext) -> GradHealthPlugin:
        flags = context.flags
        path = getattr(flags, "gradhealth_config", "") if flags else ""
        cfg = config_lib.load_or_defaults(path=path or None, logdir=getattr(context, "logdir", None))
        for problem in cfg.problems:
            logger.error("gradhealth: %s", problem)
        return GradHealthPlugin(context, cfg)
