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


def _torch_parameters(logdir, histograms, loss_tag=None):
    """Trains `_torch_mlp` with torch's SummaryWriter, logging for every parameter, in order, each
    ``(tag format, "weight" or "grad")`` of `histograms`, and the loss as `loss_tag` where one is given."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))

    def log(step, loss):
        if loss_tag:
            writer.add_scalar(loss_tag, loss.item(), step)
        for name, p in model.named_parameters():
            for tag, what in histograms:
                writer.add_histogram(tag.format(name), p.grad if what == "grad" else p, step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()


def torch_dot_grad(logdir):
    """PyTorch ``<name>`` next to ``<name>.grad``, with the official tutorial's ``training loss`` scalar."""
    _torch_parameters(logdir, (("{}", "weight"), ("{}.grad", "grad")), "training loss")


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
    _torch_parameters(logdir, (("mygrads/{}", "grad"), ("weights/{}", "weight")))


def torch_gradient_value(logdir):
    """A user's own words: ``<name>/gradient`` and ``<name>/value``."""
    _torch_parameters(logdir, (("{}/gradient", "grad"), ("{}/value", "weight")), "loss")


def torch_grads_model(logdir):
    """Gradients under ``grads/<name>``, weights under ``model/<name>`` (a filing word, not a role word)."""
    _torch_parameters(logdir, (("grads/{}", "grad"), ("model/{}", "weight")), "loss")


def torch_gradients_beside_other_tensors(logdir):
    """Gradients beside tensors of their name that are not the parameter's value: per parameter
    ``<name>/gradient`` and Adam's ``<name>/exp_avg`` (from the second step on); per module
    ``<module>/activation`` and ``<module>/gradient``, the gradient of its output."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))
    outputs, output_grads = {}, {}
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(lambda m, inp, out, name=name: outputs.__setitem__(name, out.detach()))
            module.register_full_backward_hook(
                lambda m, gin, gout, name=name: output_grads.__setitem__(name, gout[0].detach()))

    def log(step, loss):
        for name, p in model.named_parameters():
            writer.add_histogram(f"{name}/gradient", p.grad, step)
            if "exp_avg" in optimizer.state.get(p, {}):
                writer.add_histogram(f"{name}/exp_avg", optimizer.state[p]["exp_avg"], step)
        for name, out in outputs.items():
            writer.add_histogram(f"{name}/activation", out, step)
            writer.add_histogram(f"{name}/gradient", output_grads[name], step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()


def torch_own_prefixes(logdir):
    """A user's own naming, no role word: weights as ``net/<name>``, gradients as ``net_g/<name>``."""
    _torch_parameters(logdir, (("net/{}", "weight"), ("net_g/{}", "grad")), "loss")


