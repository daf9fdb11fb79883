"""gradhealth.json: each bad entry is rejected with one line naming it and what is allowed, its default
is kept, and everything else in the file still applies; the tab's `runs` answer carries the lines."""

from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np
import pytest

from gradhealth_plugin import config as config_lib
from gradhealth_plugin import plugin as plugin_lib
from gradhealth_plugin.analysis import limits
from gradhealth_plugin.reading import tags
from tests.test_bad_input import event, hist_value, normal_buckets, sweep, write_run

DEFAULTS = {name: t.value for name, t in limits.DEFAULTS.items()}


def load(tmp_path, text: str) -> config_lib.Config:
    path = tmp_path / "gradhealth.json"
    path.write_text(text)
    return config_lib.load(logdir=str(tmp_path))


def _default(name: str) -> str:
    value = DEFAULTS[name]
    return str(int(value)) if value == int(value) else f"{value:g}"


# --- thresholds ------------------------------------------------------------------------------------

def test_every_threshold_has_a_range_that_holds_its_default():
    assert set(limits.ALLOWED) == set(limits.DEFAULTS)
    for name, t in limits.DEFAULTS.items():
        assert limits.ALLOWED[name].holds(t.value), name


# As written in the file: Python's json reads NaN, Infinity and 1e400 (inf) as floats, a 400-digit
# integer as an int that no float can hold.
BAD_VALUES = ["NaN", "Infinity", "-Infinity", "1e400", "-3", "1" + "0" * 400, '"5"', "true", "null", "[1]", "{}"]


@pytest.mark.parametrize("name", sorted(limits.DEFAULTS))
@pytest.mark.parametrize("raw", BAD_VALUES)
def test_a_bad_threshold_is_rejected_naming_it_and_its_range_and_the_rest_apply(tmp_path, name, raw):
    other = "skewness" if name != "skewness" else "spike_z"
    cfg = load(tmp_path, '{"thresholds": {"%s": %s, "%s": 4.5}}' % (name, raw, other))
    assert cfg.limits[name] == DEFAULTS[name]
    assert cfg.limits[other] == 4.5  # the good value still applies
    assert len(cfg.problems) == 1, cfg.problems
    line = cfg.problems[0]
    assert "\n" not in line
    assert line.startswith(f"{tmp_path / 'gradhealth.json'}: {name} must be {limits.ALLOWED[name]}; got ")
    assert line.endswith(f"; using {_default(name)}")


@pytest.mark.parametrize("name, accepted, rejected", [
    # Counts of steps are integers; a spike window needs the 3 points a running median is taken from.
    ("spike_window", [3, 7.0, 1000], [0, 1, 2, 5.5, 1001]),
    ("vanishing_steps", [1, 10], [0, 2.5, 10**7]),
    ("steps_per_epoch", [0, 1000], [-1, 100.5, 10**13]),
    ("vanishing_fraction", [1e-3, 1], [0, 1.01]),
    ("dead_zero_fraction", [0.5, 1], [-0.1, 1.5]),  # 0 too, with dead_info_zero_fraction below it
    ("dead_info_zero_fraction", [0, 0.5], [1.01]),  # 1 too, with dead_zero_fraction above it
    ("bimodal_dip", [0.2, 1], [0, 2]),
    ("depth_ratio", [1e-9, 1], [0, 1.5]),
    ("exploding_jump", [1.5], [1, 0.5]),
    ("weight_std_growth", [1.1], [1, 0]),
    ("init_scale_factor", [2], [1]),
    ("exploding_max_abs", [1e-5, 1e300], [0, -1]),
    ("vanishing_abs", [1e-12], [0]),
    ("spike_z", [0.5], [0]),
    ("skewness", [0.1], [0]),
    ("weight_abs_mean", [3], [0]),
    ("update_ratio_high", [1], [0]),
    ("update_ratio_low", [1e-9], [0]),
])
def test_threshold_ranges(name, accepted, rejected):
    for value in accepted:
        values, problems = limits.checked_thresholds({name: value})
        assert problems == [] and values[name] == value, (name, value)
    for value in rejected:
        values, problems = limits.checked_thresholds({name: value})
        assert values[name] == DEFAULTS[name], value
        assert len(problems) == 1 and problems[0].startswith(f"{name} must be"), value


