"""Activations that are mostly zero (seeds 003, 004). Between 004's 'normal' line
and its danger line a healthy ReLU layer often sits: that is info, not a warning.
"""

from __future__ import annotations

from typing import List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health, metrics
from ..finding import INFO, WARN, Finding
from ..limits import Line
from ..spans import Test, group_sustained, role_tables, span_hits

KIND = "dead_units"
ORDER = 40
SEVERITY = WARN
LABEL = "Dead units"
METRIC = "zero_fraction"
NEEDS = (tags_lib.ACTIVATION,)
ADVICE = ("Use LeakyReLU/ELU, He init, a lower learning rate, and check the bias init; BatchNorm before "
          "the activation keeps units alive.")
_OUTPUTS = (tags_lib.KIND_OUTPUT,)
STEPS_NEEDED = 3  # logged steps in a row: one or two outliers are no trend
CELL_RULES = (
    health.CellRule(KIND, (tags_lib.ACTIVATION,), "zero_fraction", True, "dead_zero_fraction", health.WARN, False,
                    kinds=_OUTPUTS),
)
THRESHOLDS = (
    Line(tags_lib.ACTIVATION, "zero_fraction", "dead_zero_fraction", "above"),
    Line(tags_lib.ACTIVATION, "zero_fraction", "dead_info_zero_fraction", "above"),
)


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    danger, normal = limits["dead_zero_fraction"], limits["dead_info_zero_fraction"]
    hits = span_hits(rd, tags_lib.ACTIVATION, [Test("zero_fraction", danger)], STEPS_NEEDED, _OUTPUTS)
    # What the row holds at the step shown: a written zero-fraction scalar is exact, a bucket
    # straddling zero gives an upper bound only.
    tables = {layer.name: table for layer, table in role_tables(rd, tags_lib.ACTIVATION, _OUTPUTS)}
    for h in hits:
        table = tables[h.layer]
        at = np.flatnonzero(table.steps == h.step)
        exact = len(at) and table.quality_of("zero_fraction")[at[0]] == metrics.EXACT
        h.detail["quality"] = "exact" if exact else "upper bound from buckets"
    warn = group_sustained(rd, KIND, WARN, tags_lib.ACTIVATION, hits, danger,
                           f"are mostly dead (zero fraction above {danger:.0%})", ADVICE, STEPS_NEEDED)
    warned = {layer for f in warn for layer in f.layers}
    info_hits = [h for h in span_hits(rd, tags_lib.ACTIVATION, [Test("zero_fraction", normal)], STEPS_NEEDED,
                                      _OUTPUTS) if h.layer not in warned]
    # The line under which it is normal is the warning's own (`dead_zero_fraction`), as the advice says.
    info = group_sustained(rd, KIND, INFO, tags_lib.ACTIVATION, info_hits, normal,
                           f"have a zero fraction above {normal:.0%} (normal for ReLU while under {danger:.0%})",
                           ADVICE, STEPS_NEEDED)
    for f in info:
        f.no_fault = (f"while the zero fraction stays under {danger:.0%}",
                      "if it climbs past that or training stalls")
    return warn + info
