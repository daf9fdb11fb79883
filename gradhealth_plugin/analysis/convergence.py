"""Whether the logged loss had converged by a step: a loss near zero makes small gradients and small
updates the expected result, not a fault.

A loss scalar has converged at a step where its latest finite value at or before that step is at most
`converged_loss` and at least `converged_loss_drop` times below its first finite (positive) value.
Without a loss logged nothing is ever converged, and the findings stand as they are.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ..reading import tags as tags_lib
from ..reading.runs import RunData
from .finding import INFO, Finding


def converged(rd: RunData, onset: int, limits: Mapping[str, float]) -> Optional[dict]:
    """The first loss scalar converged at `onset`, with its values and steps; None if no loss shows that."""
    drop, tiny = limits["converged_loss_drop"], limits["converged_loss"]
    for tag in rd.scalar_series:
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS:
            continue
        steps, values = rd.scalar_steps(tag), np.asarray(rd.scalar_series[tag][1], dtype=np.float64)
        finite = np.flatnonzero(np.isfinite(values) & (steps <= onset))
        if len(finite) < 2:
            continue
        first, at = values[finite[0]], values[finite[-1]]
        if first > 0 and abs(at) <= tiny and abs(at) * drop <= first:
            return {"tag": tag, "value": float(at), "step": int(steps[finite[-1]]), "first_value": float(first),
                    "first_step": int(steps[finite[0]]), "drop": drop, "threshold": tiny}
    return None


def as_note_if_converged(rd: RunData, f: Finding, limits: Mapping[str, float], what: str) -> None:
    """Makes `f` a note, saying so, where the loss had converged at its onset; `what` names what the
    finding saw ('gradients this small')."""
    c = converged(rd, f.first_step, limits)
    if c is None:
        return
    f.severity = INFO
    f.evidence["converged_loss"] = c
    f.message += (f"; the loss has converged ({c['tag']}: to {c['value']:.3g} at step {c['step']}, from "
                  f"{c['first_value']:.3g} at step {c['first_step']}): {what} are what a loss this close to "
                  "zero gives, not a fault")
