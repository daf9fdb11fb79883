"""The compact layout's packed numbers: values as each double's top 24 bits (`f64top24`), step offsets
as unsigned integers of the fewest bytes; read back here from the documented format alone."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest

from gradhealth_plugin.serving import responses
from tests.test_bad_input import event, hist_value, normal_buckets, write_run
from tests.test_heatmap_lod import (_from_compact, _from_compact_window, assert_same_cells, decode_offsets,
                                    decode_values)

# 13 significant bits: a value through the encoding is within half a unit of the 13th bit of it.
RELATIVE = 2.0 ** -13
SMALLEST_SUBNORMAL = 5e-324
SMALLEST_NORMAL = 2.2250738585072014e-308
LARGEST = 1.7976931348623157e308


def _through(values, none=None) -> list:
    """`values` through the compact layout's values and back, as a reader of the answer decodes them."""
    values = np.asarray(values, dtype=np.float64)
    codes = responses.top24(values, none)
    return decode_values(base64.b64encode(responses.top24_bytes(codes)).decode("ascii"))


def test_awkward_values_round_trip():
    below_two = 2.0 - 2.0 ** -20  # rounds up across a power of two, to 2 exactly
    values = [0.0, -0.0, 1e-300, -1e-300, 1e300, 1e-50, math.nan, math.inf, -math.inf, 1.0, -2.5,
              below_two, -below_two, SMALLEST_NORMAL, 3 * SMALLEST_SUBNORMAL * 2 ** 40, LARGEST, -LARGEST, 0.0]
    none = np.zeros(len(values), dtype=bool)
    none[-1] = True  # a cell without a value: null, not 0 nor NaN
    back = _through(values, none)
    assert back[-1] is None
    assert back[0] == 0.0 and math.copysign(1, back[0]) == 1
    assert back[1] == 0.0 and math.copysign(1, back[1]) == -1
    assert math.isnan(back[6]) and back[7] == math.inf and back[8] == -math.inf
    assert back[9] == 1.0 and back[10] == -2.5
    assert back[11] == 2.0 and back[12] == -2.0
    # The smallest normal and a subnormal keep their bits (their low 40 bits are zero).
    assert back[13] == SMALLEST_NORMAL and back[14] == 3 * SMALLEST_SUBNORMAL * 2 ** 40
    # Far magnitudes keep 4 significant digits (float32 would make 1e-300 and 1e-50 zero, 1e300 infinite).
    for k in (2, 3, 4, 5):
        assert abs(back[k] - values[k]) <= RELATIVE * abs(values[k]), (values[k], back[k])
    # The largest doubles stay finite: rounding never makes a value infinite.
    assert math.isfinite(back[15]) and back[15] > 1.79e308 and back[16] == -back[15]


def test_every_magnitude_keeps_thirteen_significant_bits():
    rng = np.random.default_rng(3)
    # Normal doubles of every exponent, both signs.
    x = rng.uniform(1, 2, 20_000) * 2.0 ** rng.integers(-1022, 1023, 20_000) * rng.choice([-1, 1], 20_000)
    back = np.array(_through(x))
    assert np.all(np.abs(back - x) <= RELATIVE * np.abs(x))
    assert np.all(np.sign(back) == np.sign(x))
    # Subnormals: within half the step of the encoding there (2**-1034).
    tiny = rng.uniform(0, SMALLEST_NORMAL, 1000)
    assert np.all(np.abs(np.array(_through(tiny)) - tiny) <= 2.0 ** -1035)


def test_rounding_is_to_the_nearest_ties_to_even():
    one_ulp = 2.0 ** -12  # the encoding's last bit at 1.0
    assert _through([1 + one_ulp / 2]) == [1.0]  # a tie, to the even code
    assert _through([1 + 1.5 * one_ulp]) == [1 + 2 * one_ulp]  # a tie, to the even code
    assert _through([1 + one_ulp / 2 + 2.0 ** -40]) == [1 + one_ulp]
    assert _through([1 + one_ulp / 2 - 2.0 ** -40]) == [1.0]


@pytest.mark.parametrize("largest, width", [(0, 1), (255, 1), (256, 2), (65535, 2), (65536, 4),
                                            (2 ** 32, 8)])
def test_step_offsets_take_the_fewest_bytes_that_hold_them(largest, width):
    offsets = np.array([[0, largest], [1, 2]], dtype=np.int64)
    packed, got = responses.packed_offsets(offsets)
    assert got == width
    assert decode_offsets(base64.b64encode(packed).decode("ascii"), got) == [0, largest, 1, 2]


def test_step_offsets_past_two_to_the_53_are_exact():
    # A bin wider than 2**53 steps: the offsets arrive as decimal strings and go as 8 bytes.
    offsets = np.array([["0", str(2 ** 63 + 5)], [str(2 ** 53 + 1), "7"]], dtype=object)
    packed, width = responses.packed_offsets(offsets)
    assert width == 8
    assert decode_offsets(base64.b64encode(packed).decode("ascii"), width) == [0, 2 ** 63 + 5, 2 ** 53 + 1, 7]


@pytest.fixture(scope="module")
def far_run(tmp_path_factory):
    """Gradients at 1e-50 (float32 would flush them to 0), at 1e+30, and one NaN step; 60 steps."""
    rng = np.random.default_rng(8)
    logdir = tmp_path_factory.mktemp("far_run")
    nan = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    events = [event(s, hist_value("gradients/tiny/kernel", normal_buckets(rng, scale=1e-50)),
                    hist_value("gradients/huge/kernel", normal_buckets(rng, scale=1e30)),
                    hist_value("gradients/plain/kernel", nan if s == 17 else normal_buckets(rng)))
              for s in range(60)]
    write_run(logdir / "far", events)
    return logdir


def test_the_compact_values_are_the_rows_values_within_four_digits(far_run, loader_client):
    client = loader_client(far_run)
    for metric in ("health", "max_abs", "l2", "mean", "std"):
        for params in ({}, {"columns": 25}, {"rows": "0:1", "blocks": ""}):
            plain = client.ok("/heatmap", run="far", role="gradient", metric=metric, **params)
            compact = client.ok("/heatmap", run="far", role="gradient", metric=metric, layout="compact", **params)
            assert compact["value_encoding"] == "f64top24"
            assert ("step_offset_bytes" in compact) == ("columns" in params)
            if "columns" in params:
                assert compact["step_offset_bytes"] == 1  # bins of 3 steps: offsets 0 to 2
            decoded = _from_compact_window(compact) if "rows" in params else _from_compact(compact)
            assert_same_cells(decoded, plain, (metric, params))
    # The tiny layer's values are there, not zero; the NaN step has no value in either layout.
    plain = client.ok("/heatmap", run="far", role="gradient", metric="max_abs")
    values = _from_compact(client.ok("/heatmap", run="far", role="gradient", metric="max_abs", layout="compact"))
    tiny, plain_row = plain["layers"].index("tiny/kernel"), plain["layers"].index("plain/kernel")
    assert all(1e-52 < v < 1e-48 for v in values["values"][tiny])
    assert values["values"][plain_row][17] is None and plain["values"][plain_row][17] is None
    assert sum(v is None for row in values["values"] for v in row) == 1
