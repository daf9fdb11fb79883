"""Update-to-weight ratio far from about 1e-3 (CS231n): too large is unstable, too small frozen.

Exact from gradhealth's summaries, estimated from update tags; from the weights
alone, a lower bound (`metrics.update_ratio_lower_bound`): the norm change
between logged steps, proven from the buckets, per step. A lower bound above
the ceiling proves the updates too large; below the floor it proves nothing,
so only measured ratios judge "too small". Weights whose every statistic is
identical at every logged step moved by less than the histogram shows: no
proof of a frozen parameter. Where another parameter of the same layer (its
bias) does change at the same logged steps, the layer trains: its updates
reach that one and are too small to see in this one (vanishing gradients).

Too fast only at the start is a note, not a warning: a ratio past the ceiling
from the start of training (a first logged step at or before
`init_scale_max_step`) that falls back under it for good before the last
logged step, never rising above its first value, while the weight's std
stays within `weight_std_growth` of its first value (of its peers' scale for a
weight initialised scaled down, as `weight_growth` measures it). The first gradients
are often the largest, and Adam's first updates are about the learning rate per
element whatever the gradient, so a small weight (GPT-2's residual projections
at 1e-3) starts with a large ratio that settles by itself; a learning rate too high keeps
the ratio up, or grows the weights, and stays a warning.

Too slow where the logged loss has converged is a note (`convergence`): a
loss near zero gives gradients, and so updates, near zero.
"""

from __future__ import annotations

from typing import List, Mapping, Optional

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import convergence, health, metrics
from .. import series as series_lib
from ..finding import INFO, WARN, Finding
from ..limits import Line
from ..spans import (PARAM_SHAPE_KINDS, Hit, Test, group, group_sustained, labelled, role_tables, span_hits,
                     stack)
from . import weight_growth

KIND = "update_ratio"
ORDER = 80
SEVERITY = WARN
LABEL = "Update-to-weight ratio"
METRIC = "update_ratio"
NEEDS = (tags_lib.WEIGHT, tags_lib.UPDATE)
ADVICE = ("Aim for an update-to-weight ratio near 1e-3: lower the learning rate if it is much larger, raise "
          "it (or check that the layer is not frozen) if it is much smaller.")
FROZEN_ADVICE = ("The weights show no change: check that the parameter is passed to the optimizer, that the layer "
                 "is not frozen (trainable=False, requires_grad=False) and that the learning rate is not zero. "
                 "Ignore this for a layer frozen on purpose.")
UNSEEN_ADVICE = ("The layer trains (another of its parameters changes), so these updates are too small for the "
                 "histogram to show: gradients likely vanish here. Log gradients to know: "
                 "gradhealth_plugin.keras.GradientHealthCallback(logdir) or gradhealth_plugin.torch.watch(model, "
                 "logdir). If they vanish: ReLU-family activations with He init, normalisation layers, "
                 "residual connections.")
