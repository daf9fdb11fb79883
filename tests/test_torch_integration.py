"""gradhealth_plugin.torch on real short training runs.

Each run records its own reference copies of gradients, weights (before and
after the optimizer step) and module outputs, and the logged vectors must equal
`stats_numpy` of those copies.
"""

import errno
import logging
import os
import pathlib
import re
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gradhealth_plugin.writing.events import EventFile  # noqa: E402
from gradhealth_plugin.writing import format as fmt  # noqa: E402
from gradhealth_plugin.writing.reference import stats_numpy, update_ratio_numpy  # noqa: E402
from gradhealth_plugin.torch import kernels  # noqa: E402
from gradhealth_plugin.torch import unwatch, watch  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
FIELD = {name: i for i, name in enumerate(fmt.FIELDS)}
RTOL, ATOL = 1e-9, 1e-12


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.relu1 = nn.ReLU()
        self.drop = nn.Dropout(0.2)
        self.net = nn.Sequential(nn.Linear(32, 24), nn.Tanh(), nn.Linear(24, 4))

    def forward(self, x):
        return self.net(self.drop(self.relu1(self.fc1(x))))


ACTIVATIONS = ["fc1", "relu1", "net.0", "net.1", "net.2"]
PARAMS = ["fc1.weight", "fc1.bias", "net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]


def read_summaries(logdir):
    """{tag: {step: (vector, metadata)}} from every event file under logdir, without TensorFlow."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    out = {}
    for path in sorted(pathlib.Path(logdir).rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        described = {}  # like TensorBoard: a tag's metadata comes from its first event in the file
        i = 0
        while i + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 12 + n + 4
            for value in event.summary.value:
                if value.HasField("metadata") and value.tag not in described:
                    if value.metadata.plugin_data.plugin_name != "gradhealth":
                        continue
                    described[value.tag] = fmt.parse_metadata(value.metadata.plugin_data.content)
                if value.tag in described:
                    out.setdefault(value.tag, {})[event.step] = (tensor_util.make_ndarray(value.tensor),
                                                                 described[value.tag])
    return out


def batches(steps, seed=0, n=32, features=12, classes=4):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        yield torch.randn(n, features, generator=g), torch.randint(0, classes, (n,), generator=g)


class Recorder:
    """Reference copies of what the model holds at each step, taken by the test itself."""

    def __init__(self, model, module_names):
        self.steps = []
        self._outputs = {}
        self._hooks = []
        modules = dict(model.named_modules())
        for name in module_names:
            self._hooks.append(modules[name].register_forward_hook(self._keep(name)))

    def _keep(self, name):
        def hook(module, args, output):
            if module.training and torch.is_grad_enabled():
                self._outputs.setdefault(name, output.detach().clone().numpy())
        return hook

    def before_step(self, model):
        self.steps.append({
            "gradient": {n: p.grad.detach().clone().numpy() for n, p in model.named_parameters() if p.grad is not None},
            "weight": {n: p.detach().clone().numpy() for n, p in model.named_parameters()},
            "activation": dict(self._outputs),
        })
        self._outputs = {}

    def after_step(self, model):
        self.steps[-1]["after"] = {n: p.detach().clone().numpy() for n, p in model.named_parameters()}

    def remove(self):
        for h in self._hooks:
            h.remove()


def train(model, optimizer, steps, recorder=None, loss_fn=nn.functional.cross_entropy, seed=0):
    losses = []
    for x, y in batches(steps, seed=seed):
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        if recorder:
            recorder.before_step(model)
        optimizer.step()
        if recorder:
            recorder.after_step(model)
        losses.append(float(loss.detach()))
    return losses


def assert_stats(vector, reference, what):
    keep = [i for i, f in enumerate(fmt.FIELDS) if f != "update_ratio"]
    np.testing.assert_allclose(np.asarray(vector)[keep], np.asarray(reference)[keep], rtol=RTOL, atol=ATOL,
                               equal_nan=True, err_msg=what)


def hook_state(model, optimizer=None):
    """Every hook dict watch() could touch, copied."""
    state = {}
    for name, m in model.named_modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
                     "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs", "_backward_hooks",
                     "_backward_pre_hooks"):
            state[(name, attr)] = dict(getattr(m, attr))
    for name, p in model.named_parameters():
        state[(name, "post_accumulate")] = dict(p._post_accumulate_grad_hooks or {})
        state[(name, "tensor_hooks")] = dict(p._backward_hooks or {})
    if optimizer is not None:
        state["opt_pre"] = dict(optimizer._optimizer_step_pre_hooks)
        state["opt_post"] = dict(optimizer._optimizer_step_post_hooks)
    return state


# ---------------------------------------------------------------------------
# A run with an optimizer: Adam with weight decay, every 3 steps, 10 steps.

N_MAIN, STEPS_MAIN = 3, 10


@pytest.fixture(scope="module")
def main_run(tmp_path_factory):
    torch.manual_seed(0)
    logdir = tmp_path_factory.mktemp("torch_main")
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    recorder = Recorder(model, ACTIVATIONS)
    handle = watch(model, log_dir=str(logdir), optimizer=optimizer, every_n_steps=N_MAIN)
    train(model, optimizer, STEPS_MAIN, recorder)
    unwatch(handle)
    recorder.remove()
    return {"logdir": logdir, "handle": handle, "ref": recorder.steps, "model": model,
            "summaries": read_summaries(logdir)}


def test_every_n_steps_and_tags(main_run):
    s = main_run["summaries"]
    expected = {f"gradhealth/{role}/{name}" for role in ("gradient", "weight") for name in PARAMS}
    expected |= {f"gradhealth/activation/{name}" for name in ACTIVATIONS}
    assert set(s) == expected  # Dropout is not summarised
    for tag, by_step in s.items():
        assert sorted(by_step) == [0, 3, 6, 9], tag
    assert main_run["handle"].errors == 0 and main_run["handle"].steps_logged == 4
    assert main_run["handle"].step == STEPS_MAIN


def test_metadata_positions_follow_model_order(main_run):
    s = main_run["summaries"]
    meta = {tag: next(iter(by_step.values()))[1] for tag, by_step in s.items()}
    order = ["fc1.weight", "fc1.bias", "fc1", "relu1", "net.0.weight", "net.0.bias", "net.0", "net.1",
             "net.2.weight", "net.2.bias", "net.2"]
    positions = {m["layer"]: m["position"] for m in meta.values()}
    assert [positions[name] for name in order] == sorted(positions[name] for name in order)
    assert len(set(positions.values())) == len(order)
    assert meta["gradhealth/weight/fc1.weight"]["shape"] == [32, 12]
    assert meta["gradhealth/activation/net.1"]["shape"] == [32, 24]
    assert meta["gradhealth/gradient/net.2.bias"] == {**meta["gradhealth/gradient/net.2.bias"], "role": "gradient",
                                                      "layer": "net.2.bias", "version": fmt.FORMAT_VERSION}


def test_gradient_statistics_are_exact(main_run):
    s, ref = main_run["summaries"], main_run["ref"]
    for step in (0, 3, 6, 9):
        for name in PARAMS:
            vector, _ = s[f"gradhealth/gradient/{name}"][step]
            assert_stats(vector, stats_numpy(ref[step]["gradient"][name]), f"gradient {name} step {step}")
            assert np.isnan(vector[FIELD["update_ratio"]])


def test_weight_statistics_and_update_ratio_are_exact(main_run):
    s, ref = main_run["summaries"], main_run["ref"]
    for step in (0, 3, 6, 9):
        for name in PARAMS:
            vector, _ = s[f"gradhealth/weight/{name}"][step]
            before, after = ref[step]["weight"][name], ref[step]["after"][name]
            assert_stats(vector, stats_numpy(before), f"weight {name} step {step}")
            ratio = update_ratio_numpy(before, after)
            assert ratio > 0
            np.testing.assert_allclose(vector[FIELD["update_ratio"]], ratio, rtol=1e-9, err_msg=f"{name} {step}")


def test_activation_statistics_are_exact(main_run):
    s, ref = main_run["summaries"], main_run["ref"]
    for step in (0, 3, 6, 9):
        for name in ACTIVATIONS:
            vector, _ = s[f"gradhealth/activation/{name}"][step]
            assert_stats(vector, stats_numpy(ref[step]["activation"][name]), f"activation {name} {step}")
    relu = s["gradhealth/activation/relu1"][0][0]
    assert 0.2 < relu[FIELD["zero_fraction"]] < 0.8 and relu[FIELD["min"]] == 0


def test_plugin_cell_route_shows_exact_values(main_run, plugin_client):
    client = plugin_client(main_run["logdir"], samples={"gradhealth": 500})
    runs = client.ok("/runs")["runs"]
    assert [r["run"] for r in runs] == ["."]
    layers = {layer["name"]: layer for layer in runs[0]["layers"]}
    assert [name for name in layers if name in PARAMS + ACTIVATIONS][:4] == ["fc1.weight", "fc1.bias", "fc1", "relu1"]
    ref = main_run["ref"][3]
    cell = client.ok("/cell", run=".", layer="fc1.weight", step=3)
    for role, reference in (("gradient", ref["gradient"]["fc1.weight"]), ("weight", ref["weight"]["fc1.weight"])):
        data = cell["roles"][role]
        assert "gradhealth" in data["source"]
        expected = stats_numpy(reference)
        for metric in ("mean", "std", "l2", "max_abs", "zero_fraction"):
            assert data["metrics"][metric]["quality"] == "exact", (role, metric)
            np.testing.assert_allclose(data["metrics"][metric]["value"], expected[FIELD[metric]], rtol=1e-9)
    ratio = cell["roles"]["weight"]["metrics"]["update_ratio"]
    assert ratio["quality"] == "exact"
    np.testing.assert_allclose(ratio["value"], update_ratio_numpy(ref["weight"]["fc1.weight"],
                                                                          ref["after"]["fc1.weight"]), rtol=1e-9)
    act = client.ok("/cell", run=".", layer="relu1", step=3, role="activation")["roles"]["activation"]
    assert act["metrics"]["zero_fraction"]["quality"] == "exact" and "gradhealth" in act["source"]


def test_accelerator_path_gives_the_same_exact_values(tmp_path, monkeypatch):
    """The branch-free bucketed reduction (used off the CPU), forced on the CPU, on a run with NaN."""
    monkeypatch.setattr(kernels, "_CPU_BRANCHING", False)
    monkeypatch.setattr(kernels, "_CHUNK", 5000)  # fc1.weight and the activations span buckets
    kernels._LAYOUTS.clear()
    torch.manual_seed(9)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.net[0].bias.register_hook(lambda grad: torch.where(torch.arange(24) == 3, float("inf"), grad))
    recorder = Recorder(model, ACTIVATIONS)
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=2)
    train(model, optimizer, 3, recorder)
    unwatch(handle)
    recorder.remove()
    kernels._LAYOUTS.clear()
    s, ref = read_summaries(tmp_path), recorder.steps
    for step in (0, 2):
        for name in PARAMS:
            gradient = s[f"gradhealth/gradient/{name}"][step][0]
            assert_stats(gradient, stats_numpy(ref[step]["gradient"][name]), name)
            weight = s[f"gradhealth/weight/{name}"][step][0]
            assert_stats(weight, stats_numpy(ref[step]["weight"][name]), name)
            np.testing.assert_allclose(weight[FIELD["update_ratio"]], update_ratio_numpy(
                ref[step]["weight"][name], ref[step]["after"][name]), rtol=1e-9, equal_nan=True)
        for name in ACTIVATIONS:
            assert_stats(s[f"gradhealth/activation/{name}"][step][0],
                         stats_numpy(ref[step]["activation"][name]), name)
    assert s["gradhealth/gradient/net.0.bias"][0][0][FIELD["inf_count"]] == 1


def _accelerator_update_ratios(tmp_path, monkeypatch, model, chunk=None):
    """Trains `model` with SGD for 3 steps on the bucketed path forced on the CPU.

    Returns [(logged weight vector, reference before, reference after)] per parameter and logged step.
    """
    monkeypatch.setattr(kernels, "_CPU_BRANCHING", False)
    if chunk is not None:
        monkeypatch.setattr(kernels, "_CHUNK", chunk)
    kernels._LAYOUTS.clear()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder = Recorder(model, [])
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=1)
    try:
        for x, y in batches(3, features=100, classes=100):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            recorder.before_step(model)
            optimizer.step()
            recorder.after_step(model)
    finally:
        unwatch(handle)
        recorder.remove()
        kernels._LAYOUTS.clear()
    s, ref = read_summaries(tmp_path), recorder.steps
    out = []
    for step in range(3):
        for name, _ in model.named_parameters():
            out.append((s[f"gradhealth/weight/{name}"][step][0], ref[step]["weight"][name], ref[step]["after"][name]))
    return out


def test_accelerator_path_update_ratio_of_tensors_larger_than_a_bucket(tmp_path, monkeypatch):
    """On an accelerator one large tensor fills a bucket by itself: its snapshot must be a copy."""
    torch.manual_seed(0)
    model = nn.Linear(100, 100)
    chunk = 1000  # the weight (10000 values) fills ten buckets alone, the bias one more
    assert model.weight.numel() > chunk
    results = _accelerator_update_ratios(tmp_path, monkeypatch, model, chunk)
    assert len(results) == 6
    for logged, before, after in results:
        expected = update_ratio_numpy(before, after)
        assert expected > 1e-4
        np.testing.assert_allclose(logged[FIELD["update_ratio"]], expected, rtol=1e-9)
        assert_stats(logged, stats_numpy(before), "weight")


def test_accelerator_path_update_ratio_of_a_single_parameter(tmp_path, monkeypatch):
    """A model with one parameter: one bucket holding one tensor, at the default chunk size."""
    torch.manual_seed(0)
    model = nn.Linear(100, 100, bias=False)
    assert len(list(model.parameters())) == 1 and model.weight.numel() <= kernels._CHUNK
    results = _accelerator_update_ratios(tmp_path, monkeypatch, model)
    assert len(results) == 3
    for logged, before, after in results:
        expected = update_ratio_numpy(before, after)
        assert expected > 1e-4
        np.testing.assert_allclose(logged[FIELD["update_ratio"]], expected, rtol=1e-9)
        assert_stats(logged, stats_numpy(before), "weight")


# ---------------------------------------------------------------------------
# Without an optimizer: backward passes are the steps, a manual SGD update.

def test_without_optimizer_gradients_and_update_ratio(tmp_path):
    torch.manual_seed(1)
    model = Net()
    handle = watch(model, tmp_path, every_n_steps=2)
    assert hook_state(model) != {}
    ref = []
    for x, y in batches(5, seed=1):
        model.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        before = {n: p.detach().clone().numpy() for n, p in model.named_parameters()}
        grads = {n: p.grad.clone().numpy() for n, p in model.named_parameters()}
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.05 * p.grad
        ref.append((grads, before, {n: p.detach().clone().numpy() for n, p in model.named_parameters()}))
    unwatch(handle)
    s = read_summaries(tmp_path)
    assert sorted(s["gradhealth/gradient/fc1.weight"]) == [0, 2, 4]
    for step in (0, 2, 4):
        grads, before, after = ref[step]
        for name in PARAMS:
            assert_stats(s[f"gradhealth/gradient/{name}"][step][0], stats_numpy(grads[name]), name)
            weight = s[f"gradhealth/weight/{name}"][step][0]
            assert_stats(weight, stats_numpy(before[name]), name)
            # The last logged step's update is measured when unwatch() runs, after that update.
            np.testing.assert_allclose(weight[FIELD["update_ratio"]],
                                       update_ratio_numpy(before[name], after[name]), rtol=1e-9)
    assert sorted(s["gradhealth/activation/relu1"]) == [0, 2, 4]
    assert handle.errors == 0


# ---------------------------------------------------------------------------
# NaN in a gradient: training goes on, the count is logged, the plugin finds it.

NAN_STEP = 4


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    torch.manual_seed(2)
    logdir = tmp_path_factory.mktemp("torch_nan")
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    state = {"step": 0}

    def poison(grad):
        if state["step"] == NAN_STEP:
            grad = grad.clone()
            grad[0, 0] = float("nan")
        return grad

    model.fc1.weight.register_hook(poison)
    handle = watch(model, logdir, optimizer=optimizer, every_n_steps=1)
    losses = []
    for x, y in batches(7, seed=2):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        state["step"] += 1
    unwatch(handle)
    return {"logdir": logdir, "handle": handle, "losses": losses, "summaries": read_summaries(logdir)}


def test_nan_gradient_is_counted_and_training_continues(nan_run):
    s = nan_run["summaries"]
    assert len(nan_run["losses"]) == 7 and np.isnan(nan_run["losses"][-1])  # the NaN spread; nothing raised
    grad = s["gradhealth/gradient/fc1.weight"]
    assert grad[NAN_STEP][0][FIELD["nan_count"]] == 1
    assert grad[NAN_STEP][0][FIELD["count"]] == 32 * 12
    assert np.isfinite(grad[NAN_STEP][0][FIELD["l2"]])  # the other 383 values are still summarised
    assert all(grad[k][0][FIELD["nan_count"]] == 0 for k in range(NAN_STEP))
    assert s["gradhealth/weight/fc1.weight"][NAN_STEP + 1][0][FIELD["nan_count"]] == 1
    assert nan_run["handle"].errors == 0


def test_plugin_reports_nonfinite_on_the_layer(nan_run, plugin_client):
    client = plugin_client(nan_run["logdir"], samples={"gradhealth": 500})
    found = client.ok("/findings", run=".")["findings"]
    nonfinite = [f for f in found if f["kind"] == "nonfinite" and f["role"] == "gradient"]
    assert nonfinite, found
    assert nonfinite[0]["layers"][0] == "fc1.weight" and nonfinite[0]["first_step"] == NAN_STEP
    cell = client.ok("/cell", run=".", layer="fc1.weight", step=NAN_STEP, role="gradient")["roles"]["gradient"]
    assert cell["metrics"]["nonfinite"] == {"value": 1.0, "quality": "exact"}


# ---------------------------------------------------------------------------
# Distributed: rank 0 writes; other ranks add nothing.

def test_nonzero_rank_adds_no_hooks_and_writes_nothing(tmp_path, monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 1)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    before = hook_state(model, optimizer)
    handle = watch(model, tmp_path / "run", optimizer=optimizer, every_n_steps=1)
    assert not handle.active and hook_state(model, optimizer) == before
    train(model, optimizer, 4)
    unwatch(handle)
    assert not (tmp_path / "run").exists()


def test_all_ranks_write_to_their_own_run(tmp_path, monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 1)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=2, all_ranks=True)
    train(model, optimizer, 4)
    unwatch(handle)
    assert handle.active and handle.log_dir == str(tmp_path / "rank1")
    assert sorted(read_summaries(tmp_path / "rank1")["gradhealth/gradient/fc1.weight"]) == [0, 2]


def test_rank_zero_writes(tmp_path, monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=2)
    train(model, optimizer, 4)
    unwatch(handle)
    assert sorted(read_summaries(tmp_path)["gradhealth/gradient/fc1.weight"]) == [0, 2]


def test_real_ddp_uses_the_wrapped_module_names(tmp_path):
    import torch.distributed as dist

    if not dist.is_available() or dist.is_initialized():
        pytest.skip("torch.distributed unavailable or already initialised")
    import datetime

    # A file store, not a TCP port picked in advance: no port race, and a bounded wait.
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'ddp_store'}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(3)
        model = Net()
        ddp = nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        recorder = Recorder(model, ["relu1"])
        handle = watch(ddp, tmp_path, optimizer=optimizer, every_n_steps=2)
        train(ddp, optimizer, 4, recorder)
        unwatch(ddp)
        recorder.remove()
    finally:
        dist.destroy_process_group()
    s = read_summaries(tmp_path)
    assert "gradhealth/gradient/fc1.weight" in s and not any("module." in tag for tag in s)
    ref = recorder.steps[2]
    assert_stats(s["gradhealth/gradient/net.0.weight"][2][0],
                 stats_numpy(ref["gradient"]["module.net.0.weight"]), "ddp gradient")
    assert_stats(s["gradhealth/activation/relu1"][2][0], stats_numpy(ref["activation"]["relu1"]), "ddp act")
    assert handle.errors == 0


# ---------------------------------------------------------------------------
# Failures never reach the training loop.

def _gradhealth_warnings(caplog):
    return [r for r in caplog.records if r.levelno >= logging.WARNING and "gradhealth" in r.getMessage()]


def counted(problems):
    """How many failures `problems` reports: one per line, or the count a line gives."""
    total = 0
    for line in problems:
        match = re.search(r"\((\d+) failures of this kind\)$", line)
        total += int(match.group(1)) if match else 1
    return total


def test_unwritable_log_dir_does_not_stop_training(tmp_path, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with caplog.at_level(logging.WARNING):
        handle = watch(model, blocker / "run", optimizer=optimizer, every_n_steps=1)
        losses = train(model, optimizer, 5)
        unwatch(handle)
    assert len(losses) == 5 and handle.errors > 0
    assert len(_gradhealth_warnings(caplog)) == 1


def test_full_disk_does_not_stop_training(tmp_path, caplog, monkeypatch):
    def full(self, event):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(EventFile, "add_event", full)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with caplog.at_level(logging.WARNING):
        handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=1)
        losses = train(model, optimizer, 4)
        unwatch(handle)
    assert len(losses) == 4 and handle.errors >= 4
    assert len(_gradhealth_warnings(caplog)) == 1
    # The event file's failures are the handle's: each one is in `problems`.
    assert "No space left on device" in handle.problems[0]
    assert counted(handle.problems) == handle.errors


def test_failing_statistics_do_not_stop_training(tmp_path, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("CUDA out of memory (simulated)")

    monkeypatch.setattr(kernels, "reduce_stats", broken)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with caplog.at_level(logging.WARNING):
        handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=1)
        losses = train(model, optimizer, 3)
        unwatch(handle)
    assert len(losses) == 3 and handle.step == 3 and handle.errors >= 3
    assert "out of memory" in handle.problems[0]
    assert counted(handle.problems) == handle.errors


# ---------------------------------------------------------------------------
# Parameters frozen when watch() runs.

UNFREEZE = 3


@pytest.mark.parametrize("with_optimizer", [True, False], ids=["optimizer", "backward_passes"])
def test_a_parameter_frozen_at_watch_is_logged_once_it_trains(tmp_path, with_optimizer):
    """fc1.weight is unfrozen at step 3 and logged from then on; net.2.bias stays frozen: no rows, no error."""
    torch.manual_seed(6)
    model = Net()
    model.fc1.weight.requires_grad_(False)
    model.net[2].bias.requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05) if with_optimizer else None
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=1)
    ref = []
    for step, (x, y) in enumerate(batches(6, seed=6)):
        if step == UNFREEZE:
            model.fc1.weight.requires_grad_(True)
        loss = nn.functional.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        grad = model.fc1.weight.grad
        before = model.fc1.weight.detach().clone().numpy()
        if optimizer is not None:
            optimizer.step()
        else:
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        p -= 0.05 * p.grad
        ref.append((None if grad is None else grad.clone().numpy(), before, model.fc1.weight.detach().clone().numpy()))
    unwatch(handle)
    s = read_summaries(tmp_path)
    trained = list(range(UNFREEZE, 6))
    assert sorted(s["gradhealth/gradient/fc1.weight"]) == trained
    assert sorted(s["gradhealth/weight/fc1.weight"]) == trained
    for step in trained:
        grad, before, after = ref[step]
        assert_stats(s["gradhealth/gradient/fc1.weight"][step][0], stats_numpy(grad), f"gradient at {step}")
        weight = s["gradhealth/weight/fc1.weight"][step][0]
        assert_stats(weight, stats_numpy(before), f"weight at {step}")
        np.testing.assert_allclose(weight[FIELD["update_ratio"]], update_ratio_numpy(before, after), rtol=1e-9)
    assert not [tag for tag in s if tag.endswith("/net.2.bias")]
    assert sorted(s["gradhealth/gradient/net.0.weight"]) == list(range(6))
    assert handle.errors == 0, handle.problems


def test_without_optimizer_a_model_frozen_at_watch_is_logged_once_unfrozen(tmp_path):
    """Backward passes count the steps through gradient hooks, which torch refuses on frozen parameters."""
    torch.manual_seed(7)
    model = Net()
    model.requires_grad_(False)
    handle = watch(model, tmp_path, every_n_steps=1)
    model.requires_grad_(True)
    for x, y in batches(3, seed=7):
        model.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
    unwatch(handle)
    s = read_summaries(tmp_path)
    for name in PARAMS:
        assert sorted(s[f"gradhealth/gradient/{name}"]) == [0, 1, 2]
        assert sorted(s[f"gradhealth/weight/{name}"]) == [0, 1, 2]
    assert handle.errors == 0, handle.problems


class Odd(nn.Module):
    """Leaf modules whose outputs are not one float tensor, and a ReLU used twice."""

    class Pair(nn.Module):
        def forward(self, x):
            return x * 2, x.sum()

    class Dict(nn.Module):
        def forward(self, x):
            return {"x": x}

    class Argmax(nn.Module):
        def forward(self, x):
            return x.argmax(dim=1)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)
        self.pair = self.Pair()
        self.dict = self.Dict()
        self.argmax = self.Argmax()

    def forward(self, x):
        h = self.act(self.fc(x))
        h = self.act(self.pair(h)[0] - 1)
        self.argmax(h)
        return self.fc2(self.dict(h)["x"])


def test_odd_module_outputs_are_skipped_or_summarised(tmp_path):
    torch.manual_seed(4)
    model = Odd()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=1)
    outputs = {}
    hooks = [model.act.register_forward_hook(lambda m, a, o: outputs.setdefault(len(outputs), o.detach().clone()))]
    train(model, optimizer, 1)
    for h in hooks:
        h.remove()
    unwatch(handle)
    s = read_summaries(tmp_path)
    assert {"gradhealth/activation/act", "gradhealth/activation/act[1]", "gradhealth/activation/pair"} <= set(s)
    assert "gradhealth/activation/dict" not in s and "gradhealth/activation/argmax" not in s
    assert set(handle.skipped) == {"dict", "argmax"}
    assert_stats(s["gradhealth/activation/act"][0][0], stats_numpy(outputs[0].numpy()), "act")
    assert_stats(s["gradhealth/activation/act[1]"][0][0], stats_numpy(outputs[1].numpy()), "act[1]")
    assert s["gradhealth/activation/act[1]"][0][1]["position"] == s["gradhealth/activation/act"][0][1]["position"]
    assert handle.errors == 0


# ---------------------------------------------------------------------------
# Hooks come off; nothing is written after unwatch.

@pytest.mark.parametrize("with_optimizer", [True, False])
@pytest.mark.parametrize("by", ["handle", "model"])
def test_unwatch_removes_every_hook(tmp_path, with_optimizer, by):
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    before = hook_state(model, optimizer)
    handle = watch(model, tmp_path, optimizer=optimizer if with_optimizer else None, every_n_steps=1)
    assert hook_state(model, optimizer) != before
    train(model, optimizer, 2)
    unwatch(handle if by == "handle" else model)
    assert hook_state(model, optimizer) == before
    written = {tag: sorted(by_step) for tag, by_step in read_summaries(tmp_path).items()}
    assert written["gradhealth/gradient/fc1.weight"] == [0, 1]
    train(model, optimizer, 2)
    assert {tag: sorted(by_step) for tag, by_step in read_summaries(tmp_path).items()} == written
    assert handle.step == 2


def test_watched_model_can_be_deep_copied_and_saved(tmp_path):
    import copy
    import io
    import pickle

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=1)
    train(model, optimizer, 1)
    ema = copy.deepcopy(model)  # an EMA copy, taken while watched
    with torch.no_grad():
        ema(torch.randn(4, 12))
    torch.save(model, io.BytesIO())
    unwatch(handle)
    restored = pickle.loads(pickle.dumps(ema))  # its hooks find no live handle and do nothing
    restored(torch.randn(4, 12)).sum().backward()
    assert handle.errors == 0


def test_watching_again_replaces_the_first_watch(tmp_path):
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    before = hook_state(model, optimizer)
    first = watch(model, tmp_path / "a", optimizer=optimizer)
    second = watch(model, tmp_path / "b", optimizer=optimizer)
    assert first._closed and not second._closed
    unwatch(model)
    assert hook_state(model, optimizer) == before


# ---------------------------------------------------------------------------
# Other training setups.

def test_start_step_and_multiple_optimizers(tmp_path):
    torch.manual_seed(5)
    model = Net()
    first = torch.optim.SGD(list(model.fc1.parameters()), lr=0.05)
    second = torch.optim.Adam(list(model.net.parameters()), lr=1e-3)
    recorder = Recorder(model, [])
    handle = watch(model, tmp_path, optimizer=[first, second], every_n_steps=3, start_step=100)
    for x, y in batches(6, seed=5):
        loss = nn.functional.cross_entropy(model(x), y)
        first.zero_grad()
        second.zero_grad()
        loss.backward()
        recorder.before_step(model)
        second.step()  # the second optimizer steps first: each counts its own steps
        first.step()
        recorder.after_step(model)
    unwatch(handle)
    s = read_summaries(tmp_path)
    for name in PARAMS:
        assert sorted(s[f"gradhealth/weight/{name}"]) == [102, 105], name
    ref = recorder.steps[2]
    for name in ("fc1.weight", "net.2.weight"):
        vector = s[f"gradhealth/weight/{name}"][102][0]
        assert_stats(vector, stats_numpy(ref["weight"][name]), name)
        np.testing.assert_allclose(vector[FIELD["update_ratio"]],
                                   update_ratio_numpy(ref["weight"][name], ref["after"][name]), rtol=1e-9)
    assert sorted(s["gradhealth/activation/relu1"]) == [102, 105]


def test_sparse_embedding_gradient(tmp_path):
    torch.manual_seed(6)
    model = nn.Sequential(nn.Embedding(50, 8, sparse=True), nn.Flatten(), nn.Linear(24, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = watch(model, tmp_path, optimizer=optimizer, every_n_steps=1)
    x = torch.randint(0, 50, (16, 3))
    loss = model(x).logsumexp(1).mean()
    optimizer.zero_grad()
    loss.backward()
    dense = model[0].weight.grad.to_dense().numpy()
    optimizer.step()
    unwatch(handle)
    s = read_summaries(tmp_path)
    assert_stats(s["gradhealth/gradient/0.weight"][0][0], stats_numpy(dense), "sparse grad")
    assert "gradhealth/activation/1" not in s  # Flatten repeats its input


def test_torch_compile_logs_parameters_without_graph_breaks(tmp_path):
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.manual_seed(7)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    compiled = torch.compile(model, backend="aot_eager")
    recorder = Recorder(model, [])
    handle = watch(compiled, tmp_path, optimizer=optimizer, every_n_steps=2)
    train(compiled, optimizer, 4, recorder)
    unwatch(compiled)
    try:
        assert not torch._dynamo.utils.counters["graph_break"]
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    finally:
        torch._dynamo.reset()
    s = read_summaries(tmp_path)
    assert not any("_orig_mod" in tag for tag in s)
    assert not any(tag.startswith("gradhealth/activation/") for tag in s)  # traced hooks do nothing
    reference = recorder.steps[2]["gradient"]["_orig_mod.fc1.weight"]  # the recorder walked the wrapper
    assert_stats(s["gradhealth/gradient/fc1.weight"][2][0], stats_numpy(reference), "compiled gradient")
    assert handle.errors == 0


@pytest.mark.parametrize("cpu_branching", [True, False], ids=["cpu-path", "accelerator-path"])
def test_tensor_stats_match_numpy_across_chunks(monkeypatch, cpu_branching):
    monkeypatch.setattr(kernels, "_CPU_BRANCHING", cpu_branching)
    g = torch.Generator().manual_seed(8)
    special = torch.tensor([1.0, float("nan"), float("inf"), 0.0, -3.0, float("-inf"), 1e-9])
    tensors = [torch.randn(300, 20, generator=g) * 5 + 3, special, torch.randn(1000, generator=g, dtype=torch.float64),
               torch.full((4,), float("nan")), torch.zeros(0), torch.randn(17, generator=g).to(torch.bfloat16)]
    for chunk in (7, 1000, 1 << 22):
        monkeypatch.setattr(kernels, "_CHUNK", chunk)
        kernels._LAYOUTS.clear()
        rows = kernels.tensor_stats(tensors)
        for t, row in zip(tensors, rows):
            np.testing.assert_allclose(row, stats_numpy(t.double().numpy()), rtol=RTOL, atol=ATOL,
                                       equal_nan=True, err_msg=f"chunk {chunk} {t.shape}")
    kernels._LAYOUTS.clear()


def test_import_and_use_do_not_import_tensorflow(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        import torch
        from gradhealth_plugin.torch import watch, unwatch
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        handle = watch(model, {str(tmp_path)!r}, optimizer=opt, every_n_steps=1)
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(3, 4)).sum().backward()
            opt.step()
        unwatch(handle)
        assert handle.errors == 0, handle.problems
        bad = sorted(m for m in sys.modules
                     if m == "tensorflow" or m.startswith(("tensorflow.", "torch.utils.tensorboard")))
        print("IMPORTED", bad)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IMPORTED []" in out.stdout, out.stdout + out.stderr
    assert read_summaries(tmp_path)["gradhealth/gradient/0.weight"].keys() == {0, 1}
