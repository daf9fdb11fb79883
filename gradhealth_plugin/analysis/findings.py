"""Turns a run's metric series into findings a person can act on, and decides
each cell's status from them.

A finding is one problem in one place over a span of steps. The same problem
in several layers is one finding listing them all. The kinds and their default
triggers are the contract in DESIGN section 4; each kind is a module in
`detectors`, every threshold comes from `limits.DEFAULTS`.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..reading.runs import RoleData, RunData
from . import combine, detectors, health, metrics
from .finding import CRITICAL, INFO, SEVERITY_RANK, WARN, Finding  # noqa: F401 - the findings' vocabulary

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
    # A cause is named only on findings that began at or after the event it names: the jumps first.
    jumps = combine.learning_rate_jumps(rd, found, limits["lr_jump"], int(limits["spike_window"]))
    combine.name_causes(found, since=combine.first_jump(jumps))
    combine.name_learning_rate_jumps(found, jumps, limits["lr_jump"])
    combine.link_growth_to_fast_updates(found)
    combine.link_vanishing_to_explosion(found)
    combine.advise_causes(found)
    return ordered(found)


def ordered(found: Sequence[Finding]) -> List[Finding]:
    """Most severe first, then earliest, then in kind order: the order every answer lists findings in."""
    return sorted(found, key=lambda f: (-SEVERITY_RANK[f.severity], f.first_step, KINDS.index(f.kind)))


def cell_health(table: metrics.MetricTable, role: str, kind: str, limits: Mapping[str, float]) -> health.CellHealth:
    """One tensor's cells scored by every kind's cell rules alone, before the findings decide the status."""
    return health.rule_health(table, role, kind, limits, detectors.CELL_RULES)


def decide_cells(rd: RunData, findings: List[Finding], limits: Mapping[str, float]) -> None:
    """Sets each cell's health, its status decided from the findings, so the heatmap and the findings never disagree.

    Cell rules alone fire on single steps; findings add the time rules (5
    consecutive steps, robust baselines). A cell is warn or critical exactly
    when a warn or critical finding covers its layer, role and step; the score
    keeps the cell rules' continuous value inside that status' band.

    Rows of one role, tensor kind and length are decided together, stacked a
    row each (`metrics.stack_tables`): the cost of a run of many layers is
    then in its cells, not in numpy calls per layer.
    """
    groups: Dict[tuple, List[Tuple[str, RoleData]]] = {}
    for layer in rd.layers:
        for role, rdata in layer.roles.items():
            groups.setdefault((role, layer.kind, len(rdata.table.steps)), []).append((layer.name, rdata))
    judged = [f for f in findings if f.severity != INFO]
    for (role, kind, n), members in groups.items():
        chunk = max(1, _CELLS_AT_ONCE // max(1, n))
        for start in range(0, len(members), chunk):
            rows = members[start:start + chunk]
            table = metrics.stack_tables([rdata.table for _, rdata in rows])
            scored = health.rule_health(table, role, kind, limits, detectors.CELL_RULES)
            status, rule = _status([name for name, _ in rows], role, table.steps, scored.status != health.NO_DATA,
                                   judged)
            # An ok cell where a cell rule fired (too briefly for a finding, or only a note's) names that
            # rule: it set the cell's score, held at the top of ok, and the tab says why it is no warning;
            # likewise where only a bound crossed a rule's line unproven (`CellHealth.unproven`).
            rule = np.where((status == health.OK) & (scored.fired > 0), scored.rule_codes, rule)
            score = health.in_band(scored.score, status)
            estimated = health.estimated_steps(table)
            for i, (_, rdata) in enumerate(rows):
                rdata.health = health.CellHealth(score=score[i], status=status[i], rule_codes=rule[i],
                                                 fired=scored.fired[i],
                                                 unproven=health.compact_flags(scored.unproven[i]),
                                                 estimated=health.compact_flags(estimated[i]))


# Cells decided in one stacked pass: about 20 metric arrays of this many float64 each.
_CELLS_AT_ONCE = 1 << 17


def covers(f: Finding, layer: str, steps: np.ndarray, role: Optional[str] = None) -> np.ndarray:
    """Which of `steps` (a row's or a scalar's) the finding covers for `layer`: its span, narrowed to
    its exact steps for point-wise findings, and in `role` to that row's own steps where the finding
    gathers several roles (`Finding.points_of`). The heatmap's statuses and the tab's outlines both read it."""
    if layer not in f.spans:
        return np.zeros(len(steps), dtype=bool)
    first, last = f.spans[layer]
    covered = (steps >= first) & (steps <= last)
    points = f.points_of(layer, role) if role is not None else f.points.get(layer)
    if points is not None:
        covered &= np.isin(steps, points)
    return covered


def _status(layers: List[str], role: str, steps: np.ndarray, present: np.ndarray, findings: List[Finding]) -> tuple:
    """(status, rule code) per step of each row (one per layer): the worst warn or critical finding covering it."""
    status = np.where(present, health.OK, health.NO_DATA).astype(np.uint8)
    rule = np.where(present, health.RULE_OK, health.RULE_NO_DATA).astype(np.uint8)
    row_of = {layer: i for i, layer in enumerate(layers)}
    for f in findings:
        if f.role is not None and f.role != role:
            continue
        sev = health.CRITICAL if f.severity == CRITICAL else health.WARN
        for layer in f.spans.keys() & row_of.keys():
            i = row_of[layer]
            covered = present[i] & covers(f, layer, steps[i], role) & (status[i] < sev)
            status[i] = np.where(covered, sev, status[i])
            rule[i] = np.where(covered, health.rule_code(f.kind), rule[i])
    return status, rule


def held(rdata: RoleData, index: int, found: Sequence[Finding], layer: str,
         role: str, limits: Mapping[str, float]) -> Optional[dict]:
    """Why an ok cell where a cell rule fired is no warning: for how many logged steps in a row that
    kind's rules held around it, how many its finding needs, and the finding of that kind covering it if
    any (of the run's findings `found`: at an ok cell only a note can). None for any other cell."""
    h = rdata.health
    if h.fired is None or int(h.status[index]) != health.OK or not h.fired[index]:
        return None
    if h.unproven is not None and h.unproven[index]:
        return _not_proven(rdata, index, detectors.CELL_RULES[int(h.fired[index]) - 1], limits)
    kind = detectors.CELL_RULES[int(h.fired[index]) - 1].name
    # Any of the kind's rules holding continues the run, as a finding's test does (either of vanishing's two).
    codes = [i + 1 for i, r in enumerate(detectors.CELL_RULES) if r.name == kind]
    same = np.isin(h.fired, codes)
    before, after = np.flatnonzero(~same[:index]), np.flatnonzero(~same[index:])
    first = int(before[-1]) + 1 if len(before) else 0
    end = index + int(after[0]) if len(after) else len(same)
    in_a_row, needed = end - first, detectors.steps_needed(kind, limits)
    cover = covering(found, kind, layer, role, rdata.table.steps[index:index + 1])
    label = detectors.BY_KIND[kind].LABEL.lower()
    # "one of": the count is the whole stretch around this step, not the steps up to it.
    text = f"{label} at this step" + (" only" if in_a_row == 1 else f", one of {in_a_row} logged steps in a row")
    finding = None
    if cover is not None:
        a, b = cover.spans[layer]
        finding = {"kind": cover.kind, "severity": cover.severity, "first_step": a, "last_step": b}
        what = "a note (info)" if cover.severity == INFO else f"a {cover.severity} finding"
        span = f"at step {a}" if a == b else f"from step {a} to step {b}"
        text += f"; covered by {what} of {label} {span}" + (", not a warning" if cover.severity == INFO else "")
        text += ": see the layer's findings"
    elif in_a_row < needed:
        text += f"; a finding needs {needed} logged steps in a row"
    else:
        text += "; yet no finding: the rest of the finding's rule did not hold here"
    return {"kind": kind, "steps_in_a_row": in_a_row, "steps_needed": needed,
            "note": cover.kind if cover is not None and cover.severity == INFO else None,
            "finding": finding, "not_judged": False, "text": text}


def covering(found: Sequence[Finding], kind: str, layer: str, role: str, steps: np.ndarray) -> Optional[Finding]:
    """The most severe of `found` of `kind` covering `layer`'s row in `role` at `steps` (one step), or None."""
    return next((f for f in ordered(found) if f.kind == kind and (f.role is None or f.role == role)
                 and covers(f, layer, steps, role)[0]), None)


def _not_proven(rdata: RoleData, index: int, rule: health.CellRule, limits: Mapping[str, float]) -> dict:
    """`held` at a cell where only a bound crossed `rule`'s line, on the side that cannot prove it."""
    label = detectors.BY_KIND[rule.name].LABEL.lower()
    value = float(rdata.table.get(rule.metric)[index])
    value = abs(value) if rule.use_abs else value
    bound, side = ("an upper bound", "at most") if rule.above else ("a lower bound", "at least")
    limit = float(limits[rule.threshold])
    text = (f"{label} not judged at this step: the {rule.metric.replace('_', ' ')} read is {bound} (the true value "
            f"is {side} {value:.4g}), which cannot prove it {'above' if rule.above else 'below'} {limit:g}")
    return {"kind": rule.name, "steps_in_a_row": 0, "steps_needed": detectors.steps_needed(rule.name, limits),
            "note": None, "finding": None, "not_judged": True, "text": text}


def rule_read(rdata: RoleData, index: int, role: str, kind: str, limits: Mapping[str, float]) -> Optional[dict]:
    """What the cell rule that fired at one cell read: of the cell rules of the kind naming the cell
    (`CellHealth.rule_at`), the one holding there (the first, where two of a kind hold), with its statistic,
    the value and quality it read, and its threshold. A kind's two rules may read two statistics (vanishing
    gradients: the fraction near zero, or mean |x|) or one against two thresholds (the update ratio: too fast,
    or barely moving). None where the cell names no kind, or none of its kind's cell rules holds there (a
    finding's time rule decided it, as a spike's). `role` and `kind`: the row's role and tensor kind."""
    name = rdata.health.rule_at(index)
    rules = [r for r in detectors.CELL_RULES if name and r.name == name]
    if not rules:
        return None
    # The kind's rules alone, scored as the cells were: the fired code names the rule holding at the cell.
    fired = int(health.rule_health(rdata.table, role, kind, limits, rules).fired[index])
    if not fired:
        return None
    r = rules[fired - 1]
    value = abs(float(rdata.table.get(r.metric)[index])) if r.use_abs else float(rdata.table.get(r.metric)[index])
    # An infinite value (a std grown from a first std of 0) is none a JSON answer holds: null, as elsewhere.
    return {"kind": name, "metric": r.metric, "abs": r.use_abs, "value": value if np.isfinite(value) else None,
            "quality": metrics.QUALITY_NAMES[int(metrics.shown_quality(rdata.table, r.metric)[index])],
            "threshold": r.threshold or None, "limit": float(limits[r.threshold]) if r.threshold else None,
            "side": "above" if r.above else "below"}
