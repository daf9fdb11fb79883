"""gradhealth summaries from TensorFlow custom training loops.

One line in a ``tf.GradientTape`` loop, eager or inside ``tf.function``::

    from gradhealth_plugin.tf import GradientHealthLogger

    gh = GradientHealthLogger("runs/exp1", every_n_steps=50)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        with gh.step(optimizer.iterations, grads, model.trainable_variables):
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

Every ``every_n_steps`` steps this writes, per variable, the exact statistics
(`summary.FIELDS`) of its gradient and of its value before the update (the
values the gradient was computed at), with the update-to-weight ratio of
exactly that optimizer step. On other steps it costs two ``tf.cond`` ops
that take the empty branch (eagerly: one Python modulo). ``gh.log(step,
grads, variables)`` logs gradients and weights without the update ratio.

The statistics are computed on the device with TensorFlow ops and written
with ``tf.summary.write``, so the same code runs eagerly and in graph mode.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from . import summary

logger = logging.getLogger(__name__)

__all__ = ["stats_tf", "weight_stats_tf", "stats_many_tf", "weight_stats_many_tf", "update_ratio_tf",
           "update_ratio_many_tf", "GradientHealthLogger", "variable_name"]

# Nothing here branches on tensor values in Python: AutoGraph conversion would
# only add seconds to every trace of the user's train step.
_plain = tf.autograph.experimental.do_not_convert

_F = len(summary.FIELDS)
_INDEX = {name: i for i, name in enumerate(summary.FIELDS)}


# Tensors below `_SHARED` elements are reduced together, up to `_CHUNK`
# elements at a time, with segment ops: one set of ops for many biases keeps
# tracing fast. Larger tensors are reduced alone with plain reductions, which
# run several times faster than segment ops on CPU.
_SHARED = 1 << 12
_CHUNK = 1 << 20


@_plain
def stats_tf(x, before=None) -> tf.Tensor:
    """The statistics vector of a tensor, float64, fields `summary.FIELDS` in order.

    Matches `summary.stats_numpy`: NaN and Inf are counted, moments and norms
    are over the finite values, and no input makes an op fail (an empty or
    all-NaN tensor gives NaN moments). With `before`, update_ratio is
    ||x - before|| / ||before|| (NaN when ||before|| is 0 or not finite).
    """
    row = stats_many_tf([x])
    if before is not None:
        row = _with_ratio(row, update_ratio_many_tf([before], [x]))
    return row[0]


@_plain
def weight_stats_tf(before, after) -> tf.Tensor:
    """Statistics of a variable before an update, with that update's ratio ||after - before|| / ||before||.

    The weight row of a step then describes the values the step's gradient
    was computed at, as the PyTorch integration does.
    """
    return weight_stats_many_tf([before], [after])[0]


@_plain
def stats_many_tf(tensors: Sequence) -> tf.Tensor:
    """`stats_tf` of several tensors, one row each ([len(tensors), len(FIELDS)]), with few ops."""
    tensors = list(tensors)
    if not tensors:
        return tf.zeros([0, _F], tf.float64)
    buckets = _buckets(tensors)
    return _in_order([_bucket_stats([tensors[i] for i in bucket]) for bucket in buckets], buckets)


@_plain
def weight_stats_many_tf(befores: Sequence, afters: Sequence) -> tf.Tensor:
    """`weight_stats_tf` of several variables, one row each."""
    rows = stats_many_tf(befores)
    return _with_ratio(rows, update_ratio_many_tf(befores, afters, rows))


@_plain
def update_ratio_tf(before, after) -> tf.Tensor:
    """||after - before|| / ||before|| in float64; NaN when ||before|| is 0 or not finite."""
    return update_ratio_many_tf([before], [after])[0]


@_plain
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


def _with_ratio(rows: tf.Tensor, ratios: tf.Tensor) -> tf.Tensor:
    # update_ratio is the last field: replacing the column is one concat.
    assert _INDEX["update_ratio"] == _F - 1
    return tf.concat([rows[:, :-1], ratios[:, None]], 1)


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


def _bucket_stats(tensors: List) -> tf.Tensor:
    """[len(tensors), F] statistics of tensors reduced together.

    Each element is read about 20 times: the cost of a logged step is these
    passes, so the usual case (every value finite) skips the masking. A sum
    is finite exactly when every value is (float64 sums of float32 values
    cannot overflow; a float64 overflow only takes the masked branch, which
    is also exact).
    """
    k = len(tensors)
    x, ids, sizes = _segments([_flat64(t) for t in tensors])
    total = _segment("sum", x, ids, k)
    return tf.cond(tf.reduce_all(tf.math.is_finite(total)),
                   lambda: _finite_stats(x, ids, sizes, total, k),
                   lambda: _masked_stats(x, ids, sizes, k))


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
                     small=seg(tf.cast(absx < summary.SMALL, f64)),
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
                     small=seg(tf.cast(absx < summary.SMALL, f64)) - nonfinite,
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


def variable_name(variable) -> str:
    """The layer name gradhealth records: Keras 3's ``path``, else the TF name without ``:0``."""
    name = getattr(variable, "path", None) or getattr(variable, "name", None) or "variable"
    return re.sub(r":\d+$", "", str(name))


