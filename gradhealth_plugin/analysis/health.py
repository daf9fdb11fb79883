"""Status codes, score bands and the cell rules' score of every (layer, step) cell.

A cell rule looks at one step of one tensor; each detector declares its own
(`CELL_RULES`). The rules give the score in [0, 1], continuous so the heatmap
shows a layer drifting toward a threshold before it crosses it. The status is
decided once, from the findings (`findings.decide_cells`): the score then
keeps its continuous value inside the band its status owns (`BANDS`).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import List, Mapping, Optional, Sequence

import numpy as np

from . import metrics
from .metrics import MetricTable

NO_DATA = 0
OK = 1
WARN = 2
CRITICAL = 3
STATUS_NAMES = ("no_data", "ok", "warn", "critical")
# The score band each status owns: ok (0.6, 1], warn (0.25, 0.6], critical [0, 0.25].
BANDS = {OK: (0.6, 1.0), WARN: (0.25, 0.6), CRITICAL: (0.0, 0.25)}


@dataclasses.dataclass(frozen=True)
class CellRule:
    name: str  # the finding kind this rule belongs to
    roles: tuple
    metric: str
    above: bool  # fires when the value is above (True) or below (False) the threshold
    threshold: str  # name in limits.DEFAULTS
    status: int
    log: bool  # distance measured in decades (True) or linearly (False)
    kinds: Optional[tuple] = None  # tensor kinds the rule applies to; None: all
    use_abs: bool = False


# A cell's rule is held as a one-byte code into this table of names (None: no data, "": ok, then
# each finding kind as first met): a long run's 5,000,000 cells hold 5 MB of codes, not 40 MB of
# pointers to shared strings. Codes only grow; the kinds are a few dozen.
RULE_NO_DATA = 0
RULE_OK = 1
_RULE_NAMES: List[Optional[str]] = [None, ""]
_RULE_CODES = {name: code for code, name in enumerate(_RULE_NAMES)}
_RULE_LOCK = threading.Lock()


def rule_code(name: Optional[str]) -> int:
    """The code of a rule name (a finding kind), given one the first time it is asked for."""
    code = _RULE_CODES.get(name)
    if code is None:
        with _RULE_LOCK:
            code = _RULE_CODES.get(name)
            if code is None:
                if len(_RULE_NAMES) > 255:
                    raise ValueError(f"more than 256 cell rule names: {name!r}")
                _RULE_NAMES.append(name)
                code = _RULE_CODES[name] = len(_RULE_NAMES) - 1
    return code


def rule_names() -> np.ndarray:
    """Every rule name by its code, as an object array: `rule_names()[codes]` decodes codes."""
    return np.array(_RULE_NAMES, dtype=object)


@dataclasses.dataclass
class CellHealth:
    score: np.ndarray  # (N,) float, NaN where no data
    status: np.ndarray  # (N,) uint8 status codes
    rule_codes: np.ndarray  # (N,) uint8 `rule_code`s: the rule name, "" when ok, None when no data

    @property
    def rule(self) -> np.ndarray:
        """The rule names, decoded: (N,) object."""
        return rule_names()[np.asarray(self.rule_codes, dtype=np.intp)]

    def rule_at(self, index: int) -> Optional[str]:
        """The rule name of one cell."""
        return _RULE_NAMES[int(self.rule_codes[index])]
    # (N,) uint8: which cell rule fired at each step (1 + its index in the rules scored), 0 where none did,
    # whatever status the findings decide: an ok cell where a rule fired says so (`findings.held`).
    fired: Optional[np.ndarray] = None
    # (N,) bool: where the score rests on an estimate (some metric of the step read from histogram buckets
    # or bounded), so an answer says "estimated" rather than "exact". A row estimated nowhere or everywhere
    # holds a broadcast scalar (no memory a cell). None: not decided.
    estimated: Optional[np.ndarray] = None
    # (N,) bool: where the rule named by `fired` did not fire but only a bound crossed its line on the side
    # that cannot prove it (`metrics.proves`): not judged by that rule. None: not decided.
    unproven: Optional[np.ndarray] = None


def has_data(table: MetricTable) -> np.ndarray:
    """Where a table has any value (or counted non-finite ones); of the table's shape, so also for stacked tables."""
    present = table.get("nonfinite") > 0
    for name, values in table.values.items():
        if name in ("nonfinite", "count"):
            continue
        present = present | ~np.isnan(values)
    return present


def _closeness(value: np.ndarray, threshold: float, above: bool, log: bool) -> np.ndarray:
    """How far past (>= 1) or short of (< 1) the threshold each value is, in [0, 2]."""
    # Zero, negative, NaN and values whose ratio to the threshold passes float64's range (1e308 against
    # 1e-6, or a subnormal against 1e-6 below) end as -inf, NaN or inf, which the clip below maps: no warning.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if log:
            decades = np.log10(value / threshold) if above else np.log10(threshold / value)
            # 0 two decades short of the threshold, 1 at it, 2 a decade past it.
            return np.clip(np.where(decades < 0, 1 + decades / 2, 1 + decades), 0, 2)
        span = abs(threshold) if threshold else 1.0
        rel = (value - threshold) / span if above else (threshold - value) / span
        return np.clip(1 + rel, 0, 2)


