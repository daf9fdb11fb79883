"""A real data-parallel training on two processes (torch.distributed, gloo on 127.0.0.1).

Each rank trains a tiny MLP on its own shard of the data, all-reduces every
gradient by hand (sum over ranks, divided by the world size) before the
optimizer steps, and logs with ``watch(..., all_ranks=True)``: runs
``rank0`` and ``rank1`` under the log dir. `write` can leave one parameter's
gradient out of the reduction, as a layer excluded from DDP would be: then
only that layer's gradients differ between the ranks.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Tuple
from tests.processes import free_port

WORLD_SIZE = 2
STEPS = 20
N_IN, N_HIDDEN, N_OUT = 8, 16, 3
# The parameter `write(skip=...)` names in the tests: the last layer's weight.
SKIPPED = "fc2.weight"


def _train(rank: int, trainings: Sequence[Tuple[str, Optional[str]]], port: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
    try:
        for log_dir, skip in trainings:
            _train_one(rank, log_dir, skip)
        dist.barrier()  # neither rank closes its connections while the other still uses them
    finally:
        dist.destroy_process_group()


def _train_one(rank: int, log_dir: str, skip: Optional[str]) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)  # the same initial weights on every rank, as DDP's broadcast gives
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(N_IN, N_HIDDEN))
    model.add_module("relu", nn.ReLU())
    model.add_module("fc2", nn.Linear(N_HIDDEN, N_OUT))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # Each rank its own shard of the data: local gradients differ, reduced ones do not.
    gen = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(64, N_IN, generator=gen)
    y = torch.randint(0, N_OUT, (64,), generator=gen)
    handle = watch(model, log_dir, optimizer=optimizer, every_n_steps=1, activations=False, all_ranks=True)
    for _ in range(STEPS):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        for name, p in model.named_parameters():
            if name == skip:
                continue
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= WORLD_SIZE
        optimizer.step()
    unwatch(handle)


def write(trainings: Sequence[Tuple[str, Optional[str]]]) -> None:
    """Runs each training (log dir, skipped parameter or None) in turn on the same `WORLD_SIZE`
    processes, rank r logging into ``<log dir>/rank<r>``: the processes start once."""
    import torch.multiprocessing as mp

    trainings = [(os.fspath(log_dir), skip) for log_dir, skip in trainings]
    mp.spawn(_train, args=(trainings, free_port()), nprocs=WORLD_SIZE, join=True)
