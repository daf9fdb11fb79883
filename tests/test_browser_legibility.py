"""What a person reads in the tab, in headless Chromium inside a real TensorBoard: long run names shown
whole, repeated warning spikes folded into one entry that names each layer in model order, value
qualities in words, and the run track's labels apart.

Two runs share a long name but for its end (a sweep's seeds); both are the same torch MLP whose logged
gradients spike 1000x in one layer at a time (`fc2.bias` at steps 23, 41 and 66, `fc1.bias`, which
comes first in the model, at 55), with one NaN in `fc2.bias`'s gradient and a NaN loss at step 70, and a
loss logged 50x every 20 steps from step 9 (periodic spikes, whose period the track writes beside them).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.test_browser import CHROMIUM, Tab, _serve, browser  # noqa: F401  (fixtures)
from tests.test_cli import LAYER_SPIKES, _layer_spikes_run

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
pytest.importorskip("playwright.sync_api")

PREFIX = "resnet101_sweep_lr_0.001_weight_decay_0.0001_batch_256_seed_"
RUNS = [f"{PREFIX}1", f"{PREFIX}2"]
NAN_STEP = 70
LOSS_PEAKS = (9, 29, 49, 69)


@pytest.fixture(scope="module")
def legibility_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("legibility_logdir")
    _layer_spikes_run(logdir / RUNS[0], LAYER_SPIKES, nan_at={NAN_STEP: ["fc2.bias"]}, loss_peaks=LOSS_PEAKS)
    shutil.copytree(logdir / RUNS[0], logdir / RUNS[1])
    yield from _serve(logdir, lambda runs: all(runs.get(r, {}).get("steps_kept") == 80 for r in RUNS))


def _open(server, browser, extra=""):  # noqa: F811
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    tab = Tab(page, server)
    tab.open(f"gradhealth&p.gradhealth.run={RUNS[0]}{extra}")
    tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(RUNS[0])}")
    tab.ui.locator("li.gh-finding").first.wait_for(timeout=20_000)
    return tab


@pytest.fixture
def tab(legibility_server, browser):  # noqa: F811
    tab = _open(legibility_server, browser)
    yield tab
    tab.page.close()


def test_long_run_names_show_whole_and_apart(tab):
    names = tab.ui.locator(".gh-run .gh-run-name")
    assert names.count() == 2
    for i, run in enumerate(RUNS):
        name = names.nth(i)
        assert name.text_content() == run
        # Nothing cut: the name wraps inside the list instead of running out of it.
        cut = name.evaluate("n => n.scrollWidth > n.clientWidth + 1")
        assert not cut, name.evaluate("n => [n.scrollWidth, n.clientWidth]")
        # Its last line, where the seeds differ, is on screen.
        box = name.bounding_box()
        assert box["height"] > 20, box  # more than one line
        assert tab.ui.locator(".gh-run").nth(i).get_attribute("title").startswith(run + "\n")
    assert not tab.errors, tab.errors


def test_repeated_warning_spikes_fold_into_one_entry_naming_each_layer_in_model_order(tab):
    fold = tab.ui.locator("li.gh-finding-fold.gh-sev-border-warn")
    assert fold.count() == 1
    summary = fold.locator("summary > span.gh-muted").text_content()
    assert summary == "4 warnings on gradients, steps 23, 41, 55 and 66", summary
    # Each layer is named while the entry is folded, in model order.
    layers = fold.locator("summary p")
    assert layers.is_visible() and layers.text_content() == "In fc1.bias and fc2.bias", layers.text_content()
    assert not fold.locator("li.gh-finding").first.is_visible()
    assert fold.locator("li.gh-finding").count() == len(LAYER_SPIKES)
    assert not tab.errors, tab.errors


def test_a_chart_hover_says_its_quality_in_words(legibility_server, browser):  # noqa: F811
    tab = _open(legibility_server, browser, f"&p.gradhealth.role=gradient&p.gradhealth.layer=fc2.bias"
                                            f"&p.gradhealth.step={NAN_STEP}")
    try:
        # The layer's max |g| over steps (the panel opens on the NaN count, the rule of that cell).
        tab.ui.locator(".gh-detail select[aria-label='Metric to chart over steps']").select_option("max_abs")
        chart = tab.ui.locator(".gh-detail svg.gh-chart", has=tab.ui.locator("title", has_text="max abs over steps"))
        chart.wait_for(timeout=20_000)
        hit = chart.locator("rect.gh-hit").bounding_box()
        frame_box = tab.page.locator("iframe[src*='plugin_entry.html']").bounding_box()
        readout = chart.locator(".gh-readout")
        seen = ""
        # Sweep the pointer across the chart until it reads the NaN step.
        for k in range(200):
            x = frame_box["x"] + hit["x"] + hit["width"] * k / 199
            tab.page.mouse.move(x, frame_box["y"] + hit["y"] + hit["height"] / 2)
            seen = readout.text_content()
            if seen.startswith(f"step {NAN_STEP}:"):
                break
        assert seen.startswith(f"step {NAN_STEP}:"), seen
        assert seen.endswith("(finite values only: this step also held NaN/Inf)"), seen
        assert "finite_only" not in seen
        # The panel's table of the step says it in a few words, what they mean on hover.
        cell = tab.ui.locator(".gh-detail tr", has=tab.ui.locator("th", has_text="max abs")).locator("td.gh-quality")
        assert cell.text_content() == "finite values only", cell.text_content()
        assert cell.get_attribute("title") == "finite values only: this step also held NaN/Inf"
        assert not tab.errors, tab.errors
    finally:
        tab.page.close()


def test_the_track_labels_do_not_overlap(legibility_server, browser):  # noqa: F811
    # The spike at 23 selected: its "begins" label along the loss's top, a few steps before the loss's
    # period label ("every 20 steps" after its second peak, at 29), with the NaN loss's "NaN / Inf begins" at 70.
    tab = _open(legibility_server, browser, "&p.gradhealth.finding=spike.gradient.23.fc2.bias")
    try:
        tab.ui.locator(".gh-track-mark-text", has_text="Spike begins").wait_for(timeout=20_000)
        boxes = tab.frame.evaluate("""() => Array.from(document.querySelectorAll('.gh-track-mark-text'),
            t => { const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.top, r.right, r.bottom]; })""")
        texts = [b[0] for b in boxes]
        assert {"Spike begins", "every 20 steps", "NaN / Inf begins"} <= set(texts), texts
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                apart = a[3] <= b[1] or b[3] <= a[1] or a[4] <= b[2] or b[4] <= a[2]
                assert apart, (a, b)
        assert not tab.errors, tab.errors
    finally:
        tab.page.close()


# A run name as a new user's logdir gives it: two underscores and parts longer than the list's row leaves
# beside a badge, in the narrower run list of a window under 1100 px.
LONG_PART_RUN = "HyoungsungKim__Pytorch-tensorboard_tutorial/histogram/hist"


@pytest.fixture(scope="module")
def long_part_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("long_part_logdir")
    _layer_spikes_run(logdir / LONG_PART_RUN, {}, steps=20)
    yield from _serve(logdir, lambda runs: runs.get(LONG_PART_RUN, {}).get("steps_kept") == 20)


def test_a_run_name_breaks_only_between_its_parts(long_part_server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    tab = Tab(page, long_part_server)
    try:
        tab.open(f"gradhealth&p.gradhealth.run={LONG_PART_RUN}")
        name = tab.ui.locator(".gh-run .gh-run-name")
        assert name.text_content() == LONG_PART_RUN
        # Per piece between two line-break chances: its text, the lines it takes, its width alone.
        pieces = name.evaluate("""n => [...n.childNodes].filter((t) => t.nodeType === 3).map((t) => {
            const r = document.createRange();
            r.selectNodeContents(t);
            const tops = new Set([...r.getClientRects()].map((q) => Math.round(q.top)));
            const ctx = document.createElement("canvas").getContext("2d");
            ctx.font = getComputedStyle(n).font;
            return [t.textContent, tops.size, ctx.measureText(t.textContent).width];
        })""")
        row = tab.ui.locator(".gh-run").evaluate("r => r.clientWidth")
        assert "".join(p[0] for p in pieces) == LONG_PART_RUN
        # Every piece narrower than the row stays on one line: the badge goes under the name instead.
        broken = [p for p in pieces if p[1] > 1 and p[2] < row - 20]
        assert not broken, (broken, row)
        assert pieces[0][0] == "HyoungsungKim__", pieces  # "__" is one break, after both underscores
        assert not tab.errors, tab.errors
    finally:
        page.close()
