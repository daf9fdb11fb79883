"""What the trainer callbacks (`gradhealth_plugin.lightning`, `gradhealth_plugin.transformers`) share:
`watch`'s settings, the watch's handle while training runs, and ending it.

Neither Lightning nor transformers is imported here: each callback module
mixes `TrainerWatch` into its library's callback class.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Union

from .handle import WatchHandle
from .watch import unwatch, watch


class TrainerWatch:
    """`watch`'s settings for a trainer callback, and the handle of the watch it runs (None between trainings).

    Args:
      log_dir: where to write; by default the trainer's TensorBoard directory.
      every_n_steps, activations, update_ratio, all_ranks: as for `gradhealth_plugin.torch.watch`.
        In distributed training only rank 0 writes unless ``all_ranks``.
    """

    def __init__(self, log_dir: Optional[str] = None, every_n_steps: int = 100,
                 activations: Union[bool, Iterable[str], Callable] = True, *, update_ratio: bool = True,
                 all_ranks: bool = False) -> None:
        super().__init__()
        if int(every_n_steps) < 1:
            raise ValueError("gradhealth: every_n_steps must be at least 1")
        self.log_dir = log_dir
        self.every_n_steps = int(every_n_steps)
        self.activations = activations
        self.update_ratio = update_ratio
        self.all_ranks = all_ranks
        self.handle: Optional[WatchHandle] = None

    def _watch(self, model, log_dir: str, optimizer, start_step: int) -> None:
        """Watches `model` with these settings, writing into `log_dir`."""
        self.handle = watch(model, log_dir, optimizer=optimizer, every_n_steps=self.every_n_steps,
                            activations=self.activations, update_ratio=self.update_ratio, start_step=start_step,
                            all_ranks=self.all_ranks)

    def _release(self) -> None:
        """Ends the watch, writing what is pending; nothing when none runs."""
        if self.handle is not None:
            unwatch(self.handle)
            self.handle = None
