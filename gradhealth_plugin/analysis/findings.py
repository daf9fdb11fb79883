"""Turns a run's metric series into findings a person can act on.

A finding is one problem in one place over a span of steps. The same problem
in several layers is one finding listing them all. The kinds and their default
triggers are the contract in DESIGN section 4; every threshold comes from
`rules.DEFAULTS`.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from . import data, health, metrics
from . import series as series_lib
from . import tags as tags_lib

INFO = "info"
WARN = "warn"
CRITICAL = "critical"
SEVERITY_RANK = {INFO: 1, WARN: 2, CRITICAL: 3}
KINDS = (
    "nonfinite", "exploding_gradients", "vanishing_gradients", "dead_units", "weight_growth",
    "skewed_distribution", "bimodal_weights", "update_ratio", "spike", "periodic_spikes",
    "depth_vanishing", "init_scale",
)

ADVICE = {
    "nonfinite": "Lower the learning rate, clip gradients (tf.clip_by_global_norm / torch.nn.utils.clip_grad_norm_), "
                 "and look for log(0), division by zero or overflow in the loss; enable anomaly detection to find the op.",
    "exploding_gradients": "Clip gradients by global norm, lower the learning rate, use He init for ReLU or Glorot for "
                           "tanh/sigmoid, and add BatchNorm (LayerNorm for batches under 4) or residual connections.",
    "vanishing_gradients": "Use ReLU-family activations with He init instead of sigmoid/tanh, add BatchNorm "
                           "(LayerNorm for small batches) and residual connections, and check the learning rate.",
    "dead_units": "Use LeakyReLU/ELU, He init, a lower learning rate, and check the bias init; BatchNorm before "
                  "the activation keeps units alive.",
    "weight_growth": "Add weight decay / L2 regularisation, lower the learning rate, or add normalisation layers.",
    "skewed_distribution": "Check the initialisation and the learning rate; a strongly skewed weight distribution often "
                           "means a few weights absorb most of the updates.",
    "bimodal_weights": "Often harmless (pruning, quantisation-aware training), otherwise a sign of too high a learning "
                       "rate pushing weights to two basins; compare with a lower learning rate.",
    "update_ratio": "Aim for an update-to-weight ratio near 1e-3: lower the learning rate if it is much larger, raise "
                    "it (or check that the layer is not frozen) if it is much smaller.",
    "spike": "A single batch produced an outlier: check that batch's data; clipping bounds its effect.",
    "periodic_spikes": "Look for something that repeats every period: a bad batch in the data order, an epoch "
                       "boundary, a learning-rate schedule step, or the logging path itself.",
    "depth_vanishing": "Gradients shrink with depth: add residual connections and normalisation, use ReLU with He "
                       "init, or shorten the network.",
    "init_scale": "Re-initialise: He (std sqrt(2/fan_in)) for ReLU layers, Glorot (std sqrt(2/(fan_in+fan_out))) "
                  "for tanh/sigmoid.",
}


@dataclasses.dataclass
class Finding:
    run: str
    kind: str
    severity: str
    layers: List[str]
    first_step: int
    last_step: int
    evidence: Dict
    message: str
    advice: str
    role: Optional[str] = None
    # Steps per layer the finding covers, for the heatmap: layer -> (first, last).
    spans: Dict[str, tuple] = dataclasses.field(default_factory=dict)
    period: Optional[int] = None
    artefact: Optional[bool] = None
    cause: Optional[str] = None
    # For point-wise problems (non-finite values, explosions): the exact steps per layer.
    points: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        out = {
            "run": self.run, "kind": self.kind, "severity": self.severity, "layers": self.layers,
            "first_step": self.first_step, "last_step": self.last_step, "message": self.message,
            "advice": self.advice, "evidence": _jsonable(self.evidence), "role": self.role,
        }
        if self.kind == "periodic_spikes":
            out["period"] = self.period
            out["artefact"] = bool(self.artefact)
        if self.cause:
            out["cause"] = self.cause
        return out


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if np.isfinite(v) else str(v)
    return obj


def _layers_text(layers: List[str]) -> str:
    if len(layers) <= 3:
        return ", ".join(layers)
    return f"{', '.join(layers[:3])} and {len(layers) - 3} more"


@dataclasses.dataclass
class _Hit:
    """One layer's occurrence of a problem, before grouping across layers."""

    layer: str
    first: int
    last: int
    value: float
    step: int
    detail: Dict = dataclasses.field(default_factory=dict)
    points: Optional[np.ndarray] = None
    # The limit `value` crossed, where a finding has several triggers with their own limits.
    threshold: Optional[float] = None
    # The kept step before `first` when steps in between were dropped by TensorBoard's
    # sampling: the problem began after it, at `first` at the latest.
    after: Optional[int] = None


