"""What a sweep's hyperparameters explain: which values go with which finding kinds.

For each hyperparameter and each finding kind, the runs are split in two, by a
threshold for numbers (every cut between two consecutive values is tried) or
by one value against the others for text and booleans, and the split whose
two sides differ most is kept if the difference is clear:

    "Exploding gradients in 4 of 4 runs with learning_rate >= 0.1, in 0 of 6 below"

Clear means: a one-sided Fisher exact test on the best split's 2x2 table, and
the share of random reassignments of the kind to the runs whose best split
(over all cuts of that hyperparameter) is as clear, are both at most `MAX_P`,
with at least `MIN_SIDE` runs on each side. With few runs no split reaches it
(2 of 2 against 0 of 2 has p = 1/6): then nothing is said.
Runs whose logs cannot judge a kind, or that lack the hyperparameter, take no
part in that split.
"""

from __future__ import annotations

import dataclasses
import math
import re
from decimal import Decimal
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np

Value = Union[float, str, bool]

# Besides each finding kind, one outcome for the run as a whole: any finding at warn or above.
UNHEALTHY = "unhealthy"
UNHEALTHY_LABEL = "Warnings or worse"

MAX_P = 0.05
MIN_SIDE = 2
# Shuffles of which runs have a kind, to measure how often the best split looks as clear by luck.
PERMUTATIONS = 2000
NUMBER = "number"
TEXT = "text"


