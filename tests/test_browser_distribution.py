"""A run logged with `watch()` in headless Chromium inside a real TensorBoard: its detail panel shows
the histogram gradhealth's own summaries carry, the distribution over steps as percentile bands, and
the histogram's counts on a log scale at a click (a ReLU output's zeros no longer hide the rest)."""

from __future__ import annotations

import os
import pathlib

import pytest

from tests.test_browser import CHROMIUM, Tab, _open_cell, _serve, browser  # noqa: F401 - browser is a fixture

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
torch = pytest.importorskip("torch")

RUN = "watched"
STEPS = 40
RELU = "1"


def _write_watched_run(run_dir: pathlib.Path) -> None:
    from torch import nn

    from gradhealth_plugin.torch import unwatch, watch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    handle = watch(model, str(run_dir), optimizer=optimizer, every_n_steps=10)
    g = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        x = torch.randn(64, 16, generator=g)
        loss = ((model(x) - 1) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    unwatch(handle)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("watched_logdir")
    _write_watched_run(logdir / RUN)
    # Every step of the first 30, then 30: 31 steps.
    yield from _serve(logdir, lambda runs: runs.get(RUN, {}).get("steps_kept") == 31)


@pytest.fixture(scope="module")
def tab(server, browser):  # noqa: F811 - the browser fixture, imported
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    t = Tab(page, server)
    t.open(f"gradhealth&p.gradhealth.run={RUN}")
    yield t
    page.close()


HEIGHTS = "Array.from(document.querySelectorAll('.gh-detail .gh-bar'), b => Number(b.getAttribute('height')))"


def _bar_heights(tab) -> list:
    return tab.frame.evaluate(f"() => {HEIGHTS}")


def test_a_watched_layer_shows_its_histogram_and_its_distribution(tab):
    _open_cell(tab, "activation", RELU, 20)
    detail = tab.ui.locator(".gh-detail")
    detail.locator(".gh-bar").first.wait_for()
    assert "exact statistics only" not in detail.text_content()
    heights = _bar_heights(tab)
    assert len(heights) >= 5
    # The band chart: four nested bands and the median, over the row's 31 steps.
    chart = detail.locator("svg", has=tab.ui.locator("title", has_text="distribution over steps"))
    chart.wait_for()
    assert chart.locator("path").count() == 5
    assert "31-69%" in detail.text_content()
    assert tab.frame.evaluate("() => document.querySelectorAll('.gh-detail .gh-selected-step').length") >= 1
    bad = tab.frame.evaluate("""() => Array.from(document.querySelectorAll('.gh-detail svg *'))
        .flatMap(n => Array.from(n.attributes)).filter(a => /NaN|Infinity/.test(a.value)).map(a => a.value)""")
    assert bad == []


def test_log_counts_lift_the_buckets_a_spike_at_zero_hides(tab):
    _open_cell(tab, "activation", RELU, 20)
    tab.ui.locator(".gh-detail .gh-bar").first.wait_for()
    linear = _bar_heights(tab)
    before = tab.frame.evaluate(f"() => {HEIGHTS}.join()")
    tab.ui.locator(".gh-detail label.gh-check", has_text="log counts").locator("input").check()
    tab.frame.wait_for_function(f"h => {HEIGHTS}.join() !== h", arg=before)
    logged = _bar_heights(tab)
    # The ReLU's zeros are the tallest bar either way; on a log scale the smallest bucket stands clear.
    assert len(logged) == len(linear) and logged.index(max(logged)) == linear.index(max(linear))
    assert min(logged) > 5 * max(min(linear), 0.5)


BARS = """() => Array.from(document.querySelectorAll('.gh-detail .gh-bar'), b => [
    Number(b.getAttribute('x')), Number(b.getAttribute('width')), b.querySelector('title').textContent])"""


def test_octave_buckets_are_drawn_on_equal_bins(tab):
    # A weight's own histogram: octaves of |x| of either sign. Drawn as they are, the outermost two
    # octaves took half the width each side and the inner ones a pixel.
    _open_cell(tab, "weight", "0.weight", 20)
    tab.ui.locator(".gh-detail .gh-bar").first.wait_for()
    bars = tab.frame.evaluate(BARS)
    assert len(bars) >= 8
    widths = [w for _, w, _ in bars]
    assert max(widths) - min(widths) <= 1.5, widths
    assert all("\u2248" in title for _, _, title in bars)  # spread counts are approximate, and say so


def test_no_console_errors(tab):
    assert tab.errors == []
