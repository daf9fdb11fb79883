"""`watch` and `unwatch`: attaching a `WatchHandle`'s hooks to a model and its optimizers, and removing them."""

from __future__ import annotations

import logging
import os
from typing import Callable, Iterable, List, Tuple, Union

import torch
from torch import nn

from ..writing import schedule
from . import hooks
from .handle import StepSource, WatchedParam, WatchHandle

# The public module's logger, as users configure it.
logger = logging.getLogger("gradhealth_plugin.torch")

# Modules whose output repeats another module's (or only rescales it): their
# rows would duplicate a neighbour and Dropout's zeros would read as dead units.
_SKIPPED_MODULES = (nn.Identity, nn.Flatten, nn.Unflatten, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d,
                    nn.AlphaDropout, nn.FeatureAlphaDropout)


def watch(model: nn.Module, log_dir: str, optimizer=None, every_n_steps: int = 100,
          activations: Union[bool, Iterable[str], Callable[[str, nn.Module], bool]] = True, *,
          update_ratio: bool = True, start_step: int = 0, all_ranks: bool = False, stop_on=None,
          raise_on_stop: bool = False, first_steps: int = schedule.FIRST_STEPS) -> WatchHandle:
    """Logs exact statistics of `model`'s gradients, weights, updates and activations.

    Args:
      model: an ``nn.Module``; DDP, DataParallel and ``torch.compile`` wrappers are
        looked through, so layers keep the names of the wrapped module.
      log_dir: the run directory (local, or a URL TensorBoard can write to). Use
        the directory of your SummaryWriter to see loss and layers in one run.
      optimizer: the optimizer (or a list of them) stepping the model. Steps are
        counted by its ``step()`` and the update ratio is measured around it.
        Without one, each backward pass is a step and the update ratio is measured
        at the next forward pass.
      every_n_steps: log steps whose index is a multiple of this (step 0 first).
      first_steps: also log every step whose index is below this (30 by default),
        so trouble in the first steps is seen as it starts; 0 for none.
      activations: True for every leaf module (except Identity, Flatten,
        Dropout), False for none, module names, or ``f(name, module) -> bool``.
      update_ratio: measure ||w_after - w_before|| / ||w_before||; this keeps a
        copy of the parameters during logged steps.
      start_step: index of the first step (when resuming).
      all_ranks: under torch.distributed every rank writes (to ``log_dir/rank<r>``);
        by default only rank 0 does and other ranks add no hooks.
      stop_on: ``"critical"`` or ``"warn"`` (or a `gradhealth_plugin.alerts.Alert`
        naming kinds and consecutive logged steps): after each logged step, judge
        the statistics just computed with the tab's rules and thresholds; on a
        finding at that severity, set ``handle.should_stop`` (and
        ``handle.stopped_by``), write why into the run (the ``gradhealth/stopped``
        scalar, which the tab's run summary shows) and flush. Never on info.
      raise_on_stop: with `stop_on`, also raise `TrainingStopped` from
        ``optimizer.step()`` at that step (without an optimizer: from the next
        forward pass), once.

    Returns a `WatchHandle`; `unwatch(handle)` or `unwatch(model)` removes every hook.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"gradhealth: watch() needs an nn.Module, got {type(model).__name__}")
    try:
        every_n_steps, first_steps = schedule.check(every_n_steps, first_steps)
    except ValueError as e:
        raise ValueError(f"gradhealth: {e}") from None
    stop = _stop_on(stop_on)
    root = _unwrap(model)
    optimizers = _optimizers(optimizer)
    log_dir = os.fspath(log_dir)

    rank, distributed = _rank()
    active = all_ranks or rank == 0
    if all_ranks and distributed:
        log_dir = os.path.join(log_dir, f"rank{rank}")

    previous = hooks.handle_of(root)
    if previous is not None:
        logger.info("gradhealth: %s was already watched; replacing that watch", type(root).__name__)
        unwatch(previous)

    handle = WatchHandle(root, log_dir, every_n_steps, bool(update_ratio), int(start_step), active, first_steps)
    if not active:
        return handle
    if stop is not None:
        stop.start(os.path.basename(os.path.normpath(log_dir)) or log_dir, log_dir)
        handle._stop = stop
        handle._raise_on_stop = bool(raise_on_stop)

    _watch_modules(handle, root, _activation_filter(activations))
    if optimizers:
        _hook_optimizers(handle, optimizers, int(start_step))
    else:
        accumulated = hooks.hook_for(handle, "_on_grad_accumulated")
        for p in handle._params:
            if p.param.requires_grad:
                handle._hooks.append(p.param.register_post_accumulate_grad_hook(accumulated))
            elif p.param.is_floating_point():
                # Torch refuses a gradient hook on a frozen parameter: hooked once it is unfrozen.
                handle._unhooked.append(p)
    # Numbers repeated calls of one module (a shared ReLU) from 0 in each forward pass.
    handle._hooks.append(root.register_forward_pre_hook(hooks.hook_for(handle, "_on_root_forward_pre")))
    handle._set_capture(int(start_step))
    hooks.register(root, handle)
    return handle


def unwatch(handle_or_model: Union[WatchHandle, nn.Module]) -> None:
    """Removes every hook `watch` added, writes what is pending and closes the event file."""
    if isinstance(handle_or_model, WatchHandle):
        handle = handle_or_model
    elif isinstance(handle_or_model, nn.Module):
        handle = hooks.handle_of(_unwrap(handle_or_model))
        if handle is None:
            return
    else:
        raise TypeError(f"gradhealth: unwatch() needs a WatchHandle or an nn.Module, "
                        f"got {type(handle_or_model).__name__}")
    hooks.release(handle)


def _watch_modules(handle: WatchHandle, root: nn.Module, keep: Callable[[str, nn.Module], bool]) -> None:
    """Lists the parameters (frozen ones too) and hooks the kept leaf modules' outputs, numbering both in model order."""
    position = 0
    seen = set()
    for module_name, module in root.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue  # named_parameters() lists a shared parameter once, under its first name
            seen.add(id(param))
            # Frozen ones too: they are logged once unfrozen (on the steps they train).
            name = f"{module_name}.{param_name}" if module_name else param_name
            handle._params.append(WatchedParam(name, param, position))
            position += 1
        if not any(True for _ in module.children()) and keep(module_name, module):
            name = module_name or "output"
            handle._positions[name] = position
            handle._hooks.append(module.register_forward_hook(hooks.hook_for(handle, "_on_forward", name, position)))
            position += 1


