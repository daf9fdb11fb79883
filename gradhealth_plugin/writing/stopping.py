"""What every integration says about `stop_on`: whether, why and on which finding it stopped training.

Each integration keeps its `live.StopOn` (or None without `stop_on`) in `_stop`;
these read it, so the three integrations answer alike.
"""

from __future__ import annotations

from typing import Optional


class StopOnState:
    """`should_stop`, `stopped_by` and `stop_message`, read from the integration's `_stop`."""

    _stop = None

    @property
    def should_stop(self) -> bool:
        """True once ``stop_on`` found a finding to stop on; a training loop reads it to stop cleanly."""
        return self.stopped_by is not None

    @property
    def stopped_by(self):
        """The finding ``stop_on`` stopped on, or None."""
        return self._stop.stopped_by if self._stop is not None else None

    @property
    def stop_message(self) -> Optional[str]:
        """Why ``stop_on`` stopped training (also written into the run), or None."""
        return self._stop.message if self._stop is not None else None
