"""Cell health: how close a value lies to a rule's threshold (`health._closeness`), on the values a
tensor can hold, without a numpy warning."""

from __future__ import annotations

import warnings

import numpy as np

from gradhealth_plugin.analysis import health

# Zero, negative, the largest double, the smallest subnormal, NaN, infinity.
EDGES = np.array([0.0, -1.0, 1e308, 5e-324, np.nan, np.inf])


def test_closeness_on_a_logarithmic_scale_maps_every_value_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        above = health._closeness(EDGES, 1e-6, above=True, log=True)
        below = health._closeness(EDGES, 1e-6, above=False, log=True)
        large = health._closeness(EDGES, 1e3, above=False, log=True)
    # A ratio past float64's range is infinitely far past (2) or short of (0) the threshold; a negative
    # value or NaN has no place on a log scale (NaN, no data to the rule).
    np.testing.assert_array_equal(above, [0.0, np.nan, 2.0, 0.0, np.nan, 2.0])
    np.testing.assert_array_equal(below, [2.0, np.nan, 0.0, 2.0, np.nan, 0.0])
    np.testing.assert_array_equal(large, [2.0, np.nan, 0.0, 2.0, np.nan, 0.0])


def test_closeness_on_a_linear_scale_maps_every_value_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # (value - 0.5) / 0.5 passes float64's range at +-1e308.
        above = health._closeness(np.array([-1e308, 0.0, 0.25, 0.5, 1e308, np.nan]), 0.5, above=True, log=False)
    np.testing.assert_array_equal(above, [0.0, 0.0, 0.5, 1.0, 2.0, np.nan])
