"""The hooks `watch` adds and the registry that leads each one to its live handle.

Every hook is a ``functools.partial`` of `hook` with the handle's number:
bound methods would make ``copy.deepcopy(model)`` (EMA copies) and
``torch.save(model)`` copy or pickle the handle with its open event file and
fail; a copied model's hooks reach the same live handle, an unpickled one's
reach none and do nothing.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import threading
import weakref
from typing import TYPE_CHECKING, Callable, Dict, Optional

import torch
from torch import nn

if TYPE_CHECKING:
    from .handle import WatchHandle

# The model keeps its handle alive (the handle holds the model only weakly).
_WATCHED: "weakref.WeakKeyDictionary[nn.Module, WatchHandle]" = weakref.WeakKeyDictionary()
_LIVE: "weakref.WeakSet[WatchHandle]" = weakref.WeakSet()
# Number -> weak reference: a plain dict's lookup is a C call, where a WeakValueDictionary's get is
# Python code, and every hook looks its handle up on every step, logged or not.
_HANDLES: "Dict[int, weakref.ref]" = {}
_NUMBERS = itertools.count(1)
_REGISTRY_LOCK = threading.Lock()


def _compiling_check() -> Callable[[], bool]:
    check = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if check is None:  # torch < 2.3
        try:
            from torch._dynamo import is_compiling as check
        except Exception:  # noqa: BLE001
            return lambda: False
    return check


# Dynamo evaluates this to True while tracing, so hooks traced into a compiled
# graph reduce to nothing instead of breaking the graph.
_is_compiling = _compiling_check()


def hook(number: int, method: str, *args) -> object:
    """Calls `method` of the live handle numbered `number` with the hook's arguments, if there is one."""
    # First: while Dynamo traces a hook this is True, so the hook adds nothing to
    # the graph, breaks nothing, and no guard on the handle's state recompiles it.
    if _is_compiling():
        return None
    ref = _HANDLES.get(number)
    handle = ref() if ref is not None else None
    if handle is None:
        return None
    return getattr(handle, method)(*args)


def hook_for(handle: "WatchHandle", method: str, *args) -> Callable:
    """The hook calling ``handle.<method>(*args, *hook arguments)``."""
    return functools.partial(hook, handle.number, method, *args)


def next_number() -> int:
    """A number no other handle of this process has."""
    return next(_NUMBERS)


def handle_of(model: nn.Module) -> "Optional[WatchHandle]":
    """The live handle watching `model` (unwrapped), if any."""
    with _REGISTRY_LOCK:
        return _WATCHED.get(model)


def register(model: nn.Module, handle: "WatchHandle") -> None:
    """Makes `handle` the one its hooks and `handle_of(model)` find."""
    with _REGISTRY_LOCK:
        _WATCHED[model] = handle
        _LIVE.add(handle)
        # A handle collected without `release` takes its entry with it.
        _HANDLES[handle.number] = weakref.ref(handle, functools.partial(_forget, handle.number))


def _forget(number: int, _ref: weakref.ref) -> None:
    if _HANDLES.get(number) is _ref:
        del _HANDLES[number]


def release(handle: "WatchHandle") -> None:
    """Forgets `handle` (its hooks then do nothing) and closes it: hooks removed, pending rows written."""
    with _REGISTRY_LOCK:
        model = handle._model_ref()
        if model is not None and _WATCHED.get(model) is handle:
            del _WATCHED[model]
        _LIVE.discard(handle)
        _HANDLES.pop(handle.number, None)
    handle._close()


@atexit.register
def _close_all() -> None:
    # Event files are buffered: write what is pending when the script ends without unwatch().
    for handle in list(_LIVE):
        try:
            handle._close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
