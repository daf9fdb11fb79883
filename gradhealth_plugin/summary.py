"""gradhealth's own summaries: exact statistics of a watched tensor at a step.

One summary per (tensor, step): tag ``gradhealth/<role>/<layer>``, plugin name
``gradhealth``, data class TENSOR (both TensorBoard loaders drop tensor
summaries without it), and a float64 vector whose fields are `FIELDS` in
order. The metadata's JSON content says the format version, the role, the
layer, its position in the model and the tensor's shape.

This module needs only tensorboard and numpy: the TensorFlow and PyTorch
integrations compute the vector with their own ops (on the device) and hand it
here or to ``tf.summary.write``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import threading
import time
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from . import metadata

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
TAG_PREFIX = "gradhealth/"
FIELDS = (
    "count", "mean", "std", "min", "max", "l2", "zero_fraction", "small_fraction",
    "nan_count", "inf_count", "skewness", "kurtosis", "mean_abs", "max_abs", "update_ratio",
)
SMALL = 1e-6


def tag_for(role: str, layer: str) -> str:
    return f"{TAG_PREFIX}{role}/{layer}"


def metadata_content(role: str, layer: str, position: Optional[int] = None,
                     shape: Optional[Sequence[int]] = None) -> bytes:
    content = {"version": FORMAT_VERSION, "role": role, "layer": layer, "fields": list(FIELDS)}
    if position is not None:
        content["position"] = int(position)
    if shape is not None:
        content["shape"] = [int(s) for s in shape]
    return json.dumps(content, sort_keys=True).encode("utf-8")


def parse_metadata(content: bytes) -> Optional[Dict]:
    """The metadata dict, or None when it is not a gradhealth summary we can read."""
    try:
        parsed = json.loads(bytes(content).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or parsed.get("version") != FORMAT_VERSION:
        return None
    if not isinstance(parsed.get("role"), str) or not isinstance(parsed.get("layer"), str):
        return None
    return parsed


def summary_metadata(role: str, layer: str, position: Optional[int] = None, shape: Optional[Sequence[int]] = None):
    """A ``SummaryMetadata`` proto for a gradhealth summary."""
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=metadata.PLUGIN_NAME, content=metadata_content(role, layer, position, shape)),
        data_class=summary_pb2.DATA_CLASS_TENSOR,
    )


def stats_numpy(x: np.ndarray, before: Optional[np.ndarray] = None) -> np.ndarray:
    """The exact statistics vector of an array (the reference the integrations match).

    Moments and norms are over the finite values; NaN and Inf are counted, not
    propagated, so one bad value does not hide the rest of the tensor.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    finite = x[np.isfinite(x)]
    n = finite.size
    out = np.full(len(FIELDS), np.nan)
    out[FIELDS.index("count")] = x.size
    out[FIELDS.index("nan_count")] = np.isnan(x).sum()
    out[FIELDS.index("inf_count")] = np.isinf(x).sum()
    if n:
        mean = finite.mean()
        centered = finite - mean
        var = np.mean(centered ** 2)
        std = np.sqrt(var)
        values = {
            "mean": mean, "std": std, "min": finite.min(), "max": finite.max(),
            "l2": np.sqrt(np.sum(finite ** 2)),
            "zero_fraction": np.mean(finite == 0), "small_fraction": np.mean(np.abs(finite) < SMALL),
            "skewness": np.mean(centered ** 3) / var ** 1.5 if var > 0 else np.nan,
            "kurtosis": np.mean(centered ** 4) / var ** 2 - 3 if var > 0 else np.nan,
            "mean_abs": np.mean(np.abs(finite)), "max_abs": np.max(np.abs(finite)),
        }
        for name, value in values.items():
            out[FIELDS.index(name)] = value
    if before is not None:
        out[FIELDS.index("update_ratio")] = update_ratio_numpy(before, x)
    return out


def update_ratio_numpy(before: np.ndarray, after: np.ndarray) -> float:
    before = np.asarray(before, dtype=np.float64).ravel()
    after = np.asarray(after, dtype=np.float64).ravel()
    norm = np.linalg.norm(before)
    return float(np.linalg.norm(after - before) / norm) if norm > 0 else float("nan")


