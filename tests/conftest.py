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

    def __init__(self, logdir, config=None, samples=None, multiplexer=True):
        """``multiplexer``: hand the plugin the multiplexer too, as TensorBoard's Python loader does
        (False: the data provider alone, as a plugin sees any other)."""
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
            multiplexer=self.multiplexer if multiplexer else None,
        )
        self.plugin = plugin.GradHealthPlugin(context, config)
        self._apps = self.plugin.get_plugin_apps()
        self._client = lambda route: werkzeug_test.Client(self._apps[route], wrappers.Response)

    def reload(self):
        self.multiplexer.Reload()

    def raw(self, route, **params):
        return self._client(route).get(route, query_string=params)

    def query(self, route, pairs):
        """GET a route with a query of (name, value) pairs as given: a name may repeat, a value be any text."""
        from werkzeug.datastructures import MultiDict

        return self._client(route).get(route, query_string=MultiDict(pairs))

    def get(self, route, **params):
        """GET a route; returns (status code, decoded JSON)."""
        response = self.raw(route, **params)
        return response.status_code, json.loads(response.get_data(as_text=True))

    def ok(self, route, **params):
        status, body = self.get(route, **params)
        assert status == 200, (route, params, status, body)
        return body

    def heatmap_pages(self, **params):
        """Every answer of a heatmap asked for with `params`: the first, then each page its `page.next` names."""
        pages = [self.ok("/heatmap", **params)]
        while "page" in pages[-1]:
            pages.append(self.ok("/heatmap", **{**params, **pages[-1]["page"]["next"]}))
        return pages


@pytest.fixture(scope="session")
def plugin_client():
    """Factory: plugin_client(logdir) -> PluginClient."""
    return PluginClient


class RustPluginClient(PluginClient):
    """The plugin's routes on a logdir read by TensorBoard's Rust data server (``--load_fast=true``).

    The server is started on 127.0.0.1 with a free port, loads the logdir once
    (``--reload once``: the data is fixed when the client is made), and is
    stopped by its process id in `close`.
    """

    READY_TIMEOUT = 60.0

    def __init__(self, logdir, config=None, samples=None):
        import subprocess
        import tempfile
        import time

        import grpc
        from tensorboard.data import grpc_provider, server_ingester
        from tensorboard.plugins import base_plugin
        from werkzeug import test as werkzeug_test
        from werkzeug import wrappers

        from gradhealth_plugin import plugin

        binary = server_ingester.get_server_binary()
        if binary is None:
            pytest.skip("no tensorboard_data_server binary (install the tensorboard-data-server wheel)")
        self._work = tempfile.TemporaryDirectory(prefix="gradhealth_rust_")
        port_file = pathlib.Path(self._work.name) / "port"
        log_path = pathlib.Path(self._work.name) / "server.log"
        hints = dict(plugin.DEFAULT_SAMPLES_PER_PLUGIN, **(samples or {}))
        self._log = open(log_path, "wb")
        # -v logs "Finished load cycle" once the one load is done; --die-after-stdin ends
        # the server with this process whatever happens to the test.
        self.proc = subprocess.Popen(
            [binary.path, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", "0",
             "--port-file", str(port_file), "--reload", "once", "--die-after-stdin", "-v",
             "--samples-per-plugin", ",".join(f"{k}={v}" for k, v in hints.items())],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.READY_TIMEOUT
        while b"Finished load cycle" not in log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"data server not ready: {log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        address = f"127.0.0.1:{int(port_file.read_text())}"
        self._channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 256 << 20)])
        from tensorboard.data.proto import data_provider_pb2_grpc

        stub = data_provider_pb2_grpc.TensorBoardDataProviderStub(self._channel)
        context = base_plugin.TBContext(logdir=str(logdir), data_provider=grpc_provider.GrpcDataProvider(address, stub))
        self.plugin = plugin.GradHealthPlugin(context, config)
        self._apps = self.plugin.get_plugin_apps()
        self._client = lambda route: werkzeug_test.Client(self._apps[route], wrappers.Response)

    def reload(self):
        raise NotImplementedError("the Rust client loads its logdir once; make a new client instead")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a server that ignores SIGTERM is killed
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdin:
            self.proc.stdin.close()
        if getattr(self, "_channel", None) is not None:
            self._channel.close()
        self._log.close()
        self._work.cleanup()


