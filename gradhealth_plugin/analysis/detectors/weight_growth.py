"""Weights that grow: std far above its first logged value, or |mean| above a limit (seed 004).

A weight constant where first logged (std 0: a bias or a norm scale at its initial value, also one
named like a kernel, as torchvision's `downsample.1.weight`) is judged by neither: it has no spread to
grow from, and its |mean| is where it started (1 for a norm scale).

A weight initialised deliberately smaller than its peers is measured from its
peers' scale, not its own start: GPT-2 scales its residual projections to
0.02 / sqrt(2 x blocks) while its other kernels start at 0.02
(`init_scale`), and in early training they grow towards 0.02 - four to five
times their start in a 12-block model - as they learn. Where a kernel starts
within 25% of that scaled std and the run's other kernels start, by their
median, within 25% of 0.02, its growth is its std over 0.02.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health, metrics
from .. import series as series_lib
from ..finding import WARN, Finding
from ..limits import Line
from ..spans import PARAM_SHAPE_KINDS, Hit, Test, group_sustained, labelled, span_hits
from . import init_scale

KIND = "weight_growth"
ORDER = 50
SEVERITY = WARN
LABEL = "Weight growth"
METRIC = "std_rel_first"
NEEDS = (tags_lib.WEIGHT,)
ADVICE = "Add weight decay / L2 regularisation, lower the learning rate, or add normalisation layers."
STEPS_NEEDED = 3  # logged steps in a row: one or two outliers are no trend
CELL_RULES = (
    health.CellRule(KIND, (tags_lib.WEIGHT,), "std_rel_first", True, "weight_std_growth", health.WARN, True,
                    kinds=PARAM_SHAPE_KINDS),
    health.CellRule(KIND, (tags_lib.WEIGHT,), "mean", True, "weight_abs_mean", health.WARN, True,
                    kinds=PARAM_SHAPE_KINDS, use_abs=True),
)
THRESHOLDS = (
    Line(tags_lib.WEIGHT, "std_rel_first", "weight_std_growth", "above"),
    Line(tags_lib.WEIGHT, "mean", "weight_abs_mean", "above", mirrored=True),
)


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    growth, abs_mean = limits["weight_std_growth"], limits["weight_abs_mean"]
    tests = (Test("std_rel_first", growth), Test("mean", abs_mean, use_abs=True))
    scaled = reference_stds(rd)
    # A tensor constant where first logged (a norm scale at 1, whatever its name) has no spread to grow
    # from (`metrics.first_stds`), and its |mean| is its initial value's: neither test judges it.
    constant = started_constant(rd)
    hits = [h for h in span_hits(rd, tags_lib.WEIGHT, tests, STEPS_NEEDED, PARAM_SHAPE_KINDS)
            if h.layer not in scaled and h.layer not in constant]
    hits += _scaled_hits(rd, scaled, growth, abs_mean)
    found = group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, hits, growth,
                            f"grow (std above {growth:g}x its first logged value or |mean| above {abs_mean:g})",
                            ADVICE, STEPS_NEEDED)
    for f in found:
        small = [name for name in f.layers if name in scaled]
        if small:
            f.message += (f"; {labelled('layer', small)} started scaled down among peers at "
                          f"{init_scale.TRANSFORMER_STD:g}: their std is measured from {init_scale.TRANSFORMER_STD:g}")
        _say_where_level(rd, f)
    return found


# Grown weights that stopped growing: from some logged step on, the grown statistic stays within this
# fraction of its last value, for at least this many logged steps. "Grow from step 1 to step 2990" then
# reads as what it may be: an early growth, level since.
LEVEL = 0.1
LEVEL_STEPS = 5


def level_since(steps: np.ndarray, values: np.ndarray) -> Optional[int]:
    """The first logged step from which every finite value is within `LEVEL` of the last one, when that
    holds for `LEVEL_STEPS` logged steps or more; None where the values still move (or are too few)."""
    ok = np.isfinite(values)
    values, steps = values[ok], steps[ok]
    if len(values) < LEVEL_STEPS or not values[-1] > 0:
        return None
    moved = np.flatnonzero(np.abs(values / values[-1] - 1) > LEVEL)
    since = int(moved[-1]) + 1 if len(moved) else 0
    return int(steps[since]) if len(values) - since >= LEVEL_STEPS else None


def _say_where_level(rd: RunData, f: Finding) -> None:
    """Adds to `f` which of its layers have been level, and since when (evidence `level_since` per layer)."""
    since = {}
    # One lookup table, not a scan of the run's layers per grown layer (`RunData.layer`).
    layers: Dict[str, object] = {}
    for layer in rd.layers:
        if tags_lib.WEIGHT in layer.roles:
            layers.setdefault(layer.name, layer)  # the first of a name, as `RunData.layer` finds it
    for name in f.layers:
        layer = layers[name]
        table = metrics.judged(layer.roles[tags_lib.WEIGHT].table)
        grown = np.abs(table.get("mean")) if f.evidence["layers"][name].get("metric") == "|mean|" else table.get("std")
        step = level_since(table.steps, grown)
        if step is not None and step >= f.spans[name][0]:
            since[name] = step
            f.evidence["layers"][name]["level_since"] = step
    if not since:
        return
    first, last = min(since.values()), max(since.values())
    when = f"step {first}" if first == last else f"steps {first}-{last}"
    who = "it" if len(f.layers) == 1 else "they" if len(since) == len(f.layers) else f"{len(since)} of them"
    f.message += f"; {who} stayed within {LEVEL:.0%} of {'its' if who == 'it' else 'their'} last value since {when}"


def started_constant(rd: RunData) -> set:
    """The weights whose first finite std is 0: constant where first logged, as biases and norm scales start."""
    return {layer.name for layer, table in rd.role_rows(tags_lib.WEIGHT, PARAM_SHAPE_KINDS)
            if np.isfinite(table.get("std")).any() and np.isnan(metrics.first_stds(table.get("std")))}


def _first_std(table) -> float:
    std = table.get("std")
    ok = np.isfinite(std) & (std > 0)
    return float(std[np.argmax(ok)]) if ok.any() else np.nan


def reference_stds(rd: RunData) -> Dict[str, float]:
    """Kernel -> the std its growth is measured from, for kernels starting at GPT-2's scaled-down
    residual std among peers starting at 0.02 (see the module's docstring)."""
    blocks = init_scale.depth(rd)
    if not blocks:
        return {}
    scaled_std = init_scale.TRANSFORMER_STD / np.sqrt(2.0 * blocks)
    first = {layer.name: _first_std(table) for layer, table in rd.role_rows(tags_lib.WEIGHT, (tags_lib.KIND_KERNEL,))}
    near = lambda s, ref: bool(np.isfinite(s) and abs(np.log(s / ref)) <= np.log(init_scale.MATCH))  # noqa: E731
    scaled = [name for name, s in first.items() if near(s, scaled_std)]
    peers = [s for name, s in first.items() if name not in scaled and np.isfinite(s)]
    if not scaled or not peers or not near(float(np.median(peers)), init_scale.TRANSFORMER_STD):
        return {}
    return {name: init_scale.TRANSFORMER_STD for name in scaled}


def _scaled_hits(rd: RunData, scaled: Dict[str, float], growth: float, abs_mean: float) -> List[Hit]:
    """The growth rule on the kernels of `scaled`, their std measured from the std given."""
    hits = []
    for layer, table in rd.role_rows(tags_lib.WEIGHT, PARAM_SHAPE_KINDS):
        if layer.name not in scaled:
            continue
        reference = scaled[layer.name]
        rel, mean = table.get("std") / reference, np.abs(table.get("mean"))
        fired = (np.nan_to_num(rel, nan=-np.inf) > growth) | (np.nan_to_num(mean, nan=-np.inf) > abs_mean)
        spans = series_lib.sustained(fired, STEPS_NEEDED)
        if not spans:
            continue
        inside = np.zeros(len(fired), dtype=bool)
        for a, b in spans:
            inside[a:b + 1] = True
        a, b = spans[0][0], spans[-1][1]
        by_std = bool(np.nan_to_num(rel[a], nan=-np.inf) > growth)
        values = np.where(inside, rel if by_std else mean, -np.inf)
        j = int(np.argmax(values))
        steps = table.steps
        hits.append(Hit(layer.name, int(steps[a]), int(steps[b]), float(values[j]), int(steps[j]),
                        {"metric": "std / reference std" if by_std else "|mean|", "reference_std": reference,
                         "first_std": _first_std(table),
                         "why": "initialised scaled down (GPT-2's residual projections): growth is measured "
                                "from the std its peers start at"},
                        steps[inside], threshold=growth if by_std else abs_mean))
    return hits
