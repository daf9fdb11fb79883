"""Which block of the model each heatmap row belongs to, so the tab can fold a block into one row.

The rule: a layer's block is its module's name cut after the last numbered part
above the module that has numbered siblings (``transformer.h.3`` for
``transformer.h.3.attn.c_attn.weight``, ``layer4.1`` for ``layer4.1.bn1.bias``,
``encoder/layer_7`` for ``encoder/layer_7/attention/self/query/kernel``); a layer
with no such part belongs to its module (``dense_3`` for ``dense_3/kernel``). A
block of one row is no block.

A part is numbered when it ends in digits (``3``, ``layer_7``, ``h1``); its
siblings are the parts at the same place under the same parent whose name
differs from it only in those digits (``h.0`` ... ``h.11``; ``layer1`` ...
``layer4``). Requiring siblings keeps a lone ``model_1/`` scope from swallowing
the whole model into one block.
"""

from __future__ import annotations

import collections
import functools
import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

_PARTS = re.compile(r"[^/.]+")
_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _split(name: str) -> List[Tuple[int, str]]:
    """The parts of a name with where each ends: ``a.b/c`` -> [(1, 'a'), (3, 'b'), (5, 'c')]."""
    return [(m.end(), m.group(0)) for m in _PARTS.finditer(name)]


def blocks(names: Sequence[str], modules: Sequence[str]) -> List[Optional[str]]:
    """Per row, the name of its block, or None when no other row shares it.

    `names` are the rows' layer names and `modules` the module each belongs to
    (``Layer.group``: the name without its parameter word, ``fc1`` for
    ``fc1.weight``), in the same order.
    """
    # Every heatmap answer (a zoom's, a scroll's) asks again of the same rows.
    return list(_blocks(tuple(names), tuple(modules)))


@functools.lru_cache(maxsize=64)
def _blocks(names: Tuple[str, ...], modules: Tuple[str, ...]) -> Tuple[Optional[str], ...]:
    split = [_split(m) for m in modules]
    # Per (parent prefix, stem), the numbered parts seen there.
    seen: Dict[Tuple[str, str], Set[str]] = collections.defaultdict(set)
    for module, parts in zip(modules, split):
        start = 0
        for end, part in parts:
            m = _NUMBERED.match(part)
            if m:
                seen[(module[:start], m.group(1))].add(part)
            start = end
    found: List[str] = []
    for name, module, parts in zip(names, modules, split):
        block = module if module else name
        start = 0
        # The module's own part is not a candidate: only the parts above it.
        for end, part in parts[:-1]:
            m = _NUMBERED.match(part)
            if m and len(seen[(module[:start], m.group(1))]) > 1:
                block = module[:end]
            start = end
        found.append(block)
    counts = collections.Counter(found)
    return tuple(b if counts[b] > 1 else None for b in found)
