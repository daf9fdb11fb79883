"""What a gradhealth summary is: the plugin's name, the tag, the metadata and the vector layout.

One summary per (tensor, step): tag ``gradhealth/<role>/<layer>``, plugin name
``gradhealth``, data class TENSOR (both TensorBoard loaders drop tensor
summaries without it), and a float64 vector whose fields are `FIELDS` in
order. The metadata's JSON content says the format version, the role, the
layer, its position in the model and the tensor's shape.

Version 2 appends a compact histogram to the vector: `HISTOGRAM_BUCKETS`
counts in log-spaced buckets of |x| relative to the tensor's max |x|, one
octave wide (see `histogram_edges`), from the values at `sample_indices`
(every value of a tensor of up to `HISTOGRAM_SAMPLE`), scaled to the
tensor's finite count.
The first `FIELDS` keep their places: a reader of version 1 files reads
them alike, and a version 1 vector is a version 2 one without a histogram.

As TensorBoard's own plugins keep theirs in ``metadata.py``, this is the one
module both the writers and the reading side import to agree on the format.
It needs only tensorboard and numpy.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata

PLUGIN_NAME = "gradhealth"
FORMAT_VERSION = 2
# Versions this reader reads: 1 (statistics only) and 2 (statistics and a histogram).
READ_VERSIONS = (1, 2)
TAG_PREFIX = "gradhealth/"
FIELDS = (
    "count", "mean", "std", "min", "max", "l2", "zero_fraction", "small_fraction",
    "nan_count", "inf_count", "skewness", "kurtosis", "mean_abs", "max_abs", "update_ratio",
)
# |x| below this counts towards small_fraction, in every integration alike.
SMALL = 1e-6

# The histogram: per sign, HISTOGRAM_PER_SIGN buckets of |x| / max|x|, each one octave (a
# factor of 2) wide, so about 6 decades; one bucket around zero for the rest (exact zeros
# included); in ascending order of value: the most negative bucket first. Octaves, as a value's
# bucket is then its binary exponent: exact, and cheap on every device.
HISTOGRAM_PER_SIGN = 20
HISTOGRAM_BUCKETS = 2 * HISTOGRAM_PER_SIGN + 1
# Values a histogram is counted from: every value of a smaller tensor, else one value of each of
# this many equal stretches of the flattened tensor, at a fixed pseudo-random place in it.
HISTOGRAM_SAMPLE = 4096
# The length of a version 2 vector: the statistics, then the histogram.
VECTOR_WIDTH = len(FIELDS) + HISTOGRAM_BUCKETS
# The lengths a summary's vector has: the statistics alone (version 1), or with the histogram.
VECTOR_WIDTHS = (len(FIELDS), VECTOR_WIDTH)


def tag_for(role: str, layer: str) -> str:
    """The summary tag of one watched tensor."""
    return f"{TAG_PREFIX}{role}/{layer}"


def metadata_content(role: str, layer: str, position: Optional[int] = None,
                     shape: Optional[Sequence[int]] = None) -> bytes:
    """The plugin data content (JSON bytes) of a gradhealth summary."""
    # The version says the vector's layout (`FIELDS`, then the histogram): the JSON stays short, as
    # it goes with many values (tf.summary writes it with every one).
    content = {"version": FORMAT_VERSION, "role": role, "layer": layer}
    if position is not None:
        content["position"] = int(position)
    if shape is not None:
        content["shape"] = [int(s) for s in shape]
    return json.dumps(content, sort_keys=True).encode("utf-8")


class MetadataError(ValueError):
    """Summary metadata that does not follow this format; the message says why, for a person."""


# The roles the writers log. Anything else in a summary's metadata is not this format.
ROLES = ("gradient", "weight", "activation", "update")
# A shape's element count must fit an int64, as every tensor's does: its fan-in and
# fan-out are computed with numpy integers.
_MAX_ELEMENTS = 2 ** 63 - 1


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shape_problem(shape: object) -> Optional[str]:
    """Why ``shape`` is not a tensor shape (a list of positive integers), or None."""
    if not isinstance(shape, list) or not all(_is_int(s) for s in shape):
        return f"shape must be a list of integers, got {_preview(shape)}"
    if any(s < 1 for s in shape):
        return f"shape must list positive dimensions, got {_preview(shape)}"
    if math.prod(shape) > _MAX_ELEMENTS:
        return "shape has more elements than a tensor can hold"
    return None


def _preview(value: object, limit: int = 60) -> str:
    """A value as JSON, cut short: messages must stay one line, whatever the metadata holds."""
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):  # nested deeper than json.dumps goes
        text = type(value).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def read_metadata(content: bytes) -> Dict:
    """The metadata dict of a gradhealth summary, checked field by field.

    Raises `MetadataError` saying why when the content is not this format's: not
    JSON, another version, a role outside `ROLES`, a layer that is not a string,
    a position that is not an integer, or a shape that is not a list of positive
    integers. Readers report such a tag rather than trust what it says.
    """
    try:
        parsed = json.loads(bytes(content).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise MetadataError("metadata is not JSON") from None
    if not isinstance(parsed, dict):
        raise MetadataError("metadata is not a JSON object")
    if parsed.get("version") not in READ_VERSIONS or isinstance(parsed.get("version"), bool):
        raise MetadataError(f"format version {_preview(parsed.get('version'))}; this version reads "
                            f"{' and '.join(map(str, READ_VERSIONS))}")
    role = parsed.get("role")
    if role not in ROLES:
        raise MetadataError(f"role {_preview(role)} is not one of {', '.join(ROLES)}")
    if not isinstance(parsed.get("layer"), str):
        raise MetadataError(f"layer must be a string, got {_preview(parsed.get('layer'))}")
    if "position" in parsed and not _is_int(parsed["position"]):
        raise MetadataError(f"position must be an integer, got {_preview(parsed['position'])}")
    if "shape" in parsed:
        problem = _shape_problem(parsed["shape"])
        if problem is not None:
            raise MetadataError(problem)
    return parsed


def vector_problem(shape: Sequence[int]) -> Optional[str]:
    """Why a tensor of this shape is not a summary's vector (one of `VECTOR_WIDTHS` numbers), or None.

    Any other length is not this format: read as one, its fields would land in the wrong places.
    """
    if len(shape) == 1 and shape[0] in VECTOR_WIDTHS:
        return None
    widths = " or ".join(map(str, VECTOR_WIDTHS))
    return f"has shape {list(shape)}, not a vector of {widths} statistics"


def parse_metadata(content: bytes) -> Optional[Dict]:
    """The metadata dict, or None when it is not a gradhealth summary we can read (`read_metadata` says why)."""
    try:
        return read_metadata(content)
    except MetadataError:
        return None


def summary_metadata(role: str, layer: str, position: Optional[int] = None,
                     shape: Optional[Sequence[int]] = None) -> "SummaryMetadata":
    """A ``SummaryMetadata`` proto for a gradhealth summary."""
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=PLUGIN_NAME, content=metadata_content(role, layer, position, shape)),
        data_class=summary_pb2.DATA_CLASS_TENSOR,
    )


def tensor_summary(tag: str, vector: np.ndarray, meta: "Optional[SummaryMetadata]") -> "Summary":
    """A ``Summary`` proto holding one statistics vector (without metadata when `meta` is None)."""
    from tensorboard.compat.proto import summary_pb2, types_pb2

    vector = np.asarray(vector, dtype=np.float64).ravel()
    value = summary_pb2.Summary.Value(tag=tag, metadata=meta)
    # The bytes ``tensor_util.make_tensor_proto`` writes for a float64 vector, at a fraction of its cost.
    value.tensor.dtype = types_pb2.DT_DOUBLE
    value.tensor.tensor_shape.dim.add(size=vector.size)
    value.tensor.tensor_content = vector.tobytes()
    return summary_pb2.Summary(value=[value])


# The statistics a metric table takes from a vector, in `metrics.METRICS`' names; ``nonfinite`` is
# computed from nan_count and inf_count.
TABLE_FIELDS = ("count", "mean", "std", "min", "max", "l2", "zero_fraction", "small_fraction", "skewness",
                "kurtosis", "mean_abs", "max_abs", "update_ratio")


def _held(column: np.ndarray) -> np.ndarray:
    """A float64 copy of `column`, read-only; one value repeated (every value the same bits: NaN and
    -0.0 included) is held once, as a broadcast of it. A long run's tables hold many such columns (a
    tensor's count, a gradient's update ratio, nothing non-finite), each otherwise eight bytes a step."""
    column = np.array(column, dtype=np.float64)
    bits = column.view(np.uint64)
    if len(column) > 1 and np.all(bits == bits[0]):
        return np.broadcast_to(column[0], column.shape)
    column.flags.writeable = False
    return column


def vectors_to_table_values(vectors: np.ndarray, fields: Sequence[str] = FIELDS) -> Mapping[str, np.ndarray]:
    """Stacked statistics vectors (N, F) to metric arrays named as `metrics.METRICS`, read-only.

    Each array is its own copy (or one value broadcast, see `_held`): the vectors themselves (any
    numeric dtype, wider than the statistics) are not held on to.
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 2:
        vectors = vectors.reshape(len(vectors), -1)
    at = {name: i for i, name in enumerate(fields) if i < vectors.shape[1]}
    nan = np.broadcast_to(np.nan, (len(vectors),))
    values = {name: _held(vectors[:, at[name]]) if name in at else nan for name in TABLE_FIELDS}
    nonfinite = np.zeros(len(vectors))
    for name in ("nan_count", "inf_count"):
        if name in at:
            nonfinite += np.nan_to_num(vectors[:, at[name]].astype(np.float64))
    values["nonfinite"] = _held(nonfinite)
    return values


