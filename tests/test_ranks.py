"""One training logged by many workers: the runs recognised as its ranks, and ranks whose gradients
disagree at the same step (`rank_divergence`), on crafted numbers and on a real two-process
torch.distributed (gloo) training whose all-reduce leaves one layer out."""

import json
import shutil

import numpy as np
import pytest

from gradhealth_plugin import cli
from gradhealth_plugin.analysis import limits as rules
from gradhealth_plugin.analysis import ranks
from gradhealth_plugin.reading import tags as T
from gradhealth_plugin.reading import trainings
from tests import ranks_training
from tests.test_bad_input import call, event, hist_value, new_event_file, append_events, normal_buckets, write_run
from tests.test_findings import grad, layer, run

LIMITS = rules.thresholds()
KIND = "rank_divergence"


# --- which runs are one training ---------------------------------------------------------------------

@pytest.mark.parametrize("name, training, rank", [
    ("rank0", "rank*", "rank0"),
    ("exp/rank12", "exp/rank*", "rank12"),
    ("logs/worker_0", "logs/worker_*", "worker_0"),
    ("logs/worker-1/train", "logs/worker-*/train", "worker-1"),
    ("node1/gpu3", "node*/gpu*", "node1/gpu3"),
    ("a/Rank2", "a/Rank*", "Rank2"),
    ("local_rank3", "local_rank*", "local_rank3"),
])
def test_a_path_part_naming_a_worker_makes_a_rank(name, training, rank):
    got = trainings.rank_name(name)
    assert (got.training, got.rank) == (training, rank)


@pytest.mark.parametrize("name", ["rank", "ranked0", "lr0.1", "run_gpu0", "exp/worker", "gpus2", "train"])
def test_other_names_are_no_rank(name):
    assert trainings.rank_name(name) is None


def test_ranks_are_grouped_by_what_their_names_share_and_ordered_by_number():
    found = trainings.trainings(["a/rank10", "a/rank2", "a/rank0", "b/rank0", "b/rank1", "c/rank0", "train",
                                 "node0/gpu1", "node1/gpu0", "node0/gpu0"])
    assert set(found) == {"a/rank*", "b/rank*", "node*/gpu*"}  # c has one rank: no training
    assert found["a/rank*"].runs == ("a/rank0", "a/rank2", "a/rank10")
    assert found["node*/gpu*"].ranks == ("node0/gpu0", "node0/gpu1", "node1/gpu0")
    assert trainings.training_of("b/rank1", ["b/rank0", "b/rank1", "a/rank0"]).runs == ("b/rank0", "b/rank1")
    assert trainings.training_of("c/rank0", ["c/rank0", "b/rank0", "b/rank1"]) is None


# --- the rule on crafted numbers ---------------------------------------------------------------------

def diverging(*values, tolerance=1e-3):
    """Which ranks diverge at one place, given each rank's value (lowest rank first)."""
    return ranks.divergence(np.array(values, dtype=np.float64), tolerance)[1].tolist()


def test_two_ranks_that_disagree_flag_the_higher_rank():
    assert diverging(1.0, 1.2) == [False, True]
    assert diverging(1.2, 1.0) == [False, True]


def test_the_value_most_ranks_share_is_the_reference():
    assert diverging(1.5, 1.0, 1.0) == [True, False, False]
    assert diverging(1.0, 1.0, 3.0, 1.0) == [False, False, True, False]
    # Two against two: rank 0's side is taken as right.
    assert diverging(2.0, 1.0, 2.0, 1.0) == [False, True, False, True]
    # No two agree: each differs from rank 0.
    assert diverging(1.0, 2.0, 3.0) == [False, True, True]


def test_the_tolerance_is_relative_to_the_reference():
    assert diverging(100.0, 100.09) == [False, False]
    assert diverging(100.0, 100.11) == [False, True]
    assert diverging(1e-9, 1.05e-9, tolerance=0.1) == [False, False]
    assert diverging(1e-9, 1.2e-9, tolerance=0.1) == [False, True]


