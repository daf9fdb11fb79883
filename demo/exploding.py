"""Exploding gradients, and the same run with ``tf.clip_by_global_norm`` (seed 002).

A six-layer tanh regression network (Keras' default Glorot initialisation)
trained with plain SGD on a step schedule that starts too aggressively: a
learning rate of 0.3 for the first 10 steps, then 0.01. Logging is exactly
seed 002's ``tf.GradientTape`` loop, no gradhealth code involved:
every step the scalars ``grad_mean/layer_<i>`` (mean |g|) and
``grad_max/layer_<i>`` (max |g|) of each trainable variable, the global
gradient norm before clipping (``train/global_gradient_norm``) and the loss;
every ``HIST_EVERY`` steps the histograms ``grad_hist/layer_<i>``
(``layer_<i>`` is the i-th trainable variable: kernels even, biases odd).

* ``exploding/unclipped``: within the first ten steps each large gradient moves
  the weights so far that the next gradient is larger still; max |g| passes 1e3
  (seed 002's explosion line) at step 7 and, although the learning rate drops
  30-fold at step 10, never comes back: the weights it left behind are huge.
  They also saturate the tanh units, so from then on the first layers get no
  gradient at all (the report adds vanishing findings after the explosion).
* ``exploding/clipped``: identical except that the gradients are clipped to a
  global norm of 1.0 before the update, as seed 002 recommends; each step is
  bounded, the feedback never starts and the loss goes down.

    python demo/exploding.py [--out demo/runs]
"""

from __future__ import annotations

import pathlib

import common

STORY = "exploding"
SEED = 2
STEPS = 300
BATCH = 32
HIST_EVERY = 10
WIDTHS = (64, 64, 64, 64, 64, 64)
# A step schedule: HIGH_LR for the first HIGH_LR_STEPS steps (too high), then LOW_LR.
HIGH_LR_STEPS, HIGH_LR, LOW_LR = 10, 0.3, 0.01
CLIP_NORM = 1.0


def train(out: pathlib.Path, run: str, clip: bool) -> dict:
    tf = common.setup_tf(SEED)
    import keras

    x_all, y_all = common.regression(SEED)
    model = keras.Sequential(
        [keras.Input((x_all.shape[1],))]
        + [keras.layers.Dense(w, activation="tanh") for w in WIDTHS]
        + [keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(keras.optimizers.schedules.PiecewiseConstantDecay([HIGH_LR_STEPS], [HIGH_LR, LOW_LR]))
    loss_fn = keras.losses.MeanSquaredError()
    writer = tf.summary.create_file_writer(str(common.run_dir(out, STORY, run)))

    @tf.function
    def train_step(x, y, log_histograms):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        step = optimizer.iterations
        with writer.as_default():
            tf.summary.scalar("loss", loss, step=step)
            for i, grad in enumerate(gradients):
                # Seed 002: mean |g| shows the overall update strength, max |g| an explosion first.
                tf.summary.scalar(f"grad_mean/layer_{i}", tf.reduce_mean(tf.abs(grad)), step=step)
                tf.summary.scalar(f"grad_max/layer_{i}", tf.reduce_max(tf.abs(grad)), step=step)
                if log_histograms:  # a Python bool: one traced graph with histograms, one without
                    tf.summary.histogram(f"grad_hist/layer_{i}", grad, step=step)
            if clip:
                gradients, global_norm = tf.clip_by_global_norm(gradients, clip_norm=CLIP_NORM)
            else:
                global_norm = tf.linalg.global_norm(gradients)
            # Before clipping: what clipping had to remove.
            tf.summary.scalar("train/global_gradient_norm", global_norm, step=step)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss, global_norm

    norms, losses = [], []
    for s, idx in enumerate(common.batch_indices(SEED, len(x_all), BATCH, STEPS)):
        loss, norm = train_step(tf.constant(x_all[idx]), tf.constant(y_all[idx]), s % HIST_EVERY == 0)
        norms.append(float(norm))
        losses.append(float(loss))
    writer.close()
    return {"final loss": losses[-1], "largest global norm": max(norms), "first norm": norms[0],
            "steps clipped": sum(n > CLIP_NORM for n in norms) if clip else "-"}


def main(out: pathlib.Path = common.RUNS) -> dict:
    return {f"{STORY}/unclipped": train(out, "unclipped", clip=False),
            f"{STORY}/clipped": train(out, "clipped", clip=True)}


if __name__ == "__main__":
    common.cli(main, __doc__)
