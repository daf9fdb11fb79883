"""Answers written as JSON a piece at a time: a large matrix is never held whole as Python lists.

A heatmap at full resolution is millions of cells; as nested lists of Python floats it takes about
six times the bytes of its JSON, and its JSON text twice more (str, then UTF-8). An answer may hold
`Rows` at its top level instead: each row's list is made, written and dropped in turn, straight into
the gzip stream (`gzipped`), so what is held is the compressed answer and one row.
"""

from __future__ import annotations

import gzip
import io
import json
from typing import Iterable, Iterator, Mapping, Tuple

_COMPACT = {"allow_nan": False, "separators": (",", ":")}


class Rows:
    """A matrix (a JSON list of rows) whose rows are made as it is written; it is written once."""

    __slots__ = ("rows",)

    def __init__(self, rows: Iterable[list]) -> None:
        self.rows = rows


def pieces(answer: object) -> Iterator[str]:
    """`answer` as compact, NaN-free JSON text, in pieces; `Rows` at its top level are written row by row
    (after its other keys: key order means nothing in JSON)."""
    if not isinstance(answer, Mapping) or not any(isinstance(v, Rows) for v in answer.values()):
        yield json.dumps(answer, **_COMPACT)
        return
    plain = {key: value for key, value in answer.items() if not isinstance(value, Rows)}
    head = json.dumps(plain, **_COMPACT)
    yield head[:-1]
    sep = "," if plain else ""
    for key, value in answer.items():
        if isinstance(value, Rows):
            yield f"{sep}{json.dumps(key)}:["
            for i, row in enumerate(value.rows):
                yield ("," if i else "") + json.dumps(row, **_COMPACT)
            yield "]"
            sep = ","
    yield "}"


def gzipped(answer: object, level: int) -> Tuple[bytes, int]:
    """`pieces` of `answer`, UTF-8, gzipped at `level` (the header without a time, as `gzip.compress(...,
    mtime=0)` writes it), and the length of the JSON before gzip."""
    out, length = io.BytesIO(), 0
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=level, mtime=0) as stream:
        for piece in pieces(answer):
            data = piece.encode("utf-8")
            length += len(data)
            stream.write(data)
    return out.getvalue(), length
