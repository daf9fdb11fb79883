"""A run's full analysis: metric tables from the reading side plus findings.

The plugin routes and the CLI both go through `Analyzer`, so the tab and the
command line always report the same findings and the heatmap's statuses are
the ones the findings imply.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import weakref
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import grpc
import numpy as np
from tensorboard import context as tb_context
from tensorboard import errors
from tensorboard.data import provider

from ..analysis import findings
from ..analysis import ranks as ranks_lib
from ..analysis import sweep as sweep_lib
from ..reading import heap
from ..reading import hparams as hparams_lib
from ..reading import provider as provider_lib
from ..reading.cache import TagCache
from ..reading.provider import Reader
from ..reading.runs import NotFound, RunData
from ..reading import tags as tags_lib
from ..reading import trainings as trainings_lib
from . import jsontext
from . import responses

logger = logging.getLogger(__name__)

# How much of an exception's own message a failed run's error repeats; the log has it whole.
_MESSAGE_CHARS = 200
# Sweep lines kept by run and data version: every line of a sweep of this many runs.
_SWEEP_ROWS = 10_000
# Serialised answers kept (gzipped): a repeated request for unchanged data is sent as it was.
ANSWER_BYTES = 64 * 1024 * 1024
# Bytes an answer was built from per byte of its JSON, counted as freed once it is written (`heap.freed`):
# a heatmap cell's arrays take about 20 bytes, its JSON 5-13.
_BUILT_PER_BYTE = 2


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


class DataUnavailable(errors.PublicError):
    """TensorBoard's data server not answering (stopped, restarting, overloaded): nothing is wrong with
    the request or the run, and the same request may succeed later. HTTP 503."""

    http_code = 503

    def __init__(self, details: str) -> None:
        super().__init__(f"Unavailable: TensorBoard's data server is not answering ({details}); "
                         "the request may succeed once it is back")


# What the data server answers when it is not there to answer (the gRPC status, not the run's data).
_NOT_ANSWERING = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def unavailable(error: BaseException) -> Optional[DataUnavailable]:
    """`DataUnavailable` for a gRPC error saying the data server is not answering; None for any other error."""
    code = error.code() if isinstance(error, grpc.RpcError) and callable(getattr(error, "code", None)) else None
    if code not in _NOT_ANSWERING:
        return None
    details = error.details() if callable(getattr(error, "details", None)) else ""
    return DataUnavailable(f"{code.name}: {details}"[:_MESSAGE_CHARS])


def failure(run: str, doing: str, error: BaseException) -> str:
    """One line on a run's failure: the run, what failed and the exception, cut short."""
    text = f"{type(error).__name__}: {error}".splitlines()[0] if str(error) else type(error).__name__
    if len(text) > _MESSAGE_CHARS:
        text = text[:_MESSAGE_CHARS] + "..."
    return f"run {run!r} could not be {doing} ({text}); the TensorBoard log has the details"


def _training_name(run: str) -> Optional[str]:
    """The training the run is a rank of by its name (`trainings.rank_name`), or None."""
    name = trainings_lib.rank_name(run)
    return None if name is None else name.training