LOADERS = ("python", "rust")


@pytest.fixture(params=LOADERS)
def loader_client(request):
    """Factory: loader_client(logdir, config=None) -> a client under TensorBoard's Python loader or its
    Rust data server (the test runs once with each); the Rust servers are stopped after the test."""
    started = []

    def make(logdir, config=None, samples=None):
        if request.param == "python":
            return PluginClient(logdir, config, samples)
        client = RustPluginClient(logdir, config, samples)
        started.append(client)
        return client

    make.loader = request.param
    yield make
    for client in started:
        client.close()


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
def keras_activation_keys_logdir(tmp_path_factory):
    """Runs ``by_path``, ``by_name``, ``by_layer`` (`GradientHealthLogger` activations of the subclassed
    model ``mlp`` keyed by each layer's path, name or the layer) and ``callback`` (the Keras callback)."""
    return _written_logdir(tmp_path_factory, "keras_activation_keys")


@pytest.fixture(scope="session")
def seed002_logdir(tmp_path_factory):
    """Run ``.``: ``grad_hist/layer_<i>`` histograms, ``grad_mean``/``grad_max/layer_<i>`` scalars, i < 12."""
    return _written_logdir(tmp_path_factory, "seed002_loop")


@pytest.fixture(scope="session")
def keras_fit_logdir(tmp_path_factory):
    """Runs ``train`` (``<weight.path>/histogram`` per epoch) and ``validation`` (scalars only)."""
    return _written_logdir(tmp_path_factory, "keras_fit")


@pytest.fixture(scope="session")
def keras_halves_logdir(tmp_path_factory, keras_fit_logdir):
    """Two Keras fits side by side, as TensorBoard(log_dir=<logdir>/<name>) writes them: runs ``adam/train``,
    ``adam/validation``, ``sgd/train`` and ``sgd/validation`` (copies of `keras_fit_logdir`'s runs)."""
    import shutil

    root = tmp_path_factory.mktemp("keras_halves")
    for name in ("adam", "sgd"):
        shutil.copytree(keras_fit_logdir, root / name)
    return root


@pytest.fixture(scope="session")
def torch_faded_in_branch_logdir(tmp_path_factory):
    """Runs ``small`` and ``large``: a side branch's gradients (``grads/branch.weight``, ``grads/branch.bias``)
    jump 30x at step 40 and stay far below the other layers', or 1e4x to their scale."""
    return _written_logdir(tmp_path_factory, "torch_faded_in_branch")


@pytest.fixture(scope="session")
def tensorboardx_samples_logdir(tmp_path_factory):
    """Run ``.``: tensorboardX histograms ``hist-numpy`` and ``hist-torch`` of random samples, nothing else."""
    return _written_logdir(tmp_path_factory, "tensorboardx_sample_histograms")


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


@pytest.fixture(scope="session")
def torch_gradient_value_logdir(tmp_path_factory):
    """Run ``.``: ``<name>/gradient`` and ``<name>/value`` (torch's SummaryWriter), scalar ``loss``."""
    return _written_logdir(tmp_path_factory, "torch_gradient_value")


@pytest.fixture(scope="session")
def torch_grads_model_logdir(tmp_path_factory):
    """Run ``.``: ``grads/<name>`` and ``model/<name>``, scalar ``loss``."""
    return _written_logdir(tmp_path_factory, "torch_grads_model")


@pytest.fixture(scope="session")
def torch_gradients_beside_other_tensors_logdir(tmp_path_factory):
    """Run ``.``: ``<name>/gradient`` with Adam's ``<name>/exp_avg``; ``<module>/activation`` with
    ``<module>/gradient`` (its output's gradient)."""
    return _written_logdir(tmp_path_factory, "torch_gradients_beside_other_tensors")


@pytest.fixture(scope="session")
def keras_repeated_blocks_logdir(tmp_path_factory):
    """Run ``train``: ``block_<i>/dense/kernel``, ``block_<i>/ln/gamma``, ... of alike Keras blocks
    (``<weight.path>/histogram``); block_3's kernel jumps 100x before the last epoch's histograms."""
    return _written_logdir(tmp_path_factory, "keras_repeated_blocks")


