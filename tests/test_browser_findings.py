"""The findings list in headless Chromium inside a real TensorBoard: repeated notes folded into one entry,
and a module's later call in forward explained.

Run ``notes`` is a torch MLP whose one ReLU module runs twice in forward (logged as `relu` and `relu[1]`),
its loss scaled 30x at three steps: three gradient spike notes, one per event, beside a dead-units note on
both ReLU calls.
"""

from __future__ import annotations

import json
import os
import urllib.parse

import pytest

from tests.test_browser import CHROMIUM, Tab, _get, _serve, browser  # noqa: F401  (fixtures)
from tests.test_cli import _shared_relu_run

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
pytest.importorskip("playwright.sync_api")

RUN = "notes"
SPIKE_STEPS = (23, 41, 66)
FOLD = "li.gh-finding-fold"


@pytest.fixture(scope="module")
def notes_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("notes_logdir")
    _shared_relu_run(logdir / RUN, {step: 30.0 for step in SPIKE_STEPS})
    yield from _serve(logdir, lambda runs: runs.get(RUN, {}).get("steps_kept") == 80)


@pytest.fixture
def notes_tab(notes_server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    tab = Tab(page, notes_server)
    tab.open(f"gradhealth&p.gradhealth.run={RUN}")
    tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(RUN)}")
    tab.ui.locator("li.gh-finding").first.wait_for(timeout=20_000)
    yield tab
    page.close()


def test_repeated_notes_read_as_one_entry_that_opens_on_each_of_them(notes_tab):
    tab = notes_tab
    found = _get(f"{tab.base}/data/plugin/gradhealth/findings?run={urllib.parse.quote(RUN)}")["findings"]
    spikes = [f for f in found if f["kind"] == "spike"]
    # The route still sends one finding per event.
    assert [f["first_step"] for f in spikes] == list(SPIKE_STEPS), spikes
    assert tab.ui.locator(".gh-findings h2").first.text_content() == f"Findings ({len(found)})"
    fold = tab.ui.locator(FOLD)
    assert fold.count() == 1
    summary = fold.locator("summary")
    assert summary.text_content() == "infoSpike3 notes on gradients, steps 23, 41 and 66", summary.text_content()
    # Folded: its notes take no room in the list until opened.
    items = fold.locator("li.gh-finding")
    assert items.count() == 3 and not items.first.is_visible()
    listed = tab.ui.locator(".gh-findings ul[role=listbox] > li")
    assert listed.count() == len(found) - 2
    summary.click()
    items.nth(1).wait_for(state="visible")
    items.nth(1).click()
    tab.frame.wait_for_function("document.querySelector('li.gh-finding[aria-selected=true]') !== null")
    assert tab.frame.evaluate("window.__gradhealth.viewState.finding").startswith("spike.gradient.41.")
    # The list is drawn again on a selection: the entry stays open on the note selected.
    assert tab.ui.locator(f"{FOLD} li.gh-finding[aria-selected=true]").is_visible()
    items.nth(1).click()  # unselect: the entry stays as the user left it, open
    tab.frame.wait_for_function("document.querySelector('li.gh-finding[aria-selected=true]') === null")
    assert items.first.is_visible()
    assert not tab.errors, tab.errors


def test_a_modules_later_call_in_forward_says_what_it_is(notes_tab):
    name = notes_tab.ui.locator("li.gh-finding p code", has_text="relu[1]").first
    assert name.get_attribute("title").startswith("relu[1] is the second call of module relu in forward"), \
        name.get_attribute("title")
    plain = notes_tab.ui.locator("li.gh-finding p code", has_text="relu").first
    assert plain.text_content() == "relu" and plain.get_attribute("title") is None