class Analyzer:
    """Reads runs through the data provider and keeps each run's findings until its data changes."""

    def __init__(self, data_provider: provider.DataProvider, limits: Mapping[str, float],
                 tag_rules: Sequence[tags_lib.UserRule] = (),
                 samples: Optional[Mapping[str, Optional[float]]] = None, multiplexer=None) -> None:
        """``multiplexer``: the Python loader's, where TensorBoard gives it (see `provider.Reader`)."""
        self._reader = Reader(data_provider, tag_rules, samples, multiplexer)
        self._limits = dict(limits)
        self._lock = threading.Lock()
        # Keyed by the RunData object the reader caches: a new object means new data.
        self._findings: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        # Per run data: (the training's judgement it was decided with, its findings): cells decided once per both.
        self._decided: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        # (experiment, training) -> (weak references to the run data compared, findings by run): see `_across_ranks`.
        self._trainings: Dict[tuple, tuple] = {}
        # Sweep lines, keyed alike: built once per run and data version, however often the sweep is asked for.
        self._rows: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        # The same lines by run and data version: the reader keeps the data of only so many runs,
        # a sweep's lines (a few kB each) outlive it.
        self._row_versions: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
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

    def version_text(self, rd: RunData) -> Optional[str]:
        """This data version of the run as the routes name it (the ``version`` of a run in ``runs``)."""
        return self._reader.version(rd)

    def pinned(self, experiment_id: str, run: str, version: str) -> Optional[Tuple[RunData, List[findings.Finding]]]:
        """The run's data and findings as `run` last gave them, where that is data version `version`
        (`version_text`); None otherwise (the caller reads the run with `run`).

        The data provider is not asked whether the run changed since: the caller named the
        version it wants. A tab's zoom, next page or cell is cut from the data it shows,
        without listing a run of many tags again (the Rust data server's listing of 1,000
        tags of 5,000 steps costs 0.1-0.4 s); its poll of ``runs`` brings new data.
        """
        rd = self._reader.held(experiment_id, run)
        if rd is None or self._reader.version(rd) != version:
            return None
        with self._lock:
            decided = self._decided.get(rd)
        if decided is None or isinstance(decided[1], str):
            return None
        return rd, decided[1]

    def answer(self, rd: RunData, key: tuple, build: Callable[[], object]) -> bytes:
        """The answer `build` makes, as gzipped JSON, built and written once per `key` and data version.

        The JSON is compact (no spaces) and NaN-free (answers send null); gzip at
        TensorBoard's own level, so a cached answer is sent as TensorBoard would send it.
        """
        version = self.data_version(rd)
        cached = self._answers.get(key, version)
        if cached is None:
            cached, length = jsontext.gzipped(build(), level=3)
            self._answers.put(key, version, cached, len(cached))
            # What it was built from is gone (its cells' arrays): released after the largest answers.
            heap.freed(_BUILT_PER_BYTE * length)
        return cached

    def list_runs(self, ctx: tb_context.RequestContext, experiment_id: str) -> List[str]:
        return self._reader.list_runs(ctx, experiment_id)

    def listings(self, ctx: tb_context.RequestContext, experiment_id: str) -> Dict[str, Mapping]:
        """What the provider lists of every run (`Reader.listings`): `run` reads runs by it when given it."""
        return self._reader.listings(ctx, experiment_id)

    def hparams(self, ctx: tb_context.RequestContext, experiment_id: str) -> Dict[str, hparams_lib.Session]:
        return self._reader.hparams(ctx, experiment_id)

    def versions(self, ctx: tb_context.RequestContext, experiment_id: str) -> Dict[str, tuple]:
        """Every run's data version (`Reader.versions`), for `sweep_row`.

        A rank's findings depend on every rank of its training, so a rank's version
        is its training's runs' versions together: another rank's new data is new data.
        """
        own = self._reader.versions(ctx, experiment_id)
        out = dict(own)
        for training in trainings_lib.trainings(own).values():
            together = tuple(own.get(run) for run in training.runs)
            for run in training.runs:
                out[run] = together
        return out

    def sweep_row(self, ctx: tb_context.RequestContext, experiment_id: str, run: str,
                  build: Callable[[RunData, List[findings.Finding]], dict], version: Optional[tuple] = None) -> dict:
        """The run's sweep line, `build` (rd, findings) called once per data version of the run.

        With the run's `version` (from `versions`), a line built for that version is returned
        without reading the run: a sweep of more runs than the reader keeps analyses nothing
        again. Raises as `run` does.
        """
        key = (experiment_id, run)
        if version is not None:
            with self._lock:
                kept = self._row_versions.get(key)
                if kept is not None and kept[0] == version:
                    self._row_versions.move_to_end(key)
                    return kept[1]
        rd, found = self.run(ctx, experiment_id, run)
        with self._lock:
            built = self._rows.get(rd)
        # Built from these very findings: a rank's change when another rank's data does.
        if built is None or built[0] is not found:
            built = (found, build(rd, found))
            with self._lock:
                self._rows[rd] = built
        if version is not None:
            with self._lock:
                self._row_versions[key] = (version, built[1])
                self._row_versions.move_to_end(key)
                while len(self._row_versions) > _SWEEP_ROWS:
                    self._row_versions.popitem(last=False)
        return built[1]

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

    def run(self, ctx: tb_context.RequestContext, experiment_id: str, run: str,
            names: Optional[Sequence[str]] = None,
            listings: Optional[Mapping[str, Mapping]] = None) -> Tuple[RunData, List[findings.Finding]]:
        """The run's data (with finding-consistent cell statuses) and its findings.

        A rank of a training many workers logged (`trainings`) also gets the findings
        judged across the training's runs (`ranks.find`), computed once per data
        version of those runs. `names`: the experiment's runs where the caller has
        listed them already (listed here otherwise, for a rank's name only);
        `listings`: what `listings` gave this request, where the caller has it
        (the provider is asked again otherwise).

        Raises `tensorboard.errors.NotFoundError` for a run the data provider does not have,
        `RunFailed` for one that could not be read or analysed (logged with its traceback).
        A failed analysis is kept like findings, until the run's data changes; a failed
        read is tried again on the next request (the data provider may recover).
        """
        # Paused over the analysis too: its per-row objects would otherwise set off full collections.
        with provider_lib.collector_paused:
            return self._run(ctx, experiment_id, run, names, listings)

    def _run(self, ctx: tb_context.RequestContext, experiment_id: str, run: str, names: Optional[Sequence[str]],
             listings: Optional[Mapping[str, Mapping]]) -> Tuple[RunData, List[findings.Finding]]:
        if listings is None:
            # A rank's run and its training's other ranks come from one listing (see `_training_listings`).
            listings = self._training_listings(ctx, experiment_id, run, names)
        rd = self._read(ctx, experiment_id, run, listings)
        with self._lock:
            own = self._findings.get(rd)
            if own is None:
                try:
                    own = findings.find(rd, self._limits)
                except Exception as e:  # noqa: BLE001 - one run's failure must not take the others down
                    logger.exception("gradhealth: analysing run %r failed", run)
                    own = failure(run, "analysed", e)  # kept as its message, without the traceback
                self._findings[rd] = own
        if isinstance(own, str):
            raise RunFailed(own)
        training, across = self._across_ranks(ctx, experiment_id, rd, listings)
        with self._lock:
            decided = self._decided.get(rd)
            # Cells are decided again only when the training's judgement changed (another rank's data did).
            if decided is None or decided[0] is not training:
                try:
                    found = findings.ordered(own + across)
                    findings.decide_cells(rd, found, self._limits)
                except Exception as e:  # noqa: BLE001 - as above
                    logger.exception("gradhealth: analysing run %r failed", run)
                    found = failure(run, "analysed", e)
                decided = (training, found)
                self._decided[rd] = decided
        if isinstance(decided[1], str):
            raise RunFailed(decided[1])
        return rd, decided[1]

    def layers_in(self, ctx: tb_context.RequestContext, experiment_id: str, run: str,
                  listings: Optional[Mapping[str, Mapping]] = None) -> Optional[Tuple[str, bool]]:
        """The run beside ``run`` (same folder) that holds its training's layers, as `responses.layers_in` finds
        it among the runs listed with histograms or gradhealth statistics, and whether the two are their
        folder's only runs; None where no single such run is beside it."""
        if listings is None:
            listings = self.listings(ctx, experiment_id)
        return responses.beside(run, provider_lib.layer_runs(listings), provider_lib.run_names(listings))

    def training_of(self, rd: RunData) -> Optional[trainings_lib.Training]:
        """The training `rd` is a rank of, as `run` last judged it: its name groups it with other runs
        and their data says they ran together (`trainings.together`); None otherwise."""
        with self._lock:
            decided = self._decided.get(rd)
        ranked = decided[0][2] if decided is not None and decided[0] is not None else None
        return ranked if ranked is not None and rd.run in ranked.runs else None

    def _read(self, ctx: tb_context.RequestContext, experiment_id: str, run: str,
              listings: Optional[Mapping[str, Mapping]] = None) -> RunData:
        try:
            return self._reader.run_data(ctx, experiment_id, run, listings)
        except NotFound as e:
            raise errors.NotFoundError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - one run's failure must not take the others down
            down = unavailable(e)
            if down is not None:
                raise down from None
            logger.exception("gradhealth: reading run %r failed", run)
            raise RunFailed(failure(run, "read", e)) from None

    def _training_listings(self, ctx: tb_context.RequestContext, experiment_id: str, run: str,
                           names: Optional[Sequence[str]]) -> Optional[Dict[str, Mapping]]:
        """One listing of every run that may be a rank of `run`'s training, `run` among them;
        None for a run whose name names no rank (its read lists it alone).

        Which runs are one training follows from their names only (`trainings`), so the
        runs TensorBoard names (`list_runs`, which lists no tag) narrow the listing to the
        training's: the run's read, its training and its ranks' reads all use this one.
        Asked separately, a rank's request listed its run, then every run, then its training.
        """
        own = trainings_lib.rank_name(run)
        if own is None:
            return None
        if names is None:
            names = self._reader.run_names(ctx, experiment_id)
        same = {name for name in names if _training_name(name) == own.training}
        return self._reader.listings(ctx, experiment_id, sorted(same | {run}))

    def _across_ranks(self, ctx: tb_context.RequestContext, experiment_id: str, rd: RunData,
                      listings: Optional[Mapping[str, Mapping]]) -> Tuple[Optional[tuple], List[findings.Finding]]:
        """(the training's judgement, this run's findings in it); (None, []) for a run that is no rank.

        `listings`: `_training_listings` of the run. The judgement (weak references to the
        data it was made from, findings by run, the ranks that ran together,
        `trainings.together`) is kept with the data of every rank it was made from, and made
        again when any of them changed. A rank that cannot be read is left out of it; so is
        one whose data says it is a training of its own.
        """
        if listings is None or trainings_lib.rank_name(rd.run) is None:
            return None, []
        # Among the runs with data the plugin reads, as `list_runs` names them.
        training = trainings_lib.training_of(rd.run, provider_lib.run_names(listings))
        if training is None:
            return None, []
        members = []
        for rank, name in zip(training.ranks, training.runs):
            try:
                members.append((rank, rd if name == rd.run else self._reader.run_data(ctx, experiment_id, name,
                                                                                        listings)))
            except Exception:  # noqa: BLE001 - its own request reports why
                logger.debug("gradhealth: rank %r left out of training %r", name, training.name, exc_info=True)
        key = (experiment_id, training.name)
        with self._lock:
            judged = self._trainings.get(key)
            if judged is None or len(judged[0]) != len(members) or any(
                    made() is not data for made, (_, data) in zip(judged[0], members)):
                ranked = trainings_lib.together(training, {data.run: trainings_lib.rank_facts(data)
                                                           for _, data in members})
                compared = [m for m in members if ranked is not None and m[1].run in ranked.runs]
                try:
                    found = ranks_lib.find(training.name, compared, self._limits) if compared else {}
                except Exception:  # noqa: BLE001 - the runs' own findings still stand
                    logger.exception("gradhealth: comparing the ranks of training %r failed", training.name)
                    found = {}
                # Weak: the reader's cache alone decides how many runs stay in memory.
                judged = (tuple(weakref.ref(data) for _, data in members), found, ranked)
                self._trainings[key] = judged
        return judged, judged[1].get(rd.run, [])
