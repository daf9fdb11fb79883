"""The answers: every route's JSON and the CLI's, built from a run's analysis.

Pure functions: a run's data and findings in, JSON-ready values out. Reading
the data provider and choosing the HTTP status stay with the caller, so the
routes and the ``gradhealth`` CLI share one run summary and one worst severity.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..analysis import detectors, finding, health, metrics
from ..analysis import blocks as blocks_lib
from ..analysis import distribution as distribution_lib
from ..analysis import findings as findings_lib
from ..analysis import sweep as sweep_lib
from ..reading.runs import Layer, RoleData, RunData, UnreadableSteps, equal_arrays, role_union_steps
from ..reading import tags as tags_lib
from ..reading import trainings as trainings_lib
from . import jsontext

HEATMAP_METRICS = ("health",) + metrics.METRICS

# The CLI's one-word verdict per worst severity of a run (None: no finding at all).
_VERDICTS = {None: "healthy", finding.INFO: "healthy (notes only)", finding.WARN: "WARN",
             finding.CRITICAL: "CRITICAL"}


def nullable(values: np.ndarray) -> list:
    """Float array to a JSON list, NaN and infinities as null."""
    values = np.asarray(values, dtype=np.float64)
    out = values.astype(object)
    out[~np.isfinite(values)] = None
    return out.tolist()


def step_text(step: Optional[int]) -> Optional[str]:
    """A step as decimal digits, the exact twin the routes send beside every step number.

    JavaScript's numbers hold integers exactly only up to 2**53; TensorBoard's steps
    go to 2**63, so the tab reads steps from these strings.
    """
    return None if step is None else str(int(step))


def step_texts(steps: np.ndarray) -> List[str]:
    """`step_text` of every step of an array."""
    return np.asarray(steps, dtype=np.int64).astype(str).tolist()


# Keys of a finding's JSON and its evidence that hold a step or a list of steps (the others
# hold values, counts or intervals).
_FINDING_STEP_KEYS = ("step", "first_step", "last_step", "onset_after", "spike_steps")


def _is_step(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def with_step_texts(obj):
    """A finding's JSON with a ``<key>_text`` twin beside each of its steps, in its evidence too."""
    if isinstance(obj, list):
        return [with_step_texts(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        out[key] = with_step_texts(value)
        if key in _FINDING_STEP_KEYS and _is_step(value):
            out[f"{key}_text"] = step_text(value)
        elif key in _FINDING_STEP_KEYS and isinstance(value, list) and all(map(_is_step, value)):
            out[f"{key}_text"] = [step_text(v) for v in value]
    return out


def worst_role(rd: RunData, found: Sequence[finding.Finding]) -> Optional[str]:
    """The role of the most severe warn or critical finding about one role the run has (the first in
    the findings' order, most severe first); None when no such finding names one."""
    roles = set(rd.roles())
    for f in found:
        if f.severity in (finding.CRITICAL, finding.WARN) and f.role in roles:
            return f.role
    return None


def worst_severity(found: Sequence[finding.Finding]) -> Optional[str]:
    """The most severe of the findings' severities, None when there are none."""
    return max((f.severity for f in found), key=finding.SEVERITY_RANK.__getitem__, default=None)


_GRADIENT_KINDS = {d.KIND for d in detectors.DETECTORS if tags_lib.GRADIENT in d.NEEDS}


# The kinds a rule needs a role or the loss for; a run that can judge none of them is "not judged"
# (what is left, NaN and spike checks, reads any number and says nothing of a role's health).
_NEEDING_KINDS = {d.KIND for d in detectors.DETECTORS if d.NEEDS}

# The verdict words, the run list's badge and the CLI's line alike: a finding's severity, or what the logs allow.
NOT_JUDGED, SCALARS_ONLY, NO_WARNINGS, HEALTHY = "not judged", "scalars only", "no warnings", "healthy"
_NOTES = " (notes only)"


def verdict_word(worst: Optional[str], unjudged: Sequence[str], has_layers: bool,
                 sampling: Optional[Mapping] = None, scalars_sampling: Optional[Mapping] = None) -> str:
    """The one word on a run that the run list's badge and ``gradhealth report``/``check`` both say.

    ``worst``: the run's `worst_severity`. "critical" or "warn" for a run with such a finding;
    otherwise what the logs allow, worst first:
    "not judged" where no rule needing a role or the loss could run (``unjudged``: `not_judged`),
    "scalars only" where no layer row holds a step (``has_layers``), "no warnings" where gradients
    were not logged or TensorBoard's sampling dropped steps or points, else "healthy"; each with
    " (notes only)" when the run has notes.
    """
    if worst in (finding.CRITICAL, finding.WARN):
        return worst
    notes = _NOTES if worst else ""
    if _NEEDING_KINDS <= set(unjudged):
        return NOT_JUDGED + notes
    if not has_layers:
        return SCALARS_ONLY + notes
    if set(unjudged) & _GRADIENT_KINDS or sampling is not None or scalars_sampling is not None:
        return NO_WARNINGS + notes
    return HEALTHY + notes


def parent_run(run: str) -> Optional[str]:
    """The folder a run sits in, as a run name ("" for the logdir itself); None for the logdir's own run."""
    return None if run in (".", "") else run.rpartition("/")[0]


def layers_in(run: str, runs_with_layers: Sequence[str]) -> Optional[str]:
    """The run beside ``run`` that holds its training's layers: the only run of the same parent folder among
    ``runs_with_layers`` (Keras' ``X/train`` beside ``X/validation``); None where there is none or several.

    At the logdir's top level too: a Keras fit's own ``log_dir`` given as the logdir makes its halves the
    top-level runs ``train`` and ``validation``. The logdir's own run (".") sits in no folder: never paired."""
    parent = parent_run(run)
    if parent is None:
        return None
    beside = [r for r in runs_with_layers if r != run and parent_run(r) == parent]
    return beside[0] if len(beside) == 1 else None


def beside(run: str, runs_with_layers: Sequence[str], runs: Sequence[str]) -> Optional[Tuple[str, bool]]:
    """(the run beside ``run`` that holds its layers, `layers_in`; whether the two are their folder's only
    runs among ``runs``, the runs with data), or None where no single such run is beside it."""
    sibling = layers_in(run, runs_with_layers)
    if sibling is None:
        return None
    parent = parent_run(run)
    return sibling, sum(parent_run(r) == parent for r in runs) == 2


def holds_layer_steps(rd: RunData) -> bool:
    """Whether any of the run's layer rows holds a step (a Keras validation half's hold none)."""
    return any(len(r.table.steps) for layer in rd.layers for r in layer.roles.values())


def beside_text(run: str, sibling: str, halves: bool) -> str:
    """'the validation half of sigmoid10_sgd; its layers are in sigmoid10_sgd/train' (``halves``: the two
    are the parent's only runs; "run" otherwise)."""
    parent = parent_run(run)
    leaf = run[len(parent) + 1:] if parent else run
    of = f" of {parent}" if parent else " of the logdir"
    return f"the {leaf} {'half' if halves else 'run'}{of}; its layers are in {sibling}"


def _unknown_roles_text(unknown_roles: int) -> str:
    """'6 histogram tags of unknown role'."""
    return f"{unknown_roles:,} histogram tag{'' if unknown_roles == 1 else 's'} of unknown role"


# How a verdict that names tags of unknown role says to set their roles (as `shared_name_note` and the tab do).
_SET_ROLES = "a tag rule in gradhealth.json sets a tag's role"


def verdict(found: Sequence[finding.Finding], gradients_judged: bool = True,
            sampling: Optional[Mapping] = None, scalars_sampling: Optional[Mapping] = None,
            word: Optional[str] = None, beside: Optional[str] = None, unknown_roles: int = 0) -> str:
    """The verdict on one run in words: its `verdict_word` (``word``; from the findings and
    ``gradients_judged`` alone when not given) and why, for the CLI's line and the ``runs`` route.

    A run is called healthy only where its gradients could be judged and every logged
    step was read: without gradients, or where TensorBoard's sampling dropped steps
    (``sampling``, `RunData.sampling`) or points of the loss and other run-level scalars
    (``scalars_sampling``, `RunData.scalars_sampling`), "no warnings" is all the logs read can say.
    ``beside``: `beside_text`, for a run of scalars only whose layers another run holds.
    ``unknown_roles``: how many of the run's histogram tags have no known role (`unknown_role_tags`):
    where there are any, gradients missing were not recognised among them, not "not logged".
    """
    worst = worst_severity(found)
    if word is None:
        word = verdict_word(worst, [] if gradients_judged else sorted(_GRADIENT_KINDS), True,
                            sampling, scalars_sampling)
    notes = _NOTES if worst else ""
    if word.startswith(NOT_JUDGED) and unknown_roles:
        return (f"{word} (no gradient, weight, activation or loss recognised;"
                f" {_unknown_roles_text(unknown_roles)}: {_SET_ROLES})")
    if word.startswith(NOT_JUDGED):
        return word + " (no gradient, weight, activation or loss data logged)"
    if word.startswith(SCALARS_ONLY):
        return f"{word}: {beside or 'no layers logged, only the loss and other scalars are judged'}"
    if word.startswith(NO_WARNINGS) and not gradients_judged and unknown_roles:
        return (f"no warnings (gradients not recognised among {_unknown_roles_text(unknown_roles)}: exploding and"
                f" vanishing gradients not judged; {_SET_ROLES})" + notes)
    if word.startswith(NO_WARNINGS) and not gradients_judged:
        return "no warnings (no gradients logged: exploding and vanishing gradients not judged)" + notes
    if word.startswith(NO_WARNINGS) and sampling is not None:
        lo, hi = sampling["kept_min"], sampling["kept_max"]
        kept = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
        logged = f"{'at least ' if sampling['logged_at_least'] else ''}{sampling['logged']:,}"
        return f"no warnings in the {kept} steps read of {logged}" + notes
    if word.startswith(NO_WARNINGS) and scalars_sampling is not None:
        # The rows are whole, a scalar is not: a loss spike or NaN may lie in the points not kept.
        cut = scalars_sampling["series"]
        first = cut[0]
        more = f" (and {len(cut) - 1} more series sampled)" if len(cut) > 1 else ""
        logged = f"{'at least ' if first['logged_at_least'] else ''}{first['logged']:,}"
        return f"no warnings in the {first['kept']:,} {first['tag']} points read of {logged}{more}" + notes
    return _VERDICTS[worst]


def not_judged(rd: RunData) -> List[str]:
    """The finding kinds this run's logs cannot speak for (nothing they need was logged)."""
    return detectors.not_judged(list(rd.roles()) + list(rd.scalars))


def coverage_note(kinds: Sequence[str]) -> Optional[str]:
    """A sentence for a person on what was not judged and how to log it."""
    if not kinds:
        return None
    labels = {d.KIND: d.LABEL for d in detectors.DETECTORS}
    note = "Not judged, for want of the data they need: " + ", ".join(labels[k] for k in kinds) + "."
    if _GRADIENT_KINDS & set(kinds):
        note += (" Log gradients to judge them: gradhealth_plugin.torch.watch(model, logdir) or"
                 " gradhealth_plugin.keras.GradientHealthCallback(logdir).")
    if tags_lib.SCALAR_LOSS in {n for d in detectors.DETECTORS if d.KIND in kinds for n in d.NEEDS}:
        # A loss logged under another name (``train/mse``) is not recognised: say which names are.
        note += (" The loss is read from a run-level scalar with loss, cost, cross_entropy, xent or nll as a"
                 " word of its name (`loss`, `train/loss`, `epoch_loss`).")
    return note


# How a row's role was decided when it was not found: nothing told it, or another tag names the same parameter.
_UNKNOWN_ROLE = (tags_lib.BY_FALLBACK, tags_lib.BY_SHARED_NAME)


def _rows_decided_by(rd: RunData, ways: Sequence[str]) -> List[RoleData]:
    """The run's rows whose role was decided in one of ``ways`` (`TagInfo.decided_by`), in row order."""
    return [r for layer in rd.layers for r in layer.roles.values() if r.decided_by in ways]


def unknown_role_tags(rd: RunData) -> List[str]:
    """The run's histogram tags whose role was not found (rows of role other by fallback or a shared name).

    Gradients may be among them, under a name nothing recognises; a tag a user's rule sets to
    ``other`` or ``ignore`` was decided, and is not one of them.
    """
    return [tag for r in _rows_decided_by(rd, _UNKNOWN_ROLE) for tag in r.tags]


def shared_name_note(rd: RunData) -> Optional[str]:
    """A sentence on the rows whose role is unknown because another tag names the same parameter, or None."""
    shared = [r.tags[0] for r in _rows_decided_by(rd, (tags_lib.BY_SHARED_NAME,))]
    if not shared:
        return None
    many = len(shared) > 1
    return (f"{len(shared)} histogram{'s name parameters' if many else ' names a parameter'} that another tag"
            " names too under another prefix"
            f" (`{shared[0]}`, ...): two tags that name one parameter cannot both be its weights (one may be its"
            " gradient) and nothing says which is, so they are role other here and no weight or gradient rule"
            " judges them. A tag rule in gradhealth.json gives each its role (docs/configuration.md).")


def _steps_logged(rdata: RoleData) -> int:
    """A row's logged steps: what its writer reported, else the steps kept (then nothing was dropped)."""
    return int(rdata.steps_logged if rdata.steps_logged is not None else len(rdata.table.steps))


def _role_summary(rdata: RoleData) -> dict:
    return {"tags": rdata.tags, "source": rdata.source, "steps": int(len(rdata.table.steps)),
            # Logged against kept: they differ where TensorBoard's sampling dropped steps.
            "steps_logged": _steps_logged(rdata),
            "steps_logged_at_least": bool(rdata.logged_at_least),
            "dropped_by": list(rdata.dropped_by),
            # How the role was decided: rule, convention, pairing or name (the tab marks guesses).
            "decided_by": rdata.decided_by}


def run_summary(rd: RunData, found: Sequence[finding.Finding],
                training_of: Optional[trainings_lib.Training] = None,
                beside: Optional[Tuple[str, bool]] = None) -> dict:
    """One run's entry in the ``runs`` route: its layers, roles, sampling, findings counts and the
    training many workers logged it is a rank of (`training_of`, from `Analyzer.training_of`).

    ``beside``: (the run that holds this run's layers, whether the two are their folder's only runs),
    from `Analyzer.layers_in`; said only of a run whose own layer rows hold no step.
    """
    worst = worst_severity(found)
    has_data = holds_layer_steps(rd)
    counts = {sev: sum(1 for f in found if f.severity == sev) for sev in finding.SEVERITY_RANK}
    unjudged = not_judged(rd)
    word = verdict_word(worst, unjudged, has_data, rd.sampling, rd.scalars_sampling)
    layers_run = beside[0] if beside is not None and not has_data else None
    # An evaluation half says where its layers are; how to log layers would be advice it cannot take.
    beside_note = beside_text(rd.run, beside[0], beside[1]) if layers_run is not None else None
    return {
        "run": rd.run,
        "layers": [
            {"name": layer.name, "group": layer.group, "kind": layer.kind, "order": layer.order,
             "roles": {role: _role_summary(r) for role, r in layer.roles.items()}}
            for layer in rd.layers
        ],
        "roles": rd.roles(),
        "scalars": rd.scalars,
        "unclassified": rd.unclassified,
        # Tags left out because what they hold cannot be read; the rest of the run is served.
        "unreadable": unreadable(rd),
        # Histogram tags read but for some steps, which hold no histogram (no data there): how many, the first.
        "unreadable_steps": unreadable_steps(rd),
        "steps_kept": rd.steps_kept,
        "steps_logged": rd.steps_logged,
        "sampling": rd.sampling,
        # The same for the run-level scalars (the loss, ...): rows can be whole while they are sampled.
        "scalars_sampling": rd.scalars_sampling,
        "last_step": rd.last_step,
        "last_step_text": step_text(rd.last_step),
        "worst_severity": worst,
        # The role the tab opens the run on when its URL names none: that of the most severe finding.
        "worst_role": worst_role(rd, found),
        "worst_status": (worst if worst in (finding.CRITICAL, finding.WARN) else "ok") if has_data else "no_data",
        "findings": counts,
        # What the logs could not show: "ok" speaks only for the kinds that were judged.
        "not_judged": unjudged,
        "gradients_judged": not set(unjudged) & _GRADIENT_KINDS,
        "coverage_note": (f"This is {beside_note}; only its loss and other scalars are judged here."
                          if beside_note else " ".join(filter(None, (coverage_note(unjudged), shared_name_note(rd))))
                          or None),
        # The run that holds this run's layers (Keras' X/train beside X/validation), or None.
        "layers_in": layers_run,
        # The run in one word, the badge and the CLI alike: "healthy" only where gradients were judged and
        # every logged step was read; then the same in words, with why.
        "verdict_word": word,
        "verdict": verdict(found, not set(unjudged) & _GRADIENT_KINDS, rd.sampling, rd.scalars_sampling,
                           word, beside_note, len(unknown_role_tags(rd))),
        # Why an integration's stop_on stopped training ({"step", "message"}), or None.
        "stopped": rd.stopped,
        "training": training(training_of, rd.run),
    }


def unreadable(rd: RunData) -> List[dict]:
    """The run's tags that could not be read, each with why, in tag order."""
    return [{"tag": tag, "why": why} for tag, why in rd.unreadable.items()]


def unreadable_steps(rd: RunData) -> List[dict]:
    """The run's tags with steps that hold no histogram or no statistics vector (a gradhealth summary's):
    {"tag", "steps", "of", "first_step", "why"}."""
    return [some.to_json(tag) for tag, some in rd.unreadable_steps.items()]


def unreadable_line(tag: str, why: str) -> str:
    """A tag left out, as every command says it."""
    return f"unreadable tag {tag}: {why}"


def unreadable_steps_line(tag: str, some: UnreadableSteps) -> str:
    """A tag with steps that hold no histogram (or no statistics vector), as every command says it."""
    return (f"unreadable steps of tag {tag}: {some.steps:,} of {some.of:,} steps read hold no {some.holds} and are"
            f" no data; the first: {some.why}")


def unreadable_lines(rd: RunData) -> List[str]:
    """What of the run could not be read, a line per tag: the tags left out, then those read but for some steps."""
    return ([unreadable_line(tag, why) for tag, why in rd.unreadable.items()]
            + [unreadable_steps_line(tag, some) for tag, some in rd.unreadable_steps.items()])


def failed_run(run: str, error: str) -> dict:
    """A run's entry in the ``runs`` route when it could not be analysed: its name and why."""
    return {"run": run, "error": error}


def training(t: Optional[trainings_lib.Training], run: str) -> Optional[dict]:
    """A run's place in a training many workers logged: the training, the run's rank and every rank's run
    (lowest rank first); None for a run that is no rank of one."""
    if t is None:
        return None
    return {"name": t.name, "rank": t.rank_of(run), "ranks": list(t.ranks), "runs": list(t.runs)}


def runs(summaries: Sequence[dict]) -> dict:
    """The ``runs`` route: every run's summary, or `failed_run` for a run that could not be analysed."""
    return {"runs": list(summaries)}


def run_findings(rd: RunData, found: Sequence[finding.Finding]) -> dict:
    """The ``findings`` route: one run's findings."""
    return {"run": rd.run, "findings": findings_json(rd, found)}


def findings_json(rd: RunData, found: Sequence[finding.Finding]) -> List[dict]:
    """The findings as the route and ``gradhealth report --format json`` send them, each with what it `covers`."""
    layers = {layer.name: layer for layer in rd.layers}
    out = []
    for f in found:
        covers = finding_covers(rd, layers, f)
        entry = {**with_step_texts(f.to_json()), "covers": covers, "covers_text": _spans_text(covers)}
        if f.role_points:
            # A finding gathered from several roles covers each row at that row's own steps.
            by_role = {role: finding_covers(rd, layers, f, role) for role in f.role_points}
            entry["covers_by_role"] = by_role
            entry["covers_by_role_text"] = {role: _spans_text(c) for role, c in by_role.items()}
        out.append(entry)
    return out


def _spans_text(covers: Mapping[str, List[List[int]]]) -> Dict[str, List[List[str]]]:
    return {name: [[step_text(a), step_text(b)] for a, b in spans] for name, spans in covers.items()}


def finding_covers(rd: RunData, layers: Mapping[str, Layer], f: finding.Finding,
                   role: Optional[str] = None) -> Dict[str, List[List[int]]]:
    """Per layer (or run-level scalar) of a finding: the steps it covers, as spans of consecutive logged steps
    (in `role` only, for a finding gathered from several roles).

    Exactly the cells whose status the finding sets (`findings.covers`, which
    `findings.decide_cells` reads too): a layer's healthy steps between two of
    its spans, or between two spikes, are left out. Inside a span lie only
    covered steps of that layer, and steps it did not log.
    """
    out = {}
    for name in f.layers:
        steps = _logged_steps(rd, layers, f, name, role)
        if steps is None:
            continue
        spans = step_spans(steps, findings_lib.covers(f, name, steps, role))
        if spans:
            out[name] = spans
    return out


def _logged_steps(rd: RunData, layers: Mapping[str, Layer], f: finding.Finding, name: str,
                  only: Optional[str] = None) -> Optional[np.ndarray]:
    """The steps a finding's layer logged in the finding's role (every role for a finding without one,
    `only` when given), or the steps of the run-level scalar of that name; None for neither."""
    layer = layers.get(name)
    if layer is not None:
        wanted = only or f.role
        rows = [r.table.steps for role, r in layer.roles.items() if wanted is None or role == wanted]
        return np.unique(np.concatenate(rows)) if rows else None
    if name in rd.scalar_series:
        # On the layers' axis, as the finding's span is, also for a scalar logged on another one.
        return rd.scalar_steps(name)
    return None


def step_spans(steps: np.ndarray, mask: np.ndarray) -> List[List[int]]:
    """The runs of consecutive entries of ascending `steps` where `mask` holds, as [first step, last step]."""
    idx = np.flatnonzero(mask)
    if not len(idx):
        return []
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = idx[np.concatenate(([0], breaks + 1))]
    ends = idx[np.concatenate((breaks, [len(idx) - 1]))]
    return [[int(steps[a]), int(steps[b])] for a, b in zip(starts, ends)]


def default_role(rd: RunData) -> str:
    """The heatmap's role when the request names none: the run's first, else gradients."""
    available = rd.roles()
    return available[0] if available else tags_lib.GRADIENT


def _health_quality(rows: Sequence[RoleData], keep: slice = slice(None), nonfinite: bool = False) -> np.ndarray:
    """Quality codes of rows' health scores at their steps `keep`, a row each (the rows logged at the same
    steps): exact where every metric of the row at that step is exact (gradhealth's summaries, per-layer
    scalars), estimated where any comes from histogram buckets or is a bound (`CellHealth.estimated`). With
    `nonfinite`, `FINITE_ONLY` where the tensor held NaN or Inf: the heatmap paints such a cell as NaN/Inf,
    as its metric views do (a score chart keeps drawing the score there)."""
    status = np.array([r.health.status[keep] for r in rows], dtype=np.uint8).reshape(len(rows), -1)
    estimated = np.array([(r.health.estimated if r.health.estimated is not None
                           else health.estimated_steps(r.table))[keep] for r in rows], dtype=bool).reshape(status.shape)
    quality = np.where(estimated, metrics.ESTIMATED, metrics.EXACT)
    if nonfinite:
        bad = np.array([metrics.nonfinite_steps(r.table, keep) for r in rows], dtype=bool).reshape(status.shape)
        quality = np.where(bad, metrics.FINITE_ONLY, quality)
    return np.where(status == health.NO_DATA, metrics.NO_DATA, quality).astype(np.uint8)


def _group_by(items: Sequence, key: Callable) -> Dict[object, List[int]]:
    """The indices of `items` by `key(item)`, in order of first appearance."""
    groups: Dict[object, List[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(key(item), []).append(i)
    return groups


def _same_steps(rows: Sequence[RoleData]) -> Iterator[Tuple[np.ndarray, List[RoleData]]]:
    """(indices, rows) of the rows logged at the same steps, group by group."""
    for members in equal_arrays([r.table.steps for r in rows]):
        yield np.array(members, dtype=np.int64), [rows[i] for i in members]


def incomplete_last_step(has_data: np.ndarray, steps: np.ndarray) -> Optional[dict]:
    """The last step while its layers disagree: fewer rows have data there than at the step before.

    A writer flushes a step's summaries one by one, so a step read mid-write holds
    only some layers; the tab marks that column rather than drawing holes. None
    when the last step has as many rows as the one before (or there is no step before).
    """
    if has_data.shape[1] < 2:
        return None
    rows = has_data[:, -2:].sum(axis=0)
    if rows[1] >= rows[0]:
        return None
    return {"step": int(steps[-1]), "step_text": step_text(steps[-1]), "layers": int(rows[1]),
            "layers_before": int(rows[0])}


# The most columns a heatmap answer may be asked for (a canvas this wide in pixels is already rare).
MAX_COLUMNS = 4000
# Significant digits of a heatmap value: what the colour scale and the tooltip show.
VALUE_DIGITS = 4
# How a heatmap answer sends its cells: matrices of lists (the default), or `compact_cells` (the tab's).
LAYOUT_ROWS, LAYOUT_COMPACT = "rows", "compact"
HEATMAP_LAYOUTS = (LAYOUT_ROWS, LAYOUT_COMPACT)
# The compact layout's values: each double's top 24 bits (`top24`), 3 bytes a cell.
VALUE_ENCODING = "f64top24"
# Top-24 codes of their own: a cell without a value (a NaN pattern no double is sent as), NaN, and the
# largest finite magnitude (a finite value is never rounded up to an infinity).
TOP24_NULL, TOP24_NAN, TOP24_MAX_FINITE = 0xFFFFFF, 0x7FF800, 0x7FEFFF


# Rows or blocks asked for: inclusive (first, last) index spans, as the `rows` and `blocks` parameters give them.
Spans = Sequence[Tuple[int, int]]

# The most cells one heatmap answer carries, per layout, so that an answer stays within the product's
# 2 MB for any run. A compact cell is at most 13 bytes (2 of kind, 3 of value, 8 of step offset) in
# base64, 17.3: 100,000 of them 1.73 MB; measured, 5.3-5.5 on the demo and wild runs and 6.7 on the
# big-run bench's binned `l2`. A rows-layout cell measured 11-25 bytes, 32 where every cell names a rule
# (the demo's unclipped explosion), about 3 more binned: 25,000 of them under 1 MB. An answer of more
# sends the first rows that fit and names the rest (`page`); a row of more cells than this (a run of
# that many steps asked for without a column budget) still goes whole.
MAX_CELLS = {LAYOUT_ROWS: 25_000, LAYOUT_COMPACT: 100_000}


@dataclasses.dataclass
class HeatmapCells:
    """A heatmap answer before its rows are chosen: every field but the cells (`head`), and every row's
    cells (binned when asked). Its arrays are read, never written, by `heatmap_answer`."""
    head: dict
    values: np.ndarray
    status: np.ndarray
    rules: np.ndarray  # uint8 codes of `health.rule_names`
    quality: np.ndarray
    offsets: Optional[np.ndarray]

    summaries: Dict[str, "RowSummary"] = dataclasses.field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        arrays = [self.values, self.status, self.rules, self.quality] + ([self.offsets] if self.offsets is not None else [])
        # `summary` holds a copy of the values as sent (one per layout asked, mostly the tab's alone);
        # a row's name and block about 200 bytes.
        return sum(a.nbytes for a in arrays) + self.values.nbytes + 200 * len(self.head["layers"])

    def summary(self, layout: str) -> "RowSummary":
        """What every row window of these cells in `layout` shares, worked out once per layout."""
        if layout not in self.summaries:
            self.summaries[layout] = row_summary(sent_values(self.values, layout), self.status, self.quality,
                                                 self.head["blocks"])
        return self.summaries[layout]


def heatmap(rd: RunData, role: str, metric: str, start: Optional[int] = None, end: Optional[int] = None,
            columns: Optional[int] = None, layout: str = LAYOUT_ROWS, rows: Optional[Spans] = None,
            blocks: Optional[Spans] = None) -> dict:
    """The ``heatmap`` route (see `heatmap_cells` and `heatmap_answer`)."""
    return heatmap_answer(heatmap_cells(rd, role, metric, start, end, columns), layout, rows, blocks)


def heatmap_answer(cells: HeatmapCells, layout: str = LAYOUT_ROWS, rows: Optional[Spans] = None,
                   blocks: Optional[Spans] = None) -> dict:
    """A heatmap answer in `layout`, of every row, or with `rows` or `blocks` of those only (`row_window`).
    Every row that fits `MAX_CELLS` is sent as it always was; more is a row window of the first rows that
    fit, whose `page` names the rows to ask for next."""
    c = cells
    if rows is None and blocks is None:
        n_rows, n_cols = c.status.shape
        if n_rows <= page_rows(n_cols, layout):
            return {**c.head, **_cells(c.values, c.status, c.rules, c.quality, c.offsets, layout)}
        rows = [(0, n_rows - 1)]
    return {**c.head, **row_window(c, layout, rows or (), blocks or ())}


def page_rows(columns: int, layout: str) -> int:
    """How many rows (or folded blocks) of `columns` cells one answer in `layout` carries: `MAX_CELLS`
    of them, and at least one, so that asking for the next rows always gets on."""
    return max(1, MAX_CELLS[layout] // max(1, columns))


def spans_text(numbers: np.ndarray) -> str:
    """Ascending distinct numbers as the `rows` and `blocks` parameters take them: [0, 1, 2, 5] -> "0:2,5"."""
    named = np.zeros(int(numbers[-1]) + 1 if len(numbers) else 0, dtype=bool)
    named[numbers] = True
    return ",".join(str(a) if a == b else f"{a}:{b}" for a, b in step_spans(np.arange(len(named)), named))


def heatmap_cells(rd: RunData, role: str, metric: str, start: Optional[int] = None, end: Optional[int] = None,
                  columns: Optional[int] = None) -> HeatmapCells:
    """The ``heatmap`` route's matrix: the layers x steps of one role and metric, compact for the tab.

    `start` and `end` (inclusive, either optional) narrow it to a window of steps.
    With a column budget `columns`, a window holding more steps than that is binned
    (`bin_columns`): per bin and row the worst status, and the value and step of the
    cell that had it, so one bad step is never averaged away; the answer grows with
    rows x budget, not with the run's length. No more steps than the budget: every step.
    `heatmap_answer` writes its cells in a layout (`compact`: as `compact_cells` does), of every row or,
    with `rows` or `blocks` (spans of row and block numbers), of those rows and folded blocks only
    (`row_window`): the answer then grows with the rows on screen.
    """
    all_steps = role_union_steps(rd, role)
    lo = 0 if start is None else int(np.searchsorted(all_steps, start, side="left"))
    hi = len(all_steps) if end is None else int(np.searchsorted(all_steps, end, side="right"))
    steps = all_steps[lo:max(lo, hi)]
    whole = len(steps) == len(all_steps)
    first_step, last_step = (int(all_steps[0]), int(all_steps[-1])) if len(all_steps) else (None, None)
    layers = [layer for layer in rd.layers if role in layer.roles]
    n_rows, n_cols = len(layers), len(steps)
    binned = columns is not None and n_cols > columns
    which = bin_columns(steps, columns, start, end) if binned else None
    first = bin_starts(which) if binned else None
    # Rows are laid out (and binned) a chunk at a time into the answer's arrays: a long run's whole grid
    # of cells (1,000 rows x 5,000 steps: 40 MB an array, several arrays) is never held twice.
    width = len(first) if binned else n_cols
    values, status = np.empty((n_rows, width)), np.empty((n_rows, width), dtype=np.uint8)
    rules, cell_quality = np.empty((n_rows, width), dtype=np.uint8), np.empty((n_rows, width), dtype=np.uint8)
    has_data = np.empty((n_rows, width), dtype=bool)
    picks = np.empty((n_rows, width), dtype=np.int64) if binned else None
    quality_codes: List[np.ndarray] = []
    chunk = max(1, _GRID_CELLS // max(1, n_cols))
    for lo_row in range(0, n_rows, chunk):
        grid = _grid([layer.roles[role] for layer in layers[lo_row:lo_row + chunk]], metric, steps, whole)
        at = slice(lo_row, lo_row + len(grid.values))
        if binned:
            score = -grid.values if metric == "health" else _extremeness(grid.values, metric)
            _, pick = worst_per_bin(grid.status, score, which)
            picks[at] = pick
            cells = (np.arange(len(pick))[:, None], pick)
            grid = _Grid(grid.values[cells], grid.status[cells], grid.rules[cells], grid.quality[cells],
                         grid.has_data[cells], grid.codes)
        values[at], status[at], rules[at], cell_quality[at], has_data[at] = (
            grid.values, grid.status, grid.rules, grid.quality, grid.has_data)
        quality_codes.extend(grid.codes)
        del grid
    codes = np.concatenate(quality_codes) if quality_codes else np.zeros(0, dtype=np.uint8)
    quality = metrics.summarize_quality(codes) if quality_codes else None
    out = {
        "run": rd.run, "role": role, "metric": metric,
        "layers": [layer.name for layer in layers],
        # Per row, how its role was decided: the tab marks guesses (name, fallback).
        "decided_by": [layer.roles[role].decided_by for layer in layers],
        # Per row, the block the tab folds it into (transformer.h.3, layer4.1, dense_3), or None.
        "blocks": blocks_lib.blocks([layer.name for layer in layers], [layer.group for layer in layers]),
        "status_names": list(health.STATUS_NAMES),
        "quality": quality,
        # The qualities present ("mixed" is exact beside estimated values or bounds): the tab words them.
        "qualities": metrics.present_qualities(codes),
        # Whether some cell is a NaN/Inf step's (`finite_only`), which `quality` leaves out beside others.
        "finite_only_cells": bool((codes == metrics.FINITE_ONLY).any()),
        # Whether some cell is an update ratio whose lower bound of 0 proves nothing (`not_judged`), which
        # `quality` leaves out beside others: the tab paints such cells as not judged.
        "not_judged_cells": bool((codes == metrics.NOT_JUDGED).any()),
        "quality_names": list(metrics.QUALITY_NAMES),
        "scale": "log" if metric in metrics.LOG_METRICS else "linear",
        # The window asked for (null: open), how many steps it and the whole run hold, and the role's first
        # and last step in the whole run: past them the tab's axis (which spans the loss too) is "not logged".
        "window": {"start_text": step_text(start), "end_text": step_text(end),
                   "steps": int(n_cols), "steps_total": int(len(all_steps)),
                   "first_step": first_step, "first_step_text": step_text(first_step),
                   "last_step": last_step, "last_step_text": step_text(last_step)},
    }
    if binned:
        last = np.append(first[1:], n_cols) - 1
        out.update({
            "binned": True,
            "steps": steps[first].tolist(), "steps_text": step_texts(steps[first]),
            # The last step of each bin: a column stands for every step from its step to this one.
            "steps_last_text": step_texts(steps[last]),
        })
        # Per cell, the step its value and status came from, as an offset from its column's step.
        offsets: Optional[np.ndarray] = _step_offsets(steps, first, picks)
    else:
        out.update({"binned": False, "steps": steps.tolist(), "steps_text": step_texts(steps)})
        offsets = None
    # Only at full resolution where the window reaches the run's last step: a window's own end is no writer's.
    out["incomplete"] = (incomplete_last_step(has_data, steps) if not binned and hi >= len(all_steps)
                         else None)
    return HeatmapCells(out, values, status, rules, cell_quality, offsets)


# Cells of one chunk of rows laid out at once by `heatmap_cells`.
_GRID_CELLS = 1 << 20


@dataclasses.dataclass
class _Grid:
    """Rows' cells at a window's steps: value, status, rule code, quality code and whether logged; the
    quality codes present in each block of rows laid out together."""

    values: np.ndarray
    status: np.ndarray
    rules: np.ndarray
    quality: np.ndarray
    has_data: np.ndarray
    codes: List[np.ndarray]


def _grid(rows: Sequence[RoleData], metric: str, steps: np.ndarray, whole: bool) -> _Grid:
    """The cells of `rows` at `steps` (every step of theirs when `whole`, else the window they span)."""
    n_rows, n_cols = len(rows), len(steps)
    values = np.full((n_rows, n_cols), np.nan)
    status = np.zeros((n_rows, n_cols), dtype=np.uint8)
    rules = np.full((n_rows, n_cols), health.RULE_NO_DATA, dtype=np.uint8)
    codes_of: List[np.ndarray] = []
    cell_quality = np.full((n_rows, n_cols), metrics.NO_DATA, dtype=np.uint8)
    has_data = np.zeros((n_rows, n_cols), dtype=bool)
    # Rows logged at the same steps (most of a run's) are laid out together, a block of rows at once.
    for idx, rdatas in _same_steps(rows):
        own = rdatas[0].table.steps
        # The rows' steps inside the window (a row's steps are ascending, and among the window's union):
        # a slice, so a zoom's answer looks at the window's steps of each row, not at all of them.
        if whole:
            keep = slice(None)
        elif n_cols:
            keep = slice(int(np.searchsorted(own, steps[0], side="left")),
                         int(np.searchsorted(own, steps[-1], side="right")))
        else:
            keep = slice(0, 0)
        cols = np.searchsorted(steps, own[keep])
        at, shape = np.ix_(idx, cols), (len(idx), len(cols))
        has_data[at] = True
        status[at] = np.array([r.health.status[keep] for r in rdatas], dtype=np.uint8).reshape(shape)
        rules[at] = np.array([r.health.rule_codes[keep] for r in rdatas], dtype=np.uint8).reshape(shape)
        if metric in metrics.DERIVED:
            # Computed once for the block's rows, values and quality: a row at a time costs numpy calls per row.
            block = metrics.stack_tables([r.table for r in rdatas], only=metrics.DERIVED_FROM)
            if block.has(metric):
                block.values[metric], block.quality[metric] = metrics.derived(block, metric)
            values[at] = block.get(metric)[:, keep]
            codes = metrics.shown_quality(block, metric, (slice(None), keep))
        else:
            values[at] = np.array([(r.health.score if metric == "health" else r.table.get(metric))[keep]
                                   for r in rdatas], dtype=np.float64).reshape(shape)
            codes = (metrics.shown_qualities([r.table for r in rdatas], metric, keep).reshape(shape)
                     if metric != "health" else _health_quality(rdatas, keep, nonfinite=True))
        # The codes present, by counting (np.unique sorts a copy of every cell).
        codes_of.append(np.flatnonzero(np.bincount(codes.ravel())).astype(np.uint8))
        cell_quality[at] = codes
    return _Grid(values, status, rules, cell_quality, has_data, codes_of)


def _span_indices(spans: Spans, n: int) -> np.ndarray:
    """The ascending distinct indices below `n` that inclusive `spans` name (those past `n` are dropped)."""
    keep = np.zeros(n, dtype=bool)
    for a, b in spans:
        keep[min(a, n):min(b, n - 1) + 1] = True
    return np.flatnonzero(keep)


def _worst(status: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per row, its worst status and in how many columns it has it (0, 0 for a row without columns)."""
    if status.shape[1] == 0:
        zero = np.zeros(len(status), dtype=np.int64)
        return zero, zero
    worst = status.max(axis=1)
    return worst, np.sum(status == worst[:, None], axis=1)


def fold_pick(values: np.ndarray, status: np.ndarray, metric: str) -> np.ndarray:
    """Per column, which of a block's member rows (model order) is worst, as the tab folds a block:
    the highest status, then a value over none, then the lowest health score or the highest metric,
    then the first. `values` as sent (rounded; NaN for none)."""
    top = status == status.max(axis=0)
    valued = top & np.isfinite(values)
    score = np.where(valued, -values if metric == "health" else values, -np.inf)
    best = score.max(axis=0)
    candidates = np.where(valued.any(axis=0), valued & (score == best), top)
    return candidates.argmax(axis=0)


@dataclasses.dataclass
class RowSummary:
    """Of every row of a heatmap: its values as sent (rounded; NaN for none), the blocks (names in order
    of their first row, and each one's rows), and what a row window's answer says of every row."""
    sent_values: np.ndarray
    block_names: List[str]
    members: Dict[str, np.ndarray]
    fields: dict


def sent_values(values: np.ndarray, layout: str) -> np.ndarray:
    """`values` as a reader of an answer in `layout` gets them: rounded to `VALUE_DIGITS` decimals
    (rows) or through `top24` (compact); NaN for none, as for an infinity (the tab draws neither)."""
    out = rounded(values) if layout == LAYOUT_ROWS else from_top24(top24(values))
    out[~np.isfinite(out)] = np.nan
    return out


def row_summary(sent: np.ndarray, status: np.ndarray, quality: np.ndarray,
                row_blocks: Sequence[Optional[str]]) -> RowSummary:
    """Each row's and block's worst status in the window (the tab places, sorts and marks rows without
    their cells), and the colour scale's ends over every row (rows arriving later keep their colours).
    `sent`: the values as the answer sends them (`sent_values`), so the server folds as the tab does;
    `quality`: the cells' quality codes."""
    n_cols = status.shape[1]
    sent_values = sent
    groups = _group_by(row_blocks, lambda b: b)
    names = [b for b in groups if b is not None]
    members = {b: np.array(groups[b], dtype=np.int64) for b in names}
    folded_status = np.array([status[members[b]].max(axis=0) for b in names],
                             dtype=np.uint8).reshape(len(names), n_cols)
    worst, worst_columns = _worst(status)
    block_worst, block_worst_columns = _worst(folded_status)
    # A value of the finite part of a tensor that held NaN/Inf (painted as NaN) is no end of the scale:
    # the leftovers of a blown-up layer would squeeze every other cell into one colour. Nor is a value
    # not judged (painted so): an update ratio's lower bound of 0 would set the low end at nothing proven.
    shown = (np.isfinite(sent_values) & (status != health.NO_DATA) & (quality != metrics.FINITE_ONLY)
             & (quality != metrics.NOT_JUDGED))
    # The shown values gathered once; the positive ones among them (a second pass over the matrix costs more).
    finite = sent_values[shown]
    positive = finite[finite > 0]
    ends = lambda kept: [float(kept.min()), float(kept.max())] if kept.size else None
    return RowSummary(sent_values, names, members, {
        "row_worst": worst.tolist(), "row_worst_columns": worst_columns.tolist(),
        "block_names": names, "block_worst": block_worst.tolist(),
        "block_worst_columns": block_worst_columns.tolist(),
        "value_range": {"finite": ends(finite), "positive": ends(positive)},
    })


def row_window(cells: HeatmapCells, layout: str, rows: Spans, blocks: Spans) -> dict:
    """The cells of some rows and of some folded blocks, with `row_summary`'s fields of every row.

    The matrices hold the rows `rows_sent` names, then the blocks `blocks_sent` names (block
    numbers index `block_names`); a row of a block sent is not sent itself. A block's cell is its
    worst member's there (`fold_pick`), the member named in `block_members` by row number, its step
    offset that member's. More rows and blocks than `page_rows` fit: the first that do, and `page`
    says what to ask for next (`rows` and `blocks` as the parameters take them).
    """
    c, summary = cells, cells.summary(layout)
    n_rows, n_cols = c.status.shape
    names, row_blocks = summary.block_names, c.head["blocks"]
    block_ids = _span_indices(blocks, len(names))
    # A block asked for folded stands for its rows: the tab's first request, before it knows the
    # blocks, asks for a screenful of both and gets each row once, folded where it folds.
    folded = {names[k] for k in block_ids}
    row_ids = np.array([i for i in _span_indices(rows, n_rows) if row_blocks[i] not in folded], dtype=np.int64)
    fit = page_rows(n_cols, layout)
    page = None
    if len(row_ids) + len(block_ids) > fit:
        # Rows first, then blocks, as the matrices hold them: what is left is the next answer's ask.
        blocks_fit = max(0, fit - len(row_ids))
        page = {"max_cells": MAX_CELLS[layout], "rows_total": n_rows,
                "rows_span": [int(row_ids[0]), int(row_ids[min(fit, len(row_ids)) - 1])] if len(row_ids) else None,
                "next": {"rows": spans_text(row_ids[fit:]), "blocks": spans_text(block_ids[blocks_fit:])}}
        row_ids, block_ids = row_ids[:fit], block_ids[:blocks_fit]
    # Per matrix row and column, the row whose cell it shows: a row's own, then each block's worst member.
    picked = [np.repeat(row_ids[:, None], n_cols, axis=1)]
    for k in block_ids:
        m = summary.members[names[k]]
        picked.append(m[fold_pick(summary.sent_values[m], c.status[m], c.head["metric"])][None, :])
    at_rows = np.concatenate(picked).astype(np.int64)
    at = (at_rows, np.broadcast_to(np.arange(n_cols), at_rows.shape))
    chosen_members = at_rows[len(row_ids):]
    return {
        **summary.fields,
        "rows_sent": row_ids.tolist(), "blocks_sent": block_ids.tolist(),
        **_cells(c.values[at], c.status[at], c.rules[at], c.quality[at], None if c.offsets is None else c.offsets[at],
                 layout),
        "block_members": (chosen_members.ravel() if layout == LAYOUT_COMPACT else chosen_members).tolist(),
        **({"page": page} if page else {}),
    }


def bin_columns(steps: np.ndarray, columns: int, start: Optional[int] = None,
                end: Optional[int] = None) -> np.ndarray:
    """The bin of each of ascending `steps`: `columns` bins of equal width in steps, as the tab's axis
    places them (so a bin is about a pixel wide); empty bins are dropped, so at most `columns` remain.
    The bins divide the window `start`..`end` where given, else the steps' own ends: runs of different
    lengths asked for one window and budget are binned alike, their columns at the same steps."""
    lo = float(steps[0]) if start is None else float(start)
    hi = float(steps[-1]) if end is None else float(end)
    # As doubles: int64 differences of TensorBoard's steps can overflow.
    offset = steps.astype(np.float64) - lo
    span = (hi - lo) or 1.0
    return np.minimum((offset / span * columns).astype(np.int64), columns - 1)


def bin_starts(which: np.ndarray) -> np.ndarray:
    """The first column of each bin, `which` (ascending) naming each column's bin."""
    return np.flatnonzero(np.concatenate(([True], np.diff(which) > 0)))


def worst_per_bin(status: np.ndarray, score: np.ndarray, which: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per bin of columns, its first column, and per row the column of its worst cell.

    Worst: the highest status, then the highest `score` (the lowest health score, the
    most extreme value), then the earliest. `which` (ascending) names each column's bin.
    Over whole arrays: one key per cell, its maximum per bin by `reduceat`, and the
    first column reaching it by a second `reduceat` of column indices.
    """
    first = bin_starts(which)
    counts = np.diff(np.append(first, len(which)))
    # Status dominates: the score is squashed into [0, 1) first, NaN (no value) to 0.
    squashed = np.nan_to_num(np.arctan(score) / np.pi + 0.5, nan=0.0)
    key = status.astype(np.float64) * 2.0 + squashed
    best = np.maximum.reduceat(key, first, axis=1)
    at_best = key == np.repeat(best, counts, axis=1)
    cols = np.where(at_best, np.arange(len(which), dtype=np.int32)[None, :], np.int32(len(which)))
    return first, np.minimum.reduceat(cols, first, axis=1)


def _extremeness(values: np.ndarray, metric: str) -> np.ndarray:
    """How far each value lies from its row's median in the window, in decades for a log metric;
    infinite for an infinite value, NaN where there is none."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log10(np.abs(values)) if metric in metrics.LOG_METRICS else np.array(values)
    x[~np.isfinite(x)] = np.nan
    # The median of each row's finite values, as the middle of its sorted values (NaN sort last).
    counts = np.sum(np.isfinite(x), axis=1)
    ordered = np.sort(x, axis=1)
    mid = np.clip((counts - 1) // 2, 0, None)
    median = ordered[np.arange(len(x)), mid] if x.shape[1] else np.zeros(len(x))
    dist = np.abs(x - np.nan_to_num(median)[:, None])
    return np.where(np.isinf(values), np.inf, dist)


def rounded(values: np.ndarray, digits: int = VALUE_DIGITS) -> np.ndarray:
    """Values rounded to `digits` significant digits, as the doubles nearest those decimals,
    so JSON writes them short ("0.8123", not 17 digits)."""
    out = np.array(values, dtype=np.float64)
    finite = np.isfinite(out) & (out != 0)
    x = out[finite]
    exponent = (digits - 1 - np.floor(np.log10(np.abs(x)))).astype(np.int64)
    # Powers of ten are exact doubles up to 10**22: scale up by dividing, down by multiplying,
    # so the result is the double nearest the rounded decimal.
    up = 10.0 ** np.clip(exponent, 0, 22)
    down = 10.0 ** np.clip(-exponent, 0, 22)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.round(x * up / down) * down / up
    # Beyond (below 1e-19 or above 1e25, rare): through Python's own formatting, one by one.
    far = (np.abs(exponent) > 22) | ~np.isfinite(y)
    y[far] = [float(f"{v:.{digits}g}") for v in x[far]]
    out[finite] = y
    return out


def _step_offsets(steps: np.ndarray, first: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """Per cell, its step minus its column's first step: integers, or decimal strings where
    a double would not hold them exactly (a bin wider than 2**53 steps)."""
    if pick.size == 0 or float(steps[-1]) - float(steps[0]) < 2.0 ** 53:
        return steps[pick] - steps[first][None, :] if pick.size else pick
    exact = steps.astype(object)
    return (exact[pick] - exact[first][None, :]).astype(str)


def _cells(values: np.ndarray, status: np.ndarray, rules: np.ndarray, quality: np.ndarray,
           offsets: Optional[np.ndarray], layout: str) -> dict:
    """The cells of a heatmap answer: matrices of lists, or in the compact layout `compact_cells`.
    `rules`: codes of `health.rule_names`."""
    if layout == LAYOUT_COMPACT:
        return compact_cells(values, status, rules, quality, offsets)
    names = health.rule_names()
    # Written a row at a time (`jsontext.Rows`): a full-resolution heatmap's cells as lists take hundreds of MB.
    out = {
        "values": jsontext.Rows(nullable(rounded(row)) for row in values),
        "status": jsontext.Rows(row.tolist() for row in status),
        "rules": jsontext.Rows(names[row].tolist() for row in rules),
        # Per cell, an index into quality_names: the tab's tooltip says exact or estimated.
        "quality_cells": jsontext.Rows(row.tolist() for row in quality),
    }
    if offsets is not None:
        out["step_offsets"] = jsontext.Rows(row.tolist() for row in offsets)
    return out


def compact_cells(values: np.ndarray, status: np.ndarray, rules: np.ndarray, quality: np.ndarray,
                  offsets: Optional[np.ndarray] = None, rule_names: Optional[Sequence[Optional[str]]] = None) -> dict:
    """The heatmap's cells in few bytes that a browser reads fast, every matrix row after row.

    A matrix has few distinct (status, quality, rule) triples: `cell_kinds` lists them and
    `cells` names each cell's, one byte per cell (two, little-endian, past 256 triples:
    `cell_bytes`) in base64. `values` is base64 of 3 bytes a cell (`top24`, `value_encoding`),
    `step_offsets` when binned base64 of `step_offset_bytes` bytes a cell (`packed_offsets`).
    About 5.3 bytes a cell (6.7 binned) against 12-16, whatever the values' digits.
    `rules` are codes into `rule_names` (`health.rule_names()` when None), whose first two are None
    (no data) and "" (ok).
    """
    table = health.rule_names() if rule_names is None else rule_names
    flat_rules = rules.ravel()
    # The names in the order the cells first name them (after None and ""), whatever their codes:
    # the answer lists its kinds the same way whichever rule was given a code first.
    named = np.flatnonzero(flat_rules > health.RULE_OK)
    present, first = np.unique(flat_rules[named], return_index=True)
    in_order = present[np.argsort(first)]
    renumber = np.zeros(len(table), dtype=np.int32)
    renumber[health.RULE_OK] = 1
    renumber[in_order] = np.arange(2, 2 + len(in_order))
    names = [None, ""] + [table[int(c)] for c in in_order]
    key = (renumber[flat_rules] * 8 + quality.ravel()) * 8 + status.ravel()
    # The triples present, ascending, and each cell's place among them, as np.unique(key,
    # return_inverse=True) gives them, by counting: no sorted copies of a million-cell key.
    kinds = np.flatnonzero(np.bincount(key)) if key.size else key
    wide = len(kinds) > 256
    place = np.zeros(int(kinds[-1]) + 1 if len(kinds) else 0, dtype="<u2" if wide else np.uint8)
    place[kinds] = np.arange(len(kinds))
    codes = place[key]
    flat_values = np.asarray(values, dtype=np.float64).ravel()
    out = {
        "cell_kinds": [[int(k % 8), int(k // 8 % 8), names[int(k // 64)]] for k in kinds],
        "cells": base64.b64encode(codes.tobytes()).decode("ascii"),
        "cell_bytes": 2 if wide else 1,
        # A metric's table holds NaN where it has no value: sent as none, as the rows layout's null.
        "values": base64.b64encode(top24_bytes(top24(flat_values, np.isnan(flat_values)))).decode("ascii"),
        "value_encoding": VALUE_ENCODING,
    }
    if offsets is not None:
        packed, width = packed_offsets(offsets)
        out.update({"step_offsets": base64.b64encode(packed).decode("ascii"), "step_offset_bytes": width})
    return out


def top24(values: np.ndarray, none: Optional[np.ndarray] = None) -> np.ndarray:
    """Per double, the top 24 bits of its IEEE 754 bits (sign, 11 bits of exponent, 12 of mantissa), as
    uint32 codes rounded to the nearest (ties to even): 13 significant bits, over float64's whole
    exponent range (1e-300 stays 1e-300, subnormals included). Where `none` (a mask) says a cell has no
    value, `TOP24_NULL`; NaN is `TOP24_NAN`, infinities stay infinities, finite values stay finite.

    Rounding the bit patterns as integers rounds the doubles: a carry out of the mantissa is the next
    power of two.
    """
    x = np.ascontiguousarray(values, dtype=np.float64)
    bits = x.view(np.uint64)
    code = bits >> np.uint64(40)
    low = bits & np.uint64((1 << 40) - 1)
    half = np.uint64(1 << 39)
    code = code + ((low > half) | ((low == half) & ((code & np.uint64(1)) == 1))).astype(np.uint64)
    code = code.astype(np.uint32)
    magnitude = code & np.uint32(0x7FFFFF)
    code = np.where(np.isfinite(x) & (magnitude > TOP24_MAX_FINITE),
                    (code & np.uint32(0x800000)) | np.uint32(TOP24_MAX_FINITE), code)
    code = np.where(np.isnan(x), np.uint32(TOP24_NAN), code)
    if none is not None:
        code = np.where(none, np.uint32(TOP24_NULL), code)
    return code.astype(np.uint32)


def top24_bytes(codes: np.ndarray) -> bytes:
    """`top24` codes as 3 bytes each, most significant first (a double's first 3 bytes, big-endian)."""
    return np.ascontiguousarray(codes, dtype=">u4").view(np.uint8).reshape(-1, 4)[:, 1:].tobytes()


def from_top24(codes: np.ndarray) -> np.ndarray:
    """The doubles `top24` codes stand for (the lower 40 bits zero); NaN for `TOP24_NULL` too."""
    out = (np.asarray(codes, dtype=np.uint64) << np.uint64(40)).view(np.float64)
    return np.where(np.asarray(codes) == TOP24_NULL, np.nan, out)


def packed_offsets(offsets: np.ndarray) -> Tuple[bytes, int]:
    """Step offsets (never negative; decimal strings past 2**53) as little-endian unsigned integers of
    the fewest bytes (1, 2, 4 or 8) that hold the largest; (bytes, that width)."""
    flat = offsets.ravel()
    if flat.dtype.kind in "iu":
        exact = flat.astype(np.uint64)
    else:
        # Only a bin wider than 2**53 steps: a step difference of int64 steps fits 64 unsigned bits.
        exact = np.array([int(v) for v in flat.tolist()], dtype=np.uint64)
    top = int(exact.max()) if exact.size else 0
    width = next(w for w in (1, 2, 4, 8) if top < 1 << (8 * w))
    return exact.astype(f"<u{width}").tobytes(), width


# The run-level scalars the track above the heatmap draws, in this order.
TRACK_KINDS = (tags_lib.SCALAR_LOSS, tags_lib.SCALAR_GRAD_NORM, tags_lib.SCALAR_LR)
# What the track calls each kind.
TRACK_LABELS = {tags_lib.SCALAR_LOSS: "loss", tags_lib.SCALAR_GRAD_NORM: "global gradient norm",
                tags_lib.SCALAR_LR: "learning rate"}
# A longer series is sent as the first, lowest and highest point of each of this many bins of steps.
TRACK_BINS = 1000
# A positive series spanning this many times its smallest value is drawn on a log scale.
_LOG_SPAN = 10.0


def track(rd: RunData, bins: int = TRACK_BINS, start: Optional[int] = None, end: Optional[int] = None) -> dict:
    """The ``track`` route: the run's loss, global gradient norm and learning rate over steps.

    Each series' steps are real logged steps, exact. A series longer than
    2 x `bins` points keeps, per bin of steps, its first point and the points of
    its lowest and highest value, so a one-step spike is never averaged away;
    non-finite values are listed as spans of steps, and break the line as nulls.
    With a window [`start`, `end`] (the heatmap's zoom), a series sends the
    points inside it and its nearest point on either side, so the line reaches
    the window's edges, thinned to `bins` within the window: a zoom shows every
    point that a whole-run answer had to bin away. The scale stays the whole
    series', so a zoom does not switch it.
    """
    tags = [tag for kind in TRACK_KINDS for tag in rd.scalar_series if rd.scalar_kinds.get(tag) == kind]
    return {"run": rd.run, "series": [_track_series(rd, tag, bins, start, end) for tag in tags]}


def _track_series(rd: RunData, tag: str, bins: int, start: Optional[int], end: Optional[int]) -> dict:
    steps, values = (np.asarray(a) for a in rd.scalar_series[tag])
    values = values.astype(np.float64)
    finite = np.isfinite(values)
    positive = values[finite & (values > 0)]
    log = bool(finite.any() and len(positive) == finite.sum() and positive.max() >= _LOG_SPAN * positive.min())
    logged = len(steps)
    if start is not None or end is not None:
        first = 0 if start is None else max(0, int(np.searchsorted(steps, start, side="left")) - 1)
        last = logged if end is None else min(logged, int(np.searchsorted(steps, end, side="right")) + 1)
        steps, values, finite = steps[first:last], values[first:last], finite[first:last]
    keep = downsample(steps, values, bins)
    nonfinite = step_spans(steps, ~finite)
    axis = rd.scalar_axes.get(tag)
    return {
        "tag": tag, "kind": rd.scalar_kinds.get(tag), "label": TRACK_LABELS.get(rd.scalar_kinds.get(tag), tag),
        # Whether its steps are the heatmap's: "other" for a per-epoch scalar beside per-iteration layers.
        "axis": "unknown" if axis is None else "row" if axis else "other",
        "steps": steps[keep].tolist(), "steps_text": step_texts(steps[keep]),
        "values": nullable(values[keep]),
        "logged": int(logged), "binned": bool(len(keep) < len(steps)),
        "scale": "log" if log else "linear",
        "nonfinite": nonfinite, "nonfinite_text": [[step_text(a), step_text(b)] for a, b in nonfinite],
    }


def downsample(steps: np.ndarray, values: np.ndarray, bins: int) -> np.ndarray:
    """Indices of the points to draw: every point of a short series; of a long one, per bin of equal
    step width, its first point and those of its lowest and highest finite values (ascending)."""
    n = len(steps)
    if n <= 2 * bins:
        return np.arange(n)
    # Bins by step, not by index, so an irregular logging interval keeps its shape; as doubles,
    # since int64 differences of TensorBoard's steps can overflow.
    offset = steps.astype(np.float64) - float(steps[0])
    span = float(offset[-1]) or 1.0
    which = np.minimum((offset / span * bins).astype(np.int64), bins - 1)
    starts = np.flatnonzero(np.concatenate(([True], np.diff(which) > 0)))
    counts = np.diff(np.append(starts, n))
    low = np.where(np.isfinite(values), values, np.inf)
    high = np.where(np.isfinite(values), values, -np.inf)
    return np.unique(np.concatenate((starts, _first_equal(low, np.minimum.reduceat(low, starts), counts),
                                     _first_equal(high, np.maximum.reduceat(high, starts), counts))))


def _first_equal(values: np.ndarray, per_bin: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per bin (consecutive runs of `counts` entries), the index of its first entry equal to the bin's `per_bin`."""
    bin_of = np.repeat(np.arange(len(counts)), counts)
    hits = np.flatnonzero(values == per_bin[bin_of])
    _, first = np.unique(bin_of[hits], return_index=True)
    return hits[first]


def layer_roles(layer: Layer, role: Optional[str]) -> Dict[str, RoleData]:
    """The layer's roles, narrowed to ``role`` when given (an empty answer means the layer lacks it)."""
    return {name: r for name, r in layer.roles.items() if role is None or name == role}


def rows_at(roles: Mapping[str, RoleData], step: int) -> Dict[str, int]:
    """Per role, the row index of ``step`` in its metric table, for the roles that logged that step."""
    out = {}
    for name, rdata in roles.items():
        hits = np.nonzero(rdata.table.steps == step)[0]
        if len(hits):
            out[name] = int(hits[0])
    return out


UNDRAWABLE_HISTOGRAM = ("A histogram was logged at this step, but it cannot be drawn: its bucket edges are NaN or"
                        " Inf (the tensor held NaN or Inf values when it was summarised).")
PARTLY_DRAWABLE_HISTOGRAM = "Some of this histogram's buckets have NaN or Inf edges and are not drawn."
MALFORMED_HISTOGRAM = ("A tensor was logged at this step, but it is no histogram: {why}. It is not drawn, and the"
                       " step is no data.")


def _histogram(buckets: np.ndarray) -> Tuple[list, Optional[str]]:
    """A histogram's buckets as the metrics see them, for the detail panel to draw, and a note when
    buckets holding data (or every bucket) have NaN or Inf edges, which cannot be drawn, or when they
    are no histogram at all (`metrics.malformed`), which is not drawn either."""
    code = int(metrics.malformed(buckets[None, :, 0], buckets[None, :, 1], buckets[None, :, 2])[0])
    if code:
        return [], MALFORMED_HISTOGRAM.format(why=metrics.MALFORMED[code])
    # Empty, padded and degenerate buckets carry no data.
    keep = np.isfinite(buckets[:, 2]) & (buckets[:, 2] != 0)
    if len(buckets):
        # The same edges the metrics use, so both loaders draw the same histogram.
        lo, hi = metrics.written_range(buckets[None, :, 0], buckets[None, :, 1])
        left, right = metrics.clamp_to_range(buckets[:, 0], buckets[:, 1], lo[0], hi[0])
        buckets = np.stack([left, right, buckets[:, 2]], axis=1)
    # A tensor with NaN or Inf values gets NaN or Inf edges from TensorFlow's histogram: no place on an axis.
    bad_edges = ~(np.isfinite(buckets[:, 0]) & np.isfinite(buckets[:, 1]))
    drawn = keep & ~bad_edges
    note = None
    if len(buckets) and not drawn.any() and ((bad_edges & keep).any() or bad_edges.all()):
        note = UNDRAWABLE_HISTOGRAM
    elif (bad_edges & keep).any():
        note = PARTLY_DRAWABLE_HISTOGRAM
    return [nullable(b) for b in buckets[drawn]], note


def role_cell(rdata: RoleData, index: int, buckets: Optional[np.ndarray],
              shown: Optional[Tuple[int, Optional[float]]] = None, own: bool = False,
              held: Optional[dict] = None, rule_read: Optional[dict] = None) -> dict:
    """One role of a ``cell`` answer: status, metrics and histogram at one row of its table.

    ``shown``: the histogram's own step and, when it is on another step axis
    than the row, the seconds it was written after the row's step (see
    `RoleData.histogram_step_at`). ``own``: the histogram is the one the row's
    gradhealth summary carries (format version 2). ``held``: at an ok cell where a cell rule fired,
    why that is no warning (`findings.held`). ``rule_read``: what the cell rule that fired there read
    (`findings.rule_read`).
    """
    table = rdata.table
    names = [m for m in metrics.METRICS if table.has(m)]
    has_histogram = buckets is not None and shown is not None
    histogram, histogram_note = _histogram(buckets) if buckets is not None else (None, None)
    return {
        "tags": rdata.tags,
        "source": rdata.source,
        "status": health.STATUS_NAMES[int(rdata.health.status[index])],
        "score": nullable(rdata.health.score[index:index + 1])[0],
        # The finding kind that set the status; at an ok cell, one whose cell rule fired there (see "held").
        "rule": rdata.health.rule_at(index),
        # At an ok cell where a cell rule fired: its kind, the logged steps in a row it held, the steps its
        # finding needs, the note covering it (or null) and a sentence saying so; null elsewhere.
        "held": held,
        # What the cell rule of that kind which fired here read: its statistic, value (with its quality) and
        # threshold, {"kind", "metric", "abs", "value", "quality", "threshold", "limit", "side"}; null where
        # none of the kind's cell rules holds here. The tab's hover names this statistic, not the kind's chart's.
        "rule_read": rule_read,
        "metrics": {
            name: {"value": nullable(table.get(name)[index:index + 1])[0],
                   # "finite_only" at a step whose tensor held NaN or Inf: of its finite values alone.
                   "quality": metrics.QUALITY_NAMES[int(metrics.shown_quality(table, name)[index])]}
            for name in names
        },
        "histogram": histogram,
        # Why a histogram that was logged is not (or not wholly) drawn: NaN or Inf bucket edges, or buckets
        # that are no histogram (negative counts, ...); else None.
        "histogram_note": histogram_note,
        # "octaves": gradhealth's own buckets of |x|, each a factor of 2 wide (the tab spreads them onto
        # equal bins to draw them); "linear": a logged histogram's own buckets.
        "histogram_buckets": ("octaves" if own else "linear") if has_histogram else None,
        # The histogram's step on its own axis: the row's step, or, for a histogram
        # logged on another axis (per epoch), the one written nearest in time.
        "histogram_tag": (rdata.own_tag if own else rdata.histogram_tag) if has_histogram else None,
        "histogram_step": shown[0] if has_histogram else None,
        "histogram_step_text": step_text(shown[0]) if has_histogram else None,
        "histogram_axis": ("other" if rdata.histogram_other_axis else "row") if has_histogram else None,
        "histogram_seconds_from_step": shown[1] if has_histogram and rdata.histogram_other_axis else None,
        # No histogram here, though the row has one at other steps (grad_hist every 10 steps beside
        # exact statistics at every step): its tag and nearest kept steps before and after; else None.
        "histogram_elsewhere": None if has_histogram else _histogram_elsewhere(rdata, int(table.steps[index])),
        # The row's kept steps against its writer's logged steps (they differ after sampling).
        "steps_kept": int(len(table.steps)),
        "steps_logged": _steps_logged(rdata),
        "steps_logged_at_least": bool(rdata.logged_at_least),
    }


def _histogram_elsewhere(rdata: RoleData, step: int) -> Optional[dict]:
    """Where the row's histogram tag was logged, nearest to `step`, when it was not logged there."""
    before, after = rdata.histogram_steps_around(step)
    if rdata.histogram_tag is None or (before is None and after is None):
        return None
    return {"tag": rdata.histogram_tag, "before": before, "before_text": None if before is None else step_text(before),
            "after": after, "after_text": None if after is None else step_text(after)}


def cell(rd: RunData, layer: Layer, step: int, roles: Mapping[str, dict]) -> dict:
    """The ``cell`` route: one layer at one step, with each role's `role_cell`."""
    return {"run": rd.run, "layer": layer.name, "group": layer.group, "kind": layer.kind, "step": step,
            "step_text": step_text(step), "roles": dict(roles)}


def role_series(rdata: RoleData, metric: str) -> dict:
    """One role's series of one metric (or the health score) over its logged steps."""
    if metric == "health":
        values, quality = rdata.health.score, _health_quality([rdata])[0]
    else:
        values, quality = rdata.table.get(metric), metrics.shown_quality(rdata.table, metric)
    return {
        "steps": rdata.table.steps.tolist(),
        "steps_text": step_texts(rdata.table.steps),
        "values": nullable(values),
        "quality": [metrics.QUALITY_NAMES[q] for q in quality],
        "status": rdata.health.status.tolist(),
    }


def series(rd: RunData, layer: Layer, metric: str, roles: Mapping[str, RoleData],
           thresholds: Mapping[str, List[dict]]) -> dict:
    """The ``series`` route: one layer's metric per role, with the threshold lines per role."""
    return {"run": rd.run, "layer": layer.name, "metric": metric,
            "series": {name: role_series(rdata, metric) for name, rdata in roles.items()},
            "status_names": list(health.STATUS_NAMES),
            "thresholds": {name: thresholds[name] for name in roles}}


def role_distribution(rdata: RoleData, by_step: Mapping[int, np.ndarray], own: bool) -> dict:
    """One role's distribution over steps: the `distribution_lib.PERCENTILES` of its histogram at each step.

    ``by_step``: the histograms of the row's histogram tag (on its own step axis,
    `axis` "other" when that is not the row's) or of its gradhealth summaries.
    """
    steps = np.array(sorted(by_step), dtype=np.int64)
    values = np.zeros((0, len(distribution_lib.PERCENTILES)))
    if len(steps):
        h = metrics.stack_histograms(steps, np.zeros(len(steps)), [by_step[int(s)] for s in steps])
        values = distribution_lib.percentiles(h)
        # A step whose buckets are no histogram has no distribution, as it has no metrics.
        values[metrics.malformed(h.left, h.right, h.count) > 0] = np.nan
    source = None if not len(steps) else "gradhealth" if own else "histogram"
    axis = "other" if source == "histogram" and rdata.histogram_other_axis else "row"
    bad, count = _nonfinite_at(rdata, steps) if axis == "row" else (np.full(len(steps), np.nan),) * 2
    return {
        "source": source,
        "axis": axis,
        "steps": steps.tolist(),
        "steps_text": step_texts(steps),
        "values": [nullable(row) for row in values],
        # Per step, how many of the tensor's values were NaN or Inf, and of how many: a histogram counts
        # finite values alone, so its percentiles there are not the tensor's. Null where it held none
        # (or on another step axis than the row's, where its steps are not the row's).
        "nonfinite": nullable(bad),
        "nonfinite_of": nullable(count),
    }


def _nonfinite_at(rdata: RoleData, steps: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per step of `steps` (on the row's axis): its table's NaN/Inf count and value count where the
    tensor held NaN or Inf there, NaN elsewhere (no such step in the table, or none held)."""
    table = rdata.table
    bad = np.full(len(steps), np.nan)
    count = np.full(len(steps), np.nan)
    if not len(steps) or not len(table.steps):
        return bad, count
    at = np.minimum(np.searchsorted(table.steps, steps), len(table.steps) - 1)
    held = (table.steps[at] == steps) & metrics.nonfinite_steps(table)[at]
    bad[held] = table.get("nonfinite")[at][held]
    count[held] = table.get("count")[at][held]
    return bad, count


def distribution(rd: RunData, layer: Layer, roles: Mapping[str, dict]) -> dict:
    """The ``distribution`` route: one layer's percentiles over steps per role."""
    return {"run": rd.run, "layer": layer.name, "percentiles": list(distribution_lib.PERCENTILES),
            "distributions": dict(roles)}


def cli_sampling(sampling: Optional[dict], reads_all: str = "--all-steps reads every step") -> Optional[dict]:
    """The run's sampling note, with how the command reads every step (``reads_all``: report's
    ``--all-steps``; check reads every step unless ``--sampled``) as well."""
    if sampling is None:
        return None
    lo, hi = sampling["kept_min"], sampling["kept_max"]
    kept = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
    logged = f"{'at least ' if sampling['logged_at_least'] else ''}{sampling['logged']:,}"
    rows = sampling["rows"]
    message = (f"TensorBoard's sampling kept {kept} of {logged} logged steps in {rows} row{'s' if rows != 1 else ''}"
               f"; {reads_all} (tensorboard: {sampling['flag']})")
    return dict(sampling, cli_flag="--all-steps", message=message)


def cli_scalars_sampling(sampling: Optional[dict],
                         reads_all: str = "--all-steps reads every point") -> Optional[dict]:
    """The run-level scalars' sampling note, with how the command reads every point as well."""
    if sampling is None:
        return None
    # As the rows' note says it: the command's own flag, then TensorBoard's, named as TensorBoard's.
    return dict(sampling, cli_flag="--all-steps",
                message=f"{sampling['kept_text']}; {reads_all} (tensorboard: {sampling['flag']})")


def cli_run(summary: dict) -> dict:
    """A run in ``gradhealth report --format json``: the route's `run_summary`, layers by name only."""
    return {"run": summary["run"], "verdict_word": summary["verdict_word"], "verdict": summary["verdict"],
            "layers_in": summary["layers_in"],
            "layers": [layer["name"] for layer in summary["layers"]],
            "roles": summary["roles"], "steps_kept": summary["steps_kept"], "steps_logged": summary["steps_logged"],
            "last_step": summary["last_step"], "sampling": cli_sampling(summary["sampling"]),
            "scalars_sampling": cli_scalars_sampling(summary["scalars_sampling"]),
            "unclassified": summary["unclassified"], "unreadable": summary["unreadable"],
            "unreadable_steps": summary["unreadable_steps"], "not_judged": summary["not_judged"],
            "coverage_note": summary["coverage_note"], "stopped": summary["stopped"],
            # As in the `runs` route: the training many workers logged this run is a rank of, or None.
            "training": summary["training"]}


def cli_report(summaries: Sequence[dict], analyses: Sequence[Tuple[RunData, Sequence[finding.Finding]]]) -> dict:
    """``gradhealth report --format json``: the runs and every finding, run by run (as `findings_json`)."""
    return {"runs": [cli_run(s) for s in summaries],
            "findings": [f for rd, fs in analyses for f in findings_json(rd, fs)]}


# Sweep: one line per run, its hyperparameters and what they explain.

# Columns of a sweep line's status strip at most: a long run's steps are binned, each bin its worst status.
STRIP_BINS = 120
KIND_LABELS = {d.KIND: d.LABEL for d in detectors.DETECTORS}


def _first_layer(f: finding.Finding) -> Optional[str]:
    """The layer a finding reached first (its spans' earliest start), else its first named layer."""
    if f.spans:
        return min(f.spans, key=lambda name: (f.spans[name][0], f.layers.index(name) if name in f.layers else 0))
    return f.layers[0] if f.layers else None


def status_strip(rd: RunData, bins: int = STRIP_BINS) -> dict:
    """The worst cell status per step over every layer and role, binned to at most `bins` columns
    (each the worst of its steps, from its first step to its last, `last_steps`). Bins are equal
    stretches of steps, not of logged steps, as the tab places columns by step: a run logged at every
    one of its first 30 steps and every 100th after gives its first 30 steps one column, not half."""
    rows = [r for layer in rd.layers for r in layer.roles.values() if len(r.table.steps)]
    if not rows:
        return {"steps": [], "steps_text": [], "last_steps": [], "last_steps_text": [], "status": []}
    all_steps = np.concatenate([r.table.steps for r in rows])
    all_status = np.concatenate([np.asarray(r.health.status, dtype=np.uint8) for r in rows])
    steps, where = np.unique(all_steps, return_inverse=True)
    worst = np.zeros(len(steps), dtype=np.uint8)
    np.maximum.at(worst, where, all_status)
    last = steps
    if len(steps) > bins:
        # Floats place a step in its bin (steps past 2**53 may round across a bin edge: harmless);
        # the steps themselves stay exact.
        span = float(steps[-1] - steps[0]) + 1.0
        which = np.minimum(((steps - steps[0]).astype(np.float64) * (bins / span)).astype(np.int64), bins - 1)
        starts = np.flatnonzero(np.diff(which, prepend=-1))
        last = steps[np.append(starts[1:], len(steps)) - 1]
        worst, steps = np.maximum.reduceat(worst, starts), steps[starts]
    return {"steps": steps.tolist(), "steps_text": step_texts(steps), "last_steps": last.tolist(),
            "last_steps_text": step_texts(last), "status": worst.tolist()}


def _role_of(f: finding.Finding) -> Optional[str]:
    """The role whose heatmap shows a finding: its own, else the first it was gathered from; None for a
    finding on scalars alone."""
    return f.role or next(iter(f.role_points), None)


def _onset(f: finding.Finding) -> dict:
    """Where a sweep line says a finding starts: its first step on the layers' axis (which orders the
    line's kinds) and, for one told in its own step axis (an epoch's loss), that axis with its steps,
    as the finding's JSON has it, and the onset in its words ("epoch 3", else "step 120")."""
    return {"first_step": int(f.first_step), "first_step_text": step_text(f.first_step),
            "axis": None if f.axis is None else with_step_texts(f.axis.to_json()),
            "onset_text": f"step {int(f.first_step)}" if f.axis is None else f.axis.at(f.axis.first_step)}


def _kind_entry(f: finding.Finding, count: int) -> dict:
    return {"kind": f.kind, "label": KIND_LABELS.get(f.kind, f.kind), "severity": f.severity, **_onset(f),
            "layer": _first_layer(f), "count": count}


def _by_severity_then_onset(item: dict) -> tuple:
    return -finding.SEVERITY_RANK[item["severity"]], item["first_step"]


def sweep_row(rd: RunData, found: Sequence[finding.Finding]) -> dict:
    """One run's line in the sweep, without its hyperparameters (they come from other summaries):
    the worst finding (with the role whose heatmap shows it), each kind found with its worst severity
    and the onset and first layer of its findings at that severity (an info note earlier on does not
    set them), and the status strip."""
    summary_status = run_summary(rd, found)
    kinds: Dict[str, dict] = {}
    for kind in dict.fromkeys(f.kind for f in found):
        of_kind = [f for f in found if f.kind == kind]
        first = min(of_kind, key=lambda f: (-finding.SEVERITY_RANK[f.severity], f.first_step))
        kinds[kind] = _kind_entry(first, len(of_kind))
    by_badness = sorted(found, key=lambda f: (-finding.SEVERITY_RANK[f.severity], f.first_step))
    worst = by_badness[0] if by_badness else None
    # The heatmap to open on: the worst finding's role, else (a loss turned NaN) the worst that has one.
    role = next((r for r in map(_role_of, by_badness) if r is not None), None)
    return {
        "run": rd.run,
        "worst_severity": summary_status["worst_severity"],
        "worst_status": summary_status["worst_status"],
        "worst": None if worst is None else {
            "kind": worst.kind, "label": KIND_LABELS.get(worst.kind, worst.kind), "severity": worst.severity,
            "message": worst.message, **_onset(worst), "layer": _first_layer(worst), "role": role},
        # Most severe first, then by onset.
        "kinds": sorted(kinds.values(), key=_by_severity_then_onset),
        "not_judged": summary_status["not_judged"],
        # As in `runs`, so the sweep words a run's badge as the run list does.
        "gradients_judged": summary_status["gradients_judged"],
        "verdict_word": summary_status["verdict_word"],
        "sampling": summary_status["sampling"],
        "scalars_sampling": summary_status["scalars_sampling"],
        "last_step": rd.last_step,
        "last_step_text": step_text(rd.last_step),
        "strip": status_strip(rd),
    }


def sweep_trial(trial: str, parts: Sequence[dict]) -> dict:
    """One line for the runs of one trial (Keras' ``X/train`` and ``X/validation``), from their `sweep_row`s,
    the first the run the line opens: every kind found in any part (its worst severity, the earliest onset
    at that severity, with the run it was found in), the worst finding and status of all, the strip of the first part that has one, and
    only what no part could judge."""
    kinds: Dict[str, dict] = {}
    for part in parts:
        for k in part["kinds"]:
            entry = kinds.get(k["kind"])
            if entry is None:
                kinds[k["kind"]] = {**k, "run": part["run"]}
                continue
            count = entry["count"] + k["count"]
            # The part where the kind is worst sets the onset; among equals, the earlier.
            if _by_severity_then_onset(k) < _by_severity_then_onset(entry):
                entry.update(k, run=part["run"])
            entry["count"] = count
    found = [(p["run"], p["worst"]) for p in parts if p["worst"] is not None]
    worst = min(found, key=lambda rw: (-finding.SEVERITY_RANK[rw[1]["severity"]], rw[1]["first_step"]), default=None)
    severities = [p["worst_severity"] for p in parts if p["worst_severity"] is not None]
    # A part without layers (validation scalars) has no status of its own, only its findings' severity.
    statuses = [p["worst_status"] for p in parts] + [s for s in severities if s in health.STATUS_NAMES]
    unjudged = set.intersection(*(set(p["not_judged"]) for p in parts))
    worst_sev = max(severities, key=finding.SEVERITY_RANK.__getitem__, default=None)
    sampling = next((p["sampling"] for p in parts if p["sampling"] is not None), None)
    scalars_sampling = next((p["scalars_sampling"] for p in parts if p["scalars_sampling"] is not None), None)
    last = max((p for p in parts if p["last_step"] is not None), key=lambda p: p["last_step"], default=parts[0])
    return {
        **parts[0],
        "trial": trial,
        "parts": [p["run"] for p in parts],
        "worst_severity": worst_sev,
        "worst_status": max(statuses, key=health.STATUS_NAMES.index),
        # The line opens the first part: the role to open on is that part's.
        "worst": None if worst is None else {**worst[1], "run": worst[0],
                                             "role": (parts[0]["worst"] or {}).get("role")},
        "kinds": sorted(kinds.values(), key=_by_severity_then_onset),
        "not_judged": [k for k in parts[0]["not_judged"] if k in unjudged],
        "gradients_judged": any(p["gradients_judged"] for p in parts),
        # The trial in the run list's words, judged over its parts together.
        "verdict_word": verdict_word(worst_sev, sorted(unjudged), any(p["strip"]["steps"] for p in parts),
                                     sampling, scalars_sampling),
        "sampling": sampling,
        "scalars_sampling": scalars_sampling,
        "last_step": last["last_step"],
        "last_step_text": last["last_step_text"],
        "strip": next((p["strip"] for p in parts if p["strip"]["steps"]), parts[0]["strip"]),
    }


def sweep(rows: Sequence[dict], sessions: Mapping[str, object], types: Mapping[str, str],
          splits: Sequence[dict]) -> dict:
    """The ``sweep`` route and ``report --by-hparams``: the hyperparameter columns, a line per run or trial
    (`sweep_row`, `sweep_trial` or `failed_run`, with its hyperparameters and where they were read) ordered
    by their hyperparameters' values as a person orders them (numbers by size, text naturally), then by
    name (`sweep.run_key`), and the clear splits."""
    runs_out = []
    for row in rows:
        session = sessions.get(row["run"])
        runs_out.append({**row, "hparams": dict(sorted(session.values.items())) if session is not None else {},
                         "hparams_from": None if session is None else
                         {"source": session.source, "run": session.source_run}})
    runs_out.sort(key=lambda r: (tuple(sweep_lib.natural_key(r["hparams"].get(name)) for name in types),
                                 sweep_lib.run_key(r.get("trial", r["run"]))))
    return {"hparams": [{"name": name, "type": kind} for name, kind in types.items()],
            "runs": runs_out, "splits": list(splits)}
