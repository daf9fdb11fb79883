"""Maps TensorBoard tag names to (layer, role).

Users already log histograms and scalars under many naming conventions. This
module turns each tag into a `TagInfo` saying which layer (parameter tensor or
module output) it describes and in which role, so that the gradient and the
weight of one parameter land on one heatmap row.

Conventions recognised (each covered by a test on a logdir written by the real
library):

* TF2 custom loops: ``gradients/<var.name>``, ``weights/<var.name>``
  (``dense_1/kernel:0``); seed 002's ``grad_hist/layer_<i>`` histograms and
  ``grad_mean/layer_<i>`` / ``grad_max/layer_<i>`` scalars.
* Keras' TensorBoard callback: ``<layer>/<w>_0`` (TF 2.1-2.2),
  ``<layer>/<w>_0/histogram`` (TF 2.3-2.15), ``<weight.path>/histogram``
  (Keras 3). Weights only.
* PyTorch tutorials: ``weights/<name>``, ``grads/<name>``,
  ``activations/<module>``; ``<name>.grad`` next to ``<name>``;
  tensorboardX's ``<name>/grad`` next to ``<name>/data``; any tag one word away
  from a gradient's (``<name>/value`` beside ``<name>/gradient``, see `pair_values`).
* PyTorch Lightning scalars: ``grad_2.0_norm/<param>`` and
  ``grad_2.0_norm_total``.
* TF1 tutorials: ``<layer>/weights/summaries/histogram`` with scalars
  ``.../summaries/{mean,stddev,max,min}``; ``<layer>/outputs``,
  ``<layer>/activations``, ``<layer>_activation`` (tf.contrib.learn); repeated name scopes (``layer1/weights/layer1/weights``).

Users override or extend the mapping without code through a JSON file (see
``docs/configuration.md``): its rules are tried before the built-in ones.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

try:  # Python's regex parser, to tell an optional layer group (see `_optional_layer_group`)
    from re import _constants as _sre_constants
    from re import _parser as _sre_parser
except ImportError:  # pragma: no cover - Python < 3.11 names them sre_constants and sre_parse
    try:
        import sre_constants as _sre_constants
        import sre_parse as _sre_parser
    except ImportError:
        _sre_constants = _sre_parser = None

from ..analysis.metrics import METRICS

GRADIENT = "gradient"
WEIGHT = "weight"
ACTIVATION = "activation"
UPDATE = "update"
# What no rule, convention or name word could tell: still a row, judged only by the
# rules that need no role (non-finite values, spikes).
OTHER = "other"
ROLES = (GRADIENT, WEIGHT, ACTIVATION, UPDATE, OTHER)

# Kinds of tensor, used to skip rules that mean nothing for a tensor that
# starts constant (biases, normalisation parameters) or for pre-activations.
KIND_KERNEL = "kernel"
KIND_BIAS = "bias"
KIND_NORM = "norm"
KIND_OUTPUT = "output"
KIND_PREACTIVATION = "preactivation"
KIND_OTHER = "other"

# Run-level scalar kinds.
SCALAR_LOSS = "loss"
SCALAR_LR = "learning_rate"
SCALAR_GRAD_NORM = "grad_norm_total"
SCALAR_OTHER = "other"

# `TagInfo.metric` of a gradhealth summary: it carries every statistic at once.
OWN_SUMMARY = "*"

# How a tag's role was decided (`TagInfo.decided_by`), most certain first.
BY_RULE = "rule"  # the user's tag rule
BY_CONVENTION = "convention"  # a known writer's naming (or gradhealth's own metadata)
BY_PAIRING = "pairing"  # a name next to its logged gradient, one word apart
BY_NAME = "name"  # the words of the name
BY_DATA = "data"  # the histograms themselves (see `data_roles`)
BY_FALLBACK = "fallback"  # nothing told: role OTHER
BY_SHARED_NAME = "shared_name"  # another tag names the same parameter: role OTHER (see `weights_sharing_a_name`)
BY_OPTIMIZER_STATE = "optimizer_state"  # an optimizer's own variable: role OTHER (see `optimizer_state`)


@dataclasses.dataclass(frozen=True)
class TagInfo:
    """What one tag describes.

    `layer` is the heatmap row: a parameter tensor (``dense/kernel``,
    ``fc1.weight``) or a module output (``relu1``). `group` is the module the
    row belongs to. `metric` is set for per-layer scalars that carry one
    statistic (``grad_max/layer_0`` -> ``max_abs``); None for histograms.
    """

    tag: str
    layer: str
    role: str
    group: str
    kind: str
    metric: Optional[str] = None
    order_hint: Optional[int] = None
    decided_by: str = BY_CONVENTION


@dataclasses.dataclass(frozen=True)
class ScalarInfo:
    """A run-level scalar (loss, learning rate, global gradient norm, ...)."""

    tag: str
    kind: str


@dataclasses.dataclass(frozen=True)
class UserRule:
    """One user-supplied rule: a regex with a named group ``layer``."""

    pattern: re.Pattern
    role: str  # a role, or "ignore"
    metric: Optional[str] = None


_ROLE_PREFIXES = (
    (re.compile(r"^(?:gradients?|grads?|grad_hists?|grad_histogram|gradient_hist)/(.+)$", re.I), GRADIENT),
    (re.compile(r"^(?:weights?|params?|parameters?|weight_hist)/(.+)$", re.I), WEIGHT),
    (re.compile(r"^(?:activations?|acts?|activation_hist)/(.+)$", re.I), ACTIVATION),
    (re.compile(r"^(?:updates?|deltas?)/(.+)$", re.I), UPDATE),
)
# Flax: a ``variables`` dict flattened whole keeps its collection names: ``params/`` after a role
# prefix (the gradient of the whole dict), BatchNorm's running statistics under ``batch_stats/`` (like
# Keras's moving_mean, weights of a norm layer) and ``capture_intermediates`` outputs under
# ``intermediates/<module>/__call__``. Tried before the prefixes, which would keep ``params/`` in the layer.
_FLAX_COLLECTIONS = (
    (re.compile(r"^(?:gradients?|grads?)/params/(.+)$"), GRADIENT, None),
    (re.compile(r"^(?:weights?|params?|parameters?)/params/(.+)$"), WEIGHT, None),
    (re.compile(r"^(?:updates?)/params/(.+)$"), UPDATE, None),
    (re.compile(r"^batch_stats/(.+/(?:mean|var))$"), WEIGHT, KIND_NORM),
    (re.compile(r"^intermediates/(.+?)/__call__(?:/\d+)?$"), ACTIVATION, None),
)
_ROLE_SUFFIXES = (
    (re.compile(r"^(.+?)(?:\.grad|/grad|/grads|/gradients?|_grad)$", re.I), GRADIENT),
    (re.compile(r"^(.+?)/data$", re.I), WEIGHT),
    (re.compile(r"^(.+?)(?:/update|/updates|\.update)$", re.I), UPDATE),
)
# Per-layer scalars carrying one statistic of a gradient.
_GRAD_SCALARS = (
    (re.compile(r"^grad_mean/(.+)$", re.I), "mean_abs"),
    (re.compile(r"^grad_max/(.+)$", re.I), "max_abs"),
    (re.compile(r"^grad_2\.0_norm/(.+)$", re.I), "l2"),
    (re.compile(r"^grad_norm/(.+)$", re.I), "l2"),
    (re.compile(r"^grad_std/(.+)$", re.I), "std"),
)
# Per-layer scalars carrying the exact share of zeros in a layer's output (`tf.nn.zero_fraction`):
# the TF1 CIFAR-10 tutorial's ``<scope>/sparsity`` next to its ``<scope>/activations`` histogram,
# and canned DNN estimators' ``dnn/hiddenlayer_<i>_fraction_of_zero_values`` (``/`` in tf.estimator)
# next to ``dnn/hiddenlayer_<i>_activation``.
_ZERO_FRACTION_SCALARS = (
    re.compile(r"^(.+)/sparsity$", re.I),
    re.compile(r"^(.+?)[/_]fraction_of_zero_values$", re.I),
)
# TF1 tutorial ``variable_summaries``: ``<var>/summaries/<stat>``.
_SUMMARY_STATS = {"mean": "mean", "stddev": "std", "max": "max", "min": "min"}
_SUMMARIES_RE = re.compile(r"^(.+)/summaries/(mean|stddev|max|min)(?:_\d+)?$", re.I)

_PARAM_WORDS = {
    "kernel": KIND_KERNEL, "weight": KIND_KERNEL, "weights": KIND_KERNEL, "w": KIND_KERNEL,
    "embeddings": KIND_KERNEL, "depthwise_kernel": KIND_KERNEL, "pointwise_kernel": KIND_KERNEL,
    "recurrent_kernel": KIND_KERNEL, "weight_ih": KIND_KERNEL, "weight_hh": KIND_KERNEL,
    "bias": KIND_BIAS, "biases": KIND_BIAS, "b": KIND_BIAS, "bias_ih": KIND_BIAS, "bias_hh": KIND_BIAS,
    "gamma": KIND_NORM, "beta": KIND_NORM, "moving_mean": KIND_NORM, "moving_variance": KIND_NORM,
    "running_mean": KIND_NORM, "running_var": KIND_NORM, "num_batches_tracked": KIND_NORM,
    "scale": KIND_NORM, "offset": KIND_NORM,
}
# A ``sparsity`` of a parameter or a pruning mask (``conv1/mask/sparsity``) is no activation's.
_NOT_AN_OUTPUT = {"mask", "masks"} | set(_PARAM_WORDS)
_ACTIVATION_WORDS = {"activations", "activation", "outputs", "output", "relu", "act", "acts"}
_PREACTIVATION_WORDS = {"preactivate", "pre_activations", "preactivation", "pre_activation", "logits_pre"}
# ``<layer>_activation(s)`` names the same row as ``<layer>/activation(s)``: the output of <layer>
# (tf.contrib.learn's DNN estimators log ``dnn/hiddenlayer_0_activation``). ``_pre_activation`` is not one.
_ACTIVATION_SUFFIX_RE = re.compile(r"^(.*[^/](?<!pre))_activations?$", re.I)
_NORM_MODULE = re.compile(r"(?:^|[/._])(?:bn\d*|batch_?norm\w*|batchnorm\w*|layer_?norm\w*|ln\d*|norm\d*|group_?norm\w*)(?:$|[/._])", re.I)

# Name tokens: the last resort before "unknown". A name is split into words on
# ``/ . _ - :``, digits and camelCase; the role word nearest the end of the name decides
# (``output/Weights`` is a weight, ``output_layer/logits`` an activation).
_TOKEN_ROLES = {
    GRADIENT: {"grad", "grads", "gradient", "gradients"},
    UPDATE: {"update", "updates", "delta", "deltas"},
    WEIGHT: {"weight", "weights", "kernel", "kernels", "bias", "biases", "biase", "embedding", "embeddings",
             "gamma", "beta", "variable", "variables", "param", "params", "parameters"},
    ACTIVATION: {"act", "acts", "activation", "activations", "out", "output", "outputs", "relu", "sigmoid",
                 "tanh", "softmax", "logits", "hidden", "pool", "dropout"},
}
_TOKEN_KINDS = {"bias": KIND_BIAS, "biases": KIND_BIAS, "biase": KIND_BIAS, "b": KIND_BIAS,
                "gamma": KIND_NORM, "beta": KIND_NORM, "W": KIND_KERNEL, "w": KIND_KERNEL}
# Words that say which statistic or plot was logged, not what was measured.
_DECORATIONS = {"stddev", "std", "mean", "max", "min", "summ", "summary", "summaries", "histogram",
                "histograms", "hist", "distribution", "distributions", "values"}
_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


# Words may be separated by spaces too: the PyTorch TensorBoard tutorial logs "training loss".
_LOSS_RE = re.compile(r"(?:^|[/_.\s-])(?:loss|cost|cross_entropy|xent|nll)(?:$|[/_.\d\s-])", re.I)
_LR_RE = re.compile(r"(?:^|[/_.\s-])(?:lr|learning[_\s-]rate)(?:$|[/_.\d\s-])", re.I)
_GRAD_NORM_TOTAL_RE = re.compile(
    r"(?:grad_2\.0_norm_total|grad_norm_total|global_grad(?:ient)?_norm|grad(?:ient)?_norm$|total_grad_norm)", re.I
)


# Compiled once: a run of many tags classifies each of them (see `_strip_decorations`).
_HISTOGRAM_SUFFIX_RE = re.compile(r"(?:/summaries)?/histogram$")
_OUTPUT_INDEX_RE = re.compile(r":\d+$")
# Keras 2's callback writes ``kernel_0`` for variable ``kernel:0``.
_KERAS2_WEIGHT_RE = re.compile(r"(?<=/)(kernel|bias|gamma|beta|moving_mean|moving_variance|embeddings|"
                               r"recurrent_kernel|depthwise_kernel|pointwise_kernel)_0$")
_PARAM_SPLIT_RE = re.compile(r"^(.*?)[/.]([^/.]+)$")
_PIECES_RE = re.compile(r"[._\-\s:]+")
_NUMBERED_RE = re.compile(r"^(.+)_\d+$")
_DIGITS_RE = re.compile(r"(\d+)")


def _strip_decorations(name: str) -> str:
    """Removes what writers append to a variable name: ``:0``, ``/histogram``, ``_0``."""
    name = _HISTOGRAM_SUFFIX_RE.sub("", name)
    name = _OUTPUT_INDEX_RE.sub("", name)
    if name.endswith("_0"):
        name = _KERAS2_WEIGHT_RE.sub(r"\1", name)
    return _collapse_repeats(name)


def _collapse_repeats(name: str) -> str:
    """Collapses repeated name scopes: ``a/b/a/b`` -> ``a/b``, ``a/a/c`` -> ``a/c``."""
    parts = name.split("/")
    half = len(parts) // 2
    if len(parts) % 2 == 0 and half and parts[:half] == parts[half:]:
        parts = parts[:half]
    out = [p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1]]
    return "/".join(out)


def _split_param(layer: str) -> tuple:
    """Splits ``dense_1/kernel`` or ``fc1.weight`` into (group, last word)."""
    m = _PARAM_SPLIT_RE.match(layer)
    if not m:
        return layer, layer
    return m.group(1), m.group(2)


def _kind_of(layer: str, role: str) -> str:
    group, last = _split_param(layer)
    low = last.lower()
    if role == ACTIVATION:
        if low in _PREACTIVATION_WORDS or "preact" in low or "pre_act" in low:
            return KIND_PREACTIVATION
        return KIND_OUTPUT
    kind = _PARAM_WORDS.get(low)
    if kind is None:
        kind = KIND_KERNEL if re.search(r"weight|kernel", low) else (
            KIND_BIAS if re.search(r"bias", low) else KIND_OTHER)
    # PyTorch names BatchNorm/LayerNorm parameters weight/bias: the module says it.
    if kind in (KIND_KERNEL, KIND_BIAS) and _NORM_MODULE.search(group or ""):
        return KIND_NORM
    return kind


def _group_of(layer: str, role: str) -> str:
    if role == ACTIVATION:
        return layer.split("/")[0] if _kind_of(layer, role) == KIND_PREACTIVATION else layer
    group, last = _split_param(layer)
    return group if group != layer else layer


def _make(tag: str, layer: str, role: str, metric: Optional[str] = None, order_hint: Optional[int] = None) -> TagInfo:
    layer = _strip_decorations(layer)
    return TagInfo(tag=tag, layer=layer, role=role, group=_group_of(layer, role),
                   kind=_kind_of(layer, role), metric=metric, order_hint=order_hint)


def with_role(info: TagInfo, role: str, decided_by: str) -> TagInfo:
    """The same tag given another role (its group and kind follow the role), and how that was decided."""
    return dataclasses.replace(info, role=role, group=_group_of(info.layer, role), kind=_kind_of(info.layer, role),
                               decided_by=decided_by)


def own_summary_info(tag: str, layer: str, role: str, position: Optional[int]) -> TagInfo:
    """TagInfo for a gradhealth summary, whose metadata names the layer and role."""
    return _make(tag, layer, role, OWN_SUMMARY, position)


def _apply_user_rules(tag: str, rules: Sequence[UserRule]) -> Optional[object]:
    for rule in rules:
        m = rule.pattern.search(tag)
        if not m:
            continue
        if rule.role == "ignore":
            return "ignore"
        group = _layer_group(rule.pattern)
        layer = tag if group is None else m.group(group)
        if not layer:  # the group took no part in this match, or matched nothing: no row to name
            continue
        return dataclasses.replace(_make(tag, layer, rule.role, rule.metric), decided_by=BY_RULE)
    return None


def _pieces(segment: str) -> list:
    return [p for p in _PIECES_RE.split(segment) if p]


def _name_words(segment: str) -> list:
    """The words of one name part in reading order: a piece that is a known word whole
    stays whole, others split on camelCase."""
    words = []
    for piece in _pieces(segment):
        bare = piece.rstrip("0123456789")
        known = bare.lower() in _DECORATIONS or any(bare.lower() in v for v in _TOKEN_ROLES.values())
        words.extend([bare] if known else _WORD_RE.findall(bare))
    return words


def _letter_kind(segment: str) -> Optional[str]:
    """W_conv1, w1_summ, b_fc1, fc1/W: a name part led by the letter W, w or b names that tensor."""
    pieces = _pieces(segment)
    lead = pieces[0].rstrip("0123456789") if pieces else ""
    return _TOKEN_KINDS.get(lead, KIND_KERNEL) if lead in ("W", "w", "b") else None


def _role_from_words(name: str) -> Optional[tuple]:
    """(role, kind or None) from the name part nearest the end that names a role, or None.

    Within a part, a prefix decides first (d_W_fc1 is a gradient, W_hidden1 a weight, whatever
    follows); otherwise the role word nearest the end (output/Weights, output_layer/logits).
    """
    for segment in reversed(name.split("/")):
        if segment.startswith("d_") and len(segment) > 2:
            return GRADIENT, _letter_kind(segment[2:])  # numpy-style d_conv1, d_W_fc1
        if segment.startswith("dW"):
            return GRADIENT, KIND_KERNEL
        kind = _letter_kind(segment)
        if kind is not None:
            return WEIGHT, kind
        for word in reversed(_name_words(segment)):
            low = word.lower()
            for role, vocabulary in _TOKEN_ROLES.items():
                if low in vocabulary:
                    return role, _TOKEN_KINDS.get(low, KIND_KERNEL if role == WEIGHT else None)
    return None


def _without_decorations(name: str) -> str:
    """``layer1/weights/stddev/histogram`` -> ``layer1/weights``; ``w1_summ`` -> ``w1``."""
    parts = name.split("/")
    while len(parts) > 1 and parts[-1].lower() in _DECORATIONS:
        parts.pop()
    parts[-1] = re.sub(r"(?<=.)[_\-](?:%s)$" % "|".join(sorted(_DECORATIONS)), "", parts[-1], flags=re.I)
    return "/".join(parts)


def _from_name_words(tag: str, name: str) -> Optional[TagInfo]:
    found = _role_from_words(name)
    if found is None:
        return None
    role, kind = found
    info = dataclasses.replace(_make(tag, _without_decorations(name), role), decided_by=BY_NAME)
    return dataclasses.replace(info, kind=kind) if kind and role != ACTIVATION and info.kind == KIND_OTHER else info


# An optimizer's own variables, which a loop over every variable logs beside the model's (TF1's
# `tf.global_variables()`, Keras' `optimizer.variables`, PyTorch's `optimizer.state`): a name part that is
# the optimizer's name (TF1's slots `<var>/Adam`, `<var>/Adam_1`; Keras 2's `Adam/<var>/m`; Keras 3's
# `adam/<var>_velocity`) or a PyTorch slot's (`exp_avg`), or a last part ending in a slot's name
# (`_momentum`, `_velocity`, TF1's `beta1_power`): `velocity` alone may name a model's module.
_OPTIMIZER_PART_RE = re.compile(
    r"^(?:adam|adamw|adamax|nadam|amsgrad|momentum|rmsprop|adagrad|adadelta|ftrl|proximaladagrad|lamb|lars|lion|"
    r"adafactor|sgd|exp_avg|exp_avg_sq|max_exp_avg_sq|momentum_buffer|square_avg|acc_delta)(?:_\d+)?$", re.I)
_OPTIMIZER_SLOT_RE = re.compile(
    r"(?:^|[_.])(?:exp_avg|exp_avg_sq|max_exp_avg_sq|momentum_buffer|square_avg|acc_delta|momentum|velocity|"
    r"accumulator|beta[12]_power)$", re.I)


def optimizer_state(name: str) -> bool:
    """Whether a tag names an optimizer's state rather than a parameter: one sentence, a name part that is
    an optimizer's or a slot's name (`dense/kernel/Adam_1`, `adam/dense_kernel_momentum`, `exp_avg/fc1.weight`)
    or a last part that ends in a slot's name (`fc1_weight_velocity`, `beta1_power`). Adam's moments and momentum buffers hold a
    parameter's shape but not its values: judged as weights, they would be wrong about every weight rule."""
    parts = _strip_decorations(name).split("/")
    return any(_OPTIMIZER_PART_RE.match(p) for p in parts) or bool(_OPTIMIZER_SLOT_RE.search(parts[-1]))


