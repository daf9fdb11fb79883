"""Tiny models trained on synthetic data until they go wrong, logged the way users log them.

Each training function writes one run into `logdir` and returns a `Truth`: the
statistics of the raw tensors at every logged step (computed from the tensors
themselves, not from the histograms TensorBoard stores), from which the step
where the pathology really began can be read. Seeds are fixed; every run takes
a few seconds on two CPU cores. TensorFlow and torch are imported inside the
functions because importing them costs seconds.

TensorFlow runs log ``gradients/<var.name>``, ``weights/<var.name>`` and
``activations/<layer>`` histograms from a ``tf.GradientTape`` loop; PyTorch
runs log ``grads/<name>``, ``weights/<name>`` and ``activations/<module>`` (via
forward hooks) through ``torch.utils.tensorboard.SummaryWriter``. Both log a
``loss`` scalar every step and histograms every `EVERY` steps.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Dict, List, Optional

import numpy as np

EVERY = 5
STEPS = 150
BATCH = 32
N_IN = 16
N_CLASSES = 4

# The contract's triggers (DESIGN section 4), applied to the raw tensors.
EXPLODING_MAX_ABS = 1e3
EXPLODING_JUMP = 10.0
EXPLODING_STEPS = 2
JUMP_WINDOW = 11
SMALL = 1e-6
VANISHING_FRACTION = 0.9
VANISHING_STEPS = 5
DEAD_ZERO_FRACTION = 0.7
DEAD_INFO_ZERO_FRACTION = 0.3
DEAD_STEPS = 3

GRADIENT, ACTIVATION = "gradient", "activation"


@dataclasses.dataclass
class Truth:
    """What really happened in one run, from the raw tensors at every training step."""

    run: str
    framework: str
    story: str
    every: int
    # role -> layer (as gradhealth names it) -> metric -> value at every training step.
    stats: Dict[str, Dict[str, Dict[str, np.ndarray]]]
    # role -> layer -> bool per training step: was this tensor's histogram written?
    logged: Dict[str, Dict[str, np.ndarray]]
    loss: np.ndarray
    # Model order: parameter rows (gradients, weights) and activation rows.
    param_layers: List[str]
    activation_layers: List[str]
    # parameter layer -> ||w after - w before|| / ||w before|| of every training step's update.
    update_ratio: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def first_nonfinite_loss(self) -> Optional[int]:
        bad = np.nonzero(~np.isfinite(self.loss))[0]
        return int(bad[0]) if len(bad) else None

    def max_abs_grad(self) -> np.ndarray:
        """Largest finite |gradient| over all parameters at every step (-inf where none is finite)."""
        values = np.array([st["max_abs"] for st in self.stats[GRADIENT].values()])
        return np.max(np.nan_to_num(values, nan=-np.inf), axis=0, initial=-np.inf)

    # `slack` below moves every limit by that share in the direction that makes the
    # condition easier (> 0) or harder (< 0) to meet: a histogram's bucket estimates
    # sit within a few percent of the raw values, so a value that close to a limit
    # may fall on either side of it.

    def exploding(self, slack: float = 0.0) -> Dict:
        """Per gradient layer, the first logged step with max |g| above 1e3 or the norm 10x its running
        median of the logged steps before (what logged histograms can show) that lasts: for
        `EXPLODING_STEPS` consecutive logged steps, or not back to normal at the next logged step
        (finite, max |g| at least a tenth of its running median before; a log that ends is no return).
        A one-off that comes back is a spike. Onset: the first step, logged or not, with max |g|
        above 1e3, or the first lasting logged jump if that came earlier."""
        limit, jump = EXPLODING_MAX_ABS * (1 - slack), EXPLODING_JUMP * (1 - slack)
        over = np.nonzero(_gt(self.max_abs_grad(), limit))[0]
        layers = {}
        for layer, st in self.stats[GRADIENT].items():
            steps = np.nonzero(self.logged[GRADIENT][layer])[0]
            max_abs, l2 = st["max_abs"][steps], st["l2"][steps]
            with np.errstate(invalid="ignore", divide="ignore"):
                jumped = _gt(l2 / _trailing_median(l2, JUMP_WINDOW), jump)
            hit = _gt(max_abs, limit) | jumped
            finite = np.isfinite(max_abs) & (st["nonfinite"][steps] == 0)
            level = _trailing_median(max_abs, JUMP_WINDOW)
            i = 0
            while i < len(hit):
                if not hit[i]:
                    i += 1
                    continue
                end = i
                while end + 1 < len(hit) and hit[end + 1]:
                    end += 1
                nxt = end + 1
                back = nxt < len(hit) and finite[nxt] and not (np.isfinite(level[i]) and max_abs[nxt] < level[i] / jump)
                if end - i + 1 >= EXPLODING_STEPS or not back:
                    layers[layer] = int(steps[i])
                    break
                i = end + 1
        onsets = ([int(over[0])] if len(over) else []) + list(layers.values())
        return {"onset": min(onsets) if onsets else None, "layers": layers}

    def vanishing(self, slack: float = 0.0) -> Dict:
        """Layers whose logged gradients vanish (>= 90% of |g| < 1e-6, or mean |g| < 1e-6) for 5+
        consecutive logged steps, each with the step where that episode truly began."""
        fraction, small = VANISHING_FRACTION - slack, SMALL * (1 + slack)
        return self._sustained(
            GRADIENT, lambda st: (st["small_fraction"] >= fraction) | _lt(st["mean_abs"], small), VANISHING_STEPS)

    def dead(self, resolution: bool = False) -> Dict:
        """Activation layers with more than 70% exact zeros for 3+ consecutive logged steps.

        With `resolution`, the share of values in the writer's bucket around zero
        instead: all a histogram can show, since that bucket mixes zeros with
        small values (TF2's 30 equal buckets make it 1/30 of the range wide).
        """
        metric = "zero_bucket_fraction" if resolution else "zero_fraction"
        return self._sustained(ACTIVATION, lambda st: st[metric] > DEAD_ZERO_FRACTION, DEAD_STEPS)

    def _sustained(self, role, condition, length) -> Dict:
        layers = {}
        for layer, st in self.stats[role].items():
            every_step = condition(st)
            logged = np.nonzero(self.logged[role][layer])[0]
            start = _first_run(every_step[logged], length)
            if start is None:
                continue
            # Walk back from the first logged step of the episode to where it truly began.
            s = int(logged[start])
            while s > 0 and every_step[s - 1]:
                s -= 1
            layers[layer] = s
        return {"onset": min(layers.values()) if layers else None, "layers": layers}

    def logged_zero_fractions(self) -> Dict[str, tuple]:
        """(min, max) raw zero fraction per activation layer over its logged steps."""
        out = {}
        for layer, st in self.stats[ACTIVATION].items():
            zf = st["zero_fraction"][self.logged[ACTIVATION][layer]]
            out[layer] = (float(zf.min()), float(zf.max()))
        return out


def _gt(values, limit):
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=-np.inf) > limit


def _lt(values, limit):
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(values, nan=np.inf) < limit


def _trailing_median(values: np.ndarray, window: int, min_points: int = 3) -> np.ndarray:
    """Median of the previous `window` values; NaN until `min_points` exist."""
    out = np.full(len(values), np.nan)
    for i in range(min_points, len(values)):
        past = values[max(0, i - window):i]
        past = past[~np.isnan(past)]
        if len(past) >= min_points:
            out[i] = np.median(past)
    return out


def _first_run(mask: np.ndarray, length: int) -> Optional[int]:
    run = 0
    for i, m in enumerate(mask):
        run = run + 1 if m else 0
        if run == length:
            return i - length + 1
    return None


def _tf_zero_bucket(a: np.ndarray, buckets: int = 30) -> np.ndarray:
    """Values in the bucket(s) of TF2's equal-width histogram (30 buckets over [min, max]) whose edges enclose 0."""
    lo, hi = float(a.min()), float(a.max())
    if not lo <= 0 <= hi:
        return np.zeros(a.shape, dtype=bool)
    if lo == hi:
        return a == 0
    width = (hi - lo) / buckets
    k = (0 - lo) / width
    first = np.floor(k) - (1 if k == np.floor(k) and k > 0 else 0)
    last = min(np.floor(k), buckets - 1)
    return (a >= lo + first * width) & (a <= lo + (last + 1) * width)


def _torch_zero_bucket(a: np.ndarray) -> np.ndarray:
    """SummaryWriter's default bins put the edges nearest 0 at +-1e-12."""
    return np.abs(a) <= 1e-12


class _Recorder:
    """Statistics of the raw tensors at every step, and which of them were logged."""

    def __init__(self, zero_bucket):
        self.stats = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
        self.logged = collections.defaultdict(lambda: collections.defaultdict(list))
        self.updates = collections.defaultdict(list)
        # values -> bool mask of those in the writer's histogram bucket(s) around zero.
        self._zero_bucket = zero_bucket

    def add(self, role: str, layer: str, array, logged: bool) -> None:
        a = np.asarray(array, dtype=np.float64).ravel()
        finite = np.isfinite(a)
        absf = np.abs(a[finite])
        st = self.stats[role][layer]
        # Magnitudes over the finite values: NaN/Inf are the `nonfinite` count's business.
        st["max_abs"].append(float(absf.max()) if len(absf) else np.nan)
        st["l2"].append(float(np.sqrt(np.dot(absf, absf))) if finite.all() else np.nan)
        st["mean_abs"].append(float(absf.mean()) if finite.all() else np.nan)
        st["small_fraction"].append(float(np.mean(np.abs(a) < SMALL)))
        st["zero_fraction"].append(float(np.mean(a == 0)))
        if role == ACTIVATION:
            st["zero_bucket_fraction"].append(float(np.mean(self._zero_bucket(a))) if finite.all() else np.nan)
        st["nonfinite"].append(int(a.size - finite.sum()))
        self.logged[role][layer].append(logged)

    def add_update(self, layer: str, before, after) -> None:
        """One step's update-to-weight ratio of a parameter, from its values before and after the step."""
        b, a = np.asarray(before, dtype=np.float64).ravel(), np.asarray(after, dtype=np.float64).ravel()
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            self.updates[layer].append(float(np.linalg.norm(a - b) / np.linalg.norm(b)))

    def truth(self, run, framework, story, every, loss, param_layers, activation_layers) -> Truth:
        return Truth(
            run=run, framework=framework, story=story, every=every,
            stats={role: {layer: {k: np.asarray(v) for k, v in st.items()} for layer, st in layers.items()}
                   for role, layers in self.stats.items()},
            logged={role: {layer: np.asarray(v, dtype=bool) for layer, v in layers.items()}
                    for role, layers in self.logged.items()},
            loss=np.asarray(loss, dtype=np.float64), param_layers=param_layers, activation_layers=activation_layers,
            update_ratio={layer: np.asarray(v) for layer, v in self.updates.items()})


def _classification_data(seed: int, n: int = 512):
    """Inputs and the labels of a random ReLU teacher: learnable, not trivially."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, N_IN)).astype(np.float32)
    w1 = rng.normal(size=(N_IN, 32)) / np.sqrt(N_IN)
    w2 = rng.normal(size=(32, N_CLASSES)) / np.sqrt(32)
    y = np.argmax(np.maximum(x @ w1, 0) @ w2, axis=1).astype(np.int64)
    return x, y


def _regression_data(seed: int, n: int = 512):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, N_IN)).astype(np.float32)
    y = (x @ rng.normal(size=(N_IN, 1)) + 0.1 * rng.normal(size=(n, 1))).astype(np.float32)
    return x, y


def _batches(seed: int, n: int, steps: int, batch: int = BATCH):
    rng = np.random.default_rng(seed + 1000)
    return [rng.choice(n, batch, replace=False) for _ in range(steps)]


@dataclasses.dataclass(frozen=True)
class Story:
    """One training recipe: the architecture, its initialisation and its optimiser."""

    name: str
    widths: tuple  # hidden widths
    activation: str  # relu, sigmoid or tanh
    init_std: Optional[float]  # None: He normal, sqrt(2 / fan_in)
    optimizer: str  # sgd or adam
    lr: float
    task: str  # classification or regression
    steps: int = STEPS
    every: int = EVERY
    seed: int = 0
    frozen: Optional[int] = None  # index of a layer left out of the optimizer
    corrupt_step: Optional[int] = None  # a step whose batch inputs are scaled by `corrupt_scale`
    corrupt_scale: float = 1.0
    batch: int = BATCH
    nan_guard: bool = False  # the forward pass replaces NaN and Inf activations by 0


STORIES = {
    # ReLU MLP, He init, Adam at its default 1e-3.
    "healthy": Story("healthy", (64, 64, 64), "relu", None, "adam", 1e-3, "classification"),
    # Deep tanh MLP, init std 0.5 (2x He, 3x Glorot), plain SGD at 0.2 on MSE: the
    # output error grows geometrically through bounded tanh features until max |g|
    # passes 1e3 (step 4-9 over seeds 0-3) and the loss turns NaN (step 26-34).
    "exploding": Story("exploding", (32,) * 6, "tanh", 0.5, "sgd", 0.2, "regression"),
    # Ten sigmoid layers, init std 0.05: each layer scales the backward signal by
    # about 0.25 * 0.05 * sqrt(32) = 0.07, so the first seven kernels' gradients start below 1e-6.
    "vanishing": Story("vanishing", (32,) * 10, "sigmoid", 0.05, "sgd", 0.1, "classification"),
    # The healthy MLP with Adam at 0.1 (100x its default): within two steps most
    # units of the second and third layers are pushed below zero for every input and
    # never come back.
    "dead_relu": Story("dead_relu", (64, 64, 64), "relu", None, "adam", 0.1, "classification"),
}

# Stories whose logs carry weights and gradients but no update tags, each with one problem the
# histograms can prove (or, for a one-off, must not overstate).
PROOF_STORIES = {
    # Plain SGD at 3.0 on the healthy MLP: every kernel's norm grows several-fold within the first
    # logged interval, then the run turns non-finite (step 28-30).
    "lr_too_high": Story("lr_too_high", (64, 64, 64), "relu", None, "sgd", 3.0, "classification"),
    # The healthy MLP with its second layer left out of the optimizer; its gradients still flow.
    "frozen": Story("frozen", (64, 64, 64), "relu", None, "adam", 1e-3, "classification", frozen=1),
    # The healthy MLP fed one batch (step 75, a logged step) with inputs 30x too large.
    "corrupted_batch": Story("corrupted_batch", (64, 64, 64), "relu", None, "adam", 1e-3, "classification",
                             corrupt_step=75, corrupt_scale=30.0),
    # Std 1.0 on fan-in 16, 256 and 256: He is 0.35, 0.088 and 0.088, so the second and third kernels
    # start 11x too wide, the first only 2.8x.
    "init_std1": Story("init_std1", (256, 256), "relu", 1.0, "adam", 1e-3, "classification", steps=30),
    # The healthy MLP behind a guard that zeroes NaN activations, fed one batch of NaN inputs (step 50):
    # the first kernel turns NaN for good; the guard hides it from the layers after it, whose
    # gradients then have nothing to flow from.
    "nan_batch": Story("nan_batch", (64, 64, 64), "relu", None, "adam", 1e-3, "classification",
                       corrupt_step=50, corrupt_scale=float("nan"), nan_guard=True, steps=100),
    # Full-batch Adam at 1e-6, a thousandth of its default: the loss stays where it started. 70 steps: a
    # last tenth of 7 values.
    "stuck": Story("stuck", (64, 64, 64), "relu", None, "adam", 1e-6, "classification", batch=512, steps=70),
}
STORIES.update(PROOF_STORIES)


def _init(story: Story, seed: int):
    """Kernels (fan_in, fan_out) and biases for every layer, from numpy so both frameworks start alike."""
    rng = np.random.default_rng(seed)
    n_out = N_CLASSES if story.task == "classification" else 1
    sizes = (N_IN,) + tuple(story.widths) + (n_out,)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        std = np.sqrt(2.0 / a) if story.init_std is None else story.init_std
        kernel = (rng.normal(size=(a, b)) * std).astype(np.float32)
        params.append((kernel, np.zeros((b,), dtype=np.float32)))
    return params


def train_tf(logdir, story_name: str, run: Optional[str] = None) -> Truth:
    """A TF2 ``tf.GradientTape`` loop over ``tf.Module`` layers (variables ``layer_<i>/kernel:0``)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    story = STORIES[story_name]
    run = run or story_name

    class Dense(tf.Module):
        def __init__(self, kernel, bias, name):
            super().__init__(name=name)
            with self.name_scope:
                self.kernel = tf.Variable(kernel, name="kernel")
                self.bias = tf.Variable(bias, name="bias")

        def __call__(self, x):
            return tf.matmul(x, self.kernel) + self.bias

    act = {"relu": tf.nn.relu, "sigmoid": tf.sigmoid, "tanh": tf.tanh}[story.activation]
    layers = [Dense(k, b, f"layer_{i}") for i, (k, b) in enumerate(_init(story, story.seed))]
    variables = [v for layer in layers for v in (layer.kernel, layer.bias)]

    def forward(x):
        acts = {}
        for layer in layers[:-1]:
            x = act(layer(x))
            if story.nan_guard:
                x = tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))
            acts[layer.name] = x
        return layers[-1](x), acts

    if story.task == "classification":
        x_all, y_all = _classification_data(story.seed)

        def loss_fn(out, y):
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, out))
    else:
        x_all, y_all = _regression_data(story.seed)

        def loss_fn(out, y):
            return tf.reduce_mean(tf.square(out - y))

    optimizer = (keras.optimizers.SGD(story.lr) if story.optimizer == "sgd" else keras.optimizers.Adam(story.lr))
    writer = tf.summary.create_file_writer(os.path.join(str(logdir), run))

    @tf.function(autograph=False)
    def compute(x, y, step):
        with tf.GradientTape() as tape:
            out, acts = forward(x)
            loss = loss_fn(out, y)
        with writer.as_default(step=step):
            tf.summary.scalar("loss", loss)
        return loss, tape.gradient(loss, variables), acts

    # Histograms only every few steps, in their own graph so the other steps skip it.
    @tf.function(autograph=False)
    def log_histograms(step, grads, acts):
        with writer.as_default(step=step):
            for g, v in zip(grads, variables):
                tf.summary.histogram(f"gradients/{v.name}", g)
                tf.summary.histogram(f"weights/{v.name}", v)
            for name, a in acts.items():
                tf.summary.histogram(f"activations/{name}", a)

    trained = [i for i in range(len(variables)) if story.frozen is None or i // 2 != story.frozen]

    @tf.function(autograph=False)
    def apply(grads):
        optimizer.apply_gradients([(grads[i], variables[i]) for i in trained])

    rec = _Recorder(_tf_zero_bucket)
    losses = []
    for step, idx in enumerate(_batches(story.seed, len(x_all), story.steps, story.batch)):
        step_t = tf.constant(step, dtype=tf.int64)
        loss, grads, acts = compute(tf.constant(_inputs(story, step, x_all[idx])), tf.constant(y_all[idx]), step_t)
        logged = step % story.every == 0
        if logged:
            log_histograms(step_t, grads, acts)
        before = [v.numpy() for v in variables]
        apply(grads)
        for b, v in zip(before, variables):
            rec.add_update(_tf_layer(v.name), b, v.numpy())
        losses.append(float(loss))
        for g, v in zip(grads, variables):
            rec.add(GRADIENT, _tf_layer(v.name), g.numpy(), logged)
        for name, a in acts.items():
            rec.add(ACTIVATION, name, a.numpy(), logged)
    writer.close()
    return rec.truth(run, "tf", story_name, story.every, losses,
                     [_tf_layer(v.name) for v in variables], [layer.name for layer in layers[:-1]])


def _inputs(story: Story, step: int, x: np.ndarray) -> np.ndarray:
    """The batch's inputs, scaled at the story's corrupted step (a batch read with the wrong normalisation)."""
    return x * np.float32(story.corrupt_scale) if step == story.corrupt_step else x


def _tf_layer(var_name: str) -> str:
    return var_name.rsplit(":", 1)[0]


def train_torch(logdir, story_name: str, run: Optional[str] = None) -> Truth:
    """A PyTorch loop over ``nn.Sequential`` modules ``fc<i>``/``act<i>``, logged with SummaryWriter."""
    import torch

    # Thread hand-offs cost more than these tiny matrix products, and far more on a busy machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_torch(logdir, story_name, run)
    finally:
        torch.set_num_threads(threads)


def _train_torch(logdir, story_name: str, run: Optional[str]) -> Truth:
    import torch
    from torch import nn
    from torch.utils.tensorboard import SummaryWriter

    story = STORIES[story_name]
    run = run or story_name
    torch.manual_seed(story.seed)
    modules = collections.OrderedDict()
    params = _init(story, story.seed)
    for i, (k, b) in enumerate(params):
        fc = nn.Linear(*k.shape)
        with torch.no_grad():
            fc.weight.copy_(torch.from_numpy(k.T.copy()))
            fc.bias.copy_(torch.from_numpy(b))
        modules[f"fc{i}"] = fc
        if i < len(params) - 1:
            modules[f"act{i}"] = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[story.activation]()
            if story.nan_guard:
                modules[f"guard{i}"] = _NanGuard()
    model = nn.Sequential(modules)
    outputs = {}
    for name, module in model.named_modules():
        if name.startswith("act"):
            module.register_forward_hook(lambda m, inp, out, name=name: outputs.__setitem__(name, out.detach()))

    if story.task == "classification":
        x_all, y_all = _classification_data(story.seed)
        loss_fn = nn.functional.cross_entropy
    else:
        x_all, y_all = _regression_data(story.seed)
        loss_fn = nn.functional.mse_loss
    x_all, y_all = torch.from_numpy(x_all), torch.from_numpy(y_all)
    trained = [p for name, p in model.named_parameters() if story.frozen is None
               or not name.startswith(f"fc{story.frozen}.")]
    optimizer = (torch.optim.SGD(trained, lr=story.lr) if story.optimizer == "sgd"
                 else torch.optim.Adam(trained, lr=story.lr))
    writer = SummaryWriter(os.path.join(str(logdir), run))
    rec = _Recorder(_torch_zero_bucket)
    losses = []
    for step, idx in enumerate(_batches(story.seed, len(x_all), story.steps, story.batch)):
        idx = torch.from_numpy(idx)
        optimizer.zero_grad()
        loss = loss_fn(model(torch.from_numpy(_inputs(story, step, x_all[idx].numpy()))), y_all[idx])
        loss.backward()
        losses.append(loss.item())
        writer.add_scalar("loss", loss.item(), step)
        due = step % story.every == 0
        for name, p in model.named_parameters():
            logged = due and _add_histogram(writer, f"grads/{name}", p.grad, step)
            if due:
                _add_histogram(writer, f"weights/{name}", p.detach(), step)
            rec.add(GRADIENT, name, p.grad.numpy(), logged)
        for name, out in outputs.items():
            logged = due and _add_histogram(writer, f"activations/{name}", out, step)
            rec.add(ACTIVATION, name, out.numpy(), logged)
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        optimizer.step()
        for name, p in model.named_parameters():
            rec.add_update(name, before[name].numpy(), p.detach().numpy())
    writer.close()
    return rec.truth(run, "torch", story_name, story.every, losses,
                     [name for name, _ in model.named_parameters()], [n for n in modules if n.startswith("act")])


def _NanGuard():
    """A module replacing NaN and Inf by 0, as defensive training code does."""
    from torch import nn

    class NanGuard(nn.Module):
        def forward(self, x):
            return x.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)

    return NanGuard()


def _add_histogram(writer, tag, tensor, step) -> bool:
    """Logs a histogram unless SummaryWriter cannot bin it, as a script that survives must.

    ``add_histogram`` raises ValueError on NaN or Inf, and on finite values
    beyond its largest bucket (1e20), which an exploding run reaches first.
    """
    try:
        writer.add_histogram(tag, tensor, step)
    except ValueError:
        return False
    return True
