"""gradhealth summaries from Keras 3 ``model.fit``.

One import and one callback::

    from gradhealth_plugin.keras import GradientHealthCallback

    model.fit(x, y, callbacks=[GradientHealthCallback("runs/exp1", probe_data=(x[:64], y[:64]))])

See `GradientHealthCallback` for what is logged, how and at what cost.
"""

from __future__ import annotations

import logging
import os
from typing import List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from .writing import schedule
from .writing.failures import Failures
from .writing.names import layer_of, unique_names, variable_name
from .writing.stopping import StopOnState
from .writing.tf_stats import read_variable, stats_many_tf, update_ratio_many_tf, with_update_ratio
from .writing.tf_write import StatsWriter

logger = logging.getLogger(__name__)

__all__ = ["GradientHealthCallback"]


# Layers whose output repeats their input or only rescales or reshapes it:
# their rows would duplicate a neighbour, and Dropout's zeros would read as
# dead units.
_SKIPPED_LAYERS = tuple(getattr(keras.layers, name) for name in (
    "InputLayer", "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianDropout",
    "AlphaDropout", "GaussianNoise", "Flatten", "Reshape", "Permute", "Identity", "ActivityRegularization",
) if hasattr(keras.layers, name))


class GradientHealthCallback(StopOnState, keras.callbacks.Callback):
    """Logs exact per-variable gradient, weight, update-ratio and activation statistics during ``fit``.

    At each of the first ``first_steps`` training steps (30), then every
    ``every_n_steps`` (100), counted like ``model.optimizer.iterations`` (so a
    resumed ``fit`` continues the count), it writes gradhealth summaries
    (`writing.format.FIELDS`: count, mean, std, min, max, L2 norm, zero and
    near-zero fractions, NaN and Inf counts, skewness, kurtosis, mean and max
    |x|, update ratio; and a compact histogram) for:

    * **weights**: every trainable variable as the logged step starts (the
      values its gradient is computed at), with the update-to-weight ratio
      ||w_after - w_before|| / ||w_before|| of exactly that optimizer step:
      the weights are snapshotted in ``on_train_batch_begin`` and compared
      in ``on_train_batch_end``.
    * **gradients** of every trainable variable, and **activations** (the
      output of each layer; for ReLU layers the zero fraction is the share
      of dead units), computed by the callback itself: Keras 3 callbacks do
      not see the training batch, so at the start of a logged step the
      callback runs one forward and backward pass of its own on
      ``probe_data`` with ``training=True`` and the model's compiled loss
      (``model.compute_loss``, regularisation losses included), at the
      weights that step starts from. These are the gradients of the probe
      batch, not of the training batch of that step. The pass does not
      change the model: non-trainable variables (BatchNorm statistics,
      dropout seed state) and metric variables it touches are restored, and
      the optimizer is not called.

    Layer names are the variable paths (``sequential/dense/kernel``), the
    same rows as Keras' own ``TensorBoard(histogram_freq=...)`` weight
    histograms (``sequential/dense/kernel/histogram``); activations use the
    layer's path (``sequential/dense``). Summaries go to ``<log_dir>/train``,
    the run Keras' TensorBoard callback writes, in their own event file
    (``*.gradhealth``): the statistics are computed inside those functions
    and written from Python (`writing.tf_write.StatsWriter`).

    Activations: for Sequential and functional models the callback builds a
    sub-model sharing the layers whose outputs are every top-level layer's
    output (a nested model counts as one layer). For subclassed models (and
    functional graphs the sub-model cannot be built for) it wraps each leaf
    layer's ``call`` while its own probe pass runs, and restores it right
    after; a layer reached without going through ``layer(...)`` (a direct
    ``layer.call(...)``, raw ops inside ``call``) has no activation row, and
    a layer called several times per forward pass logs its first call.

    fit builds a subclassed model (and a Sequential without an ``Input``)
    while tracing its first step: such a model is first logged at step 1.

    Cost: on other steps, two Python method calls that compare integers. On
    a logged step: one forward and backward pass on the probe batch (about
    one training step's compute when the probe batch has the training batch
    size), one copy of the trainable weights, and about twenty float64
    passes over every gradient, weight and activation tensor; plus, at the
    first logged step, a one-time trace of the two functions doing this.
    docs/integrations_keras_tf.md has measured figures.

    Args:
      log_dir: the directory given to ``keras.callbacks.TensorBoard``.
      every_n_steps: log every N training steps (the first step of ``fit`` is
        logged when it is a multiple of N or below `first_steps`).
      first_steps: also log every step below this one (30 by default), so
        trouble in the first steps is seen as it starts; 0 for none.
      probe_data: ``(x, y)`` or ``(x, y, sample_weight)`` (arrays or
        tensors), or a ``tf.data.Dataset`` whose first element is used. One
        batch of the training batch size is a good choice. Without it only
        weights and update ratios are logged.
      gradients, weights, activations: switch each part off.
      run: subdirectory of ``log_dir`` to write into.
      stop_on: ``"critical"`` or ``"warn"`` (or a `gradhealth_plugin.alerts.Alert`
        naming kinds and consecutive logged steps): after each logged step, judge
        the statistics just computed with the tab's rules and thresholds; on a
        finding at that severity, set ``model.stop_training`` (``fit`` ends after
        that batch), keep the finding in ``stopped_by`` and why in
        ``stop_message``, and write it into the run (the ``gradhealth/stopped``
        scalar, which the tab's run summary shows). Never on info.

    A failure to compute or write never stops training and never leaves the
    model changed: it is counted in ``errors`` and listed by kind in
    ``problems``, the first one logged as a warning, later ones at debug
    level, and ``fit`` goes on. A full disk or a log directory removed (or
    replaced by a file) during ``fit`` pauses writing for a growing number of
    logged steps, then it starts a new event file. An unwritable ``log_dir``
    gives one warning.

    With ``steps_per_execution=k > 1`` Keras calls callbacks every k steps:
    the update ratio then spans k optimizer steps. Under a ``tf.distribute``
    strategy with several replicas the probe pass runs on the default device.
    """

    def __init__(self, log_dir: str, every_n_steps: int = 100, probe_data=None, gradients: bool = True,
                 weights: bool = True, activations: bool = True, run: str = "train", stop_on=None,
                 first_steps: int = schedule.FIRST_STEPS) -> None:
        super().__init__()
        self.every_n_steps, self.first_steps = schedule.check(every_n_steps, first_steps)
        self._stop = None
        if stop_on is not None:
            from .live import StopOn

            self._stop = StopOn(stop_on, logger)  # a wrong value raises here, before fit
        self.log_dir = os.fspath(log_dir)
        self.run = run
        self._want_gradients = gradients
        self._want_weights = weights
        self._want_activations = activations
        self._probe_input = probe_data
        self._probe = None  # (x, y, sample_weight) tensors
        self._writer: Optional[StatsWriter] = None
        self._writer_failed = False
        self._failures = Failures(logger)
        # Step bookkeeping: Python integers only, so unlogged steps touch no tensors.
        self._epoch_start = 0
        self._last_batch = -1
        self._next_log = 0
        self._pending = None  # (step, weights before, their statistics) between begin and end of a logged step
        self._passes: Optional[_Passes] = None

    # -- Keras hooks ------------------------------------------------------------

    def on_train_begin(self, logs=None) -> None:
        if self._writer is None and not self._writer_failed:
            try:
                # TensorFlow's writer, called from the compiled functions: its C++
                # side does the record checksums a pure-Python writer spends about
                # 0.2 ms per summary on, milliseconds per logged step.
                self._writer = StatsWriter(os.path.join(self.log_dir, self.run), self._failures, max_queue=1000,
                                           filename_suffix=".gradhealth")
            except Exception as e:  # noqa: BLE001 - an unwritable log_dir must not stop fit
                self._writer_failed = True
                self._fail(f"open an event file in {os.path.join(self.log_dir, self.run)!r}; nothing is logged", e)
        try:
            base = int(np.asarray(read_variable(self.model.optimizer.iterations)))
        except Exception:  # noqa: BLE001 - an optimizer without `iterations` starts at 0
            base = 0
        self._epoch_start = base
        self._last_batch = -1
        self._next_log = schedule.next_logged(base, self.every_n_steps, self.first_steps)
        self._pending = None
        self._probe = None
        if self._writer is None:
            return
        if (self._want_gradients or self._want_activations) and self._probe_input is not None:
            try:
                self._probe = _unpack_probe(self._probe_input)
            except Exception as e:  # noqa: BLE001
                self._fail("read probe_data; logging weights only", e)
        elif self._want_gradients or self._want_activations:
            self._fail("log gradients and activations", ValueError(
                "no probe_data given: Keras callbacks do not see the training batch; logging weights only"))
        if self._passes is not None and not self._passes.fits(self.model, self._probe):
            self._passes = None  # another model or probe: trace again; a second fit of the same one reuses them
        if self._stop is not None:
            self._stop.start(self.run, os.path.join(self.log_dir, self.run))  # each fit is judged afresh

    def on_epoch_end(self, epoch, logs=None) -> None:
        self._epoch_start += self._last_batch + 1
        self._last_batch = -1
        self._finish_pending()
        self._flush()

    def on_train_batch_begin(self, batch, logs=None) -> None:
        step = self._epoch_start + batch
        if step < self._next_log or self._writer is None:
            return
        if not getattr(self.model, "built", True):
            # fit builds subclassed models (and a Sequential without an Input)
            # while tracing its first step: building them here would create
            # their variables in the callback's own scope. Log the next step.
            return
        self._next_log = schedule.next_logged(step + 1, self.every_n_steps, self.first_steps)
        self._finish_pending()
        try:
            if self._passes is None:
                self._passes = _Passes(self.model, self._writer, self._probe, self._want_gradients,
                                       self._want_weights, self._want_activations,
                                       record=self._record_rows if self._stop is not None else None)
            before = self._passes.begin(step)
            if before is not None:
                self._pending = (step, *before)
        except Exception as e:  # noqa: BLE001 - never raise into fit
            self._fail(f"log gradient health at step {step}", e)

    def on_train_batch_end(self, batch, logs=None) -> None:
        self._last_batch = batch
        if self._pending is not None:
            self._finish_pending()

    def on_train_end(self, logs=None) -> None:
        self._finish_pending()
        self._flush()
        self._failures.log_total()

    @property
    def errors(self) -> int:
        """How many logging failures there were (none reached ``fit``)."""
        return self._failures.count

    @property
    def problems(self) -> List[str]:
        """The first message of each kind of failure, with how many there were."""
        return self._failures.problems

    # -- helpers ------------------------------------------------------------------

    def _fail(self, what: str, error: BaseException) -> None:
        self._failures.report(what, error)

    def _finish_pending(self) -> None:
        if self._pending is None:
            return
        step, values, before_stats = self._pending
        self._pending = None
        try:
            self._passes.end(step, values, before_stats)
        except Exception as e:  # noqa: BLE001
            self._fail(f"log weights at step {step}", e)
        self._judge(step)

    def _record_rows(self, role: str, entries, step: int, rows) -> None:
        """Statistics rows of a logged step, as written, for stop_on (called from the compiled passes)."""
        self._stop.add_rows(step, role, entries, rows)

    def _judge(self, step: int) -> None:
        """With stop_on: judges the logged steps so far; on a finding, stops fit and records why in the run."""
        if self._stop is not None and self._stop.judge(step, self._write_stop):
            self.model.stop_training = True

    def _write_stop(self, step: int, message: str) -> None:
        from .writing.format import stop_summary

        def write() -> None:
            self._writer.write_summary(step, stop_summary(step, message).SerializeToString())
            self._writer.flush()

        self._failures.attempt("write why training stopped", write)

    def _flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()


