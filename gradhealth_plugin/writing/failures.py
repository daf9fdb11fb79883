"""How a logging failure is reported: counted on its owner, warned about once.

The integrations must never raise into training, and a failure that repeats
every step must not flood the log either.
"""

from __future__ import annotations

import logging
from typing import Callable

logger = logging.getLogger(__name__)


def report_failure(owner, what: str, error: BaseException) -> None:
    """Counts a logging failure on `owner` (``errors``) and warns about the first one only.

    `owner` has an ``errors`` count and a ``_warned`` flag.
    """
    owner.errors += 1
    if not owner._warned:
        owner._warned = True
        logger.warning("gradhealth: could not %s (%s); training continues, further errors are not shown",
                       what, error)
    else:
        logger.debug("gradhealth: could not %s: %s", what, error)


def attempt(owner, what: str, action: Callable[[], object]) -> None:
    """Runs `action`; a failure is reported on `owner` (see `report_failure`) instead of raised."""
    try:
        action()
    except Exception as e:  # noqa: BLE001 - never raise into training
        report_failure(owner, what, e)
