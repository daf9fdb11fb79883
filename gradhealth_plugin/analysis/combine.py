"""What the findings say together: spikes an explosion already explains are
dropped, and co-occurring symptoms name their likely cause (seed 004).
"""

from __future__ import annotations

from typing import Dict, List

from .finding import INFO, Finding

_POINTWISE = ("exploding_gradients", "nonfinite")


def drop_explained_spikes(findings: List[Finding]) -> List[Finding]:
    """Drops a one-off spike at a step where the same series already explodes or turns non-finite."""
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
            layers = [layer for layer in f.layers if f.first_step not in explained.get(layer, ())]
            if not layers:
                continue
            if len(layers) < len(f.layers):
                f.layers = layers
                f.spans = {layer: f.spans[layer] for layer in layers}
                f.points = {layer: p for layer, p in f.points.items() if layer in layers}
                f.evidence["layers"] = {k: v for k, v in f.evidence["layers"].items() if k in layers}
        kept.append(f)
    return kept


def name_causes(findings: List[Finding]) -> None:
    """Names a likely cause where symptoms co-occur: a learning rate too high, or dying ReLUs."""
    kinds = {f.kind for f in findings if f.severity != INFO}
    if "exploding_gradients" in kinds and "nonfinite" in kinds:
        growth = "weight_growth" in kinds
        for f in findings:
            if f.severity == INFO:
                continue
            if f.kind in _POINTWISE or (growth and f.kind == "weight_growth"):
                f.cause = "learning_rate_too_high"
                f.message += ("; together with " + ("exploding gradients" if f.kind != "exploding_gradients"
                                                    else "non-finite values")
                              + " this points to a learning rate that is too high")
    elif "vanishing_gradients" in kinds and "dead_units" in kinds:
        for f in findings:
            if f.severity != INFO and f.kind in ("vanishing_gradients", "dead_units"):
                f.cause = "dead_relu"
                f.message += "; dead ReLU units stop the gradient: this points to dying ReLUs"
