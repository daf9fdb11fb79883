"""One training logged by many workers: which runs are the ranks of one training.

The rule: runs are one training when their names are equal once every path part
that names a worker (a word among `RANK_WORDS` followed by a number, as in
``rank0``, ``worker_1``, ``gpu-3``, ``node1/gpu3``) has its number replaced by
``*``, and at least two runs share that name; a run's rank is those parts.
``watch(..., all_ranks=True)`` writes ``<log_dir>/rank<r>``: runs ``rank0``,
``rank1``, ... of the training ``rank*``, or ``exp/rank*`` under a logdir above it.

A name alone can match by chance (``gpu0/run`` and ``gpu1/run``: two trainings someone
named by device), so the runs a name groups are the ranks of one training only where
their data says they ran together (`ran_together`): the same layers, logged steps in
common, and first wall times within `START_TOLERANCE_S` of each other. `together` keeps
the largest such group of a name's runs; the others are trainings of their own.

`trainings`, `training_of` and `rank_name` are pure functions of the run names; `rank_facts`
is what `ran_together` needs of a run's data.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from .runs import RunData

# Ranks of one training start together: their first wall times lie within this many seconds (the ranks
# of a two-process gloo training start within a second; a rank may load its data a while longer).
START_TOLERANCE_S = 300.0

# Words that name one process of a distributed training, before its number.
RANK_WORDS = ("rank", "local_rank", "worker", "node", "gpu", "proc", "process", "replica", "device")
_RANK_PART = re.compile(r"(?P<word>" + "|".join(sorted(RANK_WORDS, key=len, reverse=True)) + r")(?P<sep>[_-]?)"
                        r"(?P<number>[0-9]+)", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class RankName:
    """A run name read as one worker of a training."""

    training: str  # the name with every rank number replaced by "*": "exp/rank*"
    rank: str  # the parts naming the worker, joined by "/": "rank1", "node1/gpu3"
    key: Tuple[int, ...]  # their numbers, which order the ranks


@dataclasses.dataclass(frozen=True)
class Training:
    """Runs of one training, lowest rank first."""

    name: str
    runs: Tuple[str, ...]
    ranks: Tuple[str, ...]  # each run's rank, in the same order

    def rank_of(self, run: str) -> str:
        return self.ranks[self.runs.index(run)]


def rank_name(run: str) -> Optional[RankName]:
    """The run as a worker of a training, or None when no part of its name names a worker."""
    parts = run.split("/")
    ranks: List[str] = []
    key: List[int] = []
    for i, part in enumerate(parts):
        m = _RANK_PART.fullmatch(part)
        if m is None:
            continue
        ranks.append(part)
        key.append(int(m.group("number")))
        parts[i] = f"{m.group('word')}{m.group('sep')}*"
    if not ranks:
        return None
    return RankName("/".join(parts), "/".join(ranks), tuple(key))


def trainings(runs: Iterable[str]) -> Dict[str, Training]:
    """Every training of two or more runs among `runs`, by training name."""
    members: Dict[str, List[Tuple[Tuple[int, ...], str, str]]] = {}
    for run in runs:
        name = rank_name(run)
        if name is not None:
            members.setdefault(name.training, []).append((name.key, run, name.rank))
    out = {}
    for training, found in members.items():
        if len(found) >= 2:
            found.sort()
            out[training] = Training(training, tuple(r for _, r, _ in found), tuple(k for _, _, k in found))
    return out


def training_of(run: str, runs: Iterable[str]) -> Optional[Training]:
    """The training `run` is a rank of, among `runs`; None when it is no rank or the only one."""
    name = rank_name(run)
    if name is None:
        return None
    return trainings(runs).get(name.training)


@dataclasses.dataclass(frozen=True)
class RankFacts:
    """What `ran_together` compares of a run: its layers, the steps it logged, when it started."""

    layers: FrozenSet[str]
    steps: np.ndarray  # every step any of its rows or run-level scalars logged, sorted, unique
    first_wall: Optional[float]  # the earliest wall time read of it; None where none is known


def rank_facts(rd: RunData) -> RankFacts:
    """`RankFacts` of a run's data."""
    tables = [r.table for layer in rd.layers for r in layer.roles.values() if len(r.table.steps)]
    # Rows mostly share their steps: each distinct step array once.
    distinct = {t.steps.tobytes(): t.steps for t in tables}
    for steps, _ in rd.scalar_series.values():
        steps = np.asarray(steps)
        distinct.setdefault(steps.tobytes(), steps)
    steps = np.unique(np.concatenate(list(distinct.values()))) if distinct else np.empty(0, dtype=np.int64)
    return RankFacts(frozenset(layer.name for layer in rd.layers), steps, rd.first_wall)


def ran_together(a: RankFacts, b: RankFacts) -> bool:
    """Whether two runs can be ranks of one data-parallel training: every rank logs the same layers at the
    same steps, and the ranks start together. Element counts may differ: sharded ranks (FSDP, ZeRO) hold
    parts of a layer (`ranks.find` leaves those layers out of the comparison)."""
    if a.layers != b.layers or not len(np.intersect1d(a.steps, b.steps, assume_unique=True)):
        return False
    if a.first_wall is None or b.first_wall is None:
        return True  # nothing says when one of them started: the layers and steps decide
    return abs(a.first_wall - b.first_wall) <= START_TOLERANCE_S


def together(training: Training, facts: Mapping[str, RankFacts]) -> Optional[Training]:
    """The ranks of `training` that ran together, by their data (`facts`, by run; a run without is left
    out): the largest group of two or more runs that each ran together with the group's lowest rank
    (of equal groups, the one with the lowest rank); None when no two did."""
    groups: List[List[int]] = []
    for i, run in enumerate(training.runs):
        if run not in facts:
            continue
        home = next((g for g in groups if ran_together(facts[training.runs[g[0]]], facts[run])), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    best = max(groups, key=len, default=[])
    if len(best) < 2:
        return None
    if len(best) == len(training.runs):
        return training
    return Training(training.name, tuple(training.runs[i] for i in best), tuple(training.ranks[i] for i in best))
