"""Ranks of one data-parallel training whose gradients differ at the same step.

After all-reduce every rank holds the same gradient, so a layer's gradient norm
agrees across ranks to rounding. This kind is judged across the runs of one
training (`analysis.ranks.find`, called by `serving.analyzer` once per data
version of the training's runs), not from one run: `detect` finds nothing.
"""

from __future__ import annotations

from typing import List, Mapping

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from ..finding import WARN, Finding

KIND = "rank_divergence"
ORDER = 140
SEVERITY = WARN
LABEL = "Ranks disagree"
METRIC = "l2"
NEEDS = (tags_lib.GRADIENT,)
ADVICE = ("In data-parallel training every rank holds the same gradient after all-reduce: check that these "
          "layers' gradients are reduced (a parameter left out of DDP, or skipped as unused with "
          "find_unused_parameters), that the all-reduce is not broken or skipped on some steps, that "
          "BatchNorm is synchronised where it must be (SyncBatchNorm), and that the data sharding gives "
          "every rank the same number of steps (a rank with an extra batch logs other steps' gradients).")
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    return []  # one run alone cannot show it; see the module's docstring
