"""Scale benchmark: gradhealth's routes next to TensorBoard's own on a large generated logdir.

    python bench/bench_scale.py            # 300 layers x 3 roles x 1,000 steps (TF2) + a PyTorch-format run
    python bench/bench_scale.py --small    # a quick run of every measurement on a small logdir

Prints figures; it is not a test and asserts nothing about time. See bench/README.md
for what each figure means and the targets it is compared with.

For each loader (``--load_fast=false``: TensorBoard's Python loader;
``--load_fast=true``: the Rust data server) it starts one TensorBoard process on
127.0.0.1 twice: once without the gradhealth plugin, once with it. Both are
launched by this script (``_serve`` below) through ``tensorboard.program`` with
the default plugins, so they differ only by ``GradHealthLoader``. Both also get a
small probe plugin (``ghbench``) that reports what the data provider holds, times
the provider's own ``read_tensors`` in the server process (the floor no plugin
can go under) and, with gradhealth loaded, drops gradhealth's caches so a cold
request can be repeated.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, List

import numpy as np

HOST = "127.0.0.1"
REPO = pathlib.Path(__file__).resolve().parents[1]
TF2_RUN = "tf2"
TORCH_RUN = "torch"
PROBE = "ghbench"
ROLES = ("gradient", "weight", "activation")
# Direct connections only: loopback requests must not go through a proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# --------------------------------------------------------------------------- event files
#
# TensorBoard's EventFileWriter frames records with a pure-Python CRC32C (about
# 0.1 ms per 800-byte record: 90 s for this logdir). The framing below is the
# same (checked against RecordWriter at start-up) with the CRC computed for a
# whole batch of records at once in numpy.

def _crc_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[i] = c
    return table


_CRC_TABLE = _crc_table()


def _masked_crc32c(records: List[bytes]) -> np.ndarray:
    """TFRecord's masked CRC32C of every record, one pass over the longest."""
    n = len(records)
    lengths = np.fromiter((len(r) for r in records), dtype=np.int64, count=n)
    width = int(lengths.max()) if n else 0
    if n and np.all(lengths == width):
        buf = np.frombuffer(b"".join(records), dtype=np.uint8).reshape(n, width)
    else:
        buf = np.zeros((n, width), dtype=np.uint8)
        for i, r in enumerate(records):
            buf[i, :len(r)] = np.frombuffer(r, dtype=np.uint8)
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    if np.all(lengths == width):
        for i in range(width):
            crc = _CRC_TABLE[(crc ^ buf[:, i]) & 0xFF] ^ (crc >> 8)
    else:
        for i in range(width):
            step = _CRC_TABLE[(crc ^ buf[:, i]) & 0xFF] ^ (crc >> 8)
            crc = np.where(i < lengths, step, crc)
    crc ^= np.uint32(0xFFFFFFFF)
    return (((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)).astype(np.uint32)


def frame_records(records: List[bytes]) -> bytes:
    """TFRecord framing: length, masked CRC of the length, data, masked CRC of the data."""
    if not records:
        return b""
    headers = [struct.pack("<Q", len(r)) for r in records]
    header_crcs = _masked_crc32c(headers)
    data_crcs = _masked_crc32c(records)
    out = []
    for header, hcrc, record, dcrc in zip(headers, header_crcs.tolist(), records, data_crcs.tolist()):
        out += [header, struct.pack("<I", hcrc), record, struct.pack("<I", dcrc)]
    return b"".join(out)


def _check_framing() -> None:
    from tensorboard.summary.writer import record_writer

    class Sink:
        def __init__(self):
            self.data = b""

        def write(self, b):
            self.data += b

    records = [b"", b"x", os.urandom(37), os.urandom(300)]
    sink = Sink()
    writer = record_writer.RecordWriter(sink)
    for r in records:
        writer.write(r)
    assert frame_records(records) == sink.data, "batched TFRecord framing differs from RecordWriter's"


def _new_event_file(run_dir: pathlib.Path) -> pathlib.Path:
    """An event file named and headed as TensorBoard's EventFileWriter does, without importing TensorFlow.

    (EventFileWriter opens its file through ``tf.io.gfile``, which imports
    TensorFlow when it is installed: seconds, and a dependency this script avoids.)
    """
    from tensorboard.compat.proto import event_pb2

    path = run_dir / f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.0"
    header = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
    path.write_bytes(frame_records([header.SerializeToString()]))
    return path


# --------------------------------------------------------------------------- synthetic training runs

def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): enough to shape synthetic counts."""
    s = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = (((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592
    y = 1.0 - poly * t * np.exp(-x * x)
    return s * y


def _normal_counts(edges: np.ndarray, mean: np.ndarray, std: np.ndarray, n: int) -> np.ndarray:
    """Counts of n normal values per bucket; edges (S, K+1), mean and std (S,)."""
    cdf = 0.5 * (1 + _erf((edges - mean[:, None]) / (std[:, None] * math.sqrt(2))))
    counts = np.diff(cdf, axis=1) * n
    return np.round(counts)


class TagSeries:
    """How one synthetic tensor evolves: mean and std per step, its size and shape."""

    def __init__(self, tag: str, role: str, size: int, mean: np.ndarray, std: np.ndarray, relu: bool = False):
        self.tag, self.role, self.size, self.mean, self.std, self.relu = tag, role, size, mean, std, relu


def _tf2_series(layers: int, steps: int, rng) -> List[TagSeries]:
    """300 dense layers' gradients, weights and ReLU activations; a few layers misbehave."""
    t = np.arange(steps, dtype=np.float64)
    out = []
    for i in range(layers):
        fan = 64 + 16 * (i % 8)
        size = fan * fan
        w_std = math.sqrt(2.0 / fan) * (1 + 0.2 * t / steps)
        scale = 1e-3 * (0.5 + rng.random())
        g_std = scale * (1 + 3 * np.exp(-t / 50)) * (1 + 0.3 * rng.standard_normal(steps)).clip(0.3)
        g_mean = 0.05 * g_std * rng.standard_normal(steps)
        if i == layers // 3:  # explodes in the last tenth
            g_std = np.where(t > 0.9 * steps, g_std * 1e7, g_std)
        if i == layers // 2:  # vanishes after the first third
            g_std = np.where(t > steps / 3, 1e-9, g_std)
            g_mean = np.where(t > steps / 3, 0.0, g_mean)
        out.append(TagSeries(f"gradients/layer_{i}/kernel", "gradient", size, g_mean, g_std))
        out.append(TagSeries(f"weights/layer_{i}/kernel", "weight", size, np.zeros(steps) + 1e-3, w_std))
        act_mean = np.full(steps, -0.6 if i == 2 * layers // 3 else 0.0)  # one layer mostly dead
        out.append(TagSeries(f"activations/layer_{i}", "activation", 128 * fan, act_mean, np.ones(steps), relu=True))
    return out


def _tf2_buckets(series: TagSeries, step_slice: slice, buckets: int) -> np.ndarray:
    """(S, buckets, 3) float64 as TF2's tf.summary.histogram writes them: equal buckets over [min, max]."""
    mean, std = series.mean[step_slice], series.std[step_slice]
    lo = mean - 3.5 * std
    hi = mean + 3.5 * std
    if series.relu:
        lo = np.zeros_like(lo)
        hi = np.maximum(hi, 1e-6)
    frac = np.arange(buckets + 1) / buckets
    edges = lo[:, None] + (hi - lo)[:, None] * frac
    counts = _normal_counts(edges, mean, std, series.size)
    if series.relu:
        below = 0.5 * (1 + _erf((0 - mean) / (std * math.sqrt(2))))
        counts[:, 0] += np.round(below * series.size)
    out = np.empty((len(mean), buckets, 3))
    out[:, :, 0] = edges[:, :-1]
    out[:, :, 1] = edges[:, 1:]
    out[:, :, 2] = counts
    return out


def _torch_bins() -> np.ndarray:
    """torch.utils.tensorboard's default histogram bins (TensorFlow's v1 exponential grid)."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return np.array([-x for x in pos[::-1]] + [0.0] + pos)


def _torch_histogram(edges: np.ndarray, mean: float, std: float, n: int, relu: bool):
    """A v1 HistogramProto as torch's make_histogram builds it: the support of the counts, ~500 buckets."""
    from tensorboard.compat.proto import summary_pb2

    counts = _normal_counts(edges[None, :], np.array([mean]), np.array([std]), n)[0]
    if relu:
        zero = int(np.searchsorted(edges, 0.0))
        below = counts[:zero].sum()
        counts[:zero] = 0
        counts[zero] += below
    nz = np.nonzero(counts)[0]
    start, end = int(nz[0]), int(nz[-1]) + 1
    kept = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = edges[start:end + 1]
    lo, hi = (0.0 if relu else mean - 3.5 * std), mean + 3.5 * std
    total = float(kept.sum())
    return summary_pb2.HistogramProto(
        min=lo, max=hi, num=total, sum=mean * total, sum_squares=(std * std + mean * mean) * total,
        bucket_limit=limits.tolist(), bucket=kept.tolist())


def _torch_series(layers: int, steps: int, rng) -> List[TagSeries]:
    t = np.arange(steps, dtype=np.float64)
    out = []
    for i in range(layers):
        fan = 128
        g_std = 1e-3 * (0.5 + rng.random()) * (1 + 3 * np.exp(-t / 30))
        out.append(TagSeries(f"grads/fc{i}.weight", "gradient", fan * fan, np.zeros(steps), g_std))
        out.append(TagSeries(f"weights/fc{i}.weight", "weight", fan * fan, np.zeros(steps),
                             math.sqrt(2.0 / fan) * (1 + 0.1 * t / steps)))
        out.append(TagSeries(f"activations/fc{i}", "activation", 64 * fan, np.zeros(steps), np.ones(steps), relu=True))
    return out


class RunWriter:
    """Appends synthetic histogram events, step after step, to one run's event file."""

    def __init__(self, run_dir: pathlib.Path, series: List[TagSeries], fmt: str, buckets: int,
                 start_wall: float = 1.7e9, step_seconds: float = 0.5):
        run_dir.mkdir(parents=True, exist_ok=True)
        existing = sorted(p for p in run_dir.iterdir() if "tfevents" in p.name)
        self.path = existing[-1] if existing else _new_event_file(run_dir)
        self.series, self.fmt, self.buckets = series, fmt, buckets
        self.start_wall, self.step_seconds = start_wall, step_seconds
        self._bins = _torch_bins() if fmt == "v1" else None

    def write_steps(self, first: int, last: int, first_ever: bool, chunk: int = 25) -> int:
        """Writes steps [first, last) of every tag; returns the number of events."""
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
        from tensorboard.plugins.histogram import metadata as hist_metadata

        meta = hist_metadata.create_summary_metadata(display_name="", description="")
        dims = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=self.buckets),
                                                      tensor_shape_pb2.TensorShapeProto.Dim(size=3)])
        written = 0
        with open(self.path, "ab") as f:
            for lo in range(first, last, chunk):
                hi = min(lo + chunk, last)
                arrays = ([_tf2_buckets(s, slice(lo, hi), self.buckets) for s in self.series]
                          if self.fmt == "tf2" else None)
                records = []
                for step in range(lo, hi):
                    wall = self.start_wall + step * self.step_seconds
                    for j, s in enumerate(self.series):
                        value = summary_pb2.Summary.Value(tag=s.tag)
                        if first_ever and step == first and self.fmt == "tf2":
                            # TF2 writes a tag's metadata with its first event only; v1 histograms carry none.
                            value.metadata.CopyFrom(meta)
                        if self.fmt == "tf2":
                            value.tensor.CopyFrom(tensor_pb2.TensorProto(
                                dtype=2, tensor_shape=dims, tensor_content=arrays[j][step - lo].tobytes()))
                        else:
                            value.histo.CopyFrom(_torch_histogram(
                                self._bins, float(s.mean[step]), float(s.std[step]), s.size, s.relu))
                        # Tags of one step written layer after layer, as a training loop does.
                        event = event_pb2.Event(wall_time=wall + j * 1e-4, step=step,
                                                summary=summary_pb2.Summary(value=[value]))
                        records.append(event.SerializeToString())
                f.write(frame_records(records))
                written += len(records)
        return written


