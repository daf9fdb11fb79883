"""The `vocabulary` route and the detector registry it is built from.

Every kind in the registry appears once with its label and chart metric, the
health bands are the ones the cell scores live in, and the threshold lines
carry the user's overrides. The registry checks here are what lets a new kind
be one new module in `analysis/detectors/` plus its test.
"""

import json

import numpy as np
import pytest

from gradhealth_plugin import config as config_lib
from gradhealth_plugin.analysis import detectors, findings, health, limits, metrics, vocabulary
from gradhealth_plugin.analysis.finding import SEVERITY_RANK
from gradhealth_plugin.reading import tags as tags_lib

LIMITS = limits.thresholds()


def test_every_registered_kind_appears_once_with_a_label_and_a_metric():
    kinds = vocabulary.vocabulary(LIMITS)["kinds"]
    names = [k["kind"] for k in kinds]
    assert names == list(detectors.KINDS) == list(findings.KINDS)
    assert len(set(names)) == len(names)
    for k in kinds:
        assert k["label"] and k["label"] == k["label"].strip(), k
        assert k["metric"] in ("health",) + tuple(metrics.METRICS), k


def test_each_kind_with_cell_rules_says_how_many_steps_in_a_row_its_finding_needs():
    """The tab tells an ok cell where a rule held too briefly from a plain ok one with these."""
    kinds = {k["kind"]: k["steps_needed"] for k in vocabulary.vocabulary(dict(LIMITS, vanishing_steps=7))["kinds"]}
    assert kinds["vanishing_gradients"] == 7 and kinds["exploding_gradients"] == LIMITS["exploding_steps"]
    assert kinds["dead_units"] == kinds["weight_growth"] == kinds["skewed_distribution"] == 3
    assert kinds["nonfinite"] == 1 and kinds["no_progress"] is None and kinds["spike"] is None


def test_kind_order_is_the_contract_order():
    # The tie-break of the findings sort; the frontend sorts with it too.
    assert detectors.KINDS == (
        "nonfinite", "exploding_gradients", "vanishing_gradients", "dead_units", "weight_growth",
        "skewed_distribution", "bimodal_weights", "update_ratio", "spike", "periodic_spikes",
        "depth_vanishing", "init_scale", "no_progress", "rank_divergence")


def test_each_detector_declares_what_a_kind_needs():
    orders = [d.ORDER for d in detectors.DETECTORS]
    assert len(set(orders)) == len(orders)
    for d in detectors.DETECTORS:
        assert d.SEVERITY in SEVERITY_RANK, d.KIND
        assert d.ADVICE and d.ADVICE == d.ADVICE.strip(), d.KIND
        assert callable(d.detect), d.KIND
        for rule in d.CELL_RULES:
            assert rule.name == d.KIND and (rule.threshold == "" or rule.threshold in limits.DEFAULTS), rule
        for line in d.THRESHOLDS:
            assert line.name in limits.DEFAULTS and line.side in ("above", "below"), line


def test_severities_and_statuses():
    v = vocabulary.vocabulary(LIMITS)
    assert v["severities"] == [{"severity": "info", "rank": 1}, {"severity": "warn", "rank": 2},
                               {"severity": "critical", "rank": 3}]
    assert v["statuses"] == [{"status": "no_data", "code": 0}, {"status": "ok", "code": 1},
                             {"status": "warn", "code": 2}, {"status": "critical", "code": 3}]
    assert v["role_metric"] == {"gradient": "max_abs", "weight": "std", "activation": "zero_fraction",
                                "update": "update_ratio", "other": "l2"}
    assert set(v["role_metric"]) == set(tags_lib.ROLES)


def test_bands_match_the_scores_health_gives():
    bands = vocabulary.vocabulary(LIMITS)["health_bands"]
    assert bands == [{"status": "ok", "lo": 0.6, "hi": 1.0}, {"status": "warn", "lo": 0.25, "hi": 0.6},
                     {"status": "critical", "lo": 0.0, "hi": 0.25}]
    by_status = {b["status"]: (b["lo"], b["hi"]) for b in bands}
    scores = np.linspace(0.0, 1.0, 101)
    for code in (health.OK, health.WARN, health.CRITICAL):
        lo, hi = by_status[health.STATUS_NAMES[code]]
        banded = health.in_band(scores, np.full(len(scores), code, dtype=np.uint8))
        assert np.all(banded <= hi) and np.all(banded >= lo), code
        if code != health.CRITICAL:
            assert np.all(banded > lo), code  # lo is exclusive except for critical


