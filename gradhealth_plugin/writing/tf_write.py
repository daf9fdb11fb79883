"""Rows of gradhealth statistics written with ``tf.summary``, eagerly or inside ``tf.function``."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from .format import summary_metadata, tag_for

# (layer, position in the model, static shape or None) of one row.
Entry = Tuple[str, Optional[int], Optional[Sequence[int]]]


def write_rows(writer, step, role: str, entries: Sequence[Entry], rows) -> List:
    """Writes row j of `rows` as the `role` summary of ``entries[j]``; returns the write ops.

    TensorFlow's writer is used rather than `events.SummaryFileWriter`: its
    C++ side does the record checksums, and the writes can live inside the
    caller's compiled function.
    """
    ops = []
    with writer.as_default():
        for j, (layer, position, shape) in enumerate(entries):
            meta = summary_metadata(role, layer, position, shape).SerializeToString()
            ops.append(tf.summary.write(tag_for(role, layer), rows[j], step=step, metadata=meta))
    return ops
