"""Logdirs written by the real libraries, logging the way their users do.

Each function trains a tiny model for a few steps with fixed seeds and writes
its summaries into `logdir`. TensorFlow and torch are imported inside the
functions because importing them costs seconds.
"""

import os

import numpy as np

STEPS = 4
EPOCHS = 3
N_IN, N_HIDDEN, N_OUT = 4, 8, 3
N_SAMPLES = 32
KERAS_BATCH = 8
KERAS_VALIDATION_SPLIT = 0.25


def _xy(n=N_SAMPLES, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, N_IN)).astype(np.float32)
    y = (rng.integers(0, N_OUT, size=n)).astype(np.int64)
    return x, y


def _keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    # Keras numbers layers per process (dense, dense_1, ...); a fresh session
    # makes the names independent of what ran before in the test session.
    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    return tf, keras


def tf2_custom_loop(logdir):
    """TF2 GradientTape loop logging ``gradients/<v.path>`` and ``weights/<v.path>``.

    Keras 3 gives ``v.name == "kernel"`` (not unique) and
    ``v.path == "sequential/dense/kernel"``, so users log the path.
    """
    tf, keras = _keras()
    model = keras.Sequential([
        keras.Input((N_IN,)),
        keras.layers.Dense(N_HIDDEN, activation="relu"),
        keras.layers.Dense(N_HIDDEN, activation="relu"),
        keras.layers.Dense(N_OUT),
    ])
    optimizer = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = _xy()
    writer = tf.summary.create_file_writer(str(logdir))
    for step in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        with writer.as_default(step=step):
            tf.summary.scalar("loss", loss)
            for g, v in zip(grads, model.trainable_variables):
                tf.summary.histogram(f"gradients/{v.path}", g)
                tf.summary.histogram(f"weights/{v.path}", v)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    writer.close()


def tf2_module_loop(logdir):
    """TF2 loop over a ``tf.Module`` model whose variables are named ``dense/kernel:0``."""
    tf, _ = _keras()

    class Dense(tf.Module):
        def __init__(self, n_in, n_out, name):
            super().__init__(name=name)
            with self.name_scope:
                self.kernel = tf.Variable(tf.random.normal((n_in, n_out), stddev=0.5, seed=1), name="kernel")
                self.bias = tf.Variable(tf.zeros((n_out,)), name="bias")

        def __call__(self, x):
            return tf.matmul(x, self.kernel) + self.bias

    class MLP(tf.Module):
        def __init__(self):
            super().__init__(name="mlp")
            self.layers = [Dense(N_IN, N_HIDDEN, "dense"), Dense(N_HIDDEN, N_HIDDEN, "dense_1"),
                           Dense(N_HIDDEN, N_OUT, "dense_2")]

        def __call__(self, x):
            for layer in self.layers[:-1]:
                x = tf.nn.relu(layer(x))
            return self.layers[-1](x)

    model = MLP()
    variables = [v for layer in model.layers for v in (layer.kernel, layer.bias)]
    x, y = _xy()
    writer = tf.summary.create_file_writer(str(logdir))
    for step in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
        grads = tape.gradient(loss, variables)
        with writer.as_default(step=step):
            for g, v in zip(grads, variables):
                tf.summary.histogram(f"gradients/{v.name}", g)
                tf.summary.histogram(f"weights/{v.name}", v)
        for g, v in zip(grads, variables):
            v.assign_sub(0.1 * g)
    writer.close()


N_SEED002_DENSE = 6  # 12 variables, so layer_10 and layer_11 exist


