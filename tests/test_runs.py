"""reading/runs.py: the run's step axes, grouped by what they hold."""

import numpy as np

from gradhealth_plugin.reading import runs


def test_equal_arrays_groups_by_contents_whether_shared_or_not():
    shared = np.arange(5, dtype=np.int64)
    same_values = np.arange(5, dtype=np.int64)  # equal, another array
    other_dtype = np.arange(5, dtype=np.int32)  # equal values, another dtype: another axis
    longer = np.arange(6, dtype=np.int64)
    arrays = [longer, shared, other_dtype, shared, same_values, longer.copy()]
    assert runs.equal_arrays(arrays) == [[0, 5], [1, 3, 4], [2]]


def test_equal_arrays_of_nothing_is_no_group():
    assert runs.equal_arrays([]) == []
