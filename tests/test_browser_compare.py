"""Compare and a sweep's run names in headless Chromium inside a real TensorBoard.

A learning-rate sweep as a TF2 custom loop logs it (`tf.summary.histogram` every 10 steps, a loss every
step): `lr_1e-1` and `lr_1e-3` to step 990, `lr_1e-2` stopped at step 590. Compared, two runs of different
lengths share one step axis: the same step at the same x in both heatmaps, and the shorter run's columns
past its last step drawn as not logged. Run names break only between their parts ("lr_" / "1e-3"), never
inside the number, in the run list and in the sweep table.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

from tests.test_browser import CHROMIUM, SCREENSHOTS as SHOTS, Tab, _serve, browser  # noqa: F401 - browser is a fixture

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")

LAST = {"lr_1e-1": 990, "lr_1e-2": 590, "lr_1e-3": 990}
LAYERS = {"dense/kernel": (16, 8), "dense/bias": (8,), "dense_1/kernel": (8, 4), "dense_1/bias": (4,)}
LAYER = "dense/kernel"


def _write_sweep(root: pathlib.Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    rng = np.random.default_rng(11)
    for run, last in LAST.items():
        lr = float(run.split("_")[1])
        writer = tf.summary.create_file_writer(str(root / run))
        with writer.as_default():
            for step in range(last + 1):
                tf.summary.scalar("loss", 1.0 / (1.0 + lr * step), step=step)
                if step % 10:
                    continue
                for name, shape in LAYERS.items():
                    tf.summary.histogram(f"gradients/{name}", rng.normal(0.0, 1e-2, size=shape), step=step)
                    # Glorot's scale, as Keras initialises a kernel: no finding about the start.
                    std = np.sqrt(2.0 / sum(shape)) if len(shape) == 2 else 1e-3
                    tf.summary.histogram(f"weights/{name}", rng.normal(0.0, std, size=shape), step=step)
        writer.close()


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("lr_sweep")
    _write_sweep(logdir)
    yield from _serve(logdir, lambda runs: all(runs.get(r, {}).get("steps_kept") == LAST[r] // 10 + 1 for r in LAST))


@pytest.fixture
def page(browser):  # noqa: F811 - the browser fixture, imported
    p = browser.new_page(viewport={"width": 1200, "height": 900})
    yield p
    p.close()


def _plot_x(tab, step, view):
    """A cell's centre as CSS pixels from the left of its view's plot (the label column is as wide in both)."""
    return tab.frame.evaluate("""([s, v]) => {
        const c = window.__gradhealth.cellCenter('dense/kernel', s, v);
        return c && c.x - window.__gradhealth.plotBox(v).left;
    }""", [step, view])


def test_compared_runs_of_different_lengths_share_one_step_axis(sweep_server, page):
    tab = Tab(page, sweep_server)
    tab.open("gradhealth&p.gradhealth.run=lr_1e-1&p.gradhealth.cmp=lr_1e-2&p.gradhealth.role=gradient")
    tab.ui.locator(".gh-hm-caption", has_text="lr_1e-2").wait_for(timeout=20_000)
    # The longer run is 0-990, the shorter 0-590: each step at one x in both, the shorter's last well short of the end.
    for step in (0, 300, 590):
        a, b = _plot_x(tab, step, 0), _plot_x(tab, step, 1)
        assert a is not None and b is not None and abs(a - b) < 0.5, (step, a, b)
    box = tab.frame.evaluate("window.__gradhealth.plotBox(1)")
    width = box["width"]
    assert _plot_x(tab, 590, 1) < 0.65 * width
    assert tab.frame.evaluate("window.__gradhealth.axisSteps(0)") == tab.frame.evaluate("window.__gradhealth.axisSteps(1)")
    # Past its last step the shorter run's columns are not logged, and the hover names the run and the step.
    frame = page.locator("iframe[src*='plugin_entry.html']").bounding_box()
    port = tab.ui.locator(".gh-hm-port").nth(1).bounding_box()
    page.mouse.move(frame["x"] + box["left"] + 0.9 * width, port["y"] + 5)
    tip = tab.ui.locator(".gh-tooltip")
    tip.wait_for(state="visible", timeout=10_000)
    assert "lr_1e-2" in tip.text_content() and "not logged" in tip.text_content(), tip.text_content()
    # A zoom applies to both runs: the window's steps stay at one x.
    tab.frame.evaluate("window.__gradhealth.zoomTo([400, 700])")
    page.wait_for_timeout(500)
    for step in (400, 550, 590):
        a, b = _plot_x(tab, step, 0), _plot_x(tab, step, 1)
        assert a is not None and b is not None and abs(a - b) < 0.5, (step, a, b)
    assert tab.frame.evaluate("window.__gradhealth.axisSteps(0)") == tab.frame.evaluate("window.__gradhealth.axisSteps(1)")
    page.screenshot(path=str(SHOTS / "compare_zoomed.png"))
    assert not tab.errors, tab.errors


def _lines_per_piece(tab, selector):
    """Per piece of the run names `selector` finds (text between two line-break chances), its text and the lines it takes."""
    return tab.frame.evaluate("""(sel) => [...document.querySelectorAll(sel)].map((n) => {
        const texts = [];
        const walk = document.createTreeWalker(n, NodeFilter.SHOW_TEXT);
        for (let t = walk.nextNode(); t; t = walk.nextNode()) {
            const r = document.createRange();
            r.selectNodeContents(t);
            texts.push([t.textContent, new Set([...r.getClientRects()].map((q) => Math.round(q.top))).size]);
        }
        return texts;
    })""", selector)


def test_a_sweeps_run_names_break_only_between_their_parts(sweep_server, page):
    tab = Tab(page, sweep_server)
    tab.open("gradhealth&p.gradhealth.run=lr_1e-3")
    # A run list too narrow for a name beside its badge: the name wraps, between "lr_" and "1e-3" only.
    tab.frame.evaluate("document.querySelector('.gh-runs').style.width = '90px'")
    pieces = _lines_per_piece(tab, ".gh-run .gh-run-name")
    assert [p[0] for p in pieces[2]] == ["lr_", "1e-3"], pieces
    assert all(lines == 1 for name in pieces for _, lines in name), pieces
    assert any(len({p[0] for p in name}) > 1 for name in pieces)
    badges = tab.frame.evaluate("[...document.querySelectorAll('.gh-run .gh-badge')].map((b) => b.getClientRects().length)")
    assert badges == [1, 1, 1]  # each badge whole, on one line
    page.screenshot(path=str(SHOTS / "narrow_run_list.png"))
    # The sweep table squeezed into a narrow window: its name cells wrap between parts too.
    page.set_viewport_size({"width": 420, "height": 900})
    sweeps = tab.frame.evaluate("Number(document.documentElement.dataset.ghSweepDrawn || 0)")
    tab.ui.locator(".gh-sweep-button").click()
    tab.frame.wait_for_function(f"Number(document.documentElement.dataset.ghSweepDrawn || 0) > {sweeps}", timeout=30_000)
    names = _lines_per_piece(tab, ".gh-sweep-table tbody td:first-child")
    assert sorted("".join(p[0] for p in n) for n in names) == sorted(LAST), names
    assert all(lines == 1 for n in names for _, lines in n), names
    assert all([p[0] for p in n][-1].startswith("1e-") for n in names), names
    page.screenshot(path=str(SHOTS / "narrow_sweep.png"))
    assert not tab.errors, tab.errors