def tensor_summary(tag: str, vector: np.ndarray, meta) -> "object":
    """A ``Summary`` proto holding one statistics vector."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    value = summary_pb2.Summary.Value(tag=tag, metadata=meta,
                                      tensor=tensor_util.make_tensor_proto(np.asarray(vector, dtype=np.float64)))
    return summary_pb2.Summary(value=[value])


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
        from tensorboard.summary.writer.record_writer import RecordWriter

        name = "events.out.tfevents.%010d.%s.%s.%s%s" % (
            time.time(), socket.gethostname(), os.getpid(), next(self._uid), suffix)
        if "://" in logdir:
            from tensorboard.compat.tensorflow_stub.io import gfile

            gfile.makedirs(logdir)
            self._file = gfile.GFile(logdir.rstrip("/") + "/" + name, "wb")
        else:
            os.makedirs(logdir, exist_ok=True)
            self._file = open(os.path.join(logdir, name), "wb")
        self._records = RecordWriter(self._file)
        self._described: set = set()
        # file_version 2 makes both loaders trust step order instead of purging "restarts".
        self.add_event(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

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


def report_failure(owner, what: str, error: BaseException) -> None:
    """Counts a logging failure on `owner` (``errors``) and warns about the first one only.

    The integrations must never raise into training, and a failure that
    repeats every step must not flood the log either.
    """
    owner.errors += 1
    if not owner._warned:
        owner._warned = True
        logger.warning("gradhealth: could not %s (%s); training continues, further errors are not shown",
                       what, error)
    else:
        logger.debug("gradhealth: could not %s: %s", what, error)


class SummaryFileWriter:
    """Writes gradhealth summaries to an event file without TensorFlow.

    Every method swallows and logs its own errors (disk full, a closed file):
    logging must never break the training it watches. The first failure is
    logged as a warning, later ones at debug level.
    """

    def __init__(self, logdir: str, filename_suffix: str = "") -> None:
        self._logdir = logdir
        self._suffix = filename_suffix
        self._writer = None
        self._lock = threading.Lock()
        self._warned = False
        self.errors = 0

    def _fail(self, what: str, error: BaseException) -> None:
        report_failure(self, what, error)

    def _ensure(self):
        if self._writer is None:
            self._writer = EventFile(self._logdir, self._suffix)
        return self._writer

    def write_stats(self, step: int, role: str, layer: str, vector: np.ndarray, position: Optional[int] = None,
                    shape: Optional[Sequence[int]] = None, wall_time: Optional[float] = None) -> None:
        try:
            from tensorboard.compat.proto import event_pb2

            meta = summary_metadata(role, layer, position, shape)
            event = event_pb2.Event(step=int(step), wall_time=wall_time or time.time(),
                                    summary=tensor_summary(tag_for(role, layer), vector, meta))
            with self._lock:
                self._ensure().add_event(event)
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

    def flush(self) -> None:
        try:
            with self._lock:
                if self._writer is not None:
                    self._writer.flush()
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


def vectors_to_table_values(vectors: np.ndarray, fields: Sequence[str] = FIELDS) -> Mapping[str, np.ndarray]:
    """Stacked statistics vectors (N, F) to metric arrays named as `metrics.METRICS`."""
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2:
        vectors = vectors.reshape(len(vectors), -1)
    col = {name: vectors[:, i] if i < vectors.shape[1] else np.full(len(vectors), np.nan)
           for i, name in enumerate(fields)}
    nan = np.full(len(vectors), np.nan)
    values = {name: col.get(name, nan) for name in (
        "count", "mean", "std", "min", "max", "l2", "zero_fraction", "small_fraction", "skewness", "kurtosis",
        "mean_abs", "max_abs", "update_ratio")}
    values["nonfinite"] = np.nan_to_num(col.get("nan_count", nan)) + np.nan_to_num(col.get("inf_count", nan))
    return values
