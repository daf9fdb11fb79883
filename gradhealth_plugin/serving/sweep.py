"""The sweep's answer, shared by the ``sweep`` route and ``gradhealth report --by-hparams``.

Each run's line comes from the analyzer's cache (built once per data version of
the run), the hyperparameters from the HParams plugin's listings, and the
splits are computed again only when some run's hyperparameters or findings
changed: asking for the sweep of an unchanged logdir analyses nothing.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Optional, Sequence

from tensorboard import context as tb_context
from tensorboard import errors

from ..analysis import sweep as sweep_lib
from ..reading import hparams as hparams_lib
from . import analyzer as analyzer_lib
from . import responses

logger = logging.getLogger(__name__)


# Keras' TensorBoard callback writes a fit's training into X/train and its validation scalars into
# X/validation: one trial, one line.
TRAIN, VALIDATION = "train", "validation"


def trials(names: Sequence[str]) -> Dict[str, List[str]]:
    """Trial name -> its runs, training first, for each ``X/validation`` listed beside an ``X/train``."""
    known = set(names)
    out = {}
    for run in names:
        head, sep, tail = run.rpartition("/")
        if tail == VALIDATION and head + sep + TRAIN in known:
            out[head or "."] = [head + sep + TRAIN, run]
    return out


def answer(analyzer: analyzer_lib.Analyzer, ctx: tb_context.RequestContext, experiment_id: str,
           runs: Optional[Sequence[str]] = None) -> dict:
    """`responses.sweep` over the experiment's runs (or `runs`); a run that fails is a line with its error,
    left out of the splits; an ``add_hparams`` sub-run attached to its parent is no line of its own, and
    Keras' ``X/train`` and ``X/validation`` are one line, trial X (when neither failed)."""
    sessions = analyzer.hparams(ctx, experiment_id)
    carriers = hparams_lib.carriers(sessions)
    names = [r for r in (analyzer.list_runs(ctx, experiment_id) if runs is None else runs) if r not in carriers]
    versions = analyzer.versions(ctx, experiment_id)
    rows: Dict[str, dict] = {}
    for run in names:
        try:
            rows[run] = analyzer.sweep_row(ctx, experiment_id, run, responses.sweep_row, versions.get(run))
        except errors.NotFoundError:
            continue  # removed between the listing and its read
        except analyzer_lib.RunFailed as e:
            rows[run] = responses.failed_run(run, str(e).partition(": ")[2] or str(e))
        except Exception as e:  # noqa: BLE001 - one run's failure must not take the sweep down
            logger.exception("gradhealth: the sweep line of run %r failed", run)
            rows[run] = responses.failed_run(run, analyzer_lib.failure(run, "summarised", e))
    for trial, parts in trials(list(rows)).items():
        if all("error" not in rows[p] for p in parts):
            rows[parts[0]] = responses.sweep_trial(trial, [rows[p] for p in parts])
            del rows[parts[1]]
    judged = []
    for row in rows.values():
        if "error" in row:
            continue
        session = sessions.get(row["run"])
        kinds = {k["kind"] for k in row["kinds"]}
        if row["worst_severity"] in ("warn", "critical"):
            kinds.add(sweep_lib.UNHEALTHY)
        # A run without layers (Keras' validation scalars alone) says nothing of its training's health.
        blind = set(row["not_judged"]) | ({sweep_lib.UNHEALTHY} if row["worst_status"] == "no_data" else set())
        judged.append(sweep_lib.SweepRun(row["run"], session.values if session is not None else {}, kinds, blind))
    splits = analyzer.splits(judged, {**responses.KIND_LABELS, sweep_lib.UNHEALTHY: sweep_lib.UNHEALTHY_LABEL})
    return responses.sweep(list(rows.values()), sessions, sweep_lib.hparam_types(judged),
                           [s.to_json() for s in splits])
