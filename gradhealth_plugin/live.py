"""Judging a run in the training process, with the tab's rules, to stop it early (``stop_on``).

The integrations hand `LiveRun` every statistics vector they write (the vector
the event file gets). After each logged step `judge` builds the run the way the
reading side builds it from those summaries (`runs.classify_run_tags`,
`runs.build_run`), runs the detectors the `alerts.Alert` can act on
(`findings.find`) and returns the first finding it acts on. The thresholds are
the tab's: the defaults, or those of a ``gradhealth.json`` in the log
directory or its parent, where TensorBoard pointed at either finds it.

Cost: the run is rebuilt only when a new tensor appears; otherwise each logged
step turns every row's kept vectors into its metric table (a few numpy calls
per row) and runs those detectors over the kept steps. The first logged step
and the last `HISTORY` are kept: the rules look back at most a few dozen
logged steps (the explosion baseline 11, vanishing 5), and the first step is
what weight growth compares with.

Nothing here raises into training: a failure is warned about once, and the
run is no longer judged.
"""

from __future__ import annotations

import copy
import logging
import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from . import config as config_lib
from .alerts import Alert, Match
from .analysis import findings, metrics
from .analysis import limits as limits_lib
from .reading import runs
from .writing import format as metadata
from .writing.events import SummaryFileWriter
from .writing.failures import Failures

logger = logging.getLogger(__name__)

# Logged steps kept besides the first.
HISTORY = 128


class _Row:
    """One tensor's statistics vectors at its logged steps: the first, then the latest."""

    def __init__(self, role: str, layer: str, position: Optional[int], shape: Optional[Sequence[int]]) -> None:
        self.role, self.layer, self.position = role, layer, position
        self.shape = None if shape is None else [int(s) for s in shape]
        self.steps = np.zeros(HISTORY + 1, dtype=np.int64)
        self.vectors = np.full((HISTORY + 1, len(metadata.FIELDS)), np.nan)
        self.n = 0

    def add(self, step: int, vector: np.ndarray) -> None:
        if self.n and step <= self.steps[self.n - 1]:
            if step == self.steps[self.n - 1]:
                self.n -= 1  # a step written again: its last vector stands, as the reader keeps it
            else:
                self.n = 0  # the step count went back (a new fit from step 0): a new series
        if self.n == len(self.steps):
            # Keep the first step; drop the older half of the rest (amortised: one copy per HISTORY / 2 steps).
            keep = HISTORY // 2
            self.steps[1:1 + keep] = self.steps[self.n - keep:self.n]
            self.vectors[1:1 + keep] = self.vectors[self.n - keep:self.n]
            self.n = 1 + keep
        flat = np.asarray(vector, dtype=np.float64).ravel()[:self.vectors.shape[1]]
        self.vectors[self.n] = np.nan
        self.vectors[self.n, :len(flat)] = flat
        self.steps[self.n] = step
        self.n += 1


def _tables(rows: Sequence[_Row]) -> List[metrics.MetricTable]:
    """Each row's metric table, as `metrics.merge_exact` makes it from the same summaries.

    All rows go through `format.vectors_to_table_values` at once: per-call costs,
    not the few numbers, are what a small model's rows would cost one by one.
    """
    counts = [row.n for row in rows]
    named = metadata.vectors_to_table_values(np.concatenate([row.vectors[:row.n] for row in rows]))
    names = list(named)
    stacked = np.stack([named[k] for k in names])  # metric x (every row's steps, one row after the other)
    known = np.where(np.isnan(stacked), metrics.NO_DATA, metrics.EXACT).astype(np.uint8)
    out = []
    start = 0
    for row, n in zip(rows, counts):
        values = {k: stacked[i, start:start + n] for i, k in enumerate(names)}
        quality = {k: known[i, start:start + n] for i, k in enumerate(names)}
        out.append(metrics.MetricTable(steps=row.steps[:n].copy(), values=values, quality=quality))
        start += n
    return out


