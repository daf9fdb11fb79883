"""The layer names gradhealth records for framework variables."""

from __future__ import annotations

import re
from typing import Dict, List, Sequence


def variable_name(variable) -> str:
    """The layer name gradhealth records: Keras 3's ``path``, else the TF name without ``:0``."""
    name = getattr(variable, "path", None) or getattr(variable, "name", None) or "variable"
    return re.sub(r":\d+$", "", str(name))


def unique_names(names: Sequence[str]) -> List[str]:
    """`names` with every repeated name suffixed by its index, so each tensor keeps its own row.

    tf.Variables created outside a name scope all share names like "Variable".
    """
    counts: Dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return [f"{n}_{i}" if counts[n] > 1 else n for i, n in enumerate(names)]