def _kept_before(steps: np.ndarray, i: int) -> Optional[int]:
    """The kept step before index i if the writer logged steps between them that were not kept."""
    if i <= 0:
        return None
    interval = series_lib.logging_interval(steps)
    gap = int(steps[i] - steps[i - 1])
    return int(steps[i - 1]) if interval is not None and gap > interval else None


def _group(run: str, kind: str, severity: str, role: Optional[str], hits: List[_Hit], threshold: float,
           what: str, order: Dict[str, int]) -> Optional[Finding]:
    """One finding for the same problem in many layers."""
    if not hits:
        return None
    hits = sorted(hits, key=lambda h: (h.first, order.get(h.layer, 0)))
    layers = [h.layer for h in hits]
    first = min(h.first for h in hits)
    last = max(h.last for h in hits)
    onset = hits[0]
    evidence = {
        "threshold": onset.threshold if onset.threshold is not None else threshold,
        "value": onset.value,
        "step": onset.step,
        "layers": {h.layer: {"first_step": h.first, "last_step": h.last, "value": h.value, "step": h.step,
                             **({"threshold": h.threshold} if h.threshold is not None else {}), **h.detail}
                   for h in hits},
    }
    subject = f"{_layers_text(layers)} {role + 's' if role else ''}".strip()
    if first == last:
        when = f"at step {first}"
    else:
        when = f"from step {first} to step {last}"
    if onset.after is not None and onset.first == first:
        # Sampled logs: the onset is only known to lie between two kept steps.
        when += f" (it began after step {onset.after}: the steps in between were not kept)"
        evidence["onset_after"] = onset.after
    message = f"{subject} {what} {when}"
    return Finding(run=run, kind=kind, severity=severity, layers=layers, first_step=first, last_step=last,
                   evidence=evidence, message=message, advice=ADVICE[kind], role=role,
                   spans={h.layer: (h.first, h.last) for h in hits},
                   points={h.layer: h.points for h in hits if h.points is not None})


def _role_tables(rd: data.RunData, role: str, kinds: Optional[tuple] = None):
    for layer in rd.layers:
        rdata = layer.roles.get(role)
        if rdata is None or len(rdata.table.steps) == 0:
            continue
        if kinds is not None and layer.kind not in kinds:
            continue
        yield layer, rdata.table


@dataclasses.dataclass(frozen=True)
class _Test:
    """One trigger of a span rule: a metric past a limit at a step."""

    metric: str
    limit: float
    above: bool = True
    inclusive: bool = False  # >= (<=) instead of > (<)
    use_abs: bool = False

    def values(self, table: metrics.MetricTable) -> np.ndarray:
        values = table.get(self.metric)
        return np.abs(values) if self.use_abs else values

    def fired(self, values: np.ndarray) -> np.ndarray:
        v = np.nan_to_num(values, nan=-np.inf if self.above else np.inf)
        if self.above:
            return v >= self.limit if self.inclusive else v > self.limit
        return v <= self.limit if self.inclusive else v < self.limit


