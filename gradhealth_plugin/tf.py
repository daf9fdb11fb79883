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

At each of the first ``first_steps`` steps (30), then every ``every_n_steps``
steps, this writes, per variable, the exact statistics
(`writing.format.FIELDS`) of its gradient and of its value before the update (the
values the gradient was computed at), with the update-to-weight ratio of
exactly that optimizer step. On other steps it costs two ``tf.cond`` ops
that take the empty branch (eagerly: one Python modulo). ``gh.log(step,
grads, variables)`` logs gradients and weights without the update ratio.

The statistics are computed on the device with TensorFlow ops, eagerly or in
the graph; they are written from Python (`writing.tf_write.StatsWriter`), so a
write that fails (disk full, log directory removed) is counted and never fails
the training step.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from .writing import schedule
from .writing.failures import Failures
from .writing.names import output_name, parameter_layers, scoped_name, unique_names, variable_name
from .writing.stopping import StopOnState
from .writing.tf_stats import (plain, read_variable, stats_many_tf, stats_tf, update_ratio_many_tf, update_ratio_tf,
                               weight_stats_many_tf, weight_stats_tf)
from .writing.tf_write import StatsWriter

logger = logging.getLogger(__name__)

__all__ = ["stats_tf", "weight_stats_tf", "stats_many_tf", "weight_stats_many_tf", "update_ratio_tf",
           "update_ratio_many_tf", "GradientHealthLogger", "variable_name"]


def _loggable(tensor) -> bool:
    dtype = getattr(tensor, "dtype", None)
    try:
        dtype = tf.as_dtype(dtype)
    except TypeError:
        return False
    return dtype.is_floating or dtype.is_integer or dtype.is_bool


# Keyed by a name or by the layer itself (see `_activation_names`).
Activations = Union[Mapping[object, tf.Tensor], Sequence[Tuple[object, tf.Tensor]], Sequence[tf.Tensor], None]


