"""Every logging convention, on logdirs written by the real libraries, through the plugin's routes.

The logdirs come from session fixtures in conftest.py (see tests/logdirs.py).
"""

import json
import shutil

import pytest

from gradhealth_plugin import config as config_lib
from tests import logdirs

STEPS = logdirs.STEPS
KERAS_DENSE = ("dense", "dense_1", "dense_2")
KERAS_PARAMS = [f"sequential/{d}/{w}" for d in KERAS_DENSE for w in ("kernel", "bias")]
MODULE_PARAMS = [f"{d}/{w}" for d in KERAS_DENSE for w in ("kernel", "bias")]
TORCH_KINDS = {
    "fc1.weight": "kernel", "fc1.bias": "bias", "bn1.weight": "norm", "bn1.bias": "norm",
    "fc2.weight": "kernel", "fc2.bias": "bias", "fc3.weight": "kernel", "fc3.bias": "bias", "logit_scale": "other",
}
TORCH_PARAMS = list(TORCH_KINDS)
TORCH_MODULES = ["fc1", "bn1", "relu1", "fc2", "relu2", "fc3"]
# Elements per tensor: what a histogram's count must be when it holds the right tensor.
N_IN, N_HIDDEN, N_OUT = logdirs.N_IN, logdirs.N_HIDDEN, logdirs.N_OUT
DENSE_SIZES = {"dense/kernel": N_IN * N_HIDDEN, "dense/bias": N_HIDDEN,
               "dense_1/kernel": N_HIDDEN * N_HIDDEN, "dense_1/bias": N_HIDDEN,
               "dense_2/kernel": N_HIDDEN * N_OUT, "dense_2/bias": N_OUT}
TORCH_SIZES = {"fc1.weight": N_IN * N_HIDDEN, "fc1.bias": N_HIDDEN, "bn1.weight": N_HIDDEN, "bn1.bias": N_HIDDEN,
               "fc2.weight": N_HIDDEN * N_HIDDEN, "fc2.bias": N_HIDDEN,
               "fc3.weight": N_HIDDEN * N_OUT, "fc3.bias": N_OUT, "logit_scale": 1}
TORCH_PARAM_ORDER = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]


def runs_of(client):
    return {r["run"]: r for r in client.ok("/runs")["runs"]}


def only_run(client, name):
    runs = runs_of(client)
    assert list(runs) == [name]
    return runs[name]


def names(run):
    return [layer["name"] for layer in run["layers"]]


def by_name(run):
    return {layer["name"]: layer for layer in run["layers"]}


def assert_in_order(order, expected):
    """`expected` appear in `order` in this relative order (other rows may sit between)."""
    missing = [n for n in expected if n not in order]
    assert not missing, (missing, order)
    positions = [order.index(n) for n in expected]
    assert positions == sorted(positions), [order[p] for p in sorted(positions)]


def all_kept(steps):
    """A row's sampling fields when TensorBoard kept every logged step, its role by convention."""
    return {"steps": steps, "steps_logged": steps, "steps_logged_at_least": False, "dropped_by": [],
            "decided_by": "convention"}


def hist_role(tag, steps=STEPS):
    return {"tags": [tag], "source": "histogram", **all_kept(steps)}


def heatmap_rows(client, run, role, metric):
    body = client.ok("/heatmap", run=run, role=role, metric=metric)
    return dict(zip(body["layers"], body["values"])), body


def written_scalar(client, run, tag):
    """The values the library wrote for a scalar tag, by step, read past the plugin."""
    from tensorboard.util import tensor_util

    return {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in client.multiplexer.Tensors(run, tag)}


# --- gradient and weight of one parameter on one row, for every histogram convention -----------------

