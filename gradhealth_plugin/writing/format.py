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


def parse_metadata(content: bytes) -> Optional[Dict]:
    """The metadata dict, or None when it is not a gradhealth summary we can read."""
    try:
        parsed = json.loads(bytes(content).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or parsed.get("version") != FORMAT_VERSION:
        return None
    if not isinstance(parsed.get("role"), str) or not isinstance(parsed.get("layer"), str):
        return None
    return parsed


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
