"""Two healthy baselines: a Keras ``model.fit`` run and a PyTorch run.

Both train a small ReLU classifier (He initialisation, Adam at 1e-3) on the
same synthetic data. They show what the tab looks like when nothing is wrong.

* ``healthy/keras/train``: ``model.fit`` with Keras' own
  ``keras.callbacks.TensorBoard`` (epoch loss and accuracy) and gradhealth's
  ``GradientHealthCallback``, which writes exact statistics of the gradients,
  weights, update ratios and layer outputs every ``KERAS_EVERY`` steps.
  Keras callbacks never see the training batch, so the callback computes
  gradients and activations on ``probe_data``, one batch of training data.
  Keras writes the validation scalars to ``healthy/keras/validation``.
* ``healthy/torch``: a plain PyTorch loop logging the way seed 004 does, with
  ``torch.utils.tensorboard.SummaryWriter`` only and no gradhealth code:
  ``weights/<name>`` and ``grads/<name>`` histograms of every parameter and
  ``activations/<module>`` of every ReLU (a forward hook) every
  ``TORCH_EVERY`` steps, and the loss every step.

    python demo/healthy.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "healthy"
SEED = 1
BATCH = 64
KERAS_EPOCHS = 8  # 2048 * 0.875 / 64 = 28 steps per epoch
KERAS_EVERY = 4
TORCH_STEPS = 300
TORCH_EVERY = 30


def train_keras(out: pathlib.Path) -> dict:
    common.setup_tf(SEED)
    import keras

    from gradhealth_plugin.keras import GradientHealthCallback

    x, y = common.teacher_classification(SEED)
    model = keras.Sequential([
        keras.Input((x.shape[1],)),
        keras.layers.Dense(64, activation="relu", kernel_initializer="he_normal"),
        keras.layers.Dense(64, activation="relu", kernel_initializer="he_normal"),
        keras.layers.Dense(4),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    log_dir = str(common.run_dir(out, STORY, "keras"))
    health = GradientHealthCallback(log_dir, every_n_steps=KERAS_EVERY, probe_data=(x[:BATCH], y[:BATCH]))
    history = model.fit(x, y, batch_size=BATCH, epochs=KERAS_EPOCHS, validation_split=0.125, shuffle=True,
                        verbose=0, callbacks=[keras.callbacks.TensorBoard(log_dir), health])
    return {"final loss": history.history["loss"][-1], "val accuracy": history.history["val_accuracy"][-1],
            "logging errors": health.errors}


def train_torch(out: pathlib.Path) -> dict:
    torch = common.setup_torch(SEED)
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    x, y = (torch.from_numpy(a) for a in common.teacher_classification(SEED))
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(x.shape[1], 64))
    model.add_module("relu1", nn.ReLU())
    model.add_module("fc2", nn.Linear(64, 64))
    model.add_module("relu2", nn.ReLU())
    model.add_module("fc3", nn.Linear(64, 4))
    for module in model:
        if isinstance(module, nn.Linear):
            nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
            nn.init.zeros_(module.bias)
    outputs = {}
    for name, module in model.named_children():
        if isinstance(module, nn.ReLU):
            module.register_forward_hook(lambda m, inp, output, name=name: outputs.__setitem__(name, output.detach()))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    writer = SummaryWriter(str(common.run_dir(out, STORY, "torch")))
    for step, idx in enumerate(common.batch_indices(SEED, len(x), BATCH, TORCH_STEPS)):
        idx = torch.from_numpy(idx)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        if step % TORCH_EVERY == 0:
            common.log_seed004_histograms(writer, model, outputs, step)
        optimizer.step()
    writer.close()
    return {"final loss": loss.item()}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/keras": train_keras(out), f"{STORY}/torch": train_torch(out)}


if __name__ == "__main__":
    common.cli(main, __doc__)
