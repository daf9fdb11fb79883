"""What a run's event files hold, read only as far as the question needs, without loading the run.

`gradhealth report --run X` reads one run, but a run of scalars only (Keras' ``X/validation``) is told
where its layers are: the one run beside it that holds any. Whether a run holds layers is known at its
first histogram or gradhealth summary, so its files are read up to there, not loaded. A run is read to
its end only where it holds none. The test is the data provider's listing's: a time series of the
histograms or gradhealth plugin with tensor data (`provider.layer_runs`), or of the scalars plugin with
scalar data (`provider.run_names`), after the same read-time conversions TensorBoard's loader makes.
"""

from __future__ import annotations

from typing import Optional, Sequence

from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat.proto import summary_pb2

from ..writing import format as metadata

LAYERS = "layers"
SCALARS = "scalars"

_LAYER_PLUGINS = ("histograms", metadata.PLUGIN_NAME)


def holds(paths: Sequence[str]) -> Optional[str]:
    """`LAYERS` at the first histogram or gradhealth summary in the run's event files ``paths`` (nothing
    after it is read); else `SCALARS` where they hold scalars; else None (nothing the tab reads)."""
    found = None
    for path in paths:
        # The loader TensorBoard's Python loader reads with: old-style histograms and simple values
        # arrive as the histograms and scalars plugins' summaries, with their data class.
        for event in event_file_loader.EventFileLoader(path).Load():
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                data_class = value.metadata.data_class
                if plugin in _LAYER_PLUGINS and data_class == summary_pb2.DATA_CLASS_TENSOR:
                    return LAYERS
                if plugin == "scalars" and data_class == summary_pb2.DATA_CLASS_SCALAR:
                    found = SCALARS
    return found
