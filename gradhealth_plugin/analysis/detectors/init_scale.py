"""A first logged weight std more than a factor away from both the He and the
Glorot value for the kernel's shape (seeds 002, 003), unless it is a known
fixed-std initialisation: N(0, 0.02), the default of GPT-2/BERT-style
transformers (``initializer_range``), and GPT-2's residual projections at
0.02 / sqrt(2 x blocks).

Only a first logged step at the start of training (`init_scale_max_step`)
shows the initialisation: a first log after 100 updates shows what they made
of it. A first histogram written at the end of an epoch is no initialisation
either, whatever its step: a loss of that epoch (a run-level loss named
``epoch_...``/``..._epoch``, as Keras' TensorBoard callback writes before its
histograms of each epoch's end) logged at the same step before it proves that
the epoch's updates were done. Such weights make an info finding that says so
and judges no initialiser. The shape comes from gradhealth's summaries; where only histograms were logged,
the element counts give the fans when the layer's bias is logged too: fan_out
is the bias count and fan_in the kernel count over it (Dense, Linear and
convolution kernels alike).

A lookup table (PyTorch's nn.Embedding, Keras' Embedding) is not judged: each of its rows is read
alone, never summed over a fan-in, so neither He nor Glorot says what its scale should be (PyTorch
starts it at N(0, 1)). It is known by "embed" in its module's name with no bias logged beside it.
"""

from __future__ import annotations

import collections
import re
from typing import List, Mapping, Optional

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import blocks as blocks_lib
from .. import metrics
from ..finding import INFO, WARN, Finding
from ..spans import Hit, group, labelled

KIND = "init_scale"
ORDER = 120
SEVERITY = WARN
LABEL = "Initialisation scale"
METRIC = "std"
NEEDS = (tags_lib.WEIGHT,)
ADVICE = ("Re-initialise: He (std sqrt(2/fan_in)) for ReLU layers, Glorot (std sqrt(2/(fan_in+fan_out))) "
          "for tanh/sigmoid.")
CELL_RULES = ()
THRESHOLDS = ()


# The std of GPT-2/BERT-style transformers' weights: `initializer_range` = 0.02, the default of
# transformers' GPT2Config, BertConfig, RobertaConfig and others, from OpenAI's GPT-2 code (normal
# stddev 0.02) and BERT's (Devlin et al. 2018, truncated normal 0.02).
TRANSFORMER_STD = 0.02

# Initialisations the first std is named after, as std(fan_in, fan_out, blocks): blocks is the number of
# numbered blocks of the model (transformer.h.0 ... h.11: 12), 0 where it has none.
_SCHEMES = (
    ("he", lambda i, o, n: np.sqrt(2.0 / i)),
    ("glorot", lambda i, o, n: np.sqrt(2.0 / (i + o))),
    ("lecun", lambda i, o, n: np.sqrt(1.0 / i)),
    ("pytorch_default", lambda i, o, n: np.sqrt(1.0 / (3.0 * i))),
    ("standard_normal", lambda i, o, n: 1.0),
    ("transformer_default", lambda i, o, n: TRANSFORMER_STD),
    # GPT-2 scales the weights of its residual projections (attn.c_proj, mlp.c_proj) by 1/sqrt(2 x layers)
    # (Radford et al. 2019, section 2.3; transformers' GPT2PreTrainedModel._init_weights).
    ("gpt2_residual", lambda i, o, n: TRANSFORMER_STD / np.sqrt(2.0 * n) if n else np.nan),
)
_NAMES = {"he": "He", "glorot": "Glorot", "lecun": "LeCun", "pytorch_default": "PyTorch's default Linear",
          "standard_normal": "a standard normal (std 1)",
          "transformer_default": "GPT-2/BERT-style transformers' N(0, 0.02) (initializer_range)",
          "gpt2_residual": "GPT-2's residual projection N(0, 0.02 / sqrt(2 x layers))"}
