"""The user's configuration: tag rules and threshold overrides, without code.

Read from a JSON file: the one named by ``--gradhealth_config`` or, failing
that, ``gradhealth.json`` at the root of a local logdir. Format (all keys
optional)::

    {"tag_rules": [{"pattern": "^my_grads/(?P<layer>.+)$", "role": "gradient"}],
     "thresholds": {"exploding_max_abs": 100}}
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

from .analysis import limits as limits_lib
from .reading import tags as tags_lib

# The file a logdir may hold at its root.
CONFIG_FILENAME = "gradhealth.json"


@dataclasses.dataclass
class Config:
    tag_rules: List[tags_lib.UserRule]
    limits: Dict[str, float]
    source: Optional[str] = None


def load(path: Optional[str] = None, logdir: Optional[str] = None) -> Config:
    """Loads the config; raises ValueError naming the file and the problem if it is malformed."""
    if not path and logdir and "://" not in logdir:
        candidate = os.path.join(os.path.expanduser(logdir), CONFIG_FILENAME)
        path = candidate if os.path.isfile(candidate) else None
    if not path:
        return Config(tag_rules=[], limits=limits_lib.thresholds())
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object")
    tag_rules = tags_lib.parse_user_rules(raw.get("tag_rules", []), source=path)
    try:
        limits = limits_lib.thresholds(raw.get("thresholds", {}))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e
    return Config(tag_rules=tag_rules, limits=limits, source=path)
