"""Per-tag metric tables, computed incrementally from histogram samples, a chunk of tags at a time.

A tag's samples arrive as datums (anything with ``step``, ``wall_time`` and
``numpy``), or as `Samples`, the same decoded together into arrays. Rows an
earlier table already holds (same step, same wall time) are reused; only the
new rows have their buckets turned into metrics, and tags with few new rows
share one vectorised pass.

A chunk's samples are laid out flat, one row per sample and each tag a
contiguous range of rows: a run of 20,000 tags then costs numpy calls per
batch of tags, not per tag, and each tag's table is a view of its batch's
columns rather than a copy.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import itertools
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from tensorboard.data import provider

from ..analysis import metrics

# Tags with fewer new rows than this have their metrics computed together, up
# to _BATCH_ROWS rows at a time: a run of thousands of tags with a few steps
# each would otherwise pay numpy's per-call overhead thousands of times. Tags
# with more rows go alone (large arrays spill the CPU cache; nothing to gain).
_BATCH_ROWS = 4096
_ALONE_ROWS = 256
# The columns only weight tags get (see `_weight_columns`), in the order tables list them.
_WEIGHT_COLUMNS = ("bimodal_dip", "l2_low", "l2_high")


def _table_nbytes(table: metrics.MetricTable) -> int:
    return int(table.steps.nbytes + sum(v.nbytes for v in table.values.values())
               + sum(q.nbytes for q in table.quality.values()))


@dataclasses.dataclass
class TagMetrics:
    """One histogram tag's metric table and the wall time of each of its rows."""

    table: metrics.MetricTable
    wall_times: np.ndarray
    # Bytes per row, where the batch that computed the table knows them: summing
    # the columns of 20,000 tables one by one costs more than computing them.
    row_bytes: Optional[int] = None
    # (step, why) of each row whose tensor is no histogram (`bad_rows`), by step: no data in the table.
    bad: Tuple[Tuple[int, str], ...] = ()

    @property
    def nbytes(self) -> int:
        rows = (self.row_bytes * len(self.wall_times) if self.row_bytes is not None
                else _table_nbytes(self.table) + int(self.wall_times.nbytes))
        return rows + sum(64 + len(why) for _, why in self.bad)


class Samples(collections.abc.Sequence):
    """One tag's samples decoded together: what `read_tensors` gives for it, as arrays.

    ``values[i]`` is the tensor of the i-th sample (``values`` has the samples'
    common shape after their count). Read as a sequence, it gives the datums
    `read_tensors` would, so a reader that needs them one by one need not know;
    the metric tables take the arrays as they are.
    """

    def __init__(self, steps: np.ndarray, wall_times: np.ndarray, values: np.ndarray) -> None:
        self.steps, self.wall_times, self.values = steps, wall_times, values

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return provider.TensorDatum(step=int(self.steps[i]), wall_time=float(self.wall_times[i]),
                                    numpy=self.values[i])


@dataclasses.dataclass
class TagRead:
    """One histogram tag just read: its samples and what an earlier read left for it."""

    key: tuple
    version: tuple
    bimodal: bool  # a weight tag: it gets the bimodality dip and the proven L2 interval
    datums: Sequence
    previous: Optional[TagMetrics]


def last_per_step(datums: Sequence) -> list:
    """The datums by step, one per step: the last written where a writer logged one step several times.

    Some writers never advance their step (every epoch logged at step 51); TensorBoard's
    Python loader keeps every such sample, its Rust data server only the last. Keeping
    the last under both makes a row's steps an axis (one value per step), the same
    whichever loader TensorBoard uses.
    """
    ordered = sorted(datums, key=lambda d: d.step)  # stable: write order within a step
    return [d for d, nxt in zip(ordered, ordered[1:] + [None]) if nxt is None or nxt.step != d.step]


@dataclasses.dataclass
class _Rows:
    """A chunk's samples, flat: tag i's rows are starts[i]:ends[i], its steps ascending and unique.

    Each row's tensor is ``arrays[row]``, or, where every tag came as `Samples`
    of one shape, ``stacked[row]``: one array for the chunk, no object per row.
    """

    steps: np.ndarray
    walls: np.ndarray
    arrays: Optional[list]
    starts: np.ndarray
    ends: np.ndarray
    stacked: Optional[np.ndarray] = None