def _span_hits(rd: data.RunData, role: str, tests: Sequence[_Test], min_length: int, kinds=None) -> List[_Hit]:
    """Per layer: the spans of at least `min_length` logged steps where any of `tests` holds.

    The evidence is the test that held at the onset, at its worst step inside
    the spans, with its own limit. The hit's points are the steps inside the
    spans only, so the heatmap keeps healthy steps between two spans healthy.
    """
    hits = []
    for layer, table in _role_tables(rd, role, kinds):
        values = [t.values(table) for t in tests]
        fired = np.array([t.fired(v) for t, v in zip(tests, values)])
        spans = series_lib.sustained(fired.any(axis=0), min_length)
        if not spans:
            continue
        bounds = np.array(spans)
        edges = np.zeros(len(table.steps) + 1, dtype=np.int64)
        np.add.at(edges, bounds[:, 0], 1)
        np.add.at(edges, bounds[:, 1] + 1, -1)
        inside = np.cumsum(edges[:-1]) > 0
        a, b = spans[0][0], spans[-1][1]
        k = int(np.argmax(fired[:, a]))
        test, v = tests[k], values[k]
        worst = np.nanargmax if test.above else np.nanargmin
        j = int(worst(np.where(inside & fired[k], v, np.nan)))
        hits.append(_Hit(layer.name, int(table.steps[a]), int(table.steps[b]), float(v[j]), int(table.steps[j]),
                         {"metric": f"|{test.metric}|" if test.use_abs else test.metric}, table.steps[inside],
                         threshold=test.limit, after=_kept_before(table.steps, a)))
    return hits


def _gt(values: np.ndarray, limit: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=-np.inf) > limit


def _lt(values: np.ndarray, limit: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=np.inf) < limit


def find(rd: data.RunData, limits: Mapping[str, float]) -> List[Finding]:
    """Every finding for one run, most severe first."""
    order = {layer.name: layer.order for layer in rd.layers}
    out: List[Optional[Finding]] = []
    out += _nonfinite(rd, order)
    out.append(_exploding(rd, limits, order))
    out.append(_vanishing(rd, limits, order))
    out += _dead_units(rd, limits, order)
    out.append(_weight_growth(rd, limits, order))
    out.append(_skewed(rd, limits, order))
    out.append(_bimodal(rd, limits, order))
    out += _update_ratio(rd, limits, order)
    out += _spikes(rd, limits, order)
    out.append(_depth_vanishing(rd, limits))
    out.append(_init_scale(rd, limits, order))
    findings = _drop_explained_spikes([f for f in out if f is not None])
    _combine(findings)
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.first_step, KINDS.index(f.kind)))
    return findings


def _drop_explained_spikes(findings: List[Finding]) -> List[Finding]:
    """Drops a one-off spike at a step where the same series already explodes or turns non-finite."""
    explained: Dict[str, set] = {}
    for f in findings:
        if f.kind in ("exploding_gradients", "nonfinite"):
            for layer in f.layers:
                steps = f.points.get(layer)
                explained.setdefault(layer, set()).update(
                    steps.tolist() if steps is not None else range(f.spans[layer][0], f.spans[layer][1] + 1))
    kept = []
    for f in findings:
        if f.kind == "spike":
            layers = [layer for layer in f.layers if f.first_step not in explained.get(layer, ())]
            if not layers:
                continue
            if len(layers) < len(f.layers):
                f.layers = layers
                f.spans = {layer: f.spans[layer] for layer in layers}
                f.points = {layer: p for layer, p in f.points.items() if layer in layers}
                f.evidence["layers"] = {k: v for k, v in f.evidence["layers"].items() if k in layers}
        kept.append(f)
    return kept


