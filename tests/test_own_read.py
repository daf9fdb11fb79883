"""Reading gradhealth's own summaries into tables: one whole vector per step in step order is stacked in
one numpy call; anything else (a step logged twice, steps out of order, a short or odd tensor) takes the
step-by-step path, and both give the same table. A tensor that is no vector of the format's widths (too
short, too long, a matrix) is no data at its step, and a tag with no other is unreadable, saying why."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboard.data import provider

from gradhealth_plugin.reading import provider as provider_lib
from gradhealth_plugin.reading.runs import UnreadableSteps
from gradhealth_plugin.writing import format as fmt

WIDTH = len(fmt.FIELDS)


def _read(datums, unreadable_steps=None) -> tuple:
    out, walls, unreadable = {}, {}, {}
    # The method reads nothing of its reader: no data provider needed.
    provider_lib.Reader._own_tables(provider_lib.Reader.__new__(provider_lib.Reader), {"t": datums}, out, walls,
                                    unreadable, {} if unreadable_steps is None else unreadable_steps)
    return out.get("t"), walls.get((fmt.PLUGIN_NAME, "t")), unreadable


def _datum(step: int, vector, wall: float = 0.0):
    return provider.TensorDatum(step=step, wall_time=wall or 100.0 + step, numpy=np.asarray(vector))


def _vector(k: float) -> np.ndarray:
    return np.arange(WIDTH, dtype=np.float32) * k


def test_whole_vectors_in_step_order_read_as_written():
    (steps, values), walls, _ = _read([_datum(s, _vector(s + 1)) for s in (0, 5, 9)])
    assert steps.tolist() == [0, 5, 9] and walls.tolist() == [100.0, 105.0, 109.0]
    mean_at = fmt.FIELDS.index("mean")
    assert values["mean"].tolist() == [mean_at * 1.0, mean_at * 6.0, mean_at * 10.0]


STD, MEAN_ABS = fmt.FIELDS.index("std"), fmt.FIELDS.index("mean_abs")


# case -> datums, and the std and mean_abs read at steps 0 and 3
OTHER = {
    # The Python loader keeps both samples of a step written twice: the last written counts.
    "repeated_step": ([_datum(0, _vector(1)), _datum(3, _vector(2)), _datum(3, _vector(3), wall=200.0)],
                      [STD, 3.0 * STD], [MEAN_ABS, 3.0 * MEAN_ABS]),
    "out_of_order": ([_datum(3, _vector(2)), _datum(0, _vector(1))], [STD, 2.0 * STD], [MEAN_ABS, 2.0 * MEAN_ABS]),
    # A vector of another length is not the format's: its fields would land in the wrong places.
    "ragged": ([_datum(0, _vector(1)), _datum(3, _vector(2)[:5])], [STD, np.nan], [MEAN_ABS, np.nan]),
    # Version 1's statistics alone beside version 2's with a histogram.
    "both_versions": ([_datum(0, _vector(1)), _datum(3, np.append(_vector(2), np.ones(fmt.HISTOGRAM_BUCKETS)))],
                      [STD, 2.0 * STD], [MEAN_ABS, 2.0 * MEAN_ABS]),
}


@pytest.mark.parametrize("tensor, shape", [
    (_vector(1)[:5], "[5]"), (np.append(_vector(1), 7.0), f"[{WIDTH + 1}]"), (_vector(1).reshape(3, 5), "[3, 5]"),
    (np.zeros(0), "[0]"), (np.float64(3.0), "[]")])
def test_a_tensor_of_another_shape_at_every_step_is_unreadable(tensor, shape):
    table, _, unreadable = _read([_datum(0, tensor), _datum(3, tensor)])
    assert table is None
    assert unreadable["t"] == (f"the tensor at step 0 has shape {shape}, not a vector of {WIDTH} or "
                               f"{fmt.VECTOR_WIDTH} statistics")


@pytest.mark.parametrize("case", sorted(OTHER))
def test_other_datums_read_step_by_step(case):
    datums, std, mean_abs = OTHER[case]
    some = {}
    (steps, values), walls, unreadable = _read(datums, some)
    assert steps.tolist() == [0, 3] and not unreadable
    # The step whose vector is not the format's is said, as a histogram tag's unreadable steps are.
    assert some == ({"t": UnreadableSteps(
        steps=1, of=2, first_step=3, why="the tensor at step 3 has shape [5], not a vector of "
        f"{WIDTH} or {fmt.VECTOR_WIDTH} statistics", holds="statistics vector")} if case == "ragged" else {})
    np.testing.assert_array_equal(values["std"], std)
    np.testing.assert_array_equal(values["mean_abs"], mean_abs)
    if case == "repeated_step":
        assert walls.tolist() == [100.0, 200.0]


def test_text_is_unreadable():
    _, _, unreadable = _read([_datum(0, _vector(1)), _datum(1, np.array([b"a"] * WIDTH, dtype=object))])
    assert "holds text" in unreadable["t"]


@pytest.fixture(scope="module")
def watched_logdir(tmp_path_factory):
    """Run ``.``: gradhealth's torch watch() of a small model, every tag logged at every step."""
    from tests.conftest import _written_logdir

    return _written_logdir(tmp_path_factory, "torch_watch_blocks")


def test_tags_logged_at_the_same_steps_hold_one_read_only_step_array(loader_client, watched_logdir):
    """A long run's rows are mostly logged at the same steps: their tables share one array of them,
    read-only, instead of eight bytes a cell each; the answers are the same."""
    client = loader_client(watched_logdir)
    run = client.ok("/runs")["runs"][0]["run"]
    from tensorboard import context as tb_context

    rd, _ = client.plugin._analyzer.run(tb_context.RequestContext(), "", run)
    own = [r.table.steps for layer in rd.layers for r in layer.roles.values() if r.source == "gradhealth"]
    held = {}
    for steps in own:
        held.setdefault(steps.tobytes(), set()).add(id(steps))
        assert not steps.flags.writeable
    assert len(own) > 10 and all(len(ids) == 1 for ids in held.values()), [len(ids) for ids in held.values()]
    hm = client.ok("/heatmap", run=run, role="gradient")
    assert hm["steps"] == own[0].tolist() and all(s != 0 for row in hm["status"] for s in row)