def extend_series(series: List[TagSeries], steps: int, rng) -> None:
    """Continues every tag's mean and std (flat) up to `steps` steps, for appended data."""
    for s in series:
        extra = steps - len(s.mean)
        if extra > 0:
            s.mean = np.concatenate([s.mean, np.full(extra, s.mean[-1])])
            s.std = np.concatenate([s.std, np.full(extra, s.std[-1])])


def build_logdir(root: pathlib.Path, args) -> Dict[str, "RunWriter"]:
    """Writes (or reuses, when its manifest matches) the benchmark logdir; returns a writer per run."""
    params = {"layers": args.layers, "steps": args.steps, "buckets": args.buckets,
              "torch_layers": args.torch_layers, "torch_steps": args.torch_steps, "version": 2}
    rng = np.random.default_rng(0)
    series = {TF2_RUN: _tf2_series(args.layers, args.steps, rng),
              TORCH_RUN: _torch_series(args.torch_layers, args.torch_steps, rng)}
    manifest = root / "manifest.json"
    reuse = manifest.exists() and json.loads(manifest.read_text()) == params
    if not reuse:
        for run in (TF2_RUN, TORCH_RUN):
            shutil.rmtree(root / run, ignore_errors=True)
        manifest.unlink(missing_ok=True)
    writers = {TF2_RUN: RunWriter(root / TF2_RUN, series[TF2_RUN], "tf2", args.buckets),
               TORCH_RUN: RunWriter(root / TORCH_RUN, series[TORCH_RUN], "v1", 0)}
    if reuse:
        print(f"reusing the logdir {root} ({params})")
        return writers
    for run, steps in ((TF2_RUN, args.steps), (TORCH_RUN, args.torch_steps)):
        t0 = time.perf_counter()
        n = writers[run].write_steps(0, steps, first_ever=True)
        size = writers[run].path.stat().st_size
        print(f"wrote run {run}: {n:,} histogram events, {size / 1e6:,.0f} MB in {time.perf_counter() - t0:.1f} s")
    manifest.write_text(json.dumps(params))
    return writers


