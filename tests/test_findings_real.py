"""Real training runs that really go wrong, diagnosed through the findings route and the CLI.

`tests/training_runs.py` trains tiny TensorFlow and PyTorch models into four
runs each (healthy, exploding, vanishing, dead_relu) and records what the raw
tensors did at every step. Here every run is read back through the plugin's
``/findings`` route and through ``gradhealth report --format json``, and the
findings are held against that record: the intended kind, on the layers where
the raw tensors show it, starting no earlier than the raw onset and within two
logging intervals of it.
"""

import contextlib
import dataclasses
import io
import json
from typing import Dict, List

import numpy as np
import pytest

from gradhealth_plugin import cli
from tests import training_runs as tr
from tests.logdirs import STUCK_EPOCHS

FRAMEWORKS = ("tf", "torch")
STORIES = ("healthy", "exploding", "vanishing", "dead_relu")
BROKEN = ("exploding", "vanishing", "dead_relu")
KIND = {"exploding": "exploding_gradients", "vanishing": "vanishing_gradients", "dead_relu": "dead_units"}
# How many logging intervals a finding may start after the raw onset: the
# condition shows first at the next logged step, up to one interval later, and a
# value hovering at its limit may miss that one.
ONSET_SLACK_INTERVALS = 2
# Bucket estimates sit close to the raw values (mean |g| within 2%, the share
# below 1e-6 within 3 points in these runs), so a layer that close to a limit may
# land on either side: it must be flagged if the raw tensors cross the limit by
# this margin (relative for magnitudes, absolute for shares), and may be flagged
# only if they come within it.
SLACK = 0.05


@dataclasses.dataclass
class Diagnosed:
    logdir: str
    truths: Dict[str, tr.Truth]
    route: Dict[str, List[dict]]
    cli: Dict[str, List[dict]]


def _cli(argv) -> tuple:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="session")
def diagnosed(tmp_path_factory, plugin_client):
    """framework -> Diagnosed: each framework's four runs trained and read back once per session."""
    cache: Dict[str, Diagnosed] = {}

    def get(framework: str) -> Diagnosed:
        if framework not in cache:
            logdir = tmp_path_factory.mktemp(f"{framework}_runs")
            train = tr.train_tf if framework == "tf" else tr.train_torch
            truths = {story: train(logdir, story) for story in STORIES}
            client = plugin_client(logdir)
            route = {story: client.ok("/findings", run=story)["findings"] for story in STORIES}
            code, text = _cli(["report", str(logdir), "--format", "json"])
            assert code == 0, text
            report = json.loads(text)
            assert sorted(r["run"] for r in report["runs"]) == sorted(STORIES)
            by_run = {story: [f for f in report["findings"] if f["run"] == story] for story in STORIES}
            cache[framework] = Diagnosed(str(logdir), truths, route, by_run)
        return cache[framework]

    return get


def _key(f: dict) -> tuple:
    return f["kind"], f["severity"], tuple(f["layers"]), f["first_step"], f["last_step"]


def _the(findings: List[dict], kind: str) -> dict:
    """The one warn-or-critical finding of `kind`."""
    hits = [f for f in findings if f["kind"] == kind and f["severity"] != "info"]
    assert len(hits) == 1, (kind, [_key(f) for f in findings])
    return hits[0]


def _source(d: Diagnosed, source: str) -> Dict[str, List[dict]]:
    return d.route if source == "route" else d.cli


def _assert_onset(f: dict, lenient: Dict, strict: Dict, every: int, what: str) -> None:
    """The finding starts no earlier than the condition could first be seen and
    within two logging intervals of where it surely held; so does every layer's span."""
    assert strict["onset"] is not None, f"{what}: the raw tensors never show it"
    assert lenient["onset"] <= f["first_step"] <= strict["onset"] + ONSET_SLACK_INTERVALS * every, (
        f"{what}: finding starts at step {f['first_step']}, the raw tensors at step {strict['onset']}")
    for layer in f["layers"]:
        first = f["evidence"]["layers"][layer]["first_step"]
        assert lenient["layers"][layer] <= first, (what, layer, first, lenient["layers"][layer])
        if layer in strict["layers"]:
            assert first <= strict["layers"][layer] + ONSET_SLACK_INTERVALS * every, (
                what, layer, first, strict["layers"][layer])


def _assert_layers(f: dict, lenient: Dict, strict: Dict) -> None:
    assert set(strict["layers"]) <= set(f["layers"]) <= set(lenient["layers"]), (
        f["layers"], sorted(strict["layers"]), sorted(lenient["layers"]))