def _flat_rows(datum_lists: List[Sequence]) -> _Rows:
    lengths = np.fromiter(map(len, datum_lists), dtype=np.int64, count=len(datum_lists))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    decoded = all(isinstance(d, Samples) for d in datum_lists) and len({d.values.shape[1:] for d in datum_lists}) == 1
    if decoded:
        flat = None
        steps = np.concatenate([d.steps for d in datum_lists])
    else:
        flat = list(itertools.chain.from_iterable(datum_lists))
        steps = np.fromiter((d.step for d in flat), dtype=np.int64, count=len(flat))
    # A step that does not rise within a tag (written twice, or listed out of order): that
    # tag alone is put in order with `last_per_step`. Writers almost never do it.
    down = np.flatnonzero(np.diff(steps) <= 0) + 1
    first_rows = np.zeros(len(steps) + 1, dtype=bool)
    first_rows[starts] = True
    down = down[~first_rows[down]]
    if len(down):
        for i in np.unique(np.searchsorted(ends, down, side="right")).tolist():
            datum_lists[i] = last_per_step(datum_lists[i])
        return _flat_rows(datum_lists)
    if decoded:
        return _Rows(steps=steps, walls=np.concatenate([d.wall_times for d in datum_lists]), arrays=None,
                     starts=starts, ends=ends, stacked=np.concatenate([d.values for d in datum_lists]))
    walls = np.fromiter((d.wall_time for d in flat), dtype=np.float64, count=len(flat))
    return _Rows(steps=steps, walls=walls, arrays=[d.numpy for d in flat], starts=starts, ends=ends)


def _reused_rows(rows: _Rows, reads: Sequence[TagRead]) -> np.ndarray:
    """Per row, the row of its tag's previous table holding the same step and wall time, or -1.

    When a run grows, the loaders keep most old samples, and only new steps need
    their buckets turned into metrics.
    """
    source = np.full(len(rows.steps), -1, dtype=np.int64)
    for i, read in enumerate(reads):
        previous = read.previous
        s, e = int(rows.starts[i]), int(rows.ends[i])
        if previous is None or not len(previous.table.steps) or e == s:
            continue
        old_steps, steps = previous.table.steps, rows.steps[s:e]
        at = np.minimum(np.searchsorted(old_steps, steps), len(old_steps) - 1)
        same = (old_steps[at] == steps) & (previous.wall_times[at] == rows.walls[s:e])
        source[s:e] = np.where(same, at, -1)
    return source


def _first_dim(shape: tuple) -> int:
    return shape[0] if len(shape) else 0


def _widths(rows: _Rows, fresh: np.ndarray) -> np.ndarray:
    """Per tag, the most buckets in one of its fresh rows (0 without any)."""
    shapes = {rows.stacked.shape[1:]} if rows.stacked is not None else {getattr(a, "shape", ()) for a in rows.arrays}
    if len(shapes) == 1:  # TF2 writes every histogram with the same number of buckets
        dims = np.full(len(rows.steps), _first_dim(next(iter(shapes))), dtype=np.int64)
    else:
        dims = np.fromiter((_first_dim(getattr(a, "shape", ())) for a in rows.arrays), dtype=np.int64,
                           count=len(rows.arrays))
    dims = np.where(fresh, dims, 0)
    widths = np.zeros(len(rows.starts), dtype=np.int64)
    nonempty = rows.ends > rows.starts
    if nonempty.any():  # empty tags are left out: reduceat would give them the next tag's first row
        widths[nonempty] = np.maximum.reduceat(dims, rows.starts[nonempty])
    return widths


def _batches(fresh_counts: np.ndarray, widths: np.ndarray) -> List[List[int]]:
    """Tags to compute together: alone with many fresh rows, else batch-mates of a similar bucket count."""
    batches: List[List[int]] = []
    by_width: Dict[int, List[int]] = collections.defaultdict(list)
    for i, (count, width) in enumerate(zip(fresh_counts.tolist(), widths.tolist())):
        if count >= _ALONE_ROWS:
            batches.append([i])
        else:
            # Batch-mates padded to a similar bucket count: at most twice the work of their own.
            by_width[max(width, 1).bit_length()].append(i)
    for members in by_width.values():
        batch: List[int] = []
        rows = 0
        for i in members:
            if batch and rows + fresh_counts[i] > _BATCH_ROWS:
                batches.append(batch)
                batch, rows = [], 0
            batch.append(i)
            rows += int(fresh_counts[i])
        if batch:
            batches.append(batch)
    return batches


def _select_rows(h: metrics.Histograms, rows: np.ndarray) -> metrics.Histograms:
    return dataclasses.replace(h, **{f.name: getattr(h, f.name)[rows] for f in dataclasses.fields(h)
                                     if getattr(h, f.name) is not None})


def _weight_columns(h: metrics.Histograms, wanted: np.ndarray) -> tuple:
    """(values, quality) of the weight tags' own columns, over the `wanted` rows of the batch only.

    The bimodality dip, and the proven L2 interval the update ratio's lower bound
    needs: the buckets are not kept after this pass. The dip's quality is the
    std's, which every table has already.
    """
    picked = _select_rows(h, np.flatnonzero(wanted))
    low, high = metrics.l2_bounds(picked)
    values = {"bimodal_dip": metrics.bimodal_dip(picked), "l2_low": low, "l2_high": high}
    quality = {"l2_low": np.where(np.isfinite(low), metrics.LOWER_BOUND, metrics.NO_DATA).astype(np.uint8),
               "l2_high": np.where(np.isfinite(high), metrics.UPPER_BOUND, metrics.NO_DATA).astype(np.uint8)}
    return values, quality


