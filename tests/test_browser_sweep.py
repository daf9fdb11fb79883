"""The sweep view in headless Chromium inside a real TensorBoard, on the demo sweep (demo/runs/sweep:
eight Keras trials logged with hp.KerasCallback, each a train and a validation run): a line per trial
with its hyperparameter columns and the split sentence above them, sorted by a click on a column,
filtered by a kind, and a click on a line opens that run's heatmap.

One trial is added beside the demo's, with a learning rate of 5e-7, which the page writes "5e-7": as
text it sorts after "1", as a number before "0.001". It logged only a loss, so it cannot judge health
and takes no part in the split. Two demo runs without hyperparameters come last (no part in the split
either): dead_relu/relu as "dead_relu", whose dead units are an info note at act1 from step 0 and a
warning at act2 and act3 from step 30, and healthy/torch as "notes_only", whose only finding is a note.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse

import pytest

from tests.test_browser import CHROMIUM, REPO, Tab, _get, _serve, browser  # noqa: F401 - browser is a fixture
from tests.test_bad_input import event, scalar_value, write_run
from tests.test_sweep_routes import _session_start

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")

TINY = "lr_5e-07_sgd"
SPLIT = "Warnings or worse in 4 of 4 runs with learning_rate >= 0.3, in 0 of 4 below"
TRIALS = [f"lr_{lr}_{opt}" for lr in ("0.001", "0.01", "0.3", "1") for opt in ("adam", "sgd")]
DEAD, NOTES = "dead_relu", "notes_only"
NO_HPARAMS = [DEAD, NOTES]
LRS = ["5e-7", "0.001", "0.001", "0.01", "0.01", "0.3", "0.3", "1", "1"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("sweep_logdir")
    shutil.copytree(REPO / "demo" / "runs" / "sweep", logdir, dirs_exist_ok=True)
    shutil.copytree(REPO / "demo" / "runs" / "dead_relu" / "relu", logdir / DEAD)
    shutil.copytree(REPO / "demo" / "runs" / "healthy" / "torch", logdir / NOTES)
    write_run(logdir / TINY, [event(0, *_session_start({"learning_rate": 5e-7, "optimizer": "sgd"}))]
              + [event(s, scalar_value("epoch_loss", 1.0 / (1 + s))) for s in range(5)])
    expected = {f"{t}/{part}" for t in TRIALS for part in ("train", "validation")} | {TINY} | set(NO_HPARAMS)
    yield from _serve(logdir, lambda runs: expected <= set(runs))


@pytest.fixture
def tab(server, browser):  # noqa: F811 - the browser fixture, imported
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    t = Tab(page, server)
    t.open()
    sweeps = t.frame.evaluate("Number(document.documentElement.dataset.ghSweepDrawn || 0)")
    t.ui.locator(".gh-sweep-button").click()
    t.frame.wait_for_function(f"Number(document.documentElement.dataset.ghSweepDrawn || 0) > {sweeps}",
                              timeout=30_000)
    yield t
    page.close()


def _names(tab):
    return tab.frame.evaluate("window.__gradhealth.sweepNames()")


def _column(tab, header):
    """The texts of a column of the lines shown, top to bottom."""
    return tab.frame.evaluate("""(header) => {
        const table = document.querySelector('.gh-sweep-table');
        const i = Array.from(table.tHead.rows[0].cells).findIndex(c => c.textContent.startsWith(header));
        return Array.from(table.tBodies[0].rows).filter(r => !r.hidden).map(r => r.cells[i].textContent);
    }""", header)


def test_the_sweep_shows_a_line_per_trial_its_hyperparameters_and_the_split(tab):
    headers = tab.ui.locator(".gh-sweep-table thead th").all_text_contents()
    assert headers[:3] == ["run", "learning_rate", "optimizer"]
    assert tab.ui.get_by_text(SPLIT, exact=True).is_visible()
    # Train and validation of a trial are one line, named by the trial; in the route's order, by value.
    assert _names(tab) == [TINY] + TRIALS + NO_HPARAMS
    assert _column(tab, "learning_rate") == LRS + ["\u2013", "\u2013"]
    # Every line has its strip, the tiny trial an empty one.
    strips = tab.frame.evaluate("Array.from(document.querySelectorAll('.gh-sweep-strip'), c => c.dataset.statuses)")
    assert strips[0] == "" and all(s for s in strips[1:])
    assert "critical" in strips[len(TRIALS)].split()
    # The view is part of the link.
    assert tab.frame.evaluate("window.__gradhealth.viewState.view") == "sweep"
    assert "p.gradhealth.view=sweep" in tab.page.url
    assert not tab.errors


def test_sorting_by_learning_rate_orders_numbers_by_size(tab):
    tab.ui.locator("th[data-column='name']").click()
    # A run name's decimals are numbers: lr_0.001 before lr_0.01, and "lr_5e" after "lr_1_".
    assert _names(tab) == [DEAD] + TRIALS + [TINY, NOTES]
    header = tab.ui.locator("th[data-column='hp:learning_rate']")
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    assert _column(tab, "learning_rate") == LRS + ["\u2013", "\u2013"]
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert _column(tab, "learning_rate") == LRS[::-1] + ["\u2013", "\u2013"]


def test_filtering_by_a_kind_and_by_text_narrows_the_lines(tab):
    served = _get(f"{tab.base}/data/plugin/gradhealth/sweep")["runs"]
    with_growth = [r.get("trial", r["run"]) for r in served if any(k["kind"] == "weight_growth" for k in r["kinds"])]
    assert with_growth == ["lr_0.3_adam", "lr_1_adam", "lr_1_sgd"]
    select = tab.ui.locator(".gh-sweep-controls select")
    # The kind's label comes from the vocabulary, as everywhere in the tab.
    vocabulary = _get(f"{tab.base}/data/plugin/gradhealth/vocabulary")
    label = next(k["label"] for k in vocabulary["kinds"] if k["kind"] == "weight_growth")
    assert label in select.locator("option").all_text_contents()
    select.select_option("weight_growth")
    assert _names(tab) == with_growth
    assert tab.ui.get_by_text(f"3 of {len(TRIALS) + 3} runs").is_visible()
    select.select_option("")
    tab.ui.locator(".gh-sweep-controls input[type=search]").fill("optimizer=sgd 0.3")
    tab.frame.wait_for_function("window.__gradhealth.sweepNames().length === 1")
    assert _names(tab) == ["lr_0.3_sgd"]


def test_a_click_on_a_line_opens_its_runs_heatmap(tab):
    before = tab.drawn()
    tab.ui.locator(".gh-sweep-table tbody tr[data-run='lr_1_sgd/train']").click()
    tab.wait_redraw(before)
    state = tab.frame.evaluate("window.__gradhealth.viewState")
    assert (state["run"], state["view"]) == ("lr_1_sgd/train", "heatmap")
    assert tab.ui.locator(".gh-hm-body").first.is_visible()
    assert not tab.ui.locator(".gh-sweep-table").is_visible()
    assert "p.gradhealth.view" not in urllib.parse.unquote(tab.page.url)
    # The button takes the user back to the sweep.
    assert tab.ui.locator(".gh-sweep-button").text_content() == "Sweep"
    assert json.loads(json.dumps(tab.errors)) == []


def test_a_kinds_chip_says_where_its_worst_findings_begin(tab):
    """dead_relu: act1's dead units from step 0 are a note; the warning is act2 from step 30."""
    chip = tab.ui.locator(f".gh-sweep-table tbody tr[data-run='{DEAD}'] .gh-badge[data-kind='dead_units']")
    assert chip.text_content().endswith("\u00b7 30 \u00b7 act2")
    assert "gh-sev-warn" in chip.get_attribute("class")


