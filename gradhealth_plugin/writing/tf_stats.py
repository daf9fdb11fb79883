"""Exact statistics of TensorFlow tensors, computed on the device with TensorFlow ops.

Rows follow `format.FIELDS`, then the histogram's counts (`format.HISTOGRAM_BUCKETS`),
and match `reference.stats_numpy`. The
TensorFlow helper (`gradhealth_plugin.tf`, which exports the public
functions) and the Keras callback both compute their rows here, eagerly or
inside ``tf.function``.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from . import format as fmt
from .format import FIELDS, HISTOGRAM_BUCKETS, SMALL

# Nothing here branches on tensor values in Python: AutoGraph conversion would
# only add seconds to every trace of the user's train step.
plain = tf.autograph.experimental.do_not_convert

_F = len(FIELDS)
_INDEX = {name: i for i, name in enumerate(FIELDS)}

# Tensors below `_SHARED` elements are reduced together, up to `_CHUNK`
# elements at a time, with segment ops: one set of ops for many biases keeps
# tracing fast. Larger tensors are reduced alone with plain reductions, which
# run several times faster than segment ops on CPU.
_SHARED = 1 << 12
_CHUNK = 1 << 20


@plain
def stats_tf(x, before=None) -> tf.Tensor:
    """The statistics vector of a tensor, float64, fields `FIELDS` in order.

    Matches `reference.stats_numpy`: NaN and Inf are counted, moments and norms
    are over the finite values, and no input makes an op fail (an empty or
    all-NaN tensor gives NaN moments). With `before`, update_ratio is
    ||x - before|| / ||before|| (NaN when ||before|| is 0 or not finite).
    """
    row = stats_many_tf([x])
    if before is not None:
        row = with_update_ratio(row, update_ratio_many_tf([before], [x]))
    return row[0]


@plain
def weight_stats_tf(before, after) -> tf.Tensor:
    """Statistics of a variable before an update, with that update's ratio ||after - before|| / ||before||.

    The weight row of a step then describes the values the step's gradient
    was computed at, as the PyTorch integration does.
    """
    return weight_stats_many_tf([before], [after])[0]


@plain
def stats_many_tf(tensors: Sequence) -> tf.Tensor:
    """`stats_tf` of several tensors, one row each ([len(tensors), len(FIELDS)]), with few ops."""
    tensors = list(tensors)
    if not tensors:
        return tf.zeros([0, _F + HISTOGRAM_BUCKETS], tf.float64)
    buckets = _buckets(tensors)
    rows, samples, first = [], [], 0
    for bucket in buckets:
        bucket_rows, sample = _bucket_stats([tensors[i] for i in bucket], first)
        rows.append(bucket_rows)
        samples.append(sample)
        first += len(bucket)
    stats = tf.concat(rows, 0) if len(rows) > 1 else rows[0]
    # Every tensor's histogram in one set of ops: per bucket of tensors they cost more than their values.
    return _in_order([tf.concat([stats, _histograms(samples, stats)], 1)], buckets)


@plain
def weight_stats_many_tf(befores: Sequence, afters: Sequence) -> tf.Tensor:
    """`weight_stats_tf` of several variables, one row each."""
    rows = stats_many_tf(befores)
    return with_update_ratio(rows, update_ratio_many_tf(befores, afters, rows))


@plain
def update_ratio_tf(before, after) -> tf.Tensor:
    """||after - before|| / ||before|| in float64; NaN when ||before|| is 0 or not finite."""
    return update_ratio_many_tf([before], [after])[0]


@plain
def update_ratio_many_tf(befores: Sequence, afters: Sequence, before_stats: Optional[tf.Tensor] = None) -> tf.Tensor:
    """`update_ratio_tf` per pair ([len(befores)]).

    `before_stats` (`stats_many_tf(befores)`) saves recomputing ||before||.
    """
    befores, afters = list(befores), list(afters)
    if not befores:
        return tf.zeros([0], tf.float64)
    if before_stats is None:
        before_stats = stats_many_tf(befores)
    changes = []
    buckets = _buckets(befores)
    for bucket in buckets:
        before, ids, sizes = _segments([_flat64(befores[i]) for i in bucket])
        after, _, _ = _segments([_flat64(afters[i]) for i in bucket])
        changes.append(_segment("sum", tf.math.squared_difference(after, before), ids, len(bucket)))
    change = tf.sqrt(_in_order(changes, buckets))
    # ||before|| over all values: NaN or Inf in `before` makes the ratio NaN, as in numpy.
    norm = before_stats[:, _INDEX["l2"]]
    clean = tf.equal(before_stats[:, _INDEX["nan_count"]] + before_stats[:, _INDEX["inf_count"]], 0.0)
    ok = clean & (norm > 0)
    return tf.where(ok, change / tf.where(ok, norm, tf.ones_like(norm)), tf.constant(np.nan, tf.float64))


def with_update_ratio(rows: tf.Tensor, ratios: tf.Tensor) -> tf.Tensor:
    """`rows` with their update_ratio column replaced by `ratios`."""
    # update_ratio is the last field (the histogram follows): replacing the column is one concat.
    assert _INDEX["update_ratio"] == _F - 1
    return tf.concat([rows[:, :_F - 1], ratios[:, None], rows[:, _F:]], 1)


def _flat64(t) -> tf.Tensor:
    if isinstance(t, tf.IndexedSlices):
        t = tf.convert_to_tensor(t)
    return tf.reshape(tf.cast(t, tf.float64), [-1])


def _in_order(rows: List[tf.Tensor], buckets: List[List[int]]) -> tf.Tensor:
    """Per-bucket results concatenated back into the order of the tensors."""
    stacked = tf.concat(rows, 0) if len(rows) > 1 else rows[0]
    order = [i for bucket in buckets for i in bucket]
    if order == sorted(order):
        return stacked
    return tf.gather(stacked, np.argsort(order))


def _buckets(tensors: Sequence) -> List[List[int]]:
    """Groups of indices reduced together: small tensors share, large or unknown-size ones are alone.

    Rows come out bucket by bucket; `_in_order` puts them back in order.
    """
    out, current, total = [], [], 0
    for i, t in enumerate(tensors):
        shape = getattr(t, "shape", None)
        n = tf.TensorShape(shape).num_elements() if shape is not None else None
        if n is None or n >= _SHARED:
            out.append([i])
            continue
        if current and total + n > _CHUNK:
            out.append(current)
            current, total = [], 0
        current.append(i)
        total += n
    if current:
        out.append(current)
    return out


def _segments(flats: List[tf.Tensor]):
    """(values concatenated, sorted segment id of each value or None for one tensor, size of each segment)."""
    sizes = tf.stack([tf.size(f, out_type=tf.int64) for f in flats])
    if len(flats) == 1:
        return flats[0], None, sizes
    return tf.concat(flats, 0), tf.repeat(tf.range(len(flats), dtype=tf.int64), sizes), sizes


_REDUCE = {"sum": (tf.math.segment_sum, tf.reduce_sum), "min": (tf.math.segment_min, tf.reduce_min),
           "max": (tf.math.segment_max, tf.reduce_max)}


def _segment(kind: str, values, ids, k: int) -> tf.Tensor:
    """A per-segment reduction with exactly k rows (`ids` None: one segment, a plain reduction).

    Sorted segment ops are faster than the unsorted ones but stop at the last
    id present: trailing empty segments are padded (masked as "no finite
    value" later).
    """
    segment_op, reduce_op = _REDUCE[kind]
    if ids is None:
        return tf.reshape(reduce_op(values), [1])
    out = segment_op(values, ids)
    return tf.pad(out, [[0, k - tf.shape(out, out_type=tf.int64)[0]]])


def _spread(per_segment, ids, sizes):
    """Each segment's value repeated over its elements (a broadcast scalar for one segment)."""
    return per_segment[0] if ids is None else tf.repeat(per_segment, sizes)


def _bucket_stats(tensors: List, first: int) -> tuple:
    """[len(tensors), F] statistics of tensors reduced together, and their histograms' sample
    (`_sample`; `first` is the first tensor's row among all the buckets').

    Each element is read about 20 times: the cost of a logged step is these
    passes, so the usual case (every value finite) skips the masking. A sum
    is finite exactly when every value is (float64 sums of float32 values
    cannot overflow; a float64 overflow only takes the masked branch, which
    is also exact).
    """
    k = len(tensors)
    x, ids, sizes = _segments([_flat64(t) for t in tensors])
    total = _segment("sum", x, ids, k)
    rows = tf.cond(tf.reduce_all(tf.math.is_finite(total)),
                   lambda: _finite_stats(x, ids, sizes, total, k),
                   lambda: _masked_stats(x, ids, sizes, k))
    return rows, _sample(x, ids, first)


def _gather(x, indices) -> tf.Tensor:
    """x[indices]; zeros (not counted) for an empty x, which has no index to read."""
    size = x.shape.num_elements()
    if size is None:  # known only when the step runs
        return tf.cond(tf.size(x) > 0, lambda: tf.gather(x, indices), lambda: tf.zeros_like(indices, x.dtype))
    return tf.gather(x, indices) if size else tf.zeros_like(indices, x.dtype)


class _Ops:
    """The array functions `format.sample_indices_of` needs, as TensorFlow ops."""

    int64 = tf.int64
    minimum, maximum, where = tf.minimum, tf.maximum, tf.where

    @staticmethod
    def arange(n, dtype):
        return tf.range(n, dtype=dtype)


def _sample(x, ids, first: int) -> tuple:
    """(values, weights, rows) a bucket's histograms count: a lone tensor's values at
    `format.sample_indices` (computed once, in numpy, when its size is known); the values of tensors
    sharing a bucket, all smaller than the sample, all of them."""
    f64 = tf.float64
    if ids is not None:
        return x, tf.ones_like(x), ids + first
    size = x.shape.num_elements()
    if size is None:  # known only when the step runs
        indices, valid = fmt.sample_indices_of(tf.size(x, out_type=tf.int64), _Ops)
    else:
        indices, valid = (tf.constant(a) for a in fmt.sample_indices_of(np.int64(size), np))
    return _gather(x, indices), tf.cast(valid, f64), tf.fill(tf.shape(indices), tf.constant(first, tf.int64))


def _histograms(samples: List[tuple], stats: tf.Tensor) -> tf.Tensor:
    """[k, HISTOGRAM_BUCKETS]: every tensor's sample counted in `format.histogram_bucket`s and scaled
    to its finite values; `stats` are the k tensors' rows."""
    f64 = tf.float64
    k = tf.shape(stats, out_type=tf.int64)[0]
    x, weight, rows = (tf.concat(part, 0) for part in zip(*samples)) if len(samples) > 1 else samples[0]
    weight *= tf.cast(tf.math.is_finite(x), f64)
    per_sign = fmt.HISTOGRAM_PER_SIGN
    # `format.histogram_bucket`: the octave below max |x| from the ratio's exponent bits.
    biased = tf.bitwise.right_shift(tf.bitcast(tf.abs(x) / tf.gather(stats[:, _INDEX["max_abs"]], rows), tf.int64), 52)
    j = tf.clip_by_value(1022 - biased, 0, per_sign)
    segment = rows * HISTOGRAM_BUCKETS + tf.where(x < 0, j, 2 * per_sign - j)
    counts = tf.reshape(tf.math.unsorted_segment_sum(weight, segment, k * HISTOGRAM_BUCKETS), [-1, HISTOGRAM_BUCKETS])
    finite = stats[:, _INDEX["count"]] - stats[:, _INDEX["nan_count"]] - stats[:, _INDEX["inf_count"]]
    total = tf.reduce_sum(counts, 1)
    scale = tf.where(total > 0, finite / tf.where(total > 0, total, tf.ones_like(total)), tf.zeros_like(total))
    return counts * scale[:, None]


def _finite_stats(x, ids, sizes, total, k: int) -> tf.Tensor:
    f64 = tf.float64
    seg = lambda v: _segment("sum", v, ids, k)  # noqa: E731
    n = tf.cast(sizes, f64)
    safe_n = tf.maximum(n, 1.0)
    mean = total / safe_n
    c = x - _spread(mean, ids, sizes)
    c2 = tf.square(c)
    m2 = seg(c2) / safe_n
    moments = (m2, seg(c2 * c) / safe_n, seg(tf.square(c2)) / safe_n)
    low = _segment("min", x, ids, k)
    high = _segment("max", x, ids, k)
    absx = tf.abs(x)
    zero = tf.zeros([k], f64)
    return _assemble(k, n, n, mean, moments, low, high,
                     l2=tf.sqrt(m2 * n + n * mean * mean),  # sum x^2 = sum c^2 + n mean^2
                     zeros=seg(tf.cast(tf.equal(x, 0.0), f64)),
                     small=seg(tf.cast(absx < SMALL, f64)),
                     nan_count=zero, inf_count=zero, sum_abs=seg(absx),
                     max_abs=tf.maximum(tf.abs(low), tf.abs(high)))


def _masked_stats(x, ids, sizes, k: int) -> tf.Tensor:
    f64 = tf.float64
    seg = lambda v: _segment("sum", v, ids, k)  # noqa: E731
    finite = tf.math.is_finite(x)
    count = tf.cast(sizes, f64)
    n = seg(tf.cast(finite, f64))
    safe_n = tf.maximum(n, 1.0)
    xf = tf.where(finite, x, tf.constant(0.0, f64))
    mean = seg(xf) / safe_n
    c = tf.where(finite, x - _spread(mean, ids, sizes), tf.constant(0.0, f64))
    c2 = tf.square(c)
    moments = (seg(c2) / safe_n, seg(c2 * c) / safe_n, seg(tf.square(c2)) / safe_n)
    absx = tf.abs(xf)
    nan_count = seg(tf.cast(tf.math.is_nan(x), f64))
    nonfinite = count - n
    # Non-finite values sit at 0 in xf and absx: take them back out of the zero and small counts.
    return _assemble(k, count, n, mean, moments,
                     low=_segment("min", tf.where(finite, x, tf.constant(np.inf, f64)), ids, k),
                     high=_segment("max", tf.where(finite, x, tf.constant(-np.inf, f64)), ids, k),
                     l2=tf.sqrt(seg(tf.square(xf))),
                     zeros=seg(tf.cast(tf.equal(xf, 0.0), f64)) - nonfinite,
                     small=seg(tf.cast(absx < SMALL, f64)) - nonfinite,
                     nan_count=nan_count, inf_count=nonfinite - nan_count, sum_abs=seg(absx),
                     max_abs=_segment("max", absx, ids, k))


def _assemble(k, count, n, mean, moments, low, high, l2, zeros, small, nan_count, inf_count, sum_abs,
              max_abs) -> tf.Tensor:
    """Stacks the columns in FIELDS order; NaN where a tensor has no finite value."""
    f64 = tf.float64
    m2, m3, m4 = moments
    has = n > 0
    safe_n = tf.maximum(n, 1.0)
    positive = m2 > 0
    safe_var = tf.where(positive, m2, tf.ones_like(m2))
    nan = tf.fill([k], tf.constant(np.nan, f64))
    values = {
        "mean": mean, "std": tf.sqrt(m2), "min": low, "max": high, "l2": l2,
        "zero_fraction": zeros / safe_n, "small_fraction": small / safe_n,
        "skewness": tf.where(positive, m3 / tf.pow(safe_var, 1.5), nan),
        "kurtosis": tf.where(positive, m4 / (safe_var * safe_var) - 3.0, nan),
        "mean_abs": sum_abs / safe_n, "max_abs": max_abs,
    }
    columns = [None] * _F
    columns[_INDEX["count"]] = count
    columns[_INDEX["nan_count"]] = nan_count
    columns[_INDEX["inf_count"]] = inf_count
    for name, value in values.items():
        # Empty segments give 0 or the dtype's extremes: NaN says "no finite value".
        columns[_INDEX[name]] = tf.where(has, value, nan)
    columns[_INDEX["update_ratio"]] = nan
    return tf.stack(columns, axis=1)


def read_variable(variable) -> tf.Tensor:
    """The current value of a tf.Variable or a Keras 3 variable as a tensor."""
    value = getattr(variable, "value", None)
    if value is not None and not callable(value):  # Keras 3: `.value` is the backing tf.Variable
        variable = value
    return tf.convert_to_tensor(variable)
