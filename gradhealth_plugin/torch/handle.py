"""What a watch does at each hook: reduce a logged step's tensors on the device and write them.

A `WatchHandle` holds the watched parameters, the optimizers whose steps it
counts, the activations captured in the step's first forward pass and the
event file. Its ``_on_*`` methods are what `hooks.hook` calls; none of them
raises into training: failures, the event file's included, are counted on the
handle, listed by kind in ``problems`` and warned about once.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from ..writing.events import SummaryFileWriter
from ..writing import schedule
from ..writing.failures import Failures
from ..writing.format import FIELDS, stop_summary
from ..writing.stopping import StopOnState
from . import hooks, kernels

# The public module's logger, as users configure it.
logger = logging.getLogger("gradhealth_plugin.torch")

GRADIENT, WEIGHT, ACTIVATION = "gradient", "weight", "activation"
EVENT_FILE_SUFFIX = ".gradhealth"
_FLUSH_SECS = 5.0
_UPDATE_RATIO = FIELDS.index("update_ratio")


def _first_tensor(output):
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]  # LSTM/GRU (output, state), MultiheadAttention (output, weights), PackedSequence
    return None


def _reduce(tensors: List[torch.Tensor], snapshot: bool = False) -> tuple:
    """(accumulators, snapshots, samples) of same-device tensors. On the CPU their histograms wait for the
    step's end, when `kernels.count_host_histograms` counts the whole step's samples in one call; elsewhere
    they are counted on the device now, and the samples are None."""
    if tensors[0].device.type == "cpu":
        acc, snapshots = kernels.reduce_stats(tensors, snapshot, histograms=False)
        return acc, snapshots, kernels.host_samples(tensors)
    acc, snapshots = kernels.reduce_stats(tensors, snapshot)
    return acc, snapshots, [None] * len(tensors)


class TrainingStopped(Exception):
    """What ``watch(..., stop_on=..., raise_on_stop=True)`` raises into the training loop, once.

    Raised by ``optimizer.step()`` at the logged step where the finding was
    found (without an optimizer, by the next forward pass), after the step's
    statistics and the stop record were written. ``finding`` is the finding;
    the message says why training stopped.
    """

    def __init__(self, message: str, finding) -> None:
        super().__init__(message)
        self.finding = finding


class WatchedParam:
    """A parameter `watch` found: its name in the model and its position in model order.

    It is logged on the steps it trains (``requires_grad``), so one frozen
    when `watch` ran is logged once it is unfrozen.
    """

    __slots__ = ("name", "param", "position")

    def __init__(self, name: str, param: nn.Parameter, position: int) -> None:
        self.name, self.param, self.position = name, param, position


class _Pending:
    """Device accumulators of one logged step, waiting for the step to finish."""

    __slots__ = ("step", "wall_time", "grads", "weights", "snapshots", "samples")

    def __init__(self, step: int) -> None:
        self.step = step
        self.wall_time = time.time()
        self.grads: List[tuple] = []  # (params, accumulators)
        self.weights: List[tuple] = []  # (params, accumulators, snapshots or None)
        self.snapshots = False
        # Per row (gradients', then weights'), the histogram's sample on the CPU, counted at the step's end.
        self.samples: List[Optional[np.ndarray]] = []


class StepSource:
    """One optimizer and the watched parameters it steps; counts its own steps."""

    def __init__(self, optimizer, params: List[WatchedParam], step: int, primary: bool) -> None:
        self.optimizer = optimizer
        self.params = params
        self.step = step
        self.primary = primary
        self.pending: Optional[_Pending] = None


class WatchHandle(StopOnState):
    """What `watch` returns: pass it (or the model) to `unwatch`.

    ``step`` is the index of the optimizer step in progress, ``errors`` counts
    logging failures (none of which reached the training loop), ``problems``
    lists them by kind (the first message and how many there were: the
    counts add up to ``errors``) and ``skipped`` the modules whose output
    could not be summarised and why. With ``watch(..., stop_on=...)``,
    ``should_stop`` turns True at the logged step where a finding the alert
    acts on was found, ``stopped_by`` is that finding and ``stop_message``
    says why (also written into the run).
    """

    def __init__(self, model: nn.Module, log_dir: str, every_n_steps: int, update_ratio: bool,
                 start_step: int, active: bool, first_steps: int = 0) -> None:
        self.log_dir = log_dir
        self.every_n_steps = every_n_steps
        self.first_steps = first_steps
        self.update_ratio = update_ratio
        self.active = active
        self.number = hooks.next_number()
        self._failures = Failures(logger)
        self.skipped: Dict[str, str] = {}
        self.steps_logged = 0
        self._model_ref = weakref.ref(model)
        self._hooks: list = []
        self._params: List[WatchedParam] = []
        self._unhooked: List[WatchedParam] = []  # without an optimizer: frozen, so not hooked yet
        self._sources: List[StepSource] = []
        self._backward_step = start_step  # without an optimizer: backward passes count the steps
        self._backward_queued = False
        self._capture = False
        self._activations: Dict[str, tuple] = {}  # layer -> (accumulators, numel, shape, position, sample)
        self._calls: Dict[str, int] = {}
        self._positions: Dict[str, int] = {}
        self._deferred: Optional[tuple] = None  # without an optimizer: weights waiting for their update
        self._writer: Optional[SummaryFileWriter] = None
        self._last_flush = time.monotonic()
        self._closed = False
        # stop_on (`live.StopOn`): the in-process judge and what it found; whether to raise.
        self._stop = None
        self._raise_on_stop = False
        self._raised = False

    # -- public ----------------------------------------------------------

    @property
    def step(self) -> int:
        if self._sources:
            return self._sources[0].step
        return self._backward_step

    @property
    def errors(self) -> int:
        return self._failures.count

    @property
    def problems(self) -> List[str]:
        """One line per kind of failure: its first message, and how many there were when more than one."""
        return self._failures.problems

    @property
    def layers(self) -> List[Tuple[int, str, str]]:
        """(position, role, layer) of every watched tensor, in model order."""
        rows = [(p.position, role, p.name) for p in self._params for role in (GRADIENT, WEIGHT)]
        rows += [(pos, ACTIVATION, name) for name, pos in self._positions.items()]
        return sorted(rows)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()
            self._last_flush = time.monotonic()

    def remove(self) -> None:
        """The same as ``unwatch(handle)``."""
        hooks.release(self)

    def __enter__(self) -> "WatchHandle":
        return self

    def __exit__(self, *exc) -> None:
        hooks.release(self)

    def __repr__(self) -> str:
        model = self._model_ref()
        return (f"WatchHandle({type(model).__name__ if model is not None else None}, log_dir={self.log_dir!r}, "
                f"every_n_steps={self.every_n_steps}, first_steps={self.first_steps}, step={self.step}, "
                f"active={self.active}, errors={self.errors})")

    # -- failures --------------------------------------------------------

    def _fail(self, what: str, error: BaseException, kind: Optional[str] = None) -> None:
        self._failures.report(what, error, kind)

    def _skip(self, layer: str, reason: str) -> None:
        if layer not in self.skipped:
            self.skipped[layer] = reason
            logger.info("gradhealth: not summarising the output of %s: %s", layer, reason)

    # -- step logic ------------------------------------------------------

    def _logged(self, step: int) -> bool:
        return schedule.is_logged(step, self.every_n_steps, self.first_steps)

    def _start(self, params: List[WatchedParam], step: int, snapshots: bool) -> _Pending:
        """Reduces gradients and weights of `params` on their devices (off the CPU without reading anything back)."""
        pending = _Pending(step)
        with torch.no_grad():
            present = self._trained(params)
            with_grad = [p for p in present if p.param.grad is not None]
            grads = [self._dense(p.param.grad) for p in with_grad]
            for group in kernels.grouped(grads):
                members = [with_grad[i] for i in group]
                acc, _, samples = _reduce([grads[i] for i in group])
                pending.grads.append((members, acc))
                pending.samples += samples
            weights = [p.param.detach() for p in present]
            for group in kernels.grouped(weights):
                members = [present[i] for i in group]
                acc, snaps, samples = _reduce([weights[i] for i in group], snapshot=snapshots)
                pending.weights.append((members, acc, snaps if snapshots else None))
                pending.samples += samples
        pending.snapshots = snapshots
        return pending

    @staticmethod
    def _trained(params: List[WatchedParam]) -> List[WatchedParam]:
        # A frozen parameter has no gradient, and its unchanging weight would read as a stalled update.
        return [p for p in params if p.param.requires_grad and p.param.numel() and p.param.is_floating_point()]

    @staticmethod
    def _dense(grad: torch.Tensor) -> torch.Tensor:
        # A sparse gradient (Embedding(sparse=True)) stands for a dense one with zeros elsewhere.
        return grad.to_dense() if grad.layout != torch.strided else grad.detach()

    def _updates(self, pending: _Pending) -> List[Optional[torch.Tensor]]:
        out: List[Optional[torch.Tensor]] = []
        with torch.no_grad():
            for members, _, snaps in pending.weights:
                if snaps is None:
                    out.append(None)
                    continue
                out.append(kernels.reduce_update(snaps, [p.param.detach() for p in members]))
        return out

    def _finish(self, pending: _Pending, updates: Optional[List[Optional[torch.Tensor]]], write_weights: bool = True,
                activations: Optional[Dict[str, tuple]] = None):
        """Moves the step's accumulators to the CPU and writes them; returns the weight rows if not written."""
        grad_rows, weight_rows, act_rows = self._host_rows(pending, updates, activations or {})
        writer = self._ensure_writer()
        step, wall = pending.step, pending.wall_time
        for members, rows in grad_rows:
            for p, row in zip(members, rows):
                writer.write_stats(step, GRADIENT, p.name, row, p.position, tuple(p.param.shape), wall)
        for name, row, shape, position in act_rows:
            writer.write_stats(step, ACTIVATION, name, row, position, shape, wall)
        if write_weights:
            self._write_weights(step, wall, weight_rows)
            return None
        return weight_rows

    @staticmethod
    def _host_rows(pending: _Pending, updates: Optional[List[Optional[torch.Tensor]]], activations: Dict[str, tuple]):
        """The step's statistics rows on the CPU: (gradient rows, weight rows, activation rows).

        Gradient and weight rows are (params, rows) per device group, activation
        rows (layer, row, shape, position); weight rows carry their update ratio
        when `updates` were measured.
        """
        matrices = [acc for _, acc in pending.grads] + [acc for _, acc, _ in pending.weights]
        matrices += [u for u in (updates or []) if u is not None]
        matrices += [entry[0] for entry in activations.values()]
        host = kernels.to_host(matrices)
        # One finalize for the whole step: numpy's per-call cost dominates on a few rows.
        stats_host = host[:len(pending.grads) + len(pending.weights)] + host[len(host) - len(activations):]
        numels = [p.param.numel() for members, _ in pending.grads for p in members]
        numels += [p.param.numel() for members, _, _ in pending.weights for p in members]
        numels += [entry[1] for entry in activations.values()]
        stacked = (np.concatenate([h.reshape(-1, kernels.ACC_WIDTH) for h in stats_host]) if stats_host
                   else np.zeros((0, kernels.ACC_WIDTH)))
        kernels.count_host_histograms(stacked, pending.samples + [entry[4] for entry in activations.values()])
        rows = kernels.finalize(stacked, numels)
        k = 0
        grad_rows = []
        for members, _ in pending.grads:
            grad_rows.append((members, rows[k:k + len(members)]))
            k += len(members)
        weight_rows = []
        for members, _, _ in pending.weights:
            weight_rows.append((members, rows[k:k + len(members)]))
            k += len(members)
        act_rows = [(name, rows[k + i], shape, position)
                    for i, (name, (_, _, shape, position, _)) in enumerate(activations.items())]
        update_host = iter(host[len(pending.grads) + len(pending.weights):len(host) - len(activations)])
        for j, update in enumerate(updates or []):
            if update is not None:
                weight_rows[j][1][:, _UPDATE_RATIO] = kernels.update_ratios(next(update_host))
        return grad_rows, weight_rows, act_rows

    def _write_weights(self, step: int, wall: float, weight_rows) -> None:
        writer = self._ensure_writer()
        for members, rows in weight_rows:
            for p, row in zip(members, rows):
                writer.write_stats(step, WEIGHT, p.name, row, p.position, tuple(p.param.shape), wall)
        self.steps_logged += 1
        self._judge(step)
        if time.monotonic() - self._last_flush >= _FLUSH_SECS:
            self.flush()

    def _judge(self, step: int) -> None:
        """With stop_on: judges the logged steps so far; on a finding, records it in the run and flushes."""
        if self._stop is not None:
            self._stop.judge(step, self._write_stop)

    def _write_stop(self, step: int, message: str) -> None:
        self._ensure_writer().write_summary(step, stop_summary(step, message), "the stop record")
        self.flush()

    def _raise_if_stopped(self) -> None:
        """With raise_on_stop: raises `TrainingStopped` into the training loop, once."""
        if self._raise_on_stop and self.stopped_by is not None and not self._raised:
            self._raised = True
            raise TrainingStopped(self.stop_message, self.stopped_by)

    def _ensure_writer(self) -> SummaryFileWriter:
        if self._writer is None:
            if self._stop is not None:
                from ..live import RecordingWriter

                self._writer = RecordingWriter(self._stop.live, self.log_dir, filename_suffix=EVENT_FILE_SUFFIX,
                                               failures=self._failures)
            else:
                self._writer = SummaryFileWriter(self.log_dir, filename_suffix=EVENT_FILE_SUFFIX,
                                                 failures=self._failures)
        return self._writer

    def _take_activations(self) -> Dict[str, tuple]:
        captured, self._activations = self._activations, {}
        self._calls = {}
        return captured

    def _set_capture(self, step: int) -> None:
        self._capture = bool(self._positions) and self._logged(step)

    # -- hooks with an optimizer -----------------------------------------

    def _on_step_pre(self, index: int, optimizer, args, kwargs) -> None:
        source = self._sources[index]
        try:
            source.pending = None
            if self._logged(source.step):
                source.pending = self._start(source.params, source.step, self.update_ratio)
        except Exception as e:  # noqa: BLE001 - never raise into training
            source.pending = None
            self._fail("summarise gradients and weights before the optimizer step", e)

    def _on_step_post(self, index: int, optimizer, args, kwargs) -> None:
        source = self._sources[index]
        try:
            pending, source.pending = source.pending, None
            activations = self._take_activations() if source.primary else {}
            if pending is not None:
                updates = self._updates(pending) if pending.snapshots else None
                self._finish(pending, updates, activations=activations)
        except Exception as e:  # noqa: BLE001
            self._fail("write the statistics of an optimizer step", e)
        finally:
            source.step += 1
            if source.primary:
                self._set_capture(source.step)
        self._raise_if_stopped()

    # -- hooks without an optimizer --------------------------------------

    def _on_grad_accumulated(self, param) -> None:
        if self._backward_queued:
            return
        try:
            torch.autograd.Variable._execution_engine.queue_callback(self._on_backward_end)
            self._backward_queued = True
        except Exception as e:  # noqa: BLE001
            self._fail("follow the end of backward", e)

    def _hook_unfrozen(self) -> None:
        """Hooks the parameters frozen at `watch` that train now: their gradients then end a step too."""
        try:
            unfrozen = [p for p in self._unhooked if p.param.requires_grad]
            if not unfrozen:
                return
            accumulated = hooks.hook_for(self, "_on_grad_accumulated")
            for p in unfrozen:
                self._hooks.append(p.param.register_post_accumulate_grad_hook(accumulated))
            self._unhooked = [p for p in self._unhooked if not p.param.requires_grad]
        except Exception as e:  # noqa: BLE001
            self._fail("follow a parameter unfrozen since watch()", e)

    def _on_backward_end(self) -> None:
        self._backward_queued = False
        step = self._backward_step
        try:
            self._write_deferred()
            activations = self._take_activations()
            if self._logged(step):
                pending = self._start(self._params, step, self.update_ratio)
                rows = self._finish(pending, None, write_weights=not pending.snapshots, activations=activations)
                if pending.snapshots:
                    self._deferred = (pending, rows)
        except Exception as e:  # noqa: BLE001
            self._fail("write the statistics of a backward pass", e)
        finally:
            self._backward_step = step + 1
            self._set_capture(self._backward_step)

    def _write_deferred(self) -> None:
        """Weights of the last logged backward pass, with the update the user's step made since."""
        deferred, self._deferred = self._deferred, None
        if deferred is None:
            return
        pending, weight_rows = deferred
        updates = self._updates(pending)
        for (members, rows), update in zip(weight_rows, kernels.to_host([u for u in updates if u is not None])):
            rows[:, _UPDATE_RATIO] = kernels.update_ratios(update)
        self._write_weights(pending.step, pending.wall_time, weight_rows)

    # -- hooks on modules ------------------------------------------------

    def _on_root_forward_pre(self, module, args) -> None:
        self._calls = {}
        # A backward that raised never ran its end callback; a new forward means it is over.
        self._backward_queued = False
        if self._unhooked:
            self._hook_unfrozen()
        if self._deferred is not None:
            try:
                self._write_deferred()
            except Exception as e:  # noqa: BLE001
                self._fail("write the update ratio of the last logged step", e)
        self._raise_if_stopped()

    def _on_forward(self, name: str, position: int, module, args, output) -> None:
        if not self._capture or not module.training or not torch.is_grad_enabled():
            return
        try:
            call = self._calls.get(name, 0)
            self._calls[name] = call + 1
            layer = name if call == 0 else f"{name}[{call}]"
            if layer in self._activations:
                return  # a later micro-batch of the same step: the first one stands for it
            tensor = _first_tensor(output)
            if tensor is None:
                self._skip(layer, f"output is a {type(output).__name__}, not a tensor")
                return
            if not tensor.is_floating_point() or not tensor.numel():
                self._skip(layer, f"output is an empty or {tensor.dtype} tensor")
                return
            if call:
                self._positions.setdefault(layer, position)
            with torch.no_grad():
                acc, _, samples = _reduce([tensor.detach()])
            self._activations[layer] = (acc, tensor.numel(), tuple(tensor.shape), position, samples[0])
        except Exception as e:  # noqa: BLE001
            self._fail(f"summarise the output of {name}", e, kind="summarise a module's output")

    # -- lifecycle -------------------------------------------------------

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for hook in self._hooks:
            try:
                hook.remove()
            except Exception as e:  # noqa: BLE001
                self._fail("remove a hook", e)
        self._hooks = []
        try:
            self._write_deferred()
        except Exception as e:  # noqa: BLE001
            self._fail("write the update ratio of the last logged step", e)
        self._activations, self._capture = {}, False
        for source in self._sources:
            source.pending = None
        if self._writer is not None:
            self._writer.close()
        self._failures.log_total()