class _Passes:
    """The compiled work of a logged step; its rows go to a `StatsWriter`, which never fails the functions.

    `begin` (before the optimizer step): copies the trainable weights and
    computes their statistics; with a probe batch it also runs one forward and
    backward pass on it and writes the gradient and activation rows. The pass
    leaves the model as it was: non-trainable and metric variables are
    restored. `end` (after the step): writes the weight rows with the update
    ratio of that step.
    """

    def __init__(self, model, writer: StatsWriter, probe, gradients: bool, weights: bool, activations: bool,
                 record=None) -> None:
        self._model = model
        # record(role, entries, step, rows): hands each written role's rows back to Python (stop_on).
        self._record = record
        self._writer = writer
        self._probe = probe
        self._gradients = gradients and probe is not None
        self._activations = activations and probe is not None
        self._weights = weights
        self._variables = list(model.trainable_variables)
        self._key = _probe_key(model, probe)
        self._names = unique_names([variable_name(v) for v in self._variables])
        self._shapes = [_shape(v) for v in self._variables]
        self._state = _dedupe(list(model.non_trainable_variables) + list(getattr(model, "metrics_variables", [])))
        self._forward = None
        self._activation_names: List[str] = []
        self._patch_layers: List = []
        self._patch_names: List[str] = []
        # While tracing the subclassed-model path: the graph of the probe pass
        # and the layer outputs the wrapped calls saw in it.
        self.graph = None
        self.captured: List[Tuple[str, object]] = []
        self.seen: set = set()
        # Model order, as the PyTorch integration writes it: each layer's
        # variables, then its output. Without activations: variable indices.
        self._positions = (list(range(len(self._variables))), [])
        if self._activations:
            forward = _submodel_forward(model)
            if forward is not None:
                self._forward, self._activation_names = forward
                self._positions = _model_positions(self._names, self._activation_names)
            else:
                self._patch_layers = _leaf_layers(model)
                self._patch_names = [_layer_name(model, layer) for layer in self._patch_layers]
        eager = bool(getattr(model, "run_eagerly", False))
        # autograph=False as Keras' own train function: nothing here branches on tensors.
        self._begin = self._begin_body if eager else tf.function(self._begin_body, autograph=False)
        self._end = self._end_body if eager else tf.function(self._end_body, autograph=False)

    def fits(self, model, probe) -> bool:
        return self._key == _probe_key(model, probe)

    def begin(self, step: int):
        x, y, sw = self._probe if self._probe is not None else (None, None, None)
        step_t = tf.constant(step, tf.int64)
        if not self._patch_layers:
            return self._begin(step_t, x, y, sw)
        originals = [_wrap_call(layer, self, name) for layer, name in zip(self._patch_layers, self._patch_names)]
        try:
            return self._begin(step_t, x, y, sw)
        finally:
            for layer, original in zip(self._patch_layers, originals):
                _unwrap_call(layer, original)

    def end(self, step: int, values, before_stats) -> None:
        self._end(tf.constant(step, tf.int64), values, before_stats)

    def _begin_body(self, step, x, y, sw):
        written = []
        before = None
        if self._weights and self._variables:
            values = [tf.identity(read_variable(v)) for v in self._variables]
            before = (values, stats_many_tf(values))
        if self._gradients or self._activations:
            written = self._probe_pass(step, x, y, sw)
        # Nothing reads the write ops' results: the dependency keeps them.
        with tf.control_dependencies(written):
            return None if before is None else (before[0], tf.identity(before[1]))

    def _probe_pass(self, step, x, y, sw) -> list:
        model = self._model
        # tf.function may trace this more than once: each trace starts afresh.
        self.graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
        self.captured, self.seen = [], set()
        saved = [tf.identity(read_variable(v)) for v in self._state]
        with tf.GradientTape() as tape:
            if self._forward is not None:
                y_pred, acts = self._forward(x)
                captured = list(zip(self._activation_names, acts))
            else:
                y_pred = model(x, training=True) if getattr(model, "_call_has_training_arg", True) else model(x)
                captured = list(self.captured)
                self._positions = _model_positions(self._names, [name for name, _ in captured])
            compute = getattr(model, "_compute_loss", None) or model.compute_loss
            loss = compute(x=x, y=y, y_pred=y_pred, sample_weight=sw, training=True)
        grads = tape.gradient(loss, self._variables)
        groups, recorded = [], []
        if self._gradients:
            # Unconnected variables (None gradient) get no row: zeros would read as vanishing.
            present = [i for i, g in enumerate(grads) if g is not None]
            rows = stats_many_tf([grads[i] for i in present])
            var_positions = self._positions[0]
            entries = [(self._names[i], var_positions[i], self._shapes[i]) for i in present]
            groups.append(("gradient", entries, rows))
            recorded += self._recorded("gradient", entries, step, rows)
        if self._activations and captured:
            rows = stats_many_tf([a for _, a in captured])
            act_positions = self._positions[1]
            entries = [(name, act_positions[j], None) for j, (name, _) in enumerate(captured)]
            groups.append(("activation", entries, rows))
            recorded += self._recorded("activation", entries, step, rows)
        written = ([self._writer.write(step, groups)] if groups else []) + recorded
        # Restored after the statistics, so the pass leaves BatchNorm statistics,
        # dropout seeds and loss metrics exactly as training left them.
        with tf.control_dependencies(written):
            for v, value in zip(self._state, saved):
                v.assign(value)
        return written

    def _end_body(self, step, values, before_stats):
        ratios = update_ratio_many_tf(values, [read_variable(v) for v in self._variables], before_stats)
        rows = with_update_ratio(before_stats, ratios)
        entries = list(zip(self._names, self._positions[0], self._shapes))
        written = [self._writer.write(step, [("weight", entries, rows)])]
        written += self._recorded("weight", entries, step, rows)
        with tf.control_dependencies(written):
            return tf.constant(True)

    def _recorded(self, role: str, entries, step, rows) -> list:
        """The op handing these rows to `record` as the function runs (none without stop_on)."""
        if self._record is None or not entries:
            return []
        record, entries = self._record, list(entries)

        def hand_over(step_value, values):
            record(role, entries, int(step_value), values)
            return np.bool_(True)

        return [tf.numpy_function(hand_over, [step, rows], tf.bool, stateful=True)]