def seed002_loop(logdir):
    """Seed 002: ``grad_hist/layer_<i>`` histograms and ``grad_mean``/``grad_max`` scalars per variable."""
    tf, keras = _keras()
    model = keras.Sequential(
        [keras.Input((N_IN,))]
        + [keras.layers.Dense(N_HIDDEN, activation="relu") for _ in range(N_SEED002_DENSE - 1)]
        + [keras.layers.Dense(N_OUT)])
    optimizer = keras.optimizers.Adam(1e-2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    writer = tf.summary.create_file_writer(str(logdir))

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        gradients = tape.gradient(loss, model.trainable_variables)
        with writer.as_default():
            for i, grad in enumerate(gradients):
                if grad is not None:
                    tf.summary.scalar(f"grad_mean/layer_{i}", tf.reduce_mean(tf.abs(grad)), step=optimizer.iterations)
                    tf.summary.scalar(f"grad_max/layer_{i}", tf.reduce_max(tf.abs(grad)), step=optimizer.iterations)
                    tf.summary.histogram(f"grad_hist/layer_{i}", grad, step=optimizer.iterations)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    x, y = _xy()
    for _ in range(STEPS):
        train_step(tf.constant(x), tf.constant(y))
    writer.close()


def keras_fit(logdir):
    """Keras 3 ``model.fit`` with ``TensorBoard(histogram_freq=1)``: runs ``train`` and ``validation``."""
    _, keras = _keras()
    model = keras.Sequential([
        keras.Input((N_IN,)),
        keras.layers.Dense(N_HIDDEN, activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.Dense(N_HIDDEN, activation="relu"),
        keras.layers.Dense(N_OUT),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = _xy()
    model.fit(x, y, epochs=EPOCHS, batch_size=KERAS_BATCH, validation_split=KERAS_VALIDATION_SPLIT, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(str(logdir), histogram_freq=1)])


def _torch_mlp():
    import torch
    from torch import nn

    torch.manual_seed(0)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(N_IN, N_HIDDEN)
            self.bn1 = nn.BatchNorm1d(N_HIDDEN)
            self.relu1 = nn.ReLU()
            self.fc2 = nn.Linear(N_HIDDEN, N_HIDDEN)
            self.relu2 = nn.ReLU()
            self.fc3 = nn.Linear(N_HIDDEN, N_OUT)
            # A parameter outside any module, named like neither a weight nor a bias (as CLIP's).
            self.logit_scale = nn.Parameter(torch.zeros(()))

        def forward(self, x):
            return self.fc3(self.relu2(self.fc2(self.relu1(self.bn1(self.fc1(x)))))) * self.logit_scale.exp()

    x, y = _xy()
    model = MLP()
    return torch, model, torch.optim.Adam(model.parameters(), lr=1e-2), torch.from_numpy(x), torch.from_numpy(y)


def _torch_steps(torch, model, optimizer, x, y, log):
    """Runs STEPS training steps; `log(step, loss)` is called after backward, before the update."""
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        log(step, loss)
        optimizer.step()


def torch_prefixes(logdir):
    """PyTorch tutorial style: ``weights/<name>``, ``grads/<name>``, ``activations/<module>`` via forward hooks."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))
    outputs = {}
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(lambda m, inp, out, name=name: outputs.__setitem__(name, out.detach()))

    def log(step, loss):
        writer.add_scalar("Loss/train", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, step)
            writer.add_histogram(f"grads/{name}", p.grad, step)
        for name, out in outputs.items():
            writer.add_histogram(f"activations/{name}", out, step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()


def torch_dot_grad(logdir):
    """PyTorch ``<name>`` next to ``<name>.grad``, with the official tutorial's ``training loss`` scalar."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))

    def log(step, loss):
        writer.add_scalar("training loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(name, p, step)
            writer.add_histogram(name + ".grad", p.grad, step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()


def tensorboardx_data_grad(logdir):
    """tensorboardX: ``<name>/data`` and ``<name>/grad``."""
    from tensorboardX import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))

    def log(step, loss):
        writer.add_scalar("train/loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(name + "/data", p.clone().cpu().data.numpy(), step)
            writer.add_histogram(name + "/grad", p.grad.clone().cpu().data.numpy(), step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()


def tensorboardx_sample_histograms(logdir):
    """tensorboardX histograms of samples drawn from N(0, sigma), ``hist-numpy`` and ``hist-torch``: no layer,
    no role, no loss (the tensorboardX tutorial's histogram example)."""
    import torch
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    writer = SummaryWriter(str(logdir))
    for step in range(5):
        sigma = 1.0 + step
        writer.add_histogram("hist-numpy", rng.normal(0, sigma, 1000), step)
        writer.add_histogram("hist-torch", torch.distributions.Normal(0.0, sigma).sample((1, 1000)), step)
    writer.close()


def lightning_scalars(logdir):
    """Lightning's names through torch's SummaryWriter, into ``version_0`` as its TensorBoardLogger does.

    ``grad_norm(module, norm_type=2)`` gives ``grad_2.0_norm/<param>`` and
    ``grad_2.0_norm_total``; LearningRateMonitor gives ``lr-Adam``.
    """
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(os.path.join(str(logdir), "version_0"))

    def log(step, loss):
        norms = {f"grad_2.0_norm/{name}": torch.linalg.vector_norm(p.grad, 2.0)
                 for name, p in model.named_parameters()}
        norms["grad_2.0_norm_total"] = torch.linalg.vector_norm(torch.stack(list(norms.values())), 2.0)
        for tag, value in norms.items():
            writer.add_scalar(tag, value.item(), step)
        writer.add_scalar("train_loss", loss.item(), step)
        writer.add_scalar("lr-Adam", optimizer.param_groups[0]["lr"], step)
        writer.add_scalar("epoch", 0, step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()


def torch_custom_prefix(logdir):
    """Gradients under a prefix no built-in rule knows (``mygrads/<name>``), weights under ``weights/<name>``."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))

    def log(step, loss):
        for name, p in model.named_parameters():
            writer.add_histogram(f"mygrads/{name}", p.grad, step)
            writer.add_histogram(f"weights/{name}", p, step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()


STUCK_EPOCHS = 8


def keras_stuck_sigmoid(logdir):
    """Keras 3 ``model.fit`` of a deep sigmoid net whose loss stays at ln 2 for `STUCK_EPOCHS` epochs.

    Eight sigmoid layers (Keras' default Glorot init) pass the last layer
    nearly the same features for every input and barely any gradient back, so
    the binary cross-entropy stays at 0.693 on balanced labels.
    ``TensorBoard(histogram_freq=1)`` logs weights only (no gradients), and they
    look healthy: run ``train``.
    """
    _, keras = _keras()
    model = keras.Sequential([keras.Input((N_IN,))]
                             + [keras.layers.Dense(32, activation="sigmoid") for _ in range(8)]
                             + [keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="binary_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, N_IN)).astype(np.float32)
    y = (x[:, 0] * x[:, 1] > 0).astype(np.float32)[:, None]
    model.fit(x, y, epochs=STUCK_EPOCHS, batch_size=8, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(str(logdir), histogram_freq=1)])


def torch_watch_blocks(logdir):
    """gradhealth's torch watch() on a tiny transformer-like model: ``embed``, ``blocks.<i>.attn.qkv``,
    ``blocks.<i>.mlp.0`` ... in a ModuleList of nested blocks, ``norm`` and ``head``."""
    import torch
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(N_HIDDEN)
            self.attn = nn.ModuleDict({"qkv": nn.Linear(N_HIDDEN, N_HIDDEN), "proj": nn.Linear(N_HIDDEN, N_HIDDEN)})
            self.mlp = nn.Sequential(nn.Linear(N_HIDDEN, N_HIDDEN), nn.GELU(), nn.Linear(N_HIDDEN, N_HIDDEN))

        def forward(self, x):
            x = x + self.attn["proj"](self.attn["qkv"](self.norm(x)))
            return x + self.mlp(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(N_IN, N_HIDDEN, bias=False)
            self.blocks = nn.ModuleList(Block() for _ in range(3))
            self.norm = nn.LayerNorm(N_HIDDEN)
            self.head = nn.Linear(N_HIDDEN, N_OUT)

        def forward(self, x):
            x = self.embed(x)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = _xy()
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    handle = watch(model, str(logdir), optimizer=optimizer, every_n_steps=1, first_steps=0)
    for _ in range(STEPS):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    unwatch(handle)
