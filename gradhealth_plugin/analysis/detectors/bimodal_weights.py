"""Two separated modes in a weight histogram (seed 004)."""

from __future__ import annotations

from typing import List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import metrics
from .. import series as series_lib
from ..finding import INFO, Finding
from ..spans import PARAM_SHAPE_KINDS, Hit, group_sustained, gt, lt, role_tables, stack

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
    layers = list(role_tables(rd, tags_lib.WEIGHT, PARAM_SHAPE_KINDS))
    found = {}
    # Layers of equal length are checked together, a row each.
    for rows in series_lib.same_length([len(table.steps) for _, table in layers]):
        ratios = stack([layers[i][0] for i in rows], _dip)
        # Both modes must hold real mass: small tensors give ragged histograms.
        enough = gt(stack([layers[i][1] for i in rows], lambda t: t.get("count")), 999)
        masks = enough & lt(ratios, dip)
        for r in np.nonzero(masks.any(axis=1))[0].tolist():
            layer, table = layers[rows[r]]
            spans = series_lib.sustained(masks[r], 3)
            if spans:
                a, b = spans[0][0], spans[-1][1]
                inside = np.concatenate([table.steps[s:e + 1] for s, e in spans])
                found[int(rows[r])] = Hit(layer.name, int(table.steps[a]), int(table.steps[b]), float(ratios[r][a]),
                                          int(table.steps[a]), points=inside)
    hits = [found[i] for i in sorted(found)]
    return group_sustained(rd, KIND, SEVERITY, tags_lib.WEIGHT, hits, dip, "have two separated modes", ADVICE, 3)


def _dip(layer) -> np.ndarray:
    """The weight's bimodality dip per step, from its buckets where the table has none."""
    table = layer.roles[tags_lib.WEIGHT].table
    ratio = table.get("bimodal_dip")
    h = layer.roles[tags_lib.WEIGHT].histograms
    if np.all(np.isnan(ratio)) and h is not None and len(h.steps) == len(table.steps):
        # From the buckets, judged as every statistic is (`metrics.judged`): not where NaN or Inf was.
        ratio = np.where(metrics.nonfinite_steps(table), np.nan, metrics.bimodal_dip(h))
    return ratio