def test_range_wording():
    assert str(limits.ALLOWED["spike_window"]) == "an integer from 3 to 1000"
    assert str(limits.ALLOWED["steps_per_epoch"]) == "an integer from 0 to 1000000000000"
    assert str(limits.ALLOWED["vanishing_fraction"]) == "a number > 0 and <= 1"
    assert str(limits.ALLOWED["exploding_max_abs"]) == "a number > 0"
    assert str(limits.ALLOWED["exploding_jump"]) == "a number > 1"
    values, problems = limits.checked_thresholds({"spike_window": 0})
    assert problems == ["spike_window must be an integer from 3 to 1000; got 0; using 11"]


def test_an_unknown_threshold_is_rejected_and_the_others_apply(tmp_path):
    cfg = load(tmp_path, '{"thresholds": {"exploding_max_abz": 5, "exploding_max_abs": 5}}')
    assert cfg.limits["exploding_max_abs"] == 5
    assert len(cfg.problems) == 1 and 'unknown threshold "exploding_max_abz"' in cfg.problems[0]


def test_thresholds_that_are_not_an_object_keep_every_default(tmp_path):
    cfg = load(tmp_path, '{"thresholds": [["spike_window", 5]]}')
    assert cfg.limits == DEFAULTS
    assert len(cfg.problems) == 1 and "thresholds must be an object" in cfg.problems[0]


def test_a_good_file_has_no_problems(tmp_path):
    cfg = load(tmp_path, '{"thresholds": {"spike_window": 21, "steps_per_epoch": 390}, '
                         '"tag_rules": [{"pattern": "^g/(?P<layer>.+)$", "role": "gradient"}]}')
    assert cfg.problems == []
    assert cfg.limits["spike_window"] == 21 and cfg.limits["steps_per_epoch"] == 390
    assert len(cfg.tag_rules) == 1


# --- tag rules -------------------------------------------------------------------------------------

OPTIONAL_GROUPS = [
    r"^(?P<layer>zz)?gradients/",
    r"^(?P<layer>\w+)*/grads$",
    r"^(?:(?P<layer>\w+)/|x)grads$",
    r"^(?!(?P<layer>a))grads/",
    r"^g_(\w+)?$",  # no `layer` group: the first group names the row
]


@pytest.mark.parametrize("pattern", OPTIONAL_GROUPS)
def test_a_rule_whose_group_may_take_no_part_is_rejected(pattern):
    parsed, problems = tags.parse_user_rules([{"pattern": pattern, "role": "gradient"},
                                              {"pattern": "^mine/(?P<layer>.+)$", "role": "weight"}], source="g.json")
    assert [r.pattern.pattern for r in parsed] == ["^mine/(?P<layer>.+)$"]  # the rest kept
    assert len(problems) == 1 and problems[0].startswith("g.json: rule 0: ") and "optional" in problems[0]


@pytest.mark.parametrize("pattern", [
    r"^(?P<layer>\w+)+/grads$",
    r"^((?P<layer>\w+)/(?:a|b))/grads$",
    r"^(?=(?P<layer>\w+)/grads)",
    r"^(?>(?P<layer>\w+))/grads$",
    r"^g_(\w+)$",
])
def test_a_rule_whose_group_always_takes_part_is_kept(pattern):
    parsed, problems = tags.parse_user_rules([{"pattern": pattern, "role": "gradient"}])
    assert problems == [] and len(parsed) == 1


def test_an_ignore_rule_needs_no_group():
    parsed, problems = tags.parse_user_rules([{"pattern": r"^(?P<layer>zz)?debug/", "role": "ignore"}])
    assert problems == [] and len(parsed) == 1


def test_bad_rules_are_rejected_one_by_one_and_the_rest_apply_in_order(tmp_path):
    cfg = load(tmp_path, json.dumps({"tag_rules": [
        {"pattern": "^a/(?P<layer>.+)$", "role": "gradient"},
        {"pattern": "^(?P<layer>zz)?gradients/", "role": "gradient"},
        {"pattern": "^b/(?P<layer>.+$", "role": "weight"},
        {"pattern": "^c/(?P<layer>.+)$", "role": "gradients"},
        {"pattern": "^d/(?P<layer>.+)$", "role": "activation"},
    ]}))
    assert [(r.pattern.pattern, r.role) for r in cfg.tag_rules] == [
        ("^a/(?P<layer>.+)$", "gradient"), ("^d/(?P<layer>.+)$", "activation")]
    assert [p.split(": ", 2)[1] for p in cfg.problems] == ["rule 1", "rule 2", "rule 3"]
    assert "optional" in cfg.problems[0] and "bad pattern" in cfg.problems[1] and "role must be" in cfg.problems[2]
    assert all(p.endswith("; rule ignored") for p in cfg.problems)


