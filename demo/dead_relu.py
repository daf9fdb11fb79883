"""Dying ReLUs, and the fix with LeakyReLU and a matching He initialisation (seeds 003, 004).

Both runs train a three-hidden-layer PyTorch classifier with Adam at 0.03,
thirty times its usual learning rate, and log the way seed 004 does, with
``torch.utils.tensorboard.SummaryWriter`` only: ``weights/<name>`` and
``grads/<name>`` histograms of every parameter and ``activations/<module>``
of every activation module (a forward hook) every ``EVERY`` steps, the loss
every step.

* ``dead_relu/relu``: the first large Adam steps push most pre-activations of
  the second and third hidden layers below zero for every input; a ReLU that
  outputs 0 for every input gets no gradient and never comes back. Its
  activation histogram piles up at 0 (seed 003): more than 70% zeros, seed
  004's danger line.
* ``dead_relu/leaky_relu``: seed 004's first two remedies, ``nn.LeakyReLU(0.01)``
  with ``nn.init.kaiming_normal_(weight, nonlinearity="leaky_relu")``; the same
  learning rate no longer kills units, since a negative input still passes
  1% of its gradient.

    python demo/dead_relu.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "dead_relu"
SEED = 4
STEPS = 300
BATCH = 64
EVERY = 30
WIDTHS = (64, 64, 64)
LEARNING_RATE = 0.03


def train(out: pathlib.Path, run: str, leaky: bool) -> dict:
    torch = common.setup_torch(SEED)
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    x, y = (torch.from_numpy(a) for a in common.teacher_classification(SEED))
    model = nn.Sequential()
    fan_in = x.shape[1]
    for i, width in enumerate(WIDTHS, start=1):
        model.add_module(f"fc{i}", nn.Linear(fan_in, width))
        model.add_module(f"act{i}", nn.LeakyReLU(0.01) if leaky else nn.ReLU())
        fan_in = width
    model.add_module("out", nn.Linear(fan_in, 4))
    for module in model:
        if isinstance(module, nn.Linear):
            if leaky:
                nn.init.kaiming_normal_(module.weight, a=0.01, nonlinearity="leaky_relu")
            else:
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
            nn.init.zeros_(module.bias)
    outputs = {}
    for name, module in model.named_children():
        if name.startswith("act"):
            module.register_forward_hook(lambda m, inp, output, name=name: outputs.__setitem__(name, output.detach()))
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    writer = SummaryWriter(str(common.run_dir(out, STORY, run)))
    dead = {}
    for step, idx in enumerate(common.batch_indices(SEED, len(x), BATCH, STEPS)):
        idx = torch.from_numpy(idx)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        if step % EVERY == 0:
            common.log_seed004_histograms(writer, model, outputs, step)
        optimizer.step()
    with torch.no_grad():
        model(x)  # the hooks record every unit's output on the whole data set
        for name, output in outputs.items():
            dead[name] = float((output <= 0).all(dim=0).float().mean())  # units that are 0 (or negative) for every input
    writer.close()
    return {"final loss": loss.item(), **{f"never positive {name}": v for name, v in dead.items()}}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/relu": train(out, "relu", leaky=False),
            f"{STORY}/leaky_relu": train(out, "leaky_relu", leaky=True)}


if __name__ == "__main__":
    common.cli(main, __doc__)
