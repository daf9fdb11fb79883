"""What the tab is sent to draw the run as it is: the run track, the cells each finding covers,
the quality of the health score, and layers named in model order.

The track route is asked under both of TensorBoard's loaders about crafted runs;
the coverage and the health score's quality are checked on every demo run, where
the heatmap's colours and the findings must agree cell for cell.
"""

from __future__ import annotations

import pathlib
import types

import numpy as np
import pytest

from gradhealth_plugin.analysis import limits
from gradhealth_plugin.serving import responses
from tests.test_bad_input import call, event, hist_value, normal_buckets, scalar_value, write_run

DEMO = pathlib.Path(__file__).resolve().parents[1] / "demo" / "runs"
# Fewer than the scalars any loader keeps (500 here), so the route is asked about every logged step.
STEPS = list(range(0, 400))
SPIKE_STEP = 277
NAN_STEPS = range(300, 311)
BIG = 2 ** 60


def _loss(step: int) -> float:
    if step in NAN_STEPS:
        return float("nan")
    return 1e6 if step == SPIKE_STEP else 2.0 / (1 + step / 100)


@pytest.fixture(scope="module")
def track_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("track")
    rng = np.random.default_rng(5)
    events = []
    for step in STEPS:
        values = [scalar_value("loss", _loss(step)), scalar_value("train/global_gradient_norm", 1.0 + step % 7),
                  scalar_value("learning_rate", 0.1 if step < 200 else 0.01)]
        if step % 20 == 0:
            values.append(hist_value("gradients/dense/kernel", normal_buckets(rng)))
        events.append(event(step, *values))
    # Keras' per-epoch loss: epochs 0 to 2, written when each epoch ended, long after steps 0 to 2.
    events += [event(epoch, scalar_value("epoch_loss", 1.0 / (1 + epoch)), wall_time=1_000_000.0 + 130 * (epoch + 1))
               for epoch in range(3)]
    write_run(root / "run", events)
    write_run(root / "big", [event(BIG + k, hist_value("gradients/a/kernel", normal_buckets(rng)),
                                   scalar_value("loss", float("inf") if k == 3 else 1.0 + k), wall_time=1_000_000.0 + k)
                             for k in range(6)])
    return root


def test_the_track_serves_loss_norm_and_learning_rate_on_the_layers_axis(track_logdir, loader_client):
    client = loader_client(track_logdir)
    series = {s["tag"]: s for s in client.ok("/track", run="run")["series"]}
    # Loss first, then the global gradient norm, then the learning rate.
    assert [s["kind"] for s in series.values()] == ["loss", "loss", "grad_norm_total", "learning_rate"]
    assert list(series)[2:] == ["train/global_gradient_norm", "learning_rate"]
    loss = series["loss"]
    assert loss["label"] == "loss" and series["learning_rate"]["label"] == "learning rate"
    assert loss["steps"] == STEPS and loss["steps_text"] == [str(s) for s in STEPS]
    assert loss["logged"] == len(STEPS) and loss["binned"] is False
    expected = [_loss(s) for s in STEPS]
    assert [v is None for v in loss["values"]] == [not np.isfinite(v) for v in expected]
    assert np.allclose([v for v in loss["values"] if v is not None], [v for v in expected if np.isfinite(v)], rtol=1e-6)
    assert loss["nonfinite"] == [[NAN_STEPS[0], NAN_STEPS[-1]]]
    assert loss["nonfinite_text"] == [[str(NAN_STEPS[0]), str(NAN_STEPS[-1])]]
    assert loss["scale"] == "log" and series["learning_rate"]["scale"] == "log"
    assert series["train/global_gradient_norm"]["scale"] == "linear"
    assert loss["axis"] == "row"
    # Written long after the steps it names: another step axis, which the tab does not draw over the heatmap.
    assert series["epoch_loss"]["axis"] == "other"


def test_the_track_names_steps_past_2_53_exactly(track_logdir, loader_client):
    client = loader_client(track_logdir)
    (loss,) = client.ok("/track", run="big")["series"]
    assert loss["steps_text"] == [str(BIG + k) for k in range(6)]
    assert loss["nonfinite_text"] == [[str(BIG + 3), str(BIG + 3)]]


def test_the_track_route_answers_bad_requests_with_json(track_logdir, plugin_client):
    client = plugin_client(track_logdir)
    assert call(client, "/track")[0] == 400
    assert call(client, "/track", run="nope")[0] == 404
    assert call(client, "/track", run="run")[0] == 200