class LiveRun:
    """The statistics one integration wrote, judged after each logged step against an `Alert`."""

    def __init__(self, alert: Alert, run: str, log_dir: Optional[str] = None,
                 limits: Optional[Mapping[str, float]] = None) -> None:
        self.alert = alert
        self.run = run
        self.failures = Failures()
        self._broken = False
        self._limits = dict(limits) if limits is not None else self._configured_limits(log_dir)
        self._detectors = alert.detectors()
        self._rows: Dict[str, _Row] = {}
        self._skeleton: Optional[runs.RunData] = None
        self._changed = False

    @property
    def errors(self) -> int:
        return self.failures.count

    def add(self, step: int, role: str, layer: str, vector, position: Optional[int] = None,
            shape: Optional[Sequence[int]] = None) -> None:
        """One tensor's statistics vector (`writing.format.FIELDS`) at a logged step."""
        if self._broken:
            return
        try:
            tag = metadata.tag_for(role, layer)
            row = self._rows.get(tag)
            if row is None:
                row = self._rows[tag] = _Row(role, layer, position, shape)
                self._skeleton = None
            row.add(int(step), vector)
            self._changed = True
        except Exception as e:  # noqa: BLE001 - never raise into training
            self._fail("keep the statistics for stop_on", e)

    def add_rows(self, step: int, role: str, entries: Sequence[tuple], rows) -> None:
        """Rows of one role at a step: entries (layer, position, shape) and their vectors, row j for entry j."""
        rows = np.asarray(rows, dtype=np.float64)
        for j, (layer, position, shape) in enumerate(entries):
            self.add(step, role, layer, rows[j], position, shape)

    def judge(self) -> Optional[Match]:
        """The first finding the alert acts on in what was added, or None (also when nothing new was added)."""
        if self._broken or not self._changed or not self._rows:
            return None
        self._changed = False
        try:
            rd = self.run_data()
            found = findings.find(rd, self._limits, self._detectors)
            due = [m for m in self.alert.matches(rd, found) if m.due]
            return due[0] if due else None
        except Exception as e:  # noqa: BLE001
            self._fail("judge the run for stop_on", e)
            return None

    def run_data(self) -> runs.RunData:
        """The run as the reading side builds it from these summaries (kept steps only)."""
        tables = dict(zip(self._rows, _tables(list(self._rows.values()))))
        last = max(int(t.steps[-1]) for t in tables.values() if len(t.steps))
        if self._skeleton is None:
            self._skeleton = self._build(tables, last)
            return self._skeleton
        layers = []
        for layer in self._skeleton.layers:
            # Shallow copies (cheaper than dataclasses.replace) holding this judge's tables.
            layer = copy.copy(layer)
            layer.roles = {role: copy.copy(rdata) for role, rdata in layer.roles.items()}
            for rdata in layer.roles.values():
                rdata.table = tables[rdata.tags[0]]
                rdata.steps_logged = len(rdata.table.steps)
            layers.append(layer)
        kept = np.unique(np.concatenate([t.steps for t in tables.values()]))
        # A new object each time: analyses cache per RunData object.
        return runs.RunData(run=self.run, layers=layers, scalars={}, unclassified=[], steps_kept=len(kept),
                            last_step=last, steps_logged=len(kept))

    def _build(self, tables: Mapping[str, metrics.MetricTable], last: int) -> runs.RunData:
        contents = {tag: metadata.metadata_content(row.role, row.layer, row.position, row.shape)
                    for tag, row in self._rows.items()}
        run_tags = runs.classify_run_tags([], [], contents)
        own = {tag: (t.steps, t.values) for tag, t in tables.items()}
        reads = runs.RunReads(histograms={}, exact={}, own=own, scalar_series={}, sampling={})
        return runs.build_run(self.run, run_tags, reads, last)

    def _fail(self, what: str, error: BaseException) -> None:
        self._broken = True
        self.failures.report(f"{what}; stop_on is off from here", error)

    def _configured_limits(self, log_dir: Optional[str]) -> Dict[str, float]:
        """The tab's thresholds: a gradhealth.json in the log directory or its parent, else the defaults."""
        if log_dir and "://" not in log_dir:
            here = os.path.abspath(os.path.expanduser(log_dir))
            for directory in (here, os.path.dirname(here)):
                if os.path.isfile(os.path.join(directory, config_lib.CONFIG_FILENAME)):
                    try:
                        return config_lib.load(logdir=directory).limits
                    except ValueError as e:
                        logger.warning("gradhealth: %s; stop_on uses the default thresholds", e)
                        break
        return limits_lib.thresholds()


def stop_message(match: Match, alert: Alert, step: int) -> str:
    """Why training stopped, for a person: written into the run and logged."""
    f = match.finding
    held = f"{match.steps} consecutive logged step{'s' if match.steps != 1 else ''}"
    return (f"Training was stopped at step {step} by gradhealth (stop_on: {alert.describe()}): "
            f"[{f.severity}] {f.kind} from step {f.first_step} ({held}): {f.message}")


class StopOn:
    """An integration's ``stop_on``: the alert, the run it judges, and the finding it stopped on.

    The PyTorch watch, the Keras callback and the TensorFlow logger share it:
    each hands over the rows it writes (`add_rows`, or a `RecordingWriter`),
    calls `judge` after a logged step, and stops training its own way when
    `judge` found something. A wrong ``stop_on`` raises here, before training.
    """

    def __init__(self, stop_on, log: logging.Logger) -> None:
        self.alert = Alert.of(stop_on)
        self._log = log
        self.live: Optional[LiveRun] = None
        self.stopped_by = None
        self.message: Optional[str] = None

    def start(self, run: str, log_dir: Optional[str]) -> None:
        """Judges a new run from here on (each Keras ``fit`` afresh), forgetting an earlier stop."""
        self.live = LiveRun(self.alert, run, log_dir)
        self.stopped_by, self.message = None, None

    def add_rows(self, step: int, role: str, entries: Sequence[tuple], rows) -> None:
        if self.live is not None:
            self.live.add_rows(step, role, entries, rows)

    def judge(self, step: int, write: Callable[[int, str], None]) -> bool:
        """Judges the logged steps so far; on a finding to stop on, keeps it, has `write(step, message)`
        record why in the run, warns, and returns True (once: later calls return False)."""
        if self.live is None or self.stopped_by is not None:
            return False
        match = self.live.judge()
        if match is None:
            return False
        self.stopped_by = match.finding
        self.message = stop_message(match, self.alert, step)
        write(step, self.message)
        self._log.warning("gradhealth: %s", self.message)
        return True


class RecordingWriter(SummaryFileWriter):
    """An event-file writer that also hands every statistics vector it writes to a `LiveRun`."""

    def __init__(self, live_run: LiveRun, logdir: str, filename_suffix: str = "", failures=None) -> None:
        super().__init__(logdir, filename_suffix=filename_suffix, failures=failures)
        self._live_run = live_run

    def write_stats(self, step: int, role: str, layer: str, vector: np.ndarray, position: Optional[int] = None,
                    shape: Optional[Sequence[int]] = None, wall_time: Optional[float] = None) -> None:
        self._live_run.add(step, role, layer, vector, position, shape)
        super().write_stats(step, role, layer, vector, position, shape, wall_time)


__all__: List[str] = ["LiveRun", "StopOn", "RecordingWriter", "stop_message", "HISTORY"]
