"""Rows folded by block in the tab, in headless Chromium inside a real TensorBoard.

Run ``deep`` is a transformer-like model's gradients: ``embed.weight``, then
``blocks.<i>.{norm,attn.qkv,attn.proj,mlp.fc1,mlp.fc2}.{weight,bias}`` for
`N_BLOCKS` blocks, then ``head.weight``: more rows than the heatmap holds at
its smallest row height, so the tab opens with every block folded. One member,
``SICK``, explodes from `BREAK_STEP` on: a finding on one member of block
``SICK_BLOCK``. Another, ``FADING``, far below the first screenful, vanishes from
`BREAK_STEP` on: its cells' rule charts mean |g|, not the default max |g|.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse

import numpy as np
import pytest

from tests.test_browser import CHROMIUM, Tab, _serve, browser, server, server_logdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
pytest.importorskip("playwright.sync_api")

RUN = "deep"
N_BLOCKS = 20
MODULES = ("norm", "attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2")
STEPS = list(range(0, 100, 10))
BREAK_STEP = 50
SICK_BLOCK = "blocks.7"
SICK = f"{SICK_BLOCK}.mlp.fc2.weight"
OPENED = "blocks.3"
FADING_BLOCK = "blocks.17"
FADING = f"{FADING_BLOCK}.mlp.fc1.weight"
# A small model beside it: 6 rows in 3 blocks, which fit the screen and never fold by themselves.
SMALL = "small"
SMALL_LAYERS = [f"{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")]
VIEWPORT = {"width": 1440, "height": 1000}


def _layers():
    names = ["embed.weight"]
    for i in range(N_BLOCKS):
        names += [f"blocks.{i}.{m}.{p}" for m in MODULES for p in ("weight", "bias")]
    return names + ["head.weight"]


def _write_logdir(root):
    from tests.test_bad_input import event, hist_value, normal_buckets, write_run

    rng = np.random.default_rng(3)
    events = []
    for step in STEPS:
        scales = {SICK: 5e3, FADING: 1e-9} if step >= BREAK_STEP else {}
        values = [hist_value(f"gradients/{name}", normal_buckets(rng, scale=scales.get(name, 1e-2)))
                  for name in _layers()]
        events.append(event(step, *values))
    write_run(root / RUN, events)
    write_run(root / SMALL, [event(step, *[hist_value(f"gradients/{name}", normal_buckets(rng, scale=1e-2))
                                           for name in SMALL_LAYERS]) for step in STEPS])


@pytest.fixture(scope="module")
def fold_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("fold_logdir")
    _write_logdir(logdir)
    yield from _serve(logdir, lambda runs: all(runs.get(r, {}).get("steps_kept") == len(STEPS) for r in (RUN, SMALL)))


@pytest.fixture
def open_tab(fold_server, browser):  # noqa: F811
    """Factory: open_tab(hash) -> a new page with the tab open at that TensorBoard URL fragment."""
    pages = []

    def make(hash_=f"gradhealth&p.gradhealth.run={RUN}", run=RUN):
        page = browser.new_page(viewport=VIEWPORT)
        pages.append(page)
        tab = Tab(page, fold_server)
        tab.open(hash_)
        tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(run)}")
        return tab

    yield make
    for page in pages:
        page.close()


def _rows(tab):
    return tab.frame.evaluate("window.__gradhealth.rowNames()")


def label_point(tab, row):
    """Page coordinates of the label of the row named `row` (a block or a layer)."""
    point = tab.frame.evaluate(
        """(row) => {
            const c = window.__gradhealth.cellCenter(row, 0);
            const port = document.querySelector('.gh-hm-port').getBoundingClientRect();
            return c && {x: port.left + 12, y: c.y};
        }""", row)
    assert point is not None, row
    box = tab.page.locator("iframe[src*='plugin_entry.html']").bounding_box()
    return box["x"] + point["x"], box["y"] + point["y"]


def _click_label(tab, row):
    """Clicks the label of the row named `row` (a block or a layer)."""
    before = tab.drawn()
    tab.page.mouse.click(*label_point(tab, row))
    tab.wait_redraw(before)


def test_a_run_with_more_rows_than_fit_opens_folded_and_a_click_unfolds_a_block(open_tab):
    tab = open_tab()
    blocks = [f"blocks.{i}" for i in range(N_BLOCKS)]
    folded = _rows(tab)
    assert sorted(folded) == sorted(["embed.weight", *blocks, "head.weight"])
    # The URL says nothing yet: folding is the automatic choice.
    assert tab.frame.evaluate("window.__gradhealth.viewState.fold.mode") == "auto"
    assert "p.gradhealth.fold" not in tab.page.url

    _click_label(tab, OPENED)
    members = [n for n in _layers() if n.startswith(OPENED + ".")]
    rows = _rows(tab)
    # The block's layers take its place, together, and every other block stays folded.
    at = folded.index(OPENED)
    assert sorted(rows[at:at + len(members)]) == sorted(members)
    assert rows[:at] == folded[:at] and rows[at + len(members):] == folded[at + 1:]
    # TensorBoard's URL remembers it: a new page at that URL opens with the same block open.
    assert "p.gradhealth.fold=all|blocks.3" in urllib.parse.unquote(tab.page.url)
    again = open_tab(tab.page.url.split("#", 1)[1])
    assert _rows(again) == rows

    # A click on a member's label folds its block again.
    _click_label(tab, members[2])
    assert _rows(tab) == folded
    assert tab.errors == [] and again.errors == []


def test_the_fold_choice_stays_with_its_run(open_tab):
    tab = open_tab()
    _click_label(tab, OPENED)
    assert "p.gradhealth.fold=all|blocks.3" in urllib.parse.unquote(tab.page.url)
    # Another run's model folds as it would by itself: its 6 rows fit, so none folds.
    before = tab.drawn()
    tab.ui.locator("li.gh-run", has_text=SMALL).click()
    tab.wait_redraw(before)
    tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(SMALL)}")
    assert _rows(tab) == SMALL_LAYERS
    assert tab.frame.evaluate("window.__gradhealth.viewState.fold.mode") == "auto"
    assert "p.gradhealth.fold" not in urllib.parse.unquote(tab.page.url)
    # Back on the first run, its rows fold by themselves again.
    before = tab.drawn()
    tab.ui.locator("li.gh-run", has_text=RUN).click()
    tab.wait_redraw(before)
    tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(RUN)}")
    assert OPENED in _rows(tab)
    assert tab.errors == []


def test_a_finding_on_a_member_outlines_its_folded_block_and_a_click_opens_the_worst_member(open_tab):
    tab = open_tab()
    assert SICK_BLOCK in _rows(tab)
    finding = tab.ui.locator("li.gh-finding", has_text="Exploding gradients")
    finding.first.click()
    tab.frame.wait_for_function("document.querySelector('li.gh-finding[aria-selected=true]') !== null")
    cells = tab.frame.evaluate("window.__gradhealth.highlightCells()")
    # Only the block's row is outlined, at the steps the member exploded, each cell once.
    assert {c["layer"] for c in cells} == {SICK_BLOCK}
    assert sorted(int(c["step"]) for c in cells) == [s for s in STEPS if s >= BREAK_STEP]
    assert all(c["status"] == "critical" for c in cells)
    overlay = ".gh-hm-overlay"
    assert tab.pixel(overlay, SICK_BLOCK, 80)[3] == 0
    assert tab.pixel(overlay, "blocks.6", 80)[3] > 0

    # A click on the folded cell opens the layer that made it critical, at that step.
    x, y = tab.cell_point(SICK_BLOCK, 80)
    tab.page.mouse.click(x, y)
    title = tab.ui.locator(".gh-detail .gh-detail-title")
    title.wait_for(timeout=10_000)
    assert title.text_content() == SICK
    assert tab.frame.evaluate("window.__gradhealth.viewState.layer") == SICK
    # Enter unfolds the selected row's block; the selection stays on its layer.
    before = tab.drawn()
    tab.ui.locator(".gh-hm-port").first.press("Enter")
    tab.wait_redraw(before)
    rows = _rows(tab)
    assert SICK in rows and SICK_BLOCK not in rows
    assert tab.frame.evaluate("window.__gradhealth.viewState.layer") == SICK
    assert tab.errors == []


def test_a_label_click_leaves_no_tooltip_about_the_rows_it_replaced(open_tab):
    # Side by side with another run (the first view's fold applies to both).
    tab = open_tab(f"gradhealth&p.gradhealth.run={SMALL}&p.gradhealth.cmp={RUN}", run=SMALL)
    assert _rows(tab) == SMALL_LAYERS
    _click_label(tab, "0.weight")
    assert _rows(tab)[0] == "0"
    # The pointer has not moved: its tooltip is the folded block's now, not the layer's it had.
    tip = tab.ui.locator(".gh-tooltip")
    assert tip.is_visible()
    assert "click to unfold" in tip.text_content() and "0.weight" not in tip.text_content(), tip.text_content()
    assert tab.errors == []



def _tip_lines(tab):
    tip = tab.ui.locator(".gh-tooltip")
    return {line.locator(".gh-tip-key").text_content(): line.locator(".gh-tip-value").text_content()
            for line in tip.locator(".gh-tip-line").all()}


def _filter(tab, text, rows_check):
    tab.ui.locator("input[aria-label='Filter layers by name']").fill(text)
    tab.frame.wait_for_function(f"(() => {{ const r = window.__gradhealth.rowNames(); return {rows_check}; }})()",
                                timeout=10_000)


def test_a_folded_block_stands_for_the_layers_the_filter_keeps(open_tab):
    tab = open_tab()
    kept = [n for n in _layers() if "attn" in n]
    assert f"{len(_layers())} layers" in tab.ui.locator(".gh-summary").text_content()
    _filter(tab, "attn", "!r.includes('embed.weight')")
    assert _rows(tab) == [f"blocks.{i}" for i in range(N_BLOCKS)]
    # The sick member (mlp.fc2) is filtered out: its block's cell is the worst of the attention layers,
    # fetched as their own rows, and names one of them.
    x, y = tab.cell_point(SICK_BLOCK, 80)
    lines = {}
    for _ in range(100):
        tab.page.mouse.move(x, y + (_ % 2))
        tab.page.wait_for_timeout(100)
        lines = _tip_lines(tab)
        if lines.get("worst layer", "").startswith(f"{SICK_BLOCK}.attn."):
            break
    assert lines.get("block") == f"{SICK_BLOCK} (4 layers, click its name to unfold)", lines
    assert lines.get("worst layer", "").startswith(f"{SICK_BLOCK}.attn."), lines
    assert "critical" not in " ".join(lines.values()).lower(), lines
    # A click opens that kept member, not the sick one.
    tab.page.mouse.click(x, y)
    title = tab.ui.locator(".gh-detail .gh-detail-title")
    title.wait_for(timeout=10_000)
    assert title.text_content() == lines["worst layer"]
    assert tab.ui.locator(".gh-summary").text_content().startswith(f"{len(kept)} of {len(_layers())} layers")
    assert tab.errors == []


def test_a_filter_matching_no_layer_says_so_and_offers_to_clear_it(open_tab):
    tab = open_tab()
    _filter(tab, "nosuchlayer", "r.length === 0")
    note = tab.ui.locator(".gh-filter-note")
    note.wait_for(state="visible", timeout=5_000)
    assert "No layer matches \u201cnosuchlayer\u201d" in note.text_content()
    assert tab.ui.locator(".gh-summary").text_content().startswith(f"0 of {len(_layers())} layers")
    note.locator("button").click()
    tab.frame.wait_for_function("window.__gradhealth.rowNames().includes('embed.weight')", timeout=10_000)
    note.wait_for(state="hidden", timeout=5_000)
    assert tab.ui.locator("input[aria-label='Filter layers by name']").input_value() == ""
    assert tab.ui.locator(".gh-summary").text_content().startswith(f"{len(_layers())} layers")
    assert tab.frame.evaluate("window.__gradhealth.viewState.filter") == ""
    assert tab.errors == []


def test_the_summary_describes_the_steps_of_a_zoom_the_loaded_columns_hold(open_tab):
    tab = open_tab()
    summary = tab.ui.locator(".gh-summary")
    assert f"{len(STEPS)} steps \u00b7 last {STEPS[-1]}" in summary.text_content()
    # Every step is loaded: zooming in and in again asks the server for nothing, and the line follows.
    tab.frame.evaluate("window.__gradhealth.zoomTo(['20', '70'])")
    tab.frame.evaluate("window.__gradhealth.zoomTo(['30', '50'])")
    tab.frame.wait_for_function("document.querySelector('.gh-summary').textContent.includes('last 50')", timeout=5_000)
    assert "3 steps \u00b7 last 50" in summary.text_content(), summary.text_content()
    tab.frame.evaluate("window.__gradhealth.zoomTo(null)")
    tab.frame.wait_for_function(f"document.querySelector('.gh-summary').textContent.includes('last {STEPS[-1]}')",
                                timeout=5_000)
    assert tab.errors == []


def _wait_rows_in_sight(tab):
    tab.frame.wait_for_function("(() => { const w = window.__gradhealth.wantedRows(0, true);"
                                " return w.rows.length + w.blocks.length === 0; })()", timeout=20_000)


def _detail_title(tab):
    title = tab.ui.locator(".gh-detail .gh-detail-title")
    title.wait_for(timeout=10_000)
    return title


# Where a row sits in the rows in sight (without scrolling, as cellCenter would), and the alpha the
# overlay paints on its label and on the label of the row above: the selected row's is tinted.
ROW_SHOWN = """(layer) => {
    const v = window.__gradhealth.views[0];
    const g = v.scene.geo;
    const top = v.rowOffset(layer);
    const c = document.querySelector('.gh-hm-overlay');
    const k = c.width / c.getBoundingClientRect().width;
    const alpha = (y) => c.getContext('2d').getImageData(Math.floor(g.labelW / 2 * k), Math.floor(y * k), 1, 1).data[3];
    return {top, cellH: g.cellH, viewH: g.viewH,
            tint: alpha(top + g.cellH / 2), above: top >= g.cellH ? alpha(top - g.cellH / 2) : null};
}"""


def _assert_row_shown_selected(tab, layer):
    """`layer`'s own row is wholly in sight in the main heatmap, and marked as the selected one."""
    shown = tab.frame.evaluate(ROW_SHOWN, layer)
    assert shown["top"] is not None and 0 <= shown["top"] <= shown["viewH"] - shown["cellH"], shown
    assert shown["tint"] > 0 and shown["above"] in (0, None), shown


