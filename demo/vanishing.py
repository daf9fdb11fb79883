"""Vanishing gradients in a deep sigmoid network, and the fix: ReLU, He initialisation, BatchNorm (seeds 002, 003).

Both runs train a 12-hidden-layer classifier with Adam in a ``tf.GradientTape``
loop instrumented with gradhealth's TensorFlow helper,
``gradhealth_plugin.tf.GradientHealthLogger``, which writes the exact
statistics of every gradient and weight (and the update-to-weight ratio)
every ``EVERY`` steps; the loss is a plain ``tf.summary.scalar`` in the same
event file.

* ``vanishing/sigmoid``: Dense(32, sigmoid) layers with Keras' default Glorot
  initialisation. The sigmoid's slope is at most 1/4, so each layer shrinks
  the gradient on its way back: the first layers get almost none (mean |g|
  below 1e-6, seed 002's line) and barely learn.
* ``vanishing/relu_he_batchnorm``: the fix seeds 002 and 003 give, all three
  parts of it: Dense(32, use_bias=False, He normal init) -> BatchNormalization
  -> ReLU.

    python demo/vanishing.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "vanishing"
SEED = 3
STEPS = 400
BATCH = 64
EVERY = 10
DEPTH = 12
WIDTH = 32


def build(keras, fixed: bool):
    layers = [keras.Input((20,))]
    for _ in range(DEPTH):
        if fixed:
            # Seed 002: BatchNorm between the linear layer and the activation, no bias before it.
            layers += [keras.layers.Dense(WIDTH, use_bias=False, kernel_initializer="he_normal"),
                       keras.layers.BatchNormalization(), keras.layers.Activation("relu")]
        else:
            layers.append(keras.layers.Dense(WIDTH, activation="sigmoid"))
    layers.append(keras.layers.Dense(4))
    return keras.Sequential(layers)


def train(out: pathlib.Path, run: str, fixed: bool) -> dict:
    tf = common.setup_tf(SEED)
    import keras

    from gradhealth_plugin.tf import GradientHealthLogger

    x_all, y_all = common.teacher_classification(SEED)
    model = build(keras, fixed)
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    writer = tf.summary.create_file_writer(str(common.run_dir(out, STORY, run)))
    health = GradientHealthLogger(writer, every_n_steps=EVERY)  # shares the run's event file

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        with writer.as_default():
            tf.summary.scalar("loss", loss, step=optimizer.iterations)
        with health.step(optimizer.iterations, grads, model.trainable_variables):
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, tf.reduce_mean(tf.abs(grads[0]))

    first_layer = []
    for idx in common.batch_indices(SEED, len(x_all), BATCH, STEPS):
        loss, g0 = train_step(tf.constant(x_all[idx]), tf.constant(y_all[idx]))
        first_layer.append(float(g0))
    writer.close()
    return {"final loss": float(loss), "first layer mean |g| (median)": sorted(first_layer)[len(first_layer) // 2],
            "logging errors": health.errors}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/sigmoid": train(out, "sigmoid", fixed=False),
            f"{STORY}/relu_he_batchnorm": train(out, "relu_he_batchnorm", fixed=True)}


if __name__ == "__main__":
    common.cli(main, __doc__)
