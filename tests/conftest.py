"""Shared test helpers: an in-process TensorBoard data provider and the plugin's routes."""

import json
import os
import pathlib

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

REPO = pathlib.Path(__file__).resolve().parents[1]
WILD = REPO.parent / "shared" / "wild"


class PluginClient:
    """The plugin's routes on a logdir, loaded the way TensorBoard's Python loader does."""

    def __init__(self, logdir, config=None, samples=None):
        from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
        from tensorboard.plugins import base_plugin
        from werkzeug import test as werkzeug_test
        from werkzeug import wrappers

        from gradhealth_plugin import plugin

        logdir = str(logdir)
        self.multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance=samples or {})
        self.multiplexer.AddRunsFromDirectory(logdir)
        self.multiplexer.Reload()
        context = base_plugin.TBContext(
            logdir=logdir,
            data_provider=data_provider.MultiplexerDataProvider(self.multiplexer, logdir),
        )
        self.plugin = plugin.GradHealthPlugin(context, config)
        self._apps = self.plugin.get_plugin_apps()
        self._client = lambda route: werkzeug_test.Client(self._apps[route], wrappers.Response)

    def reload(self):
        self.multiplexer.Reload()

    def raw(self, route, **params):
        return self._client(route).get(route, query_string=params)

    def get(self, route, **params):
        """GET a route; returns (status code, decoded JSON)."""
        response = self.raw(route, **params)
        return response.status_code, json.loads(response.get_data(as_text=True))

    def ok(self, route, **params):
        status, body = self.get(route, **params)
        assert status == 200, (route, params, status, body)
        return body


@pytest.fixture(scope="session")
def plugin_client():
    """Factory: plugin_client(logdir) -> PluginClient."""
    return PluginClient


# Logdirs written by the real libraries (tests/logdirs.py), once per session.
# Tests must not write into them: copy one first (shutil.copytree) to add files.

def _written_logdir(tmp_path_factory, writer):
    from tests import logdirs

    path = tmp_path_factory.mktemp(writer)
    getattr(logdirs, writer)(path)
    return path


@pytest.fixture(scope="session")
def tf2_custom_loop_logdir(tmp_path_factory):
    """Run ``.``: ``gradients/<v.path>``, ``weights/<v.path>`` (``sequential/dense/kernel``), scalar ``loss``."""
    return _written_logdir(tmp_path_factory, "tf2_custom_loop")


@pytest.fixture(scope="session")
def tf2_module_loop_logdir(tmp_path_factory):
    """Run ``.``: ``gradients/dense/kernel:0``, ``weights/dense/kernel:0`` from a tf.Module model."""
    return _written_logdir(tmp_path_factory, "tf2_module_loop")


@pytest.fixture(scope="session")
def seed002_logdir(tmp_path_factory):
    """Run ``.``: ``grad_hist/layer_<i>`` histograms, ``grad_mean``/``grad_max/layer_<i>`` scalars, i < 12."""
    return _written_logdir(tmp_path_factory, "seed002_loop")


@pytest.fixture(scope="session")
def keras_fit_logdir(tmp_path_factory):
    """Runs ``train`` (``<weight.path>/histogram`` per epoch) and ``validation`` (scalars only)."""
    return _written_logdir(tmp_path_factory, "keras_fit")


@pytest.fixture(scope="session")
def torch_prefixes_logdir(tmp_path_factory):
    """Run ``.``: ``weights/<name>``, ``grads/<name>``, ``activations/<module>``, scalar ``Loss/train``."""
    return _written_logdir(tmp_path_factory, "torch_prefixes")


@pytest.fixture(scope="session")
def torch_dot_grad_logdir(tmp_path_factory):
    """Run ``.``: ``<name>`` and ``<name>.grad``, scalar ``training loss``."""
    return _written_logdir(tmp_path_factory, "torch_dot_grad")


@pytest.fixture(scope="session")
def tensorboardx_logdir(tmp_path_factory):
    """Run ``.``: tensorboardX ``<name>/data`` and ``<name>/grad``, scalar ``train/loss``."""
    return _written_logdir(tmp_path_factory, "tensorboardx_data_grad")


@pytest.fixture(scope="session")
def lightning_logdir(tmp_path_factory):
    """Run ``version_0``: ``grad_2.0_norm/<name>``, ``grad_2.0_norm_total``, ``train_loss``, ``lr-Adam``, ``epoch``."""
    return _written_logdir(tmp_path_factory, "lightning_scalars")


@pytest.fixture(scope="session")
def torch_custom_prefix_logdir(tmp_path_factory):
    """Run ``.``: ``mygrads/<name>`` (no built-in rule) and ``weights/<name>``."""
    return _written_logdir(tmp_path_factory, "torch_custom_prefix")
