"""gradhealth summaries written to an event file without TensorFlow.

The PyTorch integration writes through `SummaryFileWriter`; the TensorFlow
helper and the Keras callback use ``tf.summary`` instead.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from typing import Optional, Sequence

import numpy as np

from .failures import Failures
from .format import summary_metadata, tag_for, tensor_summary
from .records import RecordWriter


class EventFile:
    """An event file written without TensorFlow.

    TensorBoard's own EventFileWriter opens files through ``tf.io.gfile``,
    which imports TensorFlow whenever it is installed. Local paths use a plain
    buffered file; remote ones (``s3://``, fsspec URLs) TensorBoard's
    TensorFlow-free file layer.

    Like TensorFlow's FileWriter, it keeps a tag's summary metadata on the
    tag's first event in the file only: both loaders take a tag's metadata from
    its first event, and the metadata is over half of each record, whose CRC
    TensorBoard computes in pure Python.
    """

    _uid = itertools.count()

    def __init__(self, logdir: str, suffix: str) -> None:
        from tensorboard.compat.proto import event_pb2
        name = "events.out.tfevents.%010d.%s.%s.%s%s" % (
            time.time(), socket.gethostname(), os.getpid(), next(self._uid), suffix)
        if "://" in logdir:
            from tensorboard.compat.tensorflow_stub.io import gfile

            gfile.makedirs(logdir)
            self._file = gfile.GFile(logdir.rstrip("/") + "/" + name, "wb")
            self.path: Optional[str] = None
        else:
            os.makedirs(logdir, exist_ok=True)
            self.path = os.path.join(logdir, name)
            self._file = open(self.path, "wb")
        self._records = RecordWriter(self._file)
        self._described: set = set()
        try:
            # file_version 2 makes both loaders trust step order instead of purging "restarts".
            self.add_event(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
            self.flush()
        except Exception:
            try:
                self._file.close()
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
            raise

    def gone(self) -> bool:
        """Whether the local file was removed (its directory deleted, say): writes would go nowhere."""
        return self.path is not None and not os.path.exists(self.path)

    def described(self, tag: str) -> bool:
        """Whether `tag`'s metadata is in the file already: later events of the tag need none."""
        return tag in self._described

    def add_event(self, event) -> None:
        first = []
        for value in event.summary.value:
            if value.HasField("metadata"):
                if value.tag in self._described:
                    value.ClearField("metadata")
                else:
                    first.append(value.tag)
        self._records.write(event.SerializeToString())
        self._described.update(first)  # only once written: a failed first write keeps it for the next

    def flush(self) -> None:
        self._records.flush()

    def close(self) -> None:
        self._records.close()


class SummaryFileWriter:
    """Writes gradhealth summaries to an event file without TensorFlow.

    Every method swallows its own errors (disk full, a closed file): logging
    must never break the training it watches. They are reported on
    `failures` (the owner's, to count them with its own; by default the
    writer's): counted, listed by kind, the first one logged as a warning.

    On a full disk the steps it refuses are lost and counted, and logging
    goes on in the same file, readable, once there is room again. A file
    removed under the writer (the log directory deleted) is noticed at the
    next flush, and what follows goes to a new file, as with TensorFlow's
    writer.
    """

    def __init__(self, logdir: str, filename_suffix: str = "", failures: Optional[Failures] = None) -> None:
        self._logdir = logdir
        self._suffix = filename_suffix
        self._writer = None
        self._lock = threading.Lock()
        self.failures = failures if failures is not None else Failures()

    @property
    def errors(self) -> int:
        return self.failures.count

    def _fail(self, what: str, error: BaseException) -> None:
        self.failures.report(what, error, kind="write to the event file")

    def _ensure(self):
        if self._writer is None:
            self._writer = EventFile(self._logdir, self._suffix)
        return self._writer

    def write_stats(self, step: int, role: str, layer: str, vector: np.ndarray, position: Optional[int] = None,
                    shape: Optional[Sequence[int]] = None, wall_time: Optional[float] = None) -> None:
        try:
            from tensorboard.compat.proto import event_pb2

            tag = tag_for(role, layer)
            with self._lock:
                events = self._ensure()
                # Built only for the tag's first event, the one that keeps it.
                meta = None if events.described(tag) else summary_metadata(role, layer, position, shape)
                event = event_pb2.Event(step=int(step), wall_time=wall_time or time.time(),
                                        summary=tensor_summary(tag, vector, meta))
                events.add_event(event)
        except Exception as e:  # noqa: BLE001 - never raise into training
            self._fail(f"write {role} statistics of {layer}", e)

    def write_scalar(self, step: int, tag: str, value: float) -> None:
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2

            event = event_pb2.Event(step=int(step), wall_time=time.time(),
                                    summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(
                                        tag=tag, simple_value=float(value))]))
            with self._lock:
                self._ensure().add_event(event)
        except Exception as e:  # noqa: BLE001
            self._fail(f"write scalar {tag}", e)

    def write_summary(self, step: int, summary, what: str = "a summary") -> None:
        """Writes a ready ``Summary`` proto at `step` (such as `format.stop_summary`)."""
        try:
            from tensorboard.compat.proto import event_pb2

            event = event_pb2.Event(step=int(step), wall_time=time.time(), summary=summary)
            with self._lock:
                self._ensure().add_event(event)
        except Exception as e:  # noqa: BLE001
            self._fail(f"write {what}", e)

    def flush(self) -> None:
        try:
            with self._lock:
                if self._writer is not None:
                    self._writer.flush()
                    if self._writer.gone():
                        # Its directory was deleted: what follows goes to a new file, as with TensorFlow's writer.
                        self._writer.close()
                        self._writer = None
        except Exception as e:  # noqa: BLE001
            self._fail("flush the event file", e)

    def close(self) -> None:
        try:
            with self._lock:
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
        except Exception as e:  # noqa: BLE001
            self._fail("close the event file", e)
