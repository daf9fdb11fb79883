"""Every read of TensorBoard's data, through its data provider.

This is the only module that talks to TensorBoard's data. It goes through
``context.data_provider``, so it works the same under the Python loader, the
Rust data server and a remote gRPC data server, and the CLI uses it unchanged
on a ``MultiplexerDataProvider``. Two exceptions, for speed only, each giving
what the provider's ``read_tensors`` would: under the Python loader, tensors are
read from its ``EventMultiplexer`` (which TensorBoard hands plugins beside the
provider) and a tag's samples decoded together (`_decoded`); through a gRPC
provider (the Rust data server), its own request is sent through its stub and
the answer's samples decoded a tag at a time (`_Grpc`).

Results are cached per run, keyed by what the provider lists for each tag
(last step and wall time), so an unchanged run is never recomputed and a run
whose tags grew reads only the tags that changed and computes metrics only
for their new steps. Under the Python loader, a run whose kept events are the ones
seen last (`_Held`, told from the multiplexer) is not listed again at all.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import hashlib
import threading
import weakref
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import grpc
import numpy as np
from tensorboard.backend.event_processing import data_provider as multiplexer_provider
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.compat.proto import summary_pb2, types_pb2
from tensorboard.data import grpc_provider, provider
from tensorboard.data.proto import data_provider_pb2
from tensorboard.util import tensor_util

from ..analysis import metrics
from ..analysis import sweep as sweep_lib
from ..writing import format as metadata
from . import heap
from . import hparams as hparams_lib
from . import runs, tables
from . import tags as tags_lib
from .cache import TagCache
from .workers import Workers

# Read every sample TensorBoard kept; the loader's reservoir already bounds it.
_ALL_SAMPLES = 1_000_000
_CACHE_RUNS = 64
# Buckets of the tags whose cells were asked for lately.
_BUCKET_CACHE_BYTES = 64 * 1024 * 1024
# How much to read per read_tensors call, in bucket values (3 per bucket):
# one call for a whole run would hold all of its decoded histograms at once
# (as much memory again as TensorBoard keeps for them) and, from a gRPC data
# server, can pass the 256 MB message limit. About 16 MB of float64 per call
# keeps the server's peak memory within a few tens of MB of its resting size.
# Less costs speed on runs of many tags: every call makes the Python loader go
# through every tag it holds to find the ones asked for (20,000 tags of 20
# steps took 74 calls at 4 MB, a third of a second of that alone). The first
# call reads _FIRST_READ_TAGS tags (their size is unknown until then); later
# ones as many as this budget allows.
_READ_VALUES = 2_000_000
_FIRST_READ_TAGS = 8
_MAX_READ_TAGS = 4096
# Threads asking the provider for the three plugins' listings at once. TensorBoard's Rust data
# server answers any listing of more than one tag about 40 ms late (it leaves Nagle's algorithm
# on, so the end of its answer waits for the client's delayed acknowledgement): asked one after
# another, a run with histograms, scalars and gradhealth summaries paid it three times a request.
_LISTING_THREADS = 6
# Threads reading the next chunk of a run's tags from a gRPC data provider (`Reader._chunks`): one
# per run being read at once.
_READ_THREADS = 4


# The dtypes a histogram is written in, as `tensor_util.make_ndarray` reads them from `tensor_content`.
_FLOAT_DTYPES = {types_pb2.DT_HALF: np.float16, types_pb2.DT_FLOAT: np.float32, types_pb2.DT_DOUBLE: np.float64}


def _decoded_values(protos: Sequence) -> Optional[np.ndarray]:
    """One tag's ``TensorProto``s decoded in one numpy call: what ``make_ndarray`` gives for each, stacked.

    Only where every proto holds a float tensor of one dtype and one shape, all of
    its values in ``tensor_content``; None otherwise, for ``make_ndarray`` to decode
    one by one. Decoding 400,000 histograms one ``make_ndarray`` at a time costs
    about 3 s of CPU; this, about a fifth.
    """
    if not len(protos):
        return None
    first = protos[0]
    dtype = _FLOAT_DTYPES.get(first.dtype)
    if dtype is None:
        return None
    shape = tuple(d.size for d in first.tensor_shape.dim)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    contents = [p.tensor_content for p in protos]
    if nbytes <= 0 or any(len(c) != nbytes for c in contents):
        return None
    code, dims = first.dtype, first.tensor_shape
    if not all(p.dtype == code and p.tensor_shape == dims for p in protos):
        return None
    # Joined into a new bytearray: the arrays are writable and hold no event's bytes alive, as
    # make_ndarray's copies, without a second copy of the whole read.
    return np.frombuffer(bytearray().join(contents), dtype=dtype).reshape((len(protos),) + shape)


def _decoded(events: Sequence) -> Optional[tables.Samples]:
    """A tag's `TensorEvent`s decoded together (`_decoded_values`), where there are no more
    of them than the provider would return undownsampled; None otherwise."""
    if not events or len(events) > _ALL_SAMPLES:
        return None
    values = _decoded_values([e.tensor_proto for e in events])
    if values is None:
        return None
    return tables.Samples(steps=np.fromiter((e.step for e in events), dtype=np.int64, count=len(events)),
                          wall_times=np.fromiter((e.wall_time for e in events), dtype=np.float64,
                                                 count=len(events)),
                          values=values)


@dataclasses.dataclass
class _Found:
    """Where the histogram tags of one run read go: tables and wall times, or why a tag or some steps are not."""

    out: Dict[str, metrics.MetricTable]
    walls: Dict[tuple, np.ndarray]
    unreadable: Dict[str, str]
    unreadable_steps: Dict[str, runs.UnreadableSteps]

    def add(self, tag: str, entry: tables.TagMetrics) -> None:
        why, some = runs.histogram_tag_read(entry.bad, len(entry.table.steps))
        if why is not None:  # no step holds a histogram: no row, as for a tensor of no histogram's shape
            self.unreadable[tag] = why
            return
        self.out[tag] = entry.table
        self.walls[("histograms", tag)] = entry.wall_times
        if some is not None:
            self.unreadable_steps[tag] = some


class _Grpc:
    """What a gRPC data provider's (the Rust data server's) ``read_tensors`` gives, decoded faster.

    TensorBoard's `GrpcDataProvider` turns every sample of the answer into an
    array with a ``make_ndarray`` call of its own, in this process, while the data
    server waits: about as long as the server takes to answer. Here the same
    request is sent through the provider's stub and each tag's samples are decoded
    together (`_decoded_values`) where they can be, the rest one by one as the
    provider does. The answers are the provider's: the same tags, in its order.
    """

    def __init__(self, stub) -> None:
        self._stub = stub

    def tensors(self, experiment_id: str, plugin: str, run: str, tags: Sequence[str]) -> Dict[str, Sequence]:
        request = data_provider_pb2.ReadTensorsRequest()
        request.experiment_id = experiment_id
        request.plugin_filter.plugin_name = plugin
        request.run_tag_filter.runs.names[:] = [run]
        request.run_tag_filter.tags.names[:] = sorted(set(tags))
        request.downsample.num_points = _ALL_SAMPLES
        answer = self._stub.ReadTensors(request)
        out: Dict[str, Sequence] = {}
        for run_entry in answer.runs:
            if run_entry.run_name != run:
                continue
            out = {}
            for tag_entry in run_entry.tags:
                data = tag_entry.data
                values = _decoded_values(data.value)
                if values is None:
                    out[tag_entry.tag_name] = [
                        provider.TensorDatum(step=step, wall_time=wall, numpy=tensor_util.make_ndarray(value))
                        for step, wall, value in zip(data.step, data.wall_time, data.value)]
                else:
                    out[tag_entry.tag_name] = tables.Samples(steps=np.array(data.step, dtype=np.int64),
                                                             wall_times=np.array(data.wall_time, dtype=np.float64),
                                                             values=values)
        return out


class _Multiplexer:
    """What the Python loader's data provider reads, taken from its ``EventMultiplexer``, faster.

    The provider decodes every tensor with a ``make_ndarray`` call of its own;
    here a tag's samples are decoded together where they can be (`_decoded`).
    The answers are the provider's: the same tags (its plugin and data-class
    filter), in its order, each sample kept.
    """

    def __init__(self, multiplexer) -> None:
        self._multiplexer = multiplexer

    def tensors(self, plugin: str, run: str, tags: Sequence[str]) -> Tuple[List[str], Dict[str, tables.Samples]]:
        """(the tags the provider's ``read_tensors`` would answer for, in its order; those of them decoded)."""
        try:
            index = self._multiplexer.GetAccumulator(run).AllSummaryMetadata()
        except KeyError:  # no such run
            index = {}
        wanted = set(tags)
        # As the provider's `_index`: tensors (not scalars) of this plugin.
        listed = [tag for tag, meta in index.items() if tag in wanted
                  and meta.data_class == summary_pb2.DATA_CLASS_TENSOR and meta.plugin_data.plugin_name == plugin]
        decoded = {}
        for tag in listed:
            try:
                samples = _decoded(self._multiplexer.Tensors(run, tag))
            except KeyError:  # gone since it was listed: the provider says what it says of it
                samples = None
            if samples is not None:
                decoded[tag] = samples
        return listed, decoded


class _PausedCollector:
    """Pauses Python's cyclic garbage collector while any run is read or analysed.

    A run of many tags makes hundreds of thousands of small objects (decoded
    samples, rows, tables, the analysis' per-row work) that live long enough for
    the collector to promote them to its oldest generation; promoting that many
    makes it run full collections, each a pass over everything TensorBoard loaded
    (about half a second per collection at 400,000 histograms), and its young
    collections pass over them again and again. They are freed by their
    reference counts, cycles or not, so the collector has nothing to find among
    them; once resumed it sees only what the run model keeps. Paused while any
    thread is in, resumed when the last one leaves, and only if it was running.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._inside += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._resume:
                gc.enable()


collector_paused = _PausedCollector()


def _write_order(listing: Mapping) -> List[str]:
    """Tags by the wall time of their last value, then by name: the same under both loaders."""
    def key(tag: str) -> tuple:
        wall = listing[tag].max_wall_time
        return (wall if wall is not None else float("-inf"), tags_lib.natural_key(tag))

    return sorted(listing, key=key)


def run_names(listings: Mapping[str, Mapping]) -> List[str]:
    """The runs a `Reader.listings` answer names, in TensorBoard's order."""
    seen = set()
    for listing in listings.values():
        seen.update(listing)
    return sorted(seen, key=sweep_lib.run_key)


def layer_runs(listings: Mapping[str, Mapping]) -> List[str]:
    """The runs a `Reader.listings` answer lists histograms or gradhealth statistics for: those that may hold layers."""
    return sorted({run for plugin in ("histograms", metadata.PLUGIN_NAME)
                   for run, tags in listings.get(plugin, {}).items() if tags}, key=sweep_lib.run_key)


def _bucket_values(result: Mapping[str, Sequence]) -> int:
    """How many numbers a read of histogram tags holds (the last sample's size for each sample of a list)."""
    count = 0
    for datums in result.values():
        if isinstance(datums, tables.Samples):
            count += int(datums.values.size)
        elif datums:
            count += len(datums) * max(int(np.size(datums[-1].numpy)), 1)
    return count


def _vector_values(result: Mapping[str, Sequence]) -> int:
    """How many numbers a read of gradhealth summaries holds, at a whole vector per sample."""
    return sum(len(datums) for datums in result.values()) * metadata.VECTOR_WIDTH


def _by_step(datums: Sequence) -> List:
    return tables.last_per_step(datums)


def _shared_steps(tables: Dict[str, tuple]) -> Dict[str, tuple]:
    """`_read_own`'s tables with equal step arrays held once, read-only: the tags of a run are
    mostly logged at the same steps, and a long run's steps are otherwise eight bytes a cell."""
    held: Dict[bytes, np.ndarray] = {}
    for tag, (steps, values) in tables.items():
        shared = held.setdefault(steps.tobytes(), steps)
        shared.flags.writeable = False
        tables[tag] = (shared, values)
    return tables


def _stacked_vectors(datums: Sequence, width: int) -> Optional[np.ndarray]:
    """The datums' tensors as one (steps x width) array, in one numpy call, when each is a vector of
    one of `format.VECTOR_WIDTHS` numbers (what gradhealth writes); None otherwise."""
    try:
        stacked = datums.values if isinstance(datums, tables.Samples) else np.asarray([d.numpy for d in datums])
    except ValueError:  # tensors of different shapes
        return None
    if stacked.ndim != 2 or stacked.shape[1] not in metadata.VECTOR_WIDTHS or stacked.dtype.kind not in "biuf":
        return None
    return stacked[:, :width]


class _Unreadable:
    """What the tag cache keeps for a histogram tag whose tensors are not numbers."""

    def __init__(self, why: str) -> None:
        self.why = why


def _fingerprint(listings: Mapping[str, Mapping], run: str) -> tuple:
    """What the provider lists for a run: every tag's last step and wall time, per plugin."""
    return tuple((plugin, tag, ts.max_step, ts.max_wall_time)
                 for plugin, listing in sorted(listings.items())
                 for tag, ts in sorted(listing.get(run, {}).items()))


# What `Reader.listings` asks the provider for: per plugin, the data class its listing keeps
# (``list_tensors`` keeps tensors, ``list_scalars`` scalars; the provider's `_index` filter).
_LISTED_CLASSES = {"histograms": summary_pb2.DATA_CLASS_TENSOR, "scalars": summary_pb2.DATA_CLASS_SCALAR,
                   metadata.PLUGIN_NAME: summary_pb2.DATA_CLASS_TENSOR}
# Listings kept with what the multiplexer held when they were made (`_Held`).
_KEPT_LISTINGS = 64


def _keep(cache: "collections.OrderedDict", key, value, limit: int) -> None:
    """Stores `value` as the newest entry of an LRU `cache` of at most `limit` entries."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)


class _Held:
    """What the Python loader's multiplexer holds of some runs' listed tags, told without listing them.

    The provider's listing of a tag (last step, last wall time, metadata) visits
    every kept event in Python: 60-120 ms a request for 200 tags of 1,000 steps.
    It can only change when the tag's kept events do, or its run's accumulator
    (metadata is kept as first seen, per accumulator). Per run: the accumulator
    (by weak reference: equal only while it is the same one alive), its most
    recent step and wall time; per listed tag (the provider's plugin and data
    class filter): how many events are kept and which object is the last.

    That is exact, for these are the only ways kept events change: an added event
    is a new object and always the last one kept (TensorBoard's reservoir keeps
    the newest last; a full one drops another or the previous last), and a purge
    only removes events, so the count falls unless events are added after it.
    An event added and then purged again leaves the same events but not the
    same most recent step and wall time. The last events are held (one per tag)
    so that their ids name them while this is kept.
    """

    __slots__ = ("key", "_events")

    def __init__(self, multiplexer, runs: Optional[Sequence[str]]) -> None:
        names = sorted(multiplexer.Runs()) if runs is None else sorted(set(runs))
        key, events = [], []
        for run in names:
            try:
                acc = multiplexer.GetAccumulator(run)
            except KeyError:  # no such run (any more)
                key.append((run, None))
                continue
            tags = []
            for tag, meta in acc.AllSummaryMetadata().items():
                if _LISTED_CLASSES.get(meta.plugin_data.plugin_name) != meta.data_class:
                    continue
                count, last = _kept_count_and_last(acc, tag)
                events.append(last)
                tags.append((tag, count, id(last)))
            key.append((run, weakref.ref(acc), getattr(acc, "most_recent_step", None),
                        getattr(acc, "most_recent_wall_time", None), tuple(tags)))
        self.key = tuple(key)
        self._events = events

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Held) and self.key == other.key

    __hash__ = None


# The one key of a tag's reservoir in the Python loader's accumulator.
_TENSOR_RESERVOIR_KEY = getattr(plugin_event_accumulator, "_TENSOR_RESERVOIR_KEY", ".")


def _kept_count_and_last(acc, tag: str) -> Tuple[Optional[int], object]:
    """(how many events `acc` keeps of `tag`, the last one); (None, None) for a tag without tensors.

    Read from the tag's reservoir bucket under its lock: ``acc.Tensors(tag)`` copies the
    list of every kept event, per tag and per request (0.23 s a request for 1,000 tags
    of 5,000 steps, `bench/bench_held.py`), to take two numbers of it. A loader laid out otherwise is asked
    through ``Tensors``.
    """
    bucket = getattr(getattr(acc, "tensors_by_tag", {}).get(tag), "_buckets", {}).get(_TENSOR_RESERVOIR_KEY)
    lock, items = getattr(bucket, "_mutex", None), getattr(bucket, "items", None)
    if lock is None or not isinstance(items, list):
        try:
            kept = acc.Tensors(tag)
        except KeyError:  # metadata without a tensor: listed as the provider lists it (None)
            return None, None
        return len(kept), kept[-1] if kept else None
    with lock:
        return len(items), items[-1] if items else None


class Reader:
    """Turns a data provider's histograms and scalars into `runs.RunData`."""

    def __init__(self, data_provider: provider.DataProvider, tag_rules: Sequence[tags_lib.UserRule] = (),
                 samples: Optional[Mapping[str, Optional[float]]] = None, multiplexer=None) -> None:
        """``samples``: samples per tag the loader keeps, by plugin name, where it is known
        (0 for every sample); it rules out sampling for tags holding fewer steps.

        ``multiplexer``: the Python loader's ``EventMultiplexer`` (``TBContext.multiplexer``),
        read directly when it is the one the data provider reads (see `_read_tensors`).
        """
        self._provider = data_provider
        # Any other provider (the Rust data server's, a remote one, a wrapper) is read through.
        is_its_own = (isinstance(data_provider, multiplexer_provider.MultiplexerDataProvider)
                      and getattr(data_provider, "_multiplexer", None) is multiplexer)
        self._multiplexer = _Multiplexer(multiplexer) if multiplexer is not None and is_its_own else None
        # Tells an unchanged run without listing it (`_Held`); None under any other provider.
        self._held_in = multiplexer if self._multiplexer is not None else None
        # (experiment, runs or None) -> (`_Held` when listed, the listing).
        self._kept_listings: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        is_grpc = isinstance(data_provider, grpc_provider.GrpcDataProvider)
        stub = getattr(data_provider, "_stub", None) if is_grpc else None
        self._grpc = _Grpc(stub) if stub is not None else None
        # Daemon threads (`workers`): a slow answer from the provider must not hold up TensorBoard's exit.
        self._read_pool = Workers(_READ_THREADS, "gradhealth-read")
        # These threads and TensorBoard's share a few heaps, or each keeps what it once held (`heap`).
        heap.tune_heaps()
        self._tag_rules = list(tag_rules)
        self._samples = {name: (np.inf if not count else float(count)) for name, count in (samples or {}).items()
                         if count is not None}
        self._lock = threading.Lock()
        self._cache: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        # Per model built, the version of the data it was built from (`version`).
        self._versions: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        # (experiment, run) -> (its tags in write order, how they were classified).
        self._classified: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self.tag_cache = TagCache()
        self.bucket_cache = TagCache(_BUCKET_CACHE_BYTES)
        self._listing_pool = Workers(_LISTING_THREADS, "gradhealth-listing")

    def list_runs(self, ctx, experiment_id: str) -> List[str]:
        """Runs with histograms, scalars or gradhealth summaries, in TensorBoard's order."""
        return run_names(self.listings(ctx, experiment_id))

    def hparams(self, ctx, experiment_id: str) -> Dict[str, hparams_lib.Session]:
        """Each run's hyperparameters (`hparams.assign`), from the listing of the HParams plugin's summaries.

        The listing carries each session start info in its metadata, so nothing is read
        but the listings; runs without hyperparameters are left out.
        """
        listed = self._provider.list_tensors(ctx, experiment_id=experiment_id,
                                             plugin_name=hparams_lib.PLUGIN_NAME, run_tag_filter=None)
        sessions = {}
        for run, tags in listed.items():
            ts = tags.get(hparams_lib.SESSION_START_TAG)
            values = None if ts is None else hparams_lib.parse_session_start(ts.plugin_content)
            if values is not None:
                sessions[run] = values
        if not sessions:
            return {}
        listings = self._listings(ctx, experiment_id, run=None)
        data_runs = set()
        for listing in listings.values():
            data_runs.update(listing)
        own_data = set(listings["histograms"]) | set(listings[metadata.PLUGIN_NAME])
        return hparams_lib.assign(sorted(data_runs, key=tags_lib.natural_key), sessions, own_data)

    def run_data(self, ctx, experiment_id: str, run: str,
                 listings: Optional[Mapping[str, Mapping]] = None) -> runs.RunData:
        """The run's model, rebuilt only when what the provider lists for it changed.

        `listings`: what `listings` gave for runs among them this one, where the caller
        reads several runs (a training's ranks): the provider is then asked once for all.
        """
        if listings is None:
            listings = self._listings(ctx, experiment_id, run=run)
        if not any(run in listing for listing in listings.values()):
            raise runs.NotFound(f"no run named {run!r}")
        key = (experiment_id, run)
        fingerprint = _fingerprint(listings, run)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] == fingerprint:
                self._cache.move_to_end(key)
                return cached[1]
        with collector_paused:
            data = self._build(ctx, experiment_id, run, listings)
        version = hashlib.blake2b(repr(fingerprint).encode(), digest_size=8).hexdigest()
        with self._lock:
            _keep(self._cache, key, (fingerprint, data), _CACHE_RUNS)
            self._versions[data] = version
        return data

    def held(self, experiment_id: str, run: str) -> Optional[runs.RunData]:
        """The run's model as `run_data` last gave it, not asking whether it changed since; None if not held."""
        with self._lock:
            cached = self._cache.get((experiment_id, run))
        return None if cached is None else cached[1]

    def version(self, data: runs.RunData) -> Optional[str]:
        """Names the data `data` was built from (what the provider listed of its run: every tag's last
        step and wall time), the same in any process that reads the same data; None for a model this
        reader did not build."""
        with self._lock:
            return self._versions.get(data)

    def versions(self, ctx, experiment_id: str) -> Dict[str, tuple]:
        """Every run's data version, from one listing: equal while what `run_data` would read is unchanged."""
        listings = self._listings(ctx, experiment_id, run=None)
        names = set()
        for listing in listings.values():
            names.update(listing)
        return {run: _fingerprint(listings, run) for run in names}

    def _listings(self, ctx, experiment_id: str, run: Optional[str]) -> Dict[str, Mapping]:
        return self.listings(ctx, experiment_id, None if run is None else [run])

    def listings(self, ctx, experiment_id: str, runs: Optional[Sequence[str]] = None) -> Dict[str, Mapping]:
        """What the provider lists of these runs (None: every run): plugin -> run -> tag -> time series.

        Under the Python loader, the last listing of the same runs is answered again
        while its multiplexer holds for them what it held then (`_Held`): a warm
        request lists nothing. The answer is shared: callers must not change it.
        """
        if self._held_in is None:
            return self._list(ctx, experiment_id, runs)
        key = (experiment_id, None if runs is None else tuple(sorted(set(runs))))
        held = _Held(self._held_in, runs)
        with self._lock:
            kept = self._kept_listings.get(key)
            if kept is not None and kept[0] == held:
                self._kept_listings.move_to_end(key)
                return kept[1]
        listed = self._list(ctx, experiment_id, runs)
        # Kept only if nothing changed while it was listed: it is then what `held` holds.
        if _Held(self._held_in, runs) == held:
            with self._lock:
                _keep(self._kept_listings, key, (held, listed), _KEPT_LISTINGS)
        return listed

    def _list(self, ctx, experiment_id: str, runs: Optional[Sequence[str]]) -> Dict[str, Mapping]:
        flt = provider.RunTagFilter(runs=list(runs)) if runs is not None else None
        asks = {plugin: (self._provider.list_scalars if plugin == "scalars" else self._provider.list_tensors)
                for plugin in ("histograms", "scalars", metadata.PLUGIN_NAME)}
        # All three at once (see _LISTING_THREADS): a request waits for the slowest, not for their sum.
        pending = {plugin: self._listing_pool.submit(ask, ctx, experiment_id=experiment_id, plugin_name=plugin,
                                                     run_tag_filter=flt)
                   for plugin, ask in asks.items()}
        return {plugin: future.result() for plugin, future in pending.items()}

    def run_names(self, ctx, experiment_id: str) -> List[str]:
        """Every run TensorBoard holds, whatever its data, without listing a tag (cheap under both loaders)."""
        return [r.run_name for r in self._provider.list_runs(ctx, experiment_id=experiment_id)]

    def _build(self, ctx, experiment_id: str, run: str, listings: Mapping[str, Mapping]) -> runs.RunData:
        # The Python loader lists tags in the order they were first written, the Rust data
        # server alphabetically; answers must not depend on which one TensorBoard uses.
        # Ordering by last write keeps the writer's order for tags written every step.
        own_listing = listings[metadata.PLUGIN_NAME].get(run, {})
        scalar_listing = dict(listings["scalars"].get(run, {}))
        # The record an integration's stop_on wrote: why training stopped, in its description.
        stop = scalar_listing.pop(metadata.STOP_TAG, None)
        run_tags = self._classify(experiment_id, run, _write_order(listings["histograms"].get(run, {})),
                                  _write_order(scalar_listing),
                                  {tag: own_listing[tag].plugin_content for tag in _write_order(own_listing)})
        reads = self._read(ctx, experiment_id, run, run_tags, listings)
        # A tag a restart purged every event of is listed without a last step.
        max_steps = [ts.max_step for listing in listings.values() for ts in listing.get(run, {}).values()
                     if ts.max_step is not None]
        data = runs.build_run(run, run_tags, reads, max(max_steps) if max_steps else None)
        if stop is not None:
            data.stopped = {"step": int(stop.max_step), "message": stop.description or ""}
        return data

    def _classify(self, experiment_id: str, run: str, hist_tags: List[str], scalar_tags: List[str],
                  own_contents: Dict[str, bytes]) -> runs.RunTags:
        """`runs.classify_run_tags`, again only when the run's tags (or their write order) changed.

        A growing run lists the same tags at every reload: its thousands of names are
        not sorted into layers and roles again for each new step.
        """
        key = (tuple(hist_tags), tuple(scalar_tags), tuple(own_contents.items()))
        with self._lock:
            cached = self._classified.get((experiment_id, run))
            if cached is not None and cached[0] == key:
                return cached[1]
        run_tags = runs.classify_run_tags(hist_tags, scalar_tags, own_contents, self._tag_rules)
        with self._lock:
            _keep(self._classified, (experiment_id, run), (key, run_tags), _CACHE_RUNS)
        return run_tags

    def _read(self, ctx, experiment_id: str, run: str, run_tags: runs.RunTags,
              listings: Mapping[str, Mapping]) -> runs.RunReads:
        """Reads what the run's classified tags need, and how much of it TensorBoard's sampling dropped."""
        walls: Dict[tuple, np.ndarray] = {}
        unreadable: Dict[str, str] = {}
        unreadable_steps: Dict[str, runs.UnreadableSteps] = {}
        own = self._read_own(ctx, experiment_id, run, run_tags.own, walls, unreadable, unreadable_steps)
        histograms = self._histogram_tables(ctx, experiment_id, run, run_tags.histograms,
                                            listings["histograms"].get(run, {}), walls, unreadable, unreadable_steps)
        diagnosed = run_tags.diagnosed()
        exact = self._read_layer_scalars(ctx, experiment_id, run, [i.tag for i in run_tags.layer_scalars] + diagnosed,
                                         walls)
        scalar_series = {tag: exact.pop(tag) for tag in diagnosed if tag in exact}
        reads = runs.RunReads(histograms=histograms, exact=exact, own=own, scalar_series=scalar_series, sampling={},
                              walls=walls, unreadable=unreadable, unreadable_steps=unreadable_steps)
        kept_steps = reads.kept_steps()
        max_steps = {}
        for plugin, tag in kept_steps:
            ts = listings.get(plugin, {}).get(run, {}).get(tag)
            max_steps[(plugin, tag)] = None if ts is None else ts.max_step
        reads.sampling = runs.tag_sampling(kept_steps, max_steps, self._samples)
        return reads

    def _read_tensors(self, ctx, experiment_id: str, plugin: str, run: str, tags: List[str]) -> Dict[str, Sequence]:
        """Every kept sample of these tensor tags of one run: tag -> datums (a list, or `tables.Samples`).

        Under the Python loader, the tags whose samples `_decoded` can decode together
        are read from the multiplexer, as the provider's ``read_tensors`` reads them:
        only tags of this plugin holding tensors, in the provider's order, each
        sample kept. The provider reads the rest. Through a gRPC data provider (the Rust
        data server), its request is sent as it would send it and answered as it would
        answer (`_Grpc`). Any other provider is read through.
        """
        if self._grpc is not None:
            try:
                return self._grpc.tensors(experiment_id, plugin, run, tags)
            except grpc.RpcError:  # the provider asks again, and says what went wrong as TensorBoard's errors
                return self._provider_tensors(ctx, experiment_id, plugin, run, tags)
        if self._multiplexer is None:
            return self._provider_tensors(ctx, experiment_id, plugin, run, tags)
        listed, decoded = self._multiplexer.tensors(plugin, run, tags)
        rest = [tag for tag in listed if tag not in decoded]
        read = self._provider_tensors(ctx, experiment_id, plugin, run, rest) if rest else {}
        return {tag: decoded[tag] if tag in decoded else read[tag] for tag in listed if tag in decoded or tag in read}

    def _provider_tensors(self, ctx, experiment_id: str, plugin: str, run: str, tags: List[str]) -> Dict[str, list]:
        return self._provider.read_tensors(
            ctx, experiment_id=experiment_id, plugin_name=plugin, downsample=_ALL_SAMPLES,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=tags),
        ).get(run, {})

    def _histogram_tables(self, ctx, experiment_id: str, run: str, infos: List[tags_lib.TagInfo],
                          listing: Mapping, walls: Dict[tuple, np.ndarray], unreadable: Dict[str, str],
                          unreadable_steps: Dict[str, runs.UnreadableSteps]) -> Dict[str, metrics.MetricTable]:
        """Metric tables of histogram tags, reading only the tags whose listing changed; each
        tag's wall times per kept step go into `walls` under ("histograms", tag).

        A tag whose tensors are not numbers, or no histograms at any step, goes to
        `unreadable` (tag -> why) instead; one with some steps that are no histograms
        to `unreadable_steps` as well (`runs.histogram_tag_read`).
        """
        out: Dict[str, metrics.MetricTable] = {}
        found = _Found(out, walls, unreadable, unreadable_steps)
        stale: List[tags_lib.TagInfo] = []
        for info in infos:
            ts = listing[info.tag]
            hit = self.tag_cache.get((experiment_id, run, "histograms", info.tag), (ts.max_step, ts.max_wall_time))
            if hit is None:
                stale.append(info)
            elif isinstance(hit, _Unreadable):
                unreadable[info.tag] = hit.why
            else:
                found.add(info.tag, hit)
        infos_by_tag = {info.tag: info for info in stale}
        for tags, result in self._chunks(ctx, experiment_id, "histograms", run, list(infos_by_tag), _bucket_values):
            self._histogram_chunk(experiment_id, run, [infos_by_tag[tag] for tag in tags], result, listing, found)
            del result
        return out

    def _chunks(self, ctx, experiment_id: str, plugin: str, run: str, tags: List[str], values_of):
        """Yields (tags, what `_read_tensors` read of them), chunk after chunk of `tags`.

        The first chunk is _FIRST_READ_TAGS tags (their size is unknown until then); each
        next one as many as _READ_VALUES allows at the bucket values per tag of the last
        (`values_of` counts them in a read). Through a gRPC provider, the next chunk is asked
        for while the caller works on this one: the data server answers on its own core
        and, while this process waits for it, the wait holds no lock the caller needs.
        """
        size, pending, ahead = _FIRST_READ_TAGS, list(tags), None
        while pending or ahead is not None:
            if ahead is None:
                chunk, pending = pending[:size], pending[size:]
                result = self._read_tensors(ctx, experiment_id, plugin, run, chunk)
            else:
                (chunk, future), ahead = ahead, None
                result = future.result()
            size = int(np.clip(_READ_VALUES * len(chunk) / max(values_of(result), 1), 8, _MAX_READ_TAGS))
            if pending and self._grpc is not None:
                following, pending = pending[:size], pending[size:]
                ahead = (following, self._read_pool.submit(self._read_tensors, ctx, experiment_id, plugin, run,
                                                           following))
            read = values_of(result)
            yield chunk, result
            del result  # one chunk held here at a time, besides the one being read
            heap.freed(read * 8)  # its values at least, decoded

    def _histogram_chunk(self, experiment_id: str, run: str, chunk: List[tags_lib.TagInfo],
                         result: Dict[str, Sequence], listing: Mapping, found: "_Found") -> None:
        """One chunk of tags read (`result`, emptied) into `found` and the tag cache.

        The decoded samples are dropped as soon as their metrics are computed,
        so that one chunk's worth is the most held at a time.
        """
        reads = []
        for info in chunk:
            key = (experiment_id, run, "histograms", info.tag)
            ts = listing[info.tag]
            datums = result.pop(info.tag, [])
            why = runs.not_numbers(datums) or runs.not_histograms(datums)
            if why is not None:
                found.unreadable[info.tag] = why
                # Remembered like a table: an unchanged tag is not read again to find the same.
                self.tag_cache.put(key, (ts.max_step, ts.max_wall_time), _Unreadable(why), len(why))
                continue
            bimodal = info.role == tags_lib.WEIGHT and info.kind in (tags_lib.KIND_KERNEL, tags_lib.KIND_OTHER)
            previous = self.tag_cache.peek(key)
            if isinstance(previous, _Unreadable):  # its text is gone (purged or sampled away): start afresh
                previous = None
            reads.append(tables.TagRead(key, (ts.max_step, ts.max_wall_time), bimodal, datums, previous))
        del result
        for read, entry in zip(reads, tables.compute(reads)):
            self.tag_cache.put(read.key, read.version, entry, entry.nbytes)
            found.add(read.key[-1], entry)

    def histogram_at(self, ctx, experiment_id: str, run: str, tag: str, step: int) -> Optional[np.ndarray]:
        """The ``[k, 3]`` buckets of one histogram at one step (None if the tag has no such step).

        A tag's buckets stay cached, keyed like the metric tables, after one of
        its cells was asked for: the next cells of the layer cost no read.
        """
        listing = self._provider.list_tensors(
            ctx, experiment_id=experiment_id, plugin_name="histograms",
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=[tag]),
        ).get(run, {}).get(tag)
        if listing is None:
            return None
        key = (experiment_id, run, "buckets", tag)
        version = (listing.max_step, listing.max_wall_time)
        by_step = self.bucket_cache.get(key, version)
        if by_step is None:
            by_step = {}
            for datum in _by_step(self._read_tensors(ctx, experiment_id, "histograms", run, [tag]).get(tag, [])):
                by_step[datum.step] = datum.numpy
            self.bucket_cache.put(key, version, by_step, sum(int(getattr(a, "nbytes", 64)) for a in by_step.values()))
        buckets = by_step.get(step)
        # Whatever the tensor holds: a malformed one reads as no buckets, as in the metrics.
        return None if buckets is None else metrics.as_buckets(buckets).copy()

    def histograms_of(self, ctx, experiment_id: str, run: str, tag: str, own: bool = False) -> Dict[int, np.ndarray]:
        """step -> ``[k, 3]`` buckets of every kept step of one tag, cached like `histogram_at`'s.

        `own`: the tag is a gradhealth summary, whose histogram (format version
        2) is rebuilt from its vector (`format.histogram_of`); a step logged
        without one (version 1) is left out.
        """
        plugin = metadata.PLUGIN_NAME if own else "histograms"
        listing = self._provider.list_tensors(
            ctx, experiment_id=experiment_id, plugin_name=plugin,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=[tag]),
        ).get(run, {}).get(tag)
        if listing is None:
            return {}
        key = (experiment_id, run, "own buckets" if own else "buckets", tag)
        version = (listing.max_step, listing.max_wall_time)
        by_step = self.bucket_cache.get(key, version)
        if by_step is None:
            by_step = {}
            for datum in _by_step(self._read_tensors(ctx, experiment_id, plugin, run, [tag]).get(tag, [])):
                if not own:
                    by_step[datum.step] = datum.numpy
                    continue
                try:
                    vector = np.asarray(datum.numpy, dtype=np.float64)
                except (TypeError, ValueError):  # text where numbers belong: no histogram
                    vector = None
                # A step whose vector is not the format's is no data (`_own_tables`): no histogram either.
                buckets = (None if vector is None or metadata.vector_problem(vector.shape) is not None
                           else metadata.histogram_of(vector))
                if buckets is not None:
                    by_step[datum.step] = buckets
            self.bucket_cache.put(key, version, by_step, sum(int(getattr(a, "nbytes", 64)) for a in by_step.values()))
        # Whatever the tensor holds: a malformed one reads as no buckets, as in the metrics.
        return {step: metrics.as_buckets(b) for step, b in by_step.items()}

    def _read_own(self, ctx, experiment_id: str, run: str, infos: List[tags_lib.TagInfo],
                  walls: Dict[tuple, np.ndarray], unreadable: Dict[str, str],
                  unreadable_steps: Dict[str, runs.UnreadableSteps]) -> Dict[str, tuple]:
        """gradhealth summaries: tag -> (steps, {metric: exact values}); wall times into `walls`;
        tags whose tensors are not numbers go to `unreadable` (tag -> why), those read but for
        some steps to `unreadable_steps`."""
        if not infos:
            return {}
        out: Dict[str, tuple] = {}
        # In chunks, as histograms are read: the Rust data server answers one read in one gRPC
        # message, refused past 256 MB (1,000 tags of 2,500 steps each are 1.2 GB).
        for _, result in self._chunks(ctx, experiment_id, metadata.PLUGIN_NAME, run, [i.tag for i in infos],
                                      _vector_values):
            self._own_tables(result, out, walls, unreadable, unreadable_steps)
            del result
        return _shared_steps(out)

    def _own_tables(self, result: Mapping[str, list], out: Dict[str, tuple], walls: Dict[tuple, np.ndarray],
                    unreadable: Dict[str, str], unreadable_steps: Dict[str, runs.UnreadableSteps]) -> None:
        """One read of gradhealth summaries into `out`, `walls`, `unreadable` and `unreadable_steps`
        (see `_read_own`)."""
        width = len(metadata.FIELDS)
        for tag, datums in result.items():
            steps = (datums.steps if isinstance(datums, tables.Samples)
                     else np.fromiter((d.step for d in datums), dtype=np.int64, count=len(datums)))
            vectors = _stacked_vectors(datums, width) if np.all(steps[1:] > steps[:-1]) else None
            if vectors is None:  # anything but one whole vector of numbers per step, in step order
                why = runs.not_numbers(datums) or runs.not_vectors(datums)
                if why is not None:
                    unreadable[tag] = why
                    continue
                datums = _by_step(datums)
                steps = np.array([d.step for d in datums], dtype=np.int64)
                vectors = np.full((len(datums), width), np.nan)
                bad = []
                for i, d in enumerate(datums):  # one small vector per step; one of another length is no data
                    vector = np.asarray(d.numpy, dtype=np.float64)
                    problem = metadata.vector_problem(vector.shape)
                    if problem is None:
                        vectors[i] = vector[:width]
                    else:
                        bad.append((d.step, f"the tensor at step {d.step} {problem}"))
                if bad:  # some steps, not all (those are unreadable above): said as a histogram tag's are
                    unreadable_steps[tag] = runs.UnreadableSteps(
                        steps=len(bad), of=len(datums), first_step=bad[0][0], why=bad[0][1], holds="statistics vector")
            out[tag] = (steps, metadata.vectors_to_table_values(vectors))
            walls[(metadata.PLUGIN_NAME, tag)] = (
                datums.wall_times if isinstance(datums, tables.Samples)
                else np.array([d.wall_time for d in datums], dtype=np.float64))

    def _read_layer_scalars(self, ctx, experiment_id: str, run: str, tags: List[str],
                            walls: Dict[tuple, np.ndarray]) -> Dict[str, tuple]:
        """Scalar tags: tag -> (steps, values), by step; wall times into `walls`."""
        if not tags:
            return {}
        result = self._provider.read_scalars(
            ctx, experiment_id=experiment_id, plugin_name="scalars", downsample=_ALL_SAMPLES,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=tags),
        ).get(run, {})
        out = {}
        for tag, datums in result.items():
            datums = _by_step(datums)
            out[tag] = (np.array([d.step for d in datums], dtype=np.int64),
                        np.array([d.value for d in datums], dtype=np.float64))
            walls[("scalars", tag)] = np.array([d.wall_time for d in datums], dtype=np.float64)
        return out