def rule_health(table: MetricTable, role: str, kind: str, limits: Mapping[str, float],
                rules: Sequence[CellRule]) -> CellHealth:
    """Scores every step of one tensor's metric table by `rules` alone, the worst firing rule naming the cell.
    At a step whose tensor held NaN or Inf only the rules on `metrics.SPEAKS_AT_NONFINITE` judge.

    Element-wise throughout: a stacked table (`metrics.stack_tables`) of
    tensors of one role and kind is scored in one pass, a row each.
    """
    present = has_data(table)
    # A step whose tensor held NaN or Inf is the non-finite rule's alone (`metrics.judged`).
    nonfinite = metrics.nonfinite_steps(table)
    level = np.where(present, OK, NO_DATA).astype(np.uint8)
    rule = np.where(present, RULE_OK, RULE_NO_DATA).astype(np.uint8)
    worst = np.zeros(present.shape)  # closeness of the nearest-to-firing rule, for the score
    fired_code = np.zeros(present.shape, dtype=np.uint8)
    unproven_code = np.zeros(present.shape, dtype=np.uint8)
    for code, r in enumerate(rules, 1):
        if role not in r.roles or (r.kinds is not None and kind not in r.kinds):
            continue
        value = table.get(r.metric)
        if r.use_abs:
            value = np.abs(value)
        limit = limits.get(r.threshold, 0.0) if r.threshold else 0.0
        known = ~np.isnan(value)
        if r.metric not in metrics.SPEAKS_AT_NONFINITE:
            known &= ~nonfinite
        # A bound past the line on its unproving side (an upper bound above it, a lower bound under it)
        # proves nothing: such a cell is not judged by this rule, and says so (`unproven`).
        proven = metrics.proves(table.quality_of(r.metric), r.above)
        past = known & ((value > limit) if r.above else (value < limit))
        unproven_code = np.where(past & ~proven & (unproven_code == 0), code, unproven_code).astype(np.uint8)
        known &= proven
        fired = past & proven
        close = np.where(known, _closeness(value, limit, r.above, r.log), 0.0) if r.threshold else np.where(fired, 2.0, 0.0)
        close = np.where(fired, np.maximum(close, 1.0), np.minimum(close, 0.999))
        override = fired & (r.status > level)
        level = np.where(override, r.status, level).astype(np.uint8)
        rule = np.where(override, rule_code(r.name), rule).astype(np.uint8)
        fired_code = np.where(override, code, fired_code).astype(np.uint8)
        worst = np.maximum(worst, close)
    # Where no rule fired, one whose bound crossed its line unproven names the cell, as a rule held at an
    # ok cell does: the tab then says it was not judged rather than nothing.
    unproven = (fired_code == 0) & (unproven_code > 0)
    if unproven.any():
        names = np.array([RULE_OK] + [rule_code(r.name) for r in rules], dtype=np.uint8)
        rule = np.where(unproven, names[unproven_code], rule).astype(np.uint8)
        fired_code = np.where(unproven, unproven_code, fired_code).astype(np.uint8)
    score = np.select(
        [level == CRITICAL, level == WARN, level == OK],
        [0.25 * (1 - np.clip(worst - 1, 0, 1)), 0.6 - 0.35 * np.clip(worst - 1, 0, 1), 1 - 0.4 * np.clip(worst, 0, 1)],
        default=np.nan,
    )
    return CellHealth(score=score, status=level, rule_codes=rule, fired=fired_code, unproven=unproven)


def in_band(score: np.ndarray, status: np.ndarray) -> np.ndarray:
    """The score moved into the band of its (decided) status; NaN where there is no data."""
    return np.select(
        [status == CRITICAL, status == WARN, status == OK],
        [np.minimum(score, BANDS[CRITICAL][1]), np.clip(score, BANDS[WARN][0] + 1e-4, BANDS[WARN][1]),
         np.maximum(score, BANDS[OK][0] + 1e-4)],
        default=np.nan)


def estimated_steps(table: MetricTable) -> np.ndarray:
    """Where any metric of `table` is not exact (estimated from buckets, or a bound), of the table's shape:
    (N,) for one tensor, (rows, N) for stacked tables. A metric a row lacks has no quality, so never counts."""
    out = np.zeros(np.shape(table.steps), dtype=bool)
    for codes in table.quality.values():
        out |= codes >= metrics.ESTIMATED
    return out


def compact_flags(flags: np.ndarray) -> np.ndarray:
    """`flags` (N,) bool as held for a long time: one broadcast value where they are all alike."""
    if len(flags) and (flags == flags[0]).all():
        # A value of its own: a view of `flags` would keep the array it is a row of.
        return np.broadcast_to(np.array(flags[0]), flags.shape)
    return flags.copy()

