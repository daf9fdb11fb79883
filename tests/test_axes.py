"""Step axes of a row's sources (`reading.axes`), and rows fed by writers that count steps differently.

A Keras-style writer logs histograms per epoch (step = epoch) beside
statistics logged per iteration: their step N are different moments, told
apart by wall time. Such a histogram must neither add its numbers to the
row's steps nor be shown as if it were taken at the row's step.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradhealth_plugin.reading import axes
from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

ITERS_PER_EPOCH = 50
SECONDS_PER_ITER = 0.2
EPOCHS = 6


def _iterations(every=1):
    steps = np.arange(0, EPOCHS * ITERS_PER_EPOCH, every)
    return steps, 1000.0 + steps * SECONDS_PER_ITER


def _epochs():
    """Epoch e's histogram is written as epoch e ends: after iteration (e + 1) * N - 1."""
    epochs = np.arange(EPOCHS)
    return epochs, 1000.0 + ((epochs + 1) * ITERS_PER_EPOCH - 1) * SECONDS_PER_ITER + 0.05


def test_per_epoch_steps_are_another_axis_than_per_iteration_steps():
    steps, walls = _iterations()
    assert axes.same_step_axis(steps, walls, *_epochs()) is False


def test_per_epoch_steps_against_sparse_iteration_logging():
    steps, walls = _iterations(every=10)
    assert axes.same_step_axis(steps, walls, *_epochs()) is False


def test_steps_written_at_the_same_moments_share_an_axis():
    steps, walls = _iterations()
    rng = np.random.default_rng(0)
    other = steps[::7]
    jitter = rng.uniform(-0.05, 0.05, len(other))  # another writer, a few ms off within the same step
    assert axes.same_step_axis(steps, walls, other, 1000.0 + other * SECONDS_PER_ITER + jitter) is True


def test_one_step_per_epoch_is_the_same_axis_as_per_epoch():
    """With one iteration per epoch the two counts agree, and the rule says so."""
    epochs, walls = _epochs()
    assert axes.same_step_axis(epochs, walls, epochs, walls + 0.01) is True


@pytest.mark.parametrize("steps, walls, other, other_walls", [
    ([5], [1.0], [5], [1.0]),  # one reference step: no pace to compare with
    ([0, 10], [1.0, 2.0], [20, 30], [5.0, 6.0]),  # no other step inside the reference's range
    ([0, 10], [1.0, 1.0], [5], [1.0]),  # the reference's steps took no time
    ([0, 10], [np.nan, np.nan], [5], [1.0]),  # no wall times
])
def test_cannot_tell_without_evidence(steps, walls, other, other_walls):
    assert axes.same_step_axis(np.array(steps), np.array(walls), np.array(other), np.array(other_walls)) is None


def test_nearest_in_time():
    assert axes.nearest_in_time(np.array([1.0, 5.0, 9.0]), 6.0) == 1
    assert axes.nearest_in_time(np.array([1.0, 5.0, 9.0]), 7.0) == 1  # a tie goes to the earlier
    assert axes.nearest_in_time(np.array([]), 7.0) is None
    assert axes.nearest_in_time(np.array([1.0]), float("nan")) is None


# --------------------------------------------------------------------------- through the routes

LAYER = "layer_0"


@pytest.fixture(scope="module")
def two_axes_logdir(tmp_path_factory):
    """Per-iteration statistic scalars (``grad_mean/layer_0``) beside per-epoch histograms
    (``grad_hist/layer_0``), as a loop logging both at different rates writes them."""
    root = tmp_path_factory.mktemp("two_axes")
    rng = np.random.default_rng(3)
    steps, walls = _iterations(every=5)
    epochs, epoch_walls = _epochs()
    events = [event(int(s), scalar_value(f"grad_mean/{LAYER}", 1e-3), wall_time=float(w))
              for s, w in zip(steps, walls)]
    # Epoch e's histogram is far wider than the per-iteration statistics say: if its bucket
    # estimates were merged under the iteration steps, the row would show them.
    events += [event(int(e), hist_value(f"grad_hist/{LAYER}", normal_buckets(rng, scale=10.0 * (e + 1))),
                     wall_time=float(w)) for e, w in zip(epochs, epoch_walls)]
    events.sort(key=lambda e: e.wall_time)
    write_run(root / "run", events)
    return root