# What an identical histogram at every logged step proves, said in every such finding.
_UNSEEN = "any change is smaller than the histogram shows"
# Biases and normalisation parameters often start at zero or one: their ratio means little
# (a bias starting at zero has ratios of inf, 1, 1/2, ... over its first steps).
STEPS_NEEDED = "update_ratio_steps"
CELL_RULES = (
    health.CellRule(KIND, (tags_lib.WEIGHT,), "update_ratio", True, "update_ratio_high", health.WARN, True,
                    kinds=PARAM_SHAPE_KINDS),
    health.CellRule(KIND, (tags_lib.WEIGHT,), "update_ratio", False, "update_ratio_low", health.WARN, True,
                    kinds=PARAM_SHAPE_KINDS),
)
THRESHOLDS = (
    Line(None, "update_ratio", "update_ratio_high", "above"),
    Line(None, "update_ratio", "update_ratio_low", "below"),
)
# The statistics compared to call a weight histogram unchanged: all the buckets give (count to std must be known).
_COMPARED = ("count", "min", "max", "mean", "std", "l2", "mean_abs", "skewness", "kurtosis", "zero_fraction")
_BOUND_NOTE = ("a lower bound from the weights alone: how far the weight norm moved between two logged steps, "
               "with each norm taken at the end of the interval its histogram buckets prove (every value lies "
               "inside its bucket), bounds the mean update-to-weight ratio per step in between from below "
               "(metrics.update_ratio_lower_bound); the true ratio may be far larger")


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    high, low = limits["update_ratio_high"], limits["update_ratio_low"]
    steps_needed = int(limits["update_ratio_steps"])
    bounded = {layer.name for layer, table in role_tables(rd, tags_lib.WEIGHT, PARAM_SHAPE_KINDS)
               if (table.quality_of("update_ratio") == metrics.LOWER_BOUND).any()}
    too_high = span_hits(rd, tags_lib.WEIGHT, [Test("update_ratio", high)], steps_needed, PARAM_SHAPE_KINDS)
    # A lower bound under the floor proves nothing: the test reads none (`Test.values`).
    too_low = span_hits(rd, tags_lib.WEIGHT, [Test("update_ratio", low, above=False)], steps_needed, PARAM_SHAPE_KINDS)
    at_least = span_hits(rd, tags_lib.WEIGHT, [Test("update_ratio", high)], int(limits["update_ratio_bound_steps"]),
                         PARAM_SHAPE_KINDS)
    at_least = [h for h in at_least if h.layer in bounded]
    for h in at_least:
        h.detail["quality"] = "lower_bound"
    frozen = _frozen_hits(rd, int(limits["frozen_steps"]), limits["vanishing_abs"])
    measured = [h for h in too_high if h.layer not in bounded]
    references = weight_growth.reference_stds(rd)
    early = [h for h in measured if _settled_start(rd, h, high, limits, references.get(h.layer))]
    fast = group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, [h for h in measured if h not in early], high,
                           f"update too fast (update/weight ratio above {high:g}; about 1e-3 is healthy)", ADVICE,
                           steps_needed)
    start = group(rd, KIND, INFO, tags_lib.WEIGHT, early, high,
                  f"update fast only at the start of training (update/weight ratio above {high:g}, then back "
                  f"under it for good, the weights not growing)", ADVICE)
    if start is not None:
        # Said of any optimizer: which one ran is seldom logged, and SGD's first steps are large too.
        start.message += (": the first updates of training are often large for small weights (the first "
                          "gradients are often the largest; Adam's first steps are about the learning rate per "
                          "element, whatever the gradient) and settle by themselves")
        start.evidence["settled_start"] = True
        start.no_fault = ("once the ratio has settled", f"if it rises above {high:g} again or the weights grow")
        fast.append(start)
    bound = group(rd, KIND, SEVERITY, tags_lib.WEIGHT, at_least, high,
                  f"update too fast: the change of their norm alone proves a mean update/weight ratio per step "
                  f"above {high:g} (a lower bound; about 1e-3 is healthy)", ADVICE)
    slow = group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, too_low, low,
                           f"barely move (update/weight ratio below {low:g}; about 1e-3 is healthy)", ADVICE,
                           steps_needed)
    for f in slow:
        convergence.as_note_if_converged(rd, f, limits, "updates this small")
    moved = _moved_peers(rd, frozen)
    for h in frozen:
        if h.layer in moved:
            h.detail["changing_in_layer"] = moved[h.layer]
    unseen = group(rd, KIND, SEVERITY, tags_lib.WEIGHT, [h for h in frozen if h.layer in moved], 0,
                   "show no change", UNSEEN_ADVICE)
    if unseen is not None:
        peers = unseen.evidence["layers"][unseen.layers[0]]["changing_in_layer"]
        unseen.message += (f": their histogram is identical at every logged step ({_UNSEEN}), while "
                           f"{labelled('parameter', peers)} of the same layer as `{unseen.layers[0]}` "
                           f"{'changes' if len(peers) == 1 else 'change'} at those steps"
                           + (" (and likewise in each of their layers)" if len(unseen.layers) > 1 else "")
                           + ": the layer trains, and these updates are too small for the histogram to show")
        unseen.evidence["below_resolution"] = True
    rest = [h for h in frozen if h.layer not in moved]
    still = [
        group(rd, KIND, SEVERITY, tags_lib.WEIGHT, [h for h in rest if h.detail["gradient_max_abs"]], 0,
              f"show no change although their gradients flow: their histogram is identical at every logged step "
              f"({_UNSEEN})", FROZEN_ADVICE),
        group(rd, KIND, SEVERITY, tags_lib.WEIGHT, [h for h in rest if not h.detail["gradient_max_abs"]], 0,
              f"show no change: their histogram is identical at every logged step ({_UNSEEN})", FROZEN_ADVICE),
        unseen,
    ]
    if bound is not None:
        bound.evidence["quality"] = "lower_bound"
        bound.evidence["meaning"] = _BOUND_NOTE
    out = []
    for direction, found in (("too_high", fast + [bound]), ("too_low", slow), ("frozen", still)):
        for f in found:  # a learning rate too high explains updates too fast only (`combine.name_causes`)
            if f is not None:
                f.evidence["direction"] = direction
                out.append(f)
    return out


