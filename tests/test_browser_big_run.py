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
