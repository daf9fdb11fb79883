"""The finding record every detector returns, and the severities it carries.

A finding is one problem in one place over a span of steps (DESIGN section 4).
It lives apart from `findings` (which runs the detectors) so that detectors can
build findings without importing the registry that imports them.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

INFO = "info"
WARN = "warn"
CRITICAL = "critical"
# Also the order the vocabulary route lists them in.
SEVERITY_RANK = {INFO: 1, WARN: 2, CRITICAL: 3}


@dataclasses.dataclass
class Axis:
    """The step axis a finding about run-level scalars counts in (`Finding.axis`): what one of its steps
    is ("epoch", "iteration", or "step" where the scalars' names do not say), whether it is another axis
    than the layers' rows (Keras' `epoch_loss`: the finding's first and last step are then where its
    values were written on the rows' axis), and its first and last step on its own axis."""

    unit: str
    other: bool
    first_step: int
    last_step: int

    def _own(self) -> str:
        """What tells another axis whose unit no name tells from the layers' steps."""
        return " of its own axis" if self.other and self.unit == "step" else ""

    def per(self) -> str:
        """'per epoch'; 'per step of its own axis' for another axis whose unit no name tells."""
        return f"per {self.unit}{self._own()}"

    def at(self, step: int) -> str:
        """'epoch 3'; 'step 3 of its own axis' for another axis whose unit no name tells."""
        return f"{self.unit} {step}{self._own()}"

    def span(self, first: int, last: int) -> str:
        """'from epoch 0 to epoch 29', 'at epoch 3': steps of this axis, saying which."""
        if first == last:
            return f"at {self.unit} {first}{self._own()}"
        return f"from {self.unit} {first} to {self.unit} {last}{self._own()}"

    def to_json(self) -> dict:
        return {"unit": self.unit, "other": self.other, "first_step": int(self.first_step),
                "last_step": int(self.last_step)}


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
    # A note the data explain as no fault (a loss near zero, a ReLU's usual zeros): (what keeps it so,
    # what would make it one), e.g. ("while the loss keeps falling", "if it stops falling with gradients
    # this small"). Its advice then says there is nothing to fix (`combine.advise_causes`).
    no_fault: Optional[Tuple[str, str]] = None
    # For point-wise problems (non-finite values, explosions): the exact steps per layer.
    points: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    # For a finding gathered from several roles (role None): role -> layer -> the exact steps
    # of that layer in that role, so a row is covered only where its own role has the problem.
    role_points: Dict[str, Dict[str, np.ndarray]] = dataclasses.field(default_factory=dict)
    # For run-level scalars told in their own step axis (an epoch's loss): that axis and the finding's
    # steps on it. None: the finding counts the layers' steps, as `first_step` and `last_step` do.
    axis: Optional[Axis] = None

    def points_of(self, layer: str, role: str) -> Optional[np.ndarray]:
        """The exact steps this finding covers in one row (layer and role); None: its whole span."""
        if self.role_points:
            return self.role_points.get(role, {}).get(layer, np.zeros(0, dtype=np.int64))
        return self.points.get(layer)

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
        if self.axis is not None:
            out["axis"] = self.axis.to_json()
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