def _settled_start(rd: RunData, h: Hit, high: float, limits: Mapping[str, float],
                   reference: Optional[float] = None) -> bool:
    """Whether a too-fast hit is only the start of training settling (see the module's docstring); the
    weight's growth measured as `weight_growth` measures it (from `reference`, where it has one)."""
    table = metrics.judged(rd.layer(h.layer).roles[tags_lib.WEIGHT].table)
    steps, ratio = table.steps, table.get("update_ratio")
    if not len(steps) or steps[0] > limits["init_scale_max_step"] or h.first != steps[0]:
        return False
    over = np.nan_to_num(ratio, nan=-np.inf) > high
    runs = series_lib.true_runs(over)
    if len(runs) != 1 or runs[0][1] >= len(steps) - 1:
        return False  # it comes back, or still holds at the last logged step
    end = runs[0][1]
    growth = table.get("std_rel_first") if reference is None else table.get("std") / reference
    with np.errstate(invalid="ignore"):
        return bool(np.all(ratio[1:end + 1] <= ratio[0]) and np.isfinite(ratio[:end + 1]).all()
                    and not (np.nan_to_num(growth, nan=np.inf) > limits["weight_std_growth"]).any())


def _frozen_hits(rd: RunData, min_steps: int, vanished: float) -> List[Hit]:
    """Weight rows whose every bucket statistic is the same at each of at least `min_steps` logged steps.

    Not where the layer's logged gradients never reach `vanished`: vanishing
    gradients explain weights that stand still, and say so themselves.
    """
    hits = []
    tables = [(layer, table) for layer, table in role_tables(rd, tags_lib.WEIGHT, PARAM_SHAPE_KINDS)
              if len(table.steps) >= max(min_steps, 2)]
    # Equally long rows are compared together; only the rows that never changed go on.
    for rows in series_lib.same_length([len(table.steps) for _, table in tables]):
        stats = np.array([stack([tables[i][1] for i in rows], lambda t, name=name: t.get(name))
                          for name in _COMPARED])  # (statistics, rows, steps)
        same = (stats == stats[:, :, :1]) | (np.isnan(stats) & np.isnan(stats[:, :, :1]))
        known = ~np.isnan(stats[:_COMPARED.index("std") + 1]).any(axis=(0, 2))
        for r in np.flatnonzero(known & same.all(axis=(0, 2))).tolist():
            layer, table = tables[rows[r]]
            grad = _gradient_max_abs(layer)
            if grad is not None and grad < vanished:
                continue
            first, last = int(table.steps[0]), int(table.steps[-1])
            detail = {"steps_compared": int(len(table.steps)), "statistics_compared": list(_COMPARED),
                      "gradient_max_abs": grad,
                      "proven": "every statistic of the weight histogram is identical at every logged step"}
            hits.append((int(rows[r]), Hit(layer.name, first, last, 0.0, first, detail, table.steps)))
    return [h for _, h in sorted(hits, key=lambda pair: pair[0])]


def _moved_peers(rd: RunData, hits: List[Hit]) -> dict:
    """Per unchanged weight row (`hits`) whose gradients were not logged: the other weight rows of its layer
    (same group) whose histogram statistics differ between two of the unchanged row's logged steps; only
    rows with some. Gradients logged and flowing rule out updates too small to see: those are left out."""
    by_group: dict = {}
    for layer in rd.layers:
        if tags_lib.WEIGHT in layer.roles:
            by_group.setdefault(layer.group, []).append(layer)
    out = {}
    for h in hits:
        if h.detail["gradient_max_abs"] is not None:
            continue
        layer = rd.layer(h.layer)
        changing = []
        for other in by_group.get(layer.group, []):
            if other is layer:
                continue
            table = metrics.judged(other.roles[tags_lib.WEIGHT].table)
            at = np.isin(table.steps, h.points)
            if at.sum() < 2:
                continue
            # Proof of a change: a statistic known at two of those steps with two values.
            for name in _COMPARED:
                values = table.get(name)[at]
                values = values[np.isfinite(values)]
                if len(values) >= 2 and (values != values[0]).any():
                    changing.append(other.name)
                    break
        if changing:
            out[h.layer] = changing
    return out


def _gradient_max_abs(layer) -> Optional[float]:
    """The largest logged |gradient| of the layer; None when its gradients were not logged."""
    rdata = layer.roles.get(tags_lib.GRADIENT)
    if rdata is None:
        return None
    values = metrics.judged(rdata.table).get("max_abs")
    return float(np.nanmax(values)) if np.isfinite(values).any() else None