def test_a_zoomed_track_sends_the_window_and_one_point_either_side(track_logdir, loader_client):
    client = loader_client(track_logdir)
    loss = next(s for s in client.ok("/track", run="run", start=250, end=320)["series"] if s["tag"] == "loss")
    assert loss["steps"] == list(range(249, 322))
    assert loss["nonfinite"] == [[NAN_STEPS[0], NAN_STEPS[-1]]]
    assert loss["logged"] == len(STEPS) and loss["binned"] is False
    assert loss["scale"] == "log"  # the whole series' scale: a zoom does not switch it
    before = next(s for s in client.ok("/track", run="run", end=100)["series"] if s["tag"] == "loss")
    assert before["steps"] == list(range(0, 102)) and before["nonfinite"] == []
    assert call(client, "/track", run="run", start=5, end=4)[0] == 400
    assert call(client, "/track", run="run", start="x")[0] == 400


def test_a_zoom_into_a_thinned_track_gets_every_point_of_the_window():
    # Longer than any loader keeps by default, so asked of the function with a small budget.
    steps = np.arange(0, 100_000, dtype=np.int64)
    rd = types.SimpleNamespace(run="r", scalar_series={"loss": (steps, np.sin(steps / 300.0) + 2)},
                               scalar_kinds={"loss": "loss"}, scalar_axes={"loss": True})
    coarse = responses.track(rd, bins=50)["series"][0]
    assert coarse["binned"] is True and len(coarse["steps"]) <= 3 * 50
    fine = responses.track(rd, bins=50, start=1000, end=1050)["series"][0]
    assert fine["binned"] is False and fine["steps"] == list(range(999, 1052))
    assert fine["logged"] == len(steps)


def test_a_long_series_keeps_every_spike_and_dip_when_thinned():
    rng = np.random.default_rng(0)
    steps = np.cumsum(rng.integers(1, 4, size=100_000)).astype(np.int64) + 2 ** 62
    values = 1.0 + rng.random(len(steps))
    # One-step spikes far enough apart to fall in different bins (a bin draws as one pixel column).
    spikes = np.arange(40) * 2_500 + rng.integers(0, 2_000, size=40)
    values[spikes] = 1e3
    values[12_345] = 1e-9
    values[50_000:51_000] = np.nan
    keep = responses.downsample(steps, values, 500)
    assert len(keep) <= 3 * 500 and np.all(np.diff(keep) > 0)
    assert set(spikes) <= set(keep.tolist()) and 12_345 in keep
    # A bin of nothing but NaN still sends a point, which breaks the line there.
    assert np.isnan(values[keep]).any()
    short = np.arange(10)
    assert responses.downsample(short, short.astype(float), 500).tolist() == short.tolist()


# --------------------------------------------------------------------------- the demo runs

@pytest.fixture(scope="module")
def demo(plugin_client):
    return plugin_client(DEMO)


def _demo_runs(client):
    return [r["run"] for r in client.ok("/runs")["runs"] if r.get("layers")]


def _covered(spans, steps):
    steps = np.asarray(steps, dtype=object)
    inside = np.zeros(len(steps), dtype=bool)
    for a, b in spans:
        inside |= np.array([a <= s <= b for s in steps], dtype=bool)
    return inside


def test_findings_cover_exactly_the_cells_the_heatmap_colours(demo):
    """Both ways, on every demo run and role: no warn or critical finding covers an ok cell, and every warn or
    critical cell lies in the steps a finding of that status covers on that row."""
    checked = 0
    for run in _demo_runs(demo):
        findings = demo.ok("/findings", run=run)["findings"]
        summary = next(r for r in demo.ok("/runs")["runs"] if r["run"] == run)
        for role in summary["roles"]:
            hm = demo.ok("/heatmap", run=run, role=role)
            names = hm["status_names"]
            status = np.array(hm["status"])
            explained = np.zeros(status.shape, dtype=bool)
            for f in findings:
                if f["severity"] == "info" or f["role"] not in (None, role):
                    continue
                # A finding gathered from several roles (one nonfinite for a run) covers each role's rows apart.
                for layer, spans in f.get("covers_by_role", {}).get(role, f["covers"]).items():
                    if layer not in hm["layers"]:
                        continue
                    i = hm["layers"].index(layer)
                    inside = _covered(spans, hm["steps"])
                    row = [names[c] for c in status[i]]
                    ok_inside = [hm["steps"][j] for j in np.flatnonzero(inside) if row[j] == "ok"]
                    assert not ok_inside, (run, role, f["kind"], layer, ok_inside[:5])
                    code = names.index(f["severity"])
                    explained[i] |= inside & (status[i] == code)
                    checked += 1
            bad = np.isin(status, [names.index("warn"), names.index("critical")])
            unexplained = np.argwhere(bad & ~explained)
            assert not len(unexplained), (run, role, [(hm["layers"][i], hm["steps"][j]) for i, j in unexplained[:5]])
    assert checked > 50


