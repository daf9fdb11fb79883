"""What the findings say together: spikes an explosion already explains are
dropped, and co-occurring symptoms name their likely cause (seed 004).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from .finding import INFO, Finding

_POINTWISE = ("exploding_gradients", "nonfinite")


def drop_explained_spikes(findings: List[Finding]) -> List[Finding]:
    """Drops a spike at steps where the same series already explodes or turns non-finite."""
    # Per layer, the exact steps of point-wise findings and the (first, last) spans of those
    # without points: a span is tested by comparison, never expanded into its steps, whose
    # number is bounded only by the step numbers a writer chose.
    points: Dict[str, set] = {}
    spans: Dict[str, List[Tuple[int, int]]] = {}
    for f in findings:
        if f.kind in _POINTWISE:
            for layer in f.layers:
                steps = f.points.get(layer)
                if steps is not None:
                    points.setdefault(layer, set()).update(steps.tolist())
                else:
                    spans.setdefault(layer, []).append(f.spans[layer])

    def explained(layer: str, step: int) -> bool:
        return step in points.get(layer, ()) or any(first <= step <= last for first, last in spans.get(layer, ()))

    kept = []
    for f in findings:
        if f.kind == "spike":
            # A series stays in a spike episode while one of its spike steps is not explained.
            layers = [layer for layer in f.layers
                      if not all(explained(layer, step) for step in _spike_steps(f, layer))]
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
    # Updates too small, or none at all, are the opposite of an overshoot.
    return f.kind in _OVERSHOOT and f.evidence.get("direction") in (None, "too_high")
def fold_after_nonfinite(findings: List[Finding]) -> List[Finding]:
    """Folds the findings that begin once the run turned non-finite for good into the earliest nonfinite finding.

    The `nonfinite` detector names the collapse step (None when every
    non-finite row recovered, as from a transient overflow). Vanishing, dead
    units, skew, growth and the like that begin there or later are computed on
    what NaN left of the tensors: they become the collapse's consequences, in
    its evidence, not problems of their own. An explosion at the collapse step
    is its cause, and stays.
    """
    collapses = [f for f in findings if f.kind == "nonfinite" and f.evidence.get("collapse_step") is not None]
    if not collapses:
        return findings
    first = min(collapses, key=lambda f: f.first_step)
    at = first.evidence["collapse_step"]
    folded = [f for f in findings if f.kind != "nonfinite" and
              (f.first_step > at or (f.first_step == at and f.kind != "exploding_gradients"))]
    if not folded:
        return findings
    first.evidence.setdefault("consequences", []).extend(
        {"kind": f.kind, "severity": f.severity, "layers": f.layers, "first_step": f.first_step,
         "last_step": f.last_step, "message": f.message} for f in folded)
    first.message += (f"; {len(folded)} later finding{'s' if len(folded) != 1 else ''} "
                      f"({', '.join(sorted({f.kind for f in folded}))}) follow from these values from step {at} "
                      "on and are listed in its evidence")
    gone = {id(f) for f in folded}
    return [f for f in findings if id(f) not in gone]
