"""Exact gradient, weight, update and activation statistics of a PyTorch model.

    from gradhealth_plugin.torch import watch
    watch(model, "runs/exp1", optimizer=optimizer)

Every `every_n_steps` optimizer steps this writes one gradhealth summary
(`summary.FIELDS`) per watched tensor into an event file in `log_dir`:

* ``gradient``: each trainable parameter's ``.grad`` just before
  ``optimizer.step()`` (after backward, after ``GradScaler.unscale_``);
* ``weight``: the parameter before that step, with the exact
  ``update_ratio`` ||w_after - w_before|| / ||w_before|| of the step;
* ``activation``: the output of each leaf module (``relu1``, ``net.2``) in the
  first training forward pass of that step.

Statistics are reduced with torch ops on the tensors' own device, in float64;
only a small matrix per device and logged step reaches the CPU. Steps that are
not logged cost a few Python calls per hook and nothing on the device.

Importing this module does not import TensorFlow (``torch.utils.tensorboard``
would), and nothing here raises into the training loop: failures are counted
on the handle and warned about once.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import logging
import math
import os
import threading
import time
import weakref
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn

from . import summary

__all__ = ["watch", "unwatch", "WatchHandle", "tensor_stats"]

logger = logging.getLogger(__name__)

GRADIENT, WEIGHT, ACTIVATION = "gradient", "weight", "activation"
EVENT_FILE_SUFFIX = ".gradhealth"

# Largest number of elements reduced at once: bounds the float64 temporaries
# (a few times 32 MB) whatever the size of a tensor.
_CHUNK = 1 << 22
# Modules whose output repeats another module's (or only rescales it): their
# rows would duplicate a neighbour and Dropout's zeros would read as dead units.
_SKIPPED_MODULES = (nn.Identity, nn.Flatten, nn.Unflatten, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d,
                    nn.AlphaDropout, nn.FeatureAlphaDropout)
_FLUSH_SECS = 5.0
_MAX_PROBLEMS = 50

# Columns of the per-tensor accumulators reduced on the device.
_S_NONFINITE, _S_INF, _S_SUM, _S_SUMSQ, _S_SUMABS, _S_ZERO, _S_SMALL, _S_M2, _S_M3, _S_M4 = range(10)
_N_SUMS = 10
_X_MAX, _X_NEGMIN, _X_MAXABS = range(3)
_N_MAXES = 3
_ACC_WIDTH = _N_SUMS + _N_MAXES
_FIELD = {name: i for i, name in enumerate(summary.FIELDS)}


# ---------------------------------------------------------------------------
# Statistics on the device

class _Bucket:
    """Up to `_CHUNK` elements from one or more tensors, reduced with one op per statistic."""

    __slots__ = ("pieces", "total", "single", "lengths", "owners")

    def __init__(self, pieces: List[Tuple[int, int, int]], device: torch.device) -> None:
        self.pieces = pieces
        self.total = sum(stop - start for _, start, stop in pieces)
        self.single = len(pieces) == 1
        if self.single:
            self.lengths = self.owners = None
        else:
            self.lengths = torch.tensor([stop - start for _, start, stop in pieces], device=device)
            self.owners = torch.tensor([i for i, _, _ in pieces], device=device)

    def gather(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """The bucket's elements, flat, in the tensors' dtype (a view when it is one tensor's slice)."""
        parts = [tensors[i].reshape(-1)[start:stop] for i, start, stop in self.pieces]
        return parts[0] if self.single else torch.cat(parts)

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        if self.single:
            return values.sum().reshape(1)
        return torch.segment_reduce(values, "sum", lengths=self.lengths)

    def max(self, values: torch.Tensor) -> torch.Tensor:
        if self.single:
            return values.amax().reshape(1)
        return torch.segment_reduce(values, "max", lengths=self.lengths)

    def add_into(self, acc: torch.Tensor, rows: torch.Tensor) -> None:
        if self.single:
            acc[self.pieces[0][0]] += rows[0]
        else:
            acc.index_add_(0, self.owners, rows)

    def max_into(self, acc: torch.Tensor, rows: torch.Tensor) -> None:
        if self.single:
            i = self.pieces[0][0]
            acc[i] = torch.maximum(acc[i], rows[0])
        else:
            acc.scatter_reduce_(0, self.owners.unsqueeze(1).expand_as(rows), rows, "amax")


class _Layout:
    """How a list of same-device, same-dtype tensors is cut into buckets."""

    def __init__(self, numels: Sequence[int], device: torch.device) -> None:
        self.numels = list(numels)
        buckets: List[List[Tuple[int, int, int]]] = []
        current: List[Tuple[int, int, int]] = []
        room = _CHUNK
        for i, n in enumerate(self.numels):
            start = 0
            while start < n:
                take = min(n - start, room)
                current.append((i, start, start + take))
                start += take
                room -= take
                if room == 0:
                    buckets.append(current)
                    current, room = [], _CHUNK
        if current:
            buckets.append(current)
        self.buckets = [_Bucket(b, device) for b in buckets]
        self.device = device
        self.numel_tensor = torch.tensor(self.numels, dtype=torch.float64, device=device)


_LAYOUTS: Dict[tuple, _Layout] = {}
_LAYOUTS_LOCK = threading.Lock()


def _layout(tensors: Sequence[torch.Tensor]) -> _Layout:
    key = (tensors[0].device, tuple(t.numel() for t in tensors))
    with _LAYOUTS_LOCK:
        layout = _LAYOUTS.get(key)
        if layout is None:
            if len(_LAYOUTS) > 256:  # activations of varying batch sizes; never grow without bound
                _LAYOUTS.clear()
            layout = _LAYOUTS[key] = _Layout(key[1], key[0])
    return layout


def _reduce(tensors: Sequence[torch.Tensor], snapshot: bool = False):
    """Accumulators (len(tensors), _ACC_WIDTH) on the tensors' device, and a snapshot of their values.

    All tensors share one device and dtype. The snapshot (when asked) is what
    `_reduce_update` compares the tensors with later.
    """
    if _CPU_BRANCHING and tensors[0].device.type == "cpu":
        return _reduce_cpu(tensors, snapshot)
    return _reduce_buckets(tensors, snapshot)


def _reduce_update(before, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """(len(tensors), 2): sum of squared change since `before` (a `_reduce` snapshot) and sum of squares before."""
    if _CPU_BRANCHING and tensors[0].device.type == "cpu":
        return _reduce_update_cpu(before, tensors)
    return _reduce_update_buckets(before, tensors)


# On the CPU reading a value costs no synchronisation, so each tensor is first
# checked for non-finite values through its sum, and the usual all-finite case
# needs only reductions and a few elementwise ops: isfinite and where are many
# times slower than sum or dot there. On an accelerator a read per tensor would
# stall the queue, so the bucketed path below has no branch at all.
_CPU_BRANCHING = True


class _Workspace(threading.local):
    """Scratch buffers reused across logged steps.

    A fresh multi-megabyte CPU tensor is mapped and page-faulted on first
    touch, which costs several times the arithmetic done in it.
    """

    def __init__(self) -> None:
        self.size = 0
        self.x = self.a = self.b = self.mask = None

    def take(self, n: int):
        if n > self.size:
            self.size = max(n, min(2 * self.size, _CHUNK))
            self.x, self.a, self.b = (torch.empty(self.size, dtype=torch.float64) for _ in range(3))
            self.mask = torch.empty(self.size, dtype=torch.bool)
        return self.x[:n], self.a[:n], self.b[:n], self.mask[:n]


_WORKSPACE = _Workspace()


def _chunks(n: int):
    return [(start, min(start + _CHUNK, n)) for start in range(0, n, _CHUNK)]


def _reduce_cpu(tensors: Sequence[torch.Tensor], snapshot: bool):
    rows, snapshots = [], []
    for t in tensors:
        flat = t.reshape(-1)
        if snapshot:
            snapshots.append(flat.clone())
        row = _reduce_cpu_one(flat)
        rows.append(row if row is not None else _reduce_buckets([flat])[0][0])
    return torch.stack(rows), snapshots


def _reduce_cpu_one(flat: torch.Tensor) -> Optional[torch.Tensor]:
    """One tensor's accumulator row in one pass, or None when it holds NaN or Inf (the bucketed path counts them).

    Power sums are taken about `shift`, the first chunk's mean, and turned into
    central moments exactly; the shift is within a few standard deviations of
    the mean, so the conversion loses at most a few bits (raw power sums about
    zero would lose the skewness of a tensor whose mean is large next to its
    spread, a LayerNorm weight near 1).
    """
    n = flat.numel()
    shift = None
    t1 = t2 = t3 = t4 = sum_abs = small = zero = 0.0
    low, high = math.inf, -math.inf
    for start, stop in _chunks(n):
        x, a, b, mask = _WORKSPACE.take(stop - start)
        x.copy_(flat[start:stop])
        if shift is None:
            shift = float(x.sum()) / (stop - start)
            if not math.isfinite(shift):
                return None
        torch.sub(x, shift, out=a)
        part = float(a.sum())
        if not math.isfinite(part):
            return None
        torch.mul(a, a, out=b)
        t1 += part
        t2 += float(b.sum())
        t3 += float(torch.dot(b, a))
        t4 += float(torch.dot(b, b))
        lo, hi = torch.aminmax(x)
        low, high = min(low, float(lo)), max(high, float(hi))
        torch.abs(x, out=a)
        sum_abs += float(a.sum())
        # count_nonzero of a float tensor is ~20x slower than of a bool mask on the CPU.
        small += float(torch.count_nonzero(torch.lt(a, summary.SMALL, out=mask)))
        zero += float(torch.count_nonzero(torch.eq(x, 0, out=mask)))
    d = t1 / n  # mean - shift
    row = [0.0] * _ACC_WIDTH
    row[_S_SUM] = t1 + n * shift
    row[_S_SUMSQ] = t2 + 2 * shift * t1 + n * shift * shift
    row[_S_SUMABS] = sum_abs
    row[_S_ZERO] = zero
    row[_S_SMALL] = small
    row[_S_M2] = max(t2 - n * d * d, 0.0)
    row[_S_M3] = t3 - 3 * d * t2 + 2 * n * d ** 3
    row[_S_M4] = t4 - 4 * d * t3 + 6 * d * d * t2 - 3 * n * d ** 4
    row[_N_SUMS + _X_MAX] = high
    row[_N_SUMS + _X_NEGMIN] = -low
    row[_N_SUMS + _X_MAXABS] = max(high, -low)
    return torch.tensor(row, dtype=torch.float64)


def _reduce_update_cpu(before: Sequence[torch.Tensor], tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    rows = []
    for old, t in zip(before, tensors):
        flat = t.reshape(-1)
        change = squares = 0.0
        for start, stop in _chunks(flat.numel()):
            x, a, _, _ = _WORKSPACE.take(stop - start)
            a.copy_(old[start:stop])
            x.copy_(flat[start:stop])
            x.sub_(a)
            change += float(torch.dot(x, x))
            squares += float(torch.dot(a, a))
        rows.append([change, squares])
    return torch.tensor(rows, dtype=torch.float64)


def _reduce_buckets(tensors: Sequence[torch.Tensor], snapshot: bool = False):
    """`_reduce` without reading anything back: one op per statistic per bucket of tensors.

    Two passes: sums, extrema and counts first, then moments about the mean
    (raw power sums would lose the skewness of a tensor whose mean is large
    next to its spread). Non-finite values are counted and left out of the rest.
    """
    layout = _layout(tensors)
    device = layout.device
    n = len(tensors)
    sums = torch.zeros(n, _N_SUMS, dtype=torch.float64, device=device)
    maxes = torch.full((n, _N_MAXES), -math.inf, dtype=torch.float64, device=device)
    kept: List[Tuple[torch.Tensor, torch.Tensor]] = []
    snapshots: List[torch.Tensor] = []
    reuse = len(layout.buckets) == 1
    for bucket in layout.buckets:
        flat = bucket.gather(tensors)
        if snapshot:
            # gather() returns a view for a single slice: the optimizer would update it in place.
            snapshots.append(flat.clone() if bucket.single else flat)
        x = flat.to(torch.float64)
        finite = torch.isfinite(x)
        xf = torch.where(finite, x, 0.0)
        absolute = xf.abs()
        columns = [
            bucket.sum((~finite).to(torch.float64)),
            bucket.sum(torch.isinf(x).to(torch.float64)),
            bucket.sum(xf),
            bucket.sum(xf * xf),
            bucket.sum(absolute),
            bucket.sum((x == 0).to(torch.float64)),
            bucket.sum(((absolute < summary.SMALL) & finite).to(torch.float64)),
        ]
        bucket.add_into(sums[:, :len(columns)], torch.stack(columns, dim=1))
        extrema = torch.stack([
            bucket.max(torch.where(finite, x, -math.inf)),
            bucket.max(torch.where(finite, -x, -math.inf)),
            bucket.max(absolute),
        ], dim=1)
        bucket.max_into(maxes, extrema)
        if reuse:
            kept.append((x, finite))
    mean = sums[:, _S_SUM] / (layout.numel_tensor - sums[:, _S_NONFINITE])
    for j, bucket in enumerate(layout.buckets):
        if reuse:
            x, finite = kept[j]
        else:
            x = bucket.gather(tensors).to(torch.float64)
            finite = torch.isfinite(x)
        if bucket.single:
            centre = mean[bucket.pieces[0][0]]
        else:
            centre = torch.repeat_interleave(mean[bucket.owners], bucket.lengths, output_size=bucket.total)
        c = torch.where(finite, x - centre, 0.0)
        c2 = c * c
        bucket.add_into(sums[:, _S_M2:], torch.stack([bucket.sum(c2), bucket.sum(c2 * c), bucket.sum(c2 * c2)], dim=1))
    return torch.cat([sums, maxes], dim=1), snapshots


def _reduce_update_buckets(before: Sequence[torch.Tensor], tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    layout = _layout(tensors)
    acc = torch.zeros(len(tensors), 2, dtype=torch.float64, device=layout.device)
    for bucket, old in zip(layout.buckets, before):
        old = old.to(torch.float64)
        change = bucket.gather(tensors).to(torch.float64) - old
        bucket.add_into(acc, torch.stack([bucket.sum(change * change), bucket.sum(old * old)], dim=1))
    return acc


def _finalize(acc: np.ndarray, numels: Sequence[int]) -> np.ndarray:
    """Accumulator rows to `summary.FIELDS` vectors, with `summary.stats_numpy`'s conventions."""
    acc = np.asarray(acc, dtype=np.float64).reshape(len(numels), _ACC_WIDTH)
    s, x = acc[:, :_N_SUMS], acc[:, _N_SUMS:]
    count = np.asarray(numels, dtype=np.float64)
    nonfinite, inf = s[:, _S_NONFINITE], s[:, _S_INF]
    n = count - nonfinite
    out = np.full((len(numels), len(summary.FIELDS)), np.nan)
    out[:, _FIELD["count"]] = count
    out[:, _FIELD["nan_count"]] = nonfinite - inf
    out[:, _FIELD["inf_count"]] = inf
    with np.errstate(divide="ignore", invalid="ignore"):
        var = s[:, _S_M2] / n
        values = {
            "mean": s[:, _S_SUM] / n, "std": np.sqrt(var), "min": -x[:, _X_NEGMIN], "max": x[:, _X_MAX],
            "l2": np.sqrt(s[:, _S_SUMSQ]), "zero_fraction": s[:, _S_ZERO] / n,
            "small_fraction": s[:, _S_SMALL] / n,
            "skewness": np.where(var > 0, (s[:, _S_M3] / n) / var ** 1.5, np.nan),
            "kurtosis": np.where(var > 0, (s[:, _S_M4] / n) / var ** 2 - 3, np.nan),
            "mean_abs": s[:, _S_SUMABS] / n, "max_abs": x[:, _X_MAXABS],
        }
    some = n > 0
    for name, value in values.items():
        out[some, _FIELD[name]] = value[some]
    return out


def _update_ratios(acc: np.ndarray) -> np.ndarray:
    acc = np.asarray(acc, dtype=np.float64).reshape(-1, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(acc[:, 1] > 0, np.sqrt(acc[:, 0]) / np.sqrt(acc[:, 1]), np.nan)


def _grouped(tensors: Sequence[torch.Tensor]) -> List[List[int]]:
    """Indices of `tensors` grouped by (device, dtype): each group is reduced together."""
    groups: Dict[tuple, List[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    return list(groups.values())


def _to_host(matrices: Sequence[torch.Tensor]) -> List[np.ndarray]:
    """Device matrices to numpy with one transfer (one synchronisation) per device."""
    out: List[Optional[np.ndarray]] = [None] * len(matrices)
    by_device: Dict[torch.device, List[int]] = {}
    for i, m in enumerate(matrices):
        by_device.setdefault(m.device, []).append(i)
    for indices in by_device.values():
        flat = torch.cat([matrices[i].reshape(-1) for i in indices]).cpu().numpy()
        offset = 0
        for i in indices:
            size = matrices[i].numel()
            out[i] = flat[offset:offset + size].reshape(matrices[i].shape)
            offset += size
    return out  # type: ignore[return-value]


def tensor_stats(tensors: Union[torch.Tensor, Sequence[torch.Tensor]]) -> np.ndarray:
    """Exact statistics of tensors, rows of `summary.FIELDS`, reduced on their device.

    Equals `summary.stats_numpy` of each tensor up to float64 rounding.
    """
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    tensors = [t.detach() for t in tensors]
    rows = np.full((len(tensors), len(summary.FIELDS)), np.nan)
    with torch.no_grad():
        pending = []
        for group in _grouped(tensors):
            members = [tensors[i] for i in group if tensors[i].numel()]
            idx = [i for i in group if tensors[i].numel()]
            if members:
                pending.append((idx, [t.numel() for t in members], _reduce(members)[0]))
        for (idx, numels, _), acc in zip(pending, _to_host([p[2] for p in pending])):
            rows[idx] = _finalize(acc, numels)
    for i, t in enumerate(tensors):
        if not t.numel():
            rows[i] = _finalize(np.zeros(_ACC_WIDTH), [0])[0]
    return rows


# ---------------------------------------------------------------------------
# Writing

# ---------------------------------------------------------------------------
# Watching

def _compiling_check() -> Callable[[], bool]:
    check = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if check is None:  # torch < 2.3
        try:
            from torch._dynamo import is_compiling as check
        except Exception:  # noqa: BLE001
            return lambda: False
    return check


# Dynamo evaluates this to True while tracing, so hooks traced into a compiled
# graph reduce to nothing instead of breaking the graph.
_is_compiling = _compiling_check()


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


def _unwrap_optimizer(optimizer):
    """A torch Optimizer from wrappers that keep it in ``.optimizer`` (Accelerate, Lightning)."""
    for _ in range(8):
        if isinstance(optimizer, torch.optim.Optimizer) or not hasattr(optimizer, "optimizer"):
            break
        optimizer = optimizer.optimizer
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


def _first_tensor(output):
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]  # LSTM/GRU (output, state), MultiheadAttention (output, weights), PackedSequence
    return None


class _Param:
    __slots__ = ("name", "param", "position")

    def __init__(self, name: str, param: nn.Parameter, position: int) -> None:
        self.name, self.param, self.position = name, param, position


class _Pending:
    """Device accumulators of one logged step, waiting for the step to finish."""

    __slots__ = ("step", "wall_time", "grads", "weights", "snapshots")

    def __init__(self, step: int) -> None:
        self.step = step
        self.wall_time = time.time()
        self.grads: List[tuple] = []  # (params, accumulators)
        self.weights: List[tuple] = []  # (params, accumulators, snapshots or None)
        self.snapshots = False


class _StepSource:
    """One optimizer and the watched parameters it steps; counts its own steps."""

    def __init__(self, optimizer, params: List[_Param], step: int, primary: bool) -> None:
        self.optimizer = optimizer
        self.params = params
        self.step = step
        self.primary = primary
        self.pending: Optional[_Pending] = None


class WatchHandle:
    """What `watch` returns: pass it (or the model) to `unwatch`.

    ``step`` is the index of the optimizer step in progress, ``errors`` counts
    logging failures (none of which reached the training loop), ``problems``
    keeps their first messages and ``skipped`` the modules whose output could
    not be summarised and why.
    """

    def __init__(self, model: nn.Module, log_dir: str, every_n_steps: int, update_ratio: bool,
                 start_step: int, active: bool) -> None:
        self.log_dir = log_dir
        self.every_n_steps = every_n_steps
        self.update_ratio = update_ratio
        self.active = active
        self.number = next(_NUMBERS)
        self._errors = 0
        self.problems: List[str] = []
        self.skipped: Dict[str, str] = {}
        self.steps_logged = 0
        self._model_ref = weakref.ref(model)
        self._hooks: list = []
        self._params: List[_Param] = []
        self._sources: List[_StepSource] = []
        self._backward_step = start_step  # without an optimizer: backward passes count the steps
        self._backward_queued = False
        self._capture = False
        self._activations: Dict[str, tuple] = {}  # layer -> (accumulators, numel, shape, position)
        self._calls: Dict[str, int] = {}
        self._positions: Dict[str, int] = {}
        self._deferred: Optional[tuple] = None  # without an optimizer: weights waiting for their update
        self._warned: set = set()
        self._writer: Optional[summary.SummaryFileWriter] = None
        self._last_flush = time.monotonic()
        self._closed = False

    # -- public ----------------------------------------------------------

    @property
    def step(self) -> int:
        if self._sources:
            return self._sources[0].step
        return self._backward_step

    @property
    def errors(self) -> int:
        return self._errors + (self._writer.errors if self._writer is not None else 0)

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
        unwatch(self)

    def __enter__(self) -> "WatchHandle":
        return self

    def __exit__(self, *exc) -> None:
        unwatch(self)

    def __repr__(self) -> str:
        model = self._model_ref()
        return (f"WatchHandle({type(model).__name__ if model is not None else None}, log_dir={self.log_dir!r}, "
                f"every_n_steps={self.every_n_steps}, step={self.step}, active={self.active}, errors={self.errors})")

    # -- failures --------------------------------------------------------

    def _fail(self, what: str, error: BaseException) -> None:
        self._errors += 1
        message = f"{what}: {type(error).__name__}: {error}"
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(message)
        if what not in self._warned:
            self._warned.add(what)
            logger.warning("gradhealth: could not %s (%s: %s); training continues", what, type(error).__name__, error)
        else:
            logger.debug("gradhealth: could not %s: %s", what, error)

    def _skip(self, layer: str, reason: str) -> None:
        if layer not in self.skipped:
            self.skipped[layer] = reason
            logger.info("gradhealth: not summarising the output of %s: %s", layer, reason)

    # -- step logic ------------------------------------------------------

    def _logged(self, step: int) -> bool:
        return step % self.every_n_steps == 0

    def _start(self, params: List[_Param], step: int, snapshots: bool) -> _Pending:
        """Reduces gradients and weights of `params` on their devices (off the CPU without reading anything back)."""
        pending = _Pending(step)
        with torch.no_grad():
            with_grad = [p for p in self._present(params) if p.param.grad is not None]
            grads = [self._dense(p.param.grad) for p in with_grad]
            for group in _grouped(grads):
                members = [with_grad[i] for i in group]
                acc, _ = _reduce([grads[i] for i in group])
                pending.grads.append((members, acc))
            present = self._present(params)
            weights = [p.param.detach() for p in present]
            for group in _grouped(weights):
                members = [present[i] for i in group]
                acc, snaps = _reduce([weights[i] for i in group], snapshot=snapshots)
                pending.weights.append((members, acc, snaps if snapshots else None))
        pending.snapshots = snapshots
        return pending

    @staticmethod
    def _present(params: List[_Param]) -> List[_Param]:
        return [p for p in params if p.param.numel() and p.param.is_floating_point()]

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
                out.append(_reduce_update(snaps, [p.param.detach() for p in members]))
        return out

    def _finish(self, pending: _Pending, updates: Optional[List[Optional[torch.Tensor]]], write_weights: bool = True,
                activations: Optional[Dict[str, tuple]] = None):
        """Moves the step's accumulators to the CPU and writes them; returns the weight rows if not written."""
        activations = activations or {}
        matrices = [acc for _, acc in pending.grads] + [acc for _, acc, _ in pending.weights]
        matrices += [u for u in (updates or []) if u is not None]
        matrices += [entry[0] for entry in activations.values()]
        host = _to_host(matrices)
        # One _finalize for the whole step: numpy's per-call cost dominates on a few rows.
        stats_host = host[:len(pending.grads) + len(pending.weights)] + host[len(host) - len(activations):]
        numels = [p.param.numel() for members, _ in pending.grads for p in members]
        numels += [p.param.numel() for members, _, _ in pending.weights for p in members]
        numels += [entry[1] for entry in activations.values()]
        rows = _finalize(np.concatenate([h.reshape(-1, _ACC_WIDTH) for h in stats_host]) if stats_host
                         else np.zeros((0, _ACC_WIDTH)), numels)
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
                    for i, (name, (_, _, shape, position)) in enumerate(activations.items())]
        update_host = iter(host[len(pending.grads) + len(pending.weights):len(host) - len(activations)])
        for j, update in enumerate(updates or []):
            if update is not None:
                weight_rows[j][1][:, _FIELD["update_ratio"]] = _update_ratios(next(update_host))
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

    def _write_weights(self, step: int, wall: float, weight_rows) -> None:
        writer = self._ensure_writer()
        for members, rows in weight_rows:
            for p, row in zip(members, rows):
                writer.write_stats(step, WEIGHT, p.name, row, p.position, tuple(p.param.shape), wall)
        self.steps_logged += 1
        if time.monotonic() - self._last_flush >= _FLUSH_SECS:
            self.flush()

    def _ensure_writer(self) -> summary.SummaryFileWriter:
        if self._writer is None:
            self._writer = summary.SummaryFileWriter(self.log_dir, filename_suffix=EVENT_FILE_SUFFIX)
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

    # -- hooks without an optimizer --------------------------------------

    def _on_grad_accumulated(self, param) -> None:
        if self._backward_queued:
            return
        try:
            torch.autograd.Variable._execution_engine.queue_callback(self._on_backward_end)
            self._backward_queued = True
        except Exception as e:  # noqa: BLE001
            self._fail("follow the end of backward", e)

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
        for (members, rows), update in zip(weight_rows, _to_host([u for u in updates if u is not None])):
            rows[:, _FIELD["update_ratio"]] = _update_ratios(update)
        self._write_weights(pending.step, pending.wall_time, weight_rows)

    # -- hooks on modules ------------------------------------------------

    def _on_root_forward_pre(self, module, args) -> None:
        self._calls = {}
        # A backward that raised never ran its end callback; a new forward means it is over.
        self._backward_queued = False
        if self._deferred is not None:
            try:
                self._write_deferred()
            except Exception as e:  # noqa: BLE001
                self._fail("write the update ratio of the last logged step", e)

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
                acc, _ = _reduce([tensor.detach()])
            self._activations[layer] = (acc, tensor.numel(), tuple(tensor.shape), position)
        except Exception as e:  # noqa: BLE001
            self._fail(f"summarise the output of {name}", e)

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


# The model keeps its handle alive (the handle holds the model only weakly).
_WATCHED: "weakref.WeakKeyDictionary[nn.Module, WatchHandle]" = weakref.WeakKeyDictionary()
_LIVE: "weakref.WeakSet[WatchHandle]" = weakref.WeakSet()
_HANDLES: "weakref.WeakValueDictionary[int, WatchHandle]" = weakref.WeakValueDictionary()
_NUMBERS = itertools.count(1)


def _hook(number: int, method: str, *args):
    """Every hook `watch` adds is a partial of this function, which finds the handle by number.

    Bound methods would make ``copy.deepcopy(model)`` (EMA copies) and
    ``torch.save(model)`` copy or pickle the handle with its open event file and
    fail; a copied model's hooks reach the same live handle, an unpickled one's
    reach none and do nothing.
    """
    # First: while Dynamo traces a hook this is True, so the hook adds nothing to
    # the graph, breaks nothing, and no guard on the handle's state recompiles it.
    if _is_compiling():
        return None
    handle = _HANDLES.get(number)
    if handle is None:
        return None
    return getattr(handle, method)(*args)
_REGISTRY_LOCK = threading.Lock()


def _activation_filter(activations) -> Callable[[str, nn.Module], bool]:
    if activations is True:
        return lambda name, module: not isinstance(module, _SKIPPED_MODULES)
    if activations is False or activations is None:
        return lambda name, module: False
    if callable(activations):
        return activations
    names = set(activations)
    return lambda name, module: name in names


def watch(model: nn.Module, log_dir: str, optimizer=None, every_n_steps: int = 100,
          activations: Union[bool, Iterable[str], Callable[[str, nn.Module], bool]] = True, *,
          update_ratio: bool = True, start_step: int = 0, all_ranks: bool = False) -> WatchHandle:
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
      activations: True for every leaf module (except Identity, Flatten,
        Dropout), False for none, module names, or ``f(name, module) -> bool``.
      update_ratio: measure ||w_after - w_before|| / ||w_before||; this keeps a
        copy of the parameters during logged steps.
      start_step: index of the first step (when resuming).
      all_ranks: under torch.distributed every rank writes (to ``log_dir/rank<r>``);
        by default only rank 0 does and other ranks add no hooks.

    Returns a `WatchHandle`; `unwatch(handle)` or `unwatch(model)` removes every hook.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"gradhealth: watch() needs an nn.Module, got {type(model).__name__}")
    if int(every_n_steps) < 1:
        raise ValueError("gradhealth: every_n_steps must be at least 1")
    every_n_steps = int(every_n_steps)
    root = _unwrap(model)
    optimizers = [] if optimizer is None else (
        list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer])
    optimizers = [_unwrap_optimizer(o) for o in optimizers]
    log_dir = os.fspath(log_dir)

    rank, distributed = _rank()
    active = all_ranks or rank == 0
    if all_ranks and distributed:
        log_dir = os.path.join(log_dir, f"rank{rank}")

    with _REGISTRY_LOCK:
        previous = _WATCHED.get(root)
    if previous is not None:
        logger.info("gradhealth: %s was already watched; replacing that watch", type(root).__name__)
        unwatch(previous)

    handle = WatchHandle(root, log_dir, every_n_steps, bool(update_ratio), int(start_step), active)
    if not active:
        return handle

    keep = _activation_filter(activations)
    position = 0
    seen = set()
    for module_name, module in root.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue  # named_parameters() lists a shared parameter once, under its first name
            seen.add(id(param))
            if param.requires_grad:
                name = f"{module_name}.{param_name}" if module_name else param_name
                handle._params.append(_Param(name, param, position))
                position += 1
        if not any(True for _ in module.children()) and keep(module_name, module):
            name = module_name or "output"
            handle._positions[name] = position
            hook = functools.partial(_hook, handle.number, "_on_forward", name, position)
            handle._hooks.append(module.register_forward_hook(hook))
            position += 1

    if optimizers:
        claimed = set()
        for k, opt in enumerate(optimizers):
            in_opt = {id(p) for group in opt.param_groups for p in group["params"]}
            mine = [p for p in handle._params if id(p.param) in in_opt and id(p.param) not in claimed]
            claimed.update(id(p.param) for p in mine)
            handle._sources.append(_StepSource(opt, mine, int(start_step), primary=(k == 0)))
        # Parameters no given optimizer steps are logged with the first one's steps.
        handle._sources[0].params += [p for p in handle._params if id(p.param) not in claimed]
        for k, source in enumerate(handle._sources):
            handle._hooks.append(source.optimizer.register_step_pre_hook(
                functools.partial(_hook, handle.number, "_on_step_pre", k)))
            handle._hooks.append(source.optimizer.register_step_post_hook(
                functools.partial(_hook, handle.number, "_on_step_post", k)))
    else:
        accumulated = functools.partial(_hook, handle.number, "_on_grad_accumulated")
        for p in handle._params:
            handle._hooks.append(p.param.register_post_accumulate_grad_hook(accumulated))
    # Numbers repeated calls of one module (a shared ReLU) from 0 in each forward pass.
    handle._hooks.append(root.register_forward_pre_hook(
        functools.partial(_hook, handle.number, "_on_root_forward_pre")))
    handle._set_capture(int(start_step))

    with _REGISTRY_LOCK:
        _WATCHED[root] = handle
        _LIVE.add(handle)
        _HANDLES[handle.number] = handle
    return handle


def unwatch(handle_or_model: Union[WatchHandle, nn.Module]) -> None:
    """Removes every hook `watch` added, writes what is pending and closes the event file."""
    if isinstance(handle_or_model, WatchHandle):
        handle = handle_or_model
    elif isinstance(handle_or_model, nn.Module):
        with _REGISTRY_LOCK:
            handle = _WATCHED.get(_unwrap(handle_or_model))
        if handle is None:
            return
    else:
        raise TypeError(f"gradhealth: unwatch() needs a WatchHandle or an nn.Module, "
                        f"got {type(handle_or_model).__name__}")
    with _REGISTRY_LOCK:
        model = handle._model_ref()
        if model is not None and _WATCHED.get(model) is handle:
            del _WATCHED[model]
        _LIVE.discard(handle)
        _HANDLES.pop(handle.number, None)
    handle._close()


@atexit.register
def _close_all() -> None:
    # Event files are buffered: write what is pending when the script ends without unwatch().
    for handle in list(_LIVE):
        try:
            handle._close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