@pytest.fixture(scope="session")
def torch_module_list_logdir(tmp_path_factory):
    """Run ``.``: ``blocks/<i>/fc/weight``, ``blocks/<i>/norm/weight``, ... of a torch ModuleList, scalar ``loss``."""
    return _written_logdir(tmp_path_factory, "torch_module_list")


@pytest.fixture(scope="session")
def torch_own_prefixes_logdir(tmp_path_factory):
    """Run ``.``: weights ``net/<name>`` and gradients ``net_g/<name>`` (no role word), scalar ``loss``."""
    return _written_logdir(tmp_path_factory, "torch_own_prefixes")


@pytest.fixture(scope="session")
def torch_unnamed_gradients_logdir(tmp_path_factory):
    """Run ``.``: weights ``weights/<name>``, gradients ``backward/<module>/<i>`` (no word tells a gradient),
    scalar ``loss``."""
    return _written_logdir(tmp_path_factory, "torch_unnamed_gradients")


@pytest.fixture(scope="session")
def keras_stuck_sigmoid_logdir(tmp_path_factory):
    """Run ``train``: weight histograms per epoch and ``epoch_loss`` of a sigmoid net stuck at ln 2."""
    return _written_logdir(tmp_path_factory, "keras_stuck_sigmoid")


@pytest.fixture(scope="session")
def torch_early_healthy_logdir(tmp_path_factory):
    """Run ``.``: the first 11 steps of a healthy PyTorch classifier, ``loss`` every step from about ln 10."""
    return _written_logdir(tmp_path_factory, "torch_early_healthy")


@pytest.fixture(scope="session")
def torch_epoch_start_logdir(tmp_path_factory):
    """Run ``.``: N(0, 1) weights written as each epoch starts (the first before training), ``epoch_loss`` as
    it ends."""
    return _written_logdir(tmp_path_factory, "torch_epoch_start_histograms")


@pytest.fixture(scope="session")
def keras_sigmoid_at_chance_logdir(tmp_path_factory):
    """Runs ``train`` and ``validation`` of a deep sigmoid classifier whose loss falls to ln 2 and stays."""
    return _written_logdir(tmp_path_factory, "keras_sigmoid_at_chance")


@pytest.fixture(scope="session")
def keras_healthy_binary_logdir(tmp_path_factory):
    """Runs ``train`` and ``validation`` of a classifier whose loss starts at ln 2 and falls."""
    return _written_logdir(tmp_path_factory, "keras_healthy_binary")


@pytest.fixture(scope="session")
def keras_high_lr_validation_logdir(tmp_path_factory):
    """Runs ``train`` and ``validation`` of a classifier under Adam at 0.5, whose validation loss jumps
    at epochs 3 and 5 (``evaluation_loss_vs_iterations`` at iterations 28 and 42)."""
    return _written_logdir(tmp_path_factory, "keras_high_lr")


@pytest.fixture(scope="session")
def ranks_logdir(tmp_path_factory):
    """Two data-parallel trainings on two torch.distributed (gloo) processes (`tests.ranks_training`):
    ``skipped/rank<r>``, whose all-reduce leaves out ``ranks_training.SKIPPED``, and
    ``reduced/rank<r>``, which reduces every gradient."""
    from tests import ranks_training

    root = tmp_path_factory.mktemp("ranks")
    ranks_training.write([(root / "skipped", ranks_training.SKIPPED), (root / "reduced", None)])
    return root


@pytest.fixture(scope="session")
def keras_uniform_and_two_clusters_logdir(tmp_path_factory):
    """Run ``train``: Keras weight histograms, a kernel of two clusters at +-0.5 and Glorot uniform ones."""
    return _written_logdir(tmp_path_factory, "keras_uniform_and_two_clusters")


@pytest.fixture(scope="session")
def torch_uniform_and_two_clusters_logdir(tmp_path_factory):
    """Run ``.``: ``weights/<name>``, an ``nn.Linear`` kernel of two clusters at +-0.5 and uniform ones."""
    return _written_logdir(tmp_path_factory, "torch_uniform_and_two_clusters")


