"""Periodic gradient spikes: a logging artefact (seed 000) next to a real periodic problem.

Both runs train the same three-layer ReLU classifier with Adam and log the way
seed 000's ``CustomTensorBoard`` does, with plain ``tf.summary`` calls: the
loss and the global gradient norm (``train/global_gradient_norm``) every step,
and ``gradients/<variable path>`` histograms every ``HIST_EVERY`` steps.

* ``periodic/logging_artefact``: the gradient logger computes the gradients it
  logs itself, as seed 000's callback does (``K.gradients`` on the batch it is
  fed), and it is fed a fixed batch of 8 held-out examples, the way Keras'
  old callback computed histograms on validation data. So on every histogram
  step the logged norm is that of another, smaller batch: 4-8x the
  training batch's, every ``HIST_EVERY`` steps. Training itself never sees
  those gradients; the loss is smooth.
* ``periodic/bad_batch``: the logger logs the gradients that were applied (seed
  000's fix), but every ``BAD_EVERY``-th batch comes from a shard whose inputs
  were never normalised (4x their scale). The gradient norm and the loss jump
  on those steps: a real problem, with a period (35) that is not a multiple
  of the histogram interval (20).

    python demo/periodic.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "periodic"
SEED = 0
STEPS = 400
BATCH = 128
HIST_EVERY = 20
PROBE = 8  # held-out examples the artefact's logger computes its gradients on
BAD_EVERY = 35
BAD_SCALE = 4.0
HELD_OUT = 256


def train(out: pathlib.Path, run: str, artefact: bool) -> dict:
    tf = common.setup_tf(SEED)
    import keras

    x_all, y_all = common.teacher_classification(SEED, n=2048 + HELD_OUT)
    x_train, y_train = x_all[:-HELD_OUT], y_all[:-HELD_OUT]
    x_probe, y_probe = tf.constant(x_all[-HELD_OUT:][:PROBE]), tf.constant(y_all[-HELD_OUT:][:PROBE])
    model = keras.Sequential([
        keras.Input((x_all.shape[1],)),
        keras.layers.Dense(64, activation="relu", kernel_initializer="he_normal"),
        keras.layers.Dense(64, activation="relu", kernel_initializer="he_normal"),
        keras.layers.Dense(4),
    ])
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    writer = tf.summary.create_file_writer(str(common.run_dir(out, STORY, run)))

    @tf.function
    def gradients(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss, tape.gradient(loss, model.trainable_variables)

    @tf.function
    def apply(grads):
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    def log_gradients(step, grads):
        """The gradient logger: every step the global norm, every HIST_EVERY steps the histograms too."""
        with writer.as_default(step=step):
            if step % HIST_EVERY == 0:
                if artefact:
                    _, grads = gradients(x_probe, y_probe)  # seed 000's path: its own batch, not the training one
                for var, grad in zip(model.trainable_variables, grads):
                    tf.summary.histogram(f"gradients/{var.path}", grad)
            tf.summary.scalar("train/global_gradient_norm", tf.linalg.global_norm(grads))

    bad_steps = []
    for step, idx in enumerate(common.batch_indices(SEED, len(x_train), BATCH, STEPS)):
        x = x_train[idx]
        if not artefact and step % BAD_EVERY == 0 and step > 0:
            x = x * BAD_SCALE  # the corrupted shard
            bad_steps.append(step)
        loss, grads = gradients(tf.constant(x), tf.constant(y_train[idx]))
        with writer.as_default(step=step):
            tf.summary.scalar("loss", loss)
        log_gradients(step, grads)
        apply(grads)
    writer.close()
    return {"final loss": float(loss), "bad batches": len(bad_steps)}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/logging_artefact": train(out, "logging_artefact", artefact=True),
            f"{STORY}/bad_batch": train(out, "bad_batch", artefact=False)}


if __name__ == "__main__":
    common.cli(main, __doc__)