def torch_unnamed_gradients(logdir):
    """Weights as ``weights/<name>``, gradients under words no convention or name rule knows:
    ``backward/<module>/<i>``, the i-th parameter of the module (``backward/fc1/0`` is fc1.weight's); scalar ``loss``."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))
    modules = [name.rpartition(".")[0] or name for name, _ in model.named_parameters()]
    grad_tags = [f"backward/{m}/{modules[:i].count(m)}" for i, m in enumerate(modules)]

    def log(step, loss):
        writer.add_scalar("loss", loss.item(), step)
        for (name, p), grad_tag in zip(model.named_parameters(), grad_tags):
            writer.add_histogram(f"weights/{name}", p, step)
            writer.add_histogram(grad_tag, p.grad, step)

    _torch_steps(torch, model, optimizer, x, y, log)
    writer.close()




# Enough epochs that its last third holds the 7 steps a stall at chance is judged on (no_progress).
STUCK_EPOCHS = 22


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


def _keras_fit_binary(logdir, layers, optimizer) -> None:
    """Keras 3 ``model.fit`` of a binary classifier for 30 epochs, ``TensorBoard(histogram_freq=1)``
    with a validation split: runs ``train`` (weights and ``epoch_*`` per epoch) and ``validation``
    (``epoch_*`` per epoch and ``evaluation_*_vs_iterations`` at the iteration each epoch ends)."""
    _, keras = _keras()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 20)).astype(np.float32)
    y = (x[:, :5].sum(1) > 0).astype(np.float32)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((20,))] + layers(keras) + [keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer(keras), "binary_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=30, batch_size=64, validation_split=0.2, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(str(logdir), histogram_freq=1)])


def keras_conv_batchnorm(logdir):
    """Keras 3 ``Conv2D`` (its bias on, Keras' default) -> ``BatchNormalization`` -> ReLU, twice, then a
    global average and a Dense head, fit for 2 epochs with `GradientHealthCallback` at every step:
    BatchNormalization subtracts each conv bias away, so their gradients are rounding."""
    _, keras = _keras()
    from gradhealth_plugin.keras import GradientHealthCallback

    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 8, 8, 3)).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) > 0).astype(np.int64)
    keras.utils.set_random_seed(0)
    convs = [layer for _ in range(2) for layer in (keras.layers.Conv2D(8, 3, padding="same"),
                                                     keras.layers.BatchNormalization(), keras.layers.ReLU())]
    model = keras.Sequential([keras.Input((8, 8, 3)), *convs, keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=32, epochs=2, verbose=0,
              callbacks=[GradientHealthCallback(str(logdir), every_n_steps=1, probe_data=(x[:32], y[:32]))])


def keras_sigmoid_at_chance(logdir):
    """Ten sigmoid layers under plain SGD (0.01): the loss falls from about 0.8 to ln 2 in a dozen epochs
    and stays there, predicting the majority class. The first kernels' updates round away in float32 (their
    histograms are the same every epoch) while the same layers' biases change."""
    _keras_fit_binary(logdir, lambda keras: [keras.layers.Dense(32, activation="sigmoid") for _ in range(10)],
                      lambda keras: keras.optimizers.SGD(0.01))


def keras_healthy_binary(logdir):
    """Three ReLU layers under Adam at 1e-3: the loss starts at ln 2 and falls to 0.03."""
    _keras_fit_binary(logdir, lambda keras: [keras.layers.Dense(32, activation="relu") for _ in range(3)],
                      lambda keras: keras.optimizers.Adam(1e-3))


def keras_high_lr(logdir):
    """Three ReLU layers under Adam at 0.5: the validation loss jumps in the first epochs, then settles. The
    weight histograms, written at each epoch's end, hold kernels grown past 3x the He and Glorot std."""
    _keras_fit_binary(logdir, lambda keras: [keras.layers.Dense(32, activation="relu") for _ in range(3)],
                      lambda keras: keras.optimizers.Adam(0.5))


def torch_watch_embedding(logdir):
    """gradhealth's torch watch() on ``embed`` (nn.Embedding(1000, 64): N(0, 1), PyTorch's default) ->
    mean over 12 tokens -> ``fc`` (Linear(64, 64) re-initialised N(0, 1): 11x He's std) -> ReLU -> ``head``."""
    import torch
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(1000, 64)
            self.fc = nn.Linear(64, 64)
            self.head = nn.Linear(64, N_OUT)
            nn.init.normal_(self.fc.weight, std=1.0)

        def forward(self, tokens):
            return self.head(torch.relu(self.fc(self.embed(tokens).mean(dim=1))))

    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens, y = torch.randint(0, 1000, (32, 12)), torch.randint(0, N_OUT, (32,))
    handle = watch(model, str(logdir), optimizer=optimizer, every_n_steps=1, first_steps=0)
    for _ in range(STEPS):
        loss = nn.functional.cross_entropy(model(tokens), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    unwatch(handle)


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


def torch_epoch_start_histograms(logdir):
    """PyTorch, weights drawn from N(0, 1) (off He and Glorot scale), ``weights/<name>`` written as each epoch
    starts (step = epoch, the first before any update) and ``epoch_loss`` as it ends."""
    import torch
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    for module in model:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=1.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(128, 20)
    y = (x[:, :5].sum(1, keepdim=True) > 0).float()
    writer = SummaryWriter(str(logdir))
    for epoch in range(3):
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, epoch)
        losses = []
        for i in range(0, 128, 32):
            optimizer.zero_grad()
            loss = nn.functional.binary_cross_entropy_with_logits(model(x[i:i + 32]), y[i:i + 32])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        writer.add_scalar("epoch_loss", float(np.mean(losses)), epoch)
    writer.close()


