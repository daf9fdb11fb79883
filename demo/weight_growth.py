"""Weight growth ("weight obesity", seed 004) without weight decay, and the fix with weight decay.

Both runs train a PyTorch classifier whose hidden layers are Linear ->
BatchNorm -> ReLU, with Adam(W) at 1.6e-2 for ``STEPS`` steps, instrumented
with gradhealth's ``watch(model, log_dir, optimizer=...)`` (exact statistics of
every gradient, weight, update ratio and module output every ``EVERY`` steps);
the loss goes through a ``SummaryWriter`` into the same run directory.

* ``weight_growth/no_decay``: BatchNorm makes a layer's output blind to the
  scale of the weights in front of it, so nothing in the loss holds that scale
  back: every Adam step, nearly orthogonal to the weights, makes them a little
  longer. The std of ``fc2.weight`` passes 3x its initial value (seed 004's
  line) and keeps climbing; the output layer's grows as its logits sharpen.
  Longer weights also shrink the effective learning rate of those layers.
* ``weight_growth/weight_decay``: the same with ``AdamW(weight_decay=0.1)``:
  the decay balances the growth and every weight std stays within 3x.

    python demo/weight_growth.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "weight_growth"
SEED = 5
STEPS = 2000
BATCH = 64
EVERY = 50
LEARNING_RATE = 1.6e-2
WEIGHT_DECAY = 0.1


def train(out: pathlib.Path, run: str, weight_decay: float) -> dict:
    torch = common.setup_torch(SEED)
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    x, y = (torch.from_numpy(a) for a in common.teacher_classification(SEED))
    model = nn.Sequential()
    fan_in = x.shape[1]
    for i in (1, 2):
        model.add_module(f"fc{i}", nn.Linear(fan_in, 64, bias=False))  # BatchNorm's shift replaces the bias
        model.add_module(f"bn{i}", nn.BatchNorm1d(64))
        model.add_module(f"act{i}", nn.ReLU())
        fan_in = 64
    model.add_module("out", nn.Linear(fan_in, 4))
    for module in model:
        if isinstance(module, nn.Linear):
            nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
    # AdamW with weight_decay=0 is Adam: the runs differ in nothing else.
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=weight_decay)
    log_dir = str(common.run_dir(out, STORY, run))
    writer = SummaryWriter(log_dir)
    handle = watch(model, log_dir, optimizer=optimizer, every_n_steps=EVERY)
    first = {name: p.detach().std().item() for name, p in model.named_parameters() if name.endswith("weight")}
    for step, idx in enumerate(common.batch_indices(SEED, len(x), BATCH, STEPS)):
        idx = torch.from_numpy(idx)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        optimizer.step()
    unwatch(handle)
    writer.close()
    growth = {f"{name} std x": p.detach().std().item() / first[name]
              for name, p in model.named_parameters() if name.startswith(("fc", "out")) and name.endswith("weight")}
    return {"final loss": loss.item(), **growth, "logging errors": handle.errors}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/no_decay": train(out, "no_decay", 0.0),
            f"{STORY}/weight_decay": train(out, "weight_decay", WEIGHT_DECAY)}


if __name__ == "__main__":
    common.cli(main, __doc__)
