"""A long run in the tab, in headless Chromium inside a real TensorBoard: the heatmap comes in
bins of steps at the canvas' width, and zooming asks for the window and draws its own columns.

Rows are per-layer scalars (TensorBoard keeps 1,000 of them per tag), so the run holds more
steps than the column budget of an 800-pixel-wide page.
"""

from __future__ import annotations

import urllib.parse

import numpy as np
import pytest

from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, Tab, _serve, sync_api

pytestmark = pytest.mark.skipif(sync_api is None, reason="needs playwright")

RUN = "long"
STEPS = 1000
LAYERS = 3
BAD = (1, 537)  # layer_1's largest gradient is enormous at step 537 only: its lowest score


# Presses and releases the mouse in the middle of a layer's cell in the column headed by a step,
# computed inside the frame: a column may be narrower than the page's rounding of coordinates.
CLICK_COLUMN = """([layer, step]) => {
    const v = window.__gradhealth.views[0];
    const s = v.scene, g = s.geo, h = s.h;
    const col = h.steps.findIndex((x) => x === BigInt(step));
    const r = v.port.getBoundingClientRect();
    const mid = (s.edges[col] + s.edges[col + 1]) / 2;
    const x = r.left + g.labelW + (mid - s.range.lo) / (s.range.hi - s.range.lo) * g.plotW;
    const y = r.top + s.position.get(layer) * g.cellH - s.scrollTop + g.cellH / 2;
    const at = { clientX: x, clientY: y, button: 0, bubbles: true };
    v.port.dispatchEvent(new MouseEvent("mousedown", at));
    window.dispatchEvent(new MouseEvent("mouseup", at));
}"""


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    from tests.test_bad_input import event, scalar_value, write_run

    logdir = tmp_path_factory.mktemp("browser_long")
    events = [event(s, *[scalar_value(f"grad_max/layer_{i}", 1e9 if (i, s) == BAD else 1e-2 + 1e-4 * (s % 7))
                         for i in range(LAYERS)]) for s in range(STEPS)]
    write_run(logdir / RUN, events)
    yield from _serve(logdir, lambda runs: runs.get(RUN, {}).get("steps_kept") == STEPS)


def test_zoom_fetches_the_window_and_draws_finer_columns(long_server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 800, "height": 700})
            asked = []
            page.on("request", lambda r: asked.append(urllib.parse.urlparse(r.url)) if "/gradhealth/heatmap" in r.url
                    else None)
            tab = Tab(page, long_server)
            tab.open(f"gradhealth&p.gradhealth.run={RUN}")
            first = urllib.parse.parse_qs(asked[-1].query)
            columns = int(first["columns"][0])
            assert columns % 128 == 0 and columns < STEPS and "start" not in first
            # The tab reads the compact layout: a byte per cell, not lists of codes.
            assert first["layout"] == ["compact"]
            binned, n = tab.frame.evaluate("(() => { const h = window.__gradhealth.store.heatmaps[0];"
                                           " return [h.binned, h.steps.length]; })()")
            assert binned and n <= columns
            # The header names the run's last step, the end of the last bin, not where that bin starts.
            summary = tab.ui.locator(".gh-summary").text_content()
            assert f"last {STEPS - 1:,}" in summary, summary
            # The column holding step 537 is a bin of several steps, and its cell is step 537's.
            bad = tab.frame.evaluate("""([layer, step]) => {
                const h = window.__gradhealth.store.heatmaps[0];
                const row = h.layers.indexOf(layer);
                const col = h.stepsLast.findIndex((last, j) => h.steps[j] <= BigInt(step) && BigInt(step) <= last);
                return [String(h.steps[col]), String(h.stepsLast[col]), h.status[row][col],
                        String(h.steps[col] + BigInt(h.stepOffsets[row][col]))];
            }""", [f"layer_{BAD[0]}", BAD[1]])
            assert bad[0] != bad[1] and bad[3] == str(BAD[1]), bad
            # A click in the middle of that column (under 2 pixels wide) opens step 537, not its first step.
            tab.frame.evaluate(CLICK_COLUMN, [f"layer_{BAD[0]}", bad[0]])
            tab.frame.wait_for_function(f"window.__gradhealth.viewState.step?.toString() === '{BAD[1]}'")
            before = int(tab.frame.evaluate("Number(document.documentElement.dataset.ghZoomDrawn || 0)"))
            tab.frame.evaluate("window.__gradhealth.zoomTo(['500', '599'])")
            tab.frame.wait_for_function(f"Number(document.documentElement.dataset.ghZoomDrawn || 0) > {before}",
                                        timeout=20_000)
            zoomed = urllib.parse.parse_qs(asked[-1].query)
            assert zoomed["start"] == ["500"] and zoomed["end"] == ["599"] and zoomed["layout"] == ["compact"]
            steps = tab.frame.evaluate("window.__gradhealth.store.heatmaps[0].steps.map(String)")
            assert steps == [str(s) for s in range(500, 600)]
            # Every step of the window is its own column now; a click opens the cell at its step.
            x, y = tab.cell_point(f"layer_{BAD[0]}", "538")
            page.mouse.click(x, y)
            tab.frame.wait_for_function("window.__gradhealth.viewState.step?.toString() === '538'")

            # A double-click on another cell zooms out and leaves the selection where it was:
            # its first click opens nothing.
            x, y = tab.cell_point("layer_0", "550")
            page.mouse.dblclick(x, y)
            tab.frame.wait_for_function("window.__gradhealth.viewState.zoom === null")
            tab.frame.wait_for_timeout(1000)
            assert tab.frame.evaluate("[window.__gradhealth.viewState.layer, String(window.__gradhealth.viewState.step)]"
                                      ) == [f"layer_{BAD[0]}", "538"]
            assert not tab.errors, tab.errors
        finally:
            browser.close()


