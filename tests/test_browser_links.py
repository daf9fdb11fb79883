"""Links and the run list in headless Chromium inside a real TensorBoard, while runs are still arriving:
a link naming a run TensorBoard has not listed yet keeps that run (it waits, then opens it), a run whose
steps grew since the previous look is badged "so far", and a run picked from the list opens on the role
of its own worst finding.

Runs: "relu" (the demo's dead ReLUs: its worst finding is about activations), "lr" (the demo's too-high
learning rate: about gradients), and "growing", healthy gradients to which the tests append steps.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.parse

import numpy as np
import pytest

from tests.test_bad_input import append_events, event, hist_value, normal_buckets, write_run
from tests.test_browser import CHROMIUM, FRAME, REPO, Tab, _get, _serve, browser  # noqa: F401 - browser is a fixture

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")

RELU, LR, GROWING, LATE = "relu", "lr", "growing", "late"


def _healthy_steps(steps, seed):
    rng = np.random.default_rng(seed)
    return [event(s, *(hist_value(f"gradients/dense_{i}/kernel", normal_buckets(rng)) for i in range(3))) for s in steps]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("links_logdir")
    shutil.copytree(REPO / "demo" / "runs" / "dead_relu" / "relu", root / RELU)
    shutil.copytree(REPO / "demo" / "runs" / "lr_too_high" / "lr_0.3", root / LR)
    write_run(root / GROWING, _healthy_steps(range(0, 50, 5), seed=1))
    return root


@pytest.fixture(scope="module")
def server(logdir):
    # Reloaded every second, so what a test writes is listed soon.
    yield from _serve(logdir, lambda runs: {RELU, LR, GROWING} <= set(runs), flags=("--reload_interval", "1"))


@pytest.fixture
def page(browser):  # noqa: F811 - the browser fixture, imported
    p = browser.new_page(viewport={"width": 1440, "height": 1000})
    yield p
    p.close()


def _runs(base):
    return {r["run"]: r for r in _get(f"{base}/data/plugin/gradhealth/runs")["runs"]}


def _selected_runs(tab):
    return tab.ui.locator("li.gh-run[aria-selected=true]").evaluate_all("els => els.map(e => e.dataset.run)")


def test_a_link_to_a_run_not_loaded_yet_waits_for_it_then_opens_it(server, logdir, page):
    tab = Tab(page, server)
    page.goto(f"{server}/#gradhealth&p.gradhealth.run={LATE}")
    page.wait_for_selector(FRAME, timeout=30_000)
    tab._wait_for_frame(timeout_s=30.0)
    waiting = tab.ui.locator(".gh-message", has_text="Waiting for run")
    waiting.wait_for(timeout=30_000)
    assert LATE in waiting.text_content()
    # Past a few polls of the run list: still waiting, no other run opened in its place.
    page.wait_for_timeout(7_000)
    assert waiting.is_visible(), tab.state()
    assert tab.drawn() == 0 and _selected_runs(tab) == []
    assert tab.frame.evaluate("window.__gradhealth.viewState.run") == LATE
    assert f"p.gradhealth.run={LATE}" in page.evaluate("location.hash")
    # The run arrives in the log directory: TensorBoard lists it, the tab opens it by itself.
    shutil.copytree(REPO / "demo" / "runs" / "lr_too_high" / "lr_0.3", logdir / LATE)
    tab.frame.wait_for_function("Number(document.documentElement.dataset.ghDrawn || 0) > 0", timeout=60_000)
    assert tab.frame.evaluate("window.__gradhealth.viewState.run") == LATE
    assert _selected_runs(tab) == [LATE]
    assert not waiting.is_visible()
    assert f"p.gradhealth.run={LATE}" in page.evaluate("location.hash")
    assert tab.errors == []


def test_a_run_picked_from_the_list_opens_on_its_worst_findings_role(server, page):
    runs = _runs(server)
    assert runs[RELU]["worst_role"] == "activation" and runs[LR]["worst_role"] == "gradient"
    tab = Tab(page, server)
    tab.open(f"gradhealth&p.gradhealth.run={RELU}")
    assert tab.frame.evaluate("window.__gradhealth.viewState.role") == "activation"
    before = tab.drawn()
    tab.ui.locator(f"li.gh-run[data-run='{LR}']").click()
    tab.wait_redraw(before)
    assert _selected_runs(tab) == [LR]
    assert tab.frame.evaluate("window.__gradhealth.viewState.role") == "gradient"
    assert tab.ui.locator("select").first.input_value() == "gradient"


def test_a_run_whose_steps_grew_since_the_last_look_is_badged_so_far(server, logdir, page):
    tab = Tab(page, server)
    tab.open(f"gradhealth&p.gradhealth.run={GROWING}")
    badge = tab.ui.locator(f"li.gh-run[data-run='{GROWING}'] .gh-badge")
    assert badge.text_content() == "healthy"
    kept = _runs(server)[GROWING]["steps_kept"]
    (path,) = (logdir / GROWING).iterdir()
    append_events(path, _healthy_steps(range(50, 100, 5), seed=2))
    deadline = time.monotonic() + 30
    while _runs(server)[GROWING]["steps_kept"] == kept:
        assert time.monotonic() < deadline, "TensorBoard did not read the new steps"
        time.sleep(0.5)

    def reload_until(text):
        # Past the tab's least gap between two looks at the run list.
        page.wait_for_timeout(3_500)
        page.locator("app-header-reload button").click()
        tab.frame.wait_for_function(f"document.querySelector(\"li.gh-run[data-run='{GROWING}'] .gh-badge\")"
                                    f".textContent === '{text}'", timeout=20_000)

    # Read while its steps were growing: no verdict on the whole run yet.
    reload_until("healthy so far")
    assert "still growing" in badge.locator("xpath=..").get_attribute("title")
    # Nothing more read since: the verdict stands.
    reload_until("healthy")


def test_a_link_followed_in_the_open_page_is_shown(server, page):
    """A link pasted into the address bar of a TensorBoard page already open on the tab changes TensorBoard's
    URL, not the tab's: the tab shows what the link names, and keeps it in the URL when clicked further."""
    tab = Tab(page, server)
    tab.open(f"gradhealth&p.gradhealth.run={GROWING}")
    assert tab.frame.evaluate("window.__gradhealth.viewState.run") == GROWING
    drawn = tab.drawn()
    page.evaluate("h => { location.hash = h; }",
                  f"#gradhealth&p.gradhealth.run={LR}&p.gradhealth.role=weight&p.gradhealth.zoom=0~100")
    tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(LR)}", timeout=30_000)
    tab.frame.wait_for_function(f"Number(document.documentElement.dataset.ghDrawn || 0) > {drawn}", timeout=60_000)
    shown = tab.frame.evaluate("(() => { const s = window.__gradhealth.viewState;"
                               " return {role: s.role, zoom: s.zoom && s.zoom.map(String)}; })()")
    assert shown == {"role": "weight", "zoom": ["0", "100"]}, tab.state()
    assert _selected_runs(tab) == [LR]
    assert "p.gradhealth.zoom=0~100" in urllib.parse.unquote(page.evaluate("location.hash"))
