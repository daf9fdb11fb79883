"""Names and constants shared by the plugin, the CLI and the summary writers."""

PLUGIN_NAME = "gradhealth"
TAB_NAME = "Gradient Health"
# TensorBoard enables the tab whenever any of these plugins has data.
DATA_PLUGIN_NAMES = ("histograms", "scalars", PLUGIN_NAME)
# The config file a logdir may hold (tag rules and threshold overrides).
CONFIG_FILENAME = "gradhealth.json"
# Samples per gradhealth summary tag TensorBoard keeps (its default for other
# plugins' tensors is 10): the Python loader's default for histograms.
DEFAULT_SAMPLES = 500
