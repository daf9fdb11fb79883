"""A first logged weight std more than a factor away from both the He and the
Glorot value for the kernel's shape (seeds 002, 003).
"""

from __future__ import annotations

from typing import List, Mapping, Optional

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from ..finding import WARN, Finding
from ..spans import Hit, group

KIND = "init_scale"
ORDER = 120
SEVERITY = WARN
LABEL = "Initialisation scale"
METRIC = "std"
NEEDS = (tags_lib.WEIGHT,)
ADVICE = ("Re-initialise: He (std sqrt(2/fan_in)) for ReLU layers, Glorot (std sqrt(2/(fan_in+fan_out))) "
          "for tanh/sigmoid.")
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    factor = limits["init_scale_factor"]
    hits = [h for h in (_hit(layer, factor) for layer in rd.layers) if h is not None]
    f = group(rd, KIND, SEVERITY, tags_lib.WEIGHT, hits, factor,
              f"start with a std more than {factor:g}x away from both the He and the Glorot value", ADVICE)
    return [f] if f is not None else []


def _hit(layer, factor: float) -> Optional[Hit]:
    shape = getattr(layer, "shape", None)
    rdata = layer.roles.get(tags_lib.WEIGHT)
    if not shape or rdata is None or layer.kind != tags_lib.KIND_KERNEL or len(shape) < 2:
        return None
    std = rdata.table.get("std")
    known = np.nonzero(np.isfinite(std))[0]
    if len(known) == 0:
        return None
    fan_in, fan_out = fans(shape, channels_last=_tf_layout(layer.name))
    he = np.sqrt(2.0 / fan_in)
    glorot = np.sqrt(2.0 / (fan_in + fan_out))
    s0 = float(std[known[0]])
    off = lambda ref: max(s0 / ref, ref / s0) if s0 > 0 else np.inf  # noqa: E731
    if off(he) <= factor or off(glorot) <= factor:
        return None
    step = int(rdata.table.steps[known[0]])
    return Hit(layer.name, step, step, s0, step, {"he_std": he, "glorot_std": glorot, "shape": list(shape)})


def fans(shape, channels_last: bool = False) -> tuple:
    """(fan_in, fan_out) of a kernel.

    PyTorch stores (out, in, *kernel): Linear (out, in), Conv2d (out, in, kh, kw).
    TensorFlow/Keras store (*kernel, in, out) (`channels_last`): Dense (in, out),
    Conv2D (kh, kw, in, out).
    """
    shape = [int(s) for s in shape]
    if channels_last:
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        return shape[-2] * receptive, shape[-1] * receptive
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _tf_layout(name: str) -> bool:
    """TensorFlow names kernels ``.../kernel`` (``kernel:0``); PyTorch names them ``....weight``."""
    last = name.replace(".", "/").rsplit("/", 1)[-1].split(":")[0].lower()
    return "kernel" in last