def test_a_run_with_notes_only_reads_healthy_and_a_filter_matching_nothing_says_so(tab):
    assert _column(tab, "worst")[-1] == "healthy (notes only)"
    assert _names(tab)[-1] == NOTES
    empty = tab.ui.locator(".gh-sweep-empty")
    assert not empty.is_visible()
    tab.ui.locator(".gh-sweep-controls input[type=search]").fill("no-such-run")
    tab.frame.wait_for_function("window.__gradhealth.sweepNames().length === 0")
    assert empty.is_visible() and empty.text_content() == "No run matches."


def test_every_strip_is_as_wide_and_says_its_step_on_hover(tab):
    widths = tab.frame.evaluate("Array.from(document.querySelectorAll('.gh-sweep-strip'), c => c.getBoundingClientRect().width)")
    assert len(set(widths)) == 1 and widths[0] >= 200
    strip = tab.ui.locator(".gh-sweep-table tbody tr[data-run='lr_1_sgd/train'] .gh-sweep-strip")
    served = next(r for r in _get(f"{tab.base}/data/plugin/gradhealth/sweep")["runs"] if r["run"] == "lr_1_sgd/train")
    box = strip.bounding_box()
    strip.hover(position={"x": box["width"] - 1, "y": box["height"] / 2})
    last = served["strip"]["last_steps_text"][-1]
    assert strip.get_attribute("title").endswith(f"{last}: critical")
    strip.hover(position={"x": 0, "y": box["height"] / 2})
    assert strip.get_attribute("title").startswith(f"step {served['strip']['steps_text'][0]}: ")


