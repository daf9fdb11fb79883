"""Per-tag metric tables, computed incrementally from histogram samples.

A tag's samples arrive as datums (anything with ``step``, ``wall_time`` and
``numpy``). Rows an earlier table already holds (same step, same wall time)
are reused; only the new rows have their buckets turned into metrics, and tags
with few new rows share one vectorised pass.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..analysis import metrics

# Tags with fewer new rows than this have their metrics computed together, up
# to _BATCH_ROWS rows at a time: a run of thousands of tags with a few steps
# each would otherwise pay numpy's per-call overhead thousands of times. Tags
# with more rows go alone (large arrays spill the CPU cache; nothing to gain).
_BATCH_ROWS = 4096
_ALONE_ROWS = 256


def _table_nbytes(table: metrics.MetricTable) -> int:
    return int(table.steps.nbytes + sum(v.nbytes for v in table.values.values())
               + sum(q.nbytes for q in table.quality.values()))


@dataclasses.dataclass
class TagMetrics:
    """One histogram tag's metric table and the wall time of each of its rows."""

    table: metrics.MetricTable
    wall_times: np.ndarray

    @property
    def nbytes(self) -> int:
        return _table_nbytes(self.table) + int(self.wall_times.nbytes)


@dataclasses.dataclass
class Pending:
    """One histogram tag just read: its kept rows, which of them need metrics, where the others come from."""

    key: tuple
    version: tuple
    bimodal: bool
    steps: np.ndarray
    walls: np.ndarray
    fresh: np.ndarray  # rows to compute
    arrays: list  # their bucket arrays
    source: np.ndarray  # per row: the row of `previous` to reuse, or -1
    previous: Optional[TagMetrics]
    width: int  # most buckets in one fresh row


def last_per_step(datums: Sequence) -> list:
    """The datums by step, one per step: the last written where a writer logged one step several times.

    Some writers never advance their step (every epoch logged at step 51); TensorBoard's
    Python loader keeps every such sample, its Rust data server only the last. Keeping
    the last under both makes a row's steps an axis (one value per step), the same
    whichever loader TensorBoard uses.
    """
    ordered = sorted(datums, key=lambda d: d.step)  # stable: write order within a step
    return [d for d, nxt in zip(ordered, ordered[1:] + [None]) if nxt is None or nxt.step != d.step]


def pending(key: tuple, version: tuple, bimodal: bool, datums: Sequence, previous: Optional[TagMetrics]) -> Pending:
    """Sorts a tag's datums by step and finds the rows an earlier result already has.

    A row is reused when its step and wall time are both still there: when a run
    grows, the loaders keep most old samples, and only new steps need their
    buckets turned into metrics.
    """
    datums = last_per_step(datums)
    n = len(datums)
    steps = np.array([d.step for d in datums], dtype=np.int64)
    walls = np.array([d.wall_time for d in datums], dtype=np.float64)
    source = np.full(n, -1, dtype=np.int64)
    if previous is not None and ("bimodal_dip" in previous.table.values) != bimodal:
        previous = None
    if previous is not None and len(previous.table.steps) and n:
        old_steps = previous.table.steps
        at = np.minimum(np.searchsorted(old_steps, steps), len(old_steps) - 1)
        same = (old_steps[at] == steps) & (previous.wall_times[at] == walls)
        source = np.where(same, at, -1)
    fresh = np.flatnonzero(source < 0)
    arrays = [datums[i].numpy for i in fresh]
    shapes = {getattr(a, "shape", ()) for a in arrays}
    width = max((shape[0] for shape in shapes if len(shape)), default=0)
    return Pending(key=key, version=version, bimodal=bimodal, steps=steps, walls=walls, fresh=fresh, arrays=arrays,
                   source=source, previous=previous, width=width)


def _select_rows(h: metrics.Histograms, rows: np.ndarray) -> metrics.Histograms:
    return dataclasses.replace(h, **{f.name: getattr(h, f.name)[rows] for f in dataclasses.fields(h)
                                     if getattr(h, f.name) is not None})


def _batch_dip(h: metrics.Histograms, parts: List[Pending], starts: np.ndarray, ends: np.ndarray
               ) -> Optional[np.ndarray]:
    """The bimodality dip of the rows of tags that want it (NaN elsewhere); None if none does."""
    if not any(p.bimodal for p in parts):
        return None
    rows = np.concatenate([np.arange(s, e) for s, e, p in zip(starts, ends, parts) if p.bimodal])
    dip = np.full(len(h.steps), np.nan)
    dip[rows] = metrics.bimodal_dip(_select_rows(h, rows))
    return dip


def _batch_l2_bounds(h: metrics.Histograms, parts: List[Pending], starts: np.ndarray, ends: np.ndarray
                     ) -> Optional[tuple]:
    """The proven L2 interval (`metrics.l2_bounds`) of the rows of weight tags (NaN elsewhere); None if none."""
    if not any(p.bimodal for p in parts):
        return None
    rows = np.concatenate([np.arange(s, e) for s, e, p in zip(starts, ends, parts) if p.bimodal])
    low, high = np.full(len(h.steps), np.nan), np.full(len(h.steps), np.nan)
    low[rows], high[rows] = metrics.l2_bounds(_select_rows(h, rows))
    return low, high


