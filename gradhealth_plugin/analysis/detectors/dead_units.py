"""Activations that are mostly zero (seeds 003, 004). Between 004's 'normal' line
and its danger line a healthy ReLU layer often sits: that is info, not a warning.
"""

from __future__ import annotations

from typing import List, Mapping, Set

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import INFO, WARN, Finding
from ..limits import Line
from ..spans import Hit, Test, group, group_sustained, span_hits

KIND = "dead_units"
ORDER = 40
SEVERITY = WARN
LABEL = "Dead units"
METRIC = "zero_fraction"
NEEDS = (tags_lib.ACTIVATION,)
ADVICE = ("Use LeakyReLU/ELU, He init, a lower learning rate, and check the bias init; BatchNorm before "
          "the activation keeps units alive.")
# For a layer that also goes negative: its exact zeros are not a ReLU's.
SIGNED_ADVICE = ("Look at what zeroes them before the histogram is taken: dropout or a mask applied to the output, "
                 "or a gate that shuts; an activation such as GELU or tanh is seldom exactly 0 by itself.")
# For the note on a zero fraction only bounded: how to log the exact one that judges it.
NOT_JUDGED_ADVICE = ("To judge it, log the exact share of zeros beside the histogram: "
                     "tf.summary.scalar(\"<scope>/sparsity\", tf.nn.zero_fraction(x)), or gradhealth's own "
                     "summaries of the activations (gradhealth_plugin.tf.GradientHealthLogger, "
                     "gradhealth_plugin.keras.GradientHealthCallback, gradhealth_plugin.torch.watch), which carry it.")
_OUTPUTS = (tags_lib.KIND_OUTPUT,)
STEPS_NEEDED = 3  # logged steps in a row: one or two outliers are no trend
CELL_RULES = (
    health.CellRule(KIND, (tags_lib.ACTIVATION,), "zero_fraction", True, "dead_zero_fraction", health.WARN, False,
                    kinds=_OUTPUTS),
)
THRESHOLDS = (
    Line(tags_lib.ACTIVATION, "zero_fraction", "dead_zero_fraction", "above"),
    Line(tags_lib.ACTIVATION, "zero_fraction", "dead_info_zero_fraction", "above"),
)


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    danger, normal = limits["dead_zero_fraction"], limits["dead_info_zero_fraction"]
    # Only a zero fraction proven above a line judges (`Test.values`): an upper bound from a bucket
    # straddling zero (TF2's lowest bucket [0, max/30]) holds small values too and proves no units dead.
    hits = span_hits(rd, tags_lib.ACTIVATION, [Test("zero_fraction", danger)], STEPS_NEEDED, _OUTPUTS)
    for h in hits:
        h.detail["quality"] = "exact"
    warn = group_sustained(rd, KIND, WARN, tags_lib.ACTIVATION, hits, danger,
                           f"are mostly dead (zero fraction above {danger:.0%})", ADVICE, STEPS_NEEDED)
    warned = {layer for f in warn for layer in f.layers}
    info_hits = [h for h in span_hits(rd, tags_lib.ACTIVATION, [Test("zero_fraction", normal)], STEPS_NEEDED,
                                      _OUTPUTS) if h.layer not in warned]
    # Normal for a ReLU only where the layer is one: never negative. A layer that also goes negative
    # (GELU, tanh, a linear output) rarely holds exact zeros, and then they come from elsewhere.
    signed = _goes_negative(rd, info_hits)
    relu_like = [h for h in info_hits if h.layer not in signed]
    # The line under which it is normal is the warning's own (`dead_zero_fraction`), as the advice says.
    info = group_sustained(rd, KIND, INFO, tags_lib.ACTIVATION, relu_like, normal,
                           f"have a zero fraction above {normal:.0%} (normal for ReLU while under {danger:.0%})",
                           ADVICE, STEPS_NEEDED)
    for f in info:
        f.no_fault = (f"while the zero fraction stays under {danger:.0%}",
                      "if it climbs past that or training stalls")
    info += group_sustained(rd, KIND, INFO, tags_lib.ACTIVATION, [h for h in info_hits if h.layer in signed], normal,
                            f"have a zero fraction above {normal:.0%} while taking negative values too: no ReLU's "
                            f"output, so the exact zeros come from elsewhere", SIGNED_ADVICE, STEPS_NEEDED)
    judged = warned | {layer for f in info for layer in f.layers}
    return warn + info + _not_judged(rd, danger, judged)


def _goes_negative(rd: RunData, hits: List[Hit]) -> Set[str]:
    """The layers of `hits` whose logged minimum is below 0 at a step of their span (a histogram's lowest edge)."""
    layers = {layer.name: layer for layer in rd.layers}
    out = set()
    for h in hits:
        table = layers[h.layer].roles[tags_lib.ACTIVATION].table
        lowest = table.get("min")[(table.steps >= h.first) & (table.steps <= h.last)]
        if np.any(lowest < 0):
            out.add(h.layer)
    return out


def _not_judged(rd: RunData, danger: float, judged: Set[str]) -> List[Finding]:
    """A note on the layers whose zero fraction passes the danger line only as an upper bound: what the
    histogram proves (at most that share at or near zero), that it is not judged, and how to log it exactly."""
    hits = [h for h in span_hits(rd, tags_lib.ACTIVATION, [Test("zero_fraction", danger, unproven=True)],
                                 STEPS_NEEDED, _OUTPUTS) if h.layer not in judged]
    for h in hits:
        h.detail["quality"] = "upper bound from buckets"
    f = group(rd, KIND, INFO, tags_lib.ACTIVATION, hits, danger,
              "have up to {value:.0%} of their values at or near zero", NOT_JUDGED_ADVICE)
    if f is None:
        return []
    f.message = f.message.format(value=f.evidence["value"]) + (
        f": an upper bound, as the histogram's bucket at zero holds small values too and cannot tell zeros "
        f"from them: not judged as dead (that needs a zero fraction proven above {danger:.0%})")
    f.evidence["not_judged"] = "upper bound"
    return [f]