def _loggable(tensor) -> bool:
    dtype = getattr(tensor, "dtype", None)
    try:
        dtype = tf.as_dtype(dtype)
    except TypeError:
        return False
    return dtype.is_floating or dtype.is_integer or dtype.is_bool


Activations = Union[Mapping[str, tf.Tensor], Sequence[Tuple[str, tf.Tensor]], Sequence[tf.Tensor], None]


class GradientHealthLogger:
    """Logs exact gradient, weight, update-ratio and activation statistics from a custom loop.

    Args:
      logdir: directory of the run to write into, or a writer made by
        ``tf.summary.create_file_writer`` (to share the run's event file).
      every_n_steps: log when ``step % every_n_steps == 0``. Other steps run a
        ``tf.cond`` that takes the empty branch (graph mode) or return at once
        (eager).
      names: optional layer names, one per variable, in the order the
        variables are passed; by default ``variable.path`` (Keras 3) or
        ``variable.name`` without ``:0``.

    Failures never reach the training loop. Outside ``tf.function`` any error
    is caught and logged (a warning the first time, then at debug level).
    Inside ``tf.function`` the logging ops are built so they cannot fail on
    values (NaN, Inf, empty tensors); an error while building them (tracing)
    is caught the same way and the step is traced without logging.
    """

    def __init__(self, logdir, every_n_steps: int = 100, names: Optional[Sequence[str]] = None) -> None:
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1; got {every_n_steps}")
        self.every_n_steps = int(every_n_steps)
        self._names = list(names) if names is not None else None
        self._warned = False
        self.errors = 0
        self._writer = None
        self._owns_writer = False
        if isinstance(logdir, (str, bytes)) or hasattr(logdir, "__fspath__"):
            try:
                self._writer = tf.summary.create_file_writer(str(logdir if not isinstance(logdir, bytes)
                                                                 else logdir.decode()))
                self._owns_writer = True
            except Exception as e:  # noqa: BLE001 - an unwritable logdir must not stop training
                self._fail(f"open a summary writer in {logdir!r}", e)
        else:
            self._writer = logdir

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def _fail(self, what: str, error: BaseException) -> None:
        summary.report_failure(self, what, error)

    # -- public API ---------------------------------------------------------

    @_plain
    @contextlib.contextmanager
    def step(self, step, gradients: Sequence, variables: Sequence, activations: Activations = None):
        """Wraps the optimizer step: snapshots the variables, then logs after the update.

        ``with gh.step(optimizer.iterations, grads, model.trainable_variables):
        optimizer.apply_gradients(...)``. The step number is read on entry, so
        ``optimizer.iterations`` labels the summaries with the step before the
        update. The weight statistics are of the values before the update
        (those the gradients were computed at); their update_ratio is
        ||after - before|| / ||before|| of this update.
        """
        variables = list(variables)
        state = self._enter(step, variables)
        yield
        if state is not None:
            self._exit(state, gradients, variables, activations)

    @_plain
    def snapshot(self, step, variables: Sequence):
        """The variables' values before the update, on logged steps only (for `log`'s `previous_values`).

        Returns an opaque object; pass it back unchanged. Use `step` instead
        when the update happens in one place.
        """
        return self._enter(step, list(variables))

    @_plain
    def log(self, step, gradients: Optional[Sequence] = None, variables: Optional[Sequence] = None,
            activations: Activations = None, previous_values=None) -> None:
        """Logs gradients, weights and activations at `step` if it is a logged step.

        `previous_values` is what `snapshot` returned before the update; with
        it the update ratio is logged too.
        """
        variables = list(variables) if variables is not None else []
        if previous_values is not None:
            self._exit(previous_values, gradients, variables, activations)
            return
        state = self._enter(step, variables, snapshot=False)
        if state is not None:
            self._exit(state, gradients, variables, activations)

    def flush(self) -> None:
        try:
            if self._writer is not None:
                self._writer.flush()
        except Exception as e:  # noqa: BLE001
            self._fail("flush the summary writer", e)

    def close(self) -> None:
        try:
            if self._writer is not None and self._owns_writer:
                self._writer.close()
        except Exception as e:  # noqa: BLE001
            self._fail("close the summary writer", e)

    # -- internals ----------------------------------------------------------

    def _should_log_eager(self, step) -> bool:
        if isinstance(step, (int, np.integer)):
            return int(step) % self.every_n_steps == 0
        return int(tf.convert_to_tensor(step).numpy()) % self.every_n_steps == 0

    @_plain
    def _enter(self, step, variables: List, snapshot: bool = True):
        """Reads the step and, on a logged step, the variables' values.

        Returns None when nothing is to be logged (eager, known on the Python
        side), else a tuple (step tensor, predicate or None, snapshot or None).
        """
        if self._writer is None:
            return None
        eager = tf.executing_eagerly()
        try:
            if eager:
                if not self._should_log_eager(step):
                    return None
                step_t = tf.cast(tf.convert_to_tensor(step), tf.int64)
                before = [tf.identity(_read(v)) for v in variables] if snapshot else None
                return step_t, None, before
            if _in_xla_context():
                self._fail("log inside a jit_compile=True function", RuntimeError(
                    "XLA cannot compile summary ops; call the logger in a tf.function without jit_compile "
                    "that calls the compiled part"))
                return None
            step_t = tf.cast(tf.convert_to_tensor(step), tf.int64)
            pred = tf.equal(tf.math.floormod(step_t, self.every_n_steps), 0)
            before = None
            if snapshot and variables:
                # The empty branch returns shape-[0] tensors: keeping a read of
                # each variable alive across the update would make the
                # optimizer copy every variable on every step.
                # A lowered cond: its branches have two ops per variable, cheaper
                # to skip than the call an unlowered If makes.
                before = tf.cond(pred, lambda: [tf.identity(_read(v)) for v in variables],
                                 lambda: [tf.zeros([0], _read_dtype(v)) for v in variables])
                before = list(before) if isinstance(before, (list, tuple)) else [before]
            return step_t, pred, before
        except Exception as e:  # noqa: BLE001
            self._fail("read the step and the variables", e)
            return None

    @_plain
    def _exit(self, state, gradients, variables: List, activations: Activations) -> None:
        step_t, pred, before = state
        try:
            entries = self._entries(gradients, variables, before, activations)
            if not entries:
                return
            if pred is None:
                self._write_all(step_t, entries)
            else:
                def write():
                    self._write_all(step_t, entries)
                    return tf.constant(True)

                _unlowered_cond(pred, write, lambda: tf.constant(False))
        except Exception as e:  # noqa: BLE001
            self._fail("log gradient-health statistics", e)

    def _entries(self, gradients, variables: List, before, activations: Activations) -> List[tuple]:
        """(role, layer, position, shape, tensor getter, value before the update or None) to log.

        Getters defer variable reads into the logging branch.
        """
        grads = list(gradients) if gradients is not None else []
        names = self._layer_names(variables, len(grads))
        out = []
        for i, g in enumerate(grads):
            if g is None or not _loggable(g):
                continue
            shape = _static_shape(variables[i]) if i < len(variables) else None
            out.append(("gradient", names[i], i, shape, (lambda g=g: g), None))
        for i, v in enumerate(variables):
            if not _loggable(v):
                continue
            b = before[i] if before is not None and i < len(before) else None
            shape = _static_shape(v)
            if b is not None and shape is not None:
                # The snapshot comes out of a tf.cond whose other branch is
                # empty, so its static shape is lost; static sizes let small
                # variables share one set of ops.
                b = _Reshaped(b, shape)
            out.append(("weight", names[i], i, shape, (lambda v=v: _read(v)), b))
        # Activations come after the variables: a variable's position is its index.
        first = max(len(variables), len(grads))
        for i, (name, t) in enumerate(_activation_items(activations)):
            if t is None or not _loggable(t):
                continue
            out.append(("activation", name, first + i, None, (lambda t=t: t), None))
        return out

    def _layer_names(self, variables: List, n_gradients: int = 0) -> List[str]:
        wanted = max(len(variables), n_gradients)
        if self._names is not None and len(self._names) >= wanted:
            return [str(n) for n in self._names[:wanted]]
        names = [variable_name(v) for v in variables] + [f"param_{i}" for i in range(len(variables), wanted)]
        seen = {}
        for n in names:
            seen[n] = seen.get(n, 0) + 1
        # tf.Variables created outside a name scope all share names like "Variable".
        return [f"{n}_{i}" if seen[n] > 1 else n for i, n in enumerate(names)]

    @_plain
    def _write_all(self, step_t, entries: List[tuple]) -> None:
        groups: dict = {}
        for entry in entries:
            groups.setdefault((entry[0], entry[5] is not None), []).append(entry)
        with self._writer.as_default():
            for (role, with_before), items in groups.items():
                tensors = [get() for _, _, _, _, get, _ in items]
                if with_before:
                    # Weights: statistics of the values the gradients were computed at.
                    befores = [b.tensor() if isinstance(b, _Reshaped) else b for *_, b in items]
                    matrix = weight_stats_many_tf(befores, tensors)
                else:
                    matrix = stats_many_tf(tensors)
                for j, (_, layer, position, shape, _, _) in enumerate(items):
                    meta = summary.summary_metadata(role, layer, position, shape).SerializeToString()
                    tf.summary.write(summary.tag_for(role, layer), matrix[j], step=step_t, metadata=meta)


