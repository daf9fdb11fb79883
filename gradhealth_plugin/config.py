"""The user's configuration: tag rules and threshold overrides, without code.

Read from a JSON file: the one named by ``--gradhealth_config`` or, failing
that, ``gradhealth.json`` at the root of the logdir. A logdir given as a URL
(``s3://bucket/runs``) has its ``gradhealth.json`` read through TensorBoard's
own file layer, the one that reads its event files. Format (all keys
optional)::

    {"tag_rules": [{"pattern": "^my_grads/(?P<layer>.+)$", "role": "gradient"}],
     "thresholds": {"exploding_max_abs": 100}}

A bad entry (a rule, a threshold) is rejected with a one-line problem and the
rest of the file still applies; a file that cannot be read as a JSON object is
an error (`load`) or, for the tab, one problem and the defaults (`load_or_defaults`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from typing import Dict, List, Optional

from .analysis import limits as limits_lib
from .reading import tags as tags_lib

# The file a logdir may hold at its root.
CONFIG_FILENAME = "gradhealth.json"
# Far above any real configuration; a larger file is a mistake, not a reason to read gigabytes.
MAX_CONFIG_BYTES = 1 << 20


@dataclasses.dataclass
class Config:
    tag_rules: List[tags_lib.UserRule]
    limits: Dict[str, float]
    source: Optional[str] = None
    # One line per entry rejected, naming the file and the key; the tab and the CLI show them.
    problems: List[str] = dataclasses.field(default_factory=list)


def is_url(path: str) -> bool:
    """A logdir or file named by a URL (``s3://``, ``gs://``), read through TensorBoard's file layer."""
    return "://" in path


def _gfile():
    # TensorBoard's choice: TensorFlow's gfile where TensorFlow is installed, else its own (boto3 for s3://).
    from tensorboard.compat import tf

    return tf.io.gfile


def _path(path: Optional[str], logdir: Optional[str]) -> Optional[str]:
    if path or not logdir:
        return path or None
    if is_url(logdir):
        candidate = logdir.rstrip("/") + "/" + CONFIG_FILENAME
        try:
            return candidate if _gfile().exists(candidate) else None
        except Exception:  # noqa: BLE001 - a store the file layer cannot reach has no config to apply
            return None
    candidate = os.path.join(os.path.expanduser(logdir), CONFIG_FILENAME)
    return candidate if os.path.isfile(candidate) else None


def _read_bytes(path: str) -> bytes:
    """At most MAX_CONFIG_BYTES + 1 bytes of the file; ValueError naming it if it cannot be read."""
    if is_url(path):
        try:
            with _gfile().GFile(path, "rb") as f:
                return f.read(MAX_CONFIG_BYTES + 1)
        except Exception as e:  # noqa: BLE001 - TensorFlow's and boto3's errors alike
            raise ValueError(f"{path}: cannot read: {' '.join(str(e).split())}") from e
    try:
        # A FIFO or a device under the config's name would block or never end: read regular files only.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(f"{path}: not a regular file")
        with open(path, "rb") as f:
            return f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from e


def _read(path: str) -> object:
    """The file's JSON; ValueError naming the file if it cannot be read as JSON."""
    data = _read_bytes(path)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text: {e}") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    except RecursionError as e:
        raise ValueError(f"{path}: not valid JSON: nested too deeply") from e


def load(path: Optional[str] = None, logdir: Optional[str] = None) -> Config:
    """Loads the config, each bad entry rejected into `Config.problems`.

    Raises ValueError naming the file if it cannot be read as a JSON object.
    """
    path = _path(path, logdir)
    if not path:
        return Config(tag_rules=[], limits=limits_lib.thresholds())
    raw = _read(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object")
    tag_rules, problems = tags_lib.parse_user_rules(raw.get("tag_rules", []), source=path)
    limits, threshold_problems = limits_lib.checked_thresholds(raw.get("thresholds", {}))
    problems += [f"{path}: {p}" for p in threshold_problems]
    return Config(tag_rules=tag_rules, limits=limits, source=path, problems=problems)


def load_or_defaults(path: Optional[str] = None, logdir: Optional[str] = None) -> Config:
    """As `load`, but a file that cannot be read gives the defaults and one problem saying so."""
    try:
        return load(path, logdir)
    except ValueError as e:
        defaults = load()
        defaults.problems = [f"{e}; using the defaults"]
        return defaults