@pytest.mark.parametrize("source", ["route", "cli"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_exploding_gradients_found_where_and_when_they_exploded(diagnosed, framework, source):
    d = diagnosed(framework)
    truth = d.truths["exploding"]
    strict, lenient = truth.exploding(-SLACK), truth.exploding(SLACK)
    assert tr.EXPLODING_MAX_ABS < np.nanmax(truth.max_abs_grad()), "the run did not explode"
    f = _the(_source(d, source)["exploding"], "exploding_gradients")
    assert f["severity"] == "critical"
    _assert_layers(f, lenient, strict)
    _assert_onset(f, lenient, strict, truth.every, "exploding")
    # The explosion ends in NaN: the loss scalar, logged every step, says exactly when.
    nan_step = truth.first_nonfinite_loss()
    assert nan_step is not None and nan_step > strict["onset"]
    # One nonfinite finding for the run, listing the loss with its own first step.
    (nan,) = [g for g in _source(d, source)["exploding"] if g["kind"] == "nonfinite"]
    assert "loss" in nan["layers"] and nan["severity"] == "critical"
    assert nan["evidence"]["layers"]["loss"]["first_step"] == nan_step
    assert f.get("cause") == "learning_rate_too_high"


@pytest.mark.parametrize("source", ["route", "cli"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_vanishing_gradients_found_in_the_first_layers(diagnosed, framework, source):
    d = diagnosed(framework)
    truth = d.truths["vanishing"]
    strict, lenient = truth.vanishing(-SLACK), truth.vanishing(SLACK)
    f = _the(_source(d, source)["vanishing"], "vanishing_gradients")
    assert f["severity"] == "warn"  # the last layers still learn, so not every layer vanished
    _assert_layers(f, lenient, strict)
    # The first layers, not the last: the flagged rows are a prefix of the model's parameters.
    order = truth.param_layers
    flagged = sorted(order.index(layer) for layer in f["layers"])
    assert flagged == list(range(len(flagged))), f["layers"]
    assert order[0] in f["layers"] and order[-2] not in f["layers"] and order[-1] not in f["layers"]
    _assert_onset(f, lenient, strict, truth.every, "vanishing")
    depth = _the(_source(d, source)["vanishing"], "depth_vanishing")
    assert depth["layers"][0] == order[0]


@pytest.mark.parametrize("source", ["route", "cli"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dead_relu_found_on_the_layers_that_died(diagnosed, framework, source):
    d = diagnosed(framework)
    truth = d.truths["dead_relu"]
    # Exact zeros must be found; beyond them, only what the writer's bucket around
    # zero, which mixes zeros with small values, shows above the line.
    strict, lenient = truth.dead(), truth.dead(resolution=True)
    found = _source(d, source)["dead_relu"]
    if framework == "tf":
        # TF2's lowest bucket [0, max/30] bounds the zero share from above only: the layers past the line
        # by that bound are a note saying they are not judged, never a warning.
        assert not [f for f in found if f["kind"] == "dead_units" and f["severity"] != "info"], found
        (f,) = [f for f in found if f["kind"] == "dead_units" and f["evidence"].get("not_judged") == "upper bound"]
    else:
        f = _the(found, "dead_units")
        assert f["severity"] == "warn"
    _assert_layers(f, lenient, strict)
    _assert_onset(f, lenient, strict, truth.every, "dead units")
    alive = set(truth.activation_layers) - set(f["layers"])
    assert all(truth.logged_zero_fractions()[layer][1] <= tr.DEAD_ZERO_FRACTION for layer in alive)


@pytest.mark.parametrize("framework", [
    pytest.param("tf", marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
        "TF2's 30 equal-width buckets put the exact-zero gradients of dead units into one bucket "
        "around 0 as wide as 1/30 of the range; metrics.histogram_metrics spreads it uniformly, so "
        "under 0.1% of |g| reads below 1e-6 where 97-99.9% is exactly 0 (layer_2/kernel)"))),
    "torch",
])
def test_gradients_behind_dead_units_vanish(diagnosed, framework):
    d = diagnosed(framework)
    truth = d.truths["dead_relu"]
    strict, lenient = truth.vanishing(-SLACK), truth.vanishing(SLACK)
    assert strict["layers"], "dead units pass exact zeros back to the layers before them"
    f = _the(d.route["dead_relu"], "vanishing_gradients")
    _assert_layers(f, lenient, strict)
    _assert_onset(f, lenient, strict, truth.every, "vanishing behind dead units")
    assert f.get("cause") == "dead_relu"


# What a healthy ReLU MLP shows: 40-52% of its activations are zeros, above seed
# 004's 30% "normal" line and far below its 70% danger line. A loss spike would be
# noise worth a note, nothing more.
HEALTHY_INFO = {"dead_units", "spike"}


@pytest.mark.parametrize("source", ["route", "cli"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_healthy_run_raises_no_warning(diagnosed, framework, source):
    d = diagnosed(framework)
    truth = d.truths["healthy"]
    findings = _source(d, source)["healthy"]
    assert [_key(f) for f in findings if f["severity"] != "info"] == []
    assert {f["kind"] for f in findings} <= HEALTHY_INFO
    dead = [f for f in findings if f["kind"] == "dead_units"]
    if framework == "tf":
        # An upper bound above 30% proves no share above it: no note.
        assert dead == [], dead
    else:
        assert set(dead[0]["layers"]) == set(truth.activation_layers) and len(dead) == 1
    lows, highs = zip(*truth.logged_zero_fractions().values())
    assert tr.DEAD_INFO_ZERO_FRACTION < min(lows) and max(highs) < tr.DEAD_ZERO_FRACTION


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cli_and_route_agree(diagnosed, framework):
    d = diagnosed(framework)
    for story in STORIES:
        assert [_key(f) for f in d.cli[story]] == [_key(f) for f in d.route[story]], story


@pytest.mark.parametrize("story", STORIES)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_check_fails_exactly_the_broken_runs(diagnosed, framework, story):
    d = diagnosed(framework)
    code, text = _cli(["check", d.logdir, "--run", story])
    if framework == "tf" and story == "dead_relu":
        # TF2's histograms prove no dead units (their lowest bucket bounds the zero share from above only):
        # whatever else the run shows, no dead-units warning.
        assert "[warn] dead_units" not in text, text
        return
    assert code == (1 if story in BROKEN else 0), text
    if story in BROKEN:
        assert KIND[story] in text


# --- What histograms can prove: weights and gradients logged, no update tags ------------------------
#
# `training_runs.PROOF_STORIES` each go wrong in one way a bound on the histograms can prove (or, for
# a corrupted batch, must not overstate). Both frameworks log weight and gradient histograms with
# plain SummaryWriter / tf.summary calls and nothing else about the updates.

PROOFS = tuple(tr.PROOF_STORIES)


@dataclasses.dataclass
class Proven:
    truths: Dict[str, tr.Truth]
    findings: Dict[str, List[dict]]
    runs: Dict[str, dict]
    client: object


@pytest.fixture(scope="session")
def proven(tmp_path_factory, plugin_client):
    """framework -> Proven: each framework's proof stories trained and read back once per session."""
    cache: Dict[str, Proven] = {}

    def get(framework: str) -> Proven:
        if framework not in cache:
            logdir = tmp_path_factory.mktemp(f"{framework}_proofs")
            train = tr.train_tf if framework == "tf" else tr.train_torch
            truths = {story: train(logdir, story) for story in PROOFS}
            client = plugin_client(logdir)
            runs = {r["run"]: r for r in client.ok("/runs")["runs"]}
            found = {story: client.ok("/findings", run=story)["findings"] for story in PROOFS}
            cache[framework] = Proven(truths, found, runs, client)
        return cache[framework]

    return get


def _loud(findings: List[dict]) -> List[dict]:
    return [f for f in findings if f["severity"] != "info"]


def _kernels(truth: tr.Truth) -> List[str]:
    return [layer for layer in truth.param_layers if layer.endswith(("kernel", "weight"))]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_no_proof_story_logs_updates(proven, framework):
    p = proven(framework)
    for story in PROOFS:
        assert "update" not in p.runs[story]["roles"], story
        assert set(p.runs[story]["roles"]) >= {"weight", "gradient"}, story


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_too_high_learning_rate_shows_in_the_weights_alone(proven, framework):
    p = proven(framework)
    truth = p.truths["lr_too_high"]
    (f,) = [f for f in _loud(p.findings["lr_too_high"]) if f["kind"] == "update_ratio"]
    assert f["severity"] == "warn" and f["evidence"]["quality"] == "lower_bound"
    assert set(f["layers"]) == set(_kernels(truth))
    # The first logged interval already proves it: the norms grow several-fold in 5 steps.
    assert f["first_step"] == truth.every
    for layer, ev in f["evidence"]["layers"].items():
        assert ev["value"] > 0.1 and ev["quality"] == "lower_bound", (layer, ev)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("story", PROOFS + ("healthy",))
def test_weight_bound_never_exceeds_the_true_update_ratio(proven, diagnosed, plugin_client, framework, story):
    """The lower bound served at each logged step is at most the true mean update ratio of the steps before it."""
    if story == "healthy":
        truth, client = diagnosed(framework).truths[story], plugin_client(diagnosed(framework).logdir)
    else:
        truth, client = proven(framework).truths[story], proven(framework).client
    checked = 0
    for layer in _kernels(truth):
        series = client.ok("/series", run=story, layer=layer, metric="update_ratio")["series"]["weight"]
        steps, true = series["steps"], truth.update_ratio[layer]
        for a, b, value, quality in zip(steps[:-1], steps[1:], series["values"][1:], series["quality"][1:]):
            if value is None or not np.isfinite(true[a:b]).all():
                continue
            # A bound of 0 proves nothing and is sent as not judged; any other is a lower bound.
            assert quality == "lower_bound" or (quality == "not_judged" and value == 0), (layer, b, quality, value)
            assert value <= true[a:b].mean() * (1 + 1e-6), (layer, a, b, value, true[a:b].mean())
            checked += 1
    assert checked >= len(_kernels(truth)), checked


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_layer_left_out_of_the_optimizer_never_changes(proven, framework):
    p = proven(framework)
    truth = p.truths["frozen"]
    frozen = _kernels(truth)[1]
    assert (truth.update_ratio[frozen] == 0).all(), "the layer was trained"
    assert all((truth.update_ratio[k] > 0).all() for k in _kernels(truth) if k != frozen)
    loud = _loud(p.findings["frozen"])
    assert [(f["kind"], f["layers"]) for f in loud] == [("update_ratio", [frozen])], loud
    (f,) = loud
    assert "show no change although their gradients flow" in f["message"]
    assert (f["first_step"], f["last_step"]) == (0, tr.STORIES["frozen"].steps - truth.every)
    ev = f["evidence"]["layers"][frozen]
    assert ev["gradient_max_abs"] > 1e-3 and ev["steps_compared"] == tr.STORIES["frozen"].steps // truth.every


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_corrupted_batch_is_a_spike_not_an_explosion(proven, framework):
    p = proven(framework)
    truth, story = p.truths["corrupted_batch"], tr.STORIES["corrupted_batch"]
    at, every = story.corrupt_step, truth.every
    # What the raw gradients did: a jump past 10x at the corrupted batch, back at the next logged step.
    for layer in _kernels(truth):
        l2 = truth.stats[tr.GRADIENT][layer]["l2"]
        before = np.median(l2[at - 10 * every:at:every])
        assert l2[at] > 10 * before and l2[at + every] < 3 * before, (layer, l2[at], before)
    found = p.findings["corrupted_batch"]
    assert not [f for f in found if f["kind"] == "exploding_gradients"]
    (spike,) = [f for f in found if f["kind"] == "spike" and f["role"] == "gradient"]
    # A jump of tens of times for one logged step, under spike_warn_jump: a note, and nothing louder.
    assert spike["first_step"] == spike["last_step"] == at and spike["severity"] == "info"
    assert _loud(found) == []
    assert set(_kernels(truth)) <= set(spike["layers"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_std_one_on_fan_in_256_is_found_at_step_0(proven, framework):
    p = proven(framework)
    truth = p.truths["init_std1"]
    first, second, third = _kernels(truth)
    loud = _loud(p.findings["init_std1"])
    assert [f["kind"] for f in loud] == ["init_scale"], loud
    (f,) = loud
    # Fan-in 16 puts std 1 2.8x from He (not past 3x); fan-in 256 puts it 11x away.
    assert set(f["layers"]) == {second, third} and f["first_step"] == f["last_step"] == 0
    for layer in (second, third):
        ev = f["evidence"]["layers"][layer]
        assert ev["fan_in"] == 256 and ev["matches"] == "standard_normal" and ev["value"] == pytest.approx(1, rel=0.05)
        assert ev["he_std"] == pytest.approx(np.sqrt(2 / 256)) and "bias count" in ev["fans_from"]
    assert "standard normal" in f["message"]


def test_an_embedding_table_is_no_kernel_to_judge_by_fan_in(torch_watch_embedding_logdir, plugin_client):
    """nn.Embedding starts at N(0, 1) by design: a lookup table has no fan-in for He or Glorot to name a
    scale by. The Linear after it, re-initialised N(0, 1) on fan-in 64, is still found."""
    found = plugin_client(torch_watch_embedding_logdir).ok("/findings", run=".")["findings"]
    (f,) = [f for f in found if f["kind"] == "init_scale"]
    assert f["layers"] == ["fc.weight"] and f["severity"] == "warn", f
    assert f["evidence"]["layers"]["fc.weight"]["matches"] == "standard_normal"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_stuck_loss_is_no_progress(proven, framework):
    p = proven(framework)
    truth = p.truths["stuck"]
    tenth = len(truth.loss) // 10
    assert abs(np.median(truth.loss[-tenth:]) / np.median(truth.loss[:tenth]) - 1) < 0.02
    loud = _loud(p.findings["stuck"])
    assert [(f["kind"], f["layers"]) for f in loud] == [("no_progress", ["loss"])], loud
    assert "log them" in loud[0]["advice"]


def test_keras_sigmoid_net_stuck_at_ln2_is_no_progress(keras_stuck_sigmoid_logdir, plugin_client):
    client = plugin_client(keras_stuck_sigmoid_logdir)
    run = client.ok("/runs")["runs"][0]
    assert run["roles"] == ["weight"] and run["worst_status"] == "warn"
    loud = _loud(client.ok("/findings", run="train")["findings"])
    assert [(f["kind"], f["layers"]) for f in loud] == [("no_progress", ["epoch_loss"])], loud
    ev = loud[0]["evidence"]["layers"]["epoch_loss"]
    assert ev["points"] == STUCK_EPOCHS and ev["classes"] == 2
    assert ev["median"] == pytest.approx(np.log(2), abs=0.01)


def test_the_first_steps_of_a_healthy_torch_run_are_not_judged_for_progress(torch_early_healthy_logdir,
                                                                            plugin_client):
    """11 steps of a healthy classifier at lr 0.01, its loss falling slowly from about ln 10: a last tenth of
    one value (its median moved by any stray value), a last third of 3 steps, prove no stall; no finding, and no alarm
    from `gradhealth check`."""
    found = plugin_client(torch_early_healthy_logdir).ok("/findings", run=".")["findings"]
    assert not [f for f in found if f["kind"] == "no_progress"], found
    code, out = _cli(["check", str(torch_early_healthy_logdir)])
    assert code == 0 and "nothing at warn or above" in out, out


def test_keras_weights_first_logged_at_an_epoch_end_are_no_initialisation(keras_high_lr_validation_logdir,
                                                                         torch_epoch_start_logdir, loader_client):
    """Keras' callback writes its weight histograms at each epoch's end, just after ``epoch_loss``: its step 0
    holds the weights after one epoch of Adam at 0.5 (std about 1, Glorot's 0.2 long gone). That std is
    no initialisation: no warning, a note saying what it is. Histograms written as each epoch starts,
    before its ``epoch_loss``, show the initialisation at step 0 (N(0, 1) there): a warning as before."""
    found = loader_client(torch_epoch_start_logdir).ok("/findings", run=".")["findings"]
    (f,) = [f for f in found if f["kind"] == "init_scale"]
    assert f["severity"] == "warn" and "not_judged" not in f["evidence"], f
    assert f["evidence"]["layers"]["2.weight"]["matches"] == "standard_normal"

    found = loader_client(keras_high_lr_validation_logdir).ok("/findings", run="train")["findings"]
    (f,) = [f for f in found if f["kind"] == "init_scale"]
    assert f["severity"] == "info" and f["evidence"]["not_judged"] == "initialisation", f
    assert "sequential/dense/kernel" in f["layers"] and f["first_step"] == 0
    ev = f["evidence"]["layers"]["sequential/dense/kernel"]
    assert ev["value"] > 3 * ev["he_std"] and ev["written_after"]["tag"] == "epoch_loss"
    assert ev["written_after"]["seconds_after"] >= 0
    assert "not the initialisation" in f["message"] and "Re-initialise" not in f["advice"]


def test_keras_kernel_unchanged_beside_a_changing_bias_is_below_resolution(keras_sigmoid_at_chance_logdir,
                                                                          plugin_client):
    """Ten sigmoid layers under SGD 0.01: the first kernels' updates round away, their histograms are the
    same every epoch, while each one's bias changes. An identical histogram proves only that any change is
    smaller than it shows; with the bias moving, the layer is not frozen: no frozen-parameter advice."""
    found = plugin_client(keras_sigmoid_at_chance_logdir).ok("/findings", run="train")["findings"]
    (f,) = [f for f in found if f["kind"] == "update_ratio" and f["evidence"].get("direction") == "frozen"]
    assert "sequential/dense/kernel" in f["layers"] and f["evidence"]["below_resolution"], f
    assert f["evidence"]["layers"]["sequential/dense/kernel"]["changing_in_layer"] == ["sequential/dense/bias"]
    assert "smaller than the histogram shows" in f["message"] and "never change" not in f["message"]
    assert "passed to the optimizer" not in f["advice"] and "vanish" in f["advice"]


def test_keras_loss_settled_at_ln2_is_chance_level(keras_sigmoid_at_chance_logdir, keras_high_lr_validation_logdir,
                                                   keras_healthy_binary_logdir, loader_client):
    """The loss falls from 0.80 to ln 2 and stays there: no stall from its first tenth to its last, but a
    loss that stalled at chance level, told at the epochs it settled, a warning as the validation half's
    weaker stall is: one finding saying both. One that starts at ln 2 and falls, or jumps about it and
    settles elsewhere, is not at chance."""
    client = loader_client(keras_sigmoid_at_chance_logdir)
    found = client.ok("/findings", run="train")["findings"]
    (chance,) = [f for f in found if f["kind"] == "no_progress"]
    assert chance["severity"] == "warn" and chance["layers"] == ["epoch_loss"]
    assert chance["evidence"]["classes"] == 2 and chance["evidence"]["value"] == pytest.approx(np.log(2), rel=0.01)
    assert chance["last_step"] == 29 and chance["first_step"] <= 20  # at least its last third
    assert "ln 2" in chance["message"] and "stalled at chance level" in chance["message"]
    assert "do not improve" in chance["message"]
    stalls = [f for f in client.ok("/findings", run="validation")["findings"] if f["kind"] == "no_progress"]
    assert stalls and {f["severity"] for f in stalls} == {chance["severity"]}
    for logdir in (keras_high_lr_validation_logdir, keras_healthy_binary_logdir):
        client = loader_client(logdir)
        for run in ("train", "validation"):
            found = client.ok("/findings", run=run)["findings"]
            assert not [f for f in found if f["kind"] == "no_progress"], (logdir, run)


def test_keras_validation_stall_is_told_per_step_axis(keras_sigmoid_at_chance_logdir, plugin_client):
    """``epoch_loss`` counts epochs 0-29, ``evaluation_loss_vs_iterations`` iterations 7-210: one
    finding each, each naming its series and axis, the epoch one at its own steps, which its `axis`
    carries for the card's header; its span stays where it was written on the run's steps."""
    found = plugin_client(keras_sigmoid_at_chance_logdir).ok("/findings", run="validation")["findings"]
    stalls = {tuple(f["layers"]): f for f in found if f["kind"] == "no_progress"}
    assert set(stalls) == {("epoch_loss",), ("evaluation_loss_vs_iterations",)}
    epoch, iteration = stalls[("epoch_loss",)], stalls[("evaluation_loss_vs_iterations",)]
    assert epoch["message"].startswith("the loss does not improve (`epoch_loss`, per epoch): ")
    assert "from epoch 0 to epoch 29 (written about steps 7 to 210" in epoch["message"]
    assert iteration["message"].startswith("the loss does not improve (`evaluation_loss_vs_iterations`, per iteration): ")
    assert "from iteration 7 to iteration 210" in iteration["message"]
    # The two cards never read the same: what follows the subject differs in its steps.
    assert epoch["message"].split(": ", 1)[0] != iteration["message"].split(": ", 1)[0]
    assert epoch["axis"] == {"unit": "epoch", "other": True, "first_step": 0, "last_step": 29,
                             "first_step_text": "0", "last_step_text": "29"}
    assert (epoch["first_step"], epoch["last_step"]) == (7, 210)
    assert iteration["axis"]["unit"] == "iteration" and iteration["axis"]["other"] is False
    assert (iteration["axis"]["first_step"], iteration["axis"]["last_step"]) == (7, 210)


def test_keras_validation_spike_is_told_per_step_axis(keras_high_lr_validation_logdir, plugin_client):
    """The validation loss jumps at epoch 3, iteration 28: ``epoch_loss`` is told at its step 3, apart
    from ``evaluation_loss_vs_iterations`` at step 28, and an epoch's mean gets no per-batch advice."""
    found = plugin_client(keras_high_lr_validation_logdir).ok("/findings", run="validation")["findings"]
    spikes = [f for f in found if f["kind"] == "spike"]
    assert spikes and all(len(f["layers"]) == 1 for f in spikes)
    epoch = [f for f in spikes if f["layers"] == ["epoch_loss"]]
    assert epoch and all(f["message"].startswith("scalar `epoch_loss`, per epoch: ") for f in epoch)
    assert "at epoch 3 (written about step 28" in epoch[0]["message"] and epoch[0]["evidence"]["own_first_step"] == 3
    assert epoch[0]["axis"]["unit"] == "epoch" and epoch[0]["axis"]["first_step"] == 3
    assert all("check that batch" not in f["advice"] and "epoch's average" in f["advice"] for f in epoch)
    iterations = [f for f in spikes if f["layers"] == ["evaluation_loss_vs_iterations"]]
    assert iterations and iterations[0]["first_step"] == 28 and "per epoch" not in iterations[0]["message"]
    # Logged at the layers' axis, nothing in the data tells one batch from an average: both are said.
    assert "If each value is one batch's loss" in iterations[0]["advice"]


def test_report_folds_spikes_only_with_the_same_advice(keras_high_lr_validation_logdir):
    """The report folds an epoch mean's repeats apart from an iteration series', at their own steps."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["report", str(keras_high_lr_validation_logdir / "validation")])
    folded = [line for line in out.getvalue().splitlines() if "more like it" in line]
    assert any("more like it at epoch 5, in `epoch_loss`" in line for line in folded), folded
    assert not any("`epoch_loss`" in line and "evaluation_loss" in line for line in folded), folded


def test_report_tells_each_stall_in_its_own_axis(keras_sigmoid_at_chance_logdir):
    """The report's two validation stalls read apart, each naming its series and axis, and its JSON
    carries the epoch one's own steps; the train half's loss settled at chance is a warning there too."""
    text, as_json = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text):
        cli.main(["report", str(keras_sigmoid_at_chance_logdir)])
    with contextlib.redirect_stdout(as_json):
        cli.main(["report", str(keras_sigmoid_at_chance_logdir), "--format", "json"])
    stalls = [line for line in text.getvalue().splitlines() if "] no_progress:" in line]
    assert any(line.startswith("  [warn] no_progress: the loss stalled at chance level (`epoch_loss`, per epoch)")
               for line in stalls), stalls
    assert any("(`epoch_loss`, per epoch): " in line and "from epoch 0 to epoch 29" in line for line in stalls)
    assert any("(`evaluation_loss_vs_iterations`, per iteration): " in line for line in stalls), stalls
    assert len(set(stalls)) == len(stalls) == 3
    (epoch,) = [f for f in json.loads(as_json.getvalue())["findings"]
                if f["run"] == "validation" and f["kind"] == "no_progress" and f["layers"] == ["epoch_loss"]]
    assert (epoch["axis"]["unit"], epoch["axis"]["first_step"], epoch["axis"]["last_step"]) == ("epoch", 0, 29)


def test_findings_after_a_collapse_are_its_consequences(proven):
    """A batch of NaN inputs turns the first kernel NaN for good; a NaN guard hides it from the layers
    after it, which TF's histograms keep showing: what they show then follows from the collapse.

    (PyTorch's SummaryWriter refuses NaN histograms: its run never shows the collapse itself.)
    """
    p = proven("tf")
    truth, at = p.truths["nan_batch"], tr.STORIES["nan_batch"].corrupt_step
    # What the raw tensors did: the second kernel's gradient is exactly 0 once the first layer is NaN.
    assert (truth.stats[tr.GRADIENT]["layer_1/kernel"]["max_abs"][at + 1:] == 0).all()
    found = p.findings["nan_batch"]
    collapses = [f for f in found if f["kind"] == "nonfinite"]
    assert collapses and all(f["evidence"]["collapse_step"] == at for f in collapses)
    assert [_key(f) for f in _loud(found) if f["kind"] != "nonfinite"] == []
    (first,) = [f for f in collapses if "consequences" in f["evidence"]]
    assert first["first_step"] == at
    kinds = {c["kind"] for c in first["evidence"]["consequences"]}
    assert "vanishing_gradients" in kinds and all(c["first_step"] >= at for c in first["evidence"]["consequences"])
    assert "follow from these values" in first["message"]


# The healthy runs the libraries write for the other tests (tests/logdirs.py): a few steps each of
# small models trained as their users train them. None may earn a warning. (Not torch_custom_prefix:
# without a tag rule its ``mygrads/<name>`` gradients read as weights, see test_conventions.)
HEALTHY_LOGDIRS = ("tf2_custom_loop_logdir", "tf2_module_loop_logdir", "seed002_logdir", "keras_fit_logdir",
                   "torch_prefixes_logdir", "torch_dot_grad_logdir", "tensorboardx_logdir", "lightning_logdir")


# The PyTorch ones put BatchNorm after fc1, which cancels fc1's bias: its gradient is exactly 0, and
# saying so is right.
BIAS_BEFORE_BATCHNORM = ("vanishing_gradients", ("fc1.bias",))


@pytest.mark.parametrize("fixture", HEALTHY_LOGDIRS)
def test_healthy_library_runs_raise_no_warning(request, plugin_client, fixture):
    client = plugin_client(request.getfixturevalue(fixture))
    for run in client.ok("/runs")["runs"]:
        loud = [f for f in _loud(client.ok("/findings", run=run["run"])["findings"])
                if (f["kind"], tuple(f["layers"])) != BIAS_BEFORE_BATCHNORM]
        assert loud == [], (fixture, run["run"], [_key(f) for f in loud])


# --- init_scale on a real GPT-2 --------------------------------------------------------------------

def _gpt2_run(run_dir, c_fc_scale: float = 1.0) -> None:
    """A tiny transformers GPT-2 at its own initialisation, watched for a few steps."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=4, n_embd=32, n_head=2, n_positions=16, vocab_size=50)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        model.transformer.h[1].mlp.c_fc.weight.mul_(c_fc_scale)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle = watch(model, str(run_dir), optimizer=opt)
    x = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(0))
    for _ in range(4):
        loss = model(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    unwatch(handle)


def test_gpt2_standard_initialisation_is_no_init_scale_finding(tmp_path, plugin_client):
    # N(0, 0.02) (initializer_range) and the residual projections' 0.02 / sqrt(2 x 4 layers) are GPT-2's own.
    _gpt2_run(tmp_path / "gpt2")
    _gpt2_run(tmp_path / "gpt2_c_fc_halved", c_fc_scale=0.5)
    client = plugin_client(tmp_path)
    found = client.ok("/findings", run="gpt2")["findings"]
    assert [f for f in found if f["kind"] == "init_scale"] == []
    # A weight at half GPT-2's std is still judged: std 0.01 is no known initialisation for it.
    halved = [f for f in client.ok("/findings", run="gpt2_c_fc_halved")["findings"] if f["kind"] == "init_scale"]
    assert len(halved) == 1 and halved[0]["layers"] == ["transformer.h.1.mlp.c_fc.weight"], halved
    assert halved[0]["evidence"]["layers"]["transformer.h.1.mlp.c_fc.weight"]["matches"] is None


# --- bimodal weights: two clusters, not a flat histogram's counting noise ---------------------------

@pytest.mark.parametrize("fixture,run,two_clusters", [
    ("keras_uniform_and_two_clusters_logdir", "train", "sequential/dense/kernel"),
    ("torch_uniform_and_two_clusters_logdir", ".", "0.weight")])
def test_bimodal_weights_are_two_clusters_not_a_noisy_uniform(request, plugin_client, fixture, run, two_clusters):
    client = plugin_client(request.getfixturevalue(fixture))
    found = [f for f in client.ok("/findings", run=run)["findings"] if f["kind"] == "bimodal_weights"]
    # Only the kernel of two clusters: the uniform ones (1024 weights in 30 noisy buckets) have no valley.
    assert [f["layers"] for f in found] == [[two_clusters]], [_key(f) for f in found]


def test_zeros_are_normal_for_a_relu_only_where_the_layer_never_goes_negative(torch_gelu_dropout_logdir,
                                                                              plugin_client):
    """Half of a ReLU's outputs are 0 as a rule; a GELU's after dropout are half 0 too, but not for that reason."""
    client = plugin_client(torch_gelu_dropout_logdir)
    zeros = [f for f in client.ok("/findings", run=".")["findings"] if f["kind"] == "dead_units"]
    assert all(f["severity"] == "info" for f in zeros), zeros
    relu = [f for f in zeros if "normal for ReLU" in f["message"]]
    signed = [f for f in zeros if "taking negative values too" in f["message"]]
    assert [f["layers"] for f in relu] == [["relu2"]], zeros
    assert [f["layers"] for f in signed] == [["drop1"]], zeros
    assert "dropout" in signed[0]["advice"] and "normal" not in signed[0]["message"]


def test_an_attention_key_bias_the_loss_ignores_is_a_note_not_vanishing(torch_attention_key_bias_logdir,
                                                                        plugin_client):
    """Softmax is blind to what the key bias adds to every key alike: its gradient is rounding noise from
    the first step while its own kernel gets gradients, so depth is not the cause."""
    client = plugin_client(torch_attention_key_bias_logdir)
    vanishing = [f for f in client.ok("/findings", run=".")["findings"] if f["kind"] == "vanishing_gradients"]
    assert [(f["layers"], f["severity"]) for f in vanishing] == [(["key.bias"], "info")], vanishing
    # Its own kernel gets gradients a thousand times its own and more: the signal reached the module.
    assert vanishing[0]["evidence"]["signal_reaches"] == {"key.bias": "key.weight"}
    assert "softmax" in vanishing[0]["advice"] and "bias=False" in vanishing[0]["advice"]
    cells = client.ok("/heatmap", run=".", role="gradient")
    row = cells["layers"].index("key.bias")
    assert set(cells["status"][row]) == {1}, cells["status"][row]  # ok at every step


def test_a_batchnorm_in_a_sequential_is_known_by_its_values(torch_sequential_conv_bn_logdir, plugin_client):
    """``1.weight`` says nothing of the BatchNorm it is; its first logged values, all above zero around one,
    do: a scale, whose spread is no kernel's growth. The conv bias BatchNorm subtracts away gets only
    rounding for gradient while its own kernel gets gradients: a note saying why, not vanishing."""
    found = plugin_client(torch_sequential_conv_bn_logdir).ok("/findings", run=".")["findings"]
    assert not [f for f in found if "1.weight" in f["layers"] and f["severity"] != "info"], found
    assert [f["layers"] for f in found if f["kind"] == "weight_growth"] == [["4.weight"]], found
    (vanishing,) = [f for f in found if f["kind"] == "vanishing_gradients"]
    assert vanishing["layers"] == ["0.bias"] and vanishing["severity"] == "info", vanishing
    assert vanishing["evidence"]["signal_reaches"] == {"0.bias": "0.weight"}
    assert "own kernel gets gradients" in vanishing["message"] and "bias=False" in vanishing["advice"]


def test_keras_conv_biases_before_batchnorm_are_cancelled_not_vanishing(keras_conv_batchnorm_logdir,
                                                                         plugin_client):
    """Keras' Conv2D keeps its bias by default; the BatchNormalization after it subtracts the bias away."""
    client = plugin_client(keras_conv_batchnorm_logdir)
    (run,) = [r["run"] for r in client.ok("/runs")["runs"]]
    vanishing = [f for f in client.ok("/findings", run=run)["findings"] if f["kind"] == "vanishing_gradients"]
    assert [(f["severity"], sorted(f["evidence"].get("signal_reaches", {}).items())) for f in vanishing] == [
        ("info", [("sequential/conv2d/bias", "sequential/conv2d/kernel"),
                  ("sequential/conv2d_1/bias", "sequential/conv2d_1/kernel")])], vanishing
