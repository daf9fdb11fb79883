"""What the `vocabulary` route serves: the finding kinds with their labels and
chart metrics, severities, statuses, the health score bands and the threshold
lines, so the frontend never writes any of them again.
"""

from __future__ import annotations

from typing import Dict, List, Mapping

from ..reading import tags as tags_lib
from . import detectors, health
from .finding import SEVERITY_RANK
from .limits import DEFAULTS, Line

# The metric a layer's chart shows in a role when no finding kind picks one.
ROLE_METRIC = {tags_lib.GRADIENT: "max_abs", tags_lib.WEIGHT: "std", tags_lib.ACTIVATION: "zero_fraction",
               tags_lib.UPDATE: "update_ratio", tags_lib.OTHER: "l2"}


def _drawn(line: Line, limits: Mapping[str, float]) -> List[dict]:
    """A threshold line with its configured value (and its mirror at minus the value); none if not configured."""
    if line.name not in limits:
        return []
    value = float(limits[line.name])
    meaning = DEFAULTS[line.name].meaning if line.name in DEFAULTS else line.name
    out = [{"name": line.name, "value": value, "side": line.side, "meaning": meaning}]
    if line.mirrored:
        out.append({"name": line.name, "value": -value, "side": "below", "meaning": meaning})
    return out


def series_thresholds(role: str, metric: str, limits: Mapping[str, float]) -> List[dict]:
    """The configured thresholds that apply to one role's metric series, as lines to draw.

    The role's own lines first, then those drawn on the metric in any role.
    """
    own = [line for line in detectors.THRESHOLD_LINES if line.role == role and line.metric == metric]
    anyrole = [line for line in detectors.THRESHOLD_LINES if line.role is None and line.metric == metric]
    return [drawn for line in own + anyrole for drawn in _drawn(line, limits)]


def vocabulary(limits: Mapping[str, float]) -> Dict[str, list]:
    """The frontend's vocabulary, with the user's threshold overrides in `limits` applied."""
    bands = [{"status": health.STATUS_NAMES[code], "lo": lo, "hi": hi}
             for code, (lo, hi) in sorted(health.BANDS.items())]
    return {
        # steps_needed: logged steps in a row a kind's cell rules must hold for its finding (null: no cell rule),
        # so the tab can say of an ok cell where one held that it held too briefly.
        "kinds": [{"kind": d.KIND, "label": d.LABEL, "metric": d.METRIC, "events": d.KIND in detectors.EVENT_KINDS,
                   "steps_needed": detectors.steps_needed(d.KIND, limits) if d.CELL_RULES else None}
                  for d in detectors.DETECTORS],
        "role_metric": dict(ROLE_METRIC),
        "severities": [{"severity": name, "rank": rank} for name, rank in SEVERITY_RANK.items()],
        "statuses": [{"status": name, "code": code} for code, name in enumerate(health.STATUS_NAMES)],
        "health_bands": bands,
        "thresholds": [{"role": line.role, "metric": line.metric, **drawn}
                       for line in detectors.THRESHOLD_LINES for drawn in _drawn(line, limits)],
    }
