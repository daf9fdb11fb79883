"""NaN or Inf in a watched tensor or a run-level scalar (seeds 002, 004)."""

from __future__ import annotations

from typing import List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import CRITICAL, Finding
from .. import series as series_lib
from ..spans import Hit, group, gt, kept_before, role_tables, stack

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
    out = [group(rd, KIND, SEVERITY, role, _tensor_hits(rd, role), 0, "contain NaN or Inf values", ADVICE)
           for role in tags_lib.ROLES]
    f = group(rd, KIND, SEVERITY, None, _scalar_hits(rd), 0, "is NaN or Inf", ADVICE)
    if f is not None:
        f.message = f"scalar {f.message}"
    out.append(f)
    return [f for f in out if f is not None]


def _tensor_hits(rd, role: str) -> List[Hit]:
    layers = list(role_tables(rd, role))
    found = {}
    # Layers of equal length are checked together, a row each.
    for rows in series_lib.same_length([len(table.steps) for _, table in layers]):
        counts = stack([layers[i][1] for i in rows], lambda t: t.get("nonfinite"))
        masks = gt(counts, 0)
        for r in np.nonzero(masks.any(axis=1))[0].tolist():
            layer, table = layers[rows[r]]
            nonfinite, idx = counts[r], np.nonzero(masks[r])[0]
            found[int(rows[r])] = Hit(layer.name, int(table.steps[idx[0]]), int(table.steps[idx[-1]]),
                                      float(nonfinite[idx[0]]), int(table.steps[idx[0]]),
                                      {"steps_with_nonfinite": len(idx)}, table.steps[idx],
                                      after=kept_before(table.steps, int(idx[0])))
    return [found[i] for i in sorted(found)]


def _scalar_hits(rd) -> List[Hit]:
    hits = []
    for tag, (steps, values) in rd.scalar_series.items():
        bad = ~np.isfinite(values)
        if bad.any():
            idx = np.nonzero(bad)[0]
            hits.append(Hit(tag, int(steps[idx[0]]), int(steps[idx[-1]]), float(values[idx[0]]), int(steps[idx[0]]),
                            {"source": "scalar"}))
    return hits
