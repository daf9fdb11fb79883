"""What the findings say together: spikes an explosion already explains are
dropped, and co-occurring symptoms name their likely cause (seed 004).
"""

from __future__ import annotations

from typing import Dict, List

from .finding import INFO, Finding

_POINTWISE = ("exploding_gradients", "nonfinite")


def drop_explained_spikes(findings: List[Finding]) -> List[Finding]:
    """Drops a spike at steps where the same series already explodes or turns non-finite."""
    explained: Dict[str, set] = {}
    for f in findings:
        if f.kind in _POINTWISE:
            for layer in f.layers:
                steps = f.points.get(layer)
                explained.setdefault(layer, set()).update(
                    steps.tolist() if steps is not None else range(f.spans[layer][0], f.spans[layer][1] + 1))
    kept = []
    for f in findings:
        if f.kind == "spike":
            # A series stays in a spike episode while one of its spike steps is not explained.
            layers = [layer for layer in f.layers
                      if not set(_spike_steps(f, layer)) <= explained.get(layer, set())]
            if not layers:
                continue
            if len(layers) < len(f.layers):
                f.layers = layers
                f.spans = {layer: f.spans[layer] for layer in layers}
                f.first_step = min(f.spans[layer][0] for layer in layers)
                f.last_step = max(f.spans[layer][1] for layer in layers)
                f.points = {layer: p for layer, p in f.points.items() if layer in layers}
                f.evidence["layers"] = {k: v for k, v in f.evidence["layers"].items() if k in layers}
        kept.append(f)
    return kept


def _spike_steps(f: Finding, layer: str) -> List[int]:
    steps = f.points.get(layer)
    return steps.tolist() if steps is not None else [f.first_step]


# Symptoms of the same overshooting steps that make gradients explode and values overflow (seed 004):
# updates too large, weights growing, skewed or split in two, ReLUs knocked silent.
_OVERSHOOT = ("weight_growth", "update_ratio", "skewed_distribution", "dead_units", "bimodal_weights")


def name_causes(findings: List[Finding]) -> None:
    """Names a likely cause where symptoms co-occur: a learning rate too high, or dying ReLUs.

    A learning rate too high is named on the explosion and the non-finite
    values, and on every other warning of `_OVERSHOOT` that begins by the
    first non-finite step: after it, NaN leaves nothing to judge.
    """
    kinds = {f.kind for f in findings if f.severity != INFO}
    if "exploding_gradients" in kinds and "nonfinite" in kinds:
        overflow = min(f.first_step for f in findings if f.kind == "nonfinite" and f.severity != INFO)
        for f in findings:
            if f.severity == INFO:
                continue
            if f.kind in _POINTWISE:
                other = "exploding gradients" if f.kind != "exploding_gradients" else "non-finite values"
            elif _overshoot(f) and f.first_step <= overflow:
                other = "exploding gradients and non-finite values"
            else:
                continue
            f.cause = "learning_rate_too_high"
            f.message += f"; together with {other} this points to a learning rate that is too high"
    elif "vanishing_gradients" in kinds and "dead_units" in kinds:
        for f in findings:
            if f.severity != INFO and f.kind in ("vanishing_gradients", "dead_units"):
                f.cause = "dead_relu"
                f.message += "; dead ReLU units stop the gradient: this points to dying ReLUs"


def _overshoot(f: Finding) -> bool:
    # Updates too small are the opposite of an overshoot.
    return f.kind in _OVERSHOOT and f.evidence.get("direction") != "too_low"
