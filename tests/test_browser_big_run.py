"""A run with many folded blocks, as a ResNet-101's 600-odd rows, in headless Chromium inside a real
TensorBoard: folding keeps the clicked block under the pointer, one control folds or unfolds every block,
and the detail panel asks for a layer's distribution once a click."""

from __future__ import annotations

import json
import os
import urllib.parse

import pytest

from tests.test_browser import CHROMIUM, browser  # noqa: F401  (fixture)
from tests.test_browser_fold import N_BLOCKS, RUN, SICK, SICK_BLOCK, _click_label, _rows, fold_server, open_tab  # noqa: F401

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



def _label_point(tab, row):
    """Page coordinates of a row's label (scrolling it into sight if it is not)."""
    point = tab.frame.evaluate(
        """(row) => {
            const c = window.__gradhealth.cellCenter(row, 0);
            const port = document.querySelector('.gh-hm-port').getBoundingClientRect();
            return c && {x: port.left + 12, y: c.y};
        }""", row)
    assert point is not None, row
    box = tab.page.locator("iframe[src*='plugin_entry.html']").bounding_box()
    return box["x"] + point["x"], box["y"] + point["y"]


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
    x, y = _label_point(tab, "blocks.3")
    height = _row_at(tab, y)[1]
    for i in (3, 9, 14, 18):
        block = f"blocks.{i}"
        x, y = _label_point(tab, block)
        assert _row_at(tab, y)[0] == block
        row, cell_h = _click_at(tab, x, y)
        assert row.startswith(block + "."), (block, row)
        assert cell_h == height
    # Scrolled down: a click on a member's name folds its block into the row under the pointer
    # (rows enough below it to scroll that far: at the very bottom the scroll can only go so far).
    tab.frame.evaluate(f"document.querySelector('.gh-hm-scroll').scrollTop = {6 * height}")
    tab.page.wait_for_timeout(200)
    for block in ("blocks.9",):
        x, y = _label_point(tab, [r for r in _rows(tab) if r.startswith(block + ".")][6])
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