PAIRED = [
    # fixture, param names, gradient tag, weight tag, element counts, how the weight's role is decided
    ("tf2_custom_loop_logdir", KERAS_PARAMS, "gradients/{}", "weights/{}",
     {f"sequential/{k}": v for k, v in DENSE_SIZES.items()}, "convention"),
    ("tf2_module_loop_logdir", MODULE_PARAMS, "gradients/{}:0", "weights/{}:0", DENSE_SIZES, "convention"),
    ("torch_prefixes_logdir", TORCH_PARAMS, "grads/{}", "weights/{}", TORCH_SIZES, "convention"),
    ("tensorboardx_logdir", TORCH_PARAMS, "{}/grad", "{}/data", TORCH_SIZES, "convention"),
    # A name is a weight because its gradient is logged beside it, one word apart: decided by pairing.
    ("torch_dot_grad_logdir", TORCH_PARAMS, "{}.grad", "{}", TORCH_SIZES, "pairing"),
    ("torch_gradient_value_logdir", TORCH_PARAMS, "{}/gradient", "{}/value", TORCH_SIZES, "pairing"),
    ("torch_grads_model_logdir", TORCH_PARAMS, "grads/{}", "model/{}", TORCH_SIZES, "pairing"),
]


@pytest.mark.parametrize("fixture, params, grad_tag, weight_tag, sizes, weight_by", PAIRED, ids=[p[0] for p in PAIRED])
def test_gradient_and_weight_of_a_parameter_share_one_row(request, plugin_client, fixture, params, grad_tag,
                                                          weight_tag, sizes, weight_by):
    client = plugin_client(request.getfixturevalue(fixture))
    run = only_run(client, ".")  # the libraries wrote straight into the logdir
    layers = by_name(run)
    for name in params:
        assert layers[name]["roles"] == {"gradient": hist_role(grad_tag.format(name)),
                                         "weight": {**hist_role(weight_tag.format(name)), "decided_by": weight_by}}, name
    assert run["unclassified"] == []
    assert run["last_step"] == STEPS - 1
    grad_counts, grad_map = heatmap_rows(client, ".", "gradient", "count")
    weight_counts, _ = heatmap_rows(client, ".", "weight", "count")
    assert grad_map["steps"] == list(range(STEPS))
    for name in params:
        assert grad_counts[name] == [sizes[name]] * STEPS, name
        assert weight_counts[name] == [sizes[name]] * STEPS, name


@pytest.mark.parametrize("fixture, params", [("tf2_custom_loop_logdir", KERAS_PARAMS),
                                             ("tf2_module_loop_logdir", MODULE_PARAMS)])
def test_tf2_loops_rows_in_model_order(request, plugin_client, fixture, params):
    run = only_run(plugin_client(request.getfixturevalue(fixture)), ".")
    assert names(run) == params  # dense before dense_1 before dense_2, kernel before bias
    for layer in run["layers"]:
        group, word = layer["name"].rsplit("/", 1)
        assert (layer["group"], layer["kind"]) == (group, word)
    assert run["roles"] == ["gradient", "weight"]


def test_tf2_custom_loop_loss_scalar(plugin_client, tf2_custom_loop_logdir):
    run = only_run(plugin_client(tf2_custom_loop_logdir), ".")
    assert run["scalars"] == {"loss": ["loss"]}


@pytest.mark.parametrize("fixture", ["torch_prefixes_logdir", "torch_dot_grad_logdir", "tensorboardx_logdir"])
def test_torch_parameter_kinds_and_order(request, plugin_client, fixture):
    run = only_run(plugin_client(request.getfixturevalue(fixture)), ".")
    layers = by_name(run)
    for name, kind in TORCH_KINDS.items():
        assert (layers[name]["kind"], layers[name]["group"]) == (kind, name.split(".")[0]), name
    assert_in_order(names(run), TORCH_PARAM_ORDER)


def test_a_gradient_beside_what_is_not_its_value_pairs_with_nothing(plugin_client,
                                                                  torch_gradients_beside_other_tensors_logdir):
    # One word apart from a gradient, but that word names another role (activation) or an optimizer's
    # state (exp_avg): neither is the parameter's value, so neither joins the gradient as its weight.
    layers = by_name(only_run(plugin_client(torch_gradients_beside_other_tensors_logdir), "."))
    for module in TORCH_MODULES:
        assert layers[module]["roles"]["activation"]["tags"] == [f"{module}/activation"], module
        assert layers[module]["roles"]["gradient"]["tags"] == [f"{module}/gradient"], module
    for name in TORCH_PARAMS:
        assert list(layers[name]["roles"]) == ["gradient"], name
        placed = [layer["name"] for layer in layers.values() for r in layer["roles"].values()
                  if f"{name}/exp_avg" in r["tags"]]
        assert placed and placed != [name], name


