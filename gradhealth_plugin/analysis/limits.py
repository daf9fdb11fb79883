"""Every threshold gradhealth uses, with where it comes from.

This is the one table to read (and to override: a ``thresholds`` object in the
gradhealth config file, see ``docs/configuration.md``) when a status or a
finding looks wrong. Sources: the seed articles (000-004) the product was
specified from, and the CS231n update-ratio rule of thumb.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional


@dataclasses.dataclass(frozen=True)
class Threshold:
    value: float
    source: str
    meaning: str


@dataclasses.dataclass(frozen=True)
class Line:
    """A threshold the tab draws on a layer's metric chart; each detector declares its own."""

    role: Optional[str]  # None: the metric's chart in any role
    metric: str
    name: str  # in DEFAULTS
    side: str  # "above" or "below": which side of the line is bad
    mirrored: bool = False  # also drawn at minus the value (for a limit on |metric|)


DEFAULTS: Dict[str, Threshold] = {
    "exploding_max_abs": Threshold(1e3, "seed 002", "max |gradient| above this means the gradients explode"),
    "exploding_jump": Threshold(10.0, "seed 002/004", "a gradient norm this many times its running median is an explosion"),
    "vanishing_abs": Threshold(1e-6, "seeds 002, 004", "|gradient| below this counts as vanished"),
    "vanishing_fraction": Threshold(0.9, "seed 004", "share of vanished gradient values that makes a step vanishing"),
    "vanishing_steps": Threshold(5, "seed 003", "consecutive logged steps before vanishing is reported"),
    "dead_zero_fraction": Threshold(0.7, "seed 004", "activation zero fraction in the danger zone"),
    "dead_info_zero_fraction": Threshold(0.3, "seed 004", "activation zero fraction above 'normal'; informational only"),
    "weight_std_growth": Threshold(3.0, "seed 004", "weight std this many times its first logged value is growth"),
    "weight_abs_mean": Threshold(1.0, "seed 004", "|mean weight| above this is weight growth"),
    "skewness": Threshold(2.0, "seed 004", "|skewness| above this is a skewed distribution"),
    "update_ratio_high": Threshold(1e-1, "CS231n (target about 1e-3)", "updates this large relative to the weights are unstable"),
    "update_ratio_low": Threshold(1e-6, "CS231n (target about 1e-3)", "updates this small relative to the weights mean a frozen layer"),
    "spike_z": Threshold(6.0, "seed 004 (robust z-score)", "robust z-score of log-norm against a rolling median that makes a spike"),
    "spike_window": Threshold(11, "seed 004", "logged steps in the rolling median window"),
    "steps_per_epoch": Threshold(0, "seed 000", "steps in one epoch (0: unknown); spikes with this period are a logging artefact"),
    "depth_ratio": Threshold(1e-3, "seed 003", "first layers' gradient norm below this fraction of the last layers' is depth vanishing"),
    "init_scale_factor": Threshold(3.0, "seeds 002, 003", "initial std further than this factor from both He and Glorot"),
    "bimodal_dip": Threshold(0.5, "seed 004", "valley between two weight modes below this share of the smaller peak"),
    "exploding_steps": Threshold(2, "seed 004 (a one-off is a spike)",
                                 "logged steps in a row past an explosion limit (or not back to normal after) that "
                                 "make an explosion"),
    "update_ratio_steps": Threshold(3, "seed 003", "logged steps in a row a measured or estimated update ratio must "
                                    "stay past its limit"),
    "update_ratio_bound_steps": Threshold(1, "CS231n; a proven bound is no noisy estimate",
                                          "logged intervals in a row the weights-only lower bound of the update "
                                          "ratio must exceed its ceiling"),
    "frozen_steps": Threshold(3, "CS231n (a frozen layer)", "logged steps a weight histogram must be identical at "
                              "before its weights are said never to change"),
    "init_scale_max_step": Threshold(1, "seeds 002, 003", "latest first logged weight step whose std is judged as "
                                     "the initialisation"),
    "no_progress_points": Threshold(8, "seed 003 (CI alerts)", "logged loss values needed before the loss is judged "
                                    "for progress"),
    "no_progress_improvement": Threshold(0.03, "SageMaker Debugger's LossNotDecreasing",
                                         "share by which the median of the loss's last tenth must lie below its "
                                         "first tenth's"),
}


def thresholds(overrides: Mapping[str, float] = ()) -> Dict[str, float]:
    """The threshold values, with the user's overrides applied.

    Raises ValueError on an unknown name or a value that is not a number, so a
    typo in a config file is reported instead of silently ignored.
    """
    values = {name: t.value for name, t in DEFAULTS.items()}
    for name, value in dict(overrides).items():
        if name not in DEFAULTS:
            raise ValueError(f"unknown threshold {name!r}; known: {', '.join(sorted(DEFAULTS))}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"threshold {name!r} must be a number, got {value!r}")
        values[name] = float(value)
    return values
