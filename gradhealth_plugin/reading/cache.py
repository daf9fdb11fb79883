"""The byte-bounded least-recently-used cache behind every per-tag read.

Entries are keyed by where they came from (experiment, run, plugin, tag) and
versioned by what the data provider lists for that tag (last step, wall time):
an entry whose version no longer matches counts as missing, so unchanged data
is never recomputed and changed data is never served stale.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Optional

# Metric tables kept per tag (a few hundred bytes per logged step each).
DEFAULT_BYTES = 256 * 1024 * 1024


class TagCache:
    """Per-tag results keyed by what the provider lists (last step, wall time), bounded in bytes.

    A tag whose listing did not change is not read again; the least recently
    used entries go first when the bound is reached. Thread-safe.
    """

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self._entries: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self._bytes = 0
        self._max = max_bytes
        self._lock = threading.Lock()

    def get(self, key: tuple, version: tuple) -> Optional[Any]:
        """The value stored for `key` if it was stored for this `version`, else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def peek(self, key: tuple) -> Optional[Any]:
        """The value stored for `key` whatever its version (None if there is none)."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry[1]

    def put(self, key: tuple, version: tuple, value: Any, nbytes: int) -> None:
        """Stores `value` (about `nbytes` large), evicting the oldest entries past the bound.

        The newest entry always stays, even alone over the bound: a caller that
        just computed it is about to use it.
        """
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (version, value, nbytes)
            self._bytes += nbytes
            while self._bytes > self._max and len(self._entries) > 1:
                _, (_, _, size) = self._entries.popitem(last=False)
                self._bytes -= size

    @property
    def nbytes(self) -> int:
        return self._bytes