def test_a_histogram_on_another_axis_adds_nothing_to_the_row(two_axes_logdir, loader_client):
    client = loader_client(two_axes_logdir)
    steps, _ = _iterations(every=5)
    series = client.ok("/series", run="run", layer=LAYER, metric="mean_abs", role="gradient")["series"]["gradient"]
    assert series["steps"] == steps.tolist()
    assert series["values"] == pytest.approx([1e-3] * len(steps))
    # The histogram's bucket estimates (std, zero fraction, ...) are not put under iteration steps.
    std = client.ok("/series", run="run", layer=LAYER, metric="std", role="gradient")["series"]["gradient"]
    assert all(v is None for v in std["values"])


def test_a_cell_shows_the_histogram_written_nearest_in_time_with_its_own_step(two_axes_logdir, loader_client):
    client = loader_client(two_axes_logdir)
    epochs, epoch_walls = _epochs()
    # Iteration 3 is in epoch 0; the nearest histogram in time is epoch 0's (written as it ended).
    # Iteration 295 is in epoch 5, the last: epoch 5's. Iteration 105, early in epoch 2: epoch 1's.
    for step, epoch in ((5, 0), (295, 5), (105, 1), (145, 2)):
        role = client.ok("/cell", run="run", layer=LAYER, step=step, role="gradient")["roles"]["gradient"]
        assert role["histogram_axis"] == "other" and role["histogram_tag"] == f"grad_hist/{LAYER}"
        assert role["histogram_step"] == epoch and role["histogram_step_text"] == str(epoch), step
        assert role["histogram_seconds_from_step"] == pytest.approx(
            epoch_walls[epoch] - (1000.0 + step * SECONDS_PER_ITER), abs=1e-3)
        assert role["histogram"], "the nearest histogram is shown"
        # Epoch 5's histogram is about 60 wide; iteration 5's cell must not show it as step 5's.
        widths = [b[1] - b[0] for b in role["histogram"]]
        assert sum(widths) < 40 * 10.0 * (epoch + 1)


def test_rows_on_one_axis_show_the_histogram_at_their_step(tmp_path, loader_client):
    """The common case stays as it was: histogram and statistics logged in the same loop."""
    rng = np.random.default_rng(4)
    steps, walls = _iterations(every=5)
    write_run(tmp_path / "run", [
        event(int(s), scalar_value(f"grad_mean/{LAYER}", 1e-3), hist_value(f"grad_hist/{LAYER}", normal_buckets(rng)),
              wall_time=float(w)) for s, w in zip(steps, walls)])
    client = loader_client(tmp_path)
    role = client.ok("/cell", run="run", layer=LAYER, step=25, role="gradient")["roles"]["gradient"]
    assert role["histogram_axis"] == "row" and role["histogram_step"] == 25
    assert role["histogram_seconds_from_step"] is None
    std = client.ok("/series", run="run", layer=LAYER, metric="std", role="gradient")["series"]["gradient"]
    assert all(v is not None for v in std["values"]), "bucket estimates fill the row on the same axis"


def test_a_step_logged_several_times_is_one_step_its_last_sample(tmp_path, loader_client):
    """A writer that never advances its step (every epoch at step 51): one value per step, the last
    written, in the table, the heatmap and the cell alike, under both loaders."""
    rng = np.random.default_rng(5)
    scales = [0.1, 0.2, 0.3, 0.4, 0.5]
    buckets = [normal_buckets(rng, scale) for scale in scales]
    write_run(tmp_path / "run", [event(51, hist_value("weights/dense/kernel", b), wall_time=1000.0 + i)
                                 for i, b in enumerate(buckets)]
              + [event(52, hist_value("weights/dense/kernel", normal_buckets(rng, 0.1)), wall_time=1010.0)])
    client = loader_client(tmp_path)
    series = client.ok("/series", run="run", layer="dense/kernel", metric="std")["series"]["weight"]
    assert series["steps"] == [51, 52]
    last = client.ok("/cell", run="run", layer="dense/kernel", step=51)["roles"]["weight"]
    assert last["histogram"] == [list(map(float, b)) for b in buckets[-1] if b[2] > 0 and b[1] > b[0]]
    assert series["values"][0] == pytest.approx(last["metrics"]["std"]["value"])
    assert 0.3 < series["values"][0] < 0.7  # the last sample's spread (0.5), not the first's (0.1)


