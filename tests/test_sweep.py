"""What a sweep's hyperparameters explain (analysis/sweep.py) and how runs get them (reading/hparams.py)."""

from __future__ import annotations

import math

import pytest

from gradhealth_plugin.analysis import sweep
from gradhealth_plugin.reading import hparams

LABELS = {"exploding_gradients": "Exploding gradients", "dead_units": "Dead units"}


def _runs(rows):
    return [sweep.SweepRun(f"r{i}", hp, set(kinds)) for i, (hp, kinds) in enumerate(rows)]


def test_a_clear_learning_rate_threshold_is_one_sentence():
    rows = [({"learning_rate": lr}, {"exploding_gradients"} if lr >= 0.1 else set())
            for lr in (0.1, 0.3, 0.5, 1.0, 0.001, 0.002, 0.003, 0.01, 0.02, 0.05)]
    found = sweep.splits(_runs(rows), LABELS)
    assert [s.sentence() for s in found] == [
        "Exploding gradients in 4 of 4 runs with learning_rate >= 0.1, in 0 of 6 below"]
    assert found[0].runs_with == ("r0", "r1", "r2", "r3")


def test_a_kind_of_the_small_values_reads_at_most():
    rows = [({"lr": lr}, {"dead_units"} if lr <= 0.001 else set())
            for lr in (1e-4, 3e-4, 5e-4, 1e-3, 0.01, 0.1, 0.3, 1.0)]
    assert [s.sentence() for s in sweep.splits(_runs(rows), LABELS)] == [
        "Dead units in 4 of 4 runs with lr <= 0.001, in 0 of 4 above"]


def test_a_text_value_against_the_others():
    rows = [({"optimizer": opt}, {"dead_units"} if opt == "sgd" else set())
            for opt in ("sgd", "sgd", "sgd", "sgd", "adam", "adam", "rmsprop", "rmsprop", "adam")]
    assert [s.sentence() for s in sweep.splits(_runs(rows), LABELS)] == [
        "Dead units in 4 of 4 runs with optimizer = sgd, in 0 of 5 with other values"]


def test_too_few_runs_say_nothing():
    # 2 of 2 against 0 of 2: one chance in six by luck alone.
    rows = [({"lr": 1.0}, {"exploding_gradients"}), ({"lr": 0.5}, {"exploding_gradients"}),
            ({"lr": 0.01}, set()), ({"lr": 0.001}, set())]
    assert sweep.splits(_runs(rows), LABELS) == []


def test_six_runs_perfectly_split_by_one_of_five_cuts_may_be_luck():
    # 3 of 3 against 0 of 3 has Fisher's p = 1/20, but one of five cuts, in either direction,
    # separates that perfectly in 2 of the 20 ways to pick three runs.
    rows = [({"lr": lr}, {"dead_units"} if lr <= 0.001 else set()) for lr in (1e-4, 3e-4, 1e-3, 0.01, 0.1, 1.0)]
    assert sweep.splits(_runs(rows), LABELS) == []


def test_a_mixed_outcome_is_no_clear_split():
    rows = [({"lr": lr}, {"exploding_gradients"} if i % 2 else set())
            for i, lr in enumerate((0.001, 0.01, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0))]
    assert sweep.splits(_runs(rows), LABELS) == []


def test_runs_that_cannot_judge_the_kind_or_lack_the_hyperparameter_take_no_part():
    runs = _runs([({"lr": lr}, {"exploding_gradients"} if lr >= 0.1 else set())
                  for lr in (0.1, 0.3, 1.0, 3.0, 0.001, 0.003, 0.01, 0.03)])
    # Without gradients logged an explosion cannot be seen: not "0 of" but left out.
    runs += [sweep.SweepRun("blind", {"lr": 0.001}, set(), {"exploding_gradients"}),
             sweep.SweepRun("no_hparams", {}, set())]
    (split,) = sweep.splits(runs, LABELS)
    assert (split.with_found, split.with_runs, split.other_found, split.other_runs) == (4, 4, 0, 4)


