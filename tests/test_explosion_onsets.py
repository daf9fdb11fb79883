"""Explosion onsets a user can trust, on runs gradhealth's torch watch() wrote.

A small MLP trained on minibatches with a tiny learning rate (its gradients noisy
but its weights nearly still), the loss scaled at chosen steps so the gradients
jump there, and made NaN where a run overflows: the scaling stands for the batches
and learning rates that make real runs jump, at steps a test can name.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gradhealth_plugin import cli

STEPS = 70
N_HIDDEN = 16


def _train(logdir, scale=lambda step: 1.0, nan_from=None, steps=STEPS, every=1, loss_writer=False):
    """Trains with `watch`; the loss times `scale(step)`; from `nan_from` the loss is NaN through half the
    hidden units only, so the first layer's gradient holds NaN and exact zeros, as after an overflow."""
    import torch
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, N_HIDDEN)
            self.fc2 = nn.Linear(N_HIDDEN, 3)

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            return self.fc2(h), h

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(512, 8)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 512))
    handle = watch(model, str(logdir), optimizer=optimizer, every_n_steps=every, first_steps=0, activations=False)
    writer = None
    if loss_writer:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(logdir))
    for step in range(steps):
        batch = torch.from_numpy(rng.integers(0, 512, 32))
        out, h = model(x[batch])
        if nan_from is not None and step >= nan_from:
            loss = h[:, : N_HIDDEN // 2].sum() * float("nan")
        else:
            loss = nn.functional.cross_entropy(out, y[batch]) * scale(step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if writer is not None:
            writer.add_scalar("loss", loss.item(), step)
    unwatch(handle)
    if writer is not None:
        writer.close()


def _tiny_jump_then_explosion(step):
    # Large gradients in the first steps (as at initialisation), a lone 30x jump at steps 30-31 that
    # stays below them, the real explosion at 50.
    return 100.0 if step < 10 else 30.0 if step in (30, 31) else 1e6 if step == 50 else 1.0


def _two_explosions(step):
    # An explosion at steps 20-21 that comes back down, a calm span of 33 logged steps, another at 55.
    return 1e4 if step in (20, 21) else 1e6 if step == 55 else 1.0


@pytest.fixture(scope="session")
def onsets_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("onsets")
    _train(root / "tiny_jump", _tiny_jump_then_explosion, nan_from=51)
    _train(root / "two_explosions", _two_explosions, nan_from=56)
    _train(root / "vanish_then_nan", lambda step: 1e-9 if 20 <= step < 40 else 1.0, nan_from=40)
    _train(root / "loss_beyond_layers", steps=35, every=10, loss_writer=True)
    return root


@pytest.fixture(scope="session")
def report(onsets_logdir):
    """`gradhealth report --format json` of the logdir: findings by run."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["report", "--format", "json", str(onsets_logdir)]) == 0
    payload = json.loads(out.getvalue())
    found = {}
    for f in payload["findings"]:
        found.setdefault(f["run"], []).append(f)
    return found


def _of(found, kind):
    return [f for f in found if f["kind"] == kind]


def test_a_lone_jump_of_a_gradient_once_larger_is_no_explosion(report):
    found = report["tiny_jump"]
    exploding = _of(found, "exploding_gradients")
    assert [(f["first_step"], f["last_step"]) for f in exploding] == [(50, 50)], exploding
    assert exploding[0]["severity"] == "critical"
    assert _of(found, "nonfinite")


def test_an_explosion_after_a_calm_span_is_its_own_finding(report):
    exploding = _of(report["two_explosions"], "exploding_gradients")
    assert sorted((f["first_step"], f["last_step"]) for f in exploding) == [(20, 21), (55, 55)], exploding


def test_vanishing_stops_where_the_gradients_turn_non_finite(report):
    found = report["vanish_then_nan"]
    (vanishing,) = _of(found, "vanishing_gradients")
    assert vanishing["first_step"] == 20
    assert vanishing["last_step"] == 39
    for layer in vanishing["evidence"]["layers"].values():
        assert layer["last_step"] < 40
    assert _of(found, "nonfinite")[0]["first_step"] == 40


def test_report_names_the_last_layer_step_and_the_scalars_after_it(onsets_logdir, capsys):
    assert cli.main(["report", "--run", "loss_beyond_layers", str(onsets_logdir)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "last layer step 30; loss to 34" in head, head