def test_per_epoch_steps_with_a_slow_second_epoch():
    """Two epochs of four iterations, logged every third: epoch 0's histogram is written as iteration 3
    is, so it alone agrees in time with the per-iteration count; epoch 1's does not. One agreeing point
    of two does not make one axis, however long the second epoch's steps took."""
    for slow in (1.0, 10.0, 100.0):
        iter_walls = np.cumsum([0.0, 1.0, 1.0, 1.0] + [slow] * 4)  # iterations 0..7
        steps = np.array([0, 3, 6])
        epochs = np.array([0, 1])
        epoch_walls = iter_walls[[3, 7]] + 0.01
        assert axes.same_step_axis(steps, iter_walls[steps], epochs, epoch_walls) is False, slow


# --------------------------------------------------------------------------- run-level scalars on another axis

def test_a_series_written_during_the_reference_at_steps_outside_it_is_another_axis():
    """Keras' validation run: epoch 1 written between iterations 28 and 56 proves another axis, though
    no epoch step falls in the iterations' range."""
    steps, walls = np.array([28, 56, 84]), np.array([2.78, 3.06, 3.41])
    assert axes.same_step_axis(steps, walls, np.array([0, 1, 2]), np.array([2.81, 3.11, 3.44])) is False
    # Written only at the reference's ends, within half its pace: too close to tell.
    assert axes.same_step_axis(steps, walls, np.array([0]), np.array([2.80])) is None


def test_nearest_steps():
    steps, walls = np.array([0, 10, 20]), np.array([1.0, 5.0, 9.0])
    out = axes.nearest_steps(steps, walls, np.array([0.0, 4.0, 7.0, 100.0]))
    assert out.tolist() == [0, 10, 10, 20]  # 7.0 is as near 5.0 as 9.0: the earlier


NAN_FROM = 20
EPOCH_ITERS = 25
RUN_ITERS = 100


def _epoch_walls(epochs):
    """Epoch e's scalar is written as epoch e ends, just after iteration (e + 1) * N - 1."""
    return 1000.0 + ((np.asarray(epochs) + 1) * EPOCH_ITERS - 1) * SECONDS_PER_ITER + 0.05


