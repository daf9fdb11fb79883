"""Spikes recurring with a stable period; a likely logging artefact when the
period is the histogram logging interval or the epoch length (seeds 000, 004).
"""

from __future__ import annotations

from typing import List, Mapping

from ...reading.runs import RunData
from .. import series as series_lib
from ..finding import INFO, WARN, Finding
from ..spans import group
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
    out = []
    for (period, artefact, role), hits in sorted(found.periodic.items(), key=lambda kv: kv[0][:2]):
        f = group(rd, KIND, INFO if artefact else SEVERITY, role, hits, z, f"spike every {period} steps", ADVICE)
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


def _unjudged(rd, role, hits, z: float) -> Finding:
    """Spikes that recur where the kept steps cannot tell their period: say what would."""
    f = group(rd, KIND, INFO, role, hits, z, "spike repeatedly", ADVICE)
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
