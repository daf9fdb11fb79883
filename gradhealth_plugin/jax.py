"""JAX / Flax: exact statistics of a params pytree and its gradients, without TensorFlow.

    from gradhealth_plugin.jax import PytreeWriter
    writer = PytreeWriter("runs/exp1")
    ...
    grads = jax.grad(loss_fn)(params, batch)
    new_params = optax.apply_updates(params, updates)
    if step % 100 == 0:
        writer.log(step, params=params, grads=grads, new_params=new_params)

Each leaf is named by its path joined with ``/`` (``Dense_0/kernel``), as
``flax.traverse_util.flatten_dict(params, sep="/")`` names it, so these rows
join histograms logged as ``params/Dense_0/kernel`` and ``grads/Dense_0/kernel``
with ``flax.metrics.tensorboard.SummaryWriter`` or clu. A leading ``params``
collection (a whole ``variables`` dict) is left out of the name.

Statistics are the numpy reference (`writing.reference`): each logged leaf is
copied to the host, so log every N steps. Nested dicts (FrozenDict too), lists
and tuples are walked without importing jax; leaves are anything ``np.asarray``
takes. Nothing here raises into training: write failures are counted on
``errors`` and warned about once.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from .writing.events import SummaryFileWriter
from .writing.format import FIELDS
from .writing.reference import stats_numpy, update_ratio_numpy

__all__ = ["PytreeWriter", "flatten"]

EVENT_FILE_SUFFIX = ".gradhealth"
_UPDATE_RATIO = FIELDS.index("update_ratio")


def flatten(tree: Any) -> List[Tuple[str, Any]]:
    """(path joined with "/", leaf) in the tree's order; a top-level ``params`` collection is looked into."""
    if isinstance(tree, Mapping) and set(tree) >= {"params"} and isinstance(tree["params"], Mapping):
        tree = tree["params"]
    return list(_walk(tree, ""))


def _walk(node: Any, prefix: str) -> Iterator[Tuple[str, Any]]:
    if isinstance(node, Mapping):
        items = node.items()
    elif isinstance(node, (list, tuple)) and not hasattr(node, "shape"):
        items = enumerate(node)
    else:
        yield prefix, node
        return
    for key, child in items:
        yield from _walk(child, f"{prefix}/{key}" if prefix else str(key))


class PytreeWriter:
    """Writes gradhealth summaries of params / grads / updates pytrees into ``log_dir``."""

    def __init__(self, log_dir: str) -> None:
        self._writer = SummaryFileWriter(str(log_dir), filename_suffix=EVENT_FILE_SUFFIX)

    @property
    def errors(self) -> int:
        return self._writer.errors

    def log(self, step: int, params: Any = None, grads: Any = None, new_params: Any = None,
            updates: Any = None) -> None:
        """One logged step: ``params`` (before the update) with the update ratio to ``new_params`` when
        given, ``grads``, and the optimizer's ``updates``. Positions follow the params tree's order."""
        positions = {name: k for k, (name, _) in enumerate(flatten(params if params is not None else grads))}
        after = dict(flatten(new_params)) if new_params is not None else {}
        for role, tree in (("weight", params), ("gradient", grads), ("update", updates)):
            if tree is None:
                continue
            for name, leaf in flatten(tree):
                try:
                    values = np.asarray(leaf)
                    if values.dtype.kind in "iub":
                        continue  # step counters, integer state: not parameters (bfloat16 is kept)
                    vector = stats_numpy(values)
                    if role == "weight" and name in after:
                        vector[_UPDATE_RATIO] = update_ratio_numpy(values, np.asarray(after[name]))
                except Exception as e:  # noqa: BLE001 - never raise into training
                    self._writer.failures.report(f"statistics of {role} {name}", e, kind="compute statistics")
                    continue
                self._writer.write_stats(step, role, name, vector, position=positions.get(name),
                                         shape=values.shape)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

