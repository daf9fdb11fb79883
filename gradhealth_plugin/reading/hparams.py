"""Hyperparameters of runs, read as TensorBoard's HParams plugin reads them.

A run's hyperparameters are the session start info of the ``hparams`` plugin's
summaries (written by ``hp.hparams``, ``hp.KerasCallback`` and PyTorch's
``SummaryWriter.add_hparams``), which the data provider lists with their
summary metadata: no tensor is read.

Where they are written differs from where the histograms are:

* ``hp.hparams`` in a custom loop writes them into the run itself;
* ``hp.KerasCallback(logdir)`` writes them into ``logdir`` while Keras's
  TensorBoard callback writes into ``logdir/train`` and ``logdir/validation``:
  a run takes the hyperparameters of its nearest ancestor, as the HParams
  plugin groups such runs into one session;
* ``add_hparams`` writes them into a sub-folder of the writer's run, named by
  a timestamp unless told otherwise, with only the metric scalars beside them:
  such a sub-run is attached to its parent run, and is no run of its own in a sweep.
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Dict, Iterable, Mapping, Optional, Set, Union

from tensorboard.plugins.hparams import metadata as hp_metadata

PLUGIN_NAME = hp_metadata.PLUGIN_NAME
SESSION_START_TAG = hp_metadata.SESSION_START_INFO_TAG

Value = Union[float, str, bool]


@dataclasses.dataclass(frozen=True)
class Session:
    """One run's hyperparameters and where they came from (``own``, ``parent`` or ``sub-run`` and its name)."""

    values: Dict[str, Value]
    source: str
    source_run: str


def parse_session_start(content: bytes) -> Optional[Dict[str, Value]]:
    """Name -> value of a session start info's hyperparameters; None when the content is not one.

    A value of none of the three kinds (an empty Value) is left out.
    """
    try:
        info = hp_metadata.parse_session_start_info_plugin_data(content)
    except Exception:  # noqa: BLE001 - crafted or foreign metadata: no hyperparameters, the run still counts
        return None
    out: Dict[str, Value] = {}
    for name, value in info.hparams.items():
        kind = value.WhichOneof("kind")
        if kind == "number_value":
            out[name] = float(value.number_value)
        elif kind == "string_value":
            out[name] = value.string_value
        elif kind == "bool_value":
            out[name] = bool(value.bool_value)
    return out


def parent_of(run: str) -> Optional[str]:
    """The run one folder up; TensorBoard names the logdir itself ".". None above that."""
    if run == ".":
        return None
    parent = posixpath.dirname(run)
    return parent or "."


def assign(data_runs: Iterable[str], sessions: Mapping[str, Dict[str, Value]],
           runs_with_data_of_their_own: Set[str]) -> Dict[str, Session]:
    """The hyperparameters of each data run: its own, else its nearest ancestor's, else an attached sub-run's.

    ``sessions``: run -> hyperparameters, for every run holding a session start info.
    ``runs_with_data_of_their_own``: runs with histograms or gradhealth summaries; a
    session run among them is a run of its own, never attached to another.
    Data runs with no hyperparameters anywhere are left out.
    """
    data_runs = list(data_runs)
    known = set(data_runs)
    # add_hparams sub-runs: a session run without data of its own, directly under a data run.
    # Several under one run (add_hparams called more than once): the last by name, which for
    # timestamp names is the latest.
    attached: Dict[str, str] = {}
    for run in sorted(sessions):
        parent = parent_of(run)
        if run not in runs_with_data_of_their_own and parent in known and parent not in sessions:
            attached[parent] = run
    out: Dict[str, Session] = {}
    for run in data_runs:
        if run in sessions:
            out[run] = Session(dict(sessions[run]), "own", run)
            continue
        ancestor = parent_of(run)
        while ancestor is not None and ancestor not in sessions:
            ancestor = parent_of(ancestor)
        if ancestor is not None:
            out[run] = Session(dict(sessions[ancestor]), "parent", ancestor)
        elif run in attached:
            out[run] = Session(dict(sessions[attached[run]]), "sub-run", attached[run])
    return out


def carriers(sessions: Mapping[str, Session]) -> Set[str]:
    """The sub-runs whose hyperparameters were attached to their parent run: no runs of their own in a sweep."""
    return {s.source_run for s in sessions.values() if s.source == "sub-run"}
