"""A small sweep over learning rate x optimizer, logged with the HParams API as seed 003 does.

Eight trials train the same four-layer tanh regression network (Keras'
default Glorot initialisation) with ``model.fit`` for a few epochs: learning
rates 0.001, 0.01, 0.3 and 1.0, each with plain SGD and with Adam. Each trial
logs the way seed 003 shows: ``keras.callbacks.TensorBoard(log_dir)`` and
``hp.KerasCallback(log_dir, hparams)`` into ``sweep/<trial>``, plus gradhealth's
``GradientHealthCallback`` for the gradients (Keras' callback writes no
gradients), every ``EVERY``-th step from the first. The hyperparameters land in
``sweep/<trial>``, the training's summaries in ``sweep/<trial>/train`` and
``/validation``: the tab's sweep view shows each trial as one line with its
hyperparameters.

* ``lr >= 0.3``: the first updates are more than 10% of some weights
  (update_ratio) with either optimizer; with Adam the weights then grow past
  3x their first std, and SGD at 1.0 turns the loss NaN in its first epoch.
* ``lr <= 0.01``: healthy with either optimizer.

``gradhealth report demo/runs/sweep --by-hparams`` names the learning rate as
what separates them ("Warnings or worse in 4 of 4 runs with learning_rate >=
0.3, in 0 of 4 below"); the optimizer explains nothing here.

    python demo/sweep.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "sweep"
SEED = 3
BATCH = 64
EPOCHS = 3  # 2048 * 0.875 / 64 = 28 steps per epoch
EVERY = 4
LEARNING_RATES = (0.001, 0.01, 0.3, 1.0)
OPTIMIZERS = ("sgd", "adam")
WIDTHS = (32, 32, 32, 32)


def train(out: pathlib.Path, learning_rate: float, optimizer_name: str) -> dict:
    common.setup_tf(SEED)
    import keras
    from tensorboard.plugins.hparams import api as hp

    from gradhealth_plugin.keras import GradientHealthCallback

    x, y = common.regression(SEED)
    model = keras.Sequential([keras.Input((x.shape[1],))]
                             + [keras.layers.Dense(w, activation="tanh") for w in WIDTHS]
                             + [keras.layers.Dense(1)])
    optimizer = {"sgd": keras.optimizers.SGD, "adam": keras.optimizers.Adam}[optimizer_name](learning_rate)
    model.compile(optimizer=optimizer, loss="mse")
    log_dir = str(common.run_dir(out, STORY, f"lr_{learning_rate:g}_{optimizer_name}"))
    hparams = {"learning_rate": learning_rate, "optimizer": optimizer_name}
    # Every EVERY-th step from the first: a sweep's trials are many, each must stay small.
    health = GradientHealthCallback(log_dir, every_n_steps=EVERY, probe_data=(x[:BATCH], y[:BATCH]),
                                    activations=False, first_steps=0)
    history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_split=0.125, shuffle=True, verbose=0,
                        callbacks=[keras.callbacks.TensorBoard(log_dir), hp.KerasCallback(log_dir, hparams),
                                   health])
    return {"final loss": history.history["loss"][-1], "logging errors": health.errors}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/lr_{lr:g}_{opt}": train(out, lr, opt) for lr in LEARNING_RATES for opt in OPTIMIZERS}


if __name__ == "__main__":
    common.cli(main, __doc__)