def test_missing_and_zero_values():
    nan = float("nan")
    assert diverging(1.0, nan, 1.0) == [False, False, False]
    assert diverging(nan, 1.0, 2.0) == [False, False, True]  # rank 0 absent: rank 1 is the lowest
    assert diverging(1.0, nan) == [False, False]  # one rank compares nothing
    assert diverging(0.0, 0.0) == [False, False]
    assert diverging(0.0, 1e-9) == [False, True]


def test_divergence_is_judged_at_every_place_at_once():
    values = np.array([[1.0, 2.0, 5.0], [1.0, 2.5, 5.0]])  # (ranks, steps)
    reference, flagged = ranks.divergence(values, 1e-3)
    assert flagged.tolist() == [[False, False, False], [False, True, False]]
    assert reference.tolist() == [1.0, 2.0, 5.0]
    assert ranks.relative_difference(values[1], reference).tolist() == [0.0, 0.25, 0.0]


def rank_run(r, b_norms, steps=np.arange(10) * 10, count=1000.0):
    """(rank, run) of rank `r` with layers "a" (the same on every rank) and "b", whose gradient norm
    per step is `b_norms`."""
    steps = np.asarray(steps)
    a = layer("a", gradient=grad(0, steps=steps, l2=1.0 + steps / 100.0))
    b = layer("b", gradient=grad(0, steps=steps, l2=np.asarray(b_norms, dtype=np.float64), count=count))
    return f"rank{r}", run(a, b, name=f"t/rank{r}")


def rank_runs(*norms_per_rank, counts=None):
    return [rank_run(r, norms, count=1000.0 if counts is None else counts[r]) for r, norms in enumerate(norms_per_rank)]


def test_a_rank_diverging_at_two_steps_is_one_finding_on_its_run():
    same = np.ones(10)
    off = same.copy()
    off[[4, 7]] = 1.01
    found = ranks.find("t/rank*", rank_runs(same, same, off), LIMITS)
    assert list(found) == ["t/rank2"]
    (f,) = found["t/rank2"]
    assert (f.kind, f.severity, f.role, f.layers) == (KIND, "warn", T.GRADIENT, ["b"])
    assert (f.first_step, f.last_step) == (40, 70)
    assert f.points["b"].tolist() == [40, 70]
    assert f.evidence["layers"]["b"]["steps_diverged"] == 2
    assert f.evidence["max_relative_difference"] == pytest.approx(0.01)
    assert f.evidence["rank"] == "rank2" and f.evidence["training"] == "t/rank*"
    # The tolerance in the words a person reads the difference in: a percentage, like "by up to 1.0%".
    assert "by up to 1.0% (more than 0.1% at 2 of 10 compared steps of layer `b`, from step 40)" in f.message, f.message


def test_one_step_apart_is_not_yet_a_finding_and_the_steps_needed_are_a_threshold():
    same = np.ones(10)
    off = same.copy()
    off[4] = 1.5
    assert ranks.find("t/rank*", rank_runs(same, off), LIMITS) == {}
    assert list(ranks.find("t/rank*", rank_runs(same, off), dict(LIMITS, rank_divergence_steps=1))) == ["t/rank1"]


def test_the_tolerance_is_a_threshold():
    same, off = np.ones(10), np.full(10, 1.01)
    assert list(ranks.find("t/rank*", rank_runs(same, off), LIMITS)) == ["t/rank1"]
    assert ranks.find("t/rank*", rank_runs(same, off), dict(LIMITS, rank_divergence_rel=0.02)) == {}


def test_layers_of_other_sizes_on_each_rank_are_shards_and_not_compared():
    assert ranks.find("t/rank*", rank_runs(np.ones(10), np.full(10, 2.0), counts=[1000.0, 500.0]), LIMITS) == {}


