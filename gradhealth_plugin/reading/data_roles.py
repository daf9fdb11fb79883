"""Roles told by the data itself, for histograms whose names say nothing.

Only cues the histograms prove are used. One holds up: a distribution that is
never negative and keeps a share of its values at zero is the output of a
ReLU-like activation (weights, gradients and pre-activations take both signs).
Cues for weights and gradients were measured on real logs with their names
hidden (`tests/test_data_roles.py`) and left out: weights drift smoothly and
gradients centre on zero, but so do pre-activations and many outputs, and a
wrong role is worse than none (role-specific rules would judge the row).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..analysis import metrics
from . import tags as tags_lib

# Share of values in the bucket at zero (at the median step) that counts as a mass at zero;
# a smooth non-negative distribution in TensorBoard's 30 buckets puts about 1/30 there.
RELU_ZERO_SHARE = 0.05


def role_from_data(table: metrics.MetricTable) -> Optional[str]:
    """The role a histogram tag's metric table proves, or None when it proves none.

    One sentence: every logged value is at least 0 and, at the median step, at
    least 5% of them sit in the bucket at zero -> the output of a ReLU-like
    activation.
    """
    if not len(table.steps) or "min" not in table.values or "zero_fraction" not in table.values:
        return None
    counts = table.values.get("count", np.ones(len(table.steps)))
    has = np.isfinite(table.values["min"]) & (np.nan_to_num(counts) > 0)
    if not has.any():
        return None
    never_negative = bool(np.all(table.values["min"][has] >= 0))
    zero_share = float(np.nanmedian(table.values["zero_fraction"][has]))
    if never_negative and zero_share >= RELU_ZERO_SHARE:
        return tags_lib.ACTIVATION
    return None