def _series_chart(tab):
    """The metric the panel's chart over steps shows, once drawn: the picker's value and the chart's title."""
    detail = tab.ui.locator(".gh-detail")
    # The line chart's title, not the distribution's beside it.
    title = detail.locator("svg.gh-chart > title", has_text=re.compile(r"^(?!distribution ).* over steps$"))
    title.wait_for(state="attached", timeout=20_000)
    picker = detail.locator("select[aria-label='Metric to chart over steps']")
    return picker.input_value(), title.text_content()


def _link(**params):
    return f"gradhealth&p.gradhealth.run={RUN}" + "".join(
        f"&p.gradhealth.{k}={urllib.parse.quote(str(v))}" for k, v in params.items())


def test_a_link_to_a_cell_whose_row_is_not_loaded_charts_what_a_click_on_it_charts(open_tab):
    # The link's layer is far below the first screenful: its row arrives after the panel opens.
    linked = open_tab(_link(layer=FADING, step=70))
    assert _detail_title(linked).text_content() == FADING
    linked.frame.wait_for_function(
        f"(() => {{ const h = window.__gradhealth.store.heatmaps[0];"
        f" return h.loaded === null || h.loaded[h.layers.indexOf({json.dumps(FADING)})] === 1; }})()", timeout=20_000)
    from_link = _series_chart(linked)

    # The same cell clicked in a tab opened without a link: its row loaded, the cell's rule picks the chart.
    clicked = open_tab()
    _click_label(clicked, FADING_BLOCK)
    clicked.cell_point(FADING, 70)
    _wait_rows_in_sight(clicked)
    x, y = clicked.cell_point(FADING, 70)
    clicked.page.mouse.click(x, y)
    assert _detail_title(clicked).text_content() == FADING
    from_click = _series_chart(clicked)
    assert from_click[0] == "mean_abs", from_click
    assert from_link == from_click
    assert linked.errors == [] and clicked.errors == []