def _submodel_forward(model):
    """(forward(x) -> (y_pred, [activations]), names) for Sequential/functional models, else None."""
    inputs, output = _symbolic(model, "input"), _symbolic(model, "output")
    if inputs is None or output is None:  # subclassed models have no symbolic graph
        return None
    layers = [layer for layer in model.layers if not isinstance(layer, _SKIPPED_LAYERS)]
    outs, names = [], []
    for layer in layers:
        try:
            out = layer.output
        except Exception:  # noqa: BLE001 - a layer without a symbolic output in this graph
            continue
        flat = tf.nest.flatten(out)
        base = _layer_name(model, layer)
        for j, t in enumerate(flat):
            outs.append(t)
            names.append(base if len(flat) == 1 else f"{base}/{j}")
    if not outs:
        return None
    try:
        probe = keras.Model(inputs, [output, outs])
    except Exception as e:  # noqa: BLE001 - e.g. a layer first called in another graph
        logger.debug("gradhealth: no activation sub-model for %s (%s); wrapping layer calls instead", model.name, e)
        return None

    def forward(x):
        y_pred, acts = probe(x, training=True)
        return y_pred, list(acts)

    return forward, names


def _model_positions(var_names: Sequence[str], act_names: Sequence[str]) -> Tuple[List[int], List[int]]:
    """(variable positions, activation positions) in model order.

    Activations come in forward order; a layer's output goes right after the
    last of its variables (``sequential/dense/kernel``, ``.../bias``, then
    ``sequential/dense``). Variables no activation claims keep their order.
    """
    owner = [layer_of(name) for name in var_names]
    last = {}
    for i, layer in enumerate(owner):
        last[layer] = i
    var_pos: List[int] = [0] * len(var_names)
    act_pos: List[int] = []
    position = emitted = 0
    for name in act_names:
        end = last.get(name)
        if end is not None and end >= emitted:
            for i in range(emitted, end + 1):
                var_pos[i] = position
                position += 1
            emitted = end + 1
        act_pos.append(position)
        position += 1
    for i in range(emitted, len(var_names)):
        var_pos[i] = position
        position += 1
    return var_pos, act_pos


