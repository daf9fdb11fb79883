"""Turns a run's metric series into findings a person can act on, and decides
each cell's status from them.

A finding is one problem in one place over a span of steps. The same problem
in several layers is one finding listing them all. The kinds and their default
triggers are the contract in DESIGN section 4; each kind is a module in
`detectors`, every threshold comes from `limits.DEFAULTS`.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence

import numpy as np

from ..reading.runs import RunData
from . import combine, detectors, health
from .finding import CRITICAL, INFO, SEVERITY_RANK, WARN, Finding  # noqa: F401 - the findings' vocabulary
from .metrics import MetricTable

KINDS = detectors.KINDS
ADVICE = {d.KIND: d.ADVICE for d in detectors.DETECTORS}


def find(rd: RunData, limits: Mapping[str, float], only: Optional[Sequence] = None) -> List[Finding]:
    """Every finding for one run, most severe first.

    `only`: run just these detector modules (for a caller that acts on some kinds
    alone); their findings are those a full run gives, but for a cause named only
    from kinds left out.
    """
    found = [f for d in (detectors.DETECTORS if only is None else only) for f in d.detect(rd, limits)]
    found = combine.drop_explained_spikes(found)
    found = combine.fold_after_nonfinite(found)
    combine.name_causes(found)
    found.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.first_step, KINDS.index(f.kind)))
    return found


def cell_health(table: MetricTable, role: str, kind: str, limits: Mapping[str, float]) -> health.CellHealth:
    """One tensor's cells scored by every kind's cell rules alone, before the findings decide the status."""
    return health.rule_health(table, role, kind, limits, detectors.CELL_RULES)


def decide_cells(rd: RunData, findings: List[Finding], limits: Mapping[str, float]) -> None:
    """Sets each cell's health, its status decided from the findings, so the heatmap and the findings never disagree.

    Cell rules alone fire on single steps; findings add the time rules (5
    consecutive steps, robust baselines). A cell is warn or critical exactly
    when a warn or critical finding covers its layer, role and step; the score
    keeps the cell rules' continuous value inside that status' band.
    """
    for layer in rd.layers:
        for role, rdata in layer.roles.items():
            scored = cell_health(rdata.table, role, layer.kind, limits)
            status, rule = _status(layer.name, role, rdata.table.steps, scored.status != health.NO_DATA, findings)
            rdata.health = health.CellHealth(score=health.in_band(scored.score, status), status=status, rule=rule)


def covers(f: Finding, layer: str, steps: np.ndarray) -> np.ndarray:
    """Which of `steps` (a row's or a scalar's) the finding covers for `layer`: its span, narrowed to
    its exact steps for point-wise findings. The heatmap's statuses and the tab's outlines both read it."""
    if layer not in f.spans:
        return np.zeros(len(steps), dtype=bool)
    first, last = f.spans[layer]
    covered = (steps >= first) & (steps <= last)
    if layer in f.points:
        covered &= np.isin(steps, f.points[layer])
    return covered


def _status(layer: str, role: str, steps: np.ndarray, present: np.ndarray, findings: List[Finding]) -> tuple:
    """(status, rule) per step of one row: the worst warn or critical finding covering it."""
    status = np.where(present, health.OK, health.NO_DATA).astype(np.uint8)
    rule = np.where(present, "", None).astype(object)
    for f in findings:
        if f.severity == INFO or layer not in f.spans or (f.role is not None and f.role != role):
            continue
        sev = health.CRITICAL if f.severity == CRITICAL else health.WARN
        covered = present & covers(f, layer, steps) & (status < sev)
        status = np.where(covered, sev, status).astype(np.uint8)
        rule = np.where(covered, f.kind, rule)
    return status, rule