def test_a_link_to_a_layer_inside_a_folded_block_opens_the_block_and_shows_its_row(open_tab):
    tab = open_tab(_link(layer=FADING, step=70))
    assert _detail_title(tab).text_content() == FADING
    rows = _rows(tab)
    # Only the layer's block opens: every other stays folded, as the link (automatic folding) had it.
    assert FADING in rows and FADING_BLOCK not in rows
    assert [r for r in rows if r.startswith("blocks.") and r.count(".") == 1] == \
        [f"blocks.{i}" for i in range(N_BLOCKS) if i != 17]
    assert f"p.gradhealth.fold=all|{FADING_BLOCK}" in urllib.parse.unquote(tab.page.url)
    _assert_row_shown_selected(tab, FADING)
    assert tab.errors == []


def test_a_link_to_a_layer_below_the_first_screenful_scrolls_the_heatmap_to_its_row(open_tab):
    # Every block open, as the link says: 202 rows, the layer's about the 178th.
    tab = open_tab(_link(fold="none", layer=FADING, step=70))
    assert _detail_title(tab).text_content() == FADING
    rows = _rows(tab)
    assert len(rows) == len(_layers()) and rows.index(FADING) > 150
    _assert_row_shown_selected(tab, FADING)
    # The link's fold state is kept as it was.
    assert tab.frame.evaluate("window.__gradhealth.viewState.fold") == {"mode": "none", "except": []}
    # The rows brought into sight are fetched and drawn.
    _wait_rows_in_sight(tab)
    # The panel below the heatmap is brought into view as a click on the cell brings it: at least 320 px
    # of it in the window (app.ts DETAIL_MIN_VISIBLE), once its charts are in.
    tab.ui.locator(".gh-detail svg").first.wait_for(timeout=15_000)
    tab.frame.wait_for_function("(() => { const r = document.querySelector('.gh-detail').getBoundingClientRect();"
                                " return r.top >= 0 && r.top <= innerHeight - 320; })()", timeout=10_000)
    assert tab.errors == []


