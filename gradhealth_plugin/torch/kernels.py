"""Exact statistics of PyTorch tensors, reduced on their own device in float64.

`reduce_stats` turns tensors into accumulator rows (sums, power sums about
the mean, counts and extrema, and the histogram's counts over the values at
`format.sample_indices`) without reading anything back; `to_host` moves
them to the CPU with one transfer per device and `finalize` turns them into
summary vectors (`format.FIELDS`, then the histogram). `tensor_stats` does
all three for any tensors.

Two paths give the same values: on the CPU, where reading a value is free,
a one-pass path for the usual all-finite tensor; elsewhere a branch-free
path cutting tensors into buckets reduced with one op per statistic.
"""

from __future__ import annotations

import math
import threading
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ..writing import format as fmt
from ..writing.format import FIELDS, HISTOGRAM_BUCKETS, SMALL

__all__ = ["tensor_stats", "reduce_stats", "reduce_update", "finalize", "update_ratios", "grouped", "to_host",
           "host_samples", "count_host_histograms", "ACC_WIDTH"]

# Largest number of elements reduced at once: bounds the float64 temporaries
# (a few times 32 MB) whatever the size of a tensor.
_CHUNK = 1 << 22

# Columns of the per-tensor accumulators reduced on the device.
_S_NONFINITE, _S_INF, _S_SUM, _S_SUMSQ, _S_SUMABS, _S_ZERO, _S_SMALL, _S_M2, _S_M3, _S_M4 = range(10)
_N_SUMS = 10
_X_MAX, _X_NEGMIN, _X_MAXABS = range(3)
_N_MAXES = 3
# Then the histogram's counts over the sample, scaled to the tensor's finite count in `finalize`.
_HIST = _N_SUMS + _N_MAXES
ACC_WIDTH = _HIST + HISTOGRAM_BUCKETS
_FIELD = {name: i for i, name in enumerate(FIELDS)}


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


def reduce_stats(tensors: Sequence[torch.Tensor], snapshot: bool = False,
                 histograms: bool = True) -> Tuple[torch.Tensor, List[torch.Tensor]]:
    """Accumulators (len(tensors), ACC_WIDTH) on the tensors' device, and a snapshot of their values.

    All tensors share one device and dtype. The snapshot (when asked) is what
    `reduce_update` compares the tensors with later. Without `histograms` the
    histogram's columns are zero: a caller on the CPU keeps `host_samples`
    instead and counts them with a whole step's in `count_host_histograms`.
    """
    if _CPU_BRANCHING and tensors[0].device.type == "cpu":
        acc, snapshots = _reduce_cpu(tensors, snapshot)
    else:
        acc, snapshots = _reduce_buckets(tensors, snapshot)
    counts = (_histograms(tensors, acc[:, _N_SUMS + _X_MAXABS]) if histograms
              else torch.zeros(len(tensors), HISTOGRAM_BUCKETS, dtype=acc.dtype, device=acc.device))
    return torch.cat([acc, counts], dim=1), snapshots


_SAMPLES: Dict[tuple, Tuple[torch.Tensor, np.ndarray]] = {}


def _sample(device: torch.device, n: int) -> Tuple[torch.Tensor, np.ndarray]:
    """`format.sample_indices_of` a tensor of n values: (indices on `device`, which to count), cached."""
    key = (device, n)
    with _LAYOUTS_LOCK:
        hit = _SAMPLES.get(key)
        if hit is None:
            if len(_SAMPLES) > 256:  # activations of varying batch sizes; never grow without bound
                _SAMPLES.clear()
            indices, valid = fmt.sample_indices_of(np.int64(n), np)
            hit = _SAMPLES[key] = (torch.as_tensor(indices, device=device), np.asarray(valid, dtype=bool))
    return hit