# --- PyTorch tutorial prefixes with activations ---------------------------------------------------------

def test_torch_activations_from_forward_hooks(plugin_client, torch_prefixes_logdir):
    client = plugin_client(torch_prefixes_logdir)
    run = only_run(client, ".")
    assert sorted(names(run)) == sorted(TORCH_PARAMS + TORCH_MODULES)
    layers = by_name(run)
    for module in TORCH_MODULES:
        assert layers[module]["roles"] == {"activation": hist_role(f"activations/{module}")}, module
        assert (layers[module]["kind"], layers[module]["group"]) == ("output", module)
    # Rows follow the order the training loop wrote them in: parameters in
    # named_parameters() order, module outputs in forward order.
    assert_in_order(names(run), ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"])
    # Forward order, which natural name order would break (bn1 < fc1).
    assert_in_order(names(run), TORCH_MODULES)
    assert run["roles"] == ["gradient", "weight", "activation"]
    assert run["scalars"] == {"loss": ["Loss/train"]}
    assert run["unclassified"] == []
    counts, _ = heatmap_rows(client, ".", "activation", "count")
    batch = logdirs.N_SAMPLES
    assert counts == {m: [float(batch * (N_OUT if m == "fc3" else N_HIDDEN))] * STEPS for m in TORCH_MODULES}


def test_torch_dot_grad_tutorial_loss_scalar(plugin_client, torch_dot_grad_logdir):
    run = only_run(plugin_client(torch_dot_grad_logdir), ".")
    assert run["scalars"] == {"loss": ["training loss"]}
    assert sorted(names(run)) == sorted(TORCH_PARAMS)


def test_tensorboardx_loss_scalar(plugin_client, tensorboardx_logdir):
    run = only_run(plugin_client(tensorboardx_logdir), ".")
    assert run["scalars"] == {"loss": ["train/loss"]}
    assert sorted(names(run)) == sorted(TORCH_PARAMS)


# --- seed 002: per-layer histograms and scalars merged ----------------------------------------------------

SEED002_LAYERS = [f"layer_{i}" for i in range(2 * logdirs.N_SEED002_DENSE)]


def test_seed002_layers_in_natural_order_with_scalars_merged(plugin_client, seed002_logdir):
    run = only_run(plugin_client(seed002_logdir), ".")
    assert len(SEED002_LAYERS) >= 11
    assert names(run) == SEED002_LAYERS  # layer_2 before layer_10
    for layer in run["layers"]:
        name = layer["name"]
        assert layer["group"] == name
        assert layer["roles"] == {"gradient": {
            "tags": [f"grad_hist/{name}", f"grad_mean/{name}", f"grad_max/{name}"],
            "source": "histogram+scalar", **all_kept(STEPS)}}, name
    assert run["roles"] == ["gradient"]
    assert run["scalars"] == {}
    assert run["unclassified"] == []
    # step=optimizer.iterations read before apply_gradients: steps start at 0.
    assert run["last_step"] == STEPS - 1


def test_seed002_cell_metrics_from_scalars_are_exact(plugin_client, seed002_logdir):
    client = plugin_client(seed002_logdir)
    cell = client.ok("/cell", run=".", layer="layer_3", step=1, role="gradient")
    assert (cell["layer"], cell["step"]) == ("layer_3", 1)
    gradient = cell["roles"]["gradient"]
    assert gradient["source"] == "histogram+scalar"
    m = gradient["metrics"]
    assert m["max_abs"]["quality"] == "exact"
    assert m["mean_abs"]["quality"] == "exact"
    assert m["std"]["quality"] == "estimated"  # from the histogram only
    assert m["max_abs"]["value"] == pytest.approx(written_scalar(client, ".", "grad_max/layer_3")[1])
    assert m["mean_abs"]["value"] == pytest.approx(written_scalar(client, ".", "grad_mean/layer_3")[1])
    assert gradient["histogram"]  # the grad_hist/layer_3 buckets are there too


@pytest.mark.parametrize("metric, prefix", [("max_abs", "grad_max"), ("mean_abs", "grad_mean")])
def test_seed002_heatmap_uses_the_written_scalars(plugin_client, seed002_logdir, metric, prefix):
    client = plugin_client(seed002_logdir)
    rows, body = heatmap_rows(client, ".", "gradient", metric)
    assert body["layers"] == SEED002_LAYERS
    assert body["quality"] == "exact"
    for name in SEED002_LAYERS:
        written = written_scalar(client, ".", f"{prefix}/{name}")
        # The heatmap sends 4 significant digits.
        assert rows[name] == pytest.approx([written[s] for s in body["steps"]], rel=5e-4), name


# --- Keras 3 TensorBoard callback -----------------------------------------------------------------------

KERAS_FIT_PARAMS = (
    [f"sequential/{d}/{w}" for d in KERAS_DENSE for w in ("kernel", "bias")]
    + [f"sequential/batch_normalization/{w}" for w in ("gamma", "beta", "moving_mean", "moving_variance")]
)


def test_keras_callback_runs_and_weight_histograms(plugin_client, keras_fit_logdir):
    client = plugin_client(keras_fit_logdir)
    runs = runs_of(client)
    assert sorted(runs) == ["train", "validation"]
    train = runs["train"]
    assert sorted(names(train)) == sorted(KERAS_FIT_PARAMS)
    for layer in train["layers"]:
        assert layer["roles"] == {"weight": hist_role(layer["name"] + "/histogram", steps=logdirs.EPOCHS)}
    assert train["roles"] == ["weight"]  # the callback logs no gradients
    assert train["unclassified"] == []
    assert train["scalars"] == {"loss": ["epoch_loss"], "learning_rate": ["epoch_learning_rate"]}
    # Histogram steps are epochs.
    _, body = heatmap_rows(client, "train", "weight", "count")
    assert body["steps"] == list(range(logdirs.EPOCHS))


def test_keras_callback_kinds_and_order(plugin_client, keras_fit_logdir):
    train = runs_of(plugin_client(keras_fit_logdir))["train"]
    layers = by_name(train)
    for name in KERAS_FIT_PARAMS:
        group, word = name.rsplit("/", 1)
        expected_kind = "norm" if "batch_normalization" in group else word
        assert (layers[name]["group"], layers[name]["kind"]) == (group, expected_kind), name
    assert_in_order(names(train), KERAS_PARAMS)


def test_keras_callback_validation_run_has_scalars_only(plugin_client, keras_fit_logdir):
    validation = runs_of(plugin_client(keras_fit_logdir))["validation"]
    assert validation["layers"] == []
    assert validation["unclassified"] == []
    assert {k: sorted(v) for k, v in validation["scalars"].items()} == {
        "loss": ["epoch_loss", "evaluation_loss_vs_iterations"]}
    # evaluation_*_vs_iterations is stepped by optimizer iterations, not epochs.
    n_train = round(logdirs.N_SAMPLES * (1 - logdirs.KERAS_VALIDATION_SPLIT))
    assert validation["last_step"] == logdirs.EPOCHS * -(-n_train // logdirs.KERAS_BATCH)


# --- Lightning-style scalars --------------------------------------------------------------------------

def test_lightning_grad_norms_are_per_layer_gradient_l2(plugin_client, lightning_logdir):
    client = plugin_client(lightning_logdir)
    run = only_run(client, "version_0")
    assert sorted(names(run)) == sorted(TORCH_PARAMS)
    for layer in run["layers"]:
        name = layer["name"]
        assert layer["roles"] == {"gradient": {"tags": [f"grad_2.0_norm/{name}"], "source": "scalar",
                                               **all_kept(STEPS)}}, name
        assert layer["kind"] == TORCH_KINDS[name]
    assert_in_order(names(run), TORCH_PARAM_ORDER)
    assert run["roles"] == ["gradient"]
    assert run["unclassified"] == []
    assert {k: sorted(v) for k, v in run["scalars"].items()} == {
        "grad_norm_total": ["grad_2.0_norm_total"], "loss": ["train_loss"], "learning_rate": ["lr-Adam"],
        "other": ["epoch"]}


def test_lightning_grad_norm_cell_is_exact(plugin_client, lightning_logdir):
    client = plugin_client(lightning_logdir)
    cell = client.ok("/cell", run="version_0", layer="bn1.weight", step=2)
    assert cell["kind"] == "norm"
    gradient = cell["roles"]["gradient"]
    assert gradient["source"] == "scalar"
    assert gradient["histogram"] is None
    assert gradient["metrics"]["l2"]["quality"] == "exact"
    assert gradient["metrics"]["l2"]["value"] == pytest.approx(
        written_scalar(client, "version_0", "grad_2.0_norm/bn1.weight")[2])


# --- a user's own prefixes, no role word ---------------------------------------------------------------

# Rules that judge a tensor as a weight or a gradient (every kind but those that need no role).
ROLE_FREE_KINDS = {"nonfinite", "spike", "periodic_spikes", "no_progress"}


def test_repeated_keras_blocks_keep_their_weights(plugin_client, keras_repeated_blocks_logdir):
    # block_0/ln/gamma beside block_1/ln/gamma: one parameter of two alike blocks, each block's weights.
    client = plugin_client(keras_repeated_blocks_logdir)
    run = runs_of(client)["train"]
    assert run["roles"] == ["weight"]
    rows = by_name(run)
    for i in range(logdirs.N_BLOCKS):
        for param in ("dense/kernel", "dense/bias", "ln/gamma", "ln/beta"):
            name = f"block_{i}/{param}"
            assert rows[name]["roles"] == {"weight": hist_role(f"{name}/histogram", logdirs.EPOCHS)}, name
    jumped = f"block_{logdirs.JUMPED_BLOCK}/dense/kernel"
    weight_rules = [f for f in client.ok("/findings", run="train")["findings"]
                    if f["kind"] not in ROLE_FREE_KINDS and f["severity"] != "info"]
    assert weight_rules and all(f["layers"] == [jumped] for f in weight_rules), weight_rules


def test_torch_module_list_blocks_keep_their_weights(plugin_client, torch_module_list_logdir):
    # blocks/0/fc/weight beside blocks/1/fc/weight: the blocks of a ModuleList, not two views of one parameter.
    run = only_run(plugin_client(torch_module_list_logdir), ".")
    assert run["roles"] == ["weight"]
    rows = by_name(run)
    for i in range(logdirs.N_BLOCKS):
        for param in ("fc/weight", "fc/bias", "norm/weight", "norm/bias"):
            name = f"blocks/{i}/{param}"
            assert rows[name]["roles"] == {"weight": hist_role(name)}, name


def test_two_tags_naming_one_parameter_are_not_both_its_weights(plugin_client, torch_own_prefixes_logdir):
    client = plugin_client(torch_own_prefixes_logdir)
    run = only_run(client, ".")
    assert run["roles"] == ["other"]
    for name in TORCH_PARAMS:
        shared = name != "logit_scale"  # named like no weight: no role at all, as before
        for prefix in ("net", "net_g"):
            assert by_name(run)[f"{prefix}/{name}"]["roles"] == {"other": {
                **hist_role(f"{prefix}/{name}"), "decided_by": "shared_name" if shared else "fallback"}}, name
    rows, body = heatmap_rows(client, ".", "other", "std")
    assert dict(zip(body["layers"], body["decided_by"]))["net_g/fc1.weight"] == "shared_name"
    assert client.ok("/heatmap", run=".", role="weight", metric="std")["layers"] == []
    kinds = {f["kind"] for f in client.ok("/findings", run=".")["findings"]}
    assert kinds <= ROLE_FREE_KINDS, kinds  # no init_scale on a gradient's first histogram


def test_a_rule_decides_which_of_two_alike_names_is_the_weight(plugin_client, torch_own_prefixes_logdir, tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(torch_own_prefixes_logdir, logdir)
    (logdir / "gradhealth.json").write_text(json.dumps(
        {"tag_rules": [{"pattern": "^net_g/(?P<layer>.+)$", "role": "gradient"}]}))
    run = only_run(plugin_client(logdir), ".")
    assert set(run["roles"]) == {"gradient", "weight", "other"}  # other: logit_scale, named like no weight
    assert by_name(run)["net/fc1.weight"]["roles"]["weight"]["decided_by"] == "convention"
    assert by_name(run)["fc1.weight"]["roles"]["gradient"]["decided_by"] == "rule"


# --- user rule file ------------------------------------------------------------------------------------

RULE_FILE = {"tag_rules": [{"pattern": "^mygrads/(?P<layer>.+)$", "role": "gradient"}]}


def test_without_rule_file_an_unknown_prefix_is_not_a_gradient(plugin_client, torch_custom_prefix_logdir):
    run = only_run(plugin_client(torch_custom_prefix_logdir), ".")
    assert "gradient" not in run["roles"]
    # ``weights/fc1.weight`` says it is the weight: ``mygrads/fc1.weight``, named alike, cannot be it too.
    assert by_name(run)["fc1.weight"]["roles"] == {"weight": hist_role("weights/fc1.weight")}
    assert by_name(run)["mygrads/fc1.weight"]["roles"] == {
        "other": {**hist_role("mygrads/fc1.weight"), "decided_by": "shared_name"}}


def test_rule_file_at_logdir_root_overrides_the_mapping(plugin_client, torch_custom_prefix_logdir, tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(torch_custom_prefix_logdir, logdir)
    (logdir / "gradhealth.json").write_text(json.dumps(RULE_FILE))
    run = only_run(plugin_client(logdir), ".")  # config=None: the plugin reads gradhealth.json itself
    assert sorted(names(run)) == sorted(TORCH_PARAMS)
    for name in TORCH_PARAMS:
        assert by_name(run)[name]["roles"] == {"gradient": {**hist_role(f"mygrads/{name}"), "decided_by": "rule"},
                                               "weight": hist_role(f"weights/{name}")}, name
    assert run["roles"] == ["gradient", "weight"]

    cfg = config_lib.load(logdir=str(logdir))
    assert cfg.source == str(logdir / "gradhealth.json")
    assert [(r.pattern.pattern, r.role) for r in cfg.tag_rules] == [("^mygrads/(?P<layer>.+)$", "gradient")]


@pytest.mark.parametrize("content, message", [
    ('{"tag_rules": [', "not valid JSON"),
    ('["^mygrads/"]', "expected a JSON object"),
])
def test_malformed_rule_file_is_a_clear_value_error(tmp_path, content, message):
    path = tmp_path / "gradhealth.json"
    path.write_text(content)
    with pytest.raises(ValueError) as excinfo:
        config_lib.load(logdir=str(tmp_path))
    assert str(path) in str(excinfo.value)
    assert message in str(excinfo.value)


@pytest.mark.parametrize("content, message", [
    ('{"tag_rules": [{"pattern": "^mygrads/(?P<layer>.+)$", "role": "gradients"}]}', "rule 0: role must be one of"),
    ('{"tag_rules": [{"pattern": "^mygrads/(?P<layer>.+$", "role": "gradient"}]}', "rule 0: bad pattern"),
    ('{"tag_rules": [{"role": "gradient"}]}', "rule 0: bad pattern"),
    ('{"tag_rules": {"pattern": "^mygrads/(.+)$", "role": "gradient"}}', "tag_rules must be a list"),
    ('{"tag_rules": ["^mygrads/(.+)$"]}', "rule 0: expected an object"),
    ('{"tag_rules": [{"pattern": "^g/(.+)$", "role": "gradient", "metric": "maxabs"}]}', "rule 0: metric must be"),
])
def test_malformed_rule_is_rejected_with_a_clear_problem(tmp_path, content, message):
    path = tmp_path / "gradhealth.json"
    path.write_text(content)
    cfg = config_lib.load(logdir=str(tmp_path))
    assert cfg.tag_rules == [] and len(cfg.problems) == 1
    assert str(path) in cfg.problems[0] and message in cfg.problems[0]


# --- TF's exact zero-fraction scalars on the activation rows ------------------------------------------

@pytest.mark.parametrize("run, layer, hist_tag, scalar_tag", [
    ("cifar10", "hidden{}", "hidden{}/activations", "hidden{}/sparsity"),
    ("estimator", "dnn/hiddenlayer_{}", "dnn/hiddenlayer_{}_activation",
     "dnn/hiddenlayer_{}_fraction_of_zero_values")])
def test_tf_zero_fraction_scalars_are_the_activation_rows_exact_zero_fraction(
        plugin_client, tf_zero_fraction_scalars_logdir, run, layer, hist_tag, scalar_tag):
    client = plugin_client(tf_zero_fraction_scalars_logdir)
    layers = {lay["name"]: lay for lay in runs_of(client)[run]["layers"]}
    for k in range(2):
        row = layers[layer.format(k)]["roles"]["activation"]
        assert row["source"] == "histogram+scalar"
        assert set(row["tags"]) == {hist_tag.format(k), scalar_tag.format(k)}
        written = written_scalar(client, run, scalar_tag.format(k))
        series = client.ok("/series", run=run, layer=layer.format(k), metric="zero_fraction",
                           role="activation")["series"]["activation"]
        assert dict(zip(series["steps"], series["values"])) == pytest.approx(written)
        assert set(series["quality"]) == {"exact"}  # not the bucket's upper bound
        assert max(written.values()) > 0.5  # a share worth telling exactly


@pytest.mark.parametrize("run", ["cifar10", "estimator"])
def test_dead_units_on_a_written_zero_fraction_say_it_is_exact(plugin_client, tf_zero_fraction_scalars_logdir, run):
    client = plugin_client(tf_zero_fraction_scalars_logdir)
    dead = [f for f in client.ok("/findings", run=run)["findings"]
            if f["kind"] == "dead_units" and f["severity"] == "warn"]
    assert dead, run
    for f in dead:
        for layer, evidence in f["evidence"]["layers"].items():
            assert evidence["quality"] == "exact", (layer, evidence)


KERAS_ADAM_PARAMS = [f"sequential/{d}/{w}" for d in ("dense", "dense_1") for w in ("kernel", "bias")]


@pytest.mark.parametrize("fixture, params, states", [
    ("keras_optimizer_variables_logdir", KERAS_ADAM_PARAMS,
     ["adam/iteration", "adam/learning_rate"] + [f"adam/{p.replace('/', '_')}_{slot}" for p in KERAS_ADAM_PARAMS
                                                 for slot in ("momentum", "velocity")]),
    ("torch_optimizer_state_logdir", TORCH_PARAMS, [f"{p}/{slot}" for p in TORCH_PARAMS
                                                    for slot in ("exp_avg", "exp_avg_sq")]),
])
def test_an_optimizers_state_is_no_weight(request, plugin_client, fixture, params, states):
    """Adam's moments logged beside the model's variables hold a parameter's shape but not its values."""
    client = plugin_client(request.getfixturevalue(fixture))
    run = only_run(client, ".")
    rows = by_name(run)
    assert sorted(n for n, layer in rows.items() if "weight" in layer["roles"]) == sorted(params)
    assert all(set(rows[p]["roles"]) == {"gradient", "weight"} for p in params)
    for tag in states:
        assert {role: r["decided_by"] for role, r in rows[tag]["roles"].items()} == {"other": "optimizer_state"}
    # Only the rules that need no role speak of them; nor are they tags whose role went unrecognised.
    about_states = [f["kind"] for f in client.ok("/findings", run=".")["findings"]
                    if set(f["layers"]) & set(states)]
    assert set(about_states) <= {"nonfinite", "spike", "periodic_spikes"}, about_states
    assert "unknown role" not in (run["verdict"] or "") and "not recognised" not in (run["verdict"] or "")
