"""Finding rules that keep findings right on real trainings: the verdict over a sampled loss, a single
spike large enough to warn, and a learning-rate jump named as the cause of a blow-up."""

import contextlib
import io
import json

import numpy as np
import pytest

from gradhealth_plugin import cli


def _report(*argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["report", "--format", "json", *map(str, argv)])
    assert code == 0
    return json.loads(out.getvalue())


def _text_report(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["report", *map(str, argv)])
    assert code == 0
    return out.getvalue()


# --- the verdict when only the loss is sampled ---------------------------------------------------------

@pytest.fixture(scope="session")
def sampled_loss_only_logdir(tmp_path_factory):
    """A loss at each of 3,000 steps (more than TensorBoard keeps by default) beside gradients every 100
    steps (all kept): the rows are whole, the loss is not."""
    from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

    root = tmp_path_factory.mktemp("sampled_loss_only")
    base = normal_buckets(np.random.default_rng(4))
    write_run(root / "run", [event(s, scalar_value("loss", 2.0 / (1 + s / 300)),
                                   *([hist_value("gradients/dense/kernel", base)] if s % 100 == 0 else []))
                             for s in range(3000)])
    return root


def test_a_run_whose_loss_was_sampled_is_not_called_healthy(sampled_loss_only_logdir, loader_client):
    run = loader_client(sampled_loss_only_logdir).ok("/runs")["runs"][0]
    assert run["sampling"] is None and run["worst_status"] == "ok"
    (kept,) = [series["kept"] for series in run["scalars_sampling"]["series"]]
    assert run["verdict"] == f"no warnings in the {kept:,} loss points read of 3,000", run["verdict"]


def test_the_report_says_the_same_over_a_sampled_loss_and_healthy_when_every_point_is_read(
        sampled_loss_only_logdir):
    assert "run run: no warnings in the 1,000 loss points read of 3,000 - " in _text_report(
        sampled_loss_only_logdir)
    (run,) = _report(sampled_loss_only_logdir)["runs"]
    assert run["verdict"] == "no warnings in the 1,000 loss points read of 3,000"
    (every,) = _report(sampled_loss_only_logdir, "--all-steps")["runs"]
    assert every["scalars_sampling"] is None and every["verdict"] == "healthy"