# Weights of `two_clusters` layers sit at +-TWO_CLUSTERS_AT (noise 2% of that): two separated modes.
TWO_CLUSTERS_AT = 0.5
# Uniform 32 x 32 kernels beside them: a flat histogram of 1024 weights, about 34 a bucket, whose buckets
# differ by counting noise alone (by half and more between the fullest and the emptiest, in some of them).
UNIFORM_LAYERS = 8


def _two_clusters(shape, seed=0):
    rng = np.random.default_rng(seed)
    signs = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (TWO_CLUSTERS_AT * (signs + 0.02 * rng.normal(size=shape))).astype(np.float32)


def keras_uniform_and_two_clusters(logdir):
    """Keras 3 ``model.fit`` with ``TensorBoard(histogram_freq=1)``: run ``train``.

    The kernel of ``sequential/dense`` (32 x 32) starts as two clusters at
    +-0.5 and a small learning rate keeps it so; those of ``sequential/dense_1``
    to ``dense_8`` keep Keras' default Glorot uniform initialisation.
    """
    _, keras = _keras()
    model = keras.Sequential(
        [keras.Input((32,)),
         keras.layers.Dense(32, activation="relu", kernel_initializer=lambda shape, dtype=None: _two_clusters(shape))]
        + [keras.layers.Dense(32, activation="relu") for _ in range(UNIFORM_LAYERS)]
        + [keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="binary_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 32)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)[:, None]
    model.fit(x, y, epochs=6, batch_size=16, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(str(logdir), histogram_freq=1)])


def torch_uniform_and_two_clusters(logdir):
    """PyTorch ``weights/<name>`` histograms of 32 x 32 ``nn.Linear`` layers at six steps.

    ``0.weight`` holds two clusters at +-0.5; ``1.weight`` to ``8.weight`` keep
    torch's default (Kaiming) uniform initialisation.
    """
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(1 + UNIFORM_LAYERS)])
    with torch.no_grad():
        model[0].weight.copy_(torch.from_numpy(_two_clusters((32, 32))))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 32)
    writer = SummaryWriter(str(logdir))
    for step in range(6):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        writer.add_scalar("loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, step)
    writer.close()


def tf_zero_fraction_scalars(logdir):
    """TF's own zero-fraction conventions: each hidden ReLU output as a histogram and as the exact
    ``tf.nn.zero_fraction`` scalar beside it, written in a ``tf.function`` loop.

    Run ``cifar10``: the TF1 CIFAR-10 tutorial's ``_activation_summary`` names,
    ``hidden<i>/activations`` and ``hidden<i>/sparsity``. Run ``estimator``: a
    canned DNN estimator's ``dnn/hiddenlayer_<i>_activation`` and
    ``dnn/hiddenlayer_<i>_fraction_of_zero_values``. A negative bias keeps most
    units at 0, some of them in the histogram's bucket around 0 with small
    positive values: that bucket gives the zero share only as an upper bound.
    """
    tf, _ = _keras()
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(256, 16)).astype(np.float32))
    w1 = tf.Variable(rng.normal(size=(16, 32)).astype(np.float32) / 4)
    w2 = tf.Variable(rng.normal(size=(32, 32)).astype(np.float32) / 4)
    b = tf.constant(-1.0)
    for run, hist_name, scalar_name in (("cifar10", "hidden{}/activations", "hidden{}/sparsity"),
                                        ("estimator", "dnn/hiddenlayer_{}_activation",
                                         "dnn/hiddenlayer_{}_fraction_of_zero_values")):
        writer = tf.summary.create_file_writer(os.path.join(str(logdir), run))

        @tf.function
        def step(i):
            h1 = tf.nn.relu(x @ w1 + b)
            h2 = tf.nn.relu(h1 @ w2 + b / 4)
            with writer.as_default(step=i):
                for k, h in enumerate((h1, h2)):
                    tf.summary.histogram(hist_name.format(k), h)
                    tf.summary.scalar(scalar_name.format(k), tf.nn.zero_fraction(h))
            w1.assign_add(0.01 * tf.ones_like(w1))

        for i in range(STEPS):
            step(tf.constant(i, dtype=tf.int64))
        writer.close()


