"""Hugging Face transformers: one `TrainerCallback` that watches the model being trained.

    from gradhealth_plugin.transformers import GradientHealthCallback
    trainer = Trainer(model, args, train_dataset=..., callbacks=[GradientHealthCallback()])

It is `gradhealth_plugin.torch.watch` attached at ``on_train_begin`` (when the
Trainer's optimizer exists) and removed at ``on_train_end``. Its summaries go
where the Trainer's TensorBoard logging goes (``report_to`` including
``tensorboard``), so the loss, the learning rate and the layers are one run:

1. ``args.logging_dir`` where the TrainingArguments have it (transformers 4);
2. else ``TENSORBOARD_LOGGING_DIR``, as the TensorBoard callback reads it;
3. else the ``output_dir/runs/<time>_<host>`` directory in which the TensorBoard
   callback, which runs before this one, has just opened its event file;
4. else ``output_dir/runs/gradhealth``.

Steps are numbered as the Trainer numbers its logs: the loss, learning rate and
``grad_norm`` of the k-th optimizer step are logged at step k (``state.global_step``
after the step), and so are that step's gradients here; with ``every_n_steps=100``
steps 100, 200, ... are logged, as ``logging_steps=100`` logs the loss. Importing this
module imports transformers; nothing else in gradhealth does.
"""

from __future__ import annotations

import os
import socket
from typing import Optional

try:
    from transformers import TrainerCallback
except ImportError as e:
    raise ImportError("gradhealth_plugin.transformers needs transformers: "
                      "pip install 'tensorboard-plugin-gradhealth[transformers]'") from e

from .torch.callbacks import TrainerWatch

__all__ = ["GradientHealthCallback"]


class GradientHealthCallback(TrainerWatch, TrainerCallback):
    """Logs exact gradient, weight, update and activation statistics of the model being trained.

    Args:
      log_dir: where to write; by default the Trainer's TensorBoard directory (see the module).
      every_n_steps, activations, update_ratio, all_ranks: as for `gradhealth_plugin.torch.watch`.
        In distributed training only rank 0 writes unless ``all_ranks``.
    """

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if model is None:
            return
        self._watch(model, self.log_dir or tensorboard_dir(args), optimizer, int(state.global_step) + 1)

    def on_train_end(self, args, state, control, **kwargs):
        self._release()


def tensorboard_dir(args) -> str:
    """The directory the Trainer's TensorBoard callback writes to (see the module's list)."""
    logging_dir = getattr(args, "logging_dir", None)
    if logging_dir:
        return str(logging_dir)
    if os.environ.get("TENSORBOARD_LOGGING_DIR"):
        return os.path.expanduser(os.environ["TENSORBOARD_LOGGING_DIR"])
    runs = os.path.join(str(args.output_dir), "runs")
    opened = _opened_here(runs)
    return opened or os.path.join(runs, "gradhealth")


def _opened_here(runs: str) -> Optional[str]:
    """The newest directory under `runs` holding an event file this process opened.

    SummaryWriter names its file ``events.out.tfevents.<time>.<host>.<pid>.<n>``:
    host and pid tell this process's file from an earlier training's.
    """
    mark = f".{socket.gethostname()}.{os.getpid()}."
    newest, newest_time = None, -1.0
    try:
        directories = [e for e in os.scandir(runs) if e.is_dir()]
    except OSError:
        return None
    for directory in directories:
        try:
            for entry in os.scandir(directory.path):
                if entry.name.startswith("events.out.tfevents.") and mark in entry.name:
                    mtime = entry.stat().st_mtime
                    if mtime > newest_time:
                        newest, newest_time = directory.path, mtime
        except OSError:
            continue
    return newest