# A loss logged at every one of this many steps, every point kept (--samples_per_plugin=scalars=0):
# more than the track sends for a whole run, so the whole run's track is thinned.
TRACK_STEPS = 5000
TRACK_SPIKE = 2050


@pytest.fixture(scope="module")
def long_track_server(tmp_path_factory):
    from tests.test_bad_input import event, scalar_value, write_run

    logdir = tmp_path_factory.mktemp("browser_long_track")
    events = [event(s, scalar_value("loss", 50.0 if s == TRACK_SPIKE else 2.0 + (s % 13) / 13),
                    *([scalar_value("grad_max/layer_0", 1e-2 + 1e-4 * (s % 7))] if s % 50 == 0 else []))
              for s in range(TRACK_STEPS)]
    write_run(logdir / RUN, events)
    yield from _serve(logdir, lambda runs: runs.get(RUN, {}).get("steps_kept") == TRACK_STEPS // 50,
                      flags=["--samples_per_plugin=scalars=0"])


TRACK_LOSS = """() => { const t = window.__gradhealth.tracks[0];
    const s = t && t.series.find((x) => x.tag === "loss");
    return s ? [s.binned, s.steps.map(String)] : null; }"""


def test_a_zoom_draws_every_point_of_a_thinned_track_in_its_window(long_track_server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            asked = []
            page.on("request", lambda r: asked.append(urllib.parse.urlparse(r.url)) if "/gradhealth/track" in r.url
                    else None)
            tab = Tab(page, long_track_server)
            tab.open(f"gradhealth&p.gradhealth.run={RUN}")
            try:
                tab.frame.wait_for_function(f"({TRACK_LOSS})() !== null", timeout=60_000)
            except sync_api.TimeoutError:
                state = tab.frame.evaluate("JSON.stringify(window.__gradhealth.state)")
                raise AssertionError(f"no track drawn; asked {[u.query for u in asked]}, state {state}, "
                                     f"errors {tab.errors}") from None
            binned, whole = tab.frame.evaluate(TRACK_LOSS)
            in_window = [s for s in whole if 2000 <= int(s) <= 2099]
            assert binned and str(TRACK_SPIKE) in whole and len(in_window) < 50
            tab.frame.evaluate("window.__gradhealth.zoomTo(['2000', '2099'])")
            tab.frame.wait_for_function(f"(({TRACK_LOSS})() || [true])[0] === false", timeout=20_000)
            zoomed = urllib.parse.parse_qs(asked[-1].query)
            assert zoomed["start"] == ["2000"] and zoomed["end"] == ["2099"]
            # The window's every step, and one step either side so the line reaches the edges.
            assert tab.frame.evaluate(TRACK_LOSS)[1] == [str(s) for s in range(1999, 2101)]
            # Zoomed out, the whole run's track is drawn again, without asking for it again.
            tab.frame.evaluate("window.__gradhealth.zoomTo(null)")
            tab.frame.wait_for_function(f"(({TRACK_LOSS})() || [false])[0] === true", timeout=20_000)
            assert tab.frame.evaluate(TRACK_LOSS)[1] == whole
            assert sum("start" not in urllib.parse.parse_qs(u.query) for u in asked) == 1
            assert not tab.errors, tab.errors
        finally:
            browser.close()


# Counts the tab's heatmap requests from now on, then zooms once and five times more in one turn.
# The page's clock stands still during the burst: each zoom redraws at once, and on a loaded
# machine that redraw alone could outlast the wait that makes zooms one burst. The clock is
# the tab's only measure of "within the wait"; its timers still run on real time afterwards.
ZOOM_BURST = """() => {
    const asked = [];
    const real = window.fetch;
    window.fetch = (url, init) => {
        if (String(url).includes("heatmap?")) asked.push(String(url));
        return real(url, init);
    };
    window.__ghAsked = asked;
    const now = performance.now;
    const frozen = now.call(performance);
    performance.now = () => frozen;
    try {
        window.__gradhealth.zoomTo(["500", "599"]);
        const atOnce = asked.length;
        for (let lo = 510; lo <= 550; lo += 10) window.__gradhealth.zoomTo([String(lo), String(lo + 99)]);
        return [atOnce, asked.length];
    } finally {
        performance.now = now;
    }
}"""


def test_a_zoom_asks_at_once_and_a_burst_of_zooms_asks_twice(long_server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 800, "height": 700})
            tab = Tab(page, long_server)
            tab.open(f"gradhealth&p.gradhealth.run={RUN}")
            assert tab.frame.evaluate("window.__gradhealth.store.heatmaps[0].binned")
            before = int(tab.frame.evaluate("Number(document.documentElement.dataset.ghZoomDrawn || 0)"))
            # The first zoom's window is asked for in the same turn; the five that follow it at once
            # wait, and are asked for as one: the last of them.
            assert tab.frame.evaluate(ZOOM_BURST) == [1, 1]
            tab.frame.wait_for_function("window.__gradhealth.store.heatmaps[0].steps[0] === 550n", timeout=20_000)
            tab.frame.wait_for_timeout(500)
            asked = tab.frame.evaluate("window.__ghAsked")
            assert len(asked) == 2, asked
            assert [urllib.parse.parse_qs(urllib.parse.urlparse(u).query)["start"] for u in asked] == [["500"], ["550"]]
            steps = tab.frame.evaluate("window.__gradhealth.store.heatmaps[0].steps.map(String)")
            assert steps == [str(s) for s in range(550, 650)]
            assert int(tab.frame.evaluate("Number(document.documentElement.dataset.ghZoomDrawn || 0)")) > before
            assert not tab.errors, tab.errors
        finally:
            browser.close()