def _row_bytes(h: metrics.Histograms, values: Dict[str, np.ndarray], quality: Dict[str, np.ndarray]) -> int:
    """Bytes per row of a table with these columns and of its wall times."""
    return (h.steps.itemsize + h.wall_times.itemsize + sum(v.itemsize for v in values.values())
            + sum(q.itemsize for q in quality.values()))


def _per_tag(columns: Sequence[np.ndarray], lengths: np.ndarray) -> List[tuple]:
    """Each tag's rows of every column (views), tag by tag: the tags' rows lie one after another.

    Equally long tags (the usual case) are cut by one reshape per column, not a slice per tag and column.
    """
    if len(lengths) and lengths[0] > 0 and (lengths == lengths[0]).all():
        return list(zip(*(list(c.reshape(len(lengths), -1)) for c in columns)))
    bounds = list(zip((np.cumsum(lengths) - lengths).tolist(), np.cumsum(lengths).tolist()))
    return [tuple(c[s:e] for c in columns) for s, e in bounds]


def bad_rows(h: metrics.Histograms, arrays) -> Dict[int, str]:
    """Row -> why its tensor is no histogram, for the rows of `h` (stacked from `arrays`) whose is not: a
    tensor of another shape than buckets, or buckets `metrics.malformed` refuses. Empty in the usual case.

    Said with the row's step, for a person: "negative counts at step 40".
    """
    codes = metrics.malformed(h.left, h.right, h.count)
    out = {int(r): f"{metrics.MALFORMED[codes[r]]} at step {int(h.steps[r])}" for r in np.flatnonzero(codes)}
    if not isinstance(arrays, np.ndarray):  # one array per row: they may differ in shape
        shapes = [np.shape(a) for a in arrays]
        if len(set(shapes)) > 1 or (shapes and metrics.buckets_problem(shapes[0]) is not None):
            for r, shape in enumerate(shapes):
                why = metrics.buckets_problem(shape)
                if why is not None:
                    out[r] = f"the tensor at step {int(h.steps[r])} {why}"
    return out


def _fresh_tables(rows: _Rows, index: np.ndarray, lengths: np.ndarray, bimodal: List[bool]) -> List[tuple]:
    """Metrics of the fresh rows of several tags (`index`: theirs, tag after tag, `lengths` of each), computed
    in one pass; each tag's table a view of its rows.

    Returns (table, bytes per row, `TagMetrics.bad`) per tag. A row whose tensor is no
    histogram (`bad_rows`) is no data in every column.

    Views, not copies: the tags of a batch are cached together, so they hold no
    more than their own rows but for the few tags evicted before their batch-mates.
    """
    arrays = rows.stacked[index] if rows.stacked is not None else [rows.arrays[r] for r in index.tolist()]
    h = metrics.stack_histograms(rows.steps[index], rows.walls[index], arrays)
    bad = bad_rows(h, arrays)
    no_data = None
    if bad:
        no_data = np.zeros(len(h.steps), dtype=bool)
        no_data[list(bad)] = True
        h = metrics.emptied(h, no_data)  # the weight columns below read it too
    table = metrics.histogram_metrics(h, no_data)
    weight_values, weight_quality = {}, {}
    if any(bimodal):
        weight_values, weight_quality = _weight_columns(h, np.repeat(np.asarray(bimodal, dtype=bool), lengths))
    row_bytes = {False: _row_bytes(h, table.values, table.quality),
                 True: _row_bytes(h, {**table.values, **weight_values},
                                  {**table.quality, **weight_quality, "bimodal_dip": table.quality["std"]})}
    names, qualities = list(table.values), list(table.quality)
    own = _per_tag([h.steps] + list(table.values.values()) + list(table.quality.values()), lengths)
    weights = iter(_per_tag([weight_values[name] for name in _WEIGHT_COLUMNS]
                            + [weight_quality[name] for name in _WEIGHT_COLUMNS[1:]],
                            lengths[np.asarray(bimodal, dtype=bool)]) if weight_values else [])
    firsts = np.minimum(np.cumsum(lengths) - lengths, max(len(h.wall_times) - 1, 0))
    # Each tag's bad rows, by its range of the batch's rows (they lie tag after tag, in step order).
    bad_of: Dict[int, list] = collections.defaultdict(list)
    ends = np.cumsum(lengths)
    for r in sorted(bad):
        bad_of[int(np.searchsorted(ends, r, side="right"))].append((int(h.steps[r]), bad[r]))
    first_walls = h.wall_times[firsts].tolist() if len(h.wall_times) else [None] * len(lengths)
    out = []
    for i, (columns, bimodal_tag) in enumerate(zip(own, bimodal)):
        values = dict(zip(names, columns[1:1 + len(names)]))
        quality = dict(zip(qualities, columns[1 + len(names):]))
        if bimodal_tag:
            extra = next(weights)
            values.update(zip(_WEIGHT_COLUMNS, extra[:len(_WEIGHT_COLUMNS)]))
            quality["bimodal_dip"] = quality["std"]
            quality.update(zip(_WEIGHT_COLUMNS[1:], extra[len(_WEIGHT_COLUMNS):]))
        out.append((metrics.MetricTable(steps=columns[0], values=values, quality=quality,
                                        first_wall=first_walls[i] if lengths[i] else None), row_bytes[bimodal_tag],
                    tuple(bad_of.get(i, ()))))
    return out


