"""A torch run whose loss goes on, NaN, past its last histogram, in headless Chromium inside a real
TensorBoard: the step axis runs to the loss's last step, the heatmap's columns past the layers' last step
are drawn and named as not logged (never as cells, nor as blank canvas), the track draws the loss's NaN
stretch there, a zoom into that stretch shows it, and the finding about it is marked on the track."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.test_browser import CHROMIUM, FRAME, Tab, _serve, _shots, browser  # noqa: F401 - browser is a fixture
from tests.test_tab_answers import LAYERS_LAST, LOSS_LAST, LOSS_NAN_FROM

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")

RUN = "nan_loss"
# The "not logged" stripes: --gh-panel behind --gh-border lines (and their antialiased blend).
PANEL = (0xF5, 0xF5, 0xF5)
STRIPE = (0xD0, 0xD0, 0xD0)


@pytest.fixture(scope="module")
def server(tmp_path_factory, torch_nan_loss_logdir):
    logdir = tmp_path_factory.mktemp("nan_loss_served")
    shutil.copytree(torch_nan_loss_logdir, logdir / RUN)
    yield from _serve(logdir, lambda runs: runs.get(RUN, {}).get("last_step") == LOSS_LAST)


@pytest.fixture(scope="module")
def tab(server, browser):  # noqa: F811 - the browser fixture, imported
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    t = Tab(page, server)
    t.open(f"gradhealth&p.gradhealth.run={RUN}")
    t.ui.locator(".gh-track-nonfinite").first.wait_for(timeout=20_000)
    yield t
    page.close()


def _body_pixels(tab, client_x: float) -> list:
    """RGB of the heatmap body's pixels down the column at a client x, one per row of cells."""
    return tab.frame.evaluate(
        """(cx) => {
            const canvas = document.querySelector(".gh-hm-body");
            const r = canvas.getBoundingClientRect();
            const k = canvas.width / r.width;
            const rows = window.__gradhealth.rowNames().length;
            const cellH = window.__gradhealth.rowAt(r.top + 1).cellH;
            const ctx = canvas.getContext("2d");
            return Array.from({length: rows}, (_, i) => Array.from(ctx.getImageData(
                Math.floor((cx - r.left) * k), Math.floor((i + 0.5) * cellH * k), 1, 1).data).slice(0, 3));
        }""", client_x)


def _band(tab):
    """Client x range of the track's NaN band of the loss, and the plot's right edge."""
    band = tab.ui.locator(".gh-track-nonfinite[data-first]").first
    first, last = int(band.get_attribute("data-first")), int(band.get_attribute("data-last"))
    box = band.bounding_box()
    plot = tab.ui.locator(".gh-track-bg").first.bounding_box()
    return first, last, box, plot


def test_the_axis_runs_to_the_loss_and_the_columns_past_the_layers_are_not_logged(tab):
    summary = tab.ui.locator(".gh-summary")
    expected = f"no gradient data after step {LAYERS_LAST}; loss to {LOSS_LAST}"
    tab.frame.wait_for_function(f"document.querySelector('.gh-summary').textContent.includes({expected!r})")
    assert f"last {LAYERS_LAST}" in summary.text_content()
    # The axis names steps past the layers' last, up to the loss's.
    named = [int(s) for s in tab.frame.evaluate("window.__gradhealth.axisSteps()")]
    assert max(named) > LAYERS_LAST and max(named) <= LOSS_LAST, named
    # The loss's NaN stretch is drawn inside the plot, from its first NaN step to its last step.
    first, last, box, plot = _band(tab)
    assert (first, last) == (LOSS_NAN_FROM, LOSS_LAST)
    assert box["width"] > plot["width"] / 3 and box["x"] + box["width"] <= plot["x"] + plot["width"] + 2
    frame = tab.page.locator(FRAME).bounding_box()
    x = box["x"] + box["width"] / 2 - frame["x"]  # in the frame's coordinates, as the canvas reads them
    pixels = _body_pixels(tab, x)
    # Every row there is striped "not logged": neither a status colour, nor no-data grey, nor blank.
    assert all(p[0] == p[1] == p[2] and STRIPE[0] <= p[0] <= PANEL[0] for p in pixels), pixels
    assert PANEL in [tuple(p) for p in pixels + _body_pixels(tab, x + 3)]
    # Hovered, it says so with the layers' last step.
    y = frame["y"] + tab.frame.evaluate("document.querySelector('.gh-hm-body').getBoundingClientRect().top") + 5
    tab.page.mouse.move(frame["x"] + x, y)
    tip = tab.ui.locator(".gh-tooltip")
    tip.wait_for(state="visible")
    assert f"not logged: no gradient data after step {LAYERS_LAST}" in tip.text_content()
    tab.page.screenshot(path=str(_shots() / "nan_loss_past_layers.png"))
    assert tab.errors == []


def test_a_zoom_past_the_layers_shows_the_nan_loss_over_columns_not_logged(tab):
    try:
        tab.frame.evaluate(f"window.__gradhealth.zoomTo([{LAYERS_LAST + 20}, {LOSS_LAST}])")
        tab.frame.wait_for_function("window.__gradhealth.viewState.zoom !== null")
        tab.page.wait_for_timeout(300)
        named = [int(s) for s in tab.frame.evaluate("window.__gradhealth.axisSteps()")]
        assert named and all(LAYERS_LAST + 20 <= s <= LOSS_LAST for s in named), named
        first, last, box, plot = _band(tab)
        # The window is all NaN loss: the band spans the plot.
        assert box["width"] >= plot["width"] - 4
        frame = tab.page.locator(FRAME).bounding_box()
        pixels = _body_pixels(tab, plot["x"] + plot["width"] / 2 - frame["x"])
        assert all(p[0] == p[1] == p[2] and STRIPE[0] <= p[0] <= PANEL[0] for p in pixels), pixels
        tab.page.screenshot(path=str(_shots() / "nan_loss_zoomed.png"))
    finally:
        tab.frame.evaluate("window.__gradhealth.zoomTo(null)")
    assert tab.errors == []


def test_the_nan_loss_finding_is_listed_with_its_steps_and_marked_on_the_track(tab):
    item = tab.ui.locator("li.gh-finding", has_text="NaN")
    assert f"from step {LOSS_NAN_FROM} to step {LOSS_LAST}" in item.text_content()
    item.click()
    tab.frame.wait_for_function("window.__gradhealth.viewState.finding !== ''")
    mark = tab.ui.locator(".gh-track-mark[data-kind=nonfinite][data-tag=loss]")
    assert mark.get_attribute("aria-pressed") == "true"
    span = mark.locator(".gh-track-span")
    assert (span.get_attribute("data-first"), span.get_attribute("data-last")) == (str(LOSS_NAN_FROM), str(LOSS_LAST))
    box, plot = span.bounding_box(), tab.ui.locator(".gh-track-bg").first.bounding_box()
    assert box["width"] > plot["width"] / 3 and box["x"] + box["width"] <= plot["x"] + plot["width"] + 2
    assert tab.errors == []