def _unlowered_cond(pred, true_fn, false_fn):
    """`tf.cond` kept as a functional If op, so the branch not taken costs nothing.

    TensorFlow lowers conds inside tf.function to Switch/Merge, and the
    executor then visits every op of the branch not taken to mark it dead:
    with the hundreds of ops of a logging branch that made every step
    without logging measurably slower. Unlowered, the If op runs only the
    branch it takes. Without the private attribute API the cond stays lowered.
    """
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    out = tf.cond(pred, true_fn, false_fn)
    try:
        from tensorflow.core.framework import attr_value_pb2

        for op in graph.get_operations()[before:]:
            if op.type in ("If", "StatelessIf"):
                op._set_attr("_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False))  # noqa: SLF001
    except Exception:  # noqa: BLE001 - lowered is still correct
        pass
    return out


def _in_xla_context() -> bool:
    """True while tracing a ``jit_compile=True`` function, where summary ops cannot compile."""
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # a TensorFlow without this private module: assume no XLA
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


class _Reshaped:
    """A snapshot reshaped to its variable's static shape when used (inside the logging branch)."""

    def __init__(self, tensor, shape) -> None:
        self._tensor, self._shape = tensor, shape

    def tensor(self):
        return tf.reshape(self._tensor, self._shape)


def _read(variable):
    """The current value of a tf.Variable or a Keras 3 variable as a tensor."""
    value = getattr(variable, "value", None)
    if value is not None and not callable(value):  # Keras 3: `.value` is the backing tf.Variable
        variable = value
    return tf.convert_to_tensor(variable)


def _read_dtype(variable):
    return tf.as_dtype(getattr(variable, "dtype", tf.float32))


def _static_shape(tensor) -> Optional[List[int]]:
    shape = getattr(tensor, "shape", None)
    if shape is None:
        return None
    try:
        dims = tf.TensorShape(shape).as_list()
    except (TypeError, ValueError):
        return None
    return None if any(d is None for d in dims) else dims


def _activation_items(activations: Activations) -> Iterable[Tuple[str, object]]:
    if activations is None:
        return []
    if isinstance(activations, Mapping):
        return [(str(k), v) for k, v in activations.items()]
    items = []
    for i, a in enumerate(activations):
        if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str):
            items.append(a)
        else:
            items.append((f"activation_{i}", a))
    return items