def test_a_rule_whose_group_misses_a_tag_leaves_it_to_the_other_rules():
    # Where the parse tree cannot tell, the match does: no crash, no row named None or "".
    rules = [tags.UserRule(re.compile(r"^(?P<layer>zz)?gradients/"), "weight"),
             tags.UserRule(re.compile(r"^empty/(?P<layer>.*)$"), "weight")]
    assert tags.classify_histogram("gradients/fc1", (), rules).role == tags.GRADIENT  # the convention
    assert tags.classify_histogram("zzgradients/fc1", (), rules).layer == "zz"
    assert tags.classify_histogram("empty/", (), rules).decided_by != tags.BY_RULE


# --- the file as a whole ---------------------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (b'{"thresholds": ', "not valid JSON"),
    (b"[1]", "expected a JSON object"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    (b" " * (config_lib.MAX_CONFIG_BYTES + 1), "larger than"),
])
def test_a_file_that_is_not_a_json_object_is_an_error_or_the_defaults(tmp_path, content, message):
    path = tmp_path / "gradhealth.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*" + message):
        config_lib.load(logdir=str(tmp_path))
    cfg = config_lib.load_or_defaults(logdir=str(tmp_path))
    assert cfg.limits == DEFAULTS and cfg.tag_rules == []
    assert len(cfg.problems) == 1 and message in cfg.problems[0] and cfg.problems[0].endswith("; using the defaults")


def test_a_fifo_named_as_the_config_is_not_opened(tmp_path):
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    # Opening a FIFO with no writer would block this test forever.
    with pytest.raises(ValueError, match="not a regular file"):
        config_lib.load(path=str(path))


def test_the_loader_shows_a_malformed_file_and_keeps_the_defaults(tmp_path):
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin

    path = tmp_path / "mine.json"
    path.write_text('{"thresholds": {"spike_window": 0}')
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    context = base_plugin.TBContext(
        logdir=str(tmp_path), data_provider=data_provider.MultiplexerDataProvider(multiplexer, str(tmp_path)),
        flags=argparse.Namespace(gradhealth_config=str(path), samples_per_plugin={}, grpc_data_provider=""))
    tab = plugin_lib.GradHealthLoader().load(context)
    problems = tab.runs_impl(tb_context.RequestContext(), "")["config_problems"]
    assert len(problems) == 1 and str(path) in problems[0] and "not valid JSON" in problems[0]
    assert tab.vocabulary_impl() == plugin_lib.GradHealthPlugin(context, config_lib.load()).vocabulary_impl()


# --- the routes, under both loaders ----------------------------------------------------------------

def _jump_run(root):
    """gradients/dense/kernel whose norm jumps 100x at step 20 with max |g| far below 1e3: an explosion
    only the running median (spike_window) sees; and mygrads_fc, a gradient only a user rule names."""
    rng = np.random.default_rng(0)
    write_run(root / "train", [
        event(s, hist_value("gradients/dense/kernel", normal_buckets(rng, scale=1e-2 if s < 20 else 1.0)),
              hist_value("mygrads_fc", normal_buckets(rng)))
        for s in range(30)])


def _client_with_config(tmp_path, loader_client, content: str):
    _jump_run(tmp_path)
    (tmp_path / "gradhealth.json").write_text(content)
    return loader_client(tmp_path)  # the tab reads gradhealth.json at the logdir's root itself


def _explosions(findings) -> list:
    return [f["first_step"] for f in findings if f["kind"] == "exploding_gradients"]


def test_bad_threshold_values_answer_every_route(tmp_path, loader_client):
    client = _client_with_config(tmp_path, loader_client, (
        '{"thresholds": {"spike_window": NaN, "vanishing_steps": Infinity, "steps_per_epoch": -3,'
        ' "exploding_max_abs": 1e400, "spike_z": ' + "9" * 400 + ', "skewness": 2.5}}'))
    seen = sweep(client)  # every route: 200, 400 or 404 with JSON, never 500
    path = str(tmp_path / "gradhealth.json")
    assert client.ok("/runs")["config_problems"] == [
        f"{path}: spike_window must be an integer from 3 to 1000; got NaN; using 11",
        f"{path}: vanishing_steps must be an integer from 1 to 1000000; got Infinity; using 5",
        f"{path}: steps_per_epoch must be an integer from 0 to 1000000000000; got -3; using 0",
        f"{path}: exploding_max_abs must be a number > 0; got Infinity; using 1000",
        f"{path}: spike_z must be a number > 0; got 9999999999999999999999999999999999999...; using 6",
    ]
    assert _explosions(seen["train"]["findings"]) == [20]
    vocabulary = client.ok("/vocabulary")
    assert json.dumps(vocabulary, allow_nan=False)  # no NaN or Infinity reached an answer
    skew = [line["value"] for line in vocabulary["thresholds"] if line["name"] == "skewness"]
    assert sorted(skew) == [-2.5, 2.5]  # the good value applies