NAN_LOSS_STEPS = 300
NAN_LOSS_HISTOGRAM_EVERY = 10
NAN_LOSS_FROM = 157


def torch_nan_loss_after_histograms(logdir):
    """PyTorch ``SummaryWriter``: ``weights/<name>`` and ``grads/<name>`` every NAN_LOSS_HISTOGRAM_EVERY steps,
    ``loss`` every step, for NAN_LOSS_STEPS steps. A NaN gradient one step before NAN_LOSS_FROM turns the weights,
    and so the loss from that step on, NaN. ``add_histogram`` raises on NaN, and the loop (as a user's does to go on
    training) skips the histograms that fail: the last is at step 150, while the loss runs on, NaN, to step 299."""
    import torch
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    writer = SummaryWriter(str(logdir))
    for step in range(NAN_LOSS_STEPS):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        if step == NAN_LOSS_FROM - 1:
            with torch.no_grad():
                model[0].weight.grad[:4] = float("nan")
        writer.add_scalar("loss", loss.item(), step)
        if step % NAN_LOSS_HISTOGRAM_EVERY == 0:
            try:
                for name, p in model.named_parameters():
                    writer.add_histogram(f"weights/{name}", p, step)
                    writer.add_histogram(f"grads/{name}", p.grad, step)
            except ValueError:  # "The histogram is empty, please file a bug report." on NaN input
                pass
        optimizer.step()
    writer.close()


def tf_relu_near_dead_line(logdir):
    """A TF2 ReLU MLP trained in a ``tf.GradientTape`` loop, each hidden output logged as a
    ``tf.summary.histogram`` ``dense_<i>/activations``: run ``histograms`` that alone, run ``exact`` also
    the exact ``tf.nn.zero_fraction`` scalar ``dense_<i>/sparsity`` of the same tensors. Biases put
    ``dense_0`` just under 70% zeros with many small positive values, so TF2's lowest bucket [0, max/30]
    reaches past 70%, and ``dense_1`` well above 70% zeros.
    """
    tf, _ = _keras()
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(512, 16)).astype(np.float32))
    y = tf.constant(rng.normal(size=(512, 1)).astype(np.float32))
    for run, exact in (("histograms", False), ("exact", True)):
        w = [tf.Variable((rng.normal(size=shape) / np.sqrt(shape[0])).astype(np.float32))
             for shape in ((16, 64), (64, 64), (64, 1))]
        biases = [tf.Variable(tf.fill([64], v)) for v in (-0.45, -1.2)]
        writer = tf.summary.create_file_writer(os.path.join(str(logdir), run))

        @tf.function
        def step(i):
            with tf.GradientTape() as tape:
                h0 = tf.nn.relu(x @ w[0] + biases[0])
                h1 = tf.nn.relu(tf.math.l2_normalize(h0, axis=1) * 8.0 @ w[1] + biases[1])
                loss = tf.reduce_mean((h1 @ w[2] - y) ** 2)
            grads = tape.gradient(loss, w)
            for v, g in zip(w, grads):
                v.assign_sub(1e-3 * g)
            with writer.as_default(step=i):
                tf.summary.scalar("loss", loss)
                for k, h in enumerate((h0, h1)):
                    tf.summary.histogram(f"dense_{k}/activations", h)
                    if exact:
                        tf.summary.scalar(f"dense_{k}/sparsity", tf.nn.zero_fraction(h))

        for i in range(STEPS + 2):
            step(tf.constant(i, dtype=tf.int64))
        writer.close()