def classify_histogram(tag: str, sibling_tags: Iterable[str] = (), rules: Sequence[UserRule] = ()) -> Optional[TagInfo]:
    """Classifies a histogram tag: every tag gets a row (role OTHER where nothing tells the
    role); None only where the user's rule says to ignore it.

    `sibling_tags` are the other histogram tags of the run: a bare ``fc1.weight``
    is the weight of ``fc1.weight.grad``.
    """
    user = _apply_user_rules(tag, rules)
    if user == "ignore":
        return None
    if user is not None:
        return user  # type: ignore[return-value]
    if optimizer_state(tag):
        return dataclasses.replace(_make(tag, tag, OTHER), decided_by=BY_OPTIMIZER_STATE)
    for regex, role, kind in _FLAX_COLLECTIONS:
        m = regex.match(tag)
        if m:
            info = _make(tag, m.group(1), role)
            return dataclasses.replace(info, kind=kind) if kind else info
    for regex, role in _ROLE_PREFIXES:
        m = regex.match(tag)
        if m:
            return _make(tag, m.group(1), role)
    for regex, role in _ROLE_SUFFIXES:
        m = regex.match(tag)
        if m:
            return _make(tag, m.group(1), role)
    name = _strip_decorations(tag)
    siblings = set(sibling_tags)
    if any(s in siblings for s in (tag + ".grad", tag + "/grad", tag + "_grad")):
        return dataclasses.replace(_make(tag, tag, WEIGHT), decided_by=BY_PAIRING)
    last = re.split(r"[/.]", name)[-1].lower()
    if last in _ACTIVATION_WORDS or last in _PREACTIVATION_WORDS:
        layer = name.rsplit("/", 1)[0] if "/" in name else name
        if last in _PREACTIVATION_WORDS:
            layer = layer.split("/")[0] + "/" + last if "/" in layer else layer + "/" + last
        return _make(tag, layer, ACTIVATION)
    m = _ACTIVATION_SUFFIX_RE.match(name)
    if m:
        return _make(tag, m.group(1), ACTIVATION)
    if last in _PARAM_WORDS or re.search(r"(?:^|_)(?:weights?|kernel|bias(?:es)?)(?:_|$)", last):
        return _make(tag, name, WEIGHT)
    return _from_name_words(tag, name) or dataclasses.replace(_make(tag, name, OTHER), decided_by=BY_FALLBACK)