# --------------------------------------------------------------------------- the server side (_serve)

_GRADHEALTH_PLUGINS: list = []


def _probe_plugin_class():
    from tensorboard import plugin_util
    from tensorboard.backend import http_util
    from tensorboard.data import provider
    from tensorboard.plugins import base_plugin
    from werkzeug import wrappers

    class Probe(base_plugin.TBPlugin):
        """What the data provider holds, the provider's own read cost, and a cache reset for gradhealth."""

        plugin_name = PROBE

        def __init__(self, context):
            self._context = context
            self._provider = context.data_provider

        def get_plugin_apps(self):
            return {"/status": self._status, "/floor": self._floor, "/reset": self._reset}

        def is_active(self):
            return False

        def frontend_metadata(self):
            return base_plugin.FrontendMetadata(tab_name=PROBE)

        @wrappers.Request.application
        def _status(self, request):
            ctx = plugin_util.context(request.environ)
            eid = plugin_util.experiment_id(request.environ)
            listing = self._provider.list_tensors(ctx, experiment_id=eid,
                                                  plugin_name=request.args.get("plugin", "histograms"))
            out = {run: {"tags": len(tags), "min_last_step": min((ts.max_step for ts in tags.values()), default=None)}
                   for run, tags in listing.items()}
            return http_util.Respond(request, out, "application/json")

        @wrappers.Request.application
        def _floor(self, request):
            ctx = plugin_util.context(request.environ)
            eid = plugin_util.experiment_id(request.environ)
            run = request.args["run"]
            plugin = request.args.get("plugin", "histograms")
            downsample = int(request.args.get("downsample", 1_000_000))
            chunk = int(request.args.get("chunk", 0))
            t0 = time.perf_counter()
            listing = self._provider.list_tensors(ctx, experiment_id=eid, plugin_name=plugin,
                                                  run_tag_filter=provider.RunTagFilter(runs=[run]))
            tags = list(listing.get(run, {}))
            t1 = time.perf_counter()
            datums = 0
            for start in range(0, len(tags), chunk or max(len(tags), 1)):
                result = self._provider.read_tensors(
                    ctx, experiment_id=eid, plugin_name=plugin, downsample=downsample,
                    run_tag_filter=provider.RunTagFilter(runs=[run], tags=tags[start:start + (chunk or len(tags))]))
                datums += sum(len(v) for v in result.get(run, {}).values())
                del result
            t2 = time.perf_counter()
            return http_util.Respond(request, {"list_s": t1 - t0, "read_s": t2 - t1, "tags": len(tags),
                                               "datums": datums}, "application/json")

        @wrappers.Request.application
        def _reset(self, request):
            import gc

            from gradhealth_plugin import plugin as gh_plugin

            # A fresh plugin's state swapped into the serving one: its routes stay bound.
            for instance in _GRADHEALTH_PLUGINS:
                fresh = gh_plugin.GradHealthLoader().load(self._context)
                instance.__dict__.update(fresh.__dict__)
            gc.collect()
            return http_util.Respond(request, {"reset": len(_GRADHEALTH_PLUGINS)}, "application/json")

    return Probe


