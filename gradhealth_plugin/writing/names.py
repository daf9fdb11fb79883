"""The layer names gradhealth records for framework variables."""

from __future__ import annotations

import re
from typing import Dict, List, Sequence


def variable_name(variable) -> str:
    """The layer name gradhealth records: Keras 3's ``path``, else the TF name without ``:0``."""
    name = getattr(variable, "path", None) or getattr(variable, "name", None) or "variable"
    return re.sub(r":\d+$", "", str(name))


def unique_names(names: Sequence[str]) -> List[str]:
    """`names` with every repeated name suffixed by its index, so each tensor keeps its own row.

    tf.Variables created outside a name scope all share names like "Variable".
    """
    counts: Dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return [f"{n}_{i}" if counts[n] > 1 else n for i, n in enumerate(names)]


def layer_of(parameter: str) -> str:
    """The layer a parameter's name files it under: ``mlp/dense_0/kernel`` -> ``mlp/dense_0``."""
    return parameter.rsplit("/", 1)[0]


def parameter_layers(parameters: Sequence[str]) -> List[str]:
    """The layers `parameters` are filed under, in first-seen order; a one-part name (``Variable_1``)
    names a tensor, not a layer."""
    return list(dict.fromkeys(layer_of(p) for p in parameters if "/" in p))


def _ends_with(parts: List[str], end: List[str]) -> bool:
    return len(end) <= len(parts) and parts[len(parts) - len(end):] == end


def output_name(key: str, layers: Sequence[str]) -> str:
    """The row of an output logged under `key`: the one layer of `layers` the key names, else the key.

    The key is taken apart at ``/`` as the parameters' names are, and names a layer when the
    shorter of the two part lists ends the longer: a Keras layer's ``name`` (``dense_0``) and its
    ``path`` (``mlp/dense_0``) both name the layer ``mlp/dense_0`` of ``mlp/dense_0/kernel``. A key
    that fits no layer, or several (``dense`` beside ``a/dense`` and ``b/dense``), stays as given.
    """
    if key in layers:
        return key
    parts = key.split("/")
    fits = [layer for layer in layers
            if _ends_with(layer.split("/"), parts) or _ends_with(parts, layer.split("/"))]
    return fits[0] if len(fits) == 1 else key


def scoped_name(name: str, layers: Sequence[str]) -> str:
    """`name` in the scope every layer of `layers` is filed in: ``relu`` among ``mlp/dense_0`` and
    ``mlp/dense_1`` is ``mlp/relu``. Keras gives a layer without variables no path of its own; this
    is the row the Keras callback gives it."""
    parents = [layer.split("/")[:-1] for layer in layers]
    shared: List[str] = []
    for column in zip(*parents) if parents else ():
        if len(set(column)) > 1:
            break
        shared.append(column[0])
    return "/".join(shared + [name])