@pytest.fixture(scope="module")
def epoch_loss_logdir(tmp_path_factory):
    """`train`: two layers' gradient histograms every iteration, NaN from iteration NAN_FROM on, and
    a per-epoch `epoch_loss` (step = epoch) that is NaN from its step 0, as Keras' callback writes it.
    `validation`: no layers, a per-iteration `evaluation_loss_vs_iterations` at each epoch's end and the
    per-epoch `epoch_loss`, both NaN throughout."""
    root = tmp_path_factory.mktemp("epoch_loss")
    rng = np.random.default_rng(5)
    nan = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    events = [event(s, *(hist_value(f"gradients/dense_{i}/kernel", nan if s >= NAN_FROM else normal_buckets(rng))
                         for i in range(2)), wall_time=1000.0 + s * SECONDS_PER_ITER) for s in range(RUN_ITERS)]
    epochs = np.arange(RUN_ITERS // EPOCH_ITERS)
    events += [event(int(e), scalar_value("epoch_loss", np.nan), wall_time=float(w))
               for e, w in zip(epochs, _epoch_walls(epochs))]
    events.sort(key=lambda e: e.wall_time)
    write_run(root / "train", events)
    iterations = (epochs + 1) * EPOCH_ITERS
    write_run(root / "validation", sorted(
        [event(int(s), scalar_value("evaluation_loss_vs_iterations", np.nan), wall_time=float(w) - 0.02)
         for s, w in zip(iterations, _epoch_walls(epochs))]
        + [event(int(e), scalar_value("epoch_loss", np.nan), wall_time=float(w))
           for e, w in zip(epochs, _epoch_walls(epochs))], key=lambda e: e.wall_time))
    return root


def _nonfinite(client, run):
    """The run's nonfinite findings by their step axis' unit ("step" for the layers' plain steps)."""
    found = [f for f in client.ok("/findings", run=run)["findings"] if f["kind"] == "nonfinite"]
    by_unit = {(f.get("axis") or {}).get("unit", "step"): f for f in found}
    assert len(by_unit) == len(found), found
    return by_unit


def test_a_per_epoch_scalar_never_sets_a_training_step(epoch_loss_logdir, loader_client):
    """The layers turn NaN at iteration 20; epoch_loss is NaN from its epoch 0, written at iteration 24:
    the layers' finding begins at 20, epoch_loss's is apart, told in epochs, placed at 24, and epoch 0 is
    nowhere read as step 0."""
    client = loader_client(epoch_loss_logdir)
    found = _nonfinite(client, "train")
    assert set(found) == {"step", "epoch"}
    f, epoch = found["step"], found["epoch"]
    assert "epoch_loss" not in f["layers"] and epoch["layers"] == ["epoch_loss"]
    assert f["first_step"] == NAN_FROM and f["last_step"] == RUN_ITERS - 1
    assert f"from step {NAN_FROM} to step {RUN_ITERS - 1}" in f["message"]
    assert epoch["message"].startswith("scalar `epoch_loss`, per epoch, is NaN or Inf from epoch 0 to epoch 3 "
                                       "(written about steps 24 to ")
    assert epoch["axis"]["other"] and (epoch["axis"]["first_step"], epoch["axis"]["last_step"]) == (0, 3)
    assert f["evidence"]["collapse_step"] == epoch["evidence"]["collapse_step"] == NAN_FROM
    loss = epoch["evidence"]["layers"]["epoch_loss"]
    assert loss["axis"] == "other" and loss["own_first_step"] == 0 and loss["own_last_step"] == 3
    assert epoch["first_step"] == loss["first_step"] == 24  # written nearest iteration 24 (epoch 0 ends after it)
    assert all(a >= NAN_FROM for g in (f, epoch) for spans in g["covers"].values() for a, _ in spans)
    # The track says the series counts steps otherwise than the heatmap.
    series = {s["tag"]: s for s in client.ok("/track", run="train")["series"]}
    assert series["epoch_loss"]["axis"] == "other"


def test_a_run_without_layers_reads_its_scalars_on_its_finest_axis(epoch_loss_logdir, loader_client):
    """Keras' validation run: evaluation_loss_vs_iterations counts iterations (25, 50, ...), epoch_loss
    epochs (0, 1, ...): one finding each, the iteration one from iteration 25, the epoch one placed there
    too, never at epoch 0."""
    found = _nonfinite(loader_client(epoch_loss_logdir), "validation")
    assert set(found) == {"iteration", "epoch"}
    f, epoch = found["iteration"], found["epoch"]
    assert f["layers"] == ["evaluation_loss_vs_iterations"] and epoch["layers"] == ["epoch_loss"]
    assert f["first_step"] == EPOCH_ITERS and f["last_step"] == RUN_ITERS
    assert epoch["evidence"]["layers"]["epoch_loss"]["axis"] == "other"
    assert epoch["covers"]["epoch_loss"] == [[EPOCH_ITERS, RUN_ITERS]]
    assert "from epoch 0 to epoch 3" in epoch["message"]


def test_a_loss_written_after_its_steps_histograms_shares_their_axis():
    """One loop: each step's histograms, then its loss, written most of a step later (the next step's
    histograms follow at once). The loss counts the histograms' steps."""
    steps, walls = _iterations()
    assert axes.same_step_axis(steps, walls, steps, walls + 0.8 * SECONDS_PER_ITER) is True


EPOCHS_LONG = 30
ITERS_LONG = 10
SPIKE_EPOCH = 15


@pytest.fixture(scope="module")
def flat_epoch_loss_logdir(tmp_path_factory):
    """Healthy per-iteration gradient histograms, and a per-epoch loss that never improves, 5x at one epoch."""
    root = tmp_path_factory.mktemp("flat_epoch_loss")
    rng = np.random.default_rng(6)
    steps = np.arange(EPOCHS_LONG * ITERS_LONG)
    events = [event(int(s), hist_value("gradients/dense_0/kernel", normal_buckets(rng)),
                    wall_time=1000.0 + s * SECONDS_PER_ITER) for s in steps]
    loss = 1.0 + 0.002 * rng.standard_normal(EPOCHS_LONG)
    loss[SPIKE_EPOCH] = 5.0
    events += [event(e, scalar_value("epoch_loss", loss[e]),
                     wall_time=1000.0 + ((e + 1) * ITERS_LONG - 1) * SECONDS_PER_ITER + 0.05) for e in range(EPOCHS_LONG)]
    events.sort(key=lambda e: e.wall_time)
    write_run(root / "run", events)
    return root


def test_a_per_epoch_loss_places_its_stall_and_spike_at_the_layers_steps(flat_epoch_loss_logdir, loader_client):
    """Epoch e is written as iteration (e + 1) * 10 - 1 ends: no_progress spans iterations 9 to 299,
    the spike is at iteration 159, not at step 15; the stall says its own epochs."""
    found = {f["kind"]: f for f in loader_client(flat_epoch_loss_logdir).ok("/findings", run="run")["findings"]}
    stall = found["no_progress"]
    assert (stall["first_step"], stall["last_step"]) == (ITERS_LONG - 1, EPOCHS_LONG * ITERS_LONG - 1)
    own = stall["evidence"]["layers"]["epoch_loss"]
    assert own["axis"] == "other" and (own["own_first_step"], own["own_last_step"]) == (0, EPOCHS_LONG - 1)
    spike = found["spike"]
    assert spike["layers"] == ["epoch_loss"]
    assert spike["first_step"] == spike["last_step"] == (SPIKE_EPOCH + 1) * ITERS_LONG - 1
    assert spike["covers"] == {"epoch_loss": [[spike["first_step"]] * 2]}


@pytest.fixture(scope="module")
def two_axis_loss_spike_logdir(tmp_path_factory):
    """Healthy per-iteration gradient histograms and ``loss``, and a per-epoch ``epoch_loss`` that jumps at
    epochs 15 and 16, while the per-iteration loss jumps at iterations 159 and 169, when they end."""
    root = tmp_path_factory.mktemp("two_axis_loss_spike")
    rng = np.random.default_rng(7)
    steps = np.arange(EPOCHS_LONG * ITERS_LONG)
    loss = 1.0 + 0.002 * rng.standard_normal(len(steps))
    epoch_loss = 1.0 + 0.002 * rng.standard_normal(EPOCHS_LONG)
    for e in (SPIKE_EPOCH, SPIKE_EPOCH + 1):
        epoch_loss[e] = 5.0
        loss[(e + 1) * ITERS_LONG - 1] = 5.0
    events = [event(int(s), hist_value("gradients/dense_0/kernel", normal_buckets(rng)),
                    wall_time=1000.0 + s * SECONDS_PER_ITER) for s in steps]
    events += [event(int(s), scalar_value("loss", loss[s]), wall_time=1000.0 + s * SECONDS_PER_ITER + 0.01)
               for s in steps]
    events += [event(e, scalar_value("epoch_loss", epoch_loss[e]),
                     wall_time=1000.0 + ((e + 1) * ITERS_LONG - 1) * SECONDS_PER_ITER + 0.05) for e in range(EPOCHS_LONG)]
    events.sort(key=lambda e: e.wall_time)
    write_run(root / "run", events)
    return root


def test_loss_spikes_on_two_step_axes_never_share_a_finding(two_axis_loss_spike_logdir, loader_client):
    """``loss`` (iterations) and ``epoch_loss`` (epochs) jump at the same moments: one finding each, the
    epoch one at its own steps 15 and 16, and only the per-iteration one may be one batch's."""
    found = loader_client(two_axis_loss_spike_logdir).ok("/findings", run="run")["findings"]
    spikes = [f for f in found if f["kind"] == "spike"]
    assert sorted(tuple(f["layers"]) for f in spikes) == [("epoch_loss",), ("loss",), ("loss",)]
    (epoch,) = [f for f in spikes if f["layers"] == ["epoch_loss"]]
    assert epoch["message"].startswith("scalar `epoch_loss`, per epoch: ")
    assert "from epoch 15 to epoch 16 (written about steps 159 to 169 of the layers" in epoch["message"]
    assert (epoch["axis"]["first_step"], epoch["axis"]["last_step"]) == (15, 16)
    assert "one batch" not in epoch["advice"]
    assert all("If each value is one batch's loss" in f["advice"] for f in spikes if f["layers"] == ["loss"])


def test_a_loss_written_after_its_steps_histograms_on_a_busy_machine_shares_their_axis():
    """100 steps of 10 ms, the loss written 8 ms into each; on a busy machine the scheduler holds up
    three in ten of the histograms' writes by 25 ms (so the gaps after them are long too) and four in
    ten of the losses'."""
    rng = np.random.default_rng(3)
    delays = np.where(rng.random(100) < 0.3, 0.025, 0.0)
    hist_walls = np.cumsum(0.010 + delays)
    loss_walls = hist_walls + 0.008 + np.where(rng.random(100) < 0.4, 0.025, 0.0)
    steps = np.arange(100)
    assert axes.same_step_axis(steps, hist_walls, steps, loss_walls) is True
    # An epoch count written every 10 iterations is still another axis.
    epochs = np.arange(10)
    assert axes.same_step_axis(steps, hist_walls, epochs, hist_walls[9::10] + 0.008) is False
