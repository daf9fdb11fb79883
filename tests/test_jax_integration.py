"""JAX / Flax: a real 3-step Flax training logged with flax.metrics.tensorboard (params/ and grads/
histograms of the pytrees) and `gradhealth_plugin.jax.PytreeWriter` (exact statistics), read by the tab."""

from __future__ import annotations

import numpy as np
import pytest

from gradhealth_plugin.writing.reference import stats_numpy, update_ratio_numpy

jax = pytest.importorskip("jax")
nn = pytest.importorskip("flax.linen")
optax = pytest.importorskip("optax")
pytest.importorskip("tensorflow")  # flax.metrics.tensorboard writes histograms through tf.summary

STEPS = 3


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        hidden = nn.relu(nn.Dense(16)(x))
        return nn.Dense(3)(hidden)


@pytest.fixture(scope="module")
def flax_run(tmp_path_factory):
    from flax import traverse_util
    from flax.metrics.tensorboard import SummaryWriter

    from gradhealth_plugin.jax import PytreeWriter

    logdir = tmp_path_factory.mktemp("flax")
    model = MLP()
    x = jax.random.normal(jax.random.PRNGKey(0), (32, 8))
    y = jax.random.randint(jax.random.PRNGKey(1), (32,), 0, 3)
    variables = model.init(jax.random.PRNGKey(2), x)
    params = variables["params"]
    tx = optax.sgd(0.1)
    opt_state = tx.init(params)

    def loss_fn(p):
        return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, x), y).mean()

    histograms, exact = SummaryWriter(str(logdir)), PytreeWriter(str(logdir))
    logged = {}
    for step in range(STEPS):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state)
        new_params = optax.apply_updates(params, updates)
        for prefix, tree in (("params", params), ("grads", grads)):
            for name, leaf in traverse_util.flatten_dict(tree, sep="/").items():
                histograms.histogram(f"{prefix}/{name}", np.asarray(leaf), step)
        histograms.scalar("train/loss", float(loss), step)
        # The whole variables dict for the weights: its "params" collection is looked into.
        exact.log(step, params={"params": params}, grads=grads, new_params={"params": new_params})
        logged[step] = {"weight": params, "gradient": grads, "after": new_params}
        params = new_params
    histograms.close()
    exact.close()
    assert exact.errors == 0
    return {"logdir": logdir, "logged": logged}


def test_flax_names_get_their_roles_and_join_the_exact_rows(flax_run, plugin_client):
    client = plugin_client(flax_run["logdir"], samples={"gradhealth": 500})
    (run,) = client.ok("/runs")["runs"]
    layers = {layer["name"]: layer for layer in run["layers"]}
    assert [name for name in layers if name.startswith("Dense_")] == [
        "Dense_0/kernel", "Dense_0/bias", "Dense_1/kernel", "Dense_1/bias"]
    for name in ("Dense_0/kernel", "Dense_1/bias"):
        roles = layers[name]["roles"]
        assert set(roles) == {"gradient", "weight"}
        assert f"grads/{name}" in roles["gradient"]["tags"] and f"gradhealth/gradient/{name}" in roles["gradient"]["tags"]
        assert f"params/{name}" in roles["weight"]["tags"] and f"gradhealth/weight/{name}" in roles["weight"]["tags"]
    assert layers["Dense_0/kernel"]["kind"] == "kernel" and layers["Dense_0/bias"]["kind"] == "bias"
    assert run["unclassified"] == []


def test_pytree_writer_statistics_are_exact(flax_run, plugin_client):
    client = plugin_client(flax_run["logdir"], samples={"gradhealth": 500})
    logged = flax_run["logged"][1]
    cell = client.ok("/cell", run=".", layer="Dense_0/kernel", step=1)["roles"]
    grad = np.asarray(logged["gradient"]["Dense_0"]["kernel"])
    weight = np.asarray(logged["weight"]["Dense_0"]["kernel"])
    expected = {"gradient": stats_numpy(grad), "weight": stats_numpy(weight)}
    from gradhealth_plugin.writing.format import FIELDS

    for role in ("gradient", "weight"):
        for metric in ("l2", "std", "max_abs"):
            value = cell[role]["metrics"][metric]
            assert value["quality"] == "exact"
            np.testing.assert_allclose(value["value"], expected[role][FIELDS.index(metric)], rtol=1e-9)
    ratio = cell["weight"]["metrics"]["update_ratio"]
    assert ratio["quality"] == "exact"
    np.testing.assert_allclose(ratio["value"], update_ratio_numpy(
        weight, np.asarray(logged["after"]["Dense_0"]["kernel"])), rtol=1e-9)