ACTIVATION_KEYS = ("path", "name", "layer")


def keras_activation_keys(logdir):
    """A subclassed Keras 3 model ``mlp`` (Dense ``dense_0``, ReLU ``relu_0``, Dense ``dense_1``) logged
    by gradhealth's own helpers, one run each:

    * ``by_path``, ``by_name``, ``by_layer``: a TF2 ``tf.function`` loop calling the layers one by one,
      passing each layer's output to `GradientHealthLogger` keyed by the layer's ``path`` (layers that
      have one), its ``name`` or the layer itself; Keras files the variables under the model's scope
      (``mlp/dense_0/kernel``), the layers' names do not carry it;
    * ``callback``: ``fit`` of the same model with `GradientHealthCallback` (activations on).
    """
    tf, keras = _keras()
    from gradhealth_plugin.keras import GradientHealthCallback
    from gradhealth_plugin.tf import GradientHealthLogger

    class MLP(keras.Model):
        def __init__(self):
            super().__init__(name="mlp")
            self.dense_0 = keras.layers.Dense(N_HIDDEN, name="dense_0")
            self.relu_0 = keras.layers.ReLU(name="relu_0")
            self.dense_1 = keras.layers.Dense(N_OUT, name="dense_1")

        def call(self, x):
            return self.dense_1(self.relu_0(self.dense_0(x)))

    x, y = _xy()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = MLP()
    model(x)  # built as a whole, as fit builds it: the layers' paths are under "mlp/"
    chain = [model.dense_0, model.relu_0, model.dense_1]
    optimizer = keras.optimizers.SGD(0.1)
    loggers = {keys: GradientHealthLogger(os.path.join(str(logdir), f"by_{keys}"), every_n_steps=1)
               for keys in ACTIVATION_KEYS}

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            h, outputs = x, []
            for layer in chain:
                h = layer(h)
                outputs.append((layer, h))
            loss = loss_fn(y, h)
        grads = tape.gradient(loss, model.trainable_variables)
        keyed = {"path": [(layer.path, out) for layer, out in outputs if layer.path],
                 "name": [(layer.name, out) for layer, out in outputs],
                 "layer": outputs}
        for keys, gh in loggers.items():
            gh.log(optimizer.iterations, grads, model.trainable_variables, activations=keyed[keys])
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for _ in range(STEPS):
        train_step(x, y)
    for gh in loggers.values():
        gh.close()

    keras.backend.clear_session()
    model = MLP()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss_fn)
    model.fit(x, y, epochs=1, batch_size=KERAS_BATCH, verbose=0, callbacks=[
        GradientHealthCallback(str(logdir), every_n_steps=1, probe_data=(x[:KERAS_BATCH], y[:KERAS_BATCH]),
                               run="callback")])


def torch_two_writers(logdir):
    """PyTorch's SummaryWriter (``train/loss``) and gradhealth's torch watch() writing into one run folder,
    the writer's file created first so it sorts first: run ``flushed`` once both writers closed, run
    ``buffering`` copied while the SummaryWriter still held its loss in its buffer (its file: the header only)."""
    import shutil

    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    torch, model, optimizer, x, y = _torch_mlp()
    run = os.path.join(str(logdir), "flushed")
    writer = SummaryWriter(run, max_queue=1000, flush_secs=3600)
    handle = watch(model, run, optimizer=optimizer, every_n_steps=1, first_steps=0)
    _torch_steps(torch, model, optimizer, x, y, lambda step, loss: writer.add_scalar("train/loss", loss.item(), step))
    unwatch(handle)
    shutil.copytree(run, os.path.join(str(logdir), "buffering"))
    writer.close()