# ----------------------------------------------------------------- rows: only those in sight

DEEP = "deep"
DEEP_STEPS = 12
LONE, BLOCKS, PER_BLOCK = 240, 20, 4  # 320 rows: 240 layers of their own, 20 blocks of 4 (folded by themselves)
BAD_LONE = ("layer_230", 7)
BAD_MEMBER = ("block_17/dense_2", 5)
LOADING_RGB = [0xDF, 0xE4, 0xEA]  # colors.ts LOADING_COLOR

_WANTED = "(() => { const w = window.__gradhealth.wantedRows(0, true); return w.rows.length + w.blocks.length === 0; })()"
# The raster's pixel (one pixel row per row shown) in the middle of a row's cells, by its name.
_RASTER_PIXEL = """(name) => {
    const v = window.__gradhealth.views[0];
    const pos = v.scene.order.findIndex((r) => v.data.layers[r] === name);
    const c = v.scene.offscreen;
    return Array.from(c.getContext("2d").getImageData(Math.floor(c.width / 2), pos, 1, 1).data.slice(0, 3));
}"""


@pytest.fixture(scope="module")
def deep_server(tmp_path_factory):
    from tests.test_bad_input import event, scalar_value, write_run

    logdir = tmp_path_factory.mktemp("browser_deep")
    names = [f"layer_{i}" for i in range(LONE)] + [f"block_{b}/dense_{j}" for b in range(BLOCKS) for j in range(PER_BLOCK)]
    events = [event(s, *[scalar_value(f"grad_max/{n}", 1e9 if (n, s) in (BAD_LONE, BAD_MEMBER) else 1e-2 + 1e-4 * (s % 5))
                         for n in names]) for s in range(DEEP_STEPS)]
    write_run(logdir / DEEP, events)
    yield from _serve(logdir, lambda runs: runs.get(DEEP, {}).get("steps_kept") == DEEP_STEPS)


def _spans(text: str) -> set:
    out = set()
    for item in filter(None, text.split(",")):
        a, _, b = item.partition(":")
        out.update(range(int(a), int(b or a) + 1))
    return out


