"""Giving freed memory back to the operating system after a large read or analysis.

Reading a long run allocates and frees hundreds of MB in small pieces (decoded
tensors, per-chunk tables) from several threads. glibc's allocator keeps what
was freed in its heaps, one per thread that allocated, and a later allocation
in another thread does not reuse it: TensorBoard's resident memory then grows
by what each thread once held, not by what is held. ``malloc_trim`` returns
the free pages of every heap to the system, but only those free at that moment:
a thread reading the next chunk holds its heap's pages meanwhile. So the heaps
are also capped (`tune_heaps`). Where the C library has no such calls (macOS, musl,
Windows), this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Callable, Optional

# Freed bytes that make a release due. Each release walks the heaps (1-60 ms at a GB), so a small read
# never pays for one; a long run's (0.6 GB of values at 1,000 layers x 5,000 steps) pays about 30.
RELEASE_EVERY = 64 << 20

# How the allocator is set for a long read (`tune_heaps`), unless the user set it (glibc's environment
# variable, or its tunable): (mallopt's parameter number (malloc.h), value, variable, tunable).
# At most 2 heaps (glibc's arenas; by default up to 8 per core, one per thread that allocates while the
# others' are busy): the request's thread, the one reading the next chunk ahead, the listings' and
# TensorBoard's own then each kept what they once held. Mapping large blocks on their own (a lower
# mmap threshold) saved a little more but costs page faults at every large array, and was left out.
# 1,000 layers x 2,000 steps, the process's peak above the loaded process: 542 MB before, 335 with the
# heaps capped (bench/README.md, "Memory on a long run").
_SETTINGS = ((-8, 2, "MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),)


def _libc_function(name: str, argtypes: list) -> Optional[Callable[..., int]]:
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


def _find_trim() -> Optional[Callable[[int], int]]:
    return _libc_function("malloc_trim", [ctypes.c_size_t])


def _find_mallopt() -> Optional[Callable[[int, int], int]]:
    return _libc_function("mallopt", [ctypes.c_int, ctypes.c_int])


_TRIM = _find_trim()
_MALLOPT = _find_mallopt()
_lock = threading.Lock()
_freed = 0


def release_free_memory() -> bool:
    """Returns the allocator's free pages to the system; whether it could (False where there is no way)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def tune_heaps() -> int:
    """Sets the allocator for a long read as `_SETTINGS` says, for the rest of the process, where the
    user did not; how many settings it made (0 where there is no way)."""
    if _MALLOPT is None:
        return 0
    made = 0
    for param, value, variable, tunable in _SETTINGS:
        if variable not in os.environ and tunable not in os.environ.get("GLIBC_TUNABLES", ""):
            made += _MALLOPT(param, value) == 1
    return made


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