def _histograms(tensors: Sequence[torch.Tensor], max_abs: torch.Tensor, host: Optional[bool] = None) -> torch.Tensor:
    """(len(tensors), HISTOGRAM_BUCKETS) counts of each tensor's sample in `format.histogram_bucket`s.

    One gather of at most `format.HISTOGRAM_SAMPLE` values per tensor, then a
    few integer ops over all samples at once: a small cost next to the
    statistics' passes over every value. On the CPU the samples go to numpy,
    whose ops on a few thousand values cost a fraction of torch's; elsewhere
    torch ops that read nothing back (`host=False` takes them on the CPU too).
    """
    device = max_abs.device
    if device.type == "cpu" and host is not False:
        return torch.from_numpy(_histograms_host(tensors, max_abs.numpy()))
    k, width = len(tensors), HISTOGRAM_BUCKETS
    samples, counted = [], []
    for t in tensors:
        indices, valid = _sample(device, t.numel())
        flat = t.reshape(-1)
        samples.append(flat[indices] if t.numel() else torch.zeros(len(indices), dtype=flat.dtype, device=device))
        counted.append(valid)
    x = torch.stack(samples).to(torch.float64)
    weight = torch.as_tensor(np.stack(counted), dtype=torch.float64, device=device) * torch.isfinite(x)
    per_sign = fmt.HISTOGRAM_PER_SIGN
    # `format.histogram_bucket`, in torch: the octave below max |x| from the ratio's exponent bits.
    j = (1022 - ((x.abs() / max_abs[:, None]).view(torch.int64) >> 52)).clamp_(0, per_sign)
    j = torch.where(x < 0, j, 2 * per_sign - j) + torch.arange(k, device=device)[:, None] * width
    # index_add_ rather than bincount: bincount reads its input's maximum back from the device.
    counts = torch.zeros(k * width, dtype=torch.float64, device=device)
    counts.index_add_(0, j.reshape(-1), weight.reshape(-1))
    return counts.reshape(k, width)