def test_a_finding_click_moves_an_open_panel_to_the_findings_layer_and_step(open_tab):
    tab = open_tab()
    # The panel is open on a healthy layer the finding does not cover.
    # A row still loading opens nothing: the rows in sight are here first.
    _wait_rows_in_sight(tab)
    x, y = tab.cell_point("embed.weight", 30)
    tab.page.mouse.click(x, y)
    assert _detail_title(tab).text_content() == "embed.weight"
    tab.ui.locator("li.gh-finding", has_text="Exploding gradients").first.click()
    # It shows the member the finding is about, inside its folded block, at the first step it covers.
    tab.frame.wait_for_function(f"window.__gradhealth.viewState.layer === {json.dumps(SICK)}", timeout=10_000)
    tab.ui.locator(".gh-detail .gh-detail-title", has_text=SICK).wait_for(timeout=10_000)
    assert _detail_title(tab).text_content() == SICK
    assert tab.frame.evaluate("String(window.__gradhealth.viewState.step)") == str(BREAK_STEP)
    # Its block opens (the others stay folded), and its own row is in sight, marked selected.
    rows = _rows(tab)
    assert SICK in rows and SICK_BLOCK not in rows and OPENED in rows
    _assert_row_shown_selected(tab, SICK)
    assert tab.errors == []