def _nonfinite(rd, order) -> List[Optional[Finding]]:
    out = []
    for role in tags_lib.ROLES:
        hits = []
        for layer, table in _role_tables(rd, role):
            nonfinite = table.get("nonfinite")
            mask = _gt(nonfinite, 0)
            if mask.any():
                idx = np.nonzero(mask)[0]
                hits.append(_Hit(layer.name, int(table.steps[idx[0]]), int(table.steps[idx[-1]]),
                                 float(nonfinite[idx[0]]), int(table.steps[idx[0]]), {"steps_with_nonfinite": len(idx)},
                                 table.steps[idx], after=_kept_before(table.steps, int(idx[0]))))
        out.append(_group(rd.run, "nonfinite", CRITICAL, role, hits, 0, "contain NaN or Inf values", order))
    hits = []
    for tag, (steps, values) in rd.scalar_series.items():
        bad = ~np.isfinite(values)
        if bad.any():
            idx = np.nonzero(bad)[0]
            hits.append(_Hit(tag, int(steps[idx[0]]), int(steps[idx[-1]]), float(values[idx[0]]), int(steps[idx[0]]),
                             {"source": "scalar"}))
    f = _group(rd.run, "nonfinite", CRITICAL, None, hits, 0, "is NaN or Inf", order)
    if f is not None:
        f.message = f"scalar {f.message}"
    out.append(f)
    return out


def _exploding(rd, limits, order) -> Optional[Finding]:
    limit = limits["exploding_max_abs"]
    jump = limits["exploding_jump"]
    window = int(limits["spike_window"])
    hits = []
    for layer, table in _role_tables(rd, tags_lib.GRADIENT):
        max_abs = table.get("max_abs")
        l2 = table.get("l2")
        baseline = series_lib.trailing_median(l2, window)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = l2 / baseline
        over, jumped = _gt(max_abs, limit), _gt(ratio, jump)
        idx = np.nonzero(over | jumped)[0]
        if len(idx) == 0:
            continue
        j, value, threshold = _explosion_evidence(max_abs, ratio, over, jumped, limit, jump)
        detail = {"metric": "max_abs"} if over.any() else {
            "metric": "l2 / running median", "l2": float(l2[j]), "running_median_l2": float(baseline[j])}
        hits.append(_Hit(layer.name, int(table.steps[idx[0]]), int(table.steps[idx[-1]]), value,
                         int(table.steps[j]), detail, table.steps[idx], threshold=threshold,
                         after=_kept_before(table.steps, int(idx[0]))))
    for tag, (steps, values) in rd.scalar_series.items():
        if tags_lib.classify_scalar(tag).kind != tags_lib.SCALAR_GRAD_NORM:
            continue
        baseline = series_lib.trailing_median(values, window)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = values / baseline
        over, jumped = _gt(values, limit), _gt(ratio, jump)
        idx = np.nonzero(over | jumped)[0]
        if len(idx):
            j, value, threshold = _explosion_evidence(values, ratio, over, jumped, limit, jump)
            hits.append(_Hit(tag, int(steps[idx[0]]), int(steps[idx[-1]]), value, int(steps[j]),
                             {"source": "scalar", "norm": float(values[j]), "running_median": float(baseline[j])},
                             threshold=threshold))
    return _group(rd.run, "exploding_gradients", CRITICAL, tags_lib.GRADIENT, hits, limit,
                  f"explode (max |g| above {limit:g} or the norm jumps {jump:g}x its running median)", order)


def _explosion_evidence(peak, ratio, over, jumped, limit, jump) -> tuple:
    """(index, value, threshold): the largest value past the absolute limit, else the largest jump."""
    if over.any():
        j = int(np.argmax(np.where(over, peak, -np.inf)))
        return j, float(peak[j]), limit
    j = int(np.argmax(np.where(jumped, ratio, -np.inf)))
    return j, float(ratio[j]), jump


def _vanishing(rd, limits, order) -> Optional[Finding]:
    small = limits["vanishing_abs"]
    fraction = limits["vanishing_fraction"]
    steps_needed = int(limits["vanishing_steps"])

    tests = (_Test("small_fraction", fraction, inclusive=True), _Test("mean_abs", small, above=False))
    hits = _span_hits(rd, tags_lib.GRADIENT, tests, steps_needed)
    f = _group(rd.run, "vanishing_gradients", WARN, tags_lib.GRADIENT, hits, small,
               f"vanish (>= {fraction:.0%} of |g| below {small:g} or mean |g| below {small:g} "
               f"for {steps_needed}+ logged steps)", order)
    if f is not None:
        total = sum(1 for _ in _role_tables(rd, tags_lib.GRADIENT))
        if len(f.layers) == total and total > 1:
            f.severity = CRITICAL
    return f


