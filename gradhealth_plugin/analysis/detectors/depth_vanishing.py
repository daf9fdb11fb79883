"""Gradients that shrink with depth: the first layers' mean |g| a tiny fraction
of the last layers' for several logged steps (seed 003).

A loss that fell near zero does not make this a note, as it does vanishing
gradients that shrank with it (`convergence.fitting`): it scales every layer's
gradients alike, so it leaves the ratio of the first layers' to the last ones' as it was.
"""

from __future__ import annotations

from typing import List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import series as series_lib
from ..finding import WARN, Finding
from ..spans import PARAM_SHAPE_KINDS, labelled, lower, lt, role_tables, short_tail, tail_text

KIND = "depth_vanishing"
ORDER = 110
SEVERITY = WARN
LABEL = "Gradients vanish with depth"
METRIC = "mean_abs"
NEEDS = (tags_lib.GRADIENT,)
ADVICE = ("Gradients shrink with depth: add residual connections and normalisation, use ReLU with He "
          "init, or shorten the network.")
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    ratio_limit = limits["depth_ratio"]
    layers = list(role_tables(rd, tags_lib.GRADIENT, PARAM_SHAPE_KINDS))
    if len(layers) < 3:
        return []
    (first_layer, first), (last_layer, last) = layers[0], layers[-1]
    common, i1, i2 = np.intersect1d(first.steps, last.steps, return_indices=True)
    if len(common) == 0:
        return []
    a, b = first.get("mean_abs")[i1], last.get("mean_abs")[i2]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = a / b
    needed = int(limits["vanishing_steps"])
    spans = series_lib.sustained(lt(ratio, ratio_limit) & (b > 0), needed)
    if not spans:
        return []
    s, e = spans[0][0], spans[-1][1]
    inside = np.concatenate([common[i:j + 1] for i, j in spans])
    tail = short_tail(common, inside, needed)
    held = f"for {needed}+ logged steps" if tail is None else tail_text([tail], needed)
    f = Finding(
        run=rd.run, kind=KIND, severity=SEVERITY if tail is None else lower(SEVERITY),
        layers=[first_layer.name, last_layer.name],
        first_step=int(common[s]), last_step=int(common[e]),
        evidence={"threshold": ratio_limit, "value": float(ratio[s]), "step": int(common[s]),
                  "first_layer_mean_abs": float(a[s]), "last_layer_mean_abs": float(b[s])},
        message=(f"gradients at {labelled('layer', [first_layer.name])} are "
                 f"{_compared(ratio[s], b[s], labelled('layer', [last_layer.name]))} "
                 f"from step {int(common[s])}, {held}: they vanish with depth"),
        advice=ADVICE, role=tags_lib.GRADIENT, spans={first_layer.name: (int(common[s]), int(common[e]))},
        # The steps it held at: not those between its spans (a step whose gradient held NaN or Inf among them).
        points={first_layer.name: inside})
    if tail is not None:
        f.evidence["too_few_steps"] = {"steps_needed": needed,
                                       "layers": {first_layer.name: {"last": tail[0], "of": tail[1]}}}
    return [f]


def _compared(ratio: float, last_mean_abs: float, last: str) -> str:
    """'3.2e-05x those at <last>'; where the first layer's gradients are exactly 0, that in words."""
    if ratio > 0:
        return f"{ratio:.1e}x those at {last}"
    return f"zero, against a mean |g| of {last_mean_abs:.1e} at {last}"