def test_a_finding_about_another_role_opens_its_layer_in_that_roles_panel(server, browser):  # noqa: F811
    from tests.test_browser import BROKEN, HEALTHY, RUN as TRAIN

    page = browser.new_page(viewport=VIEWPORT)
    try:
        tab = Tab(page, server)
        tab.open(f"gradhealth&p.gradhealth.run={TRAIN}&p.gradhealth.role=weight")
        tab.frame.wait_for_function("window.__gradhealth.viewState.role === 'weight'", timeout=10_000)
        x, y = tab.cell_point(HEALTHY, 100)
        page.mouse.click(x, y)
        assert _detail_title(tab).text_content() == HEALTHY
        # The finding is about the gradients of another layer: the role switches and the panel follows.
        tab.ui.locator("li.gh-finding", has_text="Exploding gradients").first.click()
        tab.frame.wait_for_function("window.__gradhealth.viewState.role === 'gradient'", timeout=10_000)
        tab.ui.locator(".gh-detail .gh-detail-title", has_text=BROKEN).wait_for(timeout=10_000)
        state = tab.frame.evaluate("[window.__gradhealth.viewState.layer, String(window.__gradhealth.viewState.step)]")
        assert state[0] == BROKEN and int(state[1]) >= 60, state
        assert tab.errors == []
    finally:
        page.close()