def test_a_click_on_a_line_opens_the_heatmap_of_its_worst_findings_role(tab):
    """lr_0.3_adam's findings are about update ratios and weights: its heatmap opens there, not on the
    gradients the page showed (all green for this run)."""
    served = next(r for r in _get(f"{tab.base}/data/plugin/gradhealth/sweep")["runs"] if r["run"] == "lr_0.3_adam/train")
    role = served["worst"]["role"]
    assert role is not None and role != "gradient"
    assert tab.frame.evaluate("window.__gradhealth.viewState.role") == "gradient"
    before = tab.drawn()
    tab.ui.locator(".gh-sweep-table tbody tr[data-run='lr_0.3_adam/train']").click()
    tab.wait_redraw(before)
    state = tab.frame.evaluate("window.__gradhealth.viewState")
    assert (state["run"], state["view"], state["role"]) == ("lr_0.3_adam/train", "heatmap", role)
    assert tab.ui.locator(".gh-toolbar label:has-text('Role') select").input_value() == role
    # The heatmap drawn is that role's: it has the update-ratio finding's warning cells.
    assert tab.frame.evaluate("window.__gradhealth.store.heatmaps[0].role") == role
    assert not tab.errors


def _open_sweep(browser, base, fragment):  # noqa: F811 - the browser fixture, passed in
    """A second page opened on a link (TensorBoard's URL fragment), once its sweep is drawn."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    other = Tab(page, base)
    other.page.goto(f"{base}/#{fragment}")
    other.page.wait_for_selector("iframe[src*='plugin_entry.html']", timeout=30_000)
    other._wait_for_frame(timeout_s=30.0)
    other.frame.wait_for_function("Number(document.documentElement.dataset.ghSweepDrawn || 0) > 0", timeout=30_000)
    return other


def test_the_sweeps_sort_and_filters_are_kept_in_the_link(tab, browser):  # noqa: F811
    header = tab.ui.locator("th[data-column='hp:learning_rate']")
    header.click()
    header.click()
    tab.ui.locator(".gh-sweep-controls select").select_option("weight_growth")
    tab.ui.locator(".gh-sweep-controls input[type=search]").fill("adam")
    tab.frame.wait_for_function("window.__gradhealth.sweepNames().length === 2")
    assert _names(tab) == ["lr_1_adam", "lr_0.3_adam"]
    assert tab.frame.evaluate("window.__gradhealth.viewState.sweep") == {
        "column": "hp:learning_rate", "descending": True, "text": "adam", "kind": "weight_growth"}
    url = urllib.parse.unquote(tab.page.url)
    for part in ("p.gradhealth.ssort=-hp:learning_rate", "p.gradhealth.sfilter=adam", "p.gradhealth.skind=weight_growth"):
        assert part in url, url
    # The link reopens the same lines, the same way sorted, in another page.
    other = _open_sweep(browser, tab.base, tab.page.url.split("#", 1)[1])
    try:
        assert other.frame.evaluate("window.__gradhealth.sweepNames()") == ["lr_1_adam", "lr_0.3_adam"]
        assert other.ui.locator("th[data-column='hp:learning_rate']").get_attribute("aria-sort") == "descending"
        assert other.ui.locator(".gh-sweep-controls select").input_value() == "weight_growth"
        assert other.ui.locator(".gh-sweep-controls input[type=search]").input_value() == "adam"
        assert other.errors == []
    finally:
        other.page.close()


def test_a_link_naming_an_unknown_sweep_column_or_kind_is_read_without_them(tab, browser):  # noqa: F811
    fragment = "gradhealth&p.gradhealth.view=sweep&p.gradhealth.ssort=-hp:no_such_hparam&p.gradhealth.skind=no_such_kind&p.gradhealth.sfilter=sgd"
    other = _open_sweep(browser, tab.base, fragment)
    try:
        # The server's order, every kind: only the text filter, which names nothing unknown, stays.
        assert other.frame.evaluate("window.__gradhealth.sweepNames()") == [TINY] + [t for t in TRIALS if t.endswith("sgd")]
        assert other.ui.locator(".gh-sweep-table th[aria-sort]").count() == 0
        assert other.ui.locator(".gh-sweep-controls select").input_value() == ""
        assert other.frame.evaluate("window.__gradhealth.viewState.sweep") == {
            "column": "", "descending": False, "text": "sgd", "kind": ""}
        url = urllib.parse.unquote(other.page.url)
        assert "no_such" not in url and "p.gradhealth.sfilter=sgd" in url
        assert other.errors == []
    finally:
        other.page.close()


def _run_list_badge(tab, run):
    return tab.ui.locator(f".gh-runs li.gh-run[data-run='{run}'] .gh-badge").text_content()


def test_a_run_with_notes_only_reads_the_same_in_the_run_list_and_the_sweep(tab):
    sweep_says = _column(tab, "worst")[_names(tab).index(NOTES)]
    assert sweep_says == "healthy (notes only)"
    before = tab.drawn()
    tab.ui.locator(f".gh-sweep-table tbody tr[data-run='{NOTES}']").click()
    tab.wait_redraw(before)
    assert _run_list_badge(tab, NOTES) == sweep_says
    # A run with a warning still says so in the list.
    assert _run_list_badge(tab, DEAD) == "warn"


def test_a_redraw_keeps_the_tooltip_of_the_cell_under_the_pointer(tab):
    """One run shown: the second view, empty, must not hide the tooltip the first view shows."""
    before = tab.drawn()
    tab.ui.locator(f".gh-sweep-table tbody tr[data-run='{DEAD}']").click()
    tab.wait_redraw(before)
    assert tab.frame.evaluate("window.__gradhealth.viewState.compare") == ""
    layer = tab.frame.evaluate("window.__gradhealth.rowNames()")[0]
    step = tab.frame.evaluate("window.__gradhealth.axisSteps()")[0]
    tab.page.mouse.move(*tab.cell_point(layer, step))
    tooltip = tab.ui.locator(".gh-tooltip")
    tooltip.wait_for(state="visible", timeout=5_000)
    tab.frame.evaluate("window.__gradhealth.redraw()")
    assert tooltip.is_visible()
    assert layer in tooltip.text_content()