def _dead_units(rd, limits, order) -> List[Optional[Finding]]:
    danger = limits["dead_zero_fraction"]
    normal = limits["dead_info_zero_fraction"]
    kinds = (tags_lib.KIND_OUTPUT,)
    hits = _span_hits(rd, tags_lib.ACTIVATION, [_Test("zero_fraction", danger)], 3, kinds)
    for h in hits:
        h.detail["quality"] = "upper bound from buckets" if h.value < 1 else "exact"
    warn = _group(rd.run, "dead_units", WARN, tags_lib.ACTIVATION, hits, danger,
                  f"are mostly dead (zero fraction above {danger:.0%})", order)
    warned = set(warn.layers) if warn else set()
    info_hits = [h for h in _span_hits(rd, tags_lib.ACTIVATION, [_Test("zero_fraction", normal)], 3, kinds)
                 if h.layer not in warned]
    info = _group(rd.run, "dead_units", INFO, tags_lib.ACTIVATION, info_hits, normal,
                  f"have a zero fraction above {normal:.0%} (normal for ReLU up to about 60%)", order)
    return [warn, info]


def _weight_growth(rd, limits, order) -> Optional[Finding]:
    growth = limits["weight_std_growth"]
    abs_mean = limits["weight_abs_mean"]
    kinds = (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER)
    tests = (_Test("std_rel_first", growth), _Test("mean", abs_mean, use_abs=True))
    hits = _span_hits(rd, tags_lib.WEIGHT, tests, 3, kinds)
    return _group(rd.run, "weight_growth", WARN, tags_lib.WEIGHT, hits, growth,
                  f"grow (std above {growth:g}x its first logged value or |mean| above {abs_mean:g})", order)


def _skewed(rd, limits, order) -> Optional[Finding]:
    limit = limits["skewness"]
    hits = _span_hits(rd, tags_lib.WEIGHT, [_Test("skewness", limit, use_abs=True)], 3,
                      (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER))
    return _group(rd.run, "skewed_distribution", WARN, tags_lib.WEIGHT, hits, limit,
                  f"are strongly skewed (|skewness| above {limit:g})", order)


def _bimodal(rd, limits, order) -> Optional[Finding]:
    dip = limits["bimodal_dip"]
    hits = []
    for layer, table in _role_tables(rd, tags_lib.WEIGHT, (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER)):
        ratio = table.get("bimodal_dip")
        h = layer.roles[tags_lib.WEIGHT].histograms
        if np.all(np.isnan(ratio)) and h is not None and len(h.steps) == len(table.steps):
            ratio = metrics.bimodal_dip(h)
        # Both modes must hold real mass: small tensors give ragged histograms.
        enough = _gt(table.get("count"), 999)
        mask = enough & _lt(ratio, dip)
        spans = series_lib.sustained(mask, 3)
        if spans:
            a, b = spans[0][0], spans[-1][1]
            hits.append(_Hit(layer.name, int(table.steps[a]), int(table.steps[b]), float(ratio[a]),
                             int(table.steps[a])))
    return _group(rd.run, "bimodal_weights", INFO, tags_lib.WEIGHT, hits, dip,
                  "have two separated modes", order)