def test_a_covered_span_holds_only_its_layers_covered_steps(demo):
    """A span is a run of consecutive logged steps of its layer: a layer healthy between two spans keeps them apart."""
    f = next(f for f in demo.ok("/findings", run="exploding/unclipped")["findings"]
             if f["kind"] == "exploding_gradients")
    spans = f["covers"]["layer_0"]
    assert len(spans) > 1 and spans[0][0] == f["evidence"]["layers"]["layer_0"]["first_step"]
    assert f["covers_text"]["layer_0"] == [[str(a), str(b)] for a, b in spans]
    # The run-level norm the finding names is covered too: the track marks it.
    assert "train/global_gradient_norm" in f["covers"]


def test_the_health_score_is_exact_where_every_statistic_is(demo):
    own = demo.ok("/heatmap", run="vanishing/sigmoid", role="gradient")  # gradhealth's own summaries
    assert own["quality"] == "exact"
    assert {own["quality_names"][c] for row in own["quality_cells"] for c in row} == {"exact"}
    buckets = demo.ok("/heatmap", run="periodic/bad_batch", role="gradient")  # histograms only
    assert buckets["quality"] == "estimated"
    series = demo.ok("/series", run="vanishing/sigmoid", layer=own["layers"][0], metric="health")
    assert set(series["series"]["gradient"]["quality"]) == {"exact"}


def test_a_findings_layers_are_listed_in_model_order(demo):
    for run in _demo_runs(demo):
        order = {layer["name"]: layer["order"]
                 for r in demo.ok("/runs")["runs"] if r["run"] == run for layer in r["layers"]}
        for f in demo.ok("/findings", run=run)["findings"]:
            positions = [order.get(name, -1) for name in f["layers"]]
            assert positions == sorted(positions), (run, f["kind"], f["layers"])


def test_a_cell_between_a_histograms_steps_names_its_nearest_logged_ones(loader_client):
    # exploding/unclipped: exact statistics of layer_10's gradient at every step, grad_hist/layer_10 every 10th.
    client = loader_client(DEMO / "exploding")
    between = client.ok("/cell", run="unclipped", layer="layer_10", step="85", role="gradient")["roles"]["gradient"]
    assert between["histogram"] is None
    assert between["histogram_elsewhere"] == {"tag": "grad_hist/layer_10", "before": 80, "before_text": "80",
                                              "after": 90, "after_text": "90"}
    at = client.ok("/cell", run="unclipped", layer="layer_10", step="80", role="gradient")["roles"]["gradient"]
    assert at["histogram"] and at["histogram_step"] == 80 and at["histogram_elsewhere"] is None
    # The first step with none before it, the last with none after it.
    steps = client.ok("/series", run="unclipped", layer="layer_10", metric="max_abs", role="gradient")["series"]["gradient"]["steps"]
    tail = client.ok("/cell", run="unclipped", layer="layer_10", step=str(steps[-1]), role="gradient")["roles"]["gradient"]
    assert steps[-1] == 299 and tail["histogram"] is None
    assert (tail["histogram_elsewhere"]["before"], tail["histogram_elsewhere"]["after"]) == (290, None)


@pytest.fixture(scope="module")
def brief_vanishing_logdir(tmp_path_factory):
    """A torch MLP watched by gradhealth whose loss is weighted 0 at steps 20 and 21 (and 40 alone): every
    gradient is all zeros there, too few steps in a row for a vanishing finding."""
    torch = pytest.importorskip("torch")
    from gradhealth_plugin.torch import unwatch, watch

    root = tmp_path_factory.mktemp("brief_vanishing")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, str(root / "run"), optimizer=opt, every_n_steps=1, first_steps=0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    for step in range(60):
        weight = 0.0 if step in (20, 21, 40) else 1.0
        loss = weight * torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    unwatch(handle)
    return root


