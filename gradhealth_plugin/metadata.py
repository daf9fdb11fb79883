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
# Samples per tag the plugin's loader asks TensorBoard to keep unless the user's
# --samples_per_plugin names the plugin: the Python loader's histogram default,
# for histograms too (the Rust data server keeps 100 of them otherwise).
HISTOGRAM_SAMPLES = 500
DEFAULT_SAMPLES_PER_PLUGIN = {PLUGIN_NAME: DEFAULT_SAMPLES, "histograms": HISTOGRAM_SAMPLES}
# The TensorBoard flag that keeps every logged step (0 means all; a data server
# started by hand spells it --samples-per-plugin histograms=all).
KEEP_ALL_FLAG = "--samples_per_plugin=histograms=0"
