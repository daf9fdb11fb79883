"""Finding rules that keep findings right on real trainings: the verdict over a sampled loss, a single
spike large enough to warn, and a learning-rate jump named as the cause of a blow-up."""

import base64
import contextlib
import io
import json

import numpy as np
import pytest

from gradhealth_plugin import cli
from gradhealth_plugin.analysis import findings
from gradhealth_plugin.analysis.detectors import spike
from gradhealth_plugin.analysis.detectors.spike import ADVICE as SPIKE_ADVICE


def _report(*argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["report", "--format", "json", *map(str, argv)])
    assert code == 0
    return json.loads(out.getvalue())


def _text_report(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["report", *map(str, argv)])
    assert code == 0
    return out.getvalue()


# --- the verdict when only the loss is sampled ---------------------------------------------------------

@pytest.fixture(scope="session")
def sampled_loss_only_logdir(tmp_path_factory):
    """A loss at each of 3,000 steps (more than TensorBoard keeps by default) beside gradients every 100
    steps (all kept): the rows are whole, the loss is not."""
    from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

    root = tmp_path_factory.mktemp("sampled_loss_only")
    base = normal_buckets(np.random.default_rng(4))
    write_run(root / "run", [event(s, scalar_value("loss", 2.0 / (1 + s / 300)),
                                   *([hist_value("gradients/dense/kernel", base)] if s % 100 == 0 else []))
                             for s in range(3000)])
    return root


def test_a_run_whose_loss_was_sampled_is_not_called_healthy(sampled_loss_only_logdir, loader_client):
    run = loader_client(sampled_loss_only_logdir).ok("/runs")["runs"][0]
    assert run["sampling"] is None and run["worst_status"] == "ok"
    (kept,) = [series["kept"] for series in run["scalars_sampling"]["series"]]
    assert run["verdict"] == f"no warnings in the {kept:,} loss points read of 3,000", run["verdict"]


def test_the_report_says_the_same_over_a_sampled_loss_and_healthy_when_every_point_is_read(
        sampled_loss_only_logdir):
    assert "run run: no warnings in the 1,000 loss points read of 3,000 - " in _text_report(
        sampled_loss_only_logdir)
    (run,) = _report(sampled_loss_only_logdir)["runs"]
    assert run["verdict"] == "no warnings in the 1,000 loss points read of 3,000"
    (every,) = _report(sampled_loss_only_logdir, "--all-steps")["runs"]
    assert every["scalars_sampling"] is None and every["verdict"] == "healthy"


@pytest.fixture(scope="session")
def sampled_stuck_loss_logdir(tmp_path_factory):
    """A loss stuck at ln 2 at each of 3,000 steps, of which TensorBoard keeps 1,000, beside gradients
    every 100 steps."""
    from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

    root = tmp_path_factory.mktemp("sampled_stuck_loss")
    rng = np.random.default_rng(5)
    base = normal_buckets(rng)
    noise = 1 + 0.002 * rng.standard_normal(3000)
    write_run(root / "run", [event(s, scalar_value("loss", 0.6931 * noise[s]),
                                   *([hist_value("gradients/dense/kernel", base)] if s % 100 == 0 else []))
                             for s in range(3000)])
    return root


def test_no_progress_over_a_sampled_loss_counts_the_values_kept(sampled_stuck_loss_logdir, loader_client):
    client = loader_client(sampled_stuck_loss_logdir)
    (kept,) = [series["kept"] for series in client.ok("/runs")["runs"][0]["scalars_sampling"]["series"]]
    found = client.ok("/findings", run="run")["findings"]
    (stalled,) = [f for f in found if f["kind"] == "no_progress"]
    assert f"the median of its last tenth of {kept:,} kept values" in stalled["message"], stalled["message"]
    assert stalled["message"].startswith("the loss does not improve"), stalled["message"]
    # Every point read: they are the logged values.
    (every,) = [f for f in _report(sampled_stuck_loss_logdir, "--all-steps")["findings"] if f["kind"] == "no_progress"]
    assert "the median of its last tenth of 3,000 logged values" in every["message"], every["message"]


# --- a single spike's severity ---------------------------------------------------------------------------