def _update_ratio(rd, limits, order) -> List[Optional[Finding]]:
    high = limits["update_ratio_high"]
    low = limits["update_ratio_low"]
    # A bias starting at zero has update/weight ratios of inf, 1, 1/2, ... over its first steps.
    kinds = (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER)
    too_high = _span_hits(rd, tags_lib.WEIGHT, [_Test("update_ratio", high)], 3, kinds)
    too_low = _span_hits(rd, tags_lib.WEIGHT, [_Test("update_ratio", low, above=False)], 3, kinds)
    return [
        _group(rd.run, "update_ratio", WARN, tags_lib.WEIGHT, too_high, high,
               f"update too fast (update/weight ratio above {high:g}; about 1e-3 is healthy)", order),
        _group(rd.run, "update_ratio", WARN, tags_lib.WEIGHT, too_low, low,
               f"barely move (update/weight ratio below {low:g}; about 1e-3 is healthy)", order),
    ]


def _spike_series(rd):
    """(name, role, steps, values) of every norm series worth checking for spikes."""
    for layer, table in _role_tables(rd, tags_lib.GRADIENT):
        values = table.get("l2")
        if np.all(np.isnan(values)):
            values = table.get("max_abs")
        yield layer.name, tags_lib.GRADIENT, table.steps, values
    for tag, (steps, values) in rd.scalar_series.items():
        if tags_lib.classify_scalar(tag).kind in (tags_lib.SCALAR_GRAD_NORM, tags_lib.SCALAR_LOSS):
            yield tag, None, steps, values


def _spikes(rd, limits, order) -> List[Optional[Finding]]:
    z = limits["spike_z"]
    window = int(limits["spike_window"])
    interval = rd.histogram_interval
    epoch = int(limits.get("steps_per_epoch", 0) or 0) or None
    single: Dict[int, List[_Hit]] = {}
    periodic: Dict[tuple, List[_Hit]] = {}
    unjudged: Dict[Optional[str], List[_Hit]] = {}
    for name, role, steps, values in _spike_series(rd):
        if len(steps) < window:
            continue
        idx = series_lib.spikes(values, z, window)
        # The first logged value has no past to compare with, and early training is loud.
        idx = idx[idx > 0]
        if len(idx) == 0:
            continue
        spike_steps = steps[idx]
        period, reason = series_lib.judge_period(spike_steps, steps)
        if period is None and reason is not None:
            # The spikes share a grid, but the kept steps cannot tell its period: say so, guess nothing.
            unjudged.setdefault(role, []).append(
                _Hit(name, int(spike_steps[0]), int(spike_steps[-1]), float(values[idx[0]]), int(spike_steps[0]),
                     {"spike_steps": spike_steps.tolist()[:50], "why": reason}, spike_steps))
            continue
        if period is not None:
            own_interval = series_lib.logging_interval(steps)
            artefact, why = _is_artefact(period, own_interval, interval, epoch)
            hit = _Hit(name, int(spike_steps[0]), int(spike_steps[-1]), float(values[idx[0]]), int(spike_steps[0]),
                       {"spike_steps": spike_steps.tolist()[:50], "why": why}, spike_steps)
            periodic.setdefault((period, artefact, role), []).append(hit)
            continue
        for i in idx:
            single.setdefault((int(steps[i]), role), []).append(
                _Hit(name, int(steps[i]), int(steps[i]), float(values[i]), int(steps[i]), {}, steps[i:i + 1]))
    out = []
    for (period, artefact, role), hits in sorted(periodic.items(), key=lambda kv: kv[0][:2]):
        sev = INFO if artefact else WARN
        f = _group(rd.run, "periodic_spikes", sev, role, hits, z,
                   f"spike every {period} steps", order)
        f.period, f.artefact = period, artefact
        f.evidence["period"] = period
        f.evidence["histogram_interval"] = interval
        why = hits[0].detail["why"]
        if artefact:
            f.message += f"; {why}, so this is most likely a logging artefact, not a training problem"
            f.advice = ("Nothing to fix in the model if the loss is smooth: the spike comes from how the logged batch "
                        "is computed (seed 000). Log histograms less often or on a fixed batch to confirm.")
        else:
            f.message += f"; {why}, so look for a cause that repeats every {period} steps"
        out.append(f)
    for role, hits in unjudged.items():
        f = _group(rd.run, "periodic_spikes", INFO, role, hits, z, "spike repeatedly", order)
        flag = rd.sampling["flag"] if rd.sampling else None
        hint = f"TensorBoard kept too few of the logged steps; {flag} keeps every step" if flag else \
            "the logged steps are too irregular"
        f.message += f"; {series_lib.TOO_FEW_REGULAR} ({hint})"
        f.evidence["period"] = None
        f.evidence["histogram_interval"] = interval
        f.evidence["why"] = series_lib.TOO_FEW_REGULAR
        f.advice = (f"Keep every logged step ({flag}) and look again: " if flag else "Log at regular steps: ") + \
            "the spikes recur, but their period cannot be read from these samples."
        out.append(f)
    for (step, role), hits in sorted(single.items(), key=lambda kv: kv[0][0]):
        out.append(_group(rd.run, "spike", INFO, role, hits, z,
                          f"spike{'s' if len(hits) == 1 and role is None else ''} (robust z-score above {z:g} "
                          f"against the rolling median)", order))
    return out


