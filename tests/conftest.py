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
