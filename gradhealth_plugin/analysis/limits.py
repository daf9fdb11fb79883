"""Every threshold gradhealth uses, with where it comes from.

This is the one table to read (and to override: a ``thresholds`` object in the
gradhealth config file, see ``docs/configuration.md``) when a status or a
finding looks wrong. Sources: the seed articles (000-004) the product was
specified from, and the CS231n update-ratio rule of thumb.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Dict, List, Mapping, Optional, Tuple


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
    "exploding_peer_factor": Threshold(1.0, "DESIGN (a healthy run must produce no warning): a layer's gradient is "
                                       "large against the run's other layers at the same step, and their median is "
                                       "a scale no single layer moves",
                                       "an explosion found by a layer's norm jumps alone counts only where, at one of "
                                       "its jumps, the layer's max |g| is above this many times the median of the "
                                       "other layers' max |g| at that step (0: wherever it jumps)"),
    "vanishing_abs": Threshold(1e-6, "seeds 002, 004", "|gradient| below this counts as vanished"),
    "vanishing_fraction": Threshold(0.9, "seed 004", "share of vanished gradient values that makes a step vanishing"),
    "vanishing_steps": Threshold(5, "seed 003", "consecutive logged steps before vanishing is reported"),
    "fitting_loss_drop": Threshold(100.0, "cross-entropy's and squared error's gradients shrink with the loss "
                                   "(the residuals go to zero); two orders of magnitude are no batch noise",
                                   "a loss this many times below its start at the onset of vanishing gradients "
                                   "makes those that shrank no more than it (fitting_gradient_slack) a note: the "
                                   "model fits its data"),
    "fitting_gradient_slack": Threshold(10.0, "gradient norms swing several-fold between batches (DESIGN); an "
                                        "order of magnitude, as exploding_jump",
                                        "how many times further than the loss a layer's gradients may have shrunk "
                                        "since the start and still be the loss's fall; further is vanishing"),
    "fitting_start_steps": Threshold(11, "gradient norms move several-fold in the first hundred steps (DESIGN): "
                                     "a robust start, as spike_window's", "first logged gradient steps whose median "
                                     "(and the lower of the loss's median up to the last of them and its first value) is "
                                     "the start that "
                                     "fitting_loss_drop and fitting_gradient_slack measure from"),
    "converged_loss_drop": Threshold(1e4, "cross-entropy's and squared error's gradients shrink with "
                                     "the loss (the residuals go to zero)", "a loss this many times below its first "
                                     "logged value at the onset of too small updates (and at most converged_loss) "
                                     "makes them a note: the model fits its data"),
    "converged_loss": Threshold(1e-3, "as converged_loss_drop", "largest logged loss at the onset of too small "
                                "updates that counts as converged"),
    "dead_zero_fraction": Threshold(0.7, "seed 004", "activation zero fraction in the danger zone"),
    "dead_info_zero_fraction": Threshold(0.3, "seed 004", "activation zero fraction above 'normal'; informational only"),
    "weight_std_growth": Threshold(3.0, "seed 004", "weight std this many times its first logged value is growth"),
    "weight_abs_mean": Threshold(1.0, "seed 004", "|mean weight| above this is weight growth"),
    "skewness": Threshold(2.0, "seed 004", "|skewness| above this is a skewed distribution"),
    "update_ratio_high": Threshold(1e-1, "CS231n (target about 1e-3)", "updates this large relative to the weights are unstable"),
    "update_ratio_low": Threshold(1e-6, "CS231n (target about 1e-3)", "updates this small relative to the weights mean a frozen layer"),
    "spike_z": Threshold(6.0, "seed 004 (robust z-score)", "robust z-score of log-norm above the rolling medians before and after a value that makes a spike"),
    "spike_window": Threshold(11, "seed 004", "logged steps in each side's rolling median window (before and after a value)"),
    "steps_per_epoch": Threshold(0, "seed 000", "steps in one epoch (0: unknown); spikes with this period are a logging artefact"),
    "depth_ratio": Threshold(1e-3, "seed 003", "first layers' gradient norm below this fraction of the last layers' is depth vanishing"),
    "init_scale_factor": Threshold(3.0, "seeds 002, 003", "initial std further than this factor from both He and Glorot"),
    "bimodal_dip": Threshold(0.5, "seed 004", "valley between two weight modes below this share of the smaller peak, "
                             "both taken with their counting noise"),
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
                                         "share by which the median of the loss's last tenth must lie below the "
                                         "lower of its first value and its first tenth's median"),
    "rank_divergence_rel": Threshold(1e-3, "all-reduce gives every rank the same gradient (PyTorch DDP); float32 "
                                     "rounding of a reduction in another order is about 1e-6",
                                     "relative difference of a layer's gradient norm from the other ranks' at the "
                                     "same step that makes a rank diverge"),
    "rank_divergence_steps": Threshold(2, "a one-off is not yet a pattern", "logged steps (not necessarily in a "
                                       "row) a rank's layer must diverge at before it is reported"),
    "spike_warn_jump": Threshold(100.0, "seed 004 (a spike); healthy gradient norms swing several-fold between "
                                 "batches (DESIGN), so a warning takes two orders of magnitude",
                                 "a norm's one-off spike this many times the medians of the values on both sides is a warning"),
    "lr_jump": Threshold(10.0, "seed 004 (a learning rate too high makes gradients explode); an order of "
                         "magnitude, as exploding_jump", "a logged learning rate rising this many times within the "
                         "spike_window logged steps up to a blow-up's first step is named as its cause"),
}


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a threshold may take: outside them a detector crashes, or silently never fires."""

    low: float
    high: float = math.inf
    low_open: bool = False  # low itself is not allowed
    integer: bool = False  # a count of steps

    def holds(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        try:
            x = float(value)
        except OverflowError:  # a 400-digit JSON integer
            return False
        if not math.isfinite(x) or (self.integer and x != int(x)):
            return False
        return (x > self.low if self.low_open else x >= self.low) and x <= self.high

    def __str__(self) -> str:
        kind = "an integer" if self.integer else "a number"
        low, high = _number(self.low), _number(self.high)
        if math.isinf(self.high):
            return f"{kind} {'>' if self.low_open else '>='} {low}"
        if self.low_open:
            return f"{kind} > {low} and <= {high}"
        return f"{kind} from {low} to {high}"


def _number(x: float) -> str:
    """1000000 rather than 1e+06 for a whole number; 1e-06 for a small one."""
    return str(int(x)) if abs(x) < 1e15 and x == int(x) else f"{x:g}"


_POSITIVE = Range(0, low_open=True)
_FRACTION = Range(0, 1)
_SHARE = Range(0, 1, low_open=True)  # a fraction that fires on nothing at 0
_FACTOR = Range(1, low_open=True)  # "this many times": at 1 or below it fires on no change at all

# What each threshold may be set to. Counts of steps are integers; the spike window needs the three
# points a running median is taken from and is bounded because the rolling windows cost memory
# in proportion to it; an epoch longer than 1e12 steps is a typo.
ALLOWED: Dict[str, Range] = {
    "exploding_max_abs": _POSITIVE,
    "exploding_jump": _FACTOR,
    "exploding_peer_factor": Range(0),
    "vanishing_abs": _POSITIVE,
    "vanishing_fraction": _SHARE,
    "vanishing_steps": Range(1, 1_000_000, integer=True),
    "fitting_loss_drop": _FACTOR,
    # 1: gradients may shrink exactly as far as the loss, no further.
    "fitting_gradient_slack": Range(1),
    "fitting_start_steps": Range(1, 1_000_000, integer=True),
    "converged_loss_drop": _FACTOR,
    "converged_loss": _POSITIVE,
    "dead_zero_fraction": _FRACTION,
    "dead_info_zero_fraction": _FRACTION,
    "weight_std_growth": _FACTOR,
    "weight_abs_mean": _POSITIVE,
    "skewness": _POSITIVE,
    "update_ratio_high": _POSITIVE,
    "update_ratio_low": _POSITIVE,
    "spike_z": _POSITIVE,
    "spike_window": Range(3, 1000, integer=True),
    "steps_per_epoch": Range(0, 1e12, integer=True),
    "depth_ratio": _SHARE,
    "init_scale_factor": _FACTOR,
    "bimodal_dip": _SHARE,
    "exploding_steps": Range(1, 1_000_000, integer=True),
    "update_ratio_steps": Range(1, 1_000_000, integer=True),
    "update_ratio_bound_steps": Range(1, 1_000_000, integer=True),
    # Identical at one step says nothing: it takes two steps to not change.
    "frozen_steps": Range(2, 1_000_000, integer=True),
    "init_scale_max_step": Range(0, 1e12, integer=True),
    # A first and a last tenth need at least two values.
    "no_progress_points": Range(2, 1_000_000, integer=True),
    "no_progress_improvement": _FRACTION,
    "rank_divergence_rel": _POSITIVE,
    "rank_divergence_steps": Range(1, 1_000_000, integer=True),
    "spike_warn_jump": _FACTOR,
    "lr_jump": _FACTOR,
}


def _shown(value: object) -> str:
    """A value as the JSON file spells it (NaN, Infinity, true), cut short."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Pairs (lower, upper) whose values must keep this order: inverted, a rule fires on everything (an update
# ratio both too low and too high covers every ratio) or says nonsense (a "normal" zero fraction above the
# danger zone's, a vanished gradient value larger than an exploded one).
ORDERED: Tuple[Tuple[str, str], ...] = (
    ("update_ratio_low", "update_ratio_high"),
    ("dead_info_zero_fraction", "dead_zero_fraction"),
    ("vanishing_abs", "exploding_max_abs"),
)


def checked_thresholds(overrides: object) -> Tuple[Dict[str, float], List[str]]:
    """The threshold values with the user's valid overrides applied, and one line per override rejected.

    A rejected override (unknown name, not a number, outside its range, or out
    of order with its pair in `ORDERED`) keeps the default; the others still apply.
    """
    values = {name: t.value for name, t in DEFAULTS.items()}
    if not isinstance(overrides, Mapping):
        return values, [f"thresholds must be an object of name: number; got {_shown(overrides)}; using the defaults"]
    problems = []
    for name, value in overrides.items():
        if name not in DEFAULTS:
            problems.append(f"unknown threshold {_shown(name)}; ignored (known: {', '.join(sorted(DEFAULTS))})")
        elif not ALLOWED[name].holds(value):
            default = _number(DEFAULTS[name].value)
            problems.append(f"{name} must be {ALLOWED[name]}; got {_shown(value)}; using {default}")
        else:
            values[name] = float(value)
    for low, high in ORDERED:
        if values[low] < values[high]:
            continue
        # The user's values of the pair go back to their defaults, which are in order.
        given = [name for name in (low, high) if values[name] != DEFAULTS[name].value]
        problems.append(f"{low} must be below {high}; got {_number(values[low])} and {_number(values[high])}; "
                        f"using {' and '.join(_number(DEFAULTS[name].value) for name in given)} for "
                        f"{' and '.join(given)}")
        for name in given:
            values[name] = DEFAULTS[name].value
    return values, problems


def thresholds(overrides: Mapping[str, float] = ()) -> Dict[str, float]:
    """The threshold values, with the user's overrides applied; ValueError naming every rejected one."""
    values, problems = checked_thresholds(dict(overrides))
    if problems:
        raise ValueError("; ".join(problems))
    return values
