"""A one-off outlier in a layer's norm series or the loss: a robust z-score
against a rolling median (seed 004).
"""

from __future__ import annotations

from typing import List, Mapping

from ...reading.runs import RunData
from ..finding import INFO, Finding
from ..spans import group
from ..spikes import scan

KIND = "spike"
ORDER = 90
SEVERITY = INFO
LABEL = "Spike"
METRIC = "l2"
NEEDS = ()
ADVICE = "A single batch produced an outlier: check that batch's data; clipping bounds its effect."
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    z = limits["spike_z"]
    out = []
    for (step, role), hits in sorted(scan(rd, limits).single.items(), key=lambda kv: kv[0][0]):
        plural = "s" if len(hits) == 1 and role is None else ""
        out.append(group(rd, KIND, SEVERITY, role, hits, z,
                         f"spike{plural} (robust z-score above {z:g} against the rolling median)", ADVICE))
    return out