def reduce_update(before: Sequence[torch.Tensor], tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """(len(tensors), 2): sum of squared change since `before` (a `reduce_stats` snapshot) and sum of squares before."""
    if _CPU_BRANCHING and tensors[0].device.type == "cpu":
        return _reduce_update_cpu(before, tensors)
    return _reduce_update_buckets(before, tensors)


# dtypes numpy reads as they are; others (bfloat16) go through float64 first.
_NUMPY_DTYPES = (torch.float16, torch.float32, torch.float64)


def host_samples(tensors: Sequence[torch.Tensor]) -> List[np.ndarray]:
    """Each CPU tensor's counted sample values (`format.sample_indices`), copied: what its histogram
    counts, taken now (a weight before its update, an activation before an in-place op changes it)."""
    out = []
    for t in tensors:
        n = min(t.numel(), fmt.HISTOGRAM_SAMPLE)
        indices, _ = _sample(t.device, t.numel())  # the counted ones come first: all of them
        flat = t.detach().reshape(-1)
        values = (flat if flat.dtype in _NUMPY_DTYPES else flat.to(torch.float64)).numpy()
        # A tensor taken whole is copied as a slice; a larger one's sample is a gather (a copy already).
        out.append(values[:n].copy() if n == t.numel() else values[indices.numpy()[:n]])
    return out


def count_host_histograms(acc: np.ndarray, samples: Sequence[Optional[np.ndarray]]) -> None:
    """Fills the histogram columns of host accumulator rows (`acc`, one row per entry of `samples`) from
    the `host_samples` of each row that has them, all in one call; rows without samples are left as they are."""
    rows = [i for i, sample in enumerate(samples) if sample is not None]
    if rows:
        acc[rows, _HIST:] = _count_samples([samples[i] for i in rows], acc[rows, _N_SUMS + _X_MAXABS])


def _histograms_host(tensors: Sequence[torch.Tensor], max_abs: np.ndarray) -> np.ndarray:
    """`_histograms` of CPU tensors, in numpy."""
    return _count_samples(host_samples(tensors), max_abs)


def _count_samples(parts: Sequence[np.ndarray], max_abs: np.ndarray) -> np.ndarray:
    """(len(parts), HISTOGRAM_BUCKETS) counts of each tensor's sample values, with `format.histogram_bucket`
    itself over every sample at once (a small tensor's few values, not `HISTOGRAM_SAMPLE` slots)."""
    k, width = len(parts), HISTOGRAM_BUCKETS
    lengths = np.array([len(p) for p in parts], dtype=np.int64)
    if not lengths.sum():
        return np.zeros((k, width))
    x = np.concatenate(parts).astype(np.float64, copy=False)
    rows = np.repeat(np.arange(k), lengths)
    buckets = fmt.histogram_bucket(x, max_abs[rows]) + rows * width
    finite = np.isfinite(x)
    counts = np.bincount(buckets if finite.all() else buckets[finite], minlength=k * width)
    return counts.reshape(k, width).astype(np.float64)


# On the CPU reading a value costs no synchronisation, so each tensor is first
# checked for non-finite values through its sum, and the usual all-finite case
# needs only reductions and a few elementwise ops: isfinite and where are many
# times slower than sum or dot there. On an accelerator a read per tensor would
# stall the queue, so the bucketed path below has no branch at all.
_CPU_BRANCHING = True


class _Workspace(threading.local):
    """Scratch buffers (numpy views of torch tensors) reused across logged steps.

    A fresh multi-megabyte CPU buffer is mapped and page-faulted on first
    touch, which costs several times the arithmetic done in it.
    """

    def __init__(self) -> None:
        self.size = 0
        self.x = self.a = self.b = self.mask = None

    def take(self, n: int):
        if n > self.size:
            self.size = max(n, min(2 * self.size, _CHUNK))
            self.x, self.a, self.b = (np.empty(self.size, dtype=np.float64) for _ in range(3))
            self.mask = np.empty(self.size, dtype=bool)
        return self.x[:n], self.a[:n], self.b[:n], self.mask[:n]


_WORKSPACE = _Workspace()


def _chunks(n: int):
    return [(start, min(start + _CHUNK, n)) for start in range(0, n, _CHUNK)]


def _host_view(flat: torch.Tensor) -> Optional[np.ndarray]:
    """The numpy array sharing a flat CPU tensor's memory, or None where numpy cannot read it (bfloat16)."""
    if flat.dtype not in _NUMPY_DTYPES:
        return None
    try:
        return flat.detach().numpy()
    except (RuntimeError, TypeError):  # a lazy conjugate or negative view
        return None


def _load(x: np.ndarray, flat: torch.Tensor, src: Optional[np.ndarray], start: int, stop: int) -> None:
    """Values start:stop of a flat tensor into the float64 buffer `x` (exact: every float widens exactly)."""
    if src is not None:
        np.copyto(x, src[start:stop])
    else:
        torch.from_numpy(x).copy_(flat[start:stop])


# Sums and products of NaN, of infinities or past float64's range are NaN or Inf, which the statistics
# report as they are: numpy's warning is silenced, as ``-W error`` makes it an exception inside the training.
_NONFINITE_ARITHMETIC = dict(invalid="ignore", over="ignore")


def _reduce_cpu(tensors: Sequence[torch.Tensor], snapshot: bool):
    rows, snapshots = [], []
    with np.errstate(**_NONFINITE_ARITHMETIC):
        for t in tensors:
            flat = t.reshape(-1)
            if snapshot:
                snapshots.append(flat.clone())
            row = _reduce_cpu_one(flat)
            rows.append(row if row is not None else _reduce_buckets([flat])[0][0].numpy())
    return torch.from_numpy(np.array(rows, dtype=np.float64)), snapshots


# From this many values on, the sums and products of `_reduce_cpu_one` are torch's: numpy's calls cost
# less on the many small tensors of a model, torch's vectorised reductions less on long ones.
_TORCH_FROM = 1 << 14


def _sum(x: np.ndarray) -> float:
    return float(torch.from_numpy(x).sum()) if len(x) >= _TORCH_FROM else float(x.sum())


def _dot(x: np.ndarray, y: np.ndarray) -> float:
    """x . y in float64; numpy's einsum (not its dot: BLAS threads beside the training's) or torch's dot."""
    return float(torch.dot(torch.from_numpy(x), torch.from_numpy(y))) if len(x) >= _TORCH_FROM \
        else float(np.einsum("i,i->", x, y))


def _reduce_cpu_one(flat: torch.Tensor) -> Optional[List[float]]:
    """One tensor's accumulator row in one pass, or None when it holds NaN or Inf (the bucketed path counts them).

    Power sums are taken about `shift`, the first chunk's mean, and turned into
    central moments exactly; the shift is within a few standard deviations of
    the mean, so the conversion loses at most a few bits (raw power sums about
    zero would lose the skewness of a tensor whose mean is large next to its
    spread, a LayerNorm weight near 1). In numpy, on views of the tensor: its
    calls cost a fraction of torch's, which dominate on the many small
    tensors of a model; the long reductions are torch's (`_sum`, `_dot`).
    """
    n = flat.numel()
    src = _host_view(flat)
    shift = None
    t1 = t2 = t3 = t4 = sum_abs = small = zero = 0.0
    low, high = math.inf, -math.inf
    for start, stop in _chunks(n):
        x, a, b, mask = _WORKSPACE.take(stop - start)
        _load(x, flat, src, start, stop)
        # Finite exactly when every value is (a NaN or an Inf makes it NaN or Inf).
        total = _sum(x)
        if not math.isfinite(total):
            return None
        if shift is None:
            shift = total / (stop - start)
        np.subtract(x, shift, out=a)
        np.multiply(a, a, out=b)
        t1 += total - (stop - start) * shift
        t2 += _sum(b)
        t3 += _dot(b, a)
        t4 += _dot(b, b)
        # Extrema and zeros from the tensor's own values where numpy reads them: half the bytes.
        own = src[start:stop] if src is not None else x
        low, high = min(low, float(own.min())), max(high, float(own.max()))
        zero += float(np.count_nonzero(np.equal(own, 0, out=mask)))
        np.abs(x, out=a)
        sum_abs += _sum(a)
        small += float(np.count_nonzero(np.less(a, SMALL, out=mask)))
    d = t1 / n  # mean - shift
    row = [0.0] * _HIST
    row[_S_SUM] = t1 + n * shift
    row[_S_SUMSQ] = t2 + 2 * shift * t1 + n * shift * shift
    row[_S_SUMABS] = sum_abs
    row[_S_ZERO] = zero
    row[_S_SMALL] = small
    row[_S_M2] = max(t2 - n * d * d, 0.0)
    # Products, not powers: Python's float ** raises OverflowError where * gives inf.
    row[_S_M3] = t3 - 3 * d * t2 + 2 * n * (d * d * d)
    row[_S_M4] = t4 - 4 * d * t3 + 6 * d * d * t2 - 3 * n * (d * d * d * d)
    row[_N_SUMS + _X_MAX] = high
    row[_N_SUMS + _X_NEGMIN] = -low
    row[_N_SUMS + _X_MAXABS] = max(high, -low)
    return row


def _reduce_update_cpu(before: Sequence[torch.Tensor], tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    rows = []
    with np.errstate(**_NONFINITE_ARITHMETIC):  # an infinite weight's change is NaN
        for old, t in zip(before, tensors):
            flat = t.reshape(-1)
            src, old_src = _host_view(flat), _host_view(old)
            change = squares = 0.0
            for start, stop in _chunks(flat.numel()):
                x, a, _, _ = _WORKSPACE.take(stop - start)
                _load(a, old, old_src, start, stop)
                _load(x, flat, src, start, stop)
                np.subtract(x, a, out=x)
                change += _dot(x, x)
                squares += _dot(a, a)
            rows.append([change, squares])
    return torch.tensor(rows, dtype=torch.float64)


def _reduce_buckets(tensors: Sequence[torch.Tensor], snapshot: bool = False):
    """`reduce_stats` without reading anything back: one op per statistic per bucket of tensors.

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
            bucket.sum(((absolute < SMALL) & finite).to(torch.float64)),
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


def finalize(acc: np.ndarray, numels: Sequence[int]) -> np.ndarray:
    """Accumulator rows to summary vectors (`FIELDS`, then the histogram), with `reference.stats_numpy`'s
    conventions."""
    acc = np.asarray(acc, dtype=np.float64).reshape(len(numels), ACC_WIDTH)
    s, x = acc[:, :_N_SUMS], acc[:, _N_SUMS:_HIST]
    count = np.asarray(numels, dtype=np.float64)
    nonfinite, inf = s[:, _S_NONFINITE], s[:, _S_INF]
    n = count - nonfinite
    out = np.full((len(numels), len(FIELDS) + HISTOGRAM_BUCKETS), np.nan)
    sampled = acc[:, _HIST:]
    total = sampled.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        # The sample's counts scaled to the tensor's finite values.
        out[:, len(FIELDS):] = np.where(total > 0, sampled * (n[:, None] / total), 0.0)
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


def update_ratios(acc: np.ndarray) -> np.ndarray:
    """`reduce_update` rows on the host to ||change|| / ||before||, NaN when ||before|| is 0."""
    acc = np.asarray(acc, dtype=np.float64).reshape(-1, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(acc[:, 1] > 0, np.sqrt(acc[:, 0]) / np.sqrt(acc[:, 1]), np.nan)


def grouped(tensors: Sequence[torch.Tensor]) -> List[List[int]]:
    """Indices of `tensors` grouped by (device, dtype): each group is reduced together."""
    groups: Dict[tuple, List[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    return list(groups.values())


def to_host(matrices: Sequence[torch.Tensor]) -> List[np.ndarray]:
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
    """Exact statistics of tensors and their histograms, rows of `FIELDS` then the histogram's counts,
    reduced on their device.

    Equals `reference.stats_numpy` of each tensor up to float64 rounding.
    """
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    tensors = [t.detach() for t in tensors]
    rows = np.full((len(tensors), len(FIELDS) + HISTOGRAM_BUCKETS), np.nan)
    with torch.no_grad():
        pending = []
        for group in grouped(tensors):
            members = [tensors[i] for i in group if tensors[i].numel()]
            idx = [i for i in group if tensors[i].numel()]
            if members:
                pending.append((idx, [t.numel() for t in members], reduce_stats(members)[0]))
        for (idx, numels, _), acc in zip(pending, to_host([p[2] for p in pending])):
            rows[idx] = finalize(acc, numels)
    for i, t in enumerate(tensors):
        if not t.numel():
            rows[i] = finalize(np.zeros(ACC_WIDTH), [0])[0]
    return rows
