"""Spikes recurring with a stable period; a likely logging artefact when the
period is the histogram logging interval or the epoch length (seeds 000, 004).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from ...reading.runs import RunData
from .. import series as series_lib
from ..finding import INFO, WARN, Finding
from ..spans import Hit, and_text, gather, group, layers_text
from ..spikes import scan

KIND = "periodic_spikes"
ORDER = 100
SEVERITY = WARN  # info when the period points at the logging
LABEL = "Periodic spikes"
METRIC = "l2"
NEEDS = ()
ADVICE = ("Look for something that repeats every period: a bad batch in the data order, an epoch "
          "boundary, a learning-rate schedule step, or the logging path itself.")
ARTEFACT_ADVICE = ("Nothing to fix in the model if the loss is smooth: the spike comes from how the logged batch "
                   "is computed (seed 000). Log histograms less often or on a fixed batch to confirm.")
CELL_RULES = ()
THRESHOLDS = ()


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    found = scan(rd, limits)
    z = limits["spike_z"]
    folded = members(found)
    out = []
    for key, hits in sorted(found.periodic.items(), key=lambda kv: kv[0][:2]):
        period, artefact, role = key
        # Single spikes of other series on this grid are occurrences of the same pattern.
        extra = [(r, one_hit_per_series(found.single[(step, r)] for step, r in steps))
                 for r, steps in _by_role([k for k, v in folded.items() if v == key]).items()]
        what = f"{_spike(role, hits)} every {period} steps"
        f = gather(rd, KIND, INFO if artefact else SEVERITY, [(role, hits)] + extra, z, what, ADVICE)
        if extra:
            # The pattern's own series state the period; the others spiked only where its grid met their steps.
            pattern = group(rd, KIND, f.severity, role, hits, z, what, ADVICE)
            others = [h for _, member in extra for h in member]
            at = sorted({int(s) for h in others for s in h.points})
            f.message = (f"{pattern.message}; {layers_text([h.layer for h in others])} spike on the same grid, "
                         f"at step{'s' if len(at) > 1 else ''} {and_text([str(s) for s in at[:10]])}")
        f.period, f.artefact = period, artefact
        f.evidence["period"] = period
        f.evidence["histogram_interval"] = rd.histogram_interval
        why = hits[0].detail["why"]
        if artefact:
            f.message += f"; {why}, so this is most likely a logging artefact, not a training problem"
            f.advice = ARTEFACT_ADVICE
        else:
            f.message += f"; {why}, so look for a cause that repeats every {period} steps"
        out.append(f)
    out += [_unjudged(rd, role, hits, z) for role, hits in found.unjudged.items()]
    return out


def _spike(role: Optional[str], hits: list) -> str:
    """The verb after the subject `group` writes: one scalar spikes, gradients (or scalars) spike."""
    return "spikes" if role is None and len(hits) == 1 else "spike"


def _unjudged(rd, role, hits, z: float) -> Finding:
    """Spikes that recur where the kept steps cannot tell their period: say what would."""
    f = group(rd, KIND, INFO, role, hits, z, f"{_spike(role, hits)} repeatedly", ADVICE)
    flag = rd.sampling["flag"] if rd.sampling else None
    hint = f"TensorBoard kept too few of the logged steps; {flag} keeps every step" if flag else \
        "the logged steps are too irregular"
    f.message += f"; {series_lib.TOO_FEW_REGULAR} ({hint})"
    f.evidence["period"] = None
    f.evidence["histogram_interval"] = rd.histogram_interval
    f.evidence["why"] = series_lib.TOO_FEW_REGULAR
    f.advice = (f"Keep every logged step ({flag}) and look again: " if flag else "Log at regular steps: ") + \
        "the spikes recur, but their period cannot be read from these samples."
    return f


def members(found) -> Dict[Tuple[int, Optional[str]], tuple]:
    """Single spikes, (step, role), that fall on a periodic pattern's grid -> that pattern's key.

    A step belongs to a pattern of period P when it lies a whole number of
    periods from the pattern's first spike, at most one period outside its
    first and last: the spikes of a bad batch every 35 steps in the layers'
    sampled histograms, at 140 and 280, are that pattern seen on fewer steps.
    """
    grids = []
    for key, hits in found.periodic.items():
        first, last = min(h.first for h in hits), max(h.last for h in hits)
        grids.append((key[0], first, last, key))
    out = {}
    for step, role in found.single:
        for period, first, last, key in sorted(grids, key=lambda g: g[0]):
            if first - period <= step <= last + period and (step - first) % period == 0:
                out[(step, role)] = key
                break
    return out


def _by_role(keys: Iterable[Tuple[int, Optional[str]]]) -> Dict[Optional[str], List[Tuple[int, Optional[str]]]]:
    out: Dict[Optional[str], list] = {}
    for step, role in sorted(keys, key=lambda k: k[0]):
        out.setdefault(role, []).append((step, role))
    return out


def one_hit_per_series(groups: Iterable[List[Hit]]) -> List[Hit]:
    """The single-spike hits of several steps, one per series, with all its spike steps."""
    by_name: Dict[str, List[Hit]] = {}
    for hits in groups:
        for h in hits:
            by_name.setdefault(h.layer, []).append(h)
    out = []
    for name, hits in by_name.items():
        steps = sorted(h.step for h in hits)
        worst = max(hits, key=lambda h: h.value)
        detail = {"spike_steps": steps[:50]}
        jumps = [h.detail["jump"] for h in hits if np.isfinite(h.detail.get("jump", np.nan))]
        if jumps:
            detail["jump"] = max(jumps)  # the largest jump above its neighbours' median
        own = sorted(h.detail["own_step"] for h in hits if "own_step" in h.detail)
        if own:  # a series on another step axis: the steps its own chart shows
            detail["own_spike_steps"] = own[:50]
        out.append(Hit(name, steps[0], steps[-1], worst.value, worst.step, detail,
                       np.array(steps, dtype=np.int64)))
    return out
