"""How a logging failure is reported: counted on its owner, warned about once.

The integrations must never raise into training, and a failure that repeats
every step must not flood the log either.
"""

from __future__ import annotations

import logging

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