def sample_indices(n: int) -> np.ndarray:
    """The flat indices of the values a tensor of `n` values is histogrammed from (int64).

    Every index when n <= `HISTOGRAM_SAMPLE`; otherwise one per equal stretch
    of the flattened tensor, at an offset a multiplicative hash of the
    stretch's number picks, so a sample of a convolution kernel does not
    fall on one channel. Integrations compute the same indices on the device
    (`sample_indices_of`); this is the definition.
    """
    indices, valid = sample_indices_of(np.int64(n), np)
    return np.asarray(indices, dtype=np.int64)[np.asarray(valid, dtype=bool)]


def sample_indices_of(n, ops):
    """(indices, valid): `HISTOGRAM_SAMPLE` indices into a flat tensor of `n` values and which of them
    to count, written with array functions `ops` provides (numpy, or a framework's equivalents with
    `arange`, `minimum`, `maximum`, `where` and integer `//` and `%`): the formula the reference and
    every integration share. A tensor of at most that many values is taken whole: its indices, then
    repeats of its last index that are not counted."""
    s = HISTOGRAM_SAMPLE
    i = ops.arange(s, dtype=ops.int64)
    lo = i * n // s
    width = ops.maximum((i + 1) * n // s - lo, 1)
    picked = lo + (i * 2654435761 + 12345) % 2147483647 % width
    small = n <= s
    return ops.where(small, ops.minimum(i, ops.maximum(n - 1, 0)), picked), (i < n) | (n > s)


def histogram_edges(max_abs: np.ndarray) -> np.ndarray:
    """The `HISTOGRAM_BUCKETS + 1` bucket edges (ascending) for each max |x| in `max_abs` (shape (..., B + 1)).

    Magnitude edges are ``max_abs * 2 ** -j`` for j = 0 .. per_sign; the
    middle bucket spans minus to plus the smallest.
    """
    m = np.asarray(max_abs, dtype=np.float64)[..., None]
    magnitudes = m * 2.0 ** -np.arange(HISTOGRAM_PER_SIGN + 1)  # largest first
    return np.concatenate([-magnitudes, magnitudes[..., ::-1]], axis=-1)


def histogram_bucket(x: np.ndarray, max_abs) -> np.ndarray:
    """The bucket (0 .. `HISTOGRAM_BUCKETS` - 1) of each value, for a tensor whose max |x| is `max_abs`.

    |x| / max_abs in [2**-(j+1), 2**-j) is magnitude bucket j: 1022 minus the
    biased exponent of the float64 ratio (max_abs itself joins bucket 0).
    Zero, and anything below the last octave, falls in the middle bucket.
    Integer work on the ratio's bits only, which every framework does alike.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(np.asarray(x, dtype=np.float64)) / max_abs
    j = np.clip(1022 - (ratio.view(np.int64) >> 52), 0, HISTOGRAM_PER_SIGN)
    return np.where(x < 0, j, 2 * HISTOGRAM_PER_SIGN - j)


def histogram_numpy(x: np.ndarray, max_abs: float, finite_count: float) -> np.ndarray:
    """The histogram counts of a flat array (the reference the integrations match)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    sample = x[sample_indices(x.size)] if x.size else x
    sample = sample[np.isfinite(sample)]
    if not sample.size or not np.isfinite(max_abs):
        return np.zeros(HISTOGRAM_BUCKETS)
    counts = np.bincount(histogram_bucket(sample, max_abs), minlength=HISTOGRAM_BUCKETS).astype(np.float64)
    return counts * (finite_count / sample.size)


def histogram_of(vector: np.ndarray) -> Optional[np.ndarray]:
    """The ``[k, 3]`` (left, right, count) buckets a version 2 vector carries, empty ones left out,
    between the tensor's exact min and max; None for a vector without a histogram."""
    vector = np.asarray(vector, dtype=np.float64).ravel()
    counts = vector[len(FIELDS):len(FIELDS) + HISTOGRAM_BUCKETS]
    if len(counts) < HISTOGRAM_BUCKETS or not np.all(np.isfinite(counts)):
        return None
    max_abs, low, high = (vector[FIELDS.index(name)] for name in ("max_abs", "min", "max"))
    keep = counts > 0
    if not keep.any() or not np.all(np.isfinite([max_abs, low, high])):
        return np.zeros((0, 3))
    # The buckets' edges inside the exact range; the outer ones reach its ends (a sample may miss them).
    edges = np.clip(histogram_edges(max_abs), low, high)
    out = np.stack([edges[:-1], edges[1:], counts], axis=1)[keep]
    out[0, 0], out[-1, 1] = low, high
    return out
# Written once into a run that an integration's ``stop_on`` stopped: a scalar (plugin
# ``scalars``) at the step training stopped, its summary description saying why.
# The scalar listing carries the description, so reading it costs no extra read.
STOP_TAG = "gradhealth/stopped"


def stop_metadata(message: str) -> "SummaryMetadata":
    """The scalar metadata of the stop record: its description says why training stopped."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.scalar import metadata as scalar_metadata

    meta = scalar_metadata.create_summary_metadata(display_name=STOP_TAG, description=message)
    meta.data_class = summary_pb2.DATA_CLASS_SCALAR
    return meta


def stop_summary(step: int, message: str) -> "Summary":
    """The ``Summary`` recording why training stopped at `step` (its value is that step)."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    value = summary_pb2.Summary.Value(tag=STOP_TAG, metadata=stop_metadata(message),
                                      tensor=tensor_util.make_tensor_proto(np.float32(step)))
    return summary_pb2.Summary(value=[value])