def test_fisher_tail_matches_the_hypergeometric_count():
    # 4 of 4 "with" when 4 of 10 have the kind: only one of C(10, 4) draws does that.
    assert sweep.fisher_one_sided(4, 4, 4, 10) == pytest.approx(1 / math.comb(10, 4))
    assert sweep.fisher_one_sided(0, 4, 4, 10) == pytest.approx(1.0)


def test_hparam_types():
    runs = _runs([({"lr": 0.1, "opt": "sgd", "bn": True}, set()), ({"lr": 1.0, "opt": "adam", "bn": False}, set())])
    assert sweep.hparam_types(runs) == {"bn": sweep.TEXT, "lr": sweep.NUMBER, "opt": sweep.TEXT}


# reading/hparams.py: which run's hyperparameters a data run takes.

def test_own_hyperparameters():
    got = hparams.assign(["a", "b"], {"a": {"lr": 0.1}}, {"a", "b"})
    assert got == {"a": hparams.Session({"lr": 0.1}, "own", "a")}


def test_keras_callback_runs_take_their_parents_hyperparameters():
    # hp.KerasCallback(logdir) writes into trial; Keras's TensorBoard callback into trial/train.
    got = hparams.assign(["trial/train", "trial/validation"], {"trial": {"lr": 0.1}}, {"trial/train"})
    assert got["trial/train"] == hparams.Session({"lr": 0.1}, "parent", "trial")
    assert got["trial/validation"].source_run == "trial"


def test_an_add_hparams_sub_run_is_attached_to_its_parent_run():
    sessions = {"run1/1642133413.123": {"lr": 0.1}, "1700000000.5": {"lr": 1.0}}
    got = hparams.assign(["run1", "run1/1642133413.123", ".", "1700000000.5"], sessions, {"run1", "."})
    assert got["run1"] == hparams.Session({"lr": 0.1}, "sub-run", "run1/1642133413.123")
    # A writer at the logdir's root: TensorBoard names that run ".".
    assert got["."].source_run == "1700000000.5"
    assert hparams.carriers(got) == {"run1/1642133413.123", "1700000000.5"}


def test_a_session_run_with_histograms_of_its_own_is_not_attached():
    got = hparams.assign(["run1", "run1/trial"], {"run1/trial": {"lr": 0.1}}, {"run1", "run1/trial"})
    assert "run1" not in got and got["run1/trial"].source == "own"


def test_metadata_that_is_no_session_start_info_gives_no_hyperparameters():
    assert hparams.parse_session_start(b"\xff\x00 not a proto") is None


def test_values_are_ordered_as_a_person_reads_them():
    numbers = [0.1, 1e-3, 0.01, "1e-4", 1.0]
    assert sorted(numbers, key=sweep.natural_key) == ["1e-4", 1e-3, 0.01, 0.1, 1.0]
    names = ["lr_10", "lr_2", "LR_3", "lr_1", "adam"]
    assert sorted(names, key=sweep.natural_key) == ["adam", "lr_1", "lr_2", "LR_3", "lr_10"]
    # Numbers, then booleans, then text, then a missing value: never a comparison between types.
    assert sorted(["sgd", None, True, 3.0, False], key=sweep.natural_key) == [3.0, False, True, "sgd", None]


def test_hparam_columns_are_in_natural_name_order():
    runs = _runs([({"layer_10": 1.0, "layer_2": 1.0, "batch": "x"}, set())])
    assert list(sweep.hparam_types(runs)) == ["batch", "layer_2", "layer_10"]


def test_run_names_read_their_decimals_as_numbers():
    names = ["lr_0.001_sgd", "lr_1_adam", "lr_0.01_adam", "lr_0.3_adam", "lr_0.001_adam", "LR_0.01_sgd", "lr_10_adam"]
    assert sorted(names, key=sweep.run_key) == [
        "lr_0.001_adam", "lr_0.001_sgd", "lr_0.01_adam", "LR_0.01_sgd", "lr_0.3_adam", "lr_1_adam", "lr_10_adam"]
    # Whole numbers still by size, and a run name may hold several numbers.
    assert sorted(["run_10", "run_2", "run_1.5/seed_3", "run_1.5/seed_20"], key=sweep.run_key) == [
        "run_1.5/seed_3", "run_1.5/seed_20", "run_2", "run_10"]
