"""A run's full analysis: metric tables from the reading side plus findings.

The plugin routes and the CLI both go through `Analyzer`, so the tab and the
command line always report the same findings and the heatmap's statuses are
the ones the findings imply.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import threading
import weakref
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from tensorboard import context as tb_context
from tensorboard import errors
from tensorboard.data import provider

from ..analysis import findings
from ..analysis import sweep as sweep_lib
from ..reading import hparams as hparams_lib
from ..reading.cache import TagCache
from ..reading.provider import Reader
from ..reading.runs import NotFound, RunData
from ..reading import tags as tags_lib

logger = logging.getLogger(__name__)

# How much of an exception's own message a failed run's error repeats; the log has it whole.
_MESSAGE_CHARS = 200
# Serialised answers kept (gzipped): a repeated request for unchanged data is sent as it was.
ANSWER_BYTES = 64 * 1024 * 1024


class RunFailed(errors.PublicError):
    """A run that could not be read or analysed: the other runs are unaffected.

    HTTP 422: the request is sound, this run's data is what cannot be processed
    (data crafted or damaged in a way no check foresaw). Its message says what
    failed, for the tab; the TensorBoard log has the traceback.
    """

    http_code = 422

    def __init__(self, details: str) -> None:
        # Prefixed as TensorBoard prefixes its errors, which the routes strip.
        super().__init__(f"Run failed: {details}")


def failure(run: str, doing: str, error: BaseException) -> str:
    """One line on a run's failure: the run, what failed and the exception, cut short."""
    text = f"{type(error).__name__}: {error}".splitlines()[0] if str(error) else type(error).__name__
    if len(text) > _MESSAGE_CHARS:
        text = text[:_MESSAGE_CHARS] + "..."
    return f"run {run!r} could not be {doing} ({text}); the TensorBoard log has the details"


class Analyzer:
    """Reads runs through the data provider and keeps each run's findings until its data changes."""

    def __init__(self, data_provider: provider.DataProvider, limits: Mapping[str, float],
                 tag_rules: Sequence[tags_lib.UserRule] = (),
                 samples: Optional[Mapping[str, Optional[float]]] = None) -> None:
        self._reader = Reader(data_provider, tag_rules, samples)
        self._limits = dict(limits)
        self._lock = threading.Lock()
        # Keyed by the RunData object the reader caches: a new object means new data.
        self._findings: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        # Sweep lines, keyed alike: built once per run and data version, however often the sweep is asked for.
        self._rows: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        # The last sweep's splits and what they were computed from.
        self._splits: Tuple[object, list] = (None, [])
        # Per RunData object (one data version of a run), a number that never comes back.
        self._versions: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self._version_numbers = itertools.count()
        self._answers = TagCache(ANSWER_BYTES)

    def data_version(self, rd: RunData) -> int:
        """A number naming this data version of the run: a reload that changed the run gives a new one."""
        with self._lock:
            version = self._versions.get(rd)
            if version is None:
                version = self._versions[rd] = next(self._version_numbers)
            return version

    def answer(self, rd: RunData, key: tuple, build: Callable[[], object]) -> bytes:
        """The answer `build` makes, as gzipped JSON, built and written once per `key` and data version.

        The JSON is compact (no spaces) and NaN-free (answers send null); gzip at
        TensorBoard's own level, so a cached answer is sent as TensorBoard would send it.
        """
        version = self.data_version(rd)
        cached = self._answers.get(key, version)
        if cached is None:
            text = json.dumps(build(), allow_nan=False, separators=(",", ":")).encode("utf-8")
            cached = gzip.compress(text, compresslevel=3, mtime=0)
            self._answers.put(key, version, cached, len(cached))
        return cached

    def list_runs(self, ctx: tb_context.RequestContext, experiment_id: str) -> List[str]:
        return self._reader.list_runs(ctx, experiment_id)

    def hparams(self, ctx: tb_context.RequestContext, experiment_id: str) -> Dict[str, hparams_lib.Session]:
        return self._reader.hparams(ctx, experiment_id)

    def sweep_row(self, ctx: tb_context.RequestContext, experiment_id: str, run: str,
                  build: Callable[[RunData, List[findings.Finding]], dict]) -> dict:
        """The run's sweep line, `build` (rd, findings) called once per data version of the run.

        Raises as `run` does.
        """
        rd, found = self.run(ctx, experiment_id, run)
        with self._lock:
            row = self._rows.get(rd)
        if row is None:
            row = build(rd, found)
            with self._lock:
                self._rows[rd] = row
        return row

    def splits(self, runs: Sequence[sweep_lib.SweepRun], labels: Mapping[str, str]) -> List[sweep_lib.Split]:
        """`sweep.splits`, computed again only when a run's hyperparameters or kinds changed."""
        key = tuple((r.run, tuple(sorted((k, repr(v)) for k, v in r.hparams.items())), tuple(sorted(r.kinds)),
                     tuple(sorted(r.not_judged))) for r in runs)
        with self._lock:
            if self._splits[0] == key:
                return self._splits[1]
        out = sweep_lib.splits(runs, labels)
        with self._lock:
            self._splits = (key, out)
        return out

    def histogram_at(self, ctx: tb_context.RequestContext, experiment_id: str, run: str, tag: str,
                     step: int) -> Optional[np.ndarray]:
        return self._reader.histogram_at(ctx, experiment_id, run, tag, step)

    def histograms_of(self, ctx: tb_context.RequestContext, experiment_id: str, run: str, tag: str,
                      own: bool = False) -> Dict[int, np.ndarray]:
        return self._reader.histograms_of(ctx, experiment_id, run, tag, own)

    def run(self, ctx: tb_context.RequestContext, experiment_id: str,
            run: str) -> Tuple[RunData, List[findings.Finding]]:
        """The run's data (with finding-consistent cell statuses) and its findings.

        Raises `tensorboard.errors.NotFoundError` for a run the data provider does not have,
        `RunFailed` for one that could not be read or analysed (logged with its traceback).
        A failed analysis is kept like findings, until the run's data changes; a failed
        read is tried again on the next request (the data provider may recover).
        """
        try:
            rd = self._reader.run_data(ctx, experiment_id, run)
        except NotFound as e:
            raise errors.NotFoundError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - one run's failure must not take the others down
            logger.exception("gradhealth: reading run %r failed", run)
            raise RunFailed(failure(run, "read", e)) from None
        with self._lock:
            found = self._findings.get(rd)
            if found is None:
                try:
                    found = findings.find(rd, self._limits)
                    findings.decide_cells(rd, found, self._limits)
                except Exception as e:  # noqa: BLE001 - as above
                    logger.exception("gradhealth: analysing run %r failed", run)
                    found = failure(run, "analysed", e)  # kept as its message, without the traceback
                self._findings[rd] = found
        if isinstance(found, str):
            raise RunFailed(found)
        return rd, found