def test_ranks_logged_at_other_steps_compare_the_steps_they_share():
    later = np.arange(5) * 10 + 50
    assert ranks.find("t/rank*", [rank_run(0, np.ones(10)), rank_run(1, np.ones(5), later)], LIMITS) == {}
    (f,) = ranks.find("t/rank*", [rank_run(0, np.ones(10)), rank_run(1, np.full(5, 3.0), later)], LIMITS)["t/rank1"]
    assert f.points["b"].tolist() == [50, 60, 70, 80, 90]
    assert f.evidence["layers"]["b"]["steps_compared"] == 5


# --- a real two-process training ----------------------------------------------------------------------

def kinds_by_run(client):
    found = {}
    for r in client.ok("/runs")["runs"]:
        found[r["run"]] = [f for f in client.ok("/findings", run=r["run"])["findings"] if f["kind"] == KIND]
    return found


def test_the_layer_left_out_of_the_all_reduce_is_flagged_on_one_rank_only(ranks_logdir, plugin_client):
    client = plugin_client(ranks_logdir)
    found = kinds_by_run(client)
    assert set(found) == {"skipped/rank0", "skipped/rank1", "reduced/rank0", "reduced/rank1"}
    (f,) = found["skipped/rank1"]
    assert f["layers"] == [ranks_training.SKIPPED]
    assert f["severity"] == "warn" and f["role"] == "gradient"
    assert f["evidence"]["layers"][ranks_training.SKIPPED]["steps_diverged"] == ranks_training.STEPS
    assert found["skipped/rank0"] == [] and found["reduced/rank0"] == [] and found["reduced/rank1"] == []
    # The heatmap agrees with the finding: that row warns at every step, the others do not.
    hm = client.ok("/heatmap", run="skipped/rank1", role="gradient")
    warn = hm["status_names"].index("warn")
    rows = {name: set(row) for name, row in zip(hm["layers"], hm["status"])}
    assert rows.pop(ranks_training.SKIPPED) == {warn}
    assert all(warn not in statuses for statuses in rows.values()), rows


def test_the_runs_route_says_each_runs_training_and_rank(ranks_logdir, loader_client):
    client = loader_client(ranks_logdir)
    by_run = {r["run"]: r for r in call(client, "/runs")[1]["runs"]}
    assert by_run["skipped/rank1"]["training"] == {
        "name": "skipped/rank*", "rank": "rank1", "ranks": ["rank0", "rank1"],
        "runs": ["skipped/rank0", "skipped/rank1"]}
    assert by_run["reduced/rank0"]["training"]["rank"] == "rank0"
    assert by_run["skipped/rank1"]["findings"]["warn"] == 1
    assert by_run["skipped/rank0"]["findings"]["warn"] == 0
    status, body = call(client, "/findings", run="skipped/rank1")
    assert status == 200 and [(f["kind"], f["layers"]) for f in body["findings"]] == [(KIND, [ranks_training.SKIPPED])]
    for name in ("skipped/rank0", "reduced/rank0", "reduced/rank1"):
        assert not [f for f in call(client, "/findings", run=name)[1]["findings"] if f["kind"] == KIND], name


def test_the_cli_reports_it_on_the_rank(ranks_logdir, capsys):
    assert cli.main(["report", "--format", "json", str(ranks_logdir)]) == 0
    report = json.loads(capsys.readouterr().out)
    flagged = [(f["run"], f["layers"]) for f in report["findings"] if f["kind"] == KIND]
    assert flagged == [("skipped/rank1", [ranks_training.SKIPPED])]


def test_the_cli_json_says_each_runs_training_as_the_runs_route_does(ranks_logdir, capsys, loader_client):
    assert cli.main(["report", "--format", "json", str(ranks_logdir)]) == 0
    reported = {r["run"]: r["training"] for r in json.loads(capsys.readouterr().out)["runs"]}
    served = {r["run"]: r["training"] for r in call(loader_client(ranks_logdir), "/runs")[1]["runs"]}
    assert reported == served
    assert reported["skipped/rank1"] == {"name": "skipped/rank*", "rank": "rank1", "ranks": ["rank0", "rank1"],
                                         "runs": ["skipped/rank0", "skipped/rank1"]}
    # One run asked for: still its place among the others.
    assert cli.main(["report", "--format", "json", "--run", "reduced/rank0", str(ranks_logdir)]) == 0
    (only,) = json.loads(capsys.readouterr().out)["runs"]
    assert only["training"] == served["reduced/rank0"]


