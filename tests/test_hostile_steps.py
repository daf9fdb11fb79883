"""Steps as the routes take them: the ``step`` parameter is an optional '-' and ASCII digits.

Python's int() also reads " 5", "1_000", "+5" and other scripts' digits; the
routes answer 400 for those. Each runs under TensorBoard's Python loader and
its Rust data server.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_bad_input import call, event, hist_value, normal_buckets, write_run

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
