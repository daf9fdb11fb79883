"""A torch run whose gradients turn NaN, in headless Chromium inside a real TensorBoard: a cell whose
tensor held NaN/Inf is painted as such in a metric view (never as "no data" grey, nor by the finite
part's value), the detail panel says why such a step has no histogram and that its statistics are
NaN/Inf, and the distribution over steps marks those steps and says how many values were NaN/Inf."""

from __future__ import annotations

import os
import pathlib

import pytest

from tests.test_browser import CHROMIUM, Tab, _open_cell, _serve, browser, sync_api  # noqa: F401 - browser is a fixture

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
torch = pytest.importorskip("torch")

RUN = "nan"
STEPS = 40
BREAK = 20
FIRST = "0.weight"
LAST = "2.weight"
NONFINITE_RGB = [0xD7, 0x26, 0x3D]
NO_DATA_RGB = [0x9E, 0x9E, 0x9E]


def _write_nan_run(run_dir: pathlib.Path) -> None:
    """An MLP logged at every step; at step BREAK half of its first layer's gradient (64 of 128) is made NaN
    before the optimizer steps, so those weights are NaN and every gradient after is all NaN."""
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, str(run_dir), optimizer=optimizer, every_n_steps=1, first_steps=0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    for step in range(STEPS):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        if step == BREAK:
            with torch.no_grad():
                model[0].weight.grad[:8] = float("nan")
        optimizer.step()
    unwatch(handle)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("nan_logdir")
    _write_nan_run(logdir / RUN)
    yield from _serve(logdir, lambda runs: runs.get(RUN, {}).get("steps_kept") == STEPS)


@pytest.fixture(scope="module")
def tab(server, browser):  # noqa: F811 - the browser fixture, imported
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    t = Tab(page, server)
    t.open(f"gradhealth&p.gradhealth.run={RUN}")
    yield t
    page.close()


def test_a_metric_view_paints_nan_cells_apart_from_no_data(tab):
    before = tab.drawn()
    tab.ui.locator("select").nth(0).select_option("gradient")
    tab.wait_redraw(before)
    tab.set_metric("mean_abs")
    assert tab.pixel(".gh-hm-body", LAST, 10)[:3] not in (NONFINITE_RGB, NO_DATA_RGB)
    # Wholly NaN (no value at all) and partly NaN (a value of the finite part): both painted NaN/Inf.
    assert tab.pixel(".gh-hm-body", LAST, 30)[:3] == NONFINITE_RGB
    assert tab.pixel(".gh-hm-body", FIRST, BREAK)[:3] == NONFINITE_RGB
    legend = tab.ui.locator(".gh-legend")
    swatch = legend.locator(".gh-legend-item", has_text="NaN / Inf").locator(".gh-swatch")
    assert swatch.evaluate("s => getComputedStyle(s).backgroundColor") == "rgb(215, 38, 61)"
    assert legend.locator(".gh-legend-item", has_text="no data").count() == 1


def test_a_step_of_nan_alone_says_why_it_has_no_histogram(tab):
    _open_cell(tab, "gradient", LAST, 30)
    detail = tab.ui.locator(".gh-detail")
    detail.get_by_text("No histogram", exact=False).first.wait_for(timeout=10_000)
    text = detail.text_content()
    assert "every value of this tensor (16 of 16) was NaN or Inf" in text, text
    assert "exact statistics only" not in text
    # Its statistics have no value of finite numbers: the table says NaN/Inf, never "no data".
    row = detail.locator(".gh-metric-table tr", has=tab.ui.locator("th", has_text="mean abs"))
    assert row.locator("td.gh-num").text_content() == "NaN/Inf"


def test_the_distribution_marks_the_steps_that_held_nan(tab):
    _open_cell(tab, "gradient", FIRST, 10)
    detail = tab.ui.locator(".gh-detail")
    chart = detail.locator("svg", has=tab.ui.locator("title", has_text="distribution over steps"))
    chart.wait_for()
    marks = chart.locator(".gh-dist-nonfinite rect")
    # The chart may be drawn again as the rest of the row's steps arrive: wait for the whole row's marks.
    sync_api.expect(marks).to_have_count(STEPS - BREAK, timeout=10_000)
    first = chart.locator(f".gh-dist-nonfinite rect[data-step='{BREAK}']")
    assert first.locator("title").text_content().startswith(f"step {BREAK}: NaN/Inf: 64 of 128; finite values only: ")
    # The hover names the count where the pointer is (tried again should the chart be drawn anew meanwhile).
    readout = chart.locator(".gh-readout")
    for _ in range(10):
        box = first.bounding_box()
        tab.page.mouse.move(box["x"] + box["width"] / 2, box["y"] - 30)
        if readout.text_content().startswith(f"step {BREAK}: NaN/Inf: 64 of 128"):
            break
        tab.page.wait_for_timeout(200)
    assert readout.text_content().startswith(f"step {BREAK}: NaN/Inf: 64 of 128"), readout.text_content()
    assert "NaN/Inf" in detail.text_content()