# Words that say which role a tensor plays or where it was filed, not which tensor it is:
# set aside when a gradient and a weight are matched by name.
_FILING_WORDS = _TOKEN_ROLES[GRADIENT] | _TOKEN_ROLES[UPDATE] | {"param", "params", "parameters"} | _DECORATIONS
_PARAMETER_ROLES = (GRADIENT, WEIGHT, UPDATE)


def _pairing_key(layer: str) -> str:
    """``model_grads/d_W_fc1`` and ``model_params/W_fc1`` -> ``model/W_fc1``."""
    parts = []
    for segment in layer.split("/"):
        segment = segment[2:] if segment.startswith("d_") and len(segment) > 2 else segment
        kept = [p for p in _pieces(segment) if p.rstrip("0123456789").lower() not in _FILING_WORDS]
        if kept:
            parts.append("_".join(kept))
    return "/".join(parts)


# Words naming an optimizer's state of a parameter (Adam's ``exp_avg``/``exp_avg_sq``, ``m``/``v``,
# momentum buffers): a tensor per parameter logged beside its gradient that is not its value.
_OPTIMIZER_STATE_WORDS = {"m", "v", "exp", "avg", "sq", "momentum", "momentums", "mom", "velocity", "moment",
                          "moments", "accumulator", "accumulators", "accum", "slot", "slots", "ema", "adam", "rms"}
