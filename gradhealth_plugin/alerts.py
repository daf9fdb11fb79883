"""What to act on while a run trains: findings at a severity, of some kinds, held for N logged steps.

One `Alert` serves `gradhealth watch` (following a logdir through TensorBoard's
loader) and the integrations' ``stop_on`` (judging, in process, the statistics
they compute). Both judge with `analysis.findings`, so they act on the findings
the tab and ``gradhealth report`` show, with the same thresholds.

Info findings are notes, never acted on: an alert is at warn or critical.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple, Union

import numpy as np

from .analysis import detectors
from .analysis.finding import CRITICAL, SEVERITY_RANK, WARN, Finding
from .reading.runs import RunData

LEVELS = (WARN, CRITICAL)
# Prefix of the environment variables `gradhealth watch --exec` sets.
ENV_PREFIX = "GRADHEALTH_"


@dataclasses.dataclass(frozen=True)
class Alert:
    """Findings to act on: at `on` or above, of `kinds` (None: every kind), held `consecutive` logged steps.

    ``consecutive=1`` (the default) acts as soon as a finding exists, as the tab
    shows it. A rule that needs several consecutive logged steps (5 for vanishing
    gradients, 3 for dead units) already reports a condition that has held 2 at
    the end of what was logged (the training may have stopped because of it):
    while a run trains, that is at its second logged step. ``consecutive=5``
    asks every finding to have held 5 logged steps of its row first, seed 003's
    "5 consecutive steps, then notify".
    """

    on: str = CRITICAL
    kinds: Optional[FrozenSet[str]] = None
    consecutive: int = 1

    def __post_init__(self) -> None:
        if self.on not in LEVELS:
            raise ValueError(f"gradhealth: alerts are at {' or '.join(LEVELS)}, not {self.on!r} "
                             "(info findings are notes, never acted on)")
        if self.kinds is not None:
            kinds = frozenset(self.kinds)
            unknown = sorted(kinds - set(detectors.KINDS))
            if unknown or not kinds:
                raise ValueError(f"gradhealth: unknown finding kind(s) {', '.join(unknown) or '(none given)'}; "
                                 f"known: {', '.join(detectors.KINDS)}")
            object.__setattr__(self, "kinds", kinds)
        n = self.consecutive
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"gradhealth: consecutive must be a positive integer, got {n!r}")
        object.__setattr__(self, "consecutive", int(n))

    @classmethod
    def of(cls, value: Union[None, str, "Alert"]) -> Optional["Alert"]:
        """An integration's ``stop_on``: None (off), "warn", "critical", or an `Alert`."""
        if value is None or isinstance(value, Alert):
            return value
        if isinstance(value, str):
            return cls(on=value)
        raise TypeError(f"gradhealth: stop_on must be None, 'warn', 'critical' or an Alert, got {value!r}")

    def describe(self) -> str:
        """The alert in a few words: ``critical``, ``warn (nonfinite) held 3 consecutive logged steps``."""
        text = self.on
        if self.kinds:
            text += f" ({', '.join(sorted(self.kinds))})"
        if self.consecutive > 1:
            text += f" held {self.consecutive} consecutive logged steps"
        return text

    def wants(self, f: Finding) -> bool:
        """Whether the finding is of a kind and severity this alert acts on (however long it held)."""
        return SEVERITY_RANK[f.severity] >= SEVERITY_RANK[self.on] and (self.kinds is None or f.kind in self.kinds)

    def detectors(self) -> tuple:
        """The detectors whose findings this alert can act on: the others need not run."""
        level = SEVERITY_RANK[self.on]
        return tuple(d for d in detectors.DETECTORS
                     if SEVERITY_RANK[getattr(d, "MAX_SEVERITY", d.SEVERITY)] >= level
                     and (self.kinds is None or d.KIND in self.kinds))

    def matches(self, rd: RunData, found: Iterable[Finding]) -> List["Match"]:
        """The findings this alert acts on, each with how long it held and whether it holds now."""
        out = []
        for f in found:
            if not self.wants(f):
                continue
            held, now = streak(rd, f)
            out.append(Match(f, held, now, held >= self.consecutive))
        return out


@dataclasses.dataclass
class Match:
    """A finding an alert wants: `steps` consecutive logged steps it held at most, `holds` at the run's last.

    `due` is whether it held long enough for the alert to act.
    """

    finding: Finding
    steps: int
    holds: bool
    due: bool = True

    @property
    def key(self) -> Tuple:
        """The same problem from one analysis to the next: its kind, role, first layer and onset."""
        f = self.finding
        return f.run, f.kind, f.role, f.layers[0] if f.layers else None, f.first_step

    def line(self) -> str:
        """The alert as one line for a person."""
        f = self.finding
        held = f"{self.steps} consecutive logged step{'s' if self.steps != 1 else ''}"
        return f"{f.run}: [{f.severity}] {f.kind} from step {f.first_step} ({held}): {f.message}"

    def to_json(self) -> dict:
        return {"event": "alert", "run": self.finding.run, "consecutive_steps": self.steps,
                "holds": self.holds, "finding": self.finding.to_json()}

    def env(self) -> Dict[str, str]:
        """The finding as environment variables (GRADHEALTH_KIND, ...), for a command run on it."""
        f = self.finding
        values = {"EVENT": "alert", "RUN": f.run, "KIND": f.kind, "SEVERITY": f.severity,
                  "LAYERS": ",".join(f.layers), "ROLE": f.role or "", "FIRST_STEP": str(f.first_step),
                  "LAST_STEP": str(f.last_step), "CONSECUTIVE_STEPS": str(self.steps), "MESSAGE": f.message,
                  "ADVICE": f.advice, "FINDING": json.dumps(f.to_json())}
        return {ENV_PREFIX + k: v for k, v in values.items()}