def test_the_tab_asks_only_for_the_rows_in_sight(deep_server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 700})
            asked = []
            page.on("request", lambda r: asked.append(urllib.parse.parse_qs(urllib.parse.urlparse(r.url).query,
                                                                             keep_blank_values=True))
                    if "/gradhealth/heatmap" in r.url else None)
            tab = Tab(page, deep_server)
            tab.open(f"gradhealth&p.gradhealth.run={DEEP}")
            tab.frame.wait_for_function(_WANTED, timeout=20_000)
            layers = tab.frame.evaluate("window.__gradhealth.store.heatmaps[0].layers")
            assert len(layers) == LONE + BLOCKS * PER_BLOCK
            # Every request named its rows, and the answers hold far fewer than the run's (a block
            # folded by itself comes as one row, its members' cells stay on the server).
            assert asked and all("rows" in q and "blocks" in q for q in asked), asked
            rows_asked = set().union(*(_spans(q["rows"][0]) for q in asked))
            loaded = tab.frame.evaluate("Array.from(window.__gradhealth.store.heatmaps[0].loaded)")
            assert 0 < sum(loaded) < len(layers) // 2, sum(loaded)
            assert {i for i, x in enumerate(loaded) if x} <= rows_asked
            assert not any(loaded[i] for i, name in enumerate(layers) if name.startswith("block_"))
            # The blocks folded by themselves; the run's last row shown is not here yet: drawn as loading.
            names = tab.frame.evaluate("window.__gradhealth.rowNames()")
            assert len(names) == LONE + BLOCKS and "block_3" in names
            assert tab.frame.evaluate(_RASTER_PIXEL, names[-1]) == LOADING_RGB

            # Scrolled to the bottom: the rows there are asked for, none of the top's again, and drawn.
            before = len(asked)
            tab.frame.evaluate("window.__gradhealth.views[0].scrollTop = 1e6")
            tab.frame.wait_for_function(f"Number(document.documentElement.dataset.ghRowsDrawn || 0) > 0 && {_WANTED}",
                                        timeout=20_000)
            assert len(asked) > before
            scrolled = [q for q in asked[before:]]
            assert all(0 not in _spans(q["rows"][0]) for q in scrolled), scrolled
            assert tab.frame.evaluate(_RASTER_PIXEL, names[-1]) != LOADING_RGB

            # A click on a scrolled row's cell opens that layer at that step.
            x, y = tab.cell_point(BAD_LONE[0], BAD_LONE[1])
            tab.frame.wait_for_function(_WANTED, timeout=20_000)
            page.mouse.click(x, y)
            tab.frame.wait_for_function(f"window.__gradhealth.viewState.layer === '{BAD_LONE[0]}' && "
                                        f"window.__gradhealth.viewState.step?.toString() === '{BAD_LONE[1]}'")
            assert tab.ui.locator(".gh-summary").text_content().startswith(f"{LONE + BLOCKS * PER_BLOCK} layers")

            # The panel opened below scrolls the page once its charts are drawn: closed, nothing moves.
            tab.frame.evaluate("window.__gradhealth.closeDetail()")
            # A folded block came folded from the server (its members' own rows were never asked for),
            # and a click on its cell opens its worst member there.
            block = BAD_MEMBER[0].split("/")[0]
            x, y = tab.cell_point(BAD_MEMBER[0], BAD_MEMBER[1])
            tab.frame.wait_for_function(_WANTED, timeout=20_000)
            held = tab.frame.evaluate(f"""(() => {{ const h = window.__gradhealth.store.heatmaps[0];
                return [h.blockRows.has('{block}'), h.loaded[h.layers.indexOf('{BAD_MEMBER[0]}')]]; }})()""")
            assert held == [True, 0], held
            page.mouse.click(x, y)
            tab.frame.wait_for_function(f"window.__gradhealth.viewState.layer === '{BAD_MEMBER[0]}' && "
                                        f"window.__gradhealth.viewState.step?.toString() === '{BAD_MEMBER[1]}'")
            # The opened member's own row comes too, so its panel knows the steps it was logged at.
            tab.frame.wait_for_function(f"""(() => {{ const h = window.__gradhealth.store.heatmaps[0];
                return h.loaded[h.layers.indexOf('{BAD_MEMBER[0]}')] === 1; }})()""", timeout=20_000)
            tab.page.wait_for_timeout(500)
            assert "data logged for this layer" not in tab.ui.locator(".gh-detail").text_content()
            assert not tab.errors, tab.errors
        finally:
            browser.close()