_SEPARATORS = ("/", ".", "_")


def _gradient_frame(tag: str) -> Optional[tuple]:
    """Where a gradient tag's marker sits: (``"prefix"``, what follows it) for ``grads/fc1.weight``,
    (separator, what precedes it) for ``fc1.weight/gradient`` or ``fc1.weight.grad``; None otherwise."""
    m = _ROLE_PREFIXES[0][0].match(tag)
    if m:
        return "prefix", m.group(1)
    m = _ROLE_SUFFIXES[0][0].match(tag)
    return (tag[len(m.group(1))], m.group(1)) if m else None


def _frames_of(tag: str) -> List[tuple]:
    """Every (frame, differing word) a gradient tag one word away from `tag` would have: its first path
    component swapped (``params/fc1.weight``), or its last word after one separator (``fc1.weight/value``)."""
    frames = []
    if "/" in tag:
        word, rest = tag.split("/", 1)
        frames.append((("prefix", rest), word))
    for sep in _SEPARATORS:
        head, _, word = tag.rpartition(sep)
        if head and word and "/" not in word:
            frames.append(((sep, head), word))
    return frames


def _may_be_a_value(word: str) -> bool:
    """Whether the word that sets a tag apart from a gradient's leaves it the parameter's value: no role
    word other than a weight's (``value``, ``data``, ``params``; not ``activation``) and no optimizer state."""
    found = _role_from_words(word)
    return ((found is None or found[0] == WEIGHT)
            and not any(w.lower() in _OPTIMIZER_STATE_WORDS for w in _name_words(word)))


