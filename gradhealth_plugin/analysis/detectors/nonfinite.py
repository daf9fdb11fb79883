"""NaN or Inf in a watched tensor or a run-level scalar (seeds 002, 004).

Each layer's evidence says whether its values stay non-finite to its last
logged step (`to_the_end`). Where one does, the run turned non-finite for good
at `collapse_step` (in every finding's evidence): the start of the last stretch
of logged steps at which something was non-finite. Later findings are then
computed on what NaN left, and `combine.fold_after_nonfinite` lists them as its
consequences; a transient overflow that training recovered from is no collapse.
"""

from __future__ import annotations

from typing import List, Mapping, Optional

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from ..finding import CRITICAL, Axis, Finding
from .. import series as series_lib
from ..spans import Hit, gather, gt, kept_before, labelled, role_tables, scalar_axis, stack, when_text, written_text

KIND = "nonfinite"
ORDER = 10
SEVERITY = CRITICAL
LABEL = "NaN / Inf values"
METRIC = "nonfinite"
NEEDS = ()
ADVICE = ("Lower the learning rate, clip gradients (tf.clip_by_global_norm / torch.nn.utils.clip_grad_norm_), "
          "and look for log(0), division by zero or overflow in the loss; enable anomaly detection to find the op.")
CELL_RULES = (health.CellRule(KIND, tags_lib.ROLES, "nonfinite", True, "", health.CRITICAL, False),)
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    """One finding per step axis: every layer and scalar counting the layers' steps with NaN or Inf in
    one, each row covered at its own steps; scalars on another axis (Keras' per-epoch `epoch_loss`)
    apart, one finding per axis told at their own steps (`RunData.scalar_axis_groups`)."""
    scalars = {h.layer: h for h in _scalar_hits(rd)}
    groups = rd.scalar_axis_groups(list(scalars))
    rows = [name for names in groups if not rd.scalar_other_axis(names[0]) for name in names]
    parts = [(role, _tensor_hits(rd, role)) for role in tags_lib.ROLES] + [(None, [scalars[n] for n in rows])]
    out = []
    f = gather(rd, KIND, SEVERITY, parts, 0, "contain NaN or Inf values", ADVICE)
    if f is not None and set(f.layers) == set(rows):
        # Scalars alone (a run without layers): their axis is said where another is in the run too.
        axis = scalar_axis(rd, rows, f.first_step, f.last_step)
        if len(groups) > 1 or axis.unit != "step":
            _tell_in(rd, f, axis)
        elif len(rows) == 1:
            f.message = f"{labelled('scalar', f.layers)} is NaN or Inf {when_text(f)}"
    if f is not None:
        out.append(f)
    for names in groups:
        if rd.scalar_other_axis(names[0]):
            hits = [scalars[n] for n in names]
            f = gather(rd, KIND, SEVERITY, [(None, hits)], 0, "contain NaN or Inf values", ADVICE)
            out.append(_tell_in(rd, f, scalar_axis(rd, f.layers, min(h.detail["own_first_step"] for h in hits),
                                                   max(h.detail["own_last_step"] for h in hits))))
    collapse = _collapse_step(rd)
    for f in out:
        f.evidence["collapse_step"] = collapse
    return out


def _tell_in(rd: RunData, f: Finding, axis: Axis) -> Finding:
    """A finding about scalars alone told in their step axis: its unit, and its steps there; on another
    axis than the layers', where they were written on the layers' axis too."""
    f.axis = axis
    verb = "is" if len(f.layers) == 1 else "are"
    f.message = (f"{labelled('scalar', f.layers)}, {axis.per()}, {verb} NaN or Inf "
                 f"{axis.span(axis.first_step, axis.last_step)}"
                 + (f" ({written_text(rd, f.first_step, f.last_step)})" if axis.other else ""))
    return f


def _collapse_step(rd) -> Optional[int]:
    """The step the run turned non-finite for good, or None if every non-finite row recovered.

    On the steps of each row that ends non-finite, the start of its last stretch
    of steps at which anything in the run (any row or scalar) was non-finite.
    """
    bad, ending = [], []
    rows = [(table.steps, gt(table.get("nonfinite"), 0)) for role in tags_lib.ROLES
            for _, table in role_tables(rd, role)]
    rows += [(rd.scalar_steps(tag), ~np.isfinite(values)) for tag, (_, values) in rd.scalar_series.items()]
    for steps, mask in rows:
        if mask.any():
            bad.append(steps[mask])
            if mask[int(np.argmax(mask)):].all():
                ending.append(steps)
    if not ending:
        return None
    bad_steps = np.unique(np.concatenate(bad))
    onsets = []
    for steps in ending:
        hit = np.isin(steps, bad_steps)
        healthy = np.flatnonzero(~hit)
        onsets.append(int(steps[healthy[-1] + 1 if len(healthy) else 0]))
    return min(onsets)


def _tensor_hits(rd, role: str) -> List[Hit]:
    layers = list(role_tables(rd, role))
    found = {}
    # Layers of equal length are checked together, a row each.
    for rows in series_lib.same_length([len(table.steps) for _, table in layers]):
        counts = stack([layers[i][1] for i in rows], lambda t: t.get("nonfinite"))
        masks = gt(counts, 0)
        for r in np.nonzero(masks.any(axis=1))[0].tolist():
            layer, table = layers[rows[r]]
            nonfinite, idx = counts[r], np.nonzero(masks[r])[0]
            found[int(rows[r])] = Hit(layer.name, int(table.steps[idx[0]]), int(table.steps[idx[-1]]),
                                      float(nonfinite[idx[0]]), int(table.steps[idx[0]]),
                                      {"steps_with_nonfinite": len(idx), "to_the_end": bool(masks[r][idx[0]:].all())},
                                      table.steps[idx], after=kept_before(table.steps, int(idx[0])))
    return [found[i] for i in sorted(found)]


def _scalar_hits(rd) -> List[Hit]:
    """A hit per run-level scalar with NaN or Inf, at the layers' steps: a scalar on another step axis
    (per epoch beside per-iteration layers) is placed where it was written, its own steps in its detail."""
    hits = []
    for tag, (own, values) in rd.scalar_series.items():
        bad = ~np.isfinite(values)
        if bad.any():
            idx = np.nonzero(bad)[0]
            steps = rd.scalar_steps(tag)
            detail = {"source": "scalar", "to_the_end": bool(bad[idx[0]:].all())}
            if rd.scalar_other_axis(tag):
                detail.update(axis="other", own_first_step=int(own[idx[0]]), own_last_step=int(own[idx[-1]]))
            hits.append(Hit(tag, int(steps[idx[0]]), int(steps[idx[-1]]), float(values[idx[0]]), int(steps[idx[0]]),
                            detail))
    return hits