class GradientHealthLogger(StopOnState):
    """Logs exact gradient, weight, update-ratio and activation statistics from a custom loop.

    Args:
      logdir: directory of the run to write into, or a writer made by
        ``tf.summary.create_file_writer`` (to share the run's event file).
      every_n_steps: log when ``step % every_n_steps == 0``. Other steps run a
        ``tf.cond`` that takes the empty branch (graph mode) or return at once
        (eager).
      first_steps: also log when ``0 <= step < first_steps`` (30 by default),
        so trouble in the first steps is seen as it starts; 0 for none.
      names: optional layer names, one per variable, in the order the
        variables are passed; by default ``variable.path`` (Keras 3) or
        ``variable.name`` without ``:0``.
      stop_on: ``"critical"`` or ``"warn"`` (or a `gradhealth_plugin.alerts.Alert`
        naming kinds and consecutive logged steps): after each logged step, judge
        the statistics just computed with the tab's rules and thresholds; on a
        finding at that severity, set ``should_stop`` (the loop reads it to stop),
        keep the finding in ``stopped_by`` and why in ``stop_message``, and write
        it into the run (the ``gradhealth/stopped`` scalar, which the tab's run
        summary shows). Never on info. Inside ``tf.function`` the judging runs as
        the step's statistics leave the graph, so ``should_stop`` is set when the
        step returns.

    Failures never reach the training loop: each is counted in ``errors``
    and listed by kind in ``problems``; the first one is logged as a warning,
    later ones at debug level. Outside ``tf.function`` any error is caught.
    Inside ``tf.function`` the statistics ops are built so they cannot fail
    on values (NaN, Inf, empty tensors), and the rows leave the graph to be
    written from Python, where a failed write (disk full, log directory
    removed or replaced by a file) is caught; after one, writing pauses for
    a growing number of logged steps and then starts a new event file. An
    error while building the ops (tracing) is caught and the step is traced
    without logging.
    """

    def __init__(self, logdir, every_n_steps: int = 100, names: Optional[Sequence[str]] = None,
                 first_steps: int = schedule.FIRST_STEPS, stop_on=None) -> None:
        self.every_n_steps, self.first_steps = schedule.check(every_n_steps, first_steps)
        self._names = list(names) if names is not None else None
        self._failures = Failures(logger)
        self._writer: Optional[StatsWriter] = None
        target = logdir
        if isinstance(logdir, bytes):
            target = logdir.decode()
        elif hasattr(logdir, "__fspath__"):
            target = str(logdir)
        self._stop = None
        if stop_on is not None:
            from .live import StopOn

            self._stop = StopOn(stop_on, logger)  # a wrong value raises here, before training
            local = target if isinstance(target, str) else None
            self._stop.start(os.path.basename(os.path.normpath(local)) if local else "run", local)
        try:
            self._writer = StatsWriter(target, self._failures, record=self._judge if self._stop is not None else None)
        except Exception as e:  # noqa: BLE001 - an unwritable logdir must not stop training
            self._fail(f"open a summary writer in {logdir!r}", e)

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    @property
    def errors(self) -> int:
        """How many logging failures there were (none reached the training loop)."""
        return self._failures.count

    @property
    def problems(self) -> List[str]:
        """The first message of each kind of failure, with how many there were."""
        return self._failures.problems

    def _fail(self, what: str, error: BaseException) -> None:
        self._failures.report(what, error)

    def _judge(self, step: int, groups) -> None:
        """With stop_on: the rows of a logged step, as written; judges the run so far (from Python)."""
        for role, entries, rows in groups:
            self._stop.add_rows(step, role, entries, rows)
        self._stop.judge(step, self._write_stop)

    def _write_stop(self, step: int, message: str) -> None:
        from .writing.format import stop_summary

        self._writer.write_summary(step, stop_summary(step, message).SerializeToString())

    # -- public API ---------------------------------------------------------

    @plain
    @contextlib.contextmanager
    def step(self, step, gradients: Sequence, variables: Sequence, activations: Activations = None) -> Iterator[None]:
        """Wraps the optimizer step: snapshots the variables, then logs after the update.

        ``with gh.step(optimizer.iterations, grads, model.trainable_variables):
        optimizer.apply_gradients(...)``. The step number is read on entry, so
        ``optimizer.iterations`` labels the summaries with the step before the
        update. The weight statistics are of the values before the update
        (those the gradients were computed at); their update_ratio is
        ||after - before|| / ||before|| of this update.

        ``activations``: ``{key: tensor}``, ``[(key, tensor), ...]`` or a list
        of tensors. A key is the layer (a Keras layer or ``tf.Module``), or its
        ``path`` or ``name``: the activation then shares the layer's name with
        its parameters' rows (``mlp/dense_0`` beside ``mlp/dense_0/kernel``).
        Any other name is kept as given.
        """
        variables = list(variables)
        state = self._enter(step, variables)
        yield
        if state is not None:
            self._exit(state, gradients, variables, activations)

    @plain
    def snapshot(self, step, variables: Sequence) -> Optional[tuple]:
        """The variables' values before the update, on logged steps only (for `log`'s `previous_values`).

        Returns an opaque object; pass it back unchanged. Use `step` instead
        when the update happens in one place.
        """
        return self._enter(step, list(variables))

    @plain
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
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Closes the event file it opened (a writer it was given is only flushed); logging stops."""
        if self._writer is not None:
            self._writer.close()
        self._failures.log_total()

    # -- internals ----------------------------------------------------------

    def _should_log_eager(self, step) -> bool:
        if isinstance(step, (int, np.integer)):
            return schedule.is_logged(int(step), self.every_n_steps, self.first_steps)
        return schedule.is_logged(int(tf.convert_to_tensor(step).numpy()), self.every_n_steps, self.first_steps)

    @plain
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
                before = [tf.identity(read_variable(v)) for v in variables] if snapshot else None
                return step_t, None, before
            if _in_xla_context():
                self._fail("log inside a jit_compile=True function", RuntimeError(
                    "XLA cannot compile summary ops; call the logger in a tf.function without jit_compile "
                    "that calls the compiled part"))
                return None
            step_t = tf.cast(tf.convert_to_tensor(step), tf.int64)
            pred = tf.equal(tf.math.floormod(step_t, self.every_n_steps), 0)
            if self.first_steps:
                pred = pred | ((step_t >= 0) & (step_t < self.first_steps))
            before = None
            if snapshot and variables:
                # The empty branch returns shape-[0] tensors: keeping a read of
                # each variable alive across the update would make the
                # optimizer copy every variable on every step.
                # A lowered cond: its branches have two ops per variable, cheaper
                # to skip than the call an unlowered If makes.
                before = tf.cond(pred, lambda: [tf.identity(read_variable(v)) for v in variables],
                                 lambda: [tf.zeros([0], _read_dtype(v)) for v in variables])
                before = list(before) if isinstance(before, (list, tuple)) else [before]
            return step_t, pred, before
        except Exception as e:  # noqa: BLE001
            self._fail("read the step and the variables", e)
            return None

    @plain
    def _exit(self, state, gradients, variables: List, activations: Activations) -> None:
        step_t, pred, before = state
        try:
            entries = self._entries(gradients, variables, before, activations)
            if not entries:
                return
            if pred is None:
                self._write_all(step_t, entries)
            else:
                _unlowered_cond(pred, lambda: self._write_all(step_t, entries), lambda: tf.constant(False))
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
            out.append(("weight", names[i], i, shape, (lambda v=v: read_variable(v)), b))
        # Activations come after the variables: a variable's position is its index.
        first = max(len(variables), len(grads))
        items = _activation_items(activations)
        act_names = _activation_names([key for key, _ in items], names, variables)
        for i, (name, (_, t)) in enumerate(zip(act_names, items)):
            if t is None or not _loggable(t):
                continue
            out.append(("activation", name, first + i, None, (lambda t=t: t), None))
        return out

    def _layer_names(self, variables: List, n_gradients: int = 0) -> List[str]:
        wanted = max(len(variables), n_gradients)
        if self._names is not None and len(self._names) >= wanted:
            return [str(n) for n in self._names[:wanted]]
        return unique_names([variable_name(v) for v in variables]
                            + [f"param_{i}" for i in range(len(variables), wanted)])

    @plain
    def _write_all(self, step_t, entries: List[tuple]) -> tf.Tensor:
        """Computes every row and writes them in one call; True when written."""
        groups: dict = {}
        for entry in entries:
            groups.setdefault((entry[0], entry[5] is not None), []).append(entry)
        written = []
        for (role, with_before), items in groups.items():
            tensors = [get() for _, _, _, _, get, _ in items]
            if with_before:
                # Weights: statistics of the values the gradients were computed at.
                befores = [b.tensor() if isinstance(b, _Reshaped) else b for *_, b in items]
                matrix = weight_stats_many_tf(befores, tensors)
            else:
                matrix = stats_many_tf(tensors)
            written.append((role, [(layer, position, shape) for _, layer, position, shape, _, _ in items], matrix))
        return self._writer.write(step_t, written)


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


def _activation_items(activations: Activations) -> List[Tuple[object, object]]:
    """(key, tensor) pairs; a key is a name or a layer. An activation keyed by None (an unnamed output,
    a layer's ``name`` left unset) goes by its position, ``activation_<i>``, as an unkeyed one does."""
    if activations is None:
        return []
    if isinstance(activations, Mapping):
        return [(f"activation_{i}" if key is None else key, a) for i, (key, a) in enumerate(activations.items())]
    items = []
    for i, a in enumerate(activations):
        if isinstance(a, tuple) and len(a) == 2 and (isinstance(a[0], str) or _is_layer(a[0])):
            items.append(a)
        elif isinstance(a, tuple) and len(a) == 2 and a[0] is None:
            items.append((f"activation_{i}", a[1]))
        else:
            items.append((f"activation_{i}", a))
    return items


def _is_layer(key) -> bool:
    """A Keras layer or a tf.Module: named, and holding variables."""
    return not isinstance(key, str) and isinstance(getattr(key, "name", None), str) and hasattr(key, "variables")


def _activation_names(keys: Sequence, names: Sequence[str], variables: Sequence) -> List[str]:
    """The row of each activation: the layer whose parameters it is the output of, where the key names one.

    A layer given as the key names the layer its own variables are filed under
    (whatever `names` called them); a layer without variables among them goes by
    its path, or its name in the model's scope (the row the Keras callback gives
    it). A name goes to the layer it names (`names.output_name`).
    """
    layers = parameter_layers(names)
    named = {id(v): n for v, n in zip(variables, names)}
    out = []
    for key in keys:
        if _is_layer(key):
            own = parameter_layers([named[id(v)] for v in key.variables if id(v) in named])
            key = own[0] if len(own) == 1 else getattr(key, "path", None) or scoped_name(key.name, layers)
        out.append(output_name(str(key), layers))
    # Two keys naming one layer would write one tag twice: each keeps a row of its own.
    return unique_names(out)