def pair_values(infos: Sequence[TagInfo]) -> List[TagInfo]:
    """Makes a tag the weight of a parameter, on its gradient's row, where the two differ in one word only.

    One sentence: where a tag and a gradient named by a writer's convention (``grads/<p>``, ``<p>/gradient``,
    ``<p>.grad``) differ only in the word that marks the gradient, and that word of the tag names no other
    role (``activation``) nor an optimizer's state (``exp_avg``), the tag is the parameter's value:
    ``conv1.weight/value`` beside ``conv1.weight/gradient``, ``params/fc1`` beside ``grads/fc1``. The row is
    the name they share. Only where the match is unique both ways, and the gradient has no weight yet.
    """
    weights = {i.layer for i in infos if i.metric is None and i.role == WEIGHT}
    gradients: Dict[tuple, List[TagInfo]] = collections.defaultdict(list)
    for info in infos:
        frame = _gradient_frame(info.tag) if (info.metric is None and info.role == GRADIENT
                                              and info.decided_by == BY_CONVENTION) else None
        if frame is not None and info.layer not in weights:
            gradients[frame].append(info)
    matches: Dict[str, List[TagInfo]] = {}
    for info in infos:
        if info.metric is None and info.role in (WEIGHT, OTHER) and info.decided_by not in (BY_RULE,
                                                                                           BY_OPTIMIZER_STATE):
            matches[info.tag] = [g for frame, word in _frames_of(info.tag) if _may_be_a_value(word)
                                 for g in gradients.get(frame, ())]
    claims = collections.Counter(g.tag for found in matches.values() for g in found)
    out = []
    for info in infos:
        found = matches.get(info.tag, [])
        if len(found) == 1 and claims[found[0].tag] == 1:
            layer = found[0].layer
            info = dataclasses.replace(info, layer=layer, role=WEIGHT, group=_group_of(layer, WEIGHT),
                                       kind=_kind_of(layer, WEIGHT), decided_by=BY_PAIRING)
        out.append(info)
    return out


