"""Two separated modes in a weight histogram (seed 004)."""

from __future__ import annotations

from typing import List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import metrics
from .. import series as series_lib
from ..finding import INFO, Finding
from ..spans import PARAM_SHAPE_KINDS, Hit, group_sustained, gt, lt, role_tables

KIND = "bimodal_weights"
ORDER = 70
SEVERITY = INFO
LABEL = "Bimodal weights"
METRIC = "std"
NEEDS = (tags_lib.WEIGHT,)
ADVICE = ("Often harmless (pruning, quantisation-aware training), otherwise a sign of too high a learning "
          "rate pushing weights to two basins; compare with a lower learning rate.")
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    dip = limits["bimodal_dip"]
    hits = []
    for layer, table in role_tables(rd, tags_lib.WEIGHT, PARAM_SHAPE_KINDS):
        ratio = table.get("bimodal_dip")
        h = layer.roles[tags_lib.WEIGHT].histograms
        if np.all(np.isnan(ratio)) and h is not None and len(h.steps) == len(table.steps):
            ratio = metrics.bimodal_dip(h)
        # Both modes must hold real mass: small tensors give ragged histograms.
        enough = gt(table.get("count"), 999)
        spans = series_lib.sustained(enough & lt(ratio, dip), 3)
        if spans:
            a, b = spans[0][0], spans[-1][1]
            inside = np.concatenate([table.steps[s:e + 1] for s, e in spans])
            hits.append(Hit(layer.name, int(table.steps[a]), int(table.steps[b]), float(ratio[a]), int(table.steps[a]),
                            points=inside))
    return group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, hits, dip, "have two separated modes", ADVICE, 3)