def test_the_fold_link_stays_short_however_many_blocks_open_and_old_links_still_open(open_tab):
    tab = open_tab()
    opened = [f"blocks.{i}" for i in range(11)]
    for block in opened:
        _click_label(tab, block)
    rows = _rows(tab)
    assert not any(b in rows for b in opened) and "blocks.11" in rows
    # 11 of 20 blocks open: the link lists the 9 still folded, as one range.
    fold = urllib.parse.parse_qs(urllib.parse.urlparse(tab.page.url).fragment)["p.gradhealth.fold"][0]
    assert fold == "none|blocks.11~19", fold
    again = open_tab(tab.page.url.split("#", 1)[1])
    assert _rows(again) == rows
    # A link listing blocks one by one, as links did before, opens those blocks.
    old = open_tab(f"gradhealth&p.gradhealth.run={RUN}&p.gradhealth.fold="
                   + urllib.parse.quote("all|blocks.3|blocks.4"))
    shown = _rows(old)
    assert "blocks.3" not in shown and "blocks.4" not in shown and "blocks.5" in shown
    assert f"{OPENED}.mlp.fc1.weight" in shown
    assert tab.errors == [] and again.errors == [] and old.errors == []


# ----------------------------------------------------------------- a 24-layer GPT-2

GPT2 = "gpt2"
GPT2_BLOCK = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
              "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
              "mlp.c_proj.weight", "mlp.c_proj.bias"]
GPT2_LAYERS = (["transformer.wte.weight", "transformer.wpe.weight"]
               + [f"transformer.h.{i}.{p}" for i in range(24) for p in GPT2_BLOCK]
               + ["transformer.ln_f.weight", "transformer.ln_f.bias"])
SHOTS = os.environ.get("GRADHEALTH_SCREENSHOTS_DIR")

# Per row in sight: its name, and how many pixels of ink its label left in the label column
# (left of the loading marks), read from the heatmap's canvas in the middle of the row.
LABEL_INK = """() => {
    const v = window.__gradhealth.views[0];
    const s = v.scene, g = s.geo, h = s.h;
    const c = document.querySelector('.gh-hm-body');
    const ctx = c.getContext('2d');
    const out = [];
    const first = Math.ceil(s.scrollTop / g.cellH), last = Math.floor((s.scrollTop + g.viewH) / g.cellH) - 1;
    for (let pos = first; pos <= Math.min(last, s.order.length - 1); pos++) {
        const y = Math.round((pos * g.cellH - s.scrollTop + g.cellH / 2 - 2) * g.scale);
        const d = ctx.getImageData(0, y, Math.floor((g.labelW - 8) * g.scale), Math.max(1, Math.round(4 * g.scale))).data;
        let ink = 0;
        for (let k = 3; k < d.length; k += 4) if (d[k] > 100) ink++;
        out.push([h.layers[s.order[pos]], ink]);
    }
    return out;
}"""


@pytest.fixture(scope="module")
def gpt2_server(tmp_path_factory):
    from tests.test_bad_input import event, hist_value, normal_buckets, write_run

    logdir = tmp_path_factory.mktemp("gpt2_logdir")
    rng = np.random.default_rng(5)
    write_run(logdir / GPT2, [event(step, *[hist_value(f"{kind}/{name}", normal_buckets(rng, scale=1e-2))
                                            for name in GPT2_LAYERS for kind in ("gradients", "weights")])
                              for step in STEPS])
    yield from _serve(logdir, lambda runs: runs.get(GPT2, {}).get("steps_kept") == len(STEPS))