def pair_rows(infos: Sequence[TagInfo]) -> List[TagInfo]:
    """Puts the gradient (and update) of a parameter on its weight's row where the names differ.

    Three rules, each a writer's habit rather than a guess:
    * a tag one word away from a gradient's is its parameter's value (see `pair_values`);
    * TF1 renames a summary named like its variable's op to ``<name>_1``: a weight row
      ``X_<n>`` joins the gradient row ``X`` when no weight row ``X`` exists;
    * otherwise a gradient and a weight whose names are equal once gradient, update and
      filing words and a leading ``d_`` are set aside share the weight's row
      (``model_params/W_fc1`` and ``model_grads/d_W_fc1``), where that match is unique.
    """
    infos = pair_values(infos)
    rows = {(i.layer, i.role) for i in infos if i.metric is None}
    out = []
    for info in infos:
        m = _NUMBERED_RE.match(info.layer)
        if (info.metric is None and info.role == WEIGHT and m and (m.group(1), GRADIENT) in rows
                and (m.group(1), WEIGHT) not in rows and (info.layer, GRADIENT) not in rows):
            info = dataclasses.replace(info, layer=m.group(1), group=_group_of(m.group(1), WEIGHT))
        out.append(info)
    keys = {layer: _pairing_key(layer) for layer in {info.layer for info in out}}
    by_key: Dict[tuple, set] = collections.defaultdict(set)
    for info in out:
        if info.metric is None and info.role in _PARAMETER_ROLES:
            by_key[(keys[info.layer], info.role)].add(info.layer)
    moved = []
    for info in out:
        key = keys[info.layer]
        weights = by_key.get((key, WEIGHT), set())
        if (info.metric is None and info.role in (GRADIENT, UPDATE) and len(weights) == 1
                and len(by_key[(key, info.role)]) == 1 and info.layer not in weights):
            target = next(iter(weights))
            info = dataclasses.replace(info, layer=target, group=_group_of(target, info.role),
                                       kind=_kind_of(target, WEIGHT) if info.kind == KIND_OTHER else info.kind)
        moved.append(info)
    return moved