N_BLOCKS = 4
JUMPED_BLOCK = 3


def keras_repeated_blocks(logdir):
    """Keras 3 ``model.fit`` of a functional model of N_BLOCKS alike custom blocks ``block_<i>`` (a Dense and a
    LayerNormalization each), ``TensorBoard(histogram_freq=1)``: tags ``block_<i>/dense/kernel/histogram``,
    ``block_<i>/ln/gamma/histogram``, .... Before the last epoch's histograms, block JUMPED_BLOCK's kernel
    is multiplied by 100."""
    _, keras = _keras()

    class Block(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(N_HIDDEN, activation="relu", name="dense")
            self.ln = keras.layers.LayerNormalization(name="ln")

        def call(self, x):
            return self.ln(x + self.dense(x))

    class Jump(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == EPOCHS - 1:
                kernel = self.model.get_layer(f"block_{JUMPED_BLOCK}").dense.kernel
                kernel.assign(kernel * 100.0)

    inputs = keras.Input((N_IN,))
    h = keras.layers.Dense(N_HIDDEN, name="stem")(inputs)
    for i in range(N_BLOCKS):
        h = Block(name=f"block_{i}")(h)
    model = keras.Model(inputs, keras.layers.Dense(N_OUT, name="head")(h))
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = _xy()
    # Jump before TensorBoard: callbacks run in list order, so the last epoch's histograms hold the jump.
    model.fit(x, y, epochs=EPOCHS, batch_size=KERAS_BATCH, verbose=0,
              callbacks=[Jump(), keras.callbacks.TensorBoard(str(logdir), histogram_freq=1)])


def torch_module_list(logdir):
    """PyTorch ``nn.ModuleList`` of N_BLOCKS alike blocks (a Linear and a LayerNorm each), its parameters
    logged as ``SummaryWriter.add_histogram(name.replace(".", "/"), param)``: ``blocks/<i>/fc/weight``, ...."""
    import torch
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(N_HIDDEN, N_HIDDEN)
            self.norm = nn.LayerNorm(N_HIDDEN)

        def forward(self, x):
            return self.norm(x + torch.relu(self.fc(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(N_IN, N_HIDDEN)
            self.blocks = nn.ModuleList(Block() for _ in range(N_BLOCKS))
            self.head = nn.Linear(N_HIDDEN, N_OUT)

        def forward(self, x):
            x = self.stem(x)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    x, y = _xy()
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    writer = SummaryWriter(str(logdir))

    def log(step, loss):
        writer.add_scalar("loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(name.replace(".", "/"), p, step)

    _torch_steps(torch, model, optimizer, torch.from_numpy(x), torch.from_numpy(y), log)
    writer.close()


def torch_faded_in_branch(logdir):
    """Runs ``small`` (the branch faded in from 1e-4 to 3e-3: its gradients jump 30x and stay far below the
    other layers') and ``large`` (to 1: they jump 1e4x, to the other layers' scale) of `_faded_in_branch`."""
    _faded_in_branch(os.path.join(logdir, "small"), 3e-3)
    _faded_in_branch(os.path.join(logdir, "large"), 1.0)


def _faded_in_branch(logdir, to):
    """A ReLU MLP trained by SGD on minibatches, with a side branch (``branch``, a linear layer) added to its
    output times a stepped warm-up factor: 1e-4 for 40 steps, then `to`, so the branch's gradients jump by
    `to` / 1e-4 at step 40 and stay there. ``grads/<name>`` and ``weights/<name>`` every step, ``loss``."""
    import torch
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 3)
            self.branch = nn.Linear(8, 3)
            self.gate = 1e-4

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x))) + self.gate * self.branch(x)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(512, 8)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 512))
    writer = SummaryWriter(str(logdir))
    for step in range(70):
        model.gate = 1e-4 if step < 40 else to
        batch = torch.from_numpy(rng.integers(0, 512, 32))
        loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(f"grads/{name}", p.grad, step)
            writer.add_histogram(f"weights/{name}", p, step)
        optimizer.step()
    writer.close()