@dataclasses.dataclass(frozen=True)
class SweepRun:
    """What a split needs of one run: its hyperparameters, the kinds found and the kinds it cannot judge."""

    run: str
    hparams: Mapping[str, Value]
    kinds: Set[str]
    not_judged: Set[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Split:
    hparam: str
    kind: str
    label: str
    # ">=" or "<=" with a number, "=" with a text or boolean value: which runs are "with".
    op: str
    value: Value
    with_found: int
    with_runs: int
    other_found: int
    other_runs: int
    p_value: float  # the share of shuffles whose best split was as clear
    runs_with: Tuple[str, ...]  # the runs on the "with" side that have the kind

    def sentence(self) -> str:
        shown = format_value(self.value)
        other = {">=": "below", "<=": "above", "=": "with other values"}[self.op]
        return (f"{self.label} in {self.with_found} of {self.with_runs} runs with {self.hparam} {self.op} {shown}, "
                f"in {self.other_found} of {self.other_runs} {other}")

    def to_json(self) -> dict:
        return {"hparam": self.hparam, "kind": self.kind, "label": self.label, "op": self.op, "value": self.value,
                "value_text": format_value(self.value),
                "with": {"found": self.with_found, "runs": self.with_runs},
                "other": {"found": self.other_found, "runs": self.other_runs},
                "p_value": self.p_value, "runs_with": list(self.runs_with), "sentence": self.sentence()}


def format_value(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def is_number(value: Value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_DIGITS = re.compile(r"(\d+)")


def natural_key(value: Optional[Value]) -> tuple:
    """Orders values as a person reads them: numbers by size (1e-3 < 0.01 < 0.1), then booleans, then
    text with its digit runs compared as numbers (lr_2 < lr_10), a missing value last."""
    if value is None:
        return (3,)
    if isinstance(value, bool):
        return (1, int(value))
    if is_number(value):
        return (0, float(value))
    text = str(value)
    try:
        return (0, float(text))  # "1e-3" written as text is still a number
    except ValueError:
        pass
    # Alternating text and digit runs: ("lr_", 2) < ("lr_", 10); a digit run at the start keeps the tuple
    # from comparing a str with an int, as split() always starts with a (maybe empty) text part.
    parts = _DIGITS.split(text.casefold())
    return (2, tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), text)


# A digit run, with its decimals: runs are named by hyperparameter values (lr_0.001, lr_0.01).
_DECIMALS = re.compile(r"(\d+(?:\.\d+)?)")


def run_key(name: str) -> tuple:
    """Orders run names as a person reads them: each ``<digits>.<digits>`` is one decimal number
    (lr_0.001 < lr_0.01 < lr_0.3 < lr_1), other text case-blind. Tags and layers keep the
    tags' natural order, where ``layer4.10`` comes after ``layer4.9``."""
    parts = _DECIMALS.split(name.casefold())
    return tuple(Decimal(p) if i % 2 else p for i, p in enumerate(parts)), name


def hparam_types(runs: Sequence[SweepRun]) -> Dict[str, str]:
    """Every hyperparameter any run has, in name order: `NUMBER` when all its values are numbers, else `TEXT`."""
    values: Dict[str, List[Value]] = {}
    for r in runs:
        for name, value in r.hparams.items():
            values.setdefault(name, []).append(value)
    return {name: NUMBER if all(map(is_number, vs)) else TEXT
            for name, vs in sorted(values.items(), key=lambda item: natural_key(item[0]))}


def fisher_one_sided(found_with: int, n_with: int, found_total: int, n_total: int) -> float:
    """P(at least `found_with` of the `n_with` runs have the kind) when `found_total` of `n_total` runs,
    drawn at random, have it: the hypergeometric tail."""
    denominator = math.comb(n_total, n_with)
    tail = sum(math.comb(found_total, i) * math.comb(n_total - found_total, n_with - i)
               for i in range(found_with, min(found_total, n_with) + 1))
    return tail / denominator


def _sides(name: str, kind_of: str, runs: Sequence[SweepRun]) -> List[Tuple[str, Value, List[bool]]]:
    """Every candidate split of the runs by one hyperparameter: (op, value, mask of the "with" side)."""
    values = [r.hparams[name] for r in runs]
    if kind_of == NUMBER:
        distinct = sorted(set(float(v) for v in values))
        out = []
        for lo, hi in zip(distinct, distinct[1:]):
            out.append((">=", hi, [float(v) >= hi for v in values]))
            out.append(("<=", lo, [float(v) <= lo for v in values]))
        return out
    keyed = [(type(v).__name__, str(v)) for v in values]
    distinct_keys = sorted(set(keyed))
    if len(distinct_keys) < 2:
        return []
    firsts = {k: v for k, v in zip(keyed, values)}
    return [("=", firsts[k], [x == k for x in keyed]) for k in distinct_keys]


def splits(runs: Sequence[SweepRun], labels: Mapping[str, str]) -> List[Split]:
    """The clear splits, at most one per (hyperparameter, kind), strongest first."""
    kinds = sorted({k for r in runs for k in r.kinds})
    out: List[Split] = []
    for name, kind_of in hparam_types(runs).items():
        having = [r for r in runs if name in r.hparams]
        for kind in kinds:
            judged = [r for r in having if kind not in r.not_judged]
            best = _best_split(name, kind_of, kind, labels.get(kind, kind), judged)
            if best is not None:
                out.append(best)
    out.sort(key=lambda s: (s.p_value, s.kind, s.hparam))
    return out


def _best_split(name: str, kind_of: str, kind: str, label: str, runs: Sequence[SweepRun],
                permutations: int = PERMUTATIONS) -> Optional[Split]:
    n = len(runs)
    found = np.array([kind in r.kinds for r in runs])
    total = int(found.sum())
    if n < 2 * MIN_SIDE or total == 0:
        return None
    candidates = _sides(name, kind_of, runs)
    masks = np.array([mask for _, _, mask in candidates], dtype=bool).reshape(len(candidates), n)
    sizes = masks.sum(axis=1)
    usable = (sizes >= MIN_SIDE) & (n - sizes >= MIN_SIDE)
    if not usable.any():
        return None
    masks, sizes = masks[usable], sizes[usable]
    candidates = [c for c, u in zip(candidates, usable) if u]
    # Fisher's tail for every count the "with" side may hold, per candidate side size.
    tails = np.array([[fisher_one_sided(k, int(m), total, n) if k <= m else 1.0 for k in range(n + 1)]
                      for m in sizes])

    def best_p(outcomes: np.ndarray) -> np.ndarray:
        """Per outcome vector (rows), the smallest p over the candidates whose "with" side is the more affected."""
        k_with = outcomes.astype(np.int64) @ masks.T.astype(np.int64)
        more = k_with * (n - sizes) > (total - k_with) * sizes
        p = np.where(more, tails[np.arange(len(sizes)), k_with], 1.0)
        return p.min(axis=1), p

    observed, p_each = best_p(found[None, :])
    if observed[0] > MAX_P:
        return None
    # Many cuts give many chances for one to look clear by luck: the chance is measured by
    # shuffling which runs have the kind (fixed seed: the same answer every time).
    rng = np.random.default_rng(0)
    shuffled = found[np.argsort(rng.random((permutations, n)), axis=1)]
    by_luck, _ = best_p(shuffled)
    p_value = float((1 + np.sum(by_luck <= observed[0] * (1 + 1e-9))) / (1 + permutations))
    if p_value > MAX_P:
        return None
    i = int(np.argmin(p_each[0]))
    op, value, _ = candidates[i]
    k_with, n_with = int(found[masks[i]].sum()), int(sizes[i])
    return Split(name, kind, label, op, value, k_with, n_with, total - k_with, n - n_with, p_value,
                 tuple(r.run for r, f, m in zip(runs, found, masks[i]) if f and m))