def _bound_columns(bounds: tuple, s: int, e: int) -> tuple:
    """(values, quality) of the l2_low / l2_high columns for rows s:e."""
    values = {"l2_low": bounds[0][s:e].copy(), "l2_high": bounds[1][s:e].copy()}
    quality = {name: np.where(np.isfinite(v), code, metrics.NO_DATA).astype(np.uint8)
               for (name, v), code in zip(values.items(), (metrics.LOWER_BOUND, metrics.UPPER_BOUND))}
    return values, quality


def _fresh_tables(parts: List[Pending]) -> List[metrics.MetricTable]:
    """Metrics of the fresh rows of several tags, computed in one pass and split per tag."""
    lengths = np.array([len(p.fresh) for p in parts], dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    h = metrics.stack_histograms(np.concatenate([p.steps[p.fresh] for p in parts]),
                                 np.concatenate([p.walls[p.fresh] for p in parts]),
                                 [a for p in parts for a in p.arrays])
    table = metrics.histogram_metrics(h)
    dip = _batch_dip(h, parts, starts, ends)
    # Weight tags (the ones that want the dip) also get the proven L2 interval the
    # update ratio's lower bound needs: the buckets are not kept after this pass.
    bounds = _batch_l2_bounds(h, parts, starts, ends)
    if len(parts) == 1:
        if dip is not None:
            table.values["bimodal_dip"] = dip
            table.quality["bimodal_dip"] = table.quality["std"]
            values, quality = _bound_columns(bounds, 0, len(h.steps))
            table.values.update(values)
            table.quality.update(quality)
        return [table]
    out = []
    for s, e, p in zip(starts, ends, parts):
        # Copies: a cached tag must not keep the whole batch alive.
        values = {name: v[s:e].copy() for name, v in table.values.items()}
        quality = {name: q[s:e].copy() for name, q in table.quality.items()}
        metrics.add_std_rel_first(values, quality)  # relative to this tag's first step, not the batch's
        if p.bimodal:
            values["bimodal_dip"] = dip[s:e].copy()
            quality["bimodal_dip"] = quality["std"]
            bound_values, bound_quality = _bound_columns(bounds, s, e)
            values.update(bound_values)
            quality.update(bound_quality)
        out.append(metrics.MetricTable(steps=h.steps[s:e].copy(), values=values, quality=quality,
                                       first_wall=float(h.wall_times[s]) if e > s else None))
    return out


def _assemble(p: Pending, fresh: metrics.MetricTable) -> TagMetrics:
    """The tag's full table: the fresh rows' metrics with the reused rows of its previous table."""
    n = len(p.steps)
    if len(p.fresh) == n:
        return TagMetrics(table=fresh, wall_times=p.walls)
    old = p.previous.table
    kept = np.flatnonzero(p.source >= 0)
    values, quality = {}, {}
    for name, v_new in fresh.values.items():
        if name == "std_rel_first":
            continue
        v = np.empty(n, dtype=v_new.dtype)
        v[p.fresh], v[kept] = v_new, old.values[name][p.source[kept]]
        q = np.empty(n, dtype=np.uint8)
        q[p.fresh], q[kept] = fresh.quality[name], old.quality[name][p.source[kept]]
        values[name], quality[name] = v, q
    metrics.add_std_rel_first(values, quality)
    table = metrics.MetricTable(steps=p.steps, values=values, quality=quality, first_wall=float(p.walls[0]))
    return TagMetrics(table=table, wall_times=p.walls)


def compute(pending_tags: List[Pending]) -> List[TagMetrics]:
    """Every pending tag's full table; tags with few new rows are computed in batches."""
    fresh: List[Optional[metrics.MetricTable]] = [None] * len(pending_tags)
    by_width: Dict[int, List[int]] = collections.defaultdict(list)
    for i, p in enumerate(pending_tags):
        if len(p.fresh) >= _ALONE_ROWS:
            fresh[i] = _fresh_tables([p])[0]
        else:
            # Batch-mates padded to a similar bucket count: at most twice the work of their own.
            by_width[max(p.width, 1).bit_length()].append(i)
    for members in by_width.values():
        batch: List[int] = []
        rows = 0
        for i in members + [None]:
            if i is None or (batch and rows + len(pending_tags[i].fresh) > _BATCH_ROWS):
                for j, table in zip(batch, _fresh_tables([pending_tags[j] for j in batch])):
                    fresh[j] = table
                batch, rows = [], 0
            if i is not None:
                batch.append(i)
                rows += len(pending_tags[i].fresh)
    return [_assemble(p, table) for p, table in zip(pending_tags, fresh)]


def copy_table(table: metrics.MetricTable) -> metrics.MetricTable:
    """A table whose dicts can be extended without touching the cached one."""
    return metrics.MetricTable(steps=table.steps, values=dict(table.values), quality=dict(table.quality),
                               first_wall=table.first_wall)
