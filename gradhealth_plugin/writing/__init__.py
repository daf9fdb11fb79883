"""The writing side: the gradhealth summary format and the integrations that log it.

`format` defines what a gradhealth summary is (its tag, metadata and vector
layout) and is the one module the reading side imports from here. Everything
else writes: `events` (a TensorFlow-free event file), `reference` (the exact
statistics in numpy that every integration matches), `tf_stats` and
`tf_write` (the statistics and ``tf.summary`` writes the TensorFlow helper
and the Keras callback share), `names` (layer names), `failures` (the
warn-once report of a logging failure).

The PyTorch integration (`gradhealth_plugin.torch`), the TensorFlow helper
(`gradhealth_plugin.tf`) and the Keras callback (`gradhealth_plugin.keras`)
build on these. Nothing here imports the reading, analysis or serving
modules: a training script needs only this side and TensorBoard's protos.
"""