@pytest.fixture
def gpt2_tab(gpt2_server, browser):  # noqa: F811
    """A page on the GPT-2 run in a browser that draws scrollbars as a desktop one does."""
    from tests.test_browser import CHROMIUM_ARGS

    b = browser.browser_type.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, ignore_default_args=["--hide-scrollbars"])
    try:
        page = b.new_page(viewport=VIEWPORT)
        tab = Tab(page, gpt2_server)
        tab.open(f"gradhealth&p.gradhealth.run={GPT2}&p.gradhealth.role=gradient")
        tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(GPT2)}")
        yield tab
    finally:
        b.close()


def _geo(tab):
    return tab.frame.evaluate("(() => { const g = window.__gradhealth.views[0].scene.geo;"
                              " return {labelW: g.labelW, cellH: g.cellH, viewH: g.viewH, totalH: g.totalH}; })()")


def _shot(tab, name):
    if SHOTS:
        tab.page.screenshot(path=os.path.join(SHOTS, f"{name}.png"))


def test_unfolded_blocks_keep_readable_labelled_rows_and_the_heatmap_scrolls(gpt2_tab):
    tab = gpt2_tab
    blocks = [f"transformer.h.{i}" for i in range(24)]
    assert all(b in _rows(tab) for b in blocks)
    # Every block open but one in the middle of them.
    for block in blocks[:8] + blocks[9:12]:
        _click_label(tab, block)
    rows = _rows(tab)
    assert "transformer.h.8" in rows and "transformer.h.9.ln_1.weight" in rows
    # The rows in sight are asked for and drawn, at this row height as at any.
    _wait_rows_in_sight(tab)
    _shot(tab, "gpt2-unfolded")
    geo = _geo(tab)
    # Rows as tall as a label needs: more of them than fit, so the heatmap scrolls.
    assert geo["cellH"] >= 12 and geo["totalH"] > geo["viewH"], geo
    scroller = tab.frame.evaluate("""(() => { const s = document.querySelector('.gh-hm-scroll');
        const c = document.querySelector('.gh-hm-body');
        return {scrollbar: s.offsetWidth - s.clientWidth, room: s.scrollHeight - s.clientHeight,
                canvasRight: c.getBoundingClientRect().right,
                clientRight: s.getBoundingClientRect().left + s.clientLeft + s.clientWidth}; })()""")
    # A scrollbar takes its room beside the cells, and no cell is drawn under it.
    assert scroller["scrollbar"] >= 6 and scroller["room"] > 0, scroller
    assert scroller["canvasRight"] <= scroller["clientRight"] + 0.5, scroller
    # Every row in sight is named, the folded block among open ones too, at every scroll position.
    tab.frame.evaluate("window.__gradhealth.cellCenter('transformer.h.8', 0)")
    for top in (None, 0, 10**6):
        if top is not None:
            tab.frame.evaluate(f"window.__gradhealth.views[0].scrollTop = {top}")
            tab.page.wait_for_timeout(200)
        ink = tab.frame.evaluate(LABEL_INK)
        assert len(ink) > 20 and all(n > 0 for _, n in ink), [name for name, n in ink if n == 0]
        if top is None:
            assert "transformer.h.8" in [name for name, _ in ink]
    assert tab.errors == []


def test_the_label_column_keeps_its_width_through_folds_and_role_switches(gpt2_tab):
    tab = gpt2_tab
    widths = [_geo(tab)["labelW"]]
    _click_label(tab, "transformer.h.3")
    widths.append(_geo(tab)["labelW"])
    _click_label(tab, "transformer.h.3.attn.c_attn.weight")
    widths.append(_geo(tab)["labelW"])
    before = tab.drawn()
    tab.ui.locator("select").nth(0).select_option("weight")
    tab.wait_redraw(before)
    widths.append(_geo(tab)["labelW"])
    _shot(tab, "gpt2-weights")
    assert len(set(widths)) == 1, widths
    assert tab.errors == []