# Fixed-std schemes that are a model's deliberate default, not a mistake: a weight matching one is not judged.
_DEFAULTS = {"transformer_default", "gpt2_residual"}
# Within this factor of a scheme's std, the std is said to match it.
MATCH = 1.25
# A loss of a whole epoch: "epoch" as a word of its tag (Keras' `epoch_loss`, Lightning's `loss_epoch`).
_EPOCH_WORD = re.compile(r"(?:^|[^a-z0-9])epoch(?:$|[^a-z0-9])", re.IGNORECASE)
AFTER_EPOCH_ADVICE = ("To judge the initialisation, log the weights before the first update: "
                      "gradhealth_plugin.keras.GradientHealthCallback(logdir) logs them as step 0 starts; or write "
                      "one histogram of each weight before training starts.")


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    factor, max_step = limits["init_scale_factor"], limits["init_scale_max_step"]
    bias_counts = _bias_counts(rd)
    n_blocks = depth(rd)
    hits, after_epoch = [], []
    for layer in rd.layers:
        h = _hit(layer, factor, bias_counts.get(layer.group), n_blocks)
        if h is None or h.step > max_step:
            continue
        ended = epoch_ended(rd, layer.roles[tags_lib.WEIGHT], h.step)
        if ended is None:
            hits.append(h)
        else:
            h.detail["written_after"] = ended
            after_epoch.append(h)
    out = []
    f = group(rd, KIND, SEVERITY, tags_lib.WEIGHT, hits, factor,
              f"start with a std more than {factor:g}x away from both the He and the Glorot value", ADVICE)
    if f is not None:
        onset = f.evidence["layers"][f.layers[0]]
        scheme = onset["matches"]
        f.message += (f"; {labelled('layer', f.layers[:1])} starts at std {onset['value']:.3g} "
                      f"(He {onset['he_std']:.3g}, Glorot "
                      f"{onset['glorot_std']:.3g} for fan_in {onset['fan_in']}), "
                      + (f"as {_NAMES[scheme]} initialisation gives" if scheme
                         else "matching no common initialisation"))
        out.append(f)
    f = group(rd, KIND, INFO, tags_lib.WEIGHT, after_epoch, factor,
              f"have a std more than {factor:g}x away from both the He and the Glorot value", AFTER_EPOCH_ADVICE)
    if f is not None:
        onset = f.evidence["layers"][f.layers[0]]
        written = onset["written_after"]
        f.evidence["not_judged"] = "initialisation"
        f.message += (f", first logged at the end of an epoch, after its updates (written "
                      f"{written['seconds_after']:.3g} s after `{written['tag']}` of the same step, a loss of the "
                      f"whole epoch); {labelled('layer', f.layers[:1])} has std {onset['value']:.3g} there "
                      f"(He {onset['he_std']:.3g}, Glorot {onset['glorot_std']:.3g} for fan_in {onset['fan_in']}): "
                      "what training made of the initialisation, not the initialisation, which is not judged")
        out.append(f)
    return out


def epoch_ended(rd: RunData, rdata, step: int) -> Optional[dict]:
    """Proof that the row's weights at `step` were written at the end of an epoch, after its updates:
    a run-level loss of a whole epoch (`_EPOCH_WORD`) logged at the same step, on the same step axis, and
    written before the histogram holding them. {"tag", "seconds_after"}; None without such proof.

    Only a row read from its histogram on the histogram's own axis has that histogram's wall time; a
    row set by per-iteration summaries (gradhealth's) is judged from them."""
    seen = rdata.first_seen
    if (seen is None or seen[1] is None or seen[0] != step or rdata.histogram_other_axis
            or rdata.source.split("+")[0] != "histogram"):
        return None
    hist_wall = float(seen[1])
    for tag in sorted(rd.scalar_series):
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS or not _EPOCH_WORD.search(tag):
            continue
        steps, walls = np.asarray(rd.scalar_series[tag][0]), rd.scalar_walls.get(tag)
        if walls is None or len(walls) != len(steps) or rd.scalar_other_axis(tag):
            continue
        at = np.nonzero(steps == step)[0]
        if len(at) and np.isfinite(walls[at[0]]) and walls[at[0]] <= hist_wall:
            return {"tag": tag, "seconds_after": hist_wall - float(walls[at[0]])}
    return None


# An "embed" word in a module's name (embed, embedding, word_embeddings, embed_tokens): a lookup table
# where no bias is logged beside it, a projection that only carries the name where one is.
_LOOKUP_MODULE = re.compile(r"embed", re.IGNORECASE)