EARLY_STEPS = 11


def torch_early_healthy(logdir, steps: int = EARLY_STEPS):
    """PyTorch ``SummaryWriter``: the first `steps` steps of a healthy 10-class classifier at SGD's
    lr 0.01, ``loss`` every step (from about ln 10, falling slowly), ``weights/<name>`` and ``grads/<name>``
    every step, each step on the whole data set: a training a user follows from its start."""
    import torch
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 16, generator=g)
    y = (x @ torch.randn(16, 10, generator=g)).argmax(dim=1)
    writer = SummaryWriter(str(logdir))
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        writer.add_scalar("loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, step)
            writer.add_histogram(f"grads/{name}", p.grad, step)
    writer.close()


SCALED_STEPS, SCALED_BAD_BATCH, SCALED_AT = 60, 15, 40


def torch_scaled_down(logdir):
    """PyTorch ``SummaryWriter``: ``grads/<name>`` and ``weights/<name>`` every step for SCALED_STEPS steps of
    `_torch_mlp` under SGD. At step SCALED_BAD_BATCH one batch's loss is 1000 times too large (its update
    skipped): a one-off spike of every gradient. At step SCALED_AT, before its forward pass, ``fc2``'s weights
    are scaled down 10,000-fold and held there (their updates dropped): every gradient upstream of ``fc2``
    drops 10,000-fold for good, a level shift whose edges are no spike."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, _, x, y = _torch_mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    writer = SummaryWriter(str(logdir))
    for step in range(SCALED_STEPS):
        if step == SCALED_AT:
            with torch.no_grad():
                model.fc2.weight.mul_(1e-4)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        (loss * (1000.0 if step == SCALED_BAD_BATCH else 1.0)).backward()
        writer.add_scalar("loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, step)
            writer.add_histogram(f"grads/{name}", p.grad, step)
        if step >= SCALED_AT:
            model.fc2.weight.grad = None  # SGD skips a parameter without a gradient
        if step != SCALED_BAD_BATCH:
            optimizer.step()
    writer.close()


def keras_optimizer_variables(logdir):
    """A TF2 loop logging ``gradients/<v.path>`` and a histogram of every variable it holds, the model's
    and Adam's (``optimizer.variables``: ``adam/<path>_momentum``, ``_velocity``, ``adam/iteration``),
    each under its path, as a loop over every variable does."""
    tf, keras = _keras()
    model = keras.Sequential([
        keras.Input((N_IN,)),
        keras.layers.Dense(N_HIDDEN, activation="relu"),
        keras.layers.Dense(N_OUT),
    ])
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = _xy()
    writer = tf.summary.create_file_writer(str(logdir))
    for step in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        with writer.as_default(step=step):
            tf.summary.scalar("loss", loss)
            for g, v in zip(grads, model.trainable_variables):
                tf.summary.histogram(f"gradients/{v.path}", g)
            for v in model.weights + optimizer.variables:
                tf.summary.histogram(v.path, v)
    writer.close()


def torch_optimizer_state(logdir):
    """PyTorch ``weights/<name>``, ``grads/<name>`` and Adam's state of each parameter as
    ``<name>/exp_avg`` and ``<name>/exp_avg_sq`` (``optimizer.state``), logged after each update."""
    from torch.utils.tensorboard import SummaryWriter

    torch, model, optimizer, x, y = _torch_mlp()
    writer = SummaryWriter(str(logdir))
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        writer.add_scalar("loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, step)
            writer.add_histogram(f"grads/{name}", p.grad, step)
            for slot in ("exp_avg", "exp_avg_sq"):
                writer.add_histogram(f"{name}/{slot}", optimizer.state[p][slot], step)
    writer.close()


def torch_attention_key_bias(logdir):
    """PyTorch self-attention with its own ``query``, ``key`` and ``value`` Linear modules, then a head:
    softmax cancels whatever the key bias adds to every key alike, so its gradient is tiny (float rounding)
    at every step. ``weights/<name>``, ``grads/<name>`` and ``loss``, for 12 steps."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    width, tokens = 16, 6

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(width, width) for _ in range(3))
            self.head = nn.Linear(width, N_OUT)

        def forward(self, x):
            scores = self.query(x) @ self.key(x).transpose(1, 2) / width ** 0.5
            return self.head((torch.softmax(scores, dim=-1) @ self.value(x)).mean(dim=1))

    model = Attention()
    x = torch.randn(32, tokens, width)
    y = torch.randint(0, N_OUT, (32,))
    _train_logging_parameters(logdir, model, x, y, torch.optim.Adam(model.parameters(), lr=1e-3), 12)