def test_an_ok_cell_where_a_rule_held_too_briefly_says_so(brief_vanishing_logdir, loader_client):
    client = loader_client(brief_vanishing_logdir)
    found = client.ok("/findings", run="run")["findings"]
    assert [f for f in found if f["kind"] == "vanishing_gradients"] == []
    cell = client.ok("/cell", run="run", layer="0.weight", step="21", role="gradient")["roles"]["gradient"]
    assert (cell["status"], cell["rule"]) == ("ok", "vanishing_gradients"), cell
    assert cell["held"] == {"kind": "vanishing_gradients", "steps_in_a_row": 2, "steps_needed": 5, "note": None,
                            "finding": None, "not_judged": False,
                            "text": "vanishing gradients at this step, one of 2 logged steps in a row; a finding needs 5 "
                                    "logged steps in a row"}
    alone = client.ok("/cell", run="run", layer="0.weight", step="40", role="gradient")["roles"]["gradient"]
    assert alone["held"]["text"].startswith("vanishing gradients at this step only;"), alone["held"]
    # A cell where no rule fired says nothing more than ok; the heatmap names the rule where it held.
    plain = client.ok("/cell", run="run", layer="0.weight", step="30", role="gradient")["roles"]["gradient"]
    assert (plain["status"], plain["rule"], plain["held"]) == ("ok", "", None)
    assert plain["rule_read"] is None
    h = client.ok("/heatmap", run="run", role="gradient", metric="health")
    row, status = h["layers"].index("0.weight"), h["status_names"]
    named = {h["steps"][j]: (status[h["status"][row][j]], rule) for j, rule in enumerate(h["rules"][row]) if rule}
    assert named == {20: ("ok", "vanishing_gradients"), 21: ("ok", "vanishing_gradients"),
                     40: ("ok", "vanishing_gradients")}, named


def test_a_cell_says_what_the_rule_that_fired_there_read(brief_vanishing_logdir, loader_client):
    client = loader_client(brief_vanishing_logdir)
    cell = client.ok("/cell", run="run", layer="0.weight", step="21", role="gradient")["roles"]["gradient"]
    # Vanishing gradients has two cell rules: the fraction of values near zero, and mean |x|, the kind's chart
    # metric. An all-zero gradient holds both; the first, the fraction, is the one that fired.
    assert cell["rule_read"] == {"kind": "vanishing_gradients", "metric": "small_fraction", "abs": False,
                                 "value": 1.0, "quality": "exact", "threshold": "vanishing_fraction",
                                 "limit": limits.DEFAULTS["vanishing_fraction"].value, "side": "above"}, cell["rule_read"]
    assert cell["rule_read"]["value"] == cell["metrics"]["small_fraction"]["value"]
    # The update ratio's two rules read one statistic against two thresholds: here, barely moving.
    weight = client.ok("/cell", run="run", layer="0.weight", step="21", role="weight")["roles"]["weight"]
    assert weight["rule_read"] == {"kind": "update_ratio", "metric": "update_ratio", "abs": False, "value": 0.0,
                                   "quality": "exact", "threshold": "update_ratio_low",
                                   "limit": limits.DEFAULTS["update_ratio_low"].value, "side": "below"}, weight


# `logdirs.torch_nan_loss_after_histograms`: histograms every 10 steps to step 150 (torch refuses NaN ones after),
# the loss every step to 299, NaN from step 157.
LAYERS_LAST = 150
LOSS_NAN_FROM = 157
LOSS_LAST = 299


