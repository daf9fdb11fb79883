"""The registry of finding kinds: every module in this package is one kind.

Each module declares its ``KIND``, its ``ORDER`` (its place in the kind order,
which breaks ties when findings are sorted and orders the cell rules), its
default ``SEVERITY`` (and ``MAX_SEVERITY`` where a finding can be raised above it),
``LABEL``, ``ADVICE``, the ``METRIC`` its chart shows,
``NEEDS`` (the roles or run-level scalar kinds it judges from: any one suffices; empty
for kinds that judge whatever was logged),
its ``CELL_RULES`` (with ``STEPS_NEEDED``, the logged steps in a row they must hold for a
finding: a threshold's name or a count; 1 when absent) and threshold ``THRESHOLDS`` lines,
optionally ``EVENTS = True`` (one finding per event, whose repeats fold at any severity), and
``detect(run, limits) -> List[Finding]``. Adding a kind is adding a module
here (and its test): the registry finds it, nothing else names it.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable, List, Mapping, Tuple

from ..health import CellRule
from ..limits import Line


def _modules() -> tuple:
    found = [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]
    return tuple(sorted(found, key=lambda m: m.ORDER))


DETECTORS = _modules()
KINDS: Tuple[str, ...] = tuple(d.KIND for d in DETECTORS)
BY_KIND = {d.KIND: d for d in DETECTORS}
# The worst firing rule names a cell's score; among rules of one status the first listed wins.
CELL_RULES: List[CellRule] = [rule for d in DETECTORS for rule in d.CELL_RULES]
THRESHOLD_LINES: List[Line] = [line for d in DETECTORS for line in d.THRESHOLDS]
# Kinds that give one finding per event (a spike): their repeats fold whatever their severity.
EVENT_KINDS = frozenset(d.KIND for d in DETECTORS if getattr(d, "EVENTS", False))


def not_judged(evidence: Iterable[str]) -> List[str]:
    """The kinds a run cannot speak for: each needs a role or scalar the run did not log.

    A run with no such finding is not healthy in those respects, only unjudged.
    """
    have = set(evidence)
    return [d.KIND for d in DETECTORS if d.NEEDS and not have.intersection(d.NEEDS)]


def steps_needed(kind: str, limits: Mapping[str, float]) -> int:
    """Logged steps in a row a kind's cell rules must hold before its finding is made (`STEPS_NEEDED`)."""
    needed = getattr(BY_KIND[kind], "STEPS_NEEDED", 1)
    return int(limits[needed]) if isinstance(needed, str) else int(needed)