def test_a_run_alone_is_judged_alone(ranks_logdir, plugin_client, tmp_path):
    shutil.copytree(ranks_logdir / "skipped" / "rank1", tmp_path / "rank1")
    assert kinds_by_run(plugin_client(tmp_path)) == {"rank1": []}


# --- judged again when another rank's data changes ----------------------------------------------------

def sweep_kinds(client):
    return {row["run"]: [k["kind"] for k in row["kinds"]] for row in client.ok("/sweep")["runs"]}


def test_a_rank_is_judged_again_when_only_another_ranks_data_changed(tmp_path, plugin_client):
    rng = np.random.default_rng(0)
    buckets = [normal_buckets(rng) for _ in range(8)]
    wider = [np.column_stack([b[:, 0] * 2, b[:, 1] * 2, b[:, 2]]) for b in buckets]
    for r in (0, 1):
        write_run(tmp_path / f"rank{r}", [event(s, hist_value("grads/fc", buckets[s])) for s in range(4)])
    # Rank 1 logs four more steps that rank 0 has not logged yet: nothing to compare them with.
    append_events(new_event_file(tmp_path / "rank1"),
                  [event(s, hist_value("grads/fc", buckets[s])) for s in range(4, 8)])
    client = plugin_client(tmp_path)
    assert kinds_by_run(client) == {"rank0": [], "rank1": []}
    assert sweep_kinds(client) == {"rank0": [], "rank1": []}
    # Rank 0 logs them with other gradients: rank 1, whose own data did not change, now disagrees with it.
    append_events(new_event_file(tmp_path / "rank0"),
                  [event(s, hist_value("grads/fc", wider[s])) for s in range(4, 8)])
    client.reload()
    found = kinds_by_run(client)
    assert found["rank0"] == [] and [f["layers"] for f in found["rank1"]] == [["fc"]]
    assert (found["rank1"][0]["first_step"], found["rank1"][0]["last_step"]) == (4, 7)
    assert sweep_kinds(client) == {"rank0": [], "rank1": [KIND]}
    hm = client.ok("/heatmap", run="rank1", role="gradient")
    assert hm["status"][0] == [hm["status_names"].index("ok")] * 4 + [hm["status_names"].index("warn")] * 4


# --- runs a name groups that did not run together ----------------------------------------------------

def facts(layers=("a", "b"), steps=range(10), wall=1_000_000.0):
    return trainings.RankFacts(frozenset(layers), np.unique(np.asarray(list(steps), dtype=np.int64)), wall)


def test_ranks_log_the_same_layers_at_steps_in_common_and_start_together():
    one = facts()
    assert trainings.ran_together(one, facts(steps=range(5, 20), wall=1_000_000.0 + trainings.START_TOLERANCE_S))
    assert not trainings.ran_together(one, facts(layers=("a", "c")))
    assert not trainings.ran_together(one, facts(steps=range(10, 20)))
    assert not trainings.ran_together(one, facts(wall=1_000_000.0 + trainings.START_TOLERANCE_S + 1))
    assert trainings.ran_together(one, facts(wall=None))  # no wall time known: the layers and steps decide