def _is_artefact(period: int, own_interval: Optional[float], hist_interval: Optional[float],
                 epoch: Optional[int]) -> tuple:
    if epoch and period == epoch:
        return True, f"the period equals the epoch length ({epoch} steps)"
    if hist_interval and own_interval and own_interval < hist_interval:
        if period == hist_interval:
            return True, f"the period equals the histogram logging interval ({hist_interval:g} steps)"
        if period % hist_interval == 0:
            return True, f"the period is {period / hist_interval:g}x the histogram logging interval ({hist_interval:g} steps)"
    return False, "the period matches neither the histogram logging interval nor the epoch length"


def _depth_vanishing(rd, limits) -> Optional[Finding]:
    ratio_limit = limits["depth_ratio"]
    layers = [(layer, t) for layer, t in _role_tables(rd, tags_lib.GRADIENT, (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER))]
    if len(layers) < 3:
        return None
    first_layer, first = layers[0]
    last_layer, last = layers[-1]
    common, i1, i2 = np.intersect1d(first.steps, last.steps, return_indices=True)
    if len(common) == 0:
        return None
    a = first.get("mean_abs")[i1]
    b = last.get("mean_abs")[i2]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = a / b
    mask = _lt(ratio, ratio_limit) & (b > 0)
    spans = series_lib.sustained(mask, int(limits["vanishing_steps"]))
    if not spans:
        return None
    s, e = spans[0][0], spans[-1][1]
    names = [first_layer.name, last_layer.name]
    return Finding(
        run=rd.run, kind="depth_vanishing", severity=WARN, layers=names,
        first_step=int(common[s]), last_step=int(common[e]),
        evidence={"threshold": ratio_limit, "value": float(ratio[s]), "step": int(common[s]),
                  "first_layer_mean_abs": float(a[s]), "last_layer_mean_abs": float(b[s])},
        message=(f"gradients at {first_layer.name} are {ratio[s]:.1e}x those at {last_layer.name} "
                 f"from step {int(common[s])}: they vanish with depth"),
        advice=ADVICE["depth_vanishing"], role=tags_lib.GRADIENT, spans={first_layer.name: (int(common[s]), int(common[e]))})


def _init_scale(rd, limits, order) -> Optional[Finding]:
    factor = limits["init_scale_factor"]
    hits = []
    for layer in rd.layers:
        shape = getattr(layer, "shape", None)
        rdata = layer.roles.get(tags_lib.WEIGHT)
        if not shape or rdata is None or layer.kind != tags_lib.KIND_KERNEL or len(shape) < 2:
            continue
        std = rdata.table.get("std")
        known = np.nonzero(np.isfinite(std))[0]
        if len(known) == 0:
            continue
        fan_in, fan_out = fans(shape, channels_last=_tf_layout(layer.name))
        he = np.sqrt(2.0 / fan_in)
        glorot = np.sqrt(2.0 / (fan_in + fan_out))
        s0 = float(std[known[0]])
        off = lambda ref: max(s0 / ref, ref / s0) if s0 > 0 else np.inf  # noqa: E731
        if off(he) > factor and off(glorot) > factor:
            step = int(rdata.table.steps[known[0]])
            hits.append(_Hit(layer.name, step, step, s0, step, {"he_std": he, "glorot_std": glorot, "shape": list(shape)}))
    return _group(rd.run, "init_scale", WARN, tags_lib.WEIGHT, hits, factor,
                  f"start with a std more than {factor:g}x away from both the He and the Glorot value", order)


