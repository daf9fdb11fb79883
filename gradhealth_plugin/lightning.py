"""PyTorch Lightning: one callback that watches the LightningModule being fit.

    from gradhealth_plugin.lightning import GradientHealthCallback
    trainer = Trainer(callbacks=[GradientHealthCallback()])

It is `gradhealth_plugin.torch.watch` attached at ``on_fit_start`` (when the
trainer's optimizers exist) and removed at the end of the fit. Its summaries go
into the directory of the trainer's TensorBoard logger (``lightning_logs/version_N``),
so the loss, Lightning's own ``grad_norm`` scalars and the layers are one run in
the tab; without a TensorBoard logger, into ``trainer.log_dir``. Steps are the
trainer's optimizer steps (``global_step``), resumed ones included.

Importing this module imports Lightning: the ``lightning`` package where it is
installed, else ``pytorch_lightning``. Nothing else in gradhealth imports either.
"""

from __future__ import annotations

try:
    from lightning.pytorch import Callback
except ImportError:  # the older standalone package
    try:
        from pytorch_lightning import Callback
    except ImportError as e:
        raise ImportError("gradhealth_plugin.lightning needs PyTorch Lightning: "
                          "pip install 'tensorboard-plugin-gradhealth[lightning]'") from e

from .torch.callbacks import TrainerWatch

__all__ = ["GradientHealthCallback"]


class GradientHealthCallback(TrainerWatch, Callback):
    """Logs exact gradient, weight, update and activation statistics of the module being fit.

    Args:
      log_dir: where to write; by default the trainer's TensorBoard logger's directory.
      every_n_steps, activations, update_ratio, all_ranks: as for `gradhealth_plugin.torch.watch`.
        Under DDP only global rank 0 writes unless ``all_ranks``.
    """

    def on_fit_start(self, trainer, pl_module) -> None:
        self._watch(pl_module, self.log_dir or _trainer_log_dir(trainer), list(trainer.optimizers) or None,
                    int(trainer.global_step))

    def on_fit_end(self, trainer, pl_module) -> None:
        self._release()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._release()  # what was logged up to the failure is written


def _trainer_log_dir(trainer) -> str:
    """The first TensorBoard logger's directory, else the trainer's log directory."""
    for logger in getattr(trainer, "loggers", None) or []:
        # By name: lightning's and pytorch_lightning's loggers are different classes.
        if type(logger).__name__ == "TensorBoardLogger" and getattr(logger, "log_dir", None):
            return str(logger.log_dir)
    return str(trainer.log_dir or trainer.default_root_dir)
