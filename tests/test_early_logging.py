"""The integrations' default schedule logs every one of the first steps, then every 100th:
a divergence in the first dozen steps is caught as it starts, with its cause.

Each story trains a small ReLU regression network with plain SGD whose learning
rate jumps from 0.01 to 0.5 at step 4: the loss overflows within about six
steps. Logged only at steps 0 and 100 (the old default), the run showed NaN at
step 100 and nothing else.
"""

import contextlib
import io
import json
import math

import numpy as np
import pytest

from gradhealth_plugin import cli
from gradhealth_plugin.writing import schedule

STEPS = 110
JUMP = 4
LR = (0.01, 0.5)


def _report(logdir) -> list:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["report", str(logdir), "--format", "json"]) == 0
    return json.loads(out.getvalue())["findings"]


def _assert_caught_early(found: list) -> dict:
    """The explosion and the overflow found where they began (by step 12), with their cause."""
    kinds = {f["kind"]: f for f in found if f["severity"] == "critical"}
    exploding, nonfinite = kinds["exploding_gradients"], kinds["nonfinite"]
    assert JUMP < exploding["first_step"] < nonfinite["first_step"] <= 12
    assert exploding["cause"] == nonfinite["cause"] == "learning_rate_too_high"
    # One finding for the NaN and Inf values of every layer; none for the spikes of the same steps.
    assert [f["kind"] for f in found].count("nonfinite") == 1
    assert [f for f in found if f["kind"] == "spike" and f["first_step"] <= 12] == []
    return kinds


def test_schedule():
    logged = [s for s in range(250) if schedule.is_logged(s, 100, schedule.FIRST_STEPS)]
    assert logged == list(range(schedule.FIRST_STEPS)) + [100, 200]
    assert [schedule.next_logged(s, 100, 30) for s in (0, 29, 30, 101)] == [0, 29, 100, 200]
    assert [schedule.next_logged(s, 7, 0) for s in (0, 1, 7)] == [0, 7, 7]
    with pytest.raises(ValueError):
        schedule.check(100, -1)


def test_watch_defaults_catch_a_divergence_in_the_first_steps(tmp_path):
    torch = pytest.importorskip("torch")
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = x @ torch.randn(16, 1, generator=g)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR[0])
    handle = watch(model, str(tmp_path / "run"), optimizer=optimizer)
    assert (handle.every_n_steps, handle.first_steps) == (100, schedule.FIRST_STEPS)
    first_nan = None
    for step in range(STEPS):
        for group in optimizer.param_groups:
            group["lr"] = LR[step >= JUMP]
        idx = torch.randint(0, 512, (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if first_nan is None and not math.isfinite(loss.item()):
            first_nan = step
    unwatch(handle)
    assert handle.errors == 0 and first_nan is not None and first_nan <= 12
    assert handle.steps_logged == schedule.FIRST_STEPS + 1  # steps 0 to 29, and 100
    kinds = _assert_caught_early(_report(tmp_path))
    # The loss turned non-finite at the step the tensors did.
    assert kinds["nonfinite"]["first_step"] == first_nan


def test_keras_callback_defaults_catch_a_divergence_in_the_first_steps(tmp_path):
    keras = pytest.importorskip("keras")
    from gradhealth_plugin.keras import GradientHealthCallback

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64 * STEPS, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 1))).astype("float32")
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
    rate = keras.optimizers.schedules.PiecewiseConstantDecay([JUMP], list(LR))
    model.compile(optimizer=keras.optimizers.SGD(rate), loss="mse")
    callback = GradientHealthCallback(str(tmp_path), probe_data=(x[:64], y[:64]))
    assert (callback.every_n_steps, callback.first_steps) == (100, schedule.FIRST_STEPS)
    history = model.fit(x, y, batch_size=64, epochs=1, callbacks=[callback], verbose=0)
    assert callback.errors == 0 and not math.isfinite(history.history["loss"][-1])
    _assert_caught_early(_report(tmp_path))
