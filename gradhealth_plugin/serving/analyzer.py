"""A run's full analysis: metric tables from the reading side plus findings.

The plugin routes and the CLI both go through `Analyzer`, so the tab and the
command line always report the same findings and the heatmap's statuses are
the ones the findings imply.
"""

from __future__ import annotations

import threading
import weakref
from typing import List, Mapping, Optional, Sequence, Tuple

import numpy as np
from tensorboard import context as tb_context
from tensorboard import errors
from tensorboard.data import provider

from ..analysis import findings
from ..reading.provider import Reader
from ..reading.runs import NotFound, RunData
from ..reading import tags as tags_lib


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

    def list_runs(self, ctx: tb_context.RequestContext, experiment_id: str) -> List[str]:
        return self._reader.list_runs(ctx, experiment_id)

    def histogram_at(self, ctx: tb_context.RequestContext, experiment_id: str, run: str, tag: str,
                     step: int) -> Optional[np.ndarray]:
        return self._reader.histogram_at(ctx, experiment_id, run, tag, step)

    def run(self, ctx: tb_context.RequestContext, experiment_id: str,
            run: str) -> Tuple[RunData, List[findings.Finding]]:
        """The run's data (with finding-consistent cell statuses) and its findings.

        Raises `tensorboard.errors.NotFoundError` for a run the data provider does not have.
        """
        try:
            rd = self._reader.run_data(ctx, experiment_id, run)
        except NotFound as e:
            raise errors.NotFoundError(str(e)) from None
        with self._lock:
            found = self._findings.get(rd)
            if found is None:
                found = findings.find(rd, self._limits)
                findings.decide_cells(rd, found, self._limits)
                self._findings[rd] = found
        return rd, found
