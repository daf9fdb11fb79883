"""A learning rate so high that the loss goes NaN, and the same run with a sane one (seed 004's combined symptoms).

Both runs train a two-hidden-layer ReLU regression network (He
initialisation) with plain SGD, instrumented with gradhealth's
``watch(model, log_dir, optimizer=...)`` on every step; the loss goes through
a ``SummaryWriter`` into the same run directory. Seed 004: gradients beyond
1e3, swinging weights and a NaN loss together mean the learning rate is too
high.

* ``lr_too_high/lr_0.3``: each step overshoots further than the last; within
  a few steps the gradients pass 1e3, then overflow, and from then on every
  weight, gradient and the loss are NaN. gradhealth's statistics count NaN and
  Inf instead of failing on them (``SummaryWriter.add_histogram`` would raise).
  The few steps before the overflow show the rest of the picture: updates
  larger than 10% of the weights, weights growing and skewed, a ReLU layer
  mostly silent.
* ``lr_too_high/lr_0.01``: the same with a learning rate 30 times smaller.
  (At 0.02 the output layer's first updates are still more than 10% of its
  weights: the update-ratio rule flags that too.)

    python demo/lr_too_high.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "lr_too_high"
SEED = 6
STEPS = 100
BATCH = 64
EVERY = 1  # the divergence takes a handful of steps: log them all


def train(out: pathlib.Path, learning_rate: float) -> dict:
    import math

    torch = common.setup_torch(SEED)
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    x, y = (torch.from_numpy(a) for a in common.regression(SEED))
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(x.shape[1], 64))
    model.add_module("act1", nn.ReLU())
    model.add_module("fc2", nn.Linear(64, 64))
    model.add_module("act2", nn.ReLU())
    model.add_module("out", nn.Linear(64, 1))
    for module in model:
        if isinstance(module, nn.Linear):
            nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
            nn.init.zeros_(module.bias)
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    log_dir = str(common.run_dir(out, STORY, f"lr_{learning_rate:g}"))
    writer = SummaryWriter(log_dir)
    handle = watch(model, log_dir, optimizer=optimizer, every_n_steps=EVERY)
    first_nan = None
    for step, idx in enumerate(common.batch_indices(SEED, len(x), BATCH, STEPS)):
        idx = torch.from_numpy(idx)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        if first_nan is None and not math.isfinite(loss.item()):
            first_nan = step
        optimizer.step()
    unwatch(handle)
    writer.close()
    return {"final loss": loss.item(), "first non-finite loss at step": first_nan, "logging errors": handle.errors}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/lr_0.3": train(out, 0.3), f"{STORY}/lr_0.01": train(out, 0.01)}


if __name__ == "__main__":
    common.cli(main, __doc__)
