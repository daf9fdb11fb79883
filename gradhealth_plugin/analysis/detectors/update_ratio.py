"""Update-to-weight ratio far from about 1e-3 (CS231n): too large is unstable, too small frozen."""

from __future__ import annotations

from typing import List, Mapping

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import WARN, Finding
from ..limits import Line
from ..spans import PARAM_SHAPE_KINDS, Test, group_sustained, span_hits

KIND = "update_ratio"
ORDER = 80
SEVERITY = WARN
LABEL = "Update-to-weight ratio"
METRIC = "update_ratio"
NEEDS = (tags_lib.WEIGHT, tags_lib.UPDATE)
ADVICE = ("Aim for an update-to-weight ratio near 1e-3: lower the learning rate if it is much larger, raise "
          "it (or check that the layer is not frozen) if it is much smaller.")
# Biases and normalisation parameters often start at zero or one: their ratio means little
# (a bias starting at zero has ratios of inf, 1, 1/2, ... over its first steps).
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


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    high, low = limits["update_ratio_high"], limits["update_ratio_low"]
    too_high = span_hits(rd, tags_lib.WEIGHT, [Test("update_ratio", high)], 3, PARAM_SHAPE_KINDS)
    too_low = span_hits(rd, tags_lib.WEIGHT, [Test("update_ratio", low, above=False)], 3, PARAM_SHAPE_KINDS)
    fast = group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, too_high, high,
                           f"update too fast (update/weight ratio above {high:g}; about 1e-3 is healthy)", ADVICE, 3)
    slow = group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, too_low, low,
                           f"barely move (update/weight ratio below {low:g}; about 1e-3 is healthy)", ADVICE, 3)
    for direction, found in (("too_high", fast), ("too_low", slow)):
        for f in found:  # a learning rate too high explains the one, never the other (`combine.name_causes`)
            f.evidence["direction"] = direction
    return fast + slow
