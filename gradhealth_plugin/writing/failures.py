"""How a logging failure is reported: counted, warned about once, kept by kind.

The integrations must never raise into training, and a failure that repeats
every step must not flood the log either: the first failure is one warning,
later ones are counted, and what they were stays listed by kind.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Dict, List, Optional

logger = logging.getLogger(__name__)

# Kinds are a few fixed phrases per integration; past this many, failures are
# kept under one catch-all entry so a bug naming each failure differently
# cannot grow the list without bound.
_MAX_KINDS = 50
_OTHER = "other failures"


class Failures:
    """The logging failures of one integration object.

    `count` counts every failure. `problems` keeps, per kind of failure, the
    first message and how many there were, so its counts add up to `count`.
    Only the first failure is logged as a warning; later ones at debug level.
    """

    def __init__(self, log: Optional[logging.Logger] = None) -> None:
        self.count = 0
        self._log = log or logger
        self._kinds: Dict[str, List] = {}  # kind -> [first message, count]
        self._lock = threading.Lock()

    def report(self, what: str, error: BaseException, kind: Optional[str] = None) -> None:
        """Counts a failure to do `what`; `kind` (by default `what`) groups the repeats of one failure."""
        kind = what if kind is None else kind
        with self._lock:
            self.count += 1
            first = self.count == 1
            if kind not in self._kinds and len(self._kinds) >= _MAX_KINDS:
                kind = _OTHER
            entry = self._kinds.setdefault(kind, [f"{what}: {type(error).__name__}: {error}", 0])
            entry[1] += 1
        if first:
            self._log.warning("gradhealth: could not %s (%s: %s); training continues, and later logging failures "
                              "are only counted (`errors`, `problems`)", what, type(error).__name__, error)
        else:
            self._log.debug("gradhealth: could not %s: %s: %s", what, type(error).__name__, error)

    def attempt(self, what: str, action: Callable[[], object], kind: Optional[str] = None) -> bool:
        """Runs `action`; a failure is reported (see `report`) instead of raised. True when it succeeded."""
        try:
            action()
        except Exception as e:  # noqa: BLE001 - never raise into training
            self.report(what, e, kind)
            return False
        return True

    @property
    def problems(self) -> List[str]:
        """One line per kind of failure: its first message, and how many there were when more than one."""
        with self._lock:
            entries = [tuple(entry) for entry in self._kinds.values()]
        return [message if n == 1 else f"{message} ({n} failures of this kind)" for message, n in entries]

    def log_total(self) -> None:
        """At the end of logging: one line with the total when failures followed the first warning."""
        if self.count > 1:
            self._log.info("gradhealth: %d logging failures in all: %s", self.count, "; ".join(self.problems))