def _symbolic(model, which: str):
    """The model's symbolic input or output structure, or None.

    Sequential has ``inputs``/``outputs`` (lists) but ``input``/``output``
    only once called as a layer; Functional has both.
    """
    try:
        return getattr(model, which)
    except (AttributeError, ValueError):
        pass
    try:
        flat = getattr(model, which + "s")
    except (AttributeError, ValueError):
        return None
    if not flat:
        return None
    return flat[0] if len(flat) == 1 else list(flat)


def _layer_name(model, layer) -> str:
    """The layer's path, the prefix of its variables' paths (``sequential/dense``).

    Layers without variables have no path of their own (or a bare name):
    they get the prefix their model gives its other layers.
    """
    path = getattr(layer, "path", None)
    if path and layer.weights:
        return path
    prefix = ""
    for other in model._flatten_layers(include_self=False, recursive=True):  # noqa: SLF001
        other_path = getattr(other, "path", None)
        if other_path and other.weights and other_path.endswith(other.name) and other_path != other.name:
            prefix = other_path[:-len(other.name)]
            break
    return prefix + layer.name


def _leaf_layers(model) -> List:
    layers = model._flatten_layers(include_self=False, recursive=True)  # noqa: SLF001 - no public walk exists
    return [layer for layer in layers if not isinstance(layer, _SKIPPED_LAYERS)
            and not list(layer._flatten_layers(include_self=False, recursive=False))]  # noqa: SLF001


