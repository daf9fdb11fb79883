"""Steps the tab must not lose: past 2^53, written oddly in a request, or still being written.

Every route that sends a step also sends it as decimal digits (``<field>_text``):
JavaScript reads the JSON number 2^60 + 1 as 2^60, so the tab names steps by
those strings. The ``step`` parameter takes an optional '-' and ASCII digits
only. A last step that fewer layers have than the step before (a writer caught
mid-flush) is marked incomplete in the heatmap. Each runs under TensorBoard's
Python loader and its Rust data server.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.test_bad_input import call, event, hist_value, normal_buckets, scalar_value, write_run

@pytest.fixture
def steps_logdir(tmp_path):
    rng = np.random.default_rng(1)
    write_run(tmp_path / "run", [event(step, hist_value("gradients/a/kernel", normal_buckets(rng)))
                                 for step in (0, 5, 1000)])
    return tmp_path


# Python's int() takes all of these; a step is an optional '-' and ASCII digits.
NOT_STEPS = ["1_000", " 5", "5 ", "5\n", "\uff15", "\u0665", "+5", "--5", "-", "5-", "1e3", "0x10", "\u096b"]


@pytest.mark.parametrize("raw", NOT_STEPS)
def test_the_step_parameter_takes_ascii_digits_only(steps_logdir, loader_client, raw):
    client = loader_client(steps_logdir)
    status, body = call(client, "/cell", run="run", layer="a/kernel", step=raw)
    assert status == 400, (raw, body)
    assert body["error"].startswith("step must be an integer step")


def test_steps_outside_int64_are_found_nowhere_and_plain_steps_still_work(steps_logdir, loader_client):
    client = loader_client(steps_logdir)
    for raw in ("9223372036854775808", "-9223372036854775809", "1" * 5000):
        status, body = call(client, "/cell", run="run", layer="a/kernel", step=raw)
        # Briefly: the error does not echo five thousand digits.
        assert status == 404 and len(body["error"]) < 200, (raw[:30], body)
    for raw, expected in (("1000", 200), ("0", 200), ("-0", 200), ("0005", 200), ("-5", 404),
                          ("9223372036854775807", 404), ("-9223372036854775808", 404)):
        status, body = call(client, "/cell", run="run", layer="a/kernel", step=raw)
        assert status == expected, (raw, body)


BIG = 2 ** 60
STEPS = [BIG + k for k in range(5)]
BROKEN_FROM = BIG + 2


def _as_javascript_reads(value: int) -> int:
    """The integer a JavaScript number holds after JSON.parse: the nearest double."""
    return int(float(value))


@pytest.fixture
def big_steps_logdir(tmp_path):
    rng = np.random.default_rng(0)
    write_run(tmp_path / "big", [
        event(step,
              hist_value("gradients/a/kernel", normal_buckets(rng)),
              # Explodes from BROKEN_FROM on: a finding whose span and evidence name huge steps.
              hist_value("gradients/b/kernel", normal_buckets(rng, scale=1e4 if step >= BROKEN_FROM else 1e-2)),
              scalar_value("loss", 1.0))
        for step in STEPS])
    return tmp_path


def test_steps_past_2_53_travel_as_exact_decimal_strings(big_steps_logdir, loader_client):
    client = loader_client(big_steps_logdir)
    texts = [str(s) for s in STEPS]
    # The problem itself: as doubles, these steps collapse into one.
    assert len({_as_javascript_reads(s) for s in STEPS}) == 1

    (run,) = client.ok("/runs")["runs"]
    assert run["last_step"] == STEPS[-1] and run["last_step_text"] == texts[-1]

    hm = client.ok("/heatmap", run="big", role="gradient", metric="health")
    assert hm["steps"] == STEPS and hm["steps_text"] == texts

    series = client.ok("/series", run="big", layer="a/kernel", metric="mean")["series"]["gradient"]
    assert series["steps"] == STEPS and series["steps_text"] == texts

    for text in texts:
        cell = client.ok("/cell", run="big", layer="a/kernel", step=text)
        assert cell["step_text"] == text and cell["step"] == int(text)

    findings = client.ok("/findings", run="big")["findings"]
    exploding = [f for f in findings if f["kind"] == "exploding_gradients"]
    assert exploding, findings
    f = exploding[0]
    assert f["first_step_text"] == str(BROKEN_FROM) and f["last_step_text"] == texts[-1]
    assert f["evidence"]["step_text"] == str(f["evidence"]["step"])
    span = f["evidence"]["layers"]["b/kernel"]
    assert (span["first_step_text"], span["last_step_text"]) == (str(BROKEN_FROM), texts[-1])
    # Twins only beside steps: values and thresholds stay as they are.
    assert "value_text" not in span and "threshold_text" not in f["evidence"]


def test_every_step_in_findings_evidence_has_its_twin(big_steps_logdir, loader_client):
    """Walks the findings' JSON: each step-valued key of the evidence has a `_text` twin holding the same steps."""
    client = loader_client(big_steps_logdir)
    step_keys = ("step", "first_step", "last_step", "onset_after", "spike_steps")
    seen = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in step_keys and value is not None:
                    twin = node[f"{key}_text"]
                    expected = [str(v) for v in value] if isinstance(value, list) else str(value)
                    assert twin == expected, (key, value, twin)
                    seen.append(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(client.ok("/findings", run="big")["findings"])
    assert {"first_step", "last_step", "step"} <= set(seen)


def test_extreme_bucket_edges_are_served(tmp_path, loader_client):
    """Edges of +-1.7e308 and subnormal edges: the routes answer, with finite numbers or null."""
    wide = np.array([[-1.7e308, 0.0, 4.0], [0.0, 1.7e308, 6.0]])
    tiny = np.array([[5e-324, 1e-323, 3.0], [1e-323, 1.5e-323, 5.0], [1.5e-323, 2e-323, 2.0]])
    write_run(tmp_path / "run", [event(s, hist_value("gradients/wide/kernel", wide),
                                       hist_value("gradients/tiny/kernel", tiny)) for s in range(5)])
    client = loader_client(tmp_path)
    for layer, buckets in (("wide/kernel", wide), ("tiny/kernel", tiny)):
        status, cell = call(client, "/cell", run="run", layer=layer, step="2")
        assert status == 200
        histogram = cell["roles"]["gradient"]["histogram"]
        assert np.array(histogram, dtype=float).tolist() == buckets.tolist()
        status, series = call(client, "/series", run="run", layer=layer, metric="max_abs")
        assert status == 200
        json.dumps(series, allow_nan=False)


def _layers_logdir(tmp_path, rows_per_step):
    """Run `run`: layers l0, l1, ... with gradients at steps 0, 10, ...; rows_per_step[k] layers at step 10k."""
    rng = np.random.default_rng(2)
    write_run(tmp_path / "run", [
        event(10 * k, *[hist_value(f"gradients/l{i}/kernel", normal_buckets(rng)) for i in range(rows)])
        for k, rows in enumerate(rows_per_step)])
    return tmp_path


def test_a_partly_written_last_step_is_marked_incomplete(tmp_path, loader_client):
    client = loader_client(_layers_logdir(tmp_path, [8, 8, 8, 3]))
    hm = client.ok("/heatmap", run="run", role="gradient", metric="health")
    assert hm["incomplete"] == {"step": 30, "step_text": "30", "layers": 3, "layers_before": 8}
    # The metric views say the same.
    assert client.ok("/heatmap", run="run", role="gradient", metric="max_abs")["incomplete"]["step"] == 30
    # A role the run does not have has no steps, so nothing incomplete.
    assert client.ok("/heatmap", run="run", role="weight", metric="health")["incomplete"] is None


@pytest.mark.parametrize("rows_per_step", [[8, 8, 8, 8], [3, 8, 8], [8, 3, 8], [8], [3, 8]])
def test_a_whole_last_step_is_not_marked(tmp_path, loader_client, rows_per_step):
    client = loader_client(_layers_logdir(tmp_path, rows_per_step))
    assert client.ok("/heatmap", run="run", role="gradient", metric="health")["incomplete"] is None


def test_the_histogram_interval_is_exact_across_the_whole_int64_range():
    from gradhealth_plugin.reading import runs as runs_lib
    lo, hi = -(2 ** 63), 2 ** 63 - 1
    # Both steps are multiples of neither 2 nor 3 apart: the gap is 2^64 - 1 = 3 * 5 * 17 * 257 * 641 * 65537 * 6700417.
    assert runs_lib.logging_interval([np.array([lo, hi], dtype=np.int64)]) == float(2 ** 64 - 1)
    # Steps 2^62 apart on both sides of zero keep their common gap.
    steps = np.array([-(2 ** 62), 0, 2 ** 62], dtype=np.int64)
    assert runs_lib.logging_interval([steps, np.array([0, 10, 20], dtype=np.int64)]) == 2.0
