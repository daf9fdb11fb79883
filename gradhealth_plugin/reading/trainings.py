"""One training logged by many workers: which runs are the ranks of one training.

The rule: runs are one training when their names are equal once every path part
that names a worker (a word among `RANK_WORDS` followed by a number, as in
``rank0``, ``worker_1``, ``gpu-3``, ``node1/gpu3``) has its number replaced by
``*``, and at least two runs share that name; a run's rank is those parts.
``watch(..., all_ranks=True)`` writes ``<log_dir>/rank<r>``: runs ``rank0``,
``rank1``, ... of the training ``rank*``, or ``exp/rank*`` under a logdir above it.

Pure functions of the run names: nothing here reads data.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Iterable, List, Optional, Tuple

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
