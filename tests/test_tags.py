"""Unit tests of tag classification on the names real code writes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradhealth_plugin.reading import tags
from gradhealth_plugin.reading.tags import ACTIVATION, GRADIENT, UPDATE, WEIGHT


def info(tag, siblings=(), rules=()):
    result = tags.classify_histogram(tag, siblings, rules)
    assert result is not None, tag
    return (result.layer, result.role, result.group, result.kind)


HISTOGRAMS = [
    # tag, siblings, (layer, role, group, kind)
    # TF2 custom loops
    ("gradients/dense_1/kernel:0", (), ("dense_1/kernel", GRADIENT, "dense_1", "kernel")),
    ("weights/dense_1/kernel:0", (), ("dense_1/kernel", WEIGHT, "dense_1", "kernel")),
    ("gradients/sequential/dense/bias", (), ("sequential/dense/bias", GRADIENT, "sequential/dense", "bias")),
    ("grad_hist/layer_10", (), ("layer_10", GRADIENT, "layer_10", "other")),
    # Keras callbacks: TF 2.1-2.2, TF 2.3-2.15, Keras 3
    ("conv2d/kernel_0", (), ("conv2d/kernel", WEIGHT, "conv2d", "kernel")),
    ("conv1/bias_0", (), ("conv1/bias", WEIGHT, "conv1", "bias")),
    ("dense_9/kernel_0/histogram", (), ("dense_9/kernel", WEIGHT, "dense_9", "kernel")),
    ("batch_normalization/gamma_0/histogram", (),
     ("batch_normalization/gamma", WEIGHT, "batch_normalization", "norm")),
    ("sequential/batch_normalization/moving_variance/histogram", (),
     ("sequential/batch_normalization/moving_variance", WEIGHT, "sequential/batch_normalization", "norm")),
    ("sequential/dense_2/kernel/histogram", (), ("sequential/dense_2/kernel", WEIGHT, "sequential/dense_2", "kernel")),
    ("linear/kernel:0", (), ("linear/kernel", WEIGHT, "linear", "kernel")),
    ("lstm/lstm_cell/recurrent_kernel_0", (), ("lstm/lstm_cell/recurrent_kernel", WEIGHT, "lstm/lstm_cell", "kernel")),
    # PyTorch conventions
    ("grads/fc1.weight", (), ("fc1.weight", GRADIENT, "fc1", "kernel")),
    ("weights/bn1.weight", (), ("bn1.weight", WEIGHT, "bn1", "norm")),
    ("activations/relu1", (), ("relu1", ACTIVATION, "relu1", "output")),
    ("fc1.weight.grad", (), ("fc1.weight", GRADIENT, "fc1", "kernel")),
    ("bn1.bias", ("bn1.bias.grad",), ("bn1.bias", WEIGHT, "bn1", "norm")),
    ("encoder.alpha", ("encoder.alpha.grad",), ("encoder.alpha", WEIGHT, "encoder", "other")),
    ("fc2.bias/data", (), ("fc2.bias", WEIGHT, "fc2", "bias")),
    ("fc2.bias/grad", (), ("fc2.bias", GRADIENT, "fc2", "bias")),
    ("encoder.layer_norm.weight", (), ("encoder.layer_norm.weight", WEIGHT, "encoder.layer_norm", "norm")),
    ("rnn.weight_ih_l0", (), ("rnn.weight_ih_l0", WEIGHT, "rnn", "kernel")),
    ("updates/fc1.weight", (), ("fc1.weight", UPDATE, "fc1", "kernel")),
    # yunjey/pytorch-tutorial's logger: dots replaced by slashes
    ("fc1/weight", ("fc1/weight/grad",), ("fc1/weight", WEIGHT, "fc1", "kernel")),
    ("fc1/weight/grad", (), ("fc1/weight", GRADIENT, "fc1", "kernel")),
    # TF1 tutorials (mnist_with_summaries and copies)
    ("layer1/weights/summaries/histogram", (), ("layer1/weights", WEIGHT, "layer1", "kernel")),
    ("layer1/biases/summaries/histogram", (), ("layer1/biases", WEIGHT, "layer1", "bias")),
    ("layer1/weights/layer1/weights", (), ("layer1/weights", WEIGHT, "layer1", "kernel")),
    ("layer1/layer1/outputs", (), ("layer1", ACTIVATION, "layer1", "output")),
    ("layer1/activations", (), ("layer1", ACTIVATION, "layer1", "output")),
    ("layer1/Wx_plus_b/preactivate", (), ("layer1/preactivate", ACTIVATION, "layer1", "preactivation")),
    ("layer2/Wx_plus_b/pre_activations", (), ("layer2/pre_activations", ACTIVATION, "layer2", "preactivation")),
    # tf.contrib.learn's DNN estimators: <layer>_activation is that layer's output, as <layer>/activation is
    ("dnn/hiddenlayer_0_activation", (), ("dnn/hiddenlayer_0", ACTIVATION, "dnn/hiddenlayer_0", "output")),
    ("dnn/logits_activation", (), ("dnn/logits", ACTIVATION, "dnn/logits", "output")),
    ("fc1_activations", (), ("fc1", ACTIVATION, "fc1", "output")),
    ("MyLinearLayer/Weights_Distribution", (),
     ("MyLinearLayer/Weights_Distribution", WEIGHT, "MyLinearLayer", "kernel")),
    ("output/Weights", (), ("output/Weights", WEIGHT, "output", "kernel")),
    # Flax / JAX (flax.metrics.tensorboard, clu): params and grads pytrees flattened with "/"
    ("params/Dense_0/kernel", (), ("Dense_0/kernel", WEIGHT, "Dense_0", "kernel")),
    ("params/Dense_0/bias", (), ("Dense_0/bias", WEIGHT, "Dense_0", "bias")),
    ("grads/Dense_0/kernel", (), ("Dense_0/kernel", GRADIENT, "Dense_0", "kernel")),
    ("grads/LayerNorm_0/scale", (), ("LayerNorm_0/scale", GRADIENT, "LayerNorm_0", "norm")),
    ("params/BatchNorm_0/scale", (), ("BatchNorm_0/scale", WEIGHT, "BatchNorm_0", "norm")),
    # the whole variables dict flattened: its "params" collection is not part of the layer
    ("grads/params/Dense_0/kernel", (), ("Dense_0/kernel", GRADIENT, "Dense_0", "kernel")),
    ("params/params/Conv_0/kernel", (), ("Conv_0/kernel", WEIGHT, "Conv_0", "kernel")),
    ("batch_stats/BatchNorm_0/var", (), ("BatchNorm_0/var", WEIGHT, "BatchNorm_0", "norm")),
    ("intermediates/Dense_1/__call__/0", (), ("Dense_1", ACTIVATION, "Dense_1", "output")),
]


@pytest.mark.parametrize("tag, siblings, expected", HISTOGRAMS, ids=[h[0] for h in HISTOGRAMS])
def test_classify_histogram_real_world_names(tag, siblings, expected):
    assert info(tag, siblings) == expected


@pytest.mark.parametrize("tag", ["layer1/X", "Loss", "input/images", "x", "encoder.alpha", "layer1/Wx_plus_b"])
def test_an_unknown_tag_is_a_row_of_role_other(tag):
    # Nothing tells its role, and it is still shown: a row of its own, role "other".
    result = tags.classify_histogram(tag, ["fc1.weight.grad"])
    assert (result.layer, result.role, result.decided_by) == (tag, tags.OTHER, tags.BY_FALLBACK)


def test_only_an_ignore_rule_hides_a_histogram():
    user = rules({"pattern": r"^input/", "role": "ignore"})
    assert tags.classify_histogram("input/images", (), user) is None
    assert tags.classify_histogram("input/images").role == tags.OTHER


def test_bare_name_is_a_weight_only_next_to_its_gradient():
    assert tags.classify_histogram("encoder.alpha", ["encoder.alpha.grad"]).role == WEIGHT
    assert tags.classify_histogram("encoder.alpha", ["decoder.alpha.grad"]).role == tags.OTHER


def test_tf1_histogram_and_summary_scalars_land_on_one_layer():
    hist = tags.classify_histogram("layer1/weights/summaries/histogram")
    for stat, metric in [("mean", "mean"), ("stddev", "std"), ("max", "max"), ("min", "min")]:
        scalar = tags.classify_scalar(f"layer1/weights/summaries/{stat}")
        assert (scalar.layer, scalar.role, scalar.metric) == (hist.layer, hist.role, metric)


PER_LAYER_SCALARS = [
    # tag, (layer, role, metric, kind)
    ("grad_max/layer_3", ("layer_3", GRADIENT, "max_abs", "other")),
    ("grad_mean/layer_10", ("layer_10", GRADIENT, "mean_abs", "other")),
    ("grad_2.0_norm/fc1.weight", ("fc1.weight", GRADIENT, "l2", "kernel")),
    ("grad_2.0_norm/bn1.weight", ("bn1.weight", GRADIENT, "l2", "norm")),
    ("grad_norm/dense/kernel", ("dense/kernel", GRADIENT, "l2", "kernel")),
    ("grad_std/fc2.bias", ("fc2.bias", GRADIENT, "std", "bias")),
    ("layer1/weights/summaries/stddev_1", ("layer1/weights", WEIGHT, "std", "kernel")),
    ("layer2/biases/summaries/max", ("layer2/biases", WEIGHT, "max", "bias")),
    # tf.nn.zero_fraction of a layer's output: the TF1 CIFAR-10 tutorial, canned DNN estimators.
    ("conv2/conv2/conv2/sparsity", ("conv2", ACTIVATION, "zero_fraction", "output")),
    ("dnn/hiddenlayer_0_fraction_of_zero_values", ("dnn/hiddenlayer_0", ACTIVATION, "zero_fraction", "output")),
    ("dnn/hiddenlayer_1/fraction_of_zero_values", ("dnn/hiddenlayer_1", ACTIVATION, "zero_fraction", "output")),
]


@pytest.mark.parametrize("tag, expected", PER_LAYER_SCALARS, ids=[s[0] for s in PER_LAYER_SCALARS])
def test_classify_scalar_per_layer(tag, expected):
    result = tags.classify_scalar(tag)
    assert isinstance(result, tags.TagInfo)
    assert (result.layer, result.role, result.metric, result.kind) == expected


RUN_SCALARS = [
    ("grad_2.0_norm_total", "grad_norm_total"),
    ("grad_norm", "grad_norm_total"),
    ("global_grad_norm", "grad_norm_total"),
    ("train_loss", "loss"),
    ("epoch_loss", "loss"),
    ("batch_loss", "loss"),
    ("Loss/train", "loss"),
    ("training loss", "loss"),  # the official PyTorch TensorBoard tutorial
    ("val_loss", "loss"),
    ("cross_entropy_1", "loss"),
    ("lr-Adam", "learning_rate"),
    ("lr-SGD/pg1", "learning_rate"),
    ("epoch_learning_rate", "learning_rate"),
    ("learning rate", "learning_rate"),
    ("epoch", "other"),
    ("accuracy", "other"),
    ("glossary", "other"),
    ("clr", "other"),
    # The sparsity of a pruning mask or of a weight is no activation's zero fraction.
    ("conv1/mask/sparsity", "other"),
    ("fc/weights/sparsity", "other"),
    ("sparsity", "other"),
]


@pytest.mark.parametrize("tag, kind", RUN_SCALARS, ids=[s[0] for s in RUN_SCALARS])
def test_classify_scalar_run_level(tag, kind):
    assert tags.classify_scalar(tag) == tags.ScalarInfo(tag, kind)


def test_natural_key_orders_numbers_by_value():
    names = ["layer_10", "layer_2", "layer_1", "layer_0", "layer_11"]
    assert sorted(names, key=tags.natural_key) == ["layer_0", "layer_1", "layer_2", "layer_10", "layer_11"]
    keras = ["dense_10", "dense_2", "dense", "dense_1"]
    assert sorted(keras, key=tags.natural_key) == ["dense", "dense_1", "dense_2", "dense_10"]
    torch = ["fc10.weight", "fc2.weight", "fc1.bias", "fc1.weight"]
    assert sorted(torch, key=tags.natural_key) == ["fc1.bias", "fc1.weight", "fc2.weight", "fc10.weight"]
    assert tags.natural_key("Dense_1") == tags.natural_key("dense_1")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(["layer_", "dense_", "fc", "block", "h."]))
def test_natural_key_matches_integer_order(a, b, prefix):
    assert (tags.natural_key(f"{prefix}{a}") < tags.natural_key(f"{prefix}{b}")) == (a < b)


_SEGMENT = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda s: s not in {"grad", "grads", "gradient", "gradients", "data", "update", "updates"}
    and not s.endswith("_grad"))
PARAM_NAMES = st.lists(_SEGMENT, min_size=1, max_size=3).map(".".join)


@settings(max_examples=200, deadline=None)
@given(PARAM_NAMES)
def test_every_pairing_convention_puts_gradient_and_weight_on_one_layer(name):
    conventions = [
        (f"grads/{name}", f"weights/{name}"),
        (f"gradients/{name}", f"weights/{name}"),
        (f"{name}.grad", name),
        (f"{name}/grad", f"{name}/data"),
    ]
    for grad_tag, weight_tag in conventions:
        siblings = [grad_tag, weight_tag]
        grad = tags.classify_histogram(grad_tag, siblings)
        weight = tags.classify_histogram(weight_tag, siblings)
        assert grad is not None and weight is not None, (grad_tag, weight_tag)
        assert (grad.role, weight.role) == (GRADIENT, WEIGHT), (grad_tag, weight_tag)
        assert grad.layer == weight.layer == name
        assert grad.group == weight.group


def rules(*entries):
    parsed, problems = tags.parse_user_rules(list(entries))
    assert problems == []
    return parsed


def test_user_rule_wins_over_built_in_rules():
    user = rules({"pattern": r"^weights/(?P<layer>.+)$", "role": "activation"})
    assert info("weights/fc1", rules=user)[:2] == ("fc1", ACTIVATION)
    assert info("grads/fc1.weight", rules=user)[:2] == ("fc1.weight", GRADIENT)  # untouched by the rule


def test_user_rule_without_layer_group_uses_first_group():
    user = rules({"pattern": r"^g_(\w+)$", "role": "gradient"})
    assert info("g_conv1", rules=user)[:2] == ("conv1", GRADIENT)


def test_user_ignore_rule_hides_a_tag():
    user = rules({"pattern": r"^grads/debug\.", "role": "ignore"})
    assert tags.classify_histogram("grads/debug.x", (), user) is None
    assert tags.classify_scalar("grads/debug.x", user) == tags.ScalarInfo("grads/debug.x", "other")
    assert tags.classify_histogram("grads/fc1.weight", (), user).role == GRADIENT


def test_user_scalar_rule_with_metric_is_per_layer():
    user = rules({"pattern": r"^gnorm_(?P<layer>.+)$", "role": "gradient", "metric": "l2"})
    result = tags.classify_scalar("gnorm_fc1.weight", user)
    assert (result.layer, result.role, result.metric) == ("fc1.weight", GRADIENT, "l2")


def test_user_scalar_rule_without_metric_falls_back_to_built_ins():
    user = rules({"pattern": r"^(?P<layer>.+)_loss$", "role": "gradient"})
    assert tags.classify_scalar("train_loss", user) == tags.ScalarInfo("train_loss", "loss")


@pytest.mark.parametrize("entries, message", [
    ([{"pattern": "x", "role": "grad"}], "rule 0: role must be one of"),
    ([{"pattern": "x", "role": "gradient"}, {"pattern": "(", "role": "weight"}], "rule 1: bad pattern"),
    ([{"role": "weight"}], "rule 0: bad pattern"),
    ([{"pattern": 3, "role": "weight"}], "rule 0: bad pattern"),
    ([{"pattern": "x", "role": "gradient", "metric": "L2"}], "rule 0: metric must be one of"),
    (["x"], "rule 0: expected an object"),
    ({"pattern": "x", "role": "gradient"}, "tag_rules must be a list"),
])
def test_parse_user_rules_rejects_malformed_entries(entries, message):
    parsed, problems = tags.parse_user_rules(entries, source="my.json")
    assert len(problems) == 1 and len(parsed) == (len(entries) - 1 if isinstance(entries, list) else 0)
    assert problems[0].startswith("my.json: ") and message in problems[0]


def test_two_histograms_of_one_layer_and_role_get_a_row_each():
    # A TF1 scope logging fc1/activations and fc1/relu: both read as fc1's activation.
    infos = [tags.classify_histogram(t) for t in ("fc1/activations", "fc1/relu", "fc1/weights")]
    assert [(i.layer, i.role) for i in infos[:2]] == [("fc1", ACTIVATION), ("fc1", ACTIVATION)]
    separated = tags.separate_shared_rows(infos)
    assert [(i.tag, i.layer, i.role) for i in separated] == [
        ("fc1/activations", "fc1", ACTIVATION), ("fc1/relu", "fc1/relu", ACTIVATION), ("fc1/weights", "fc1/weights", WEIGHT)]


NAME_WORDS = [
    # tag, (layer, role, kind): no convention matches; the role word nearest the end decides.
    ("W_conv1", ("W_conv1", WEIGHT, "kernel")),
    ("b_fc1", ("b_fc1", WEIGHT, "bias")),
    ("fc1/W_fc1:0", ("fc1/W_fc1", WEIGHT, "kernel")),
    ("w1_summ", ("w1", WEIGHT, "kernel")),
    ("word_embeddings", ("word_embeddings", WEIGHT, "kernel")),
    ("layer_2/Weight/layer1Weights", ("layer_2/Weight/layer1Weights", WEIGHT, "kernel")),
    ("variables", ("variables", WEIGHT, "kernel")),
    ("layer1/weights/stddev/histogram", ("layer1/weights", WEIGHT, "kernel")),
    ("embed_out", ("embed_out", ACTIVATION, "output")),
    ("conv1_pre_activation", ("conv1_pre_activation", ACTIVATION, "preactivation")),
    ("conv1d_out", ("conv1d_out", ACTIVATION, "output")),
    ("output_layer/logits", ("output_layer/logits", ACTIVATION, "output")),
    ("fc2/drop_out1", ("fc2/drop_out1", ACTIVATION, "output")),
    ("activation_summary/prob_car", ("activation_summary/prob_car", ACTIVATION, "output")),
    ("ReLU_3", ("ReLU_3", ACTIVATION, "output")),
    ("d_conv1", ("d_conv1", GRADIENT, "other")),
    ("conv1/dW", ("conv1/dW", GRADIENT, "kernel")),
    # A leading W_/b_/d_ names the tensor whatever words follow it ("hidden" alone is an activation).
    ("model_params/W_hidden1", ("model_params/W_hidden1", WEIGHT, "kernel")),
    ("model_params/b_hidden1", ("model_params/b_hidden1", WEIGHT, "bias")),
    ("model_grads/d_W_hidden1", ("model_grads/d_W_hidden1", GRADIENT, "kernel")),
    ("layer_outputs/hidden1_tanh", ("layer_outputs/hidden1_tanh", ACTIVATION, "output")),
    ("block2/delta", ("block2/delta", UPDATE, "other")),
]


@pytest.mark.parametrize("tag, expected", NAME_WORDS, ids=[n[0] for n in NAME_WORDS])
def test_name_words_give_a_role_where_no_convention_matches(tag, expected):
    result = tags.classify_histogram(tag)
    assert result is not None, tag
    assert (result.layer, result.role, result.kind) == expected


@pytest.mark.parametrize("tag", ["layer1/Wx_plus_b", "hist-numpy", "input/images", "Model", "logit_a_plus_b"])
def test_a_single_letter_names_a_tensor_only_where_it_leads_a_name(tag):
    # The b of Wx_plus_b is a term of an expression, not a bias.
    assert tags.classify_histogram(tag).role == tags.OTHER


def _rows(tags_and_siblings, rules=()):
    infos = [tags.classify_histogram(t, tags_and_siblings, rules) for t in tags_and_siblings]
    return {i.tag: (i.layer, i.role) for i in tags.pair_rows([i for i in infos if i])}


def test_gradient_and_weight_found_by_name_words_share_the_weights_row():
    rows = _rows(["model_params/W_fc1", "model_grads/d_W_fc1", "model_params/b_fc1", "model_grads/d_b_fc1"])
    assert rows == {"model_params/W_fc1": ("model_params/W_fc1", WEIGHT),
                    "model_grads/d_W_fc1": ("model_params/W_fc1", GRADIENT),
                    "model_params/b_fc1": ("model_params/b_fc1", WEIGHT),
                    "model_grads/d_b_fc1": ("model_params/b_fc1", GRADIENT)}


def test_tf1_renamed_weight_summary_joins_its_variables_gradient():
    # TF1 names a summary op that collides with its variable's op "<name>_1".
    rows = _rows(["conv1/weights_1", "conv1/weights/gradients", "conv1/biases_1", "conv1/biases/gradients"])
    assert rows["conv1/weights_1"] == ("conv1/weights", WEIGHT)
    assert rows["conv1/biases_1"] == ("conv1/biases", WEIGHT)


def test_pairing_leaves_ambiguous_and_distinct_names_alone():
    # Two weights could claim one gradient: no guess.
    rows = _rows(["a_params/W_fc1", "b_params/W_fc1", "grads_x/d_W_fc1"])
    assert rows["grads_x/d_W_fc1"][0] != rows["a_params/W_fc1"][0]
    # A layer really named dense_1 keeps its name beside dense's gradient when dense has a weight row.
    rows = _rows(["gradients/dense/kernel", "weights/dense/kernel", "weights/dense_1"])
    assert rows["weights/dense_1"] == ("dense_1", WEIGHT)


@pytest.mark.parametrize("gradient, value", [
    ("conv1.weight/gradient", "conv1.weight/value"),  # one path component apart
    ("conv1.weight_grad", "conv1.weight_value"),  # one suffix apart
    ("gradients/conv1.weight", "model/conv1.weight"),  # one leading component apart
    ("grads/conv1.weight", "values/conv1.weight"),
])
def test_a_tag_one_word_from_a_gradient_is_its_parameters_value(gradient, value):
    rows = {tag: tags.classify_histogram(tag) for tag in (gradient, value)}
    assert rows[value].layer != "conv1.weight" or rows[value].decided_by != tags.BY_PAIRING
    paired = {i.tag: i for i in tags.pair_rows(list(rows.values()))}
    assert (paired[value].layer, paired[value].role, paired[value].decided_by) == (
        "conv1.weight", WEIGHT, tags.BY_PAIRING)
    assert (paired[gradient].layer, paired[gradient].role) == ("conv1.weight", GRADIENT)
    assert paired[value].kind == "kernel" and paired[value].group == "conv1"


@pytest.mark.parametrize("names", [
    ("fc1/gradient", "fc1/activation"),  # a role word says what the other tag is
    ("fc1.weight/grad", "fc1.weight/exp_avg"),  # an optimizer's state of the parameter
    ("grads/fc1.weight", "adam_m/fc1.weight"),
    ("fc1.weight/grad", "fc1.weight/first", "fc1.weight/second"),  # two could be its value: no guess
    ("grads/fc1", "gradients/fc1", "model/fc1"),  # two gradients could claim it: no guess
    ("fc1/gradient", "fc2/value"),  # more than one word apart
])
def test_a_tag_beside_a_gradient_is_not_its_value_where_a_word_or_a_rival_says_otherwise(names):
    before = {i.tag: (i.layer, i.role) for i in (tags.classify_histogram(t) for t in names)}
    assert _rows(list(names)) == before


def test_a_rule_keeps_its_role_beside_a_gradient():
    user = rules({"pattern": r"^(?P<layer>.+)/value$", "role": "other"})
    assert _rows(["fc1.weight/gradient", "fc1.weight/value"], user)["fc1.weight/value"] == ("fc1.weight", tags.OTHER)


def test_each_tag_says_how_its_role_was_decided():
    user = rules({"pattern": r"^mine/(?P<layer>.+)$", "role": "gradient"})
    assert tags.classify_histogram("mine/fc1", (), user).decided_by == tags.BY_RULE
    assert tags.classify_histogram("grads/fc1.weight").decided_by == tags.BY_CONVENTION
    assert tags.classify_histogram("encoder.alpha", ["encoder.alpha.grad"]).decided_by == tags.BY_PAIRING
    assert tags.classify_histogram("W_conv1").decided_by == tags.BY_NAME
    # <layer>_activation is a writer's convention, as <layer>/activation is, not a guess from words.
    assert tags.classify_histogram("dnn/hiddenlayer_0_activation").decided_by == tags.BY_CONVENTION
    # A row separated from another keeps how its role was decided.
    infos = [tags.classify_histogram(t) for t in ("w1_summ", "w1_hist")]
    assert [i.layer for i in infos] == ["w1", "w1"]
    separated = tags.separate_shared_rows(infos)
    assert [(i.layer, i.decided_by) for i in separated] == [("w1", tags.BY_NAME), ("w1_hist", tags.BY_NAME)]


def _infos(*tag_names):
    return [tags.classify_histogram(t) for t in tag_names]


def test_weights_named_alike_under_other_prefixes_share_a_parameter():
    groups = tags.weights_sharing_a_name(_infos("net/fc1.weight", "net_g/fc1.weight", "net/fc2.weight",
                                                "model/conv1/weights", "model_g/conv1/weights"))
    assert sorted(sorted(i.tag for i in g) for g in groups) == [
        ["model/conv1/weights", "model_g/conv1/weights"], ["net/fc1.weight", "net_g/fc1.weight"]]
    assert all(tags.weight_by_parameter_word_alone(i) for g in groups for i in g)


@pytest.mark.parametrize("names", [
    ("layer1/weights", "layer2/weights"),  # one word per scope: two parameters
    ("conv1/weights", "conv1/biases"),
    ("grads/fc1.weight", "weights/fc1.weight"),  # a gradient and its weight, by their role words
])
def test_different_parameters_or_roles_share_no_name(names):
    assert tags.weights_sharing_a_name(_infos(*names)) == []


def test_repeated_blocks_share_no_name_unless_a_prefix_differs_beyond_numbers():
    blocks = [f"block_{i}/ln_1/gamma" for i in range(3)] + [f"h/{i}/attn/weight" for i in (3, 4, 10)]
    assert tags.weights_sharing_a_name(_infos(*blocks)) == []
    # A second prefix beside the blocks still names each block's parameter twice.
    groups = tags.weights_sharing_a_name(_infos("net/block_0/fc.weight", "net/block_1/fc.weight",
                                                "net_g/block_0/fc.weight"))
    assert [sorted(i.tag for i in g) for g in groups] == [
        ["net/block_0/fc.weight", "net/block_1/fc.weight", "net_g/block_0/fc.weight"]]
    a, b, c = groups[0]
    assert not tags.views_of_one_parameter(a, b) and tags.views_of_one_parameter(a, c)


def test_a_role_word_or_a_rule_says_weight_beyond_the_parameter_word():
    word, bare = _infos("weights/fc1.weight", "mygrads/fc1.weight")
    assert [len(g) for g in tags.weights_sharing_a_name([word, bare])] == [2]
    assert not tags.weight_by_parameter_word_alone(word) and tags.weight_by_parameter_word_alone(bare)
    rules, _ = tags.parse_user_rules([{"pattern": "^net/(?P<layer>.+)$", "role": "weight"}])
    assert not tags.weight_by_parameter_word_alone(tags.classify_histogram("net/fc1.weight", rules=rules))