def _serve(argv: List[str]) -> int:
    """Runs TensorBoard in this process: default plugins, with or without gradhealth, plus the probe."""
    sys.path.insert(0, str(REPO))
    from tensorboard import default, main_lib, program
    from tensorboard.plugins import base_plugin

    from gradhealth_plugin.plugin import GradHealthLoader

    with_plugin = argv[0] == "--with"
    tb_flags = argv[argv.index("--") + 1:]

    class RecordingLoader(GradHealthLoader):
        def load(self, context):
            instance = super().load(context)
            _GRADHEALTH_PLUGINS.append(instance)
            return instance

    plugins = [p for p in default.get_plugins()
               if not (isinstance(p, type) and issubclass(p, GradHealthLoader))]
    plugins.append(_probe_plugin_class())
    if with_plugin:
        plugins.append(RecordingLoader)
    main_lib.global_init()
    tensorboard = program.TensorBoard(plugins=plugins)
    try:
        tensorboard.configure(["tensorboard"] + tb_flags)
    except base_plugin.FlagsError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return tensorboard.main()


# --------------------------------------------------------------------------- the client side

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _proc_status(pid: int) -> Dict[str, int]:
    """VmHWM and VmRSS of a process, in bytes (0 once it is gone)."""
    out = {"VmHWM": 0, "VmRSS": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in out:
                    out[key] = int(rest.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def _children(pid: int) -> List[int]:
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except FileNotFoundError:
        pass
    return kids


class Server:
    """One TensorBoard process on 127.0.0.1, launched by this script, stopped by its pid."""

    def __init__(self, logdir: pathlib.Path, load_fast: str, with_plugin: bool, log_path: pathlib.Path,
                 extra_flags: List[str] = ()):
        self.load_fast, self.with_plugin = load_fast, with_plugin
        self.port = _free_port()
        self.log_path = log_path
        self._log = open(log_path, "wb")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(REPO))
        cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "_serve",
               "--with" if with_plugin else "--without", "--",
               "--logdir", str(logdir), "--host", HOST, "--port", str(self.port), f"--load_fast={load_fast}",
               *extra_flags]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env)

    def get(self, path: str, timeout: float = 900.0, **params) -> tuple:
        """GET a path: (status, body bytes, seconds)."""
        url = f"http://{HOST}:{self.port}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        t0 = time.perf_counter()
        try:
            with _OPENER.open(url, timeout=timeout) as response:
                body = response.read()
                return response.status, body, time.perf_counter() - t0
        except urllib.error.HTTPError as e:
            return e.code, e.read(), time.perf_counter() - t0

    def json(self, path: str, **params):
        status, body, _ = self.get(path, **params)
        if status != 200:
            raise RuntimeError(f"GET {path} {params} -> {status}: {body[:300]!r}")
        return json.loads(body)

    def timed(self, path: str, **params) -> tuple:
        """(seconds, response bytes) of one request that must succeed."""
        status, body, seconds = self.get(path, **params)
        if status != 200:
            raise RuntimeError(f"GET {path} {params} -> {status}: {body[:300]!r}\n{self.log_tail()}")
        return seconds, len(body)

    def timed_answer(self, path: str, **params) -> tuple:
        """(seconds, response bytes, pages) of a whole heatmap answer: its first request and each page its
        `page.next` names, all of which must succeed. An answer past the plugin's cell cap comes in pages and
        the tab asks for every one."""
        seconds, size, pages = 0.0, 0, 0
        while True:
            status, body, s = self.get(path, **params)
            if status != 200:
                raise RuntimeError(f"GET {path} {params} -> {status}: {body[:300]!r}\n{self.log_tail()}")
            seconds, size, pages = seconds + s, size + len(body), pages + 1
            page = json.loads(body).get("page")
            if not page:
                return seconds, size, pages
            params = {**params, **page["next"]}

    def wait_loaded(self, expected: Dict[str, tuple], timeout: float) -> float:
        """Until every run has its tags up to its last step; returns seconds since launch."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"TensorBoard exited with {self.proc.returncode}\n{self.log_tail()}")
            try:
                status, body, _ = self.get(f"/data/plugin/{PROBE}/status", timeout=60)
                if status == 200:
                    seen = json.loads(body)
                    if all(run in seen and seen[run]["tags"] == tags and seen[run]["min_last_step"] == last
                           for run, (tags, last) in expected.items()):
                        return time.monotonic() - self.started
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                pass  # not listening yet
            time.sleep(1.0)
        raise RuntimeError(f"not loaded within {timeout:.0f} s; seen {seen}, expected {expected}\n{self.log_tail()}")

    def memory(self) -> Dict[str, int]:
        """Peak and current RSS of the TensorBoard process and of its data server (load_fast=true)."""
        own = _proc_status(self.proc.pid)
        kids = [_proc_status(k) for k in _children(self.proc.pid)]
        return {"hwm": own["VmHWM"], "rss": own["VmRSS"],
                "child_hwm": sum(k["VmHWM"] for k in kids), "child_rss": sum(k["VmRSS"] for k in kids)}

    def log_tail(self, chars: int = 2000) -> str:
        self._log.flush()
        return self.log_path.read_bytes()[-chars:].decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self._log.close()


def _median(xs: List[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _histogram_route_all(server: Server, run: str, tags: List[str]) -> tuple:
    """TensorBoard's own histograms route over every histogram tag of a run: (seconds, bytes)."""
    total, size = 0.0, 0
    for tag in tags:
        seconds, n = server.timed("/data/plugin/histograms/histograms", run=run, tag=tag)
        total += seconds
        size += n
    return total, size


