"""The finding record every detector returns, and the severities it carries.

A finding is one problem in one place over a span of steps (DESIGN section 4).
It lives apart from `findings` (which runs the detectors) so that detectors can
build findings without importing the registry that imports them.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

import numpy as np

INFO = "info"
WARN = "warn"
CRITICAL = "critical"
# Also the order the vocabulary route lists them in.
SEVERITY_RANK = {INFO: 1, WARN: 2, CRITICAL: 3}


@dataclasses.dataclass
class Finding:
    run: str
    kind: str
    severity: str
    layers: List[str]
    first_step: int
    last_step: int
    evidence: Dict
    message: str
    advice: str
    role: Optional[str] = None
    # Steps per layer the finding covers, for the heatmap: layer -> (first, last).
    spans: Dict[str, tuple] = dataclasses.field(default_factory=dict)
    period: Optional[int] = None
    artefact: Optional[bool] = None
    cause: Optional[str] = None
    # For point-wise problems (non-finite values, explosions): the exact steps per layer.
    points: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        out = {
            "run": self.run, "kind": self.kind, "severity": self.severity, "layers": self.layers,
            "first_step": self.first_step, "last_step": self.last_step, "message": self.message,
            "advice": self.advice, "evidence": _jsonable(self.evidence), "role": self.role,
        }
        if self.kind == "periodic_spikes":
            out["period"] = self.period
            out["artefact"] = bool(self.artefact)
        if self.cause:
            out["cause"] = self.cause
        return out


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if np.isfinite(v) else None  # as every route sends NaN and infinities
    return obj