def torch_sequential_conv_bn(logdir):
    """PyTorch ``nn.Sequential(Conv2d (with its bias), BatchNorm2d, ReLU, Flatten, Linear)``: the
    BatchNorm's weight is ``1.weight``, a name that says nothing of it, and it starts at all ones; BatchNorm
    subtracts the conv bias away, so ``0.bias`` gets no gradient but rounding. ``grads/<name>``, then
    ``weights/<name>`` after each SGD step (the first a step away from all ones), and ``loss``, for 30 steps."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 8 * 8, N_OUT))
    x = torch.randn(32, 3, 8, 8)
    y = torch.randint(0, N_OUT, (32,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _train_logging_parameters(logdir, model, x, y, optimizer, 30, weights_after_step=True)


def _train_logging_parameters(logdir, model, x, y, optimizer, steps: int, weights_after_step: bool = False) -> None:
    """Full-batch cross-entropy training with PyTorch's SummaryWriter: ``loss``, ``grads/<name>`` and
    ``weights/<name>`` at every step, the weights before the step or after it."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(logdir))
    for step in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        if weights_after_step:
            optimizer.step()
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, step)
            writer.add_histogram(f"grads/{name}", p.grad, step)
        if not weights_after_step:
            optimizer.step()
    writer.close()


def torch_gelu_dropout(logdir):
    """PyTorch ``activations/<module>`` by forward hooks on an MLP whose first block is Linear -> GELU ->
    Dropout(0.5) (its output logged after the dropout: half exact zeros, and negative values) and whose second
    is Linear -> ReLU (about half zeros, never negative); ``weights/<name>``, ``grads/<name>``, ``loss``."""
    import torch
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(N_IN, 64))
    model.add_module("gelu1", nn.GELU())
    model.add_module("drop1", nn.Dropout(0.5))
    model.add_module("fc2", nn.Linear(64, 64))
    model.add_module("relu2", nn.ReLU())
    model.add_module("out", nn.Linear(64, N_OUT))
    x, y = (torch.from_numpy(a) for a in _xy(256))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    writer = SummaryWriter(str(logdir))
    outputs = {}
    for name in ("drop1", "relu2"):
        getattr(model, name).register_forward_hook(lambda m, inp, out, name=name: outputs.__setitem__(name, out.detach()))
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        for name, p in model.named_parameters():
            writer.add_histogram(f"weights/{name}", p, step)
            writer.add_histogram(f"grads/{name}", p.grad, step)
        for name, out in outputs.items():
            writer.add_histogram(f"activations/{name}", out, step)
        optimizer.step()
    writer.close()