def test_of_a_names_runs_the_largest_group_that_ran_together_is_the_training():
    t = trainings.trainings(["r/gpu0", "r/gpu1", "r/gpu2", "r/gpu3"])["r/gpu*"]
    late = 1_000_000.0 + 3600
    kept = trainings.together(t, {"r/gpu0": facts(wall=late), "r/gpu1": facts(), "r/gpu2": facts(), "r/gpu3": facts()})
    assert (kept.name, kept.runs, kept.ranks) == ("r/gpu*", ("r/gpu1", "r/gpu2", "r/gpu3"), ("gpu1", "gpu2", "gpu3"))
    assert trainings.together(t, {r: facts() for r in t.runs}) is t
    assert trainings.together(t, {"r/gpu0": facts(), "r/gpu1": facts(wall=late)}) is None
    # A run whose data could not be read is left out.
    assert trainings.together(t, {"r/gpu0": facts(), "r/gpu2": facts()}).runs == ("r/gpu0", "r/gpu2")


def _independent_torch_run(log_dir, seed, wall_offset, monkeypatch):
    """A tiny MLP trained alone (no torch.distributed) with its own data, logged with `watch`; its events
    written `wall_offset` seconds later than the clock says, as if started then."""
    import time
    import types

    import torch
    from torch import nn

    from gradhealth_plugin.torch import handle as torch_handle
    from gradhealth_plugin.torch import unwatch, watch
    from gradhealth_plugin.writing import events

    # The two clocks the writing side reads: the step's (handle) and the event file's (events).
    later = types.SimpleNamespace(time=lambda: time.time() + wall_offset, monotonic=time.monotonic)
    monkeypatch.setattr(torch_handle, "time", later)
    monkeypatch.setattr(events, "time", later)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(ranks_training.N_IN, ranks_training.N_HIDDEN), nn.ReLU(),
                          nn.Linear(ranks_training.N_HIDDEN, ranks_training.N_OUT))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(64, ranks_training.N_IN, generator=gen)
    y = torch.randint(0, ranks_training.N_OUT, (64,), generator=gen)
    handle = watch(model, str(log_dir), optimizer=optimizer, every_n_steps=1, activations=False)
    for _ in range(ranks_training.STEPS):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    unwatch(handle)
    monkeypatch.undo()


@pytest.fixture(scope="module")
def device_named_logdir(tmp_path_factory):
    """Two pairs of independent torch trainings (other data, so other gradients) named by device:
    ``apart/gpu<r>/run`` started an hour apart, ``near/gpu<r>/run`` started together."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("device_named")
    with pytest.MonkeyPatch.context() as mp:
        _independent_torch_run(root / "apart" / "gpu0" / "run", 1, 0.0, mp)
        _independent_torch_run(root / "apart" / "gpu1" / "run", 2, 3600.0, mp)
        _independent_torch_run(root / "near" / "gpu0" / "run", 1, 0.0, mp)
        _independent_torch_run(root / "near" / "gpu1" / "run", 2, 0.0, mp)
    return root


def test_runs_named_by_device_that_started_apart_are_separate_trainings(device_named_logdir, loader_client, capsys):
    client = loader_client(device_named_logdir)
    by_run = {r["run"]: r for r in call(client, "/runs")[1]["runs"]}
    assert by_run["apart/gpu0/run"]["training"] is None and by_run["apart/gpu1/run"]["training"] is None
    for name in ("apart/gpu0/run", "apart/gpu1/run"):
        assert not [f for f in call(client, "/findings", run=name)[1]["findings"] if f["kind"] == KIND], name
    # The same two trainings started together cannot be told from ranks: compared, they disagree.
    assert by_run["near/gpu1/run"]["training"]["runs"] == ["near/gpu0/run", "near/gpu1/run"]
    assert [f["kind"] for f in call(client, "/findings", run="near/gpu1/run")[1]["findings"]].count(KIND) == 1
    assert cli.main(["report", "--format", "json", str(device_named_logdir)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["run"]: r["training"] is not None for r in report["runs"]} == {
        "apart/gpu0/run": False, "apart/gpu1/run": False, "near/gpu0/run": True, "near/gpu1/run": True}
    assert [f["run"] for f in report["findings"] if f["kind"] == KIND] == ["near/gpu1/run"]
