"""A run with many folded blocks, as a ResNet-101's 600-odd rows, in headless Chromium inside a real
TensorBoard: folding keeps the clicked block under the pointer, one control folds or unfolds every block,
and the detail panel asks for a layer's distribution once a click."""

from __future__ import annotations

import json
import os
import urllib.parse

import pytest

from tests.test_browser import CHROMIUM, browser  # noqa: F401  (fixture)
from tests.test_browser_fold import (  # noqa: F401  (fixtures)
    N_BLOCKS, RUN, SICK, SICK_BLOCK, _click_label, _rows, fold_server, label_point, open_tab)

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
pytest.importorskip("playwright.sync_api")


def test_a_click_on_a_folded_cell_asks_for_the_layers_distribution_once(open_tab):
    tab = open_tab()
    asked = []
    tab.page.on("request", lambda r: asked.append(r.url) if "/gradhealth/distribution?" in r.url else None)
    # The block's member is not loaded yet: its cells arrive after the click, with the row's steps.
    x, y = tab.cell_point(SICK_BLOCK, 80)
    tab.page.mouse.click(x, y)
    detail = tab.ui.locator(".gh-detail")
    detail.locator("svg", has=tab.ui.locator("title", has_text="distribution over steps")).wait_for(timeout=15_000)
    assert detail.locator(".gh-detail-title").text_content() == SICK
    tab.page.wait_for_timeout(1_000)
    assert len(asked) == 1, asked
    assert tab.errors == []



def _row_at(tab, y):
    """The row under a page y, and the rows' height, as drawn (nothing scrolls)."""
    box = tab.page.locator("iframe[src*='plugin_entry.html']").bounding_box()
    at = tab.frame.evaluate("(y) => window.__gradhealth.rowAt(y)", y - box["y"])
    assert at is not None, y
    return at["layer"], at["cellH"]


def _click_at(tab, x, y):
    """Clicks there; returns the row then under the pointer and the rows' height."""
    before = tab.drawn()
    tab.page.mouse.click(x, y)
    tab.wait_redraw(before)
    return _row_at(tab, y)


def test_the_clicked_block_stays_under_the_pointer_as_blocks_fold_and_unfold(open_tab):
    tab = open_tab()
    # Unfolding blocks one after another, each clicked where it is: its first layer takes the clicked
    # row's place, and the rows keep their height, so the next block's name is where it was seen.
    x, y = label_point(tab, "blocks.3")
    height = _row_at(tab, y)[1]
    for i in (3, 9, 14, 18):
        block = f"blocks.{i}"
        x, y = label_point(tab, block)
        assert _row_at(tab, y)[0] == block
        row, cell_h = _click_at(tab, x, y)
        assert row.startswith(block + "."), (block, row)
        assert cell_h == height
    # Scrolled down: a click on a member's name folds its block into the row under the pointer
    # (rows enough below it to scroll that far: at the very bottom the scroll can only go so far).
    tab.frame.evaluate(f"document.querySelector('.gh-hm-scroll').scrollTop = {6 * height}")
    tab.page.wait_for_timeout(200)
    for block in ("blocks.9",):
        x, y = label_point(tab, [r for r in _rows(tab) if r.startswith(block + ".")][6])
        assert tab.frame.evaluate("document.querySelector('.gh-hm-scroll').scrollTop") > 0
        row, _ = _click_at(tab, x, y)
        assert row == block
    assert tab.errors == []


def test_one_control_unfolds_every_block_and_folds_them_again_and_the_link_keeps_it(open_tab):
    tab = open_tab()
    folded = _rows(tab)
    assert len(folded) == N_BLOCKS + 2
    control = tab.ui.locator("button.gh-fold-all")
    assert control.is_visible() and control.text_content() == "Unfold all"
    before = tab.drawn()
    control.click()
    tab.wait_redraw(before)
    rows = _rows(tab)
    assert len(rows) == 2 + N_BLOCKS * 10 and SICK in rows
    assert "p.gradhealth.fold=none" in urllib.parse.unquote(tab.page.url)
    assert control.text_content() == "Fold all"
    # The link opens with every block unfolded, though the rows do not fit the screen.
    again = open_tab(tab.page.url.split("#", 1)[1])
    assert _rows(again) == rows
    before = tab.drawn()
    control.click()
    tab.wait_redraw(before)
    assert _rows(tab) == folded
    assert "p.gradhealth.fold=all" in urllib.parse.unquote(tab.page.url)
    assert tab.errors == [] and again.errors == []


BODY_PIXELS = """([name, xs]) => {
    const v = window.__gradhealth.views[0];
    const pos = v.scene.order.findIndex((r) => v.data.layers[r] === name);
    const g = v.scene.geo;
    const canvas = document.querySelector('.gh-hm-body');
    const k = canvas.width / canvas.getBoundingClientRect().width;
    const y = Math.floor((pos * g.cellH - v.scrollTop + g.cellH / 2) * k);
    return xs.map((x) => Array.from(canvas.getContext("2d").getImageData(Math.floor((x < 0 ? g.labelW + x : g.labelW + x * g.plotW) * k), y, 1, 1).data.slice(0, 3)));
}"""
CRITICAL_RGB = [0xD7, 0x26, 0x3D]  # colors.ts STATUS_COLORS.critical


def test_a_row_still_loading_is_striped_with_no_status_bar_until_its_cells_arrive(open_tab):
    tab = open_tab()
    tab.frame.wait_for_function("(() => { const w = window.__gradhealth.wantedRows(0, true);"
                                " return w.rows.length + w.blocks.length === 0; })()", timeout=20_000)
    held = []
    tab.page.route("**/data/plugin/gradhealth/heatmap?**", lambda route: held.append(route))
    # The sick block unfolds; its members' cells are held back: the critical member is still loading.
    x, y = label_point(tab, SICK_BLOCK)
    _click_at(tab, x, y)
    tab.page.wait_for_timeout(300)
    assert held
    assert tab.frame.evaluate(f"window.__gradhealth.rowNames().includes({json.dumps(SICK)})")
    # Across its cells, stripes: two colours in turn, neither the grey of "no data" (#9e9e9e).
    xs = [i / 200 for i in range(20, 60)]
    cells = tab.frame.evaluate(BODY_PIXELS, [SICK, xs])
    colours = {tuple(c) for c in cells}
    assert len(colours) >= 2 and (0x9E, 0x9E, 0x9E) not in colours, colours
    # No bar of the status the server counted beside its label.
    beside = tab.frame.evaluate(BODY_PIXELS, [SICK, [-5, -4, -3]])
    assert all(max(abs(a - b) for a, b in zip(c, CRITICAL_RGB)) > 40 for c in beside), beside
    # Its tooltip says it is loading.
    cx, cy = tab.cell_point(SICK, 80)
    tab.page.mouse.move(cx, cy)
    assert "loading" in tab.ui.locator(".gh-tooltip").text_content()
    # Its cells arrive: drawn as they are, critical where the layer exploded.
    for route in held:
        route.continue_()
    tab.page.unroute("**/data/plugin/gradhealth/heatmap?**")
    tab.frame.wait_for_function(f"""(() => {{ const h = window.__gradhealth.views[0].data;
        const i = h.layers.indexOf({json.dumps(SICK)}); return i >= 0 && (!h.loaded || h.loaded[i] === 1); }})()""",
                                timeout=20_000)
    tab.page.wait_for_timeout(300)
    r, g, b = tab.pixel(".gh-hm-body", SICK, 80)[:3]
    assert r > 120 and g < 80 and b < 80, (r, g, b)
    assert tab.errors == []
