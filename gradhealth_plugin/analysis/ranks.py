"""Ranks of one data-parallel training that disagree on a layer's gradient at the same step.

After all-reduce every rank holds the same reduced gradient, so at a logged step
a layer's gradient norm is the same on every rank, to rounding. At each (layer,
step) the reference is the value most ranks share: their (lower) median when more
than half of the ranks lie within the tolerance of it, else the lowest rank's
value (two ranks that disagree cannot say which is wrong: rank 0 is taken as
right, as its logs are the ones usually read). A rank whose value differs from
the reference by more than ``rank_divergence_rel`` of it, at
``rank_divergence_steps`` or more logged steps of a layer, is a
``rank_divergence`` finding on that rank's run, listing those layers.

Layers whose tensors differ in size between ranks are not compared: their ranks
hold different shards (FSDP, ZeRO), not copies of one gradient.
"""

from __future__ import annotations

import collections
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from ..reading import tags as tags_lib
from ..reading.runs import RunData
from .detectors import rank_divergence as kind
from .finding import Finding
from .spans import labelled, role_tables

# The gradient statistic compared: exact in gradhealth's summaries, estimated alike from equal histograms.
METRIC = "l2"


def relative_difference(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|value - reference| / |reference|: 0 where both are 0, infinite where only the reference is."""
    diff = np.abs(values - reference)
    scale = np.abs(reference)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = diff / scale
    return np.where(diff == 0, 0.0, np.where(scale == 0, np.inf, out))


def divergence(values: np.ndarray, tolerance: float) -> Tuple[np.ndarray, np.ndarray]:
    """(the reference at each place, which ranks' values diverge from it).

    `values` has the ranks first, lowest rank first, (ranks, ...); NaN (or a
    non-finite value) where a rank has none. A place with fewer than two ranks
    compares nothing: there, nothing diverges.
    """
    v = np.asarray(values, dtype=np.float64)
    present = np.isfinite(v)
    v = np.where(present, v, np.nan)
    n = present.sum(axis=0)
    ordered = np.sort(v, axis=0)  # NaN last
    lower_median = np.take_along_axis(ordered, (np.maximum(n - 1, 0) // 2)[None], axis=0)[0]
    with np.errstate(invalid="ignore"):
        # Products, not quotients: a zero reference needs no special case, and the (ranks, ...)
        # arrays are the whole cost of a comparison.
        agree = np.abs(v - lower_median) <= tolerance * np.abs(lower_median)
        lowest = np.take_along_axis(v, np.argmax(present, axis=0)[None], axis=0)[0]
        reference = np.where(2 * agree.sum(axis=0) > n, lower_median, lowest)
        return reference, (np.abs(v - reference) > tolerance * np.abs(reference)) & (n >= 2)


def find(training: str, members: Sequence[Tuple[str, RunData]],
         limits: Mapping[str, float]) -> Dict[str, List[Finding]]:
    """The ``rank_divergence`` findings of one training's runs, by run.

    `members`: (rank, run data) of each rank read, lowest rank first.
    """
    tolerance, needed = float(limits["rank_divergence_rel"]), int(limits["rank_divergence_steps"])
    tables = [{layer.name: table for layer, table in role_tables(rd, tags_lib.GRADIENT)} for _, rd in members]
    ranks_of = collections.Counter(name for by_name in tables for name in by_name)
    # In the model order of the first rank that has each layer.
    layers = [name for name in dict.fromkeys(n for by_name in tables for n in by_name) if ranks_of[name] >= 2]
    if len(members) < 2 or not layers:
        return {}
    # Rows mostly share their steps: the union and the positions are computed once per distinct step array.
    distinct = {t[name].steps.tobytes(): t[name].steps for t in tables for name in layers if name in t}
    steps = np.unique(np.concatenate(list(distinct.values())))
    positions = {key: np.searchsorted(steps, row_steps) for key, row_steps in distinct.items()}
    norm = np.full((len(members), len(layers), len(steps)), np.nan)
    count = np.full(norm.shape, np.nan)
    for r, by_name in enumerate(tables):
        for j, name in enumerate(layers):
            table = by_name.get(name)
            if table is not None:
                at = positions[table.steps.tobytes()]
                norm[r, j, at] = table.get(METRIC)
                count[r, j, at] = table.get("count")
    with np.errstate(invalid="ignore"):
        sharded = np.fmax.reduce(count, axis=0) > np.fmin.reduce(count, axis=0)
    norm[:, sharded] = np.nan
    reference, diverging = divergence(norm, tolerance)
    compared = np.isfinite(norm) & (np.isfinite(norm).sum(axis=0) >= 2)
    hit = diverging.sum(axis=2) >= needed
    ranks = [rank for rank, _ in members]
    out: Dict[str, List[Finding]] = {}
    for r in np.flatnonzero(hit.any(axis=1)):
        rank, rd = members[r]
        flagged = [j for j in range(len(layers)) if hit[r, j]]
        points = {layers[j]: steps[diverging[r, j]].astype(np.int64) for j in flagged}
        worst = {layers[j]: float(relative_difference(norm[r, j], reference[j])[diverging[r, j]].max())
                 for j in flagged}
        first = min(int(p[0]) for p in points.values())
        last = max(int(p[-1]) for p in points.values())
        names = [layers[j] for j in flagged]
        most = max(worst.values())
        by = f"by up to {most:.1%}" if np.isfinite(most) else "(where the others' norm is 0)"
        longest = max(flagged, key=lambda j: len(points[layers[j]]))
        evidence = {
            "training": training, "rank": rank, "ranks": ranks, "metric": METRIC, "threshold": tolerance,
            "steps_needed": needed, "max_relative_difference": most,
            "layers": {layers[j]: {"first_step": int(points[layers[j]][0]),
                                   "steps_diverged": int(len(points[layers[j]])),
                                   "steps_compared": int(compared[r, j].sum()),
                                   "max_relative_difference": worst[layers[j]]} for j in flagged},
        }
        message = (f"{rank} of training {training}: the gradient norm of {labelled('layer', names)} differs from the "
                   f"other ranks' at the same step {by} (more than {tolerance * 100:g}% at "
                   f"{len(points[layers[longest]])} of {int(compared[r, longest].sum())} compared steps of "
                   f"{labelled('layer', [layers[longest]])}, from step {first}), where all-reduce gives every rank the "
                   "same gradient")
        out[rd.run] = [Finding(run=rd.run, kind=kind.KIND, severity=kind.SEVERITY, layers=names, first_step=first,
                               last_step=last, evidence=evidence, message=message, advice=kind.ADVICE,
                               role=tags_lib.GRADIENT, spans={n: (int(p[0]), int(p[-1])) for n, p in points.items()},
                               points=points)]
    return out