def _wrap_call(layer, probe: "_Passes", name: str):
    """Appends the layer's first output of this forward pass to `probe.captured`; returns what to restore."""
    original = layer.__dict__.get("call")
    bound = layer.call

    def call(*args, **kwargs):
        out = bound(*args, **kwargs)
        if id(layer) not in probe.seen:
            # Keras also calls `call` on symbolic inputs (to infer shapes, in
            # a scratch graph): only tensors of the probe pass itself count.
            flat = [t for t in tf.nest.flatten(out) if tf.is_tensor(t) and _graph_of(t) is probe.graph]
            if flat:
                probe.seen.add(id(layer))
                probe.captured.extend((name if len(flat) == 1 else f"{name}/{j}", t) for j, t in enumerate(flat))
        return out

    # object.__setattr__: Keras' own __setattr__ tracks state and may refuse changes to a built layer.
    object.__setattr__(layer, "call", call)
    return original


def _graph_of(tensor):
    try:
        return tensor.graph
    except AttributeError:  # eager tensors have no graph
        return None


def _unwrap_call(layer, original) -> None:
    if original is None:
        layer.__dict__.pop("call", None)
    else:
        object.__setattr__(layer, "call", original)


def _unpack_probe(probe):
    if isinstance(probe, tf.data.Dataset):
        probe = next(iter(probe.take(1)))
    if not isinstance(probe, (tuple, list)) or not 1 <= len(probe) <= 3:
        raise ValueError("probe_data must be (x, y), (x, y, sample_weight) or a tf.data.Dataset of those")
    x = probe[0]
    y = probe[1] if len(probe) > 1 else None
    sw = probe[2] if len(probe) > 2 else None
    convert = lambda s: None if s is None else tf.nest.map_structure(tf.convert_to_tensor, s)  # noqa: E731
    return convert(x), convert(y), convert(sw)


def _probe_key(model, probe) -> tuple:
    """What the traced functions depend on: the model, its variables and the probe's structure and shapes."""
    spec = None if probe is None else tf.nest.map_structure(
        lambda t: (tuple(t.shape), t.dtype.name) if t is not None else None, probe)
    return id(model), tuple(id(v) for v in model.trainable_variables), repr(spec)


def _dedupe(variables: List) -> List:
    seen, out = set(), []
    for v in variables:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _shape(v) -> Optional[List[int]]:
    try:
        return [int(d) for d in v.shape]
    except (TypeError, ValueError):
        return None