def _mlp_run(run_dir, scale_at: dict, steps: int = 60, lr_at: dict = None) -> None:
    """A small torch MLP trained with SGD, logged at every step. `scale_at`: step -> factor its loss is
    multiplied by (its learning rate divided by the same, so the weights move as on any step: the
    gradients alone jump); `lr_at`: step -> the learning rate from that step on."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    lr = 0.05
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    handle = watch(model, str(run_dir), optimizer=opt, every_n_steps=1, activations=False)
    writer = SummaryWriter(str(run_dir))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    for step in range(steps):
        lr = (lr_at or {}).get(step, lr)
        factor = scale_at.get(step, 1.0)
        for group in opt.param_groups:
            group["lr"] = lr / factor
        # The whole data set at each step: the gradient norm moves smoothly but for the scaled steps.
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        (loss * factor).backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
        writer.add_scalar("learning_rate", lr, step)
    writer.close()
    unwatch(handle)


@pytest.fixture(scope="session")
def spike_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("spikes")
    _mlp_run(root / "large", {40: 1000.0})
    _mlp_run(root / "small", {40: 30.0})
    return root


def _spikes(client, run):
    return [f for f in client.ok("/findings", run=run)["findings"] if f["kind"] == "spike"]


def test_a_one_step_jump_of_1000x_in_the_gradient_norm_is_a_warning_and_its_cells_say_so(spike_logdir,
                                                                                       plugin_client):
    client = plugin_client(spike_logdir)
    (spike,) = _spikes(client, "large")
    assert spike["severity"] == "warn" and spike["first_step"] == spike["last_step"] == 40, spike
    assert spike["evidence"]["jump_threshold"] == 100
    jumps = [layer["jump"] for layer in spike["evidence"]["layers"].values()]
    assert min(jumps) > 100, jumps
    assert "above the values before and after them" in spike["message"], spike["message"]
    hm = client.ok("/heatmap", run="large", role="gradient", metric="l2")
    col = hm["steps"].index(40)
    for layer in spike["layers"]:
        row = hm["layers"].index(layer)
        # Warn (2) at the spike's step only; ok (1) at every other step.
        assert hm["status"][row][col] == 2 and hm["rules"][row][col] == "spike", layer
        assert {s for j, s in enumerate(hm["status"][row]) if j != col} == {1}, layer


def test_a_one_step_jump_of_30x_stays_a_note(spike_logdir, plugin_client):
    client = plugin_client(spike_logdir)
    (spike,) = _spikes(client, "small")
    assert spike["severity"] == "info" and spike["first_step"] == 40, spike
    # Past exploding_jump (10x), as a corrupted batch's, but a one-off under spike_warn_jump (100x).
    assert 10 < max(layer["jump"] for layer in spike["evidence"]["layers"].values()) < 100
    hm = client.ok("/heatmap", run="small", role="gradient", metric="l2")
    col = hm["steps"].index(40)
    assert [row[col] for row in hm["status"]] == [1] * len(hm["layers"])


# --- a learning-rate jump named as the cause of a blow-up -------------------------------------------------

@pytest.fixture(scope="session")
def lr_jump_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("lr_jump")
    _mlp_run(root / "lr_jump", {}, lr_at={40: 5.0})  # 100x the learning rate from step 40 on
    return root


def test_a_learning_rate_jump_just_before_an_explosion_is_named_as_its_cause(lr_jump_logdir, plugin_client):
    found = plugin_client(lr_jump_logdir).ok("/findings", run="lr_jump")["findings"]
    blow_ups = [f for f in found if f["kind"] in ("exploding_gradients", "nonfinite") and f["severity"] != "info"]
    assert blow_ups, [(f["kind"], f["first_step"]) for f in found]
    assert min(f["first_step"] for f in blow_ups) in (40, 41, 42), blow_ups
    for f in blow_ups:
        assert f["cause"] == "learning_rate_jump", f
        assert "the learning rate (learning_rate) rose 100x at step 40 (from 0.05 to 5)" in f["message"], f["message"]
        assert f["evidence"]["learning_rate_jump"]["step"] == 40


def test_a_spike_under_a_steady_learning_rate_names_no_learning_rate_cause(spike_logdir, plugin_client):
    (spike,) = _spikes(plugin_client(spike_logdir), "large")
    assert spike.get("cause") is None and "learning rate" not in spike["message"], spike


@pytest.fixture(scope="session")
def lr_jump_spike_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("lr_jump_spike")
    # 40x the learning rate for two steps, then back: the gradients and the loss spike and settle again.
    _mlp_run(root / "lr_jump_spike", {}, lr_at={40: 2.0, 42: 0.05})
    return root


UNDO_THE_JUMP = "Undo the learning-rate jump at step 40 (learning_rate from 0.05 to 2), or warm the rate up"


def test_a_spike_a_learning_rate_jump_caused_is_advised_to_undo_the_jump_not_to_check_a_batch(
        lr_jump_spike_logdir, loader_client):
    found = loader_client(lr_jump_spike_logdir).ok("/findings", run="lr_jump_spike")["findings"]
    spikes = [f for f in found if f["kind"] == "spike"]
    # The gradients' spike and the loss's, each named after the jump.
    assert {f["role"] for f in spikes} == {"gradient", None}, [(f["role"], f["message"]) for f in spikes]
    for f in spikes:
        assert f["cause"] == "learning_rate_jump", f
        assert f["advice"].startswith(UNDO_THE_JUMP), f["advice"]
        # The detector's own advice follows, for the case the jump is not the whole story: the gradients' as
        # a spike's, the loss's as a loss logged at the layers' steps (one batch's, or an average).
        own = SPIKE_ADVICE if f["role"] == "gradient" else spike.LOSS_ADVICE
        assert f["advice"].endswith("Should it persist without the jump: " + own), f["advice"]


def test_every_kind_a_learning_rate_jump_blew_up_leads_its_advice_with_the_jump(lr_jump_logdir, plugin_client):
    found = plugin_client(lr_jump_logdir).ok("/findings", run="lr_jump")["findings"]
    named = [f for f in found if f.get("cause") == "learning_rate_jump"]
    assert {f["kind"] for f in named} >= {"exploding_gradients", "nonfinite"}, named
    for f in named:
        assert f["advice"].startswith("Undo the learning-rate jump at step 40 (learning_rate from 0.05 to 5)"), f
    # A finding the jump did not cause (updates too fast from step 0) keeps its kind's advice.
    early = [f for f in found if not f.get("cause") and f["kind"] in findings.ADVICE]
    assert early and all(f["advice"] == findings.ADVICE[f["kind"]] for f in early), early


def test_the_report_prints_the_advice_that_follows_the_cause(lr_jump_spike_logdir):
    text = _text_report(lr_jump_spike_logdir)
    spike_advice = [line for line, previous in zip(text.splitlines()[1:], text.splitlines())
                    if previous.lstrip().startswith("[info] spike:")]
    assert spike_advice and all(line.strip().startswith("advice: " + UNDO_THE_JUMP) for line in spike_advice), text


# --- a real GPT-2 under Adam: its start and its residual projections ----------------------------------------

def _gpt2_run(run_dir, lr: float, steps: int = 40) -> None:
    """A transformers GPT-2 of 12 blocks (residual projections at 0.02 / sqrt(24)) trained with Adam on a
    learnable sequence, logged at each of its first 30 steps and every 5th after."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=12, n_embd=32, n_head=2, n_positions=16, vocab_size=50)
    model = transformers.GPT2LMHeadModel(config)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    handle = watch(model, str(run_dir), optimizer=opt, activations=False, every_n_steps=5)
    writer = SummaryWriter(str(run_dir))
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        x = (torch.arange(16) * 3 + torch.randint(0, 50, (4, 1), generator=g)) % 50
        loss = model(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
    writer.close()
    unwatch(handle)


@pytest.fixture(scope="session")
def gpt2_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpt2_adam")
    for lr in ("1e-3", "3e-3", "3e-2"):
        _gpt2_run(root / f"lr_{lr}", float(lr))
    return root


def _residual_projections() -> list:
    return [f"transformer.h.{i}.{part}.c_proj.weight" for i in range(12) for part in ("attn", "mlp")]


@pytest.mark.parametrize("run", ["lr_1e-3", "lr_3e-3"])
def test_adams_first_large_updates_on_small_weights_are_a_note(gpt2_logdir, plugin_client, run):
    found = plugin_client(gpt2_logdir).ok("/findings", run=run)["findings"]
    ratios = [f for f in found if f["kind"] == "update_ratio"]
    assert [f["severity"] for f in ratios] == ["info"], [(f["severity"], f["message"]) for f in ratios]
    (start,) = ratios
    assert start["evidence"]["settled_start"] is True and start["first_step"] == 0
    assert sorted(start["layers"]) == sorted(_residual_projections()), start["layers"]
    assert "only at the start of training" in start["message"]


def test_residual_projections_growing_towards_their_peers_are_no_weight_growth(gpt2_logdir, plugin_client):
    # At 3e-3 the residual projections grow from 0.0041 to about 0.019 in 40 steps, 4.7x their own start:
    # towards the 0.02 their peers start at, not past it.
    client = plugin_client(gpt2_logdir)
    grown = [f for f in client.ok("/findings", run="lr_3e-3")["findings"] if f["kind"] == "weight_growth"]
    assert grown == [], [f["message"] for f in grown]
    layer = "transformer.h.11.mlp.c_proj.weight"
    series = client.ok("/series", run="lr_3e-3", layer=layer, metric="std_rel_first", role="weight")
    rel = [v for v in series["series"]["weight"]["values"] if v is not None]
    assert max(rel) > 3, rel  # past the rule measured from its own start


def test_a_learning_rate_too_high_still_warns_on_a_gpt2(gpt2_logdir, plugin_client):
    found = plugin_client(gpt2_logdir).ok("/findings", run="lr_3e-2")["findings"]
    warned = {f["kind"]: f for f in found if f["severity"] == "warn"}
    assert {"update_ratio", "weight_growth"} <= set(warned), [(f["kind"], f["severity"]) for f in found]
    assert warned["update_ratio"].get("evidence", {}).get("settled_start") is None
    # The residual projections grow past 3x the 0.02 their growth is measured from.
    grown = warned["weight_growth"]
    assert set(_residual_projections()) & set(grown["layers"]), grown["layers"]
    scaled = [v for k, v in grown["evidence"]["layers"].items() if k in _residual_projections()]
    assert all(v["reference_std"] == 0.02 for v in scaled)
    assert "started scaled down among peers at 0.02: their std is measured from 0.02" in grown["message"]


def test_a_cause_is_not_named_on_a_finding_that_began_before_the_learning_rate_jump(lr_jump_logdir,
                                                                                     loader_client):
    """The weights update too fast from step 0, long before the learning rate rose 100x at step 40: the
    blow-ups after the jump are its, the early finding is nobody's."""
    found = loader_client(lr_jump_logdir).ok("/findings", run="lr_jump")["findings"]
    early = [f for f in found if f["severity"] != "info" and f["first_step"] < 40]
    assert [f["kind"] for f in early] == ["update_ratio"], [(f["kind"], f["first_step"]) for f in found]
    assert early[0].get("cause") is None and "learning rate" not in early[0]["message"], early[0]["message"]
    named = [f for f in found if f.get("cause")]
    assert {f["kind"] for f in named} >= {"exploding_gradients", "nonfinite"}, named
    assert all(f["cause"] == "learning_rate_jump" and f["first_step"] >= 40 for f in named), named


# --- a model that fits its data ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def converged_logdir(tmp_path_factory):
    """A linear model fitted exactly to linear targets: the loss falls from about 8 to 1e-12 within 10
    steps and its gradients with it. Run `fits` logs its loss, run `no_loss` (the same training) does not."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    root = tmp_path_factory.mktemp("converged")
    for run, log_loss in (("fits", True), ("no_loss", False)):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        handle = watch(model, str(root / run), optimizer=opt, every_n_steps=1, activations=False)
        writer = SummaryWriter(str(root / run))
        g = torch.Generator().manual_seed(1)
        x = torch.randn(1024, 8, generator=g)
        y = x @ torch.randn(8, 1, generator=g) + 0.3
        for step in range(40):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if log_loss:
                writer.add_scalar("loss", loss.item(), step)
        writer.close()
        unwatch(handle)
    return root


def test_gradients_vanishing_where_the_loss_converged_are_a_note(converged_logdir, loader_client):
    client = loader_client(converged_logdir)
    (f,) = [f for f in client.ok("/findings", run="fits")["findings"] if f["kind"] == "vanishing_gradients"]
    assert f["severity"] == "info", (f["severity"], f["message"])
    fit = f["evidence"]["fitting"]
    # Squared error's gradients shrink as the root of the loss: less than the loss, never further.
    assert fit["tag"] == "loss" and fit["explained"] and fit["loss"] * 100 <= fit["loss_start"], fit
    assert fit["loss_step"] <= f["first_step"]
    assert ("the loss fell " in f["message"] and
            f"(loss: from {fit['loss_start']:.3g}, its median to step {fit['start_until']}, to {fit['loss']:.3g} at "
            f"step {fit['loss_step']})" in f["message"]), f["message"]
    # A note colours no cell: where the vanishing rule held under it the cell is ok, naming the rule.
    hm = client.ok("/heatmap", run="fits", role="gradient", metric="mean_abs")
    held = {hm["status_names"][s] for row, rules in zip(hm["status"], hm["rules"]) for s, r in zip(row, rules)
            if r == "vanishing_gradients"}
    assert held == {"ok"}, held
    # The same training without its loss logged: nothing says it converged, and the rule stands.
    (f,) = [f for f in client.ok("/findings", run="no_loss")["findings"] if f["kind"] == "vanishing_gradients"]
    assert f["severity"] == "critical" and "fitting" not in f["evidence"], f


def test_updates_too_small_where_the_loss_converged_are_a_note(converged_logdir, loader_client):
    client = loader_client(converged_logdir)
    (f,) = [f for f in client.ok("/findings", run="fits")["findings"]
            if f["kind"] == "update_ratio" and f["evidence"]["direction"] == "too_low"]
    assert f["severity"] == "info" and "barely move" in f["message"], (f["severity"], f["message"])
    converged = f["evidence"]["converged_loss"]
    assert converged["tag"] == "loss" and converged["step"] <= f["first_step"]
    assert converged["value"] <= 1e-3 and converged["value"] * 1e4 <= converged["first_value"]
    assert "the loss has converged (loss: to" in f["message"] and "updates this small" in f["message"]
    # Without the loss logged the same updates stay a warning.
    (f,) = [f for f in client.ok("/findings", run="no_loss")["findings"]
            if f["kind"] == "update_ratio" and f["evidence"]["direction"] == "too_low"]
    assert f["severity"] == "warn" and "converged" not in f["message"], f


# --- layer names that are numbers ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def numbered_layers_logdir(tmp_path_factory):
    """An nn.Sequential, whose layers are named by their index: its ReLU (`1`) is dead from the start, as its
    Linear's biases are -10."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    root = tmp_path_factory.mktemp("numbered")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        model[0].bias.fill_(-10.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, str(root / "seq"), optimizer=opt, every_n_steps=1)
    writer = SummaryWriter(str(root / "seq"))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    for step in range(20):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
    writer.close()
    unwatch(handle)
    return root


def test_numeric_layer_names_are_quoted_and_labelled_never_read_as_counts(numbered_layers_logdir,
                                                                          loader_client):
    import re

    found = loader_client(numbered_layers_logdir).ok("/findings", run="seq")["findings"]
    (dead,) = [f for f in found if f["kind"] == "dead_units" and f["severity"] == "warn"]
    assert dead["layers"] == ["1"]
    assert dead["message"].startswith("layer `1`: activations are mostly dead"), dead["message"]
    assert any(re.match(r"\d", name) for f in found for name in f["layers"] if f is not dead), found
    for f in found:
        # Every message names its layers quoted after "layer(s)": "0.weight, 0.bias gradients" is no count.
        assert not re.match(r"\d", f["message"]), f["message"]
        for name in f["layers"][:3]:
            assert f"`{name}`" in f["message"], (name, f["message"])
        assert re.match(r"(layers? |scalars? |the loss )", f["message"]), f["message"]


# --- steps whose tensors hold NaN or Inf ------------------------------------------------------------------

@pytest.fixture(scope="session")
def nan_stretch_logdir(tmp_path_factory):
    """A torch MLP whose first layer overflows for steps 30 to 39 and is then restored: 12 of its 16
    units' weights are NaN, the 4 left are +-50 (far past their start) with a bias that silences their
    ReLU. What is finite there looks grown and dead; it is only what NaN left."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    root = tmp_path_factory.mktemp("nan_stretch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, str(root / "run"), optimizer=opt, every_n_steps=1, first_steps=0)
    writer = SummaryWriter(str(root / "run"))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    saved = None
    for step in range(60):
        if step == 30:
            saved = {k: v.clone() for k, v in model.state_dict().items()}
        if 30 <= step < 40:
            with torch.no_grad():
                w, b = model[0].weight, model[0].bias
                w[:12] = float("nan")
                w[12:] = 50.0 * torch.tensor([1.0, -1.0]).repeat(4)
                b[12:] = -1e4
        if step == 40:
            model.load_state_dict(saved)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
    writer.close()
    unwatch(handle)
    return root


def test_a_step_holding_nan_is_judged_by_the_nonfinite_rule_alone(nan_stretch_logdir, loader_client):
    client = loader_client(nan_stretch_logdir)
    found = client.ok("/findings", run="run")["findings"]
    (nonfinite,) = [f for f in found if f["kind"] == "nonfinite"]
    assert nonfinite["first_step"] == 30 and {"0.weight", "1"} <= set(nonfinite["layers"]), nonfinite
    # The leftovers (+-50 weights, silenced units) are no growth, no dead units, nothing else: no other
    # finding covers a step from 30 to 39 (the ReLU's zero fraction near 50% stays a note around them).
    late = [(f["kind"], name, spans) for f in found if f["kind"] != "nonfinite"
            for name, spans in f["covers"].items() if any(a <= 39 and b >= 30 for a, b in spans)]
    assert late == [], late
    for f in found:
        assert not f["evidence"].get("consequences"), f
    # Those cells are the nonfinite rule's.
    for role in ("weight", "activation"):
        hm = client.ok("/heatmap", run="run", role=role, metric="max_abs")
        steps = [int(s) for s in hm["steps"]]
        for row, name in enumerate(hm["layers"]):
            if name in ("0.weight", "1"):
                assert {hm["rules"][row][steps.index(s)] for s in range(30, 40)} == {"nonfinite"}, (role, name)


def test_a_cell_at_a_nan_step_says_its_statistics_are_of_the_finite_values_only(nan_stretch_logdir,
                                                                                 loader_client):
    client = loader_client(nan_stretch_logdir)
    cell = client.ok("/cell", run="run", layer="1", step=35)["roles"]["activation"]
    m = cell["metrics"]
    assert m["nonfinite"]["value"] == 12 * 256 and m["nonfinite"]["quality"] == "exact", m["nonfinite"]
    assert m["zero_fraction"]["value"] == 1 and m["zero_fraction"]["quality"] == "finite_only", m["zero_fraction"]
    assert m["max_abs"]["quality"] == "finite_only" and m["count"]["quality"] == "exact"
    assert cell["status"] == "critical" and cell["rule"] == "nonfinite"
    series = client.ok("/series", run="run", layer="1", metric="zero_fraction")["series"]["activation"]
    quality = dict(zip((int(s) for s in series["steps"]), series["quality"]))
    assert {quality[s] for s in range(30, 40)} == {"finite_only"} and quality[29] == quality[40] == "exact"
    # Away from it, nothing changes.
    assert client.ok("/cell", run="run", layer="1", step=20)["roles"]["activation"]["metrics"][
        "zero_fraction"]["quality"] == "exact"


# --- notes that find no fault ---------------------------------------------------------------------------

@pytest.mark.parametrize("danger", [None, 0.8])
def test_the_dead_units_note_and_its_advice_name_one_limit(nan_stretch_logdir, plugin_client, danger):
    """What the note calls normal and what its advice calls nothing to fix end at one line, the
    warning's own (`dead_zero_fraction`), whatever it is set to."""
    from gradhealth_plugin import config as config_lib
    from gradhealth_plugin.analysis import limits

    values = limits.thresholds()
    if danger is not None:
        values["dead_zero_fraction"] = danger
    client = plugin_client(nan_stretch_logdir, config_lib.Config(tag_rules=[], limits=values))
    (note,) = [f for f in client.ok("/findings", run="run")["findings"]
               if f["kind"] == "dead_units" and f["severity"] == "info"]
    line = f"{values['dead_zero_fraction']:.0%}"
    assert f"(normal for ReLU while under {line})" in note["message"], note["message"]
    assert note["advice"].startswith(f"Nothing to fix while the zero fraction stays under {line};"), note["advice"]


def test_a_note_that_finds_no_fault_advises_nothing_to_fix_and_when_to_act(converged_logdir, nan_stretch_logdir,
                                                                            gpt2_logdir, plugin_client):
    from gradhealth_plugin.analysis.detectors import dead_units, update_ratio, vanishing_gradients

    notes = [f for f in plugin_client(converged_logdir).ok("/findings", run="fits")["findings"]
             if f["kind"] in ("vanishing_gradients", "update_ratio")]
    notes += [f for f in plugin_client(nan_stretch_logdir).ok("/findings", run="run")["findings"]
              if f["kind"] == "dead_units"]
    notes += [f for f in plugin_client(gpt2_logdir).ok("/findings", run="lr_1e-3")["findings"]
              if f["kind"] == "update_ratio"]
    advice = {f["kind"]: f["advice"] for f in notes}
    assert [f["severity"] for f in notes] == ["info"] * 4 and len(advice) == 3, [(f["kind"], f["severity"])
                                                                                  for f in notes]
    # What would make it a fault leads the kind's own advice, which is kept for that case.
    assert advice["vanishing_gradients"] == (
        "Nothing to fix while the loss keeps falling; if it stops falling with gradients this small: "
        + vanishing_gradients.ADVICE)
    assert advice["dead_units"] == ("Nothing to fix while the zero fraction stays under 70%; if it climbs past "
                                    "that or training stalls: " + dead_units.ADVICE)
    (too_low,) = [f for f in notes if f["kind"] == "update_ratio" and f["evidence"]["direction"] == "too_low"]
    (start,) = [f for f in notes if f["kind"] == "update_ratio" and f["evidence"].get("settled_start")]
    assert too_low["advice"] == ("Nothing to fix while the loss stays this close to zero; if it rises again with "
                                 "updates this small: " + update_ratio.ADVICE), too_low
    assert start["advice"] == (
        "Nothing to fix once the ratio has settled; if it rises above 0.1 again or the weights grow: "
        + update_ratio.ADVICE)
    # Without the loss that explains them, the same gradients and updates keep the plain advice.
    for f in plugin_client(converged_logdir).ok("/findings", run="no_loss")["findings"]:
        assert not f["advice"].startswith("Nothing to fix"), f


def _row_quality(hm: dict, row: int) -> list:
    """A heatmap row's quality codes, from either layout's answer."""
    if "quality_cells" in hm:
        return hm["quality_cells"][row]
    width = len(hm["steps_text"])
    codes = base64.b64decode(hm["cells"])
    return [hm["cell_kinds"][c][1] for c in codes[row * width:(row + 1) * width]]


def test_a_heatmap_cell_whose_every_value_was_nan_reads_as_nan_never_as_no_data(nan_stretch_logdir, loader_client):
    client = loader_client(nan_stretch_logdir)
    for layout in ("rows", "compact"):
        hm = client.ok("/heatmap", run="run", role="gradient", metric="mean_abs", layout=layout)
        finite_only = hm["quality_names"].index("finite_only")
        steps = [int(s) for s in hm["steps_text"]]
        row = hm["layers"].index("2.weight")
        quality = [_row_quality(hm, row)[steps.index(s)] for s in range(30, 40)]
        if layout == "rows":
            values = [hm["values"][row][steps.index(s)] for s in range(30, 40)]
            assert values == [None] * 10, values
        # No value at all there (every value of the last layer's gradient was NaN), yet data: NaN/Inf, never
        # "no data".
        assert quality == [finite_only] * 10, (layout, quality)
    cell = client.ok("/cell", run="run", layer="2.weight", step=35)["roles"]["gradient"]["metrics"]
    assert cell["mean_abs"] == {"value": None, "quality": "finite_only"}, cell["mean_abs"]
    assert cell["nonfinite"]["value"] == cell["count"]["value"] > 0


def test_a_health_cell_of_a_nan_step_says_so_as_a_metric_cell_does(nan_stretch_logdir, loader_client):
    client = loader_client(nan_stretch_logdir)
    for layout in ("rows", "compact"):
        hm = client.ok("/heatmap", run="run", role="gradient", metric="health", layout=layout)
        finite_only = hm["quality_names"].index("finite_only")
        steps = [int(s) for s in hm["steps_text"]]
        quality = _row_quality(hm, hm["layers"].index("2.weight"))
        # The tab paints NaN/Inf apart from a critical score, as in the metric views; only there.
        assert [s for s, q in zip(steps, quality) if q == finite_only] == list(range(30, 40)), (layout, quality)
        assert hm["finite_only_cells"] is True
    # The score's chart still draws it: the series keeps its exact or estimated quality.
    s = client.ok("/series", run="run", layer="2.weight", metric="health", role="gradient")["series"]["gradient"]
    assert "finite_only" not in s["quality"]


def test_the_colour_scale_ends_leave_out_the_finite_part_of_a_nan_step(nan_stretch_logdir, loader_client):
    client = loader_client(nan_stretch_logdir)
    # The tab asks for a window of rows, whose answer carries the scale's ends over every row.
    hm = client.ok("/heatmap", run="run", role="activation", metric="max_abs", rows="0:99")
    finite_only = hm["quality_names"].index("finite_only")
    cells = [(v, q) for vs, qs in zip(hm["values"], hm["quality_cells"]) for v, q in zip(vs, qs) if v is not None]
    kept = [v for v, q in cells if q != finite_only]
    # What the +-50 weights left at the NaN steps (|x| near 1e4) would be the scale's top, squeezing every
    # other cell into one colour.
    assert max(v for v, q in cells if q == finite_only) > 1000 > max(kept)
    assert hm["value_range"]["finite"] == [min(kept), max(kept)], hm["value_range"]


def test_a_heatmap_of_exact_values_with_nan_steps_says_so_never_mixed(nan_stretch_logdir, loader_client):
    client = loader_client(nan_stretch_logdir)
    hm = client.ok("/heatmap", run="run", role="activation", metric="max_abs")
    # Exact everywhere but at steps 30 to 39, whose finite part is no estimate.
    assert (hm["quality"], hm["finite_only_cells"]) == ("exact", True), (hm["quality"], hm["finite_only_cells"])
    before = client.ok("/heatmap", run="run", role="activation", metric="max_abs", start=0, end=20)
    assert (before["quality"], before["finite_only_cells"]) == ("exact", False)


def test_the_distribution_says_how_many_values_were_nan_at_each_step(nan_stretch_logdir, loader_client):
    client = loader_client(nan_stretch_logdir)
    d = client.ok("/distribution", run="run", layer="1", role="activation")["distributions"]["activation"]
    by_step = {int(s): (bad, of) for s, bad, of in zip(d["steps_text"], d["nonfinite"], d["nonfinite_of"])}
    assert {by_step[s] for s in range(30, 40) if s in by_step} == {(12 * 256, 16 * 256)}, by_step
    assert by_step[20] == by_step[45] == (None, None)


# --- Adam at a learning rate far too high ------------------------------------------------------------------

@pytest.fixture(scope="session")
def adam_too_high_logdir(tmp_path_factory):
    """A ReLU MLP (three hidden layers of 64) classifying 2,048 points by a random hyperplane, trained with
    Adam at lr=5 on batches of 64 for 300 steps, watched every 10 steps: its loss is about 0.7 at step 0,
    millions right after, and ends far above where it began; no value turns NaN. Past its blow-up it is
    chaotic, and its figures follow the CPU's kernels (ATEN_CPU_CAPABILITY): its last tenth's median is
    12.9 (avx2, avx512) or 26.9 (default), bouncing between about 0.7 and 50, and 29 or 30 of those 30
    values lie above 0.7 under each."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradhealth_plugin.torch import unwatch, watch

    root = tmp_path_factory.mktemp("adam_too_high")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 20, generator=g)
    y = (x @ torch.randn(20, 1, generator=g) > 0).long().squeeze(1)
    torch.manual_seed(1)
    layers, width = [], 20
    for _ in range(3):
        layers += [torch.nn.Linear(width, 64), torch.nn.ReLU()]
        width = 64
    model = torch.nn.Sequential(*layers, torch.nn.Linear(64, 2))
    opt = torch.optim.Adam(model.parameters(), lr=5.0)
    handle = watch(model, str(root / "run"), optimizer=opt, every_n_steps=10)
    writer = SummaryWriter(str(root / "run"))
    for step in range(300):
        batch = torch.randint(0, 2048, (64,), generator=g)
        loss = torch.nn.functional.cross_entropy(model(x[batch]), y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("loss", loss.item(), step)
    writer.close()
    unwatch(handle)
    return root


def test_adam_at_a_learning_rate_far_too_high_is_named_and_its_loss_gets_worse(adam_too_high_logdir,
                                                                               loader_client):
    found = loader_client(adam_too_high_logdir).ok("/findings", run="run")["findings"]
    by_kind = {}
    for f in found:
        by_kind.setdefault(f["kind"], []).append(f)
    (exploding,) = by_kind["exploding_gradients"]
    assert exploding["severity"] == "critical" and exploding.get("cause") == "learning_rate_too_high", exploding
    # The loss ended far above its first value: it got worse, whatever its blown-up first tenth says, and
    # however much it bounces there (nearly all of its last tenth lies above its first value).
    (stalled,) = by_kind["no_progress"]
    assert stalled["message"].startswith("the loss gets worse"), stalled["message"]
    # Gradients that vanished beside a loss that never fell below its start are no model fitting its data.
    assert not [f for f in by_kind.get("vanishing_gradients", []) if "fitting its data" in f["message"]], found
    assert all(f.get("cause") != "dead_relu" for f in found), [(f["kind"], f.get("cause")) for f in found]


# --- A zero fraction bounded from above judges no dead units ------------------------------------------

def _dead_units(client, run):
    return [f for f in client.ok("/findings", run=run)["findings"] if f["kind"] == "dead_units"]


def _zero_fractions(client, run, layer):
    series = client.ok("/series", run=run, layer=layer, metric="zero_fraction", role="activation")
    series = series["series"]["activation"]
    return np.array(series["values"]), set(series["quality"])


def test_a_zero_fraction_above_the_line_only_as_an_upper_bound_is_not_judged_dead(
        tf_relu_near_dead_line_logdir, plugin_client):
    client = plugin_client(tf_relu_near_dead_line_logdir)
    exact, exact_quality = _zero_fractions(client, "exact", "dense_0")
    bound, bound_quality = _zero_fractions(client, "histograms", "dense_0")
    # The case itself: the same tensor under the line exactly, above it as TF2's bucket bounds it.
    assert exact_quality == {"exact"} and bound_quality == {"upper_bound"}
    assert (exact < 0.7).all() and (bound > 0.7).all(), (exact, bound)
    found = _dead_units(client, "histograms")
    assert [f["severity"] for f in found] == ["info"], found
    (note,) = found
    assert set(note["layers"]) == {"dense_0", "dense_1"}
    assert note["evidence"]["not_judged"] == "upper bound"
    assert "not judged as dead" in note["message"] and "at or near zero" in note["message"], note["message"]
    assert f"up to {note['evidence']['value']:.0%}" in note["message"], note["message"]
    assert "tf.nn.zero_fraction" in note["advice"], note["advice"]


def test_an_exact_zero_fraction_of_the_same_tensors_still_judges(tf_relu_near_dead_line_logdir, plugin_client):
    client = plugin_client(tf_relu_near_dead_line_logdir)
    by_severity = {f["severity"]: f for f in _dead_units(client, "exact")}
    assert set(by_severity) == {"warn", "info"}, by_severity
    assert by_severity["warn"]["layers"] == ["dense_1"]
    assert by_severity["info"]["layers"] == ["dense_0"]
    assert "not_judged" not in by_severity["info"]["evidence"]


def test_a_cell_whose_bound_cannot_prove_the_rule_is_ok_and_says_not_judged(
        tf_relu_near_dead_line_logdir, plugin_client):
    client = plugin_client(tf_relu_near_dead_line_logdir)
    hm = client.ok("/heatmap", run="histograms", role="activation", metric="health")
    row = hm["layers"].index("dense_1")
    assert set(hm["status"][row]) == {1}, hm["status"][row]  # ok, never warn
    assert set(hm["rules"][row]) == {"dead_units"}, hm["rules"][row]
    cell = client.ok("/cell", run="histograms", layer="dense_1", step=hm["steps"][0])["roles"]["activation"]
    assert cell["status"] == "ok" and cell["held"]["not_judged"] is True, cell
    assert cell["held"]["text"].startswith("dead units not judged at this step"), cell["held"]
    assert "upper bound" in cell["held"]["text"] and "above 0.7" in cell["held"]["text"], cell["held"]
    # The same tensor with its exact zero fraction: warn, and no "not judged".
    exact = client.ok("/cell", run="exact", layer="dense_1", step=hm["steps"][0])["roles"]["activation"]
    assert exact["status"] == "warn" and exact["held"] is None, exact
