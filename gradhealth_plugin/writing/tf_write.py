"""Rows of gradhealth statistics written through a ``tf.summary`` writer, eagerly or from inside ``tf.function``."""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from .failures import Failures
from .format import VECTOR_WIDTH, summary_metadata, tag_for

# (layer, position in the model, static shape or None) of one row.
Entry = Tuple[str, Optional[int], Optional[Sequence[int]]]
# (role, entries, rows): row j of the [len(entries), VECTOR_WIDTH] rows is the `role` summary of entries[j].
Group = Tuple[str, Sequence[Entry], Any]

# After a failed write the writer rests for 1, 2, 4, ... up to this many calls before the next try.
_MAX_REST = 64


class StatsWriter:
    """Writes rows of statistics through a ``tf.summary`` writer, and never raises.

    A summary op inside ``tf.function`` that fails (disk full, log directory
    removed) fails the whole training step, and a graph cannot catch an
    error. So the rows are computed in the graph and leave it through one
    ``tf.py_function`` per call, which writes them from Python, where a
    failure is caught and reported on `failures`. Eagerly the rows are written
    at once, the same way.

    After a failure the writer rests (see `_MAX_REST`) and adds nothing to the
    TensorFlow writer's queue, which keeps every event it could not write.
    Then it tries again: a writer it opened itself is replaced by a new one
    (a new event file, as the old one may end in a torn record; a removed
    log directory is made again), a writer it was given is flushed to see
    whether it writes again. A writer opened here in a local directory is
    also checked after every write: its event file must have grown by what
    was written (see `_check_written`).

    Args:
      target: a log directory to open a writer in, or a writer made by
        ``tf.summary.create_file_writer``.
      failures: where failures are counted.
      record: called with (step, groups) and the rows on the host after each
        recorded write, whether or not the write succeeded (``stop_on`` judges
        them); what it raises is counted, never raised.
      **options: for ``tf.summary.create_file_writer`` when `target` is a directory.

    Opening the first writer may raise; nothing else does.
    """

    def __init__(self, target, failures: Failures, record: Optional[Callable[[int, List[Group]], None]] = None,
                 **options) -> None:
        self._failures = failures
        self._record = record
        self._lock = threading.Lock()
        self._rest = 0  # calls left to skip
        self._backoff = 0  # length of the last rest
        self._broken = False
        self._closed = False
        self._retired: List = []
        self._file: Optional[str] = None  # the event file of a writer opened here, when known
        self._size = 0  # its size after the last checked write
        if isinstance(target, str):
            self._logdir, self._options = target, options
            self._writer = self._open()
        elif isinstance(target, tf.summary.SummaryWriter):
            self._logdir, self._options, self._writer = None, {}, target
        else:
            raise TypeError(f"a log directory or a tf.summary writer was expected, not {type(target).__name__}")

    @property
    def owned(self) -> bool:
        return self._logdir is not None

    def write(self, step, groups: Sequence[Group]) -> tf.Tensor:
        """Writes every group's rows at `step`; a bool tensor, True when they were written.

        Eagerly they are written before this returns; inside ``tf.function``
        when the returned tensor is computed (a stateful op: it runs whether
        or not anything reads it).
        """
        headers = [(tag_for(role, layer), summary_metadata(role, layer, position, shape))
                   for role, entries, _ in groups for layer, position, shape in entries]
        matrices = [rows for _, _, rows in groups]
        # The caller's tf.summary.record_if, and the replica a tf.distribute
        # strategy records from. Asked here, in the caller's context: the
        # Python function may run on one of TensorFlow's threads, without it.
        with _RecordingProbe().as_default():
            record = tf.summary.should_record_summaries()
        described = [(role, entries) for role, entries, _ in groups]
        if tf.executing_eagerly():
            written = bool(record) and self._write(step, headers, matrices)
            if record:
                self._hand_over(step, described, matrices)
            return tf.constant(written)

        def write_now(record, step, *rows):
            written = bool(record) and self._write(step, headers, rows)
            if record:
                self._hand_over(step, described, rows)
            return written

        return tf.py_function(write_now, [record, step, *matrices], Tout=tf.bool)

    def _hand_over(self, step, described: List[tuple], matrices) -> None:
        """The rows just written (or not), on the host, to `record`."""
        if self._record is None:
            return
        try:
            groups = [(role, entries, np.asarray(m, np.float64).reshape(-1, VECTOR_WIDTH))
                      for (role, entries), m in zip(described, matrices)]
            self._record(int(step), groups)
        except Exception as e:  # noqa: BLE001 - never raise into training
            self._failures.report(f"hand the statistics at step {int(step)} to stop_on", e)

    def flush(self) -> None:
        """Flushes the writer and closes the ones set aside after failures. Eagerly only: every write is flushed."""
        if not tf.executing_eagerly():
            return  # a flush op in the caller's graph could fail the step
        with self._lock:
            self._close_retired()
            if self._writer is not None and not self._broken:
                self._failures.attempt("flush the summary writer", self._writer.flush, kind="write")

    def close(self) -> None:
        """Closes a writer opened here (a given one is only flushed); later writes write nothing. Eagerly only."""
        if not tf.executing_eagerly():
            return
        with self._lock:
            self._close_retired()
            writer, self._writer, self._closed = self._writer, None, True
            if writer is not None and not self._broken:
                self._failures.attempt("close the summary writer", writer.close if self.owned else writer.flush,
                                       kind="write")

    def _open(self):
        """A new writer in the log directory; notes its event file, to check that writes reach it."""
        local = "://" not in self._logdir
        before = _event_files(self._logdir) if local else set()
        writer = tf.summary.create_file_writer(self._logdir, **self._options)
        new = _event_files(self._logdir) - before if local else set()
        # Unknown when remote, or when another writer made a file in the same instant: then unchecked.
        self._file = os.path.join(self._logdir, new.pop()) if len(new) == 1 else None
        self._size = os.path.getsize(self._file) if self._file else 0
        return writer

    def _check_written(self, nbytes: int) -> None:
        """Raises unless the event file grew by at least `nbytes` (it is gone: FileNotFoundError).

        TensorFlow's writer can lose events on a full disk without an error
        (seen on a tmpfs for some sizes of event), and goes on writing into
        its file after the file or the whole log directory was removed.
        """
        if self._file is None:
            return
        size = os.path.getsize(self._file)
        if size - self._size < nbytes:
            raise OSError(f"{self._file} grew by {size - self._size} of the {nbytes} bytes written (disk full?)")
        self._size = size

    def write_summary(self, step: int, summary: bytes) -> bool:
        """Writes a serialized ``Summary`` at `step`, eagerly; True when it was written (never raises)."""
        return self._write(step, None, None, summary)

    def _write(self, step, headers, matrices, summary: Optional[bytes] = None) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._rest:
                self._rest -= 1
                return False
            try:
                step = int(step)
                if self._broken:
                    self._resume()
                if summary is None:
                    summary = _summary(headers, [np.asarray(m, np.float64).reshape(-1, VECTOR_WIDTH)
                                                 for m in matrices])
                # Leaving as_default flushes: a failure shows here, not in a later step.
                with self._writer.as_default():
                    tf.summary.experimental.write_raw_pb(summary, step=step)
                if self.owned:
                    self._check_written(len(summary))
            except Exception as e:  # noqa: BLE001 - never raise into training
                self._pause()
                self._failures.report(f"write gradhealth statistics at step {step}", e, kind="write")
                return False
            self._backoff = 0
            return True

    def _retire(self) -> None:
        """Sets the writer aside; it is closed by the next `flush` or `close`.

        Not here: destroying a writer inside the ``tf.py_function`` that
        caught its error crashes the interpreter (TensorFlow 2.21).
        """
        if self._writer is not None:
            self._retired.append(self._writer)
        self._writer = None

    def _close_retired(self) -> None:
        retired, self._retired = self._retired, []
        for writer in retired:
            # Its queue holds the events it could not write: they are lost with it.
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - counted when it failed to write
                pass

    def _resume(self) -> None:
        if self.owned:
            self._writer = self._open()
        else:
            self._writer.flush()
        self._broken = False

    def _pause(self) -> None:
        self._broken = True
        self._backoff = min(max(1, 2 * self._backoff), _MAX_REST)
        self._rest = self._backoff - 1
        if self.owned:
            self._retire()


def _event_files(logdir: str) -> set:
    try:
        return {name for name in os.listdir(logdir) if "tfevents" in name}
    except OSError:  # not made yet
        return set()


class _RecordingProbe(tf.summary.SummaryWriter):
    """A writer that writes nothing, made the default only to ask ``should_record_summaries``, which needs one."""

    def flush(self) -> None:
        pass


def _summary(headers: List[tuple], matrices: List[np.ndarray]) -> bytes:
    """One serialized ``Summary`` with one value per row; the metadata goes with every value, as tf.summary does."""
    from tensorboard.compat.proto import summary_pb2, types_pb2

    rows = np.concatenate(matrices) if matrices else np.zeros((0, VECTOR_WIDTH))
    summary = summary_pb2.Summary()
    for (tag, meta), row in zip(headers, rows):
        value = summary.value.add(tag=tag)
        value.metadata.CopyFrom(meta)
        value.tensor.dtype = types_pb2.DT_DOUBLE
        value.tensor.tensor_shape.dim.add(size=row.size)
        value.tensor.tensor_content = row.tobytes()
    return summary.SerializeToString()
