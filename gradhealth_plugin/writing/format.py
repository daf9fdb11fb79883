"""What a gradhealth summary is: the plugin's name, the tag, the metadata and the vector layout.

One summary per (tensor, step): tag ``gradhealth/<role>/<layer>``, plugin name
``gradhealth``, data class TENSOR (both TensorBoard loaders drop tensor
summaries without it), and a float64 vector whose fields are `FIELDS` in
order. The metadata's JSON content says the format version, the role, the
layer, its position in the model and the tensor's shape.

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
FORMAT_VERSION = 1
TAG_PREFIX = "gradhealth/"
FIELDS = (
    "count", "mean", "std", "min", "max", "l2", "zero_fraction", "small_fraction",
    "nan_count", "inf_count", "skewness", "kurtosis", "mean_abs", "max_abs", "update_ratio",
)
# |x| below this counts towards small_fraction, in every integration alike.
SMALL = 1e-6


def tag_for(role: str, layer: str) -> str:
    """The summary tag of one watched tensor."""
    return f"{TAG_PREFIX}{role}/{layer}"


def metadata_content(role: str, layer: str, position: Optional[int] = None,
                     shape: Optional[Sequence[int]] = None) -> bytes:
    """The plugin data content (JSON bytes) of a gradhealth summary."""
    content = {"version": FORMAT_VERSION, "role": role, "layer": layer, "fields": list(FIELDS)}
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
    if parsed.get("version") != FORMAT_VERSION or isinstance(parsed.get("version"), bool):
        raise MetadataError(f"format version {_preview(parsed.get('version'))}; this version reads {FORMAT_VERSION}")
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


def tensor_summary(tag: str, vector: np.ndarray, meta: "SummaryMetadata") -> "Summary":
    """A ``Summary`` proto holding one statistics vector."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    value = summary_pb2.Summary.Value(tag=tag, metadata=meta,
                                      tensor=tensor_util.make_tensor_proto(np.asarray(vector, dtype=np.float64)))
    return summary_pb2.Summary(value=[value])


def vectors_to_table_values(vectors: np.ndarray, fields: Sequence[str] = FIELDS) -> Mapping[str, np.ndarray]:
    """Stacked statistics vectors (N, F) to metric arrays named as `metrics.METRICS`."""
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2:
        vectors = vectors.reshape(len(vectors), -1)
    col = {name: vectors[:, i] if i < vectors.shape[1] else np.full(len(vectors), np.nan)
           for i, name in enumerate(fields)}
    nan = np.full(len(vectors), np.nan)
    values = {name: col.get(name, nan) for name in (
        "count", "mean", "std", "min", "max", "l2", "zero_fraction", "small_fraction", "skewness", "kurtosis",
        "mean_abs", "max_abs", "update_ratio")}
    values["nonfinite"] = np.nan_to_num(col.get("nan_count", nan)) + np.nan_to_num(col.get("inf_count", nan))
    return values


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