def weight_by_parameter_word_alone(info: TagInfo) -> bool:
    """Whether a weight histogram's role comes only from the parameter word its name ends in
    (``net_g/fc1.weight``), not from a rule, a pairing or a role word of the writer's
    (``weights/``, ``/data``, ``params/``)."""
    return (info.metric is None and info.role == WEIGHT and info.decided_by == BY_CONVENTION
            and not any(regex.match(info.tag) for regex, *_ in _FLAX_COLLECTIONS + _ROLE_PREFIXES + _ROLE_SUFFIXES))


def _parameter_name(layer: str) -> Optional[str]:
    """The parameter a weight row names, without the prefix it was filed under: ``net_g/fc1.weight`` ->
    ``fc1.weight``, ``model/conv1/weights`` -> ``conv1/weights``; None for a bare ``weights``, which
    names no parameter of its own."""
    parts = layer.split("/")
    if _split_param(parts[-1])[0] != parts[-1]:
        return parts[-1]
    return "/".join(parts[-2:]) if len(parts) > 1 else None


_NUMBER_RE = re.compile(r"\d+")


def views_of_one_parameter(a: TagInfo, b: TagInfo) -> bool:
    """Whether two rows naming one parameter can be two views of it: only where their names differ in
    more than numbers. ``block_0/ln_1/gamma`` beside ``block_1/ln_1/gamma`` (``h/3/`` beside ``h/4/``)
    is one parameter of two repeated blocks, each block's own weights."""
    return _NUMBER_RE.sub("#", a.layer) != _NUMBER_RE.sub("#", b.layer)


def weights_sharing_a_name(infos: Sequence[TagInfo]) -> List[List[TagInfo]]:
    """Weight histograms on different rows that name one parameter, one list per parameter.

    ``net/fc1.weight`` and ``net_g/fc1.weight`` both read as weights by their parameter word,
    yet both cannot be fc1.weight's weights: one of them is something else of it (its gradient,
    perhaps). Which one goes unsaid unless a rule or a role word (``weights/``) decides it
    (see `weight_by_parameter_word_alone`). Rows of repeated blocks, whose names differ only in
    numbers, share no name (see `views_of_one_parameter`).
    """
    by_name: Dict[str, List[TagInfo]] = collections.defaultdict(list)
    for info in infos:
        name = _parameter_name(info.layer) if info.metric is None and info.role == WEIGHT else None
        if name is not None:
            by_name[name].append(info)
    return [group for group in by_name.values()
            if any(views_of_one_parameter(a, b) for a in group for b in group)]


def join_output_scalars(scalars: Sequence[TagInfo], histograms: Sequence[TagInfo]) -> List[TagInfo]:
    """Puts a per-layer scalar of a layer's output on its activation histogram's row where the names differ.

    A writer names both after one scope, the histogram with an activation word
    after it: ``dnn/hiddenlayer_0_fraction_of_zero_values`` belongs on the row of
    ``dnn/hiddenlayer_0_activation``. The scalar joins the activation row named
    like its layer plus activation words only, where that row is unique.
    """
    rows = {i.layer for i in histograms if i.metric is None and i.role == ACTIVATION}
    out = []
    for info in scalars:
        if info.role == ACTIVATION and info.metric and info.layer not in rows:
            n = len(info.layer)
            found = [row for row in rows if row.startswith(info.layer) and row[n:n + 1] in ("/", "_", ".")
                     and all(p.lower() in _ACTIVATION_WORDS for p in _PIECES_RE.split(row[n + 1:].replace("/", "_")))]
            if len(found) == 1:
                info = dataclasses.replace(info, layer=found[0], group=_group_of(found[0], ACTIVATION),
                                           kind=_kind_of(found[0], ACTIVATION))
        out.append(info)
    return out


def separate_shared_rows(infos: Sequence[TagInfo]) -> List[TagInfo]:
    """Gives each histogram its own row where two would claim one (layer, role).

    TF1 tutorials log ``fc1/activations`` and ``fc1/relu`` in one name scope: both
    read as fc1's activation, and one row can show only one histogram, so the other
    would vanish. The first keeps the layer; each later one is named by its own tag.
    """
    taken = set()
    out = []
    for info in infos:
        if info.metric is None and (info.layer, info.role) in taken:
            own = _make(info.tag, info.tag, info.role)
            info = dataclasses.replace(info, layer=own.layer, group=own.group, kind=own.kind)
            if (info.layer, info.role) in taken:
                info = dataclasses.replace(info, layer=info.tag)
        taken.add((info.layer, info.role))
        out.append(info)
    return out