def streak(rd: RunData, f: Finding) -> Tuple[int, bool]:
    """(most consecutive logged steps the finding covers in one of its rows, whether it covers a row's last step).

    Consecutive counts the row's own logged steps: a finding on every logged step
    from 100 to 500 of a row logged every 100 steps held 5 of them.
    """
    best, now = 0, False
    for layer in f.layers or [None]:
        steps = _row_steps(rd, layer, f.role)
        idx = np.nonzero(np.isin(steps, _covered(f, layer, steps)))[0]
        if len(idx) == 0:
            continue
        breaks = np.nonzero(np.diff(idx) != 1)[0]
        lengths = np.diff(np.concatenate([[-1], breaks, [len(idx) - 1]]))
        best = max(best, int(lengths.max()))
        now = now or bool(idx[-1] == len(steps) - 1)
    if best == 0:
        # No row to count on (a finding built by hand): it held once, and holds if it reaches the run's end.
        return 1, rd.last_step is not None and f.last_step >= rd.last_step
    return best, now


def _row_steps(rd: RunData, layer: Optional[str], role: Optional[str]) -> np.ndarray:
    """The logged steps of the row a finding names: a layer in its role (any role), or a run-level scalar."""
    found = rd.layer(layer) if layer is not None else None
    if found is not None:
        rows = [found.roles[role]] if role in found.roles else list(found.roles.values())
        steps = [r.table.steps for r in rows if len(r.table.steps)]
        if steps:
            return np.unique(np.concatenate(steps))
    if layer in rd.scalar_series:
        return np.asarray(rd.scalar_steps(layer), dtype=np.int64)
    return np.zeros(0, dtype=np.int64)


def _covered(f: Finding, layer: Optional[str], steps: np.ndarray) -> np.ndarray:
    """The row's steps the finding covers: its exact steps where it has them, else its span."""
    points = f.points.get(layer) if layer is not None else None
    if points is not None:
        return np.unique(np.asarray(points, dtype=np.int64))
    first, last = f.spans.get(layer, (f.first_step, f.last_step))
    return steps[(steps >= first) & (steps <= last)]


@dataclasses.dataclass
class Recovery:
    """A run whose announced findings no longer hold: none at the alert's level covers its last logged step."""

    run: str
    step: Optional[int]
    kinds: List[str]
    on: str

    def line(self) -> str:
        return (f"{self.run}: recovered at step {self.step}: no finding at {self.on} or above holds any more "
                f"(announced: {', '.join(self.kinds)})")

    def to_json(self) -> dict:
        return {"event": "recovered", "run": self.run, "step": self.step, "kinds": self.kinds}

    def env(self) -> Dict[str, str]:
        values = {"EVENT": "recovered", "RUN": self.run, "KIND": ",".join(self.kinds),
                  "LAST_STEP": "" if self.step is None else str(self.step)}
        return {ENV_PREFIX + k: v for k, v in values.items()}


class Announcer:
    """Says each finding an alert acts on once, and a run's recovery once, however often the run is analysed.

    A finding is known by `Match.key` (kind, role, first layer, onset), so a
    finding that grows (more steps, more layers) is the same finding. A run
    recovers when findings were announced and none the alert wants covers the
    run's last logged step; a finding that holds again after that is announced
    again.
    """

    def __init__(self, alert: Alert) -> None:
        self.alert = alert
        self._announced: Dict[str, set] = {}
        self._open: Dict[str, Dict[Tuple, str]] = {}

    def update(self, rd: RunData, found: Iterable[Finding]) -> List[Union[Match, Recovery]]:
        """What to announce about this analysis of a run: new matches, then a recovery."""
        announced = self._announced.setdefault(rd.run, set())
        still = self._open.setdefault(rd.run, {})
        matches = self.alert.matches(rd, found)
        out: List[Union[Match, Recovery]] = []
        for m in matches:
            if m.due and (m.key not in announced or (m.key not in still and m.holds)):
                announced.add(m.key)
                still[m.key] = m.finding.kind
                out.append(m)
        if still and not any(m.holds for m in matches):
            out.append(Recovery(rd.run, rd.last_step, sorted(set(still.values())), self.alert.on))
            still.clear()
        return out
