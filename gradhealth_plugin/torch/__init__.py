"""Exact gradient, weight, update and activation statistics of a PyTorch model.

    from gradhealth_plugin.torch import watch
    watch(model, "runs/exp1", optimizer=optimizer)

At every one of the first `first_steps` (30) optimizer steps, then every
`every_n_steps` (100), this writes one gradhealth summary (`writing.format.FIELDS`
and a compact histogram) per watched tensor into an event file in `log_dir`:

* ``gradient``: each trainable parameter's ``.grad`` just before
  ``optimizer.step()`` (after backward, after ``GradScaler.unscale_``);
* ``weight``: the parameter before that step, with the exact
  ``update_ratio`` ||w_after - w_before|| / ||w_before|| of the step;
* ``activation``: the output of each leaf module (``relu1``, ``net.2``) in the
  first training forward pass of that step.

Statistics are reduced with torch ops on the tensors' own device, in float64;
only a small matrix per device and logged step reaches the CPU. Steps that are
not logged cost a few Python calls per hook and nothing on the device.

Importing this module does not import TensorFlow (``torch.utils.tensorboard``
would), and nothing here raises into the training loop: failures are counted
on the handle and warned about once.

The reduction kernels (`kernels`) stand apart from the hook machinery
(`hooks`), what each hook does (`handle`) and attaching them (`watch`).
"""

from .handle import ACTIVATION, EVENT_FILE_SUFFIX, GRADIENT, WEIGHT, TrainingStopped, WatchHandle  # noqa: F401
# Models pickled while watched by earlier versions name their hooks' function here.
from .hooks import hook as _hook  # noqa: F401
from .kernels import tensor_stats
from .watch import unwatch, watch

__all__ = ["watch", "unwatch", "WatchHandle", "TrainingStopped", "tensor_stats"]