def classify_scalar(tag: str, rules: Sequence[UserRule] = ()) -> object:
    """Classifies a scalar tag as a per-layer statistic (TagInfo) or a run-level ScalarInfo."""
    user = _apply_user_rules(tag, rules)
    if user == "ignore":
        return ScalarInfo(tag, SCALAR_OTHER)
    if isinstance(user, TagInfo) and user.metric:
        return user
    if _GRAD_NORM_TOTAL_RE.search(tag):
        return ScalarInfo(tag, SCALAR_GRAD_NORM)
    for regex, metric in _GRAD_SCALARS:
        m = regex.match(tag)
        if m:
            return _make(tag, m.group(1), GRADIENT, metric)
    m = _SUMMARIES_RE.match(tag)
    if m:
        return _make(tag, m.group(1), WEIGHT, _SUMMARY_STATS[m.group(2).lower()])
    for regex in _ZERO_FRACTION_SCALARS:
        m = regex.match(tag)
        if m and _split_param(m.group(1))[1].lower() not in _NOT_AN_OUTPUT:
            return _make(tag, m.group(1), ACTIVATION, "zero_fraction")
    if _LR_RE.search(tag):
        return ScalarInfo(tag, SCALAR_LR)
    if _LOSS_RE.search(tag):
        return ScalarInfo(tag, SCALAR_LOSS)
    return ScalarInfo(tag, SCALAR_OTHER)


def natural_key(name: str) -> tuple:
    """Sort key that puts ``layer_2`` before ``layer_10``."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t.lower()) for t in _DIGITS_RE.split(name) if t)


def _layer_group(pattern: re.Pattern) -> Optional[int]:
    """The group naming a rule's row: ``layer``, else the first; None: the whole tag."""
    if "layer" in pattern.groupindex:
        return pattern.groupindex["layer"]
    return 1 if pattern.groups else None


def _always_set(items, group: int) -> bool:
    """Whether every match of a parsed pattern sets `group` (False when unsure)."""
    c = _sre_constants
    for op, av in items:
        if op is c.SUBPATTERN and (av[0] == group or _always_set(av[3], group)):
            return True
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] >= 1 and _always_set(av[2], group):
            return True
        if op is c.BRANCH and all(_always_set(branch, group) for branch in av[1]):
            return True
        if op is c.ATOMIC_GROUP and _always_set(av, group):
            return True
        if op is c.ASSERT and _always_set(av[1], group):
            return True
        if op is c.GROUPREF_EXISTS and av[2] is not None and _always_set(av[1], group) and _always_set(av[2], group):
            return True
    return False


def _optional_layer_group(pattern: re.Pattern) -> bool:
    """Whether some match of the pattern leaves its layer group out (``^(?P<layer>zz)?gradients/``).

    Read from the parse tree of Python's own regex compiler; where that is not
    available the rule is kept, and a tag its group misses is left to the other rules.
    """
    group = _layer_group(pattern)
    if group is None or _sre_parser is None:
        return False
    try:
        return not _always_set(_sre_parser.parse(pattern.pattern, pattern.flags), group)
    except Exception:  # noqa: BLE001 - a private module whose shape may change: keep the rule
        return False


def parse_user_rules(entries: object, source: str = "tag rules") -> Tuple[List[UserRule], List[str]]:
    """The valid rules, and one line per rule rejected (the rest are kept)."""
    # A JSON file can hold anything: say what is wrong instead of failing with AttributeError.
    if not isinstance(entries, (list, tuple)):
        return [], [f"{source}: tag_rules must be a list of rules, got {type(entries).__name__}; no rules used"]
    rules, problems = [], []
    for i, entry in enumerate(entries):
        problem = None
        if not isinstance(entry, Mapping):
            problem = f"expected an object with 'pattern' and 'role', got {entry!r:.60}"
        elif entry.get("role") not in ROLES + ("ignore",):
            problem = f"role must be one of {ROLES + ('ignore',)}, got {entry.get('role')!r:.60}"
        elif entry.get("metric") is not None and entry.get("metric") not in METRICS:
            problem = f"metric must be one of {METRICS}, got {entry.get('metric')!r:.60}"
        elif not isinstance(entry.get("pattern"), str):
            problem = f"bad pattern: expected a regular expression (a string), got {entry.get('pattern')!r:.60}"
        else:
            try:
                pattern = re.compile(entry["pattern"])
            except (re.error, ValueError, RecursionError, OverflowError) as e:
                problem = f"bad pattern: {e}"
            else:
                if entry["role"] != "ignore" and _optional_layer_group(pattern):
                    problem = (f"bad pattern {pattern.pattern!r:.60}: its layer group is optional, so a tag "
                               f"it matches may get no row name; make the group required")
        if problem is None:
            rules.append(UserRule(pattern=pattern, role=entry["role"], metric=entry.get("metric")))
        else:
            problems.append(f"{source}: rule {i}: {problem}; rule ignored")
    return rules, problems


# Words a scalar's name uses for what one of its steps counts: Keras' `epoch_loss` counts epochs, its
# `evaluation_loss_vs_iterations` optimizer iterations.
_STEP_UNITS = {"epoch": "epoch", "epochs": "epoch", "iteration": "iteration", "iterations": "iteration",
               "iter": "iteration", "iters": "iteration", "batch": "batch", "batches": "batch"}


def step_unit(tag: str) -> Optional[str]:
    """What one step of a scalar counts, where a word of its tag names it ("epoch", "iteration", "batch");
    None where none does."""
    units = {_STEP_UNITS[w.lower()] for part in tag.split("/") for w in _name_words(part) if w.lower() in _STEP_UNITS}
    return units.pop() if len(units) == 1 else None
