"""Weight distributions with a large |skewness| (seed 004)."""

from __future__ import annotations

from typing import List, Mapping

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import WARN, Finding
from ..limits import Line
from ..spans import PARAM_SHAPE_KINDS, Test, group_sustained, span_hits

KIND = "skewed_distribution"
ORDER = 60
SEVERITY = WARN
LABEL = "Skewed distribution"
METRIC = "skewness"
NEEDS = (tags_lib.WEIGHT,)
ADVICE = ("Check the initialisation and the learning rate; a strongly skewed weight distribution often "
          "means a few weights absorb most of the updates.")
STEPS_NEEDED = 3  # logged steps in a row: one or two outliers are no trend
CELL_RULES = (
    health.CellRule(KIND, (tags_lib.WEIGHT,), "skewness", True, "skewness", health.WARN, False,
                    kinds=PARAM_SHAPE_KINDS, use_abs=True),
)
THRESHOLDS = (Line(tags_lib.WEIGHT, "skewness", "skewness", "above", mirrored=True),)


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    limit = limits["skewness"]
    hits = span_hits(rd, tags_lib.WEIGHT, [Test("skewness", limit, use_abs=True)], STEPS_NEEDED, PARAM_SHAPE_KINDS)
    return group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, hits, limit,
                           f"are strongly skewed (|skewness| above {limit:g})", ADVICE, STEPS_NEEDED)