def _hook_optimizers(handle: WatchHandle, optimizers: List, start_step: int) -> None:
    """One step source per optimizer, holding the watched parameters it steps, with hooks around its step."""
    claimed = set()
    for k, opt in enumerate(optimizers):
        in_opt = {id(p) for group in opt.param_groups for p in group["params"]}
        mine = [p for p in handle._params if id(p.param) in in_opt and id(p.param) not in claimed]
        claimed.update(id(p.param) for p in mine)
        handle._sources.append(StepSource(opt, mine, start_step, primary=(k == 0)))
    # Parameters no given optimizer steps are logged with the first one's steps.
    handle._sources[0].params += [p for p in handle._params if id(p.param) not in claimed]
    for k, source in enumerate(handle._sources):
        handle._hooks.append(source.optimizer.register_step_pre_hook(hooks.hook_for(handle, "_on_step_pre", k)))
        handle._hooks.append(source.optimizer.register_step_post_hook(hooks.hook_for(handle, "_on_step_post", k)))


def _stop_on(stop_on):
    """The `live.StopOn` of ``stop_on`` (None when off); a wrong value raises here, before training."""
    if stop_on is None:
        return None
    from ..live import StopOn

    return StopOn(stop_on, logger)


def _activation_filter(activations) -> Callable[[str, nn.Module], bool]:
    if activations is True:
        return lambda name, module: not isinstance(module, _SKIPPED_MODULES)
    if activations is False or activations is None:
        return lambda name, module: False
    if callable(activations):
        return activations
    names = set(activations)
    return lambda name, module: name in names


def _unwrap(model: nn.Module) -> nn.Module:
    """The module whose names the user knows: inside DDP / DataParallel / torch.compile wrappers."""
    for _ in range(8):
        if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):
            model = model._orig_mod
        else:
            break
    return model


def _optimizers(optimizer) -> List:
    """The torch optimizers `watch` was given: none, one, or a list, each looked through its wrappers."""
    given = [] if optimizer is None else (list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer])
    return [_unwrap_optimizer(o) for o in given]


def _unwrap_optimizer(optimizer):
    """A torch Optimizer from wrappers that keep it in ``.optimizer`` (Accelerate, Lightning)."""
    for _ in range(8):
        inner = getattr(optimizer, "optimizer", None)
        # Accelerate's AcceleratedOptimizer subclasses Optimizer without its hook tables: the inner one steps.
        if inner is None or (isinstance(optimizer, torch.optim.Optimizer)
                             and not isinstance(inner, torch.optim.Optimizer)):
            break
        optimizer = inner
    if not hasattr(optimizer, "register_step_pre_hook"):
        raise TypeError(f"gradhealth: {type(optimizer).__name__} is not a torch.optim.Optimizer")
    return optimizer


def _rank() -> Tuple[int, bool]:
    """(rank, distributed?): torch.distributed when initialised, else torchrun's RANK."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), True
    except Exception:  # noqa: BLE001 - a broken backend must not stop training
        pass
    rank = os.environ.get("RANK")
    if rank is not None and rank.strip().isdigit():
        return int(rank), True
    return 0, False

