"""Weights that grow: std far above its first logged value, or |mean| above a limit (seed 004)."""

from __future__ import annotations

from typing import List, Mapping

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import WARN, Finding
from ..limits import Line
from ..spans import PARAM_SHAPE_KINDS, Test, group_sustained, span_hits

KIND = "weight_growth"
ORDER = 50
SEVERITY = WARN
LABEL = "Weight growth"
METRIC = "std_rel_first"
NEEDS = (tags_lib.WEIGHT,)
ADVICE = "Add weight decay / L2 regularisation, lower the learning rate, or add normalisation layers."
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
    hits = span_hits(rd, tags_lib.WEIGHT, tests, 3, PARAM_SHAPE_KINDS)
    return group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, hits, growth,
                           f"grow (std above {growth:g}x its first logged value or |mean| above {abs_mean:g})",
                           ADVICE, 3)