def _tags_of(series: List[TagSeries]) -> List[str]:
    return [s.tag for s in series]


def _append(writers: Dict[str, RunWriter], run: str, steps: int, extra: int, rng) -> None:
    extend_series(writers[run].series, steps + extra, rng)
    writers[run].write_steps(steps, steps + extra, first_ever=False)


def measure_loader(load_fast: str, logdir: pathlib.Path, writers: Dict[str, RunWriter], args,
                   logs: pathlib.Path) -> dict:
    steps = {TF2_RUN: args.steps, TORCH_RUN: args.torch_steps}
    tags = {run: _tags_of(w.series) for run, w in writers.items()}
    expected = {run: (len(tags[run]), steps[run] - 1) for run in tags}
    extra = max(1, args.steps // 100)
    sizes = {run: w.path.stat().st_size for run, w in writers.items()}
    rng = np.random.default_rng(1)
    r: dict = {"load_fast": load_fast}

    def restore() -> None:
        for run, w in writers.items():
            os.truncate(w.path, sizes[run])
            w.series = series_backup[run]

    series_backup = {run: [TagSeries(s.tag, s.role, s.size, s.mean.copy(), s.std.copy(), s.relu) for s in w.series]
                     for run, w in writers.items()}

    # Without the plugin: TensorBoard's own work on the same data, for memory and the histograms route.
    server = Server(logdir, load_fast, False, logs / f"tb_{load_fast}_without.log")
    try:
        r["load_s_without"] = server.wait_loaded(expected, args.ready_timeout)
        r["mem_loaded_without"] = server.memory()
        for run in tags:
            r[f"hist_route_s_without_{run}"], _ = _histogram_route_all(server, run, tags[run])
        _append(writers, TF2_RUN, steps[TF2_RUN], extra, rng)
        server.wait_loaded({TF2_RUN: (len(tags[TF2_RUN]), steps[TF2_RUN] + extra - 1)}, args.ready_timeout)
        r["mem_without"] = server.memory()
    finally:
        server.stop()
        restore()

    server = Server(logdir, load_fast, True, logs / f"tb_{load_fast}_with.log")
    try:
        r["load_s_with"] = server.wait_loaded(expected, args.ready_timeout)
        r["mem_loaded_with"] = server.memory()
        for run in tags:
            r[f"hist_route_s_{run}"], r[f"hist_route_bytes_{run}"] = _histogram_route_all(server, run, tags[run])
        gh = "/data/plugin/gradhealth/"
        for run in tags:
            r[f"heatmap_cold_{run}"], r[f"heatmap_bytes_{run}"], r[f"heatmap_pages_{run}"] = server.timed_answer(
                gh + "heatmap", run=run, role="gradient", metric="health")
            r[f"heatmap_warm_{run}"] = _median(
                [server.timed_answer(gh + "heatmap", run=run, role="gradient", metric="health")[0]
                 for _ in range(args.repeats)])
            r[f"findings_warm_{run}"] = _median([server.timed(gh + "findings", run=run)[0]
                                                 for _ in range(args.repeats)])
            r[f"heatmap_other_warm_{run}"] = _median(
                [server.timed_answer(gh + "heatmap", run=run, role=role, metric=metric)[0]
                 for role, metric in (("weight", "std"), ("activation", "zero_fraction"), ("gradient", "l2"))])
        r["runs_route_warm"] = _median([server.timed(gh + "runs")[0] for _ in range(args.repeats)])

        # New steps: 1% more on every tag of the TF2 run, appended to its event file.
        t_append = time.monotonic()
        _append(writers, TF2_RUN, steps[TF2_RUN], extra, rng)
        server.wait_loaded({TF2_RUN: (len(tags[TF2_RUN]), steps[TF2_RUN] + extra - 1)}, args.ready_timeout)
        r["reload_s"] = time.monotonic() - t_append
        r["heatmap_after_append"] = server.timed_answer(gh + "heatmap", run=TF2_RUN, role="gradient",
                                                        metric="health")[0]
        r["visible_s"] = time.monotonic() - t_append
        heatmap = server.json(gh + "heatmap", run=TF2_RUN, role="gradient", metric="health")
        r["append_visible"] = heatmap["steps"][-1] == steps[TF2_RUN] + extra - 1
        r["heatmap_warm_after_append"] = _median(
            [server.timed_answer(gh + "heatmap", run=TF2_RUN, role="gradient", metric="health")[0]
             for _ in range(args.repeats)])
        r["mem_with"] = server.memory()

        # The floor and repeated cold requests, on the same (appended) data, after the memory reading:
        # they allocate what gradhealth's own work does not.
        for run in tags:
            # One read_tensors call for every tag, and the same read 64 tags at a time as gradhealth
            # does (fewer live objects at once: less garbage-collector work); the faster is the floor.
            whole = server.json(f"/data/plugin/{PROBE}/floor", run=run)
            chunked = server.json(f"/data/plugin/{PROBE}/floor", run=run, chunk=64)
            r[f"floor_one_call_{run}"], r[f"floor_chunked_{run}"] = whole["read_s"], chunked["read_s"]
            r[f"floor_{run}"] = min(whole["read_s"], chunked["read_s"])
            r[f"list_{run}"] = min(whole["list_s"], chunked["list_s"])
            r[f"datums_{run}"] = whole["datums"]
            server.json(f"/data/plugin/{PROBE}/reset")
            r[f"heatmap_cold_again_{run}"] = server.timed_answer(gh + "heatmap", run=run, role="gradient",
                                                                 metric="health")[0]
            server.json(f"/data/plugin/{PROBE}/reset")
            r[f"findings_cold_{run}"] = server.timed(gh + "findings", run=run)[0]
    finally:
        server.stop()
        restore()
    return r


# --------------------------------------------------------------------------- report

def _mb(n: int) -> str:
    return f"{n / 2 ** 20:,.0f} MB"


def _ratio_line(name: str, value: float, target: float, higher_is_worse: bool = True) -> str:
    met = value <= target if higher_is_worse else value >= target
    return f"  {name:<62} {value:8.3f}   target <= {target:<5g} {'met' if met else 'MISSED'}"


def report(results: List[dict], args) -> None:
    print()
    print(f"logdir: run {TF2_RUN!r} {args.layers} layers x 3 roles x {args.steps} steps, TF2 histograms, "
          f"{args.buckets} buckets; run {TORCH_RUN!r} {args.torch_layers} layers x 3 roles x {args.torch_steps} "
          f"steps, v1 HistogramProto (~500 buckets); warm figures are medians of {args.repeats}")
    for r in results:
        lf = r["load_fast"]
        print()
        print(f"=== --load_fast={lf} ===")
        print(f"  load until every tag is at its last step: {r['load_s_without']:.1f} s without the plugin, "
              f"{r['load_s_with']:.1f} s with it")
        print(f"  {'seconds':<44} {TF2_RUN:>12} {TORCH_RUN:>12}")
        rows = [
            ("histogram samples kept (all tags)", "datums_{}", "{:12,d}"),
            ("provider read_tensors, all tags in one call", "floor_one_call_{}", "{:12.3f}"),
            ("provider read_tensors, 64 tags per call", "floor_chunked_{}", "{:12.3f}"),
            ("provider list_tensors (every request pays it)", "list_{}", "{:12.3f}"),
            ("TensorBoard histograms route, every tag", "hist_route_s_{}", "{:12.3f}"),
            ("  same, in the process without the plugin", "hist_route_s_without_{}", "{:12.3f}"),
            ("gradhealth heatmap cold (first after load)", "heatmap_cold_{}", "{:12.3f}"),
            ("gradhealth heatmap cold (after cache reset)", "heatmap_cold_again_{}", "{:12.3f}"),
            ("gradhealth findings cold (after cache reset)", "findings_cold_{}", "{:12.3f}"),
            ("gradhealth heatmap warm", "heatmap_warm_{}", "{:12.3f}"),
            ("gradhealth heatmap warm, other role/metric", "heatmap_other_warm_{}", "{:12.3f}"),
            ("gradhealth findings warm", "findings_warm_{}", "{:12.3f}"),
        ]
        for label, key, fmt in rows:
            cells = [fmt.format(r[key.format(run)]) if key.format(run) in r else f"{'-':>12}"
                     for run in (TF2_RUN, TORCH_RUN)]
            print(f"  {label:<44} {cells[0]} {cells[1]}")
        print(f"  heatmap response {r[f'heatmap_bytes_{TF2_RUN}'] / 1e6:.2f} MB in {r[f'heatmap_pages_{TF2_RUN}']} "
              f"page(s), every heatmap figure over all its pages; histograms route responses "
              f"{r[f'hist_route_bytes_{TF2_RUN}'] / 1e6:.1f} MB ({TF2_RUN})")
        print(f"  runs route warm: {r['runs_route_warm']:.3f} s")
        print(f"  append 1% steps to {TF2_RUN}: loader shows them after {r['reload_s']:.1f} s; next heatmap "
              f"{r['heatmap_after_append']:.3f} s (new steps visible: {r['append_visible']}); "
              f"warm again {r['heatmap_warm_after_append']:.3f} s")
        mw, mo = r["mem_with"], r["mem_without"]
        print(f"  peak memory (VmHWM) of the TensorBoard process: {_mb(mo['hwm'])} without the plugin, "
              f"{_mb(mw['hwm'])} with it (after load: {_mb(r['mem_loaded_without']['hwm'])} / "
              f"{_mb(r['mem_loaded_with']['hwm'])}); current RSS {_mb(mo['rss'])} / {_mb(mw['rss'])}")
        if mw["child_hwm"] or mo["child_hwm"]:
            print(f"  data server process peak: {_mb(mo['child_hwm'])} without / {_mb(mw['child_hwm'])} with")
        print("  ratios:")
        for run in (TF2_RUN, TORCH_RUN):
            cold = r[f"heatmap_cold_again_{run}"]
            print(f"  [{run}]")
            print(_ratio_line("cold heatmap (after reset) / floor (faster read above)", cold / r[f"floor_{run}"], 1.25))
            print(_ratio_line("cold heatmap (first after load) / TB histograms route",
                              r[f"heatmap_cold_{run}"] / r[f"hist_route_s_{run}"], 0.6))
            print(_ratio_line("warm heatmap / cold heatmap (first after load)",
                              r[f"heatmap_warm_{run}"] / r[f"heatmap_cold_{run}"], 0.05))
        print(f"  [{TF2_RUN}]")
        print(_ratio_line("heatmap after appending 1% steps / cold heatmap (after reset)",
                          r["heatmap_after_append"] / r[f"heatmap_cold_again_{TF2_RUN}"], 0.10))
        print(_ratio_line("peak memory with / without the plugin (TensorBoard process)", mw["hwm"] / mo["hwm"], 1.20))
        if mw["child_hwm"] and mo["child_hwm"]:
            both = (mw["hwm"] + mw["child_hwm"]) / (mo["hwm"] + mo["child_hwm"])
            print(_ratio_line("peak memory with / without, TensorBoard + data server", both, 1.20))


def work_dirs(kept: "str | None", prefix: str):
    """(temporary root or None, logdir, server log folder): under `kept` when given, else a new temporary folder."""
    tmp = None
    if kept:
        root = pathlib.Path(kept)
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix=prefix)
        root = pathlib.Path(tmp)
    logdir, logs = root / "logdir", root / "server_logs"
    logdir.mkdir(exist_ok=True)
    logs.mkdir(exist_ok=True)
    return tmp, logdir, logs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="a small logdir: every measurement, quickly")
    parser.add_argument("--layers", type=int, default=300)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--buckets", type=int, default=30)
    parser.add_argument("--torch-layers", type=int, default=20)
    parser.add_argument("--torch-steps", type=int, default=300)
    parser.add_argument("--loaders", default="false,true", help="--load_fast values to measure, comma separated")
    parser.add_argument("--repeats", type=int, default=5, help="warm requests per figure (median)")
    parser.add_argument("--logdir", help="where to write the logdir (kept, and reused when its size matches)")
    parser.add_argument("--ready-timeout", type=float, default=1800.0)
    args = parser.parse_args(argv)
    if args.small:
        args.layers, args.steps, args.torch_layers, args.torch_steps = 30, 100, 4, 60
    _check_framing()
    tmp, logdir, logs = work_dirs(args.logdir, "ghbench_")
    try:
        writers = build_logdir(logdir, args)
        results = []
        for load_fast in args.loaders.split(","):
            t0 = time.perf_counter()
            results.append(measure_loader(load_fast, logdir, writers, args, logs))
            print(f"measured --load_fast={load_fast} in {time.perf_counter() - t0:.0f} s")
        report(results, args)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        sys.exit(_serve(sys.argv[2:]))
    sys.exit(main())
