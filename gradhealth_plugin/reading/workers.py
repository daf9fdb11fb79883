"""Threads that ask the data provider on a request's behalf, none of which holds up TensorBoard's exit.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter
exits, after they have run every call still queued. A listing or a read from a
data server that answers slowly (one loading a large logdir, a remote one, one
that hangs) then kept TensorBoard from exiting on Ctrl-C or SIGTERM for as long
as it took, though no request would ever receive the answer; TensorBoard's own
request threads are daemons and never do. These threads are daemons too: they
only read, for requests that end with the process, and write nothing, so
nothing is lost when the process ends without them.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import weakref
from typing import Callable, Optional, Tuple

# What a thread takes from the queue: the call and its future, or None to end.
_Call = Optional[Tuple[concurrent.futures.Future, Callable, tuple, dict]]


def _work(calls: "queue.SimpleQueue[_Call]") -> None:
    while True:
        item = calls.get()
        if item is None:
            return
        future, fn, args, kwargs = item
        del item
        if future.set_running_or_notify_cancel():
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(e)
            else:
                future.set_result(result)
                del result
        # Nothing of a call is held while waiting for the next one.
        del future, fn, args, kwargs


def _end(calls: "queue.SimpleQueue[_Call]", count: int) -> None:
    for _ in range(count):
        calls.put(None)


class Workers:
    """Runs submitted calls on at most `count` daemon threads, started as calls come.

    Calls wait in order for a free thread, as with ``ThreadPoolExecutor.submit``.
    The threads end once this object is garbage collected and they have run what
    was queued; at interpreter exit they are not waited for.
    """

    def __init__(self, count: int, name: str) -> None:
        self._count = count
        self._name = name
        self._calls: "queue.SimpleQueue[_Call]" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        # The threads hold the queue, not this object: dropping it ends them.
        weakref.finalize(self, _end, self._calls, count)

    def submit(self, fn: Callable, *args, **kwargs) -> concurrent.futures.Future:
        """``fn(*args, **kwargs)`` on one of the threads; its future holds the result or the exception."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((future, fn, args, kwargs))
        with self._lock:
            if self._started < self._count:
                self._started += 1
                threading.Thread(target=_work, args=(self._calls,), name=f"{self._name}_{self._started}",
                                 daemon=True).start()
        return future