def _hit(layer, factor: float, bias_count: Optional[int], n_blocks: int = 0) -> Optional[Hit]:
    shape = getattr(layer, "shape", None)
    rdata = layer.roles.get(tags_lib.WEIGHT)
    if rdata is None or layer.kind != tags_lib.KIND_KERNEL:
        return None
    if bias_count is None and _LOOKUP_MODULE.search(layer.group) and (not shape or len(shape) == 2):
        return None
    std = metrics.judged(rdata.table).get("std")
    known = np.nonzero(np.isfinite(std))[0]
    if len(known) == 0:
        return None
    if shape and len(shape) >= 2:
        fan_in, fan_out = fans(shape, channels_last=_tf_layout(layer.name))
        source = {"shape": list(shape), "fans_from": "shape"}
    else:
        count = rdata.table.get("count")[known[0]]
        if rdata.table.quality_of("count")[known[0]] != metrics.EXACT:
            return None
        if not bias_count or not np.isfinite(count) or count % bias_count or count <= bias_count:
            return None
        fan_in, fan_out = int(count) // bias_count, bias_count
        source = {"count": int(count), "bias_count": bias_count,
                  "fans_from": "element counts: fan_out = bias count, fan_in = kernel count / bias count "
                               "(a convolution's fan_out also counts its kernel area, so the Glorot value "
                               "here is a little high for one)"}
    he = np.sqrt(2.0 / fan_in)
    glorot = np.sqrt(2.0 / (fan_in + fan_out))
    s0 = float(std[known[0]])
    off = lambda ref: max(s0 / ref, ref / s0) if s0 > 0 else np.inf  # noqa: E731
    if off(he) <= factor or off(glorot) <= factor:
        return None
    scheme = matches(s0, fan_in, fan_out, n_blocks)
    if scheme in _DEFAULTS:
        return None
    step = int(rdata.table.steps[known[0]])
    return Hit(layer.name, step, step, s0, step, {"he_std": he, "glorot_std": glorot, "fan_in": fan_in,
                                                  "fan_out": fan_out, "matches": scheme, **source})


def matches(std: float, fan_in: int, fan_out: int, n_blocks: int = 0) -> Optional[str]:
    """The initialisation whose std is nearest `std`, if within 25% of it (None otherwise); ``n_blocks``:
    the model's numbered blocks, for GPT-2's residual projections (0: not judged)."""
    if not std > 0:
        return None
    with np.errstate(invalid="ignore"):
        off = [(abs(np.log(std / ref(fan_in, fan_out, n_blocks))), name) for name, ref in _SCHEMES]
    distance, name = min((d, n) for d, n in off if np.isfinite(d))
    return name if distance <= np.log(MATCH) else None


def depth(rd: RunData) -> int:
    """The model's repeated blocks: the most numbered blocks sharing one stem (transformer.h.0 ... h.11: 12)."""
    found = {b for b in blocks_lib.blocks([layer.name for layer in rd.layers], [layer.group for layer in rd.layers])
             if b and b[-1].isdigit()}
    stems = collections.Counter(b.rstrip("0123456789") for b in found)
    return max(stems.values(), default=0)


def _bias_counts(rd: RunData) -> dict:
    """group -> element count of its bias, for groups whose bias weights were logged with one count."""
    out = {}
    for layer in rd.layers:
        rdata = layer.roles.get(tags_lib.WEIGHT)
        if layer.kind != tags_lib.KIND_BIAS or rdata is None:
            continue
        counts = rdata.table.get("count")
        counts = np.unique(counts[np.isfinite(counts)])
        if len(counts) == 1 and counts[0] >= 1:
            out.setdefault(layer.group, int(counts[0]))
    return out


def fans(shape, channels_last: bool = False) -> tuple:
    """(fan_in, fan_out) of a kernel.

    PyTorch stores (out, in, *kernel): Linear (out, in), Conv2d (out, in, kh, kw).
    TensorFlow/Keras store (*kernel, in, out) (`channels_last`): Dense (in, out),
    Conv2D (kh, kw, in, out).
    """
    shape = [int(s) for s in shape]
    if channels_last:
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        return shape[-2] * receptive, shape[-1] * receptive
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _tf_layout(name: str) -> bool:
    """TensorFlow names kernels ``.../kernel`` (``kernel:0``); PyTorch names them ``....weight``."""
    last = name.replace(".", "/").rsplit("/", 1)[-1].split(":")[0].lower()
    return "kernel" in last