def test_a_spike_window_of_0_keeps_the_default_and_its_findings(tmp_path, loader_client):
    # 0 was taken: no running median, so the jump at step 20 was silently no explosion.
    client = _client_with_config(tmp_path, loader_client, '{"thresholds": {"spike_window": 0}}')
    assert _explosions(client.ok("/findings", run="train")["findings"]) == [20]
    assert client.ok("/runs")["config_problems"] == [
        f"{tmp_path / 'gradhealth.json'}: spike_window must be an integer from 3 to 1000; got 0; using 11"]


def test_bad_tag_rules_are_rejected_and_the_good_one_applies(tmp_path, loader_client):
    client = _client_with_config(tmp_path, loader_client, json.dumps({"tag_rules": [
        {"pattern": "^(?P<layer>zz)?gradients/", "role": "weight"},
        {"pattern": "^mygrads_(?P<layer>.+$", "role": "gradient"},
        {"pattern": "^mygrads_(?P<layer>.+)$", "role": "gradients"},
        {"pattern": "^mygrads_(?P<layer>.+)$", "role": "gradient"}]}))
    seen = sweep(client)
    path = str(tmp_path / "gradhealth.json")
    assert client.ok("/runs")["config_problems"] == [
        f"{path}: rule 0: bad pattern '^(?P<layer>zz)?gradients/': its layer group is optional, so a tag it "
        "matches may get no row name; make the group required; rule ignored",
        f"{path}: rule 1: bad pattern: missing ), unterminated subpattern at position 9; rule ignored",
        f"{path}: rule 2: role must be one of ('gradient', 'weight', 'activation', 'update', 'other', 'ignore'), "
        "got 'gradients'; rule ignored",
    ]
    layers = {layer["name"]: layer for layer in seen["train"]["summary"]["layers"]}
    assert layers["fc"]["roles"]["gradient"]["decided_by"] == "rule"  # the good rule applies
    assert layers["dense/kernel"]["roles"]["gradient"]["decided_by"] == "convention"  # the rejected one does not


def test_runs_answer_an_empty_list_without_problems(tmp_path, loader_client):
    _jump_run(tmp_path)
    assert loader_client(tmp_path).ok("/runs")["config_problems"] == []


@pytest.mark.parametrize("overrides, problem, kept", [
    ({"update_ratio_low": 0.5}, "update_ratio_low must be below update_ratio_high; got 0.5 and 0.1; "
     "using 1e-06 for update_ratio_low", {"update_ratio_high": 0.1}),
    ({"update_ratio_low": 0.01, "update_ratio_high": 0.001}, "update_ratio_low must be below update_ratio_high; "
     "got 0.01 and 0.001; using 1e-06 and 0.1 for update_ratio_low and update_ratio_high", {}),
    ({"dead_info_zero_fraction": 0.8}, "dead_info_zero_fraction must be below dead_zero_fraction; got 0.8 and 0.7; "
     "using 0.3 for dead_info_zero_fraction", {}),
    ({"exploding_max_abs": 1e-7}, "vanishing_abs must be below exploding_max_abs; got 1e-06 and 1e-07; "
     "using 1000 for exploding_max_abs", {}),
])
def test_thresholds_out_of_order_with_their_pair_keep_their_defaults(overrides, problem, kept):
    values, problems = limits.checked_thresholds({**overrides, "skewness": 2.5})
    assert problems == [problem]
    defaults = limits.thresholds()
    for low, high in limits.ORDERED:
        assert values[low] < values[high]
    for name in overrides:
        assert values[name] == kept.get(name, defaults[name])
    assert values["skewness"] == 2.5  # the rest still applies


def test_thresholds_in_order_are_taken():
    values, problems = limits.checked_thresholds({"update_ratio_low": 1e-4, "update_ratio_high": 1e-3})
    assert problems == []
    assert (values["update_ratio_low"], values["update_ratio_high"]) == (1e-4, 1e-3)


def test_a_threshold_out_of_order_is_shown_by_the_tab(tmp_path, loader_client):
    client = _client_with_config(tmp_path, loader_client, '{"thresholds": {"update_ratio_low": 0.5}}')
    assert client.ok("/runs")["config_problems"] == [
        f"{tmp_path / 'gradhealth.json'}: update_ratio_low must be below update_ratio_high; got 0.5 and 0.1; "
        "using 1e-06 for update_ratio_low"]