def test_a_window_past_the_layers_last_step_is_empty_and_names_the_layers_last_step(torch_nan_loss_logdir,
                                                                                    loader_client):
    client = loader_client(torch_nan_loss_logdir)
    whole = client.ok("/heatmap", run=".", role="gradient")
    assert whole["steps"][-1] == LAYERS_LAST
    # Every answer names the role's first and last step in the whole run, whatever its window.
    ends = {"first_step": 0, "first_step_text": "0", "last_step": LAYERS_LAST, "last_step_text": str(LAYERS_LAST)}
    assert {k: whole["window"][k] for k in ends} == ends
    for layout in ("rows", "compact"):
        for columns in (None, 4):
            params = {"start": LAYERS_LAST + 10, "end": LOSS_LAST, "layout": layout}
            if columns:
                params["columns"] = columns
            past = client.ok("/heatmap", run=".", role="gradient", **params)
            assert past["layers"] == whole["layers"] and past["steps"] == [] and past["steps_text"] == []
            assert past["window"]["steps"] == 0 and past["binned"] is False
            assert {k: past["window"][k] for k in ends} == ends
            if layout == "rows":
                assert past["status"] == [[] for _ in whole["layers"]]
    # A window across the last histogram: its steps up to it, binned to the budget.
    across = client.ok("/heatmap", run=".", role="gradient", start=0, end=LOSS_LAST, columns=3)
    assert across["binned"] is True and len(across["steps"]) <= 3
    assert across["steps_last_text"][-1] == str(LAYERS_LAST) and across["window"]["last_step"] == LAYERS_LAST


def test_the_track_runs_past_the_layers_last_step_with_its_nan_steps(torch_nan_loss_logdir, loader_client):
    client = loader_client(torch_nan_loss_logdir)
    (loss,) = client.ok("/track", run=".")["series"]
    assert loss["tag"] == "loss" and loss["axis"] == "row"
    assert loss["steps"] == list(range(LOSS_LAST + 1))
    assert loss["nonfinite"] == [[LOSS_NAN_FROM, LOSS_LAST]]
    # Zoomed past the layers: the window's points and the one before it, still NaN.
    (past,) = client.ok("/track", run=".", start=LAYERS_LAST + 10, end=LOSS_LAST)["series"]
    assert past["steps"] == list(range(LAYERS_LAST + 9, LOSS_LAST + 1))
    assert past["nonfinite"] == [[LAYERS_LAST + 9, LOSS_LAST]]
    # The finding the tab lists and marks on the track, with its steps.
    (found,) = client.ok("/findings", run=".")["findings"]
    assert found["kind"] == "nonfinite" and found["layers"] == ["loss"]
    assert (found["first_step"], found["last_step"]) == (LOSS_NAN_FROM, LOSS_LAST)
    assert found["covers"] == {"loss": [[LOSS_NAN_FROM, LOSS_LAST]]}


def test_an_update_ratio_bound_of_0_is_sent_not_judged_and_sets_no_end_of_the_scale(demo):
    # Weights alone (PyTorch histograms): between two steps whose weights' histograms show no change bigger than
    # they resolve, the proven lower bound of the update ratio is 0, which proves nothing. The answers mark such
    # a value `not_judged`, so the tab paints it as not judged, and it is no end of the colour scale.
    run = "dead_relu/relu"
    full = demo.ok("/heatmap", run=run, role="weight", metric="update_ratio")
    names = full["quality_names"]
    cells = [(full["layers"][i], full["steps"][j], v, names[q])
             for i, (values, codes) in enumerate(zip(full["values"], full["quality_cells"]))
             for j, (v, q) in enumerate(zip(values, codes)) if v is not None]
    assert {q for *_, v, q in cells if v == 0} == {"not_judged"}, cells
    assert {q for *_, v, q in cells if v > 0} == {"lower_bound"}, cells
    assert full["not_judged_cells"] is True
    # Said beside the bounds' quality, as NaN/Inf steps are: the summary words the values that were had.
    assert full["quality"] == "lower_bound" and full["qualities"] == ["lower_bound"]
    window = demo.ok("/heatmap", run=run, role="weight", metric="update_ratio", rows="0:99")
    judged = [v for *_, v, q in cells if q != "not_judged"]
    assert window["value_range"]["finite"] == [min(judged), max(judged)] and min(judged) > 0
    # The cell and the series say it too.
    layer, step, _, _ = next(c for c in cells if c[3] == "not_judged")
    cell = demo.ok("/cell", run=run, layer=layer, step=step, role="weight")["roles"]["weight"]
    assert cell["metrics"]["update_ratio"] == {"value": 0.0, "quality": "not_judged"}
    series = demo.ok("/series", run=run, layer=layer, metric="update_ratio", role="weight")["series"]["weight"]
    assert series["quality"][series["steps"].index(step)] == "not_judged"
    # Only the update ratio's bound: another statistic's 0 keeps its own quality.
    assert "not_judged" not in {m["quality"] for name, m in cell["metrics"].items() if name != "update_ratio"}