def test_thresholds_list_every_line_with_the_configured_value():
    lines = vocabulary.vocabulary(LIMITS)["thresholds"]
    first = lines[0]
    assert first == {"role": "gradient", "metric": "max_abs", "name": "exploding_max_abs", "value": 1000.0,
                     "side": "above", "meaning": limits.DEFAULTS["exploding_max_abs"].meaning}
    assert {line["name"] for line in lines} == {line.name for line in detectors.THRESHOLD_LINES}
    # A limit on |x| is drawn on both sides of zero.
    skew = [line for line in lines if line["name"] == "skewness"]
    assert [(s["value"], s["side"]) for s in skew] == [(2.0, "above"), (-2.0, "below")]
    update = [line for line in lines if line["metric"] == "update_ratio"]
    assert {u["role"] for u in update} == {None}


def test_series_lines_are_the_vocabulary_lines_of_that_role_and_metric():
    lines = vocabulary.vocabulary(LIMITS)["thresholds"]
    for role in tags_lib.ROLES:
        for metric in {line["metric"] for line in lines}:
            mine = [{k: v for k, v in line.items() if k not in ("role", "metric")} for line in lines
                    if line["metric"] == metric and line["role"] == role]
            mine += [{k: v for k, v in line.items() if k not in ("role", "metric")} for line in lines
                     if line["metric"] == metric and line["role"] is None]
            assert vocabulary.series_thresholds(role, metric, LIMITS) == mine, (role, metric)


def test_route_answers_the_vocabulary(plugin_client, tmp_path):
    client = plugin_client(tmp_path)
    body = client.ok("/vocabulary")
    assert body == json.loads(json.dumps(vocabulary.vocabulary(LIMITS)))
    assert [k["kind"] for k in body["kinds"]] == list(detectors.KINDS)


@pytest.mark.parametrize("name,value", [("exploding_max_abs", 50.0), ("skewness", 1.5), ("update_ratio_low", 1e-8)])
def test_route_shows_a_user_override(plugin_client, tmp_path, name, value):
    (tmp_path / "gradhealth.json").write_text(json.dumps({"thresholds": {name: value}}))
    client = plugin_client(tmp_path, config=config_lib.load(logdir=str(tmp_path)))
    lines = [line for line in client.ok("/vocabulary")["thresholds"] if line["name"] == name]
    assert lines and lines[0]["value"] == value
    assert all(abs(line["value"]) == value for line in lines)


def test_the_frontend_fixture_is_the_backend_vocabulary():
    # The frontend's unit tests run on this fixture: it must say what the route says,
    # or they test a vocabulary the tab never receives.
    import json
    import pathlib

    fixture = json.loads((pathlib.Path(__file__).parents[1] / "frontend/test/fixtures/vocabulary.json").read_text())
    served = json.loads(json.dumps(vocabulary.vocabulary(LIMITS)))
    assert fixture == served


def test_a_kind_is_judged_when_any_evidence_it_needs_was_logged():
    assert {"exploding_gradients", "vanishing_gradients", "depth_vanishing"} <= set(detectors.not_judged(["weight"]))
    # A global gradient-norm scalar is enough to judge explosions, not vanishing per layer.
    with_norm = detectors.not_judged(["weight", "grad_norm_total"])
    assert "exploding_gradients" not in with_norm and "vanishing_gradients" in with_norm
    assert detectors.not_judged(["gradient", "weight", "activation"]) == ["no_progress"]
    assert detectors.not_judged(["gradient", "weight", "activation", "loss"]) == []
    # Kinds that judge whatever was logged are never listed.
    assert not {"nonfinite", "spike", "periodic_spikes"} & set(detectors.not_judged([]))


def test_the_runs_route_says_what_a_weights_only_run_cannot_show(plugin_client, keras_fit_logdir):
    train = next(r for r in plugin_client(keras_fit_logdir).ok("/runs")["runs"] if r["run"] == "train")
    assert train["roles"] == ["weight"]
    assert {"exploding_gradients", "vanishing_gradients"} <= set(train["not_judged"])
    assert train["gradients_judged"] is False  # the tab's badge says "no warnings", not "healthy"
    assert "Exploding gradients" in train["coverage_note"] and "watch(" in train["coverage_note"]


def test_a_run_whose_loss_was_not_found_is_told_which_names_are_read_as_one():
    from gradhealth_plugin.serving import responses

    note = responses.coverage_note(["no_progress"])
    assert "loss, cost, cross_entropy, xent or nll" in note and "`train/loss`" in note
    # Only where the loss was what was missing.
    assert "cross_entropy" not in responses.coverage_note(["exploding_gradients"])