def fans(shape, channels_last: bool = False) -> tuple:
    """(fan_in, fan_out) of a kernel.

    PyTorch stores (out, in, *kernel): Linear (out, in), Conv2d (out, in, kh, kw).
    TensorFlow/Keras store (*kernel, in, out) (`channels_last`): Dense (in, out),
    Conv2D (kh, kw, in, out).
    """
    shape = [int(s) for s in shape]
    if channels_last:
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        return shape[-2] * receptive, shape[-1] * receptive
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _tf_layout(name: str) -> bool:
    """TensorFlow names kernels ``.../kernel`` (``kernel:0``); PyTorch names them ``....weight``."""
    last = name.replace(".", "/").rsplit("/", 1)[-1].split(":")[0].lower()
    return "kernel" in last


def _combine(findings: List[Finding]) -> None:
    """Names a likely cause where symptoms co-occur (seed 004)."""
    kinds = {f.kind for f in findings if f.severity != INFO}
    if "exploding_gradients" in kinds and "nonfinite" in kinds:
        cause = "learning_rate_too_high"
        growth = "weight_growth" in kinds
        for f in findings:
            if f.severity == INFO:
                continue
            if f.kind in ("exploding_gradients", "nonfinite") or (growth and f.kind == "weight_growth"):
                f.cause = cause
                f.message += ("; together with " + ("exploding gradients" if f.kind != "exploding_gradients"
                                                    else "non-finite values")
                              + " this points to a learning rate that is too high")
    elif "vanishing_gradients" in kinds and "dead_units" in kinds:
        for f in findings:
            if f.severity != INFO and f.kind in ("vanishing_gradients", "dead_units"):
                f.cause = "dead_relu"
                f.message += "; dead ReLU units stop the gradient: this points to dying ReLUs"


def apply_to_health(rd: data.RunData, findings: List[Finding]) -> None:
    """Sets each cell's status from the findings, so the heatmap and the findings never disagree.

    Cell rules alone fire on single steps; findings add the time rules (5
    consecutive steps, robust baselines). A cell is warn or critical exactly
    when a warn or critical finding covers its layer, role and step; the score
    keeps its continuous value inside that status' band.
    """
    for layer in rd.layers:
        for role, rdata in layer.roles.items():
            h = rdata.health
            present = h.status != health.NO_DATA
            status = np.where(present, health.OK, health.NO_DATA).astype(np.uint8)
            rule = np.where(present, "", None).astype(object)
            steps = rdata.table.steps
            for f in findings:
                if f.severity == INFO or layer.name not in f.spans or (f.role is not None and f.role != role):
                    continue
                first, last = f.spans[layer.name]
                sev = health.CRITICAL if f.severity == CRITICAL else health.WARN
                covered = present & (steps >= first) & (steps <= last) & (status < sev)
                if layer.name in f.points:
                    covered &= np.isin(steps, f.points[layer.name])
                status = np.where(covered, sev, status).astype(np.uint8)
                rule = np.where(covered, f.kind, rule)
            score = np.select(
                [status == health.CRITICAL, status == health.WARN, status == health.OK],
                [np.minimum(h.score, 0.25), np.clip(h.score, 0.2501, 0.6), np.maximum(h.score, 0.6001)],
                default=np.nan)
            rdata.health = health.CellHealth(score=score, status=status, rule=rule)
