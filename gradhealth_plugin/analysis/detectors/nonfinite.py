"""NaN or Inf in a watched tensor or a run-level scalar (seeds 002, 004)."""

from __future__ import annotations

from typing import List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import CRITICAL, Finding
from ..spans import Hit, gather, gt, kept_before, role_tables, when_text

KIND = "nonfinite"
ORDER = 10
SEVERITY = CRITICAL
LABEL = "NaN / Inf values"
METRIC = "nonfinite"
NEEDS = ()
ADVICE = ("Lower the learning rate, clip gradients (tf.clip_by_global_norm / torch.nn.utils.clip_grad_norm_), "
          "and look for log(0), division by zero or overflow in the loss; enable anomaly detection to find the op.")
CELL_RULES = (health.CellRule(KIND, tags_lib.ROLES, "nonfinite", True, "", health.CRITICAL, False),)
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    """One finding per run: every layer and scalar with NaN or Inf, each row covered at its own steps."""
    parts = [(role, _tensor_hits(rd, role)) for role in tags_lib.ROLES] + [(None, _scalar_hits(rd))]
    f = gather(rd, KIND, SEVERITY, parts, 0, "contain NaN or Inf values", ADVICE)
    if f is not None and f.layers == [h.layer for h in parts[-1][1]] and len(f.layers) == 1:
        f.message = f"scalar {f.layers[0]} is NaN or Inf {when_text(f)}"
    return [f] if f is not None else []


def _tensor_hits(rd, role: str) -> List[Hit]:
    hits = []
    for layer, table in role_tables(rd, role):
        nonfinite = table.get("nonfinite")
        mask = gt(nonfinite, 0)
        if mask.any():
            idx = np.nonzero(mask)[0]
            hits.append(Hit(layer.name, int(table.steps[idx[0]]), int(table.steps[idx[-1]]),
                            float(nonfinite[idx[0]]), int(table.steps[idx[0]]), {"steps_with_nonfinite": len(idx)},
                            table.steps[idx], after=kept_before(table.steps, int(idx[0]))))
    return hits


def _scalar_hits(rd) -> List[Hit]:
    hits = []
    for tag, (steps, values) in rd.scalar_series.items():
        bad = ~np.isfinite(values)
        if bad.any():
            idx = np.nonzero(bad)[0]
            hits.append(Hit(tag, int(steps[idx[0]]), int(steps[idx[-1]]), float(values[idx[0]]), int(steps[idx[0]]),
                            {"source": "scalar"}))
    return hits

