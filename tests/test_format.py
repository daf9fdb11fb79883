"""The statistics vectors gradhealth writes, read back into a metric table's columns."""

from __future__ import annotations

import numpy as np

from gradhealth_plugin.analysis import metrics
from gradhealth_plugin.writing import format as fmt


def _vectors(n: int, rng) -> np.ndarray:
    """`n` steps of one gradient tensor's vectors: a fixed count, no update ratio, nothing non-finite."""
    v = np.zeros((n, fmt.VECTOR_WIDTH))
    field = {name: i for i, name in enumerate(fmt.FIELDS)}
    v[:, field["count"]] = 4096
    v[:, field["update_ratio"]] = np.nan
    for name in ("mean", "std", "l2", "max_abs"):
        v[:, field[name]] = rng.lognormal(size=n)
    v[3, field["nan_count"]] = 2  # one step with NaN in it
    v[:, field["min"]] = -0.0
    v[5, field["min"]] = 0.0  # equal to -0.0, but not the same value
    return v


def test_a_column_of_one_repeated_value_is_held_once_and_the_vectors_are_not_held():
    rng = np.random.default_rng(0)
    vectors = _vectors(1000, rng)
    values = fmt.vectors_to_table_values(vectors.astype(np.float32))
    field = {name: i for i, name in enumerate(fmt.FIELDS)}
    for name in ("count", "update_ratio", "zero_fraction", "kurtosis"):
        assert values[name].strides == (0,), name  # one value, whatever the run's length
    for name in ("mean", "std", "l2", "max_abs", "nonfinite", "min"):
        assert values[name].strides == (8,) and values[name].base is None, name
    for name in fmt.TABLE_FIELDS:
        np.testing.assert_array_equal(values[name], vectors[:, field[name]].astype(np.float32).astype(np.float64))
    assert values["nonfinite"][3] == 2 and values["nonfinite"].sum() == 2
    assert np.signbit(values["min"]).tolist() == [i != 5 for i in range(1000)]
    assert not any(v.flags.writeable for v in values.values())


def test_an_exact_table_holds_the_values_read_and_one_quality_code_per_column_without_gaps():
    rng = np.random.default_rng(1)
    values = fmt.vectors_to_table_values(_vectors(50, rng))
    values["mean"] = np.where(np.arange(50) == 7, np.nan, values["mean"])  # a gap
    table = metrics.merge_exact(metrics.empty_table(), np.arange(0, 500, 10), values)
    assert table.values["std"] is not values["std"] and np.shares_memory(table.values["std"], values["std"])
    assert table.quality["std"].strides == (0,) and set(table.quality["std"]) == {metrics.EXACT}
    assert table.quality["update_ratio"].strides == (0,) and set(table.quality["update_ratio"]) == {metrics.NO_DATA}
    assert table.quality["mean"].tolist() == [metrics.NO_DATA if i == 7 else metrics.EXACT for i in range(50)]
    # The same table as merged the general way, onto a table that has rows.
    general = metrics.merge_exact(metrics.MetricTable(np.array([10**6]), {}, {}), np.arange(0, 500, 10), values)
    for name, column in table.values.items():
        np.testing.assert_array_equal(column, general.values[name][:-1])
        np.testing.assert_array_equal(table.quality[name], general.quality[name][:-1])