@pytest.fixture(scope="session")
def tf_relu_near_dead_line_logdir(tmp_path_factory):
    """Runs ``histograms`` and ``exact`` of a TF2 ReLU MLP: ``dense_0`` just under 70% zeros with small
    positive values (TF2's lowest bucket bounds its zero share above 70%), ``dense_1`` well above 70%;
    ``exact`` with the ``tf.nn.zero_fraction`` scalars ``dense_<i>/sparsity`` too."""
    return _written_logdir(tmp_path_factory, "tf_relu_near_dead_line")


@pytest.fixture(scope="session")
def tf_zero_fraction_scalars_logdir(tmp_path_factory):
    """Runs ``cifar10`` (``hidden<i>/sparsity``) and ``estimator`` (``dnn/hiddenlayer_<i>_fraction_of_zero_values``):
    ReLU outputs as histograms with their exact ``tf.nn.zero_fraction`` scalars."""
    return _written_logdir(tmp_path_factory, "tf_zero_fraction_scalars")


@pytest.fixture(scope="session")
def torch_scaled_down_logdir(tmp_path_factory):
    """Run ``.``: ``grads/<name>``, ``weights/<name>`` every step, scalar ``loss``; a one-off bad batch at
    ``logdirs.SCALED_BAD_BATCH``, ``fc2``'s weights scaled down at ``logdirs.SCALED_AT`` (`logdirs.torch_scaled_down`)."""
    return _written_logdir(tmp_path_factory, "torch_scaled_down")


@pytest.fixture(scope="session")
def torch_nan_loss_logdir(tmp_path_factory):
    """Run ``.``: torch ``weights/<name>`` and ``grads/<name>`` every 10 steps to step 150, then none (NaN);
    ``loss`` every step to 299, NaN from step 157 (`logdirs.torch_nan_loss_after_histograms`)."""
    return _written_logdir(tmp_path_factory, "torch_nan_loss_after_histograms")


@pytest.fixture(scope="session")
def torch_two_writers_logdir(tmp_path_factory):
    """Runs ``flushed`` and ``buffering``: torch's SummaryWriter (``train/loss``) and watch() in one folder."""
    return _written_logdir(tmp_path_factory, "torch_two_writers")


@pytest.fixture(scope="session")
def keras_optimizer_variables_logdir(tmp_path_factory):
    """Run ``.``: ``gradients/<v.path>`` and ``<v.path>`` of the model's weights and Adam's variables."""
    return _written_logdir(tmp_path_factory, "keras_optimizer_variables")


@pytest.fixture(scope="session")
def torch_optimizer_state_logdir(tmp_path_factory):
    """Run ``.``: ``weights/<name>``, ``grads/<name>``, ``<name>/exp_avg`` and ``<name>/exp_avg_sq``."""
    return _written_logdir(tmp_path_factory, "torch_optimizer_state")


@pytest.fixture(scope="session")
def torch_attention_key_bias_logdir(tmp_path_factory):
    """Run ``.``: ``grads/key.bias`` tiny at every step (softmax cancels it), ``grads/query.*`` and the rest healthy."""
    return _written_logdir(tmp_path_factory, "torch_attention_key_bias")


@pytest.fixture(scope="session")
def torch_watch_embedding_logdir(tmp_path_factory):
    """Run ``.``: gradhealth summaries of ``embed.weight`` (nn.Embedding, N(0, 1)) and ``fc.weight`` (N(0, 1))."""
    return _written_logdir(tmp_path_factory, "torch_watch_embedding")


@pytest.fixture(scope="session")
def torch_sequential_conv_bn_logdir(tmp_path_factory):
    """Run ``.``: ``0.*`` a conv with its bias, ``1.*`` the BatchNorm after it, ``4.*`` a Linear head."""
    return _written_logdir(tmp_path_factory, "torch_sequential_conv_bn")


@pytest.fixture(scope="session")
def keras_conv_batchnorm_logdir(tmp_path_factory):
    """Run ``train``: gradhealth summaries of two Conv2D layers, each before a BatchNormalization."""
    return _written_logdir(tmp_path_factory, "keras_conv_batchnorm")


@pytest.fixture(scope="session")
def torch_gelu_dropout_logdir(tmp_path_factory):
    """Run ``.``: ``activations/drop1`` (GELU then dropout: zeros and negatives), ``activations/relu2``."""
    return _written_logdir(tmp_path_factory, "torch_gelu_dropout")