def _assemble(steps: np.ndarray, walls: np.ndarray, source: np.ndarray, previous: Optional[TagMetrics],
              fresh: metrics.MetricTable, fresh_bad: Tuple[Tuple[int, str], ...]) -> TagMetrics:
    """The tag's full table: the fresh rows' metrics with the reused rows (`source` >= 0) of its previous table."""
    n = len(steps)
    new = np.flatnonzero(source < 0)
    if len(new) == n:
        return TagMetrics(table=fresh, wall_times=walls, bad=fresh_bad)
    old = previous.table
    kept = np.flatnonzero(source >= 0)
    kept_steps = set(steps[kept].tolist())
    bad = tuple(sorted([b for b in previous.bad if b[0] in kept_steps] + list(fresh_bad)))
    values, quality = {}, {}
    for name, v_new in fresh.values.items():
        v = np.empty(n, dtype=v_new.dtype)
        v[new], v[kept] = v_new, old.values[name][source[kept]]
        q = np.empty(n, dtype=np.uint8)
        q[new], q[kept] = fresh.quality[name], old.quality[name][source[kept]]
        values[name], quality[name] = v, q
    table = metrics.MetricTable(steps=steps, values=values, quality=quality, first_wall=float(walls[0]))
    return TagMetrics(table=table, wall_times=walls, bad=bad)


def compute(reads: Sequence[TagRead]) -> List[TagMetrics]:
    """Every read tag's full table, its new rows computed in batches shared with other tags.

    A previous table counts only when it was computed for the same kind of tag
    (with the weight columns or without).
    """
    reads = [read if read.previous is None or ("bimodal_dip" in read.previous.table.values) == read.bimodal
             else dataclasses.replace(read, previous=None) for read in reads]
    rows = _flat_rows([read.datums for read in reads])
    source = _reused_rows(rows, reads)
    fresh = source < 0
    counted = np.concatenate([[0], np.cumsum(fresh)])
    fresh_counts = counted[rows.ends] - counted[rows.starts]
    starts, ends = rows.starts.tolist(), rows.ends.tolist()

    whole = fresh_counts == rows.ends - rows.starts
    read_whole = whole.tolist()

    def fresh_rows(batch: List[int]) -> np.ndarray:
        """The fresh rows of the batch's tags, tag after tag (`_batches` lists a batch's tags in row order)."""
        members = np.asarray(batch, dtype=np.int64)
        if whole[members].all():  # each tag's rows whole: one range per tag, laid end to end
            lengths = fresh_counts[members]
            return np.arange(int(lengths.sum())) + np.repeat(rows.starts[members] - (np.cumsum(lengths) - lengths),
                                                             lengths)
        return np.concatenate([starts[i] + np.flatnonzero(fresh[starts[i]:ends[i]]) for i in batch])

    tables: List[Optional[tuple]] = [None] * len(reads)
    for batch in _batches(fresh_counts, _widths(rows, fresh)):
        computed = _fresh_tables(rows, fresh_rows(batch), fresh_counts[np.asarray(batch, dtype=np.int64)],
                                 [reads[i].bimodal for i in batch])
        for i, table in zip(batch, computed):
            tables[i] = table
    out = []
    for i, (read, (table, row_bytes, bad)) in enumerate(zip(reads, tables)):
        walls = rows.walls[starts[i]:ends[i]]
        if read_whole[i]:
            out.append(TagMetrics(table=table, wall_times=walls, row_bytes=row_bytes, bad=bad))
        else:
            out.append(_assemble(rows.steps[starts[i]:ends[i]], walls, source[starts[i]:ends[i]], read.previous,
                                 table, bad))
    return out


def copy_table(table: metrics.MetricTable) -> metrics.MetricTable:
    """A table whose dicts can be extended without touching the cached one."""
    return metrics.MetricTable(steps=table.steps, values=dict(table.values), quality=dict(table.quality),
                               first_wall=table.first_wall, std_first=table.std_first)
