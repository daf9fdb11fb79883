"""The ranks of one training in headless Chromium inside a real TensorBoard: a rank's "ranks" button in
the run list puts it beside another rank of its training, in the compare view."""

from __future__ import annotations

import os

import pytest

from tests import ranks_training
from tests.test_browser import CHROMIUM, Tab, _serve, browser  # noqa: F401 - browser is a fixture

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
pytest.importorskip("torch")

DIVERGING = "skipped/rank1"
REFERENCE = "skipped/rank0"


@pytest.fixture(scope="module")
def tab(ranks_logdir, browser):  # noqa: F811 - the browser fixture, imported
    ready = lambda runs: all(runs.get(r, {}).get("steps_kept") == ranks_training.STEPS  # noqa: E731
                             for r in (DIVERGING, REFERENCE))
    for base in _serve(ranks_logdir, ready, log_dir=ranks_logdir.parent):
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        t = Tab(page, base)
        t.open(f"gradhealth&p.gradhealth.run={REFERENCE}")
        yield t
        page.close()


def _captions(tab) -> list:
    return tab.frame.evaluate("""() => Array.from(document.querySelectorAll('.gh-hm-caption'))
        .filter(c => !c.hidden && c.offsetParent !== null).map(c => c.textContent)""")


def test_the_ranks_button_puts_a_rank_beside_the_lowest_rank(tab):
    item = tab.ui.locator(f'li.gh-run[data-run="{DIVERGING}"]')
    button = item.locator(".gh-ranks-button")
    assert "rank1 beside rank0" in button.get_attribute("title")
    before = tab.drawn()
    button.click()
    tab.wait_redraw(before)
    assert _captions(tab) == [DIVERGING, REFERENCE]
    assert item.get_attribute("aria-selected") == "true"
    assert "gh-compared" in tab.ui.locator(f'li.gh-run[data-run="{REFERENCE}"]').get_attribute("class")
    # The diverging rank's finding is listed beside its heatmap.
    findings = tab.ui.locator(".gh-findings")
    findings.locator(".gh-finding").first.wait_for()
    assert "Ranks disagree" in findings.text_content()
    assert tab.errors == []
