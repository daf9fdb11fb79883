"""Giving freed memory back to the operating system after a large read or analysis.

Reading a long run allocates and frees hundreds of MB in small pieces (decoded
tensors, per-chunk tables) from several threads. glibc's allocator keeps what
was freed in its heaps, one per thread that allocated, and a later allocation
in another thread does not reuse it: TensorBoard's resident memory then grows
by what each thread once held, not by what is held. ``malloc_trim`` returns
the free pages of every heap to the system. Where the C library has no such
call (macOS, musl, Windows), this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Callable, Optional

# Freed bytes that make a release due. Each release walks the heaps (1-60 ms at a GB), so a small read
# never pays for one; a long run's (0.6 GB of values at 1,000 layers x 5,000 steps) pays about 30.
RELEASE_EVERY = 64 << 20


def _find_trim() -> Optional[Callable[[int], int]]:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _find_trim()
_lock = threading.Lock()
_freed = 0


def release_free_memory() -> bool:
    """Returns the allocator's free pages to the system; whether it could (False where there is no way)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def freed(nbytes: int) -> None:
    """Counts `nbytes` the caller just dropped; releases the free pages (`release_free_memory`) once
    RELEASE_EVERY bytes were counted since the last release."""
    global _freed
    with _lock:
        _freed += max(int(nbytes), 0)
        if _freed < RELEASE_EVERY:
            return
        _freed = 0
    release_free_memory()
