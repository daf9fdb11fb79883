"""The Gradient Health tab in headless Chromium inside a real TensorBoard.

One TensorBoard process (the venv's ``tensorboard``) serves a logdir written here
with TF2 ``tf.summary.histogram``: run ``train`` has a healthy layer, one whose
gradients explode (max |g| > 1e3) from step ``BREAK_STEP`` on and one whose
gradients vanish from ``QUIET_STEP`` on; a second run is named, and has a layer
named, like an XSS payload. Debian's /usr/bin/chromium is
driven by Playwright; nothing downloads a browser.

The tests at the end open the demo runs (`demo/runs`) at 1600x1000, as a new user
would see them; the README's screenshots, taken of those runs, land in
$GRADHEALTH_SCREENSHOTS (docs/screenshots/ when refreshing them).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import tempfile
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest
from tests.processes import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = pathlib.Path(__file__).resolve().parents[1]
# GRADHEALTH_SCREENSHOTS=docs/screenshots refreshes the README's pictures; by
# default they go to a scratch folder so a test run leaves the tree clean.
SCREENSHOTS = pathlib.Path(os.environ.get("GRADHEALTH_SCREENSHOTS") or tempfile.mkdtemp(prefix="gradhealth-shots-"))

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")
sync_api = pytest.importorskip("playwright.sync_api")

RUN = "train"
HEALTHY = "dense/kernel"
BROKEN = "dense_1/kernel"
QUIET = "dense_2/kernel"
STEPS = list(range(0, 200, 10))
BREAK_STEP = 60
QUIET_STEP = 120
XSS_RUN = "<img src=x onerror=alert(1)>"
XSS_LAYER = "<img src=x onerror=window.__xss=1>"
# Weights only, as Keras' callback logs them: nothing in it can show a gradient problem.
WEIGHTS_RUN = "weights_only"
SHARED_PARAMETER = "fc9.weight"
# Statistics per iteration, histograms per epoch: two step axes in one row.
TWO_AXES_RUN = "two_axes"
TWO_AXES_LAYER = "layer_0"
TWO_AXES_STEPS = list(range(0, 200, 5))
# A gradient all zeros at two steps in a row: too briefly for a vanishing finding.
BRIEF_RUN = "brief_vanishing"
BRIEF_STEPS = (80, 90)
# A loss logged every step whose values stand 30x above both sides at two steps in a row: one spike episode.
SPIKE_RUN = "spike_episode"
SPIKE_STEPS = (100, 101)
FRAME = "iframe[src*='plugin_entry.html']"


def _write_logdir(root: pathlib.Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    rng = np.random.default_rng(7)
    shapes = {HEALTHY: (32, 16), "dense/bias": (16,), BROKEN: (16, 8), "dense_1/bias": (8,),
              QUIET: (8, 4), "dense_2/bias": (4,)}
    writer = tf.summary.create_file_writer(str(root / RUN))
    with writer.as_default():
        for step in STEPS:
            for name, shape in shapes.items():
                grad = rng.normal(0.0, 1e-2, size=shape)
                if name == BROKEN and step >= BREAK_STEP:
                    grad = grad * 5e5
                if name == QUIET and step >= QUIET_STEP:
                    grad = grad * 1e-6
                tf.summary.histogram(f"gradients/{name}", grad, step=step)
                tf.summary.histogram(f"weights/{name}", rng.normal(0.0, 0.1, size=shape), step=step)
    writer.close()
    writer = tf.summary.create_file_writer(str(root / WEIGHTS_RUN))
    with writer.as_default():
        for step in STEPS[:6]:
            tf.summary.histogram("dense/kernel/histogram", rng.normal(0.0, 0.1, size=(8, 8)), step=step)
            # No word of these names tells a role: W_extra's is guessed, input/images has none.
            tf.summary.histogram("W_extra", rng.normal(0.0, 0.1, size=(4, 4)), step=step)
            tf.summary.histogram("input/images", rng.uniform(0.0, 1.0, size=64), step=step)
            # One parameter under two prefixes, no role word: which is the weight goes unsaid.
            tf.summary.histogram(f"net/{SHARED_PARAMETER}", rng.normal(0.0, 0.1, size=(4, 4)), step=step)
            tf.summary.histogram(f"net_g/{SHARED_PARAMETER}", rng.normal(0.0, 1e-3, size=(4, 4)), step=step)
    writer.close()
    writer = tf.summary.create_file_writer(str(root / BRIEF_RUN))
    with writer.as_default():
        for step in STEPS:
            grad = rng.normal(0.0, 1e-2, size=(8, 8)) * (0.0 if step in BRIEF_STEPS else 1.0)
            tf.summary.histogram(f"gradients/{HEALTHY}", grad, step=step)
    writer.close()
    writer = tf.summary.create_file_writer(str(root / SPIKE_RUN))
    with writer.as_default():
        for step in range(200):
            loss = 2.0 * np.exp(-step / 100) * (1.0 + 0.02 * rng.normal()) * (30.0 if step in SPIKE_STEPS else 1.0)
            tf.summary.scalar("loss", loss, step=step)
            if step in STEPS:
                tf.summary.histogram(f"gradients/{HEALTHY}", rng.normal(0.0, 1e-2, size=(8, 8)), step=step)
    writer.close()
    writer = tf.summary.create_file_writer(str(root / XSS_RUN))
    with writer.as_default():
        for step in STEPS[:6]:
            tf.summary.histogram(f"gradients/{XSS_LAYER}", rng.normal(0.0, 1e-2, size=(8, 8)), step=step)
    writer.close()


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode())


def _write_two_axes_run(run_dir: pathlib.Path) -> None:
    """Per-iteration statistics (``grad_mean/layer_0``, 10 iterations a second) beside per-epoch
    histograms (``grad_hist/layer_0`` at steps 0..3, each written as its epoch of 50 iterations ends)."""
    from tests.test_bad_input import event, hist_value, normal_buckets, scalar_value, write_run

    rng = np.random.default_rng(9)
    events = [event(s, scalar_value(f"grad_mean/{TWO_AXES_LAYER}", 1e-3), wall_time=1000.0 + s * 0.1)
              for s in TWO_AXES_STEPS]
    events += [event(e, hist_value(f"grad_hist/{TWO_AXES_LAYER}", normal_buckets(rng)),
                     wall_time=1000.0 + ((e + 1) * 50 - 1) * 0.1 + 0.01) for e in range(4)]
    write_run(run_dir, sorted(events, key=lambda e: e.wall_time))


@pytest.fixture(scope="module")
def server_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("browser_logdir")
    _write_logdir(logdir)
    _write_two_axes_run(logdir / TWO_AXES_RUN)
    return logdir


def _serve(logdir: pathlib.Path, ready, log_dir: pathlib.Path = None, flags=()):
    """A TensorBoard process on `logdir` (with its command-line `flags`) until the generator is
    closed; yields its base URL once `ready(runs)` holds for the gradhealth runs it serves (run
    name -> summary). Its log goes beside the logdir, or into `log_dir`."""
    port = free_port()
    exe = pathlib.Path(sys.executable).with_name("tensorboard")
    log = open((log_dir or logdir.parent) / f"tensorboard-{logdir.name}.log", "wb")
    proc = subprocess.Popen([str(exe), "--host", "127.0.0.1", "--port", str(port), "--logdir", str(logdir),
                             *flags], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tensorboard exited with {proc.returncode}; see {log.name}")
            try:
                listing = _get(f"{base}/data/plugins_listing")
                runs = {r["run"]: r for r in _get(f"{base}/data/plugin/gradhealth/runs")["runs"]}
                if "gradhealth" in listing and ready(runs):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("tensorboard did not serve the logdir within 60 s")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def server(server_logdir):
    yield from _serve(server_logdir, lambda runs: runs.get(RUN, {}).get("steps_kept") == len(STEPS)
                      and XSS_RUN in runs and WEIGHTS_RUN in runs and TWO_AXES_RUN in runs and SPIKE_RUN in runs)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Tab:
    """The TensorBoard page with the tab open, plus every console error and dialog seen."""

    def __init__(self, page, base):
        self.page = page
        self.base = base
        self.errors = []
        self.dialogs = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

        def on_dialog(d):
            self.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", on_dialog)

    def open(self, hash_="gradhealth"):
        self.page.goto(f"{self.base}/#{hash_}")
        self.page.wait_for_selector(FRAME, timeout=30_000)
        self._wait_for_frame(timeout_s=30.0)
        # Generous: on a shared machine a first paint took more than 30 s once in a full CI run.
        try:
            self.frame.wait_for_function("Number(document.documentElement.dataset.ghDrawn || 0) > 0", timeout=60_000)
        except sync_api.Error as e:
            raise AssertionError(f"the tab drew nothing: {self.state()}") from e

    def state(self) -> dict:
        """What the page shows instead of a heatmap: its messages, summary, frames and console errors."""
        shown = self.frame.evaluate("""() => ({
            messages: [...document.querySelectorAll('.gh-message')].map((m) => m.textContent).filter((t) => t),
            summary: document.querySelector('.gh-summary')?.textContent ?? null,
            hash: location.hash, parentHash: parent.location.hash,
        })""")
        return dict(shown, frames=[f.url for f in self.page.frames], errors=self.errors)

    def _wait_for_frame(self, timeout_s: float) -> None:
        """The iframe element exists before its document navigates to plugin_entry.html: wait for the document."""
        deadline = time.monotonic() + timeout_s
        while not any("plugin_entry.html" in f.url for f in self.page.frames):
            if time.monotonic() > deadline:
                return  # `frame` then fails with the frames it saw
            self.page.wait_for_timeout(50)

    @property
    def frame(self):
        for f in self.page.frames:
            if "plugin_entry.html" in f.url:
                return f
        raise AssertionError(f"the tab's iframe is not loaded; frames: {[f.url for f in self.page.frames]}")

    @property
    def ui(self):
        return self.page.frame_locator(FRAME)

    def drawn(self) -> int:
        return int(self.frame.evaluate("Number(document.documentElement.dataset.ghDrawn || 0)"))

    def wait_redraw(self, before: int):
        self.frame.wait_for_function(f"Number(document.documentElement.dataset.ghDrawn || 0) > {before}", timeout=20_000)

    def cell_point(self, layer, step):
        """Page coordinates of a heatmap cell's centre."""
        c = self.frame.evaluate("([l, s]) => window.__gradhealth.cellCenter(l, s)", [layer, step])
        assert c is not None, (layer, step)
        box = self.page.locator(FRAME).bounding_box()
        return box["x"] + c["x"], box["y"] + c["y"]

    def pixel(self, selector, layer, step):
        """RGBA of a canvas (body or overlay) at a cell's centre, read from the canvas itself."""
        return self.frame.evaluate(
            """([sel, l, s]) => {
                const c = window.__gradhealth.cellCenter(l, s);
                const canvas = document.querySelector(sel);
                const r = canvas.getBoundingClientRect();
                const k = canvas.width / r.width;
                const x = Math.floor((c.x - r.left) * k), y = Math.floor((c.y - r.top) * k);
                return Array.from(canvas.getContext("2d").getImageData(x, y, 1, 1).data);
            }""",
            [selector, layer, step])

    def set_metric(self, metric):
        before = self.drawn()
        self.ui.locator("select").nth(1).select_option(metric)
        self.wait_redraw(before)


@pytest.fixture(scope="module")
def tab(server, browser):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    t = Tab(page, server)
    t.open()
    yield t
    page.close()


def _cell(base, run, layer, step, role="gradient"):
    q = urllib.parse.urlencode({"run": run, "layer": layer, "step": step, "role": role})
    return _get(f"{base}/data/plugin/gradhealth/cell?{q}")["roles"][role]


def test_tab_appears(tab):
    assert tab.page.get_by_text("Gradient Health", exact=False).first.is_visible()
    assert tab.ui.locator(".gh-hm-body").first.is_visible()
    # The sick run is marked in the run list.
    badge = tab.ui.locator("li.gh-run", has_text=RUN).locator(".gh-badge")
    assert badge.text_content() == "critical"


def test_heatmap_is_drawn_and_shows_the_broken_layer(tab):
    healthy = tab.pixel(".gh-hm-body", HEALTHY, 100)
    broken = tab.pixel(".gh-hm-body", BROKEN, 100)
    before_break = tab.pixel(".gh-hm-body", BROKEN, 0)
    assert healthy[3] == 255 and broken[3] == 255, "cells are not painted"
    # Health view: the exploding cells are red, the healthy ones green, and the
    # broken layer looked healthy before it broke.
    assert broken[0] > broken[1] + 60, broken
    assert healthy[1] > healthy[0] + 60, healthy
    assert sum(abs(a - b) for a, b in zip(healthy[:3], broken[:3])) > 150
    assert sum(abs(a - b) for a, b in zip(healthy[:3], before_break[:3])) < 90
    with tab.page.expect_download() as dl:
        tab.ui.get_by_role("button", name="PNG").click()
    png = pathlib.Path(dl.value.path()).read_bytes()
    assert dl.value.suggested_filename == "gradhealth-train-gradient-health.png"
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 300 and height > 100


# The status colours, pinned (frontend/src/colors.ts): the swatches and badges, and the two
# ends of each status's score band, between which a health cell's shade is interpolated.
STATUS_RGB = {"ok": (0x1a, 0x9e, 0x77), "warn": (0xf5, 0xa6, 0x23), "critical": (0xd7, 0x26, 0x3d)}
BAND_RGB = {"critical": (0.0, 0.25, (0xa5, 0x0f, 0x15), (0xe5, 0x48, 0x4d)),
            "warn": (0.25, 0.6, (0xe8, 0x85, 0x0c), (0xf9, 0xc7, 0x4f)),
            "ok": (0.6, 1.0, (0x9f, 0xd8, 0xb9), (0x1a, 0x9e, 0x77))}


def _js_round(x):
    return math.floor(x + 0.5)


def _health_rgb(status, score):
    """A health cell's colour: the score's place in its band, on a 256-step table between the band's ends."""
    lo, hi, a, b = BAND_RGB[status]
    idx = _js_round(min(max((score - lo) * (255 / (hi - lo)), 0.0), 255.0))
    t = idx / 255
    return [_js_round(ca + (cb - ca) * t) for ca, cb in zip(a, b)]


def _css_rgb(rgb):
    return "rgb({}, {}, {})".format(*rgb)


def test_status_colours_are_painted_exactly(tab):
    served = _get(f"{tab.base}/data/plugin/gradhealth/heatmap?run={RUN}&role=gradient&metric=health")
    names = served["status_names"]
    expected_status = {(BROKEN, 100): "critical", (QUIET, 150): "warn", (HEALTHY, 100): "ok"}
    for (layer, step), status in expected_status.items():
        i, j = served["layers"].index(layer), served["steps"].index(step)
        assert names[served["status"][i][j]] == status, (layer, step)
        score = served["values"][i][j]
        painted = tab.pixel(".gh-hm-body", layer, step)
        assert painted == _health_rgb(status, score) + [255], (layer, step, status, score, painted)
    # The legend's swatches and the badges carry the status colours themselves.
    for status in ("ok", "warn", "critical"):
        swatch = tab.ui.locator(".gh-legend-item", has_text=status).first.locator(".gh-swatch")
        assert swatch.evaluate("e => getComputedStyle(e).backgroundColor") == _css_rgb(STATUS_RGB[status]), status
    badge = tab.ui.locator("li.gh-run", has_text=RUN).locator(".gh-badge")
    assert badge.evaluate("e => getComputedStyle(e).backgroundColor") == _css_rgb(STATUS_RGB["critical"])
    warn_badge = tab.ui.locator("li.gh-finding", has_text="Vanishing gradients").first.locator(".gh-badge")
    assert warn_badge.text_content() == "warn"
    assert warn_badge.evaluate("e => getComputedStyle(e).backgroundColor") == _css_rgb(STATUS_RGB["warn"])


def test_hover_shows_the_cell_numbers(tab):
    tab.set_metric("max_abs")
    expected = _cell(tab.base, RUN, BROKEN, 100)["metrics"]["max_abs"]
    x, y = tab.cell_point(BROKEN, 100)
    t0 = time.perf_counter()
    tab.page.mouse.move(x, y)
    tip = tab.ui.locator(".gh-tooltip")
    tip.wait_for(state="visible", timeout=2000)
    assert time.perf_counter() - t0 < 2
    lines = dict(
        (line.locator(".gh-tip-key").text_content(), line.locator(".gh-tip-value").text_content())
        for line in tip.locator(".gh-tip-line").all()
    )
    assert lines["layer"] == BROKEN
    assert lines["step"] == "100"
    value, quality = lines["max abs"].split(" ", 1)
    assert float(value) == pytest.approx(expected["value"], rel=1e-3)
    # The route's quality code, in the words the tab writes for it.
    words = {"exact": "exact", "estimated": "estimated from histogram buckets"}[expected["quality"]]
    assert quality == f"({words})"
    assert float(value) > 1e3
    assert lines["status"].startswith("critical") and "Exploding gradients" in lines["status"]
    tab.page.mouse.move(5, 5)
    tab.set_metric("health")


def test_click_opens_the_detail_panel(tab):
    x, y = tab.cell_point(BROKEN, 100)
    tab.page.mouse.click(x, y)
    detail = tab.ui.locator(".gh-detail")
    detail.wait_for(state="visible", timeout=5000)
    assert detail.locator(".gh-detail-title").text_content() == BROKEN
    histogram = _cell(tab.base, RUN, BROKEN, 100)["histogram"]
    bars = detail.locator("rect.gh-bar")
    bars.first.wait_for(timeout=5000)
    assert bars.count() == len(histogram)
    assert "Histogram at step 100" in detail.locator("h3").first.text_content()
    # The metric over all steps, with the explosion threshold and the finding's span.
    detail.locator("path.gh-series").wait_for(timeout=5000)
    assert detail.locator("line.gh-threshold").count() >= 1
    assert detail.locator("rect.gh-span").count() >= 1
    assert "Exploding gradients" in detail.locator(".gh-detail-findings").text_content()
    # The neighbouring logged step is one click away.
    detail.get_by_role("button", name="next step").click()
    tab.ui.locator(".gh-detail h3", has_text="Histogram at step 110").wait_for(timeout=5000)
    # The selection is in TensorBoard's URL, so the link can be shared.
    hash_ = urllib.parse.unquote(tab.page.url.split("#", 1)[1])
    assert "p.gradhealth.run=train" in hash_ and f"p.gradhealth.layer={BROKEN}" in hash_
    assert "p.gradhealth.step=110" in hash_


def test_shared_link_restores_the_selection(tab, browser):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    other = Tab(page, tab.base)
    try:
        other.open(tab.page.url.split("#", 1)[1])
        title = other.ui.locator(".gh-detail .gh-detail-title")
        title.wait_for(timeout=10_000)
        assert title.text_content() == BROKEN
        assert "Histogram at step 110" in other.ui.locator(".gh-detail h3").first.text_content()
        assert other.errors == []
    finally:
        page.close()


def test_selecting_a_finding_outlines_its_cells(tab):
    tab.ui.locator(".gh-detail button[aria-label='Close']").click()
    overlay = ".gh-hm-overlay"
    assert tab.pixel(overlay, HEALTHY, 100)[3] == 0
    finding = tab.ui.locator("li.gh-finding", has_text="Exploding gradients")
    assert finding.locator(".gh-badge").text_content() == "critical"
    # Most severe first.
    assert tab.ui.locator("li.gh-finding").first.locator(".gh-badge").text_content() == "critical"
    finding.click()
    tab.frame.wait_for_function("document.querySelector('li.gh-finding[aria-selected=true]') !== null")
    # Everything but the finding's cells is veiled; its cells stay clear inside an outline.
    assert tab.pixel(overlay, HEALTHY, 100)[3] > 0
    assert tab.pixel(overlay, BROKEN, 100)[3] == 0
    assert tab.pixel(overlay, BROKEN, 0)[3] > 0
    assert "Clip gradients" in finding.text_content()
    with tab.page.expect_download() as dl:
        tab.ui.get_by_role("button", name="CSV").click()
    csv_text = pathlib.Path(dl.value.path()).read_text()
    assert csv_text.startswith("run,severity,kind,") and "exploding_gradients" in csv_text
    with tab.page.expect_download() as dl:
        tab.ui.get_by_role("button", name="JSON").click()
    exported = json.loads(pathlib.Path(dl.value.path()).read_text())
    served = _get(f"{tab.base}/data/plugin/gradhealth/findings?run={RUN}")["findings"]
    assert exported["run"] == RUN
    assert sorted(f["kind"] for f in exported["findings"]) == sorted(f["kind"] for f in served)


def test_new_steps_appear_on_reload_and_the_selection_stays(tab, server_logdir):
    import tensorflow as tf

    selected = "li.gh-finding[aria-selected=true]"
    assert tab.ui.locator(selected).count() == 1
    rng = np.random.default_rng(11)
    new_steps = [200, 210, 220, 230, 240]
    writer = tf.summary.create_file_writer(str(server_logdir / RUN), filename_suffix=".more")
    with writer.as_default():
        for step in new_steps:
            for name, shape in ((HEALTHY, (32, 16)), (BROKEN, (16, 8))):
                scale = 5e3 if name == BROKEN else 1e-2
                tf.summary.histogram(f"gradients/{name}", rng.normal(0.0, scale, size=shape), step=step)
    writer.close()
    deadline = time.monotonic() + 30
    def last_step():
        return {r["run"]: r for r in _get(f"{tab.base}/data/plugin/gradhealth/runs")["runs"]}[RUN]["last_step"]

    while last_step() != new_steps[-1]:
        assert time.monotonic() < deadline, "TensorBoard did not pick up the new steps"
        time.sleep(0.5)
    before = tab.drawn()
    reloads = tab.frame.evaluate("Number(document.documentElement.dataset.ghHostReloads || 0)")
    # TensorBoard's own reload button: the tab hears it through the host's DataReloaded message.
    tab.page.locator("app-header-reload button").click()
    tab.wait_redraw(before)
    assert tab.frame.evaluate("Number(document.documentElement.dataset.ghHostReloads || 0)") > reloads
    assert "25 steps" in tab.ui.locator(".gh-summary").text_content()
    assert tab.ui.locator(selected).count() == 1
    assert tab.pixel(".gh-hm-overlay", BROKEN, 240)[3] == 0
    assert tab.pixel(".gh-hm-overlay", HEALTHY, 240)[3] > 0


def test_names_are_text_never_markup(tab):
    before = tab.drawn()
    tab.ui.locator("li.gh-run", has_text="onerror").click()
    tab.wait_redraw(before)
    assert tab.ui.locator("li.gh-run .gh-run-name", has_text="onerror").text_content() == XSS_RUN
    x, y = tab.cell_point(XSS_LAYER, 20)
    tab.page.mouse.move(x, y)
    tab.ui.locator(".gh-tooltip").wait_for(state="visible")
    assert XSS_LAYER in tab.ui.locator(".gh-tooltip").text_content()
    tab.page.mouse.click(x, y)
    tab.ui.locator(".gh-detail .gh-detail-title").wait_for()
    assert tab.ui.locator(".gh-detail .gh-detail-title").text_content() == XSS_LAYER
    time.sleep(0.5)
    assert tab.ui.locator("img").count() == 0
    assert tab.frame.evaluate("typeof window.__xss") == "undefined"
    assert tab.page.evaluate("typeof window.__xss") == "undefined"
    assert tab.dialogs == []


def test_a_run_without_gradients_says_what_it_could_not_judge(tab):
    # The run with gradients is judged on them: its note names only what it lacks (activations).
    tab.ui.locator("li.gh-run", has_text=RUN).click()
    note = tab.ui.locator(".gh-coverage-note")
    note.wait_for(state="visible")
    assert "Dead units" in note.text_content() and "Exploding gradients" not in note.text_content()
    badge = tab.ui.locator("li.gh-run", has_text=WEIGHTS_RUN).locator(".gh-badge")
    assert badge.text_content() == "no warnings"  # never "healthy": its gradients were never looked at
    before = tab.drawn()
    tab.ui.locator("li.gh-run", has_text=WEIGHTS_RUN).click()
    tab.wait_redraw(before)
    text = tab.ui.locator(".gh-coverage-note").text_content()
    assert "Exploding gradients" in text and "Vanishing gradients" in text and "watch(" in text


def _open_cell(tab, role, layer, step):
    before = tab.drawn()
    tab.ui.locator("select").nth(0).select_option(role)
    tab.wait_redraw(before)
    x, y = tab.cell_point(layer, step)
    tab.page.mouse.click(x, y)
    tab.ui.locator(".gh-detail .gh-detail-title", has_text=layer).wait_for()


def test_a_guessed_role_says_so_and_offers_the_rule_that_fixes_it(tab):
    tab.ui.locator("li.gh-run", has_text=WEIGHTS_RUN).click()
    _open_cell(tab, "other", "input/images", STEPS[1])
    guess = tab.ui.locator(".gh-detail .gh-role-guess")
    assert guess.is_visible() and "Role unknown" in guess.text_content()
    guess.locator("summary").click()
    rule = json.loads(guess.locator("pre.gh-rule").text_content())
    assert rule == {"tag_rules": [{"pattern": "^input/images$", "role": "weight"}]}
    # The "?" after the row's name is said in words: in the legend, and where the name is hovered.
    legend = tab.ui.locator(".gh-legend .gh-legend-guess")
    assert legend.text_content() == "name ? = role guessed"
    assert legend.get_attribute("title").startswith('A "?" after a row\'s name: its role')
    _hover_row_name(tab, "input/images", STEPS[1])
    line = tab.ui.locator(".gh-tooltip .gh-tip-line", has=tab.ui.locator(".gh-tip-key", has_text="?"))
    line.wait_for(state="visible", timeout=5000)
    assert line.locator(".gh-tip-value").text_content().startswith("Role unknown: nothing in the tag's name tells it")
    tab.page.mouse.move(5, 5)
    _open_cell(tab, "weight", "W_extra", STEPS[1])
    assert 'Role "weight" guessed' in tab.ui.locator(".gh-detail .gh-role-guess").text_content()
    # A role known by convention offers nothing to fix.
    _open_cell(tab, "weight", "dense/kernel", STEPS[1])
    assert tab.ui.locator(".gh-detail .gh-role-guess").is_hidden()


def _hover_row_name(tab, row, step):
    """Moves the pointer onto the row's name at the heatmap's left edge."""
    label = tab.frame.evaluate("""([row, step]) => {
        const c = window.__gradhealth.cellCenter(row, step);
        return c && {x: document.querySelector('.gh-hm-port').getBoundingClientRect().left + 12, y: c.y};
    }""", [row, step])
    box = tab.page.locator(FRAME).bounding_box()
    tab.page.mouse.move(box["x"] + label["x"], box["y"] + label["y"])


def test_two_tags_naming_one_parameter_say_why_neither_is_a_weight(tab):
    tab.ui.locator("li.gh-run", has_text=WEIGHTS_RUN).click()
    _open_cell(tab, "other", f"net_g/{SHARED_PARAMETER}", STEPS[1])
    guess = tab.ui.locator(".gh-detail .gh-role-guess")
    assert guess.is_visible() and "another tag names the same parameter" in guess.text_content()
    legend = tab.ui.locator(".gh-legend .gh-legend-guess")
    assert "two tags name one parameter" in legend.get_attribute("title")
    _hover_row_name(tab, f"net/{SHARED_PARAMETER}", STEPS[1])
    line = tab.ui.locator(".gh-tooltip .gh-tip-line", has=tab.ui.locator(".gh-tip-key", has_text="?"))
    line.wait_for(state="visible", timeout=5000)
    assert "both cannot be its weights" in line.locator(".gh-tip-value").text_content()
    tab.page.mouse.move(5, 5)


def test_a_health_cell_hover_adds_the_value_its_rule_read(tab):
    # The heatmap of scores carries no statistic: the hover asks the cell route for the rule's.
    expected = _cell(tab.base, RUN, BROKEN, 100)["metrics"]["max_abs"]
    # The tab is shared: earlier tests leave another run and role shown.
    tab.ui.locator("li.gh-run", has_text=RUN).click()
    _open_cell(tab, "gradient", BROKEN, 100)
    tab.page.mouse.move(5, 5)
    x, y = tab.cell_point(BROKEN, 100)
    tab.page.mouse.move(x, y)
    line = tab.ui.locator(".gh-tooltip .gh-tip-line", has_text="max abs")
    line.wait_for(state="visible", timeout=5000)
    value = line.locator(".gh-tip-value").text_content().split(" ", 1)[0]
    assert float(value) == pytest.approx(expected["value"], rel=1e-3)
    lines = tab.ui.locator(".gh-tooltip .gh-tip-key").all_text_contents()
    assert lines[lines.index("score") + 1:lines.index("score") + 3] == ["status", "max abs"], lines
    tab.page.mouse.move(5, 5)
    assert tab.errors == []


def test_an_ok_cell_where_a_rule_held_too_briefly_says_so_on_hover_and_in_the_detail(tab):
    tab.ui.locator("li.gh-run", has_text=BRIEF_RUN).click()
    _open_cell(tab, "gradient", HEALTHY, BRIEF_STEPS[1])
    status = tab.ui.locator(".gh-detail .gh-detail-status")
    status.locator(".gh-held").wait_for(timeout=5000)
    assert status.locator(".gh-badge").text_content() == "ok"
    assert ("vanishing gradients at this step, one of 2 logged steps in a row; a finding needs 5 logged steps in a row"
            in status.text_content()), status.text_content()
    x, y = tab.cell_point(HEALTHY, BRIEF_STEPS[0])
    tab.page.mouse.move(x, y)
    tip = tab.ui.locator(".gh-tooltip")
    tip.wait_for(state="visible", timeout=2000)
    lines = dict((line.locator(".gh-tip-key").text_content(), line.locator(".gh-tip-value").text_content())
                 for line in tip.locator(".gh-tip-line").all())
    assert lines["status"] == "ok \u2014 Vanishing gradients", lines
    assert lines["held"] == ("vanishing gradients at this step, one of 2 logged steps in a row; a finding needs 5 logged "
                             "steps in a row"), lines
    tab.page.mouse.move(5, 5)


def test_a_histogram_from_another_step_axis_is_never_titled_with_the_rows_step(tab):
    """Iteration 105's detail shows epoch 1's histogram (written nearest in time) under its own step."""
    tab.ui.locator("li.gh-run", has_text=TWO_AXES_RUN).click()
    _open_cell(tab, "gradient", TWO_AXES_LAYER, 105)
    title = tab.ui.locator(".gh-detail h3").first
    title.filter(has_text="nearest in time").wait_for()
    assert title.text_content() == "Histogram nearest in time (its own step 1)"
    note = tab.ui.locator(".gh-detail .gh-note").first.text_content()
    assert "grad_hist/layer_0 is logged on another step axis" in note
    assert "written 590 ms before this row's step 105" in note
    # On the row's own axis the title is the row's step, as before.
    tab.ui.locator("li.gh-run", has_text=RUN).first.click()
    _open_cell(tab, "gradient", HEALTHY, STEPS[2])
    assert tab.ui.locator(".gh-detail h3").first.text_content() == f"Histogram at step {STEPS[2]}"


def test_no_console_errors(tab):
    assert tab.errors == []


# --------------------------------------------------------------------------- extreme numbers

# Steps past 2^53, which JavaScript's numbers cannot tell apart (2^60 + 1 reads as 2^60).
BIG = 2 ** 60
BIG_RUN = "huge_steps"
BIG_STEPS = [BIG + k for k in range(5)]
# Bucket edges at the ends of the doubles, and subnormal ones.
EDGES_RUN = "extreme_edges"
WIDE = "wide/kernel"
TINY = "tiny/kernel"
WIDE_BUCKETS = [[-1.7e308, 0.0, 4.0], [0.0, 1.7e308, 6.0]]
TINY_BUCKETS = [[5e-324, 1e-323, 3.0], [1e-323, 1.5e-323, 5.0], [1.5e-323, 2e-323, 2.0]]
# A last step that 3 of 8 layers have so far: a writer caught mid-flush.
PARTIAL_RUN = "partial"
PARTIAL_STEPS = [0, 10, 20, 30]
# Three logged steps each: cells drawn half an interval around them must not widen the axis.
THREE_STEP_RUNS = {"three_steps": [0, 100, 200], "three_small_steps": [0, 5, 10]}


def _write_extreme_logdir(root: pathlib.Path) -> None:
    from tests.test_bad_input import event, hist_value, normal_buckets, write_run

    rng = np.random.default_rng(3)
    write_run(root / BIG_RUN, [event(step, *[hist_value(f"gradients/{name}", normal_buckets(rng))
                                             for name in ("a/kernel", "b/kernel")])
                               for step in BIG_STEPS])
    write_run(root / EDGES_RUN, [event(step, hist_value(f"gradients/{WIDE}", WIDE_BUCKETS),
                                       hist_value(f"gradients/{TINY}", TINY_BUCKETS)) for step in range(5)])
    for run, steps in THREE_STEP_RUNS.items():
        write_run(root / run, [event(step, hist_value("gradients/a/kernel", normal_buckets(rng))) for step in steps])
    write_run(root / PARTIAL_RUN, [
        event(step, *[hist_value(f"gradients/l{i}/kernel", normal_buckets(rng))
                      for i in range(3 if step == PARTIAL_STEPS[-1] else 8)])
        for step in PARTIAL_STEPS])


@pytest.fixture(scope="module")
def extreme_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("extreme_logdir")
    _write_extreme_logdir(logdir)
    yield from _serve(logdir, lambda runs: runs.get(BIG_RUN, {}).get("steps_kept") == len(BIG_STEPS)
                      and runs.get(EDGES_RUN, {}).get("steps_kept") == 5
                      and runs.get(PARTIAL_RUN, {}).get("steps_kept") == len(PARTIAL_STEPS)
                      and all(runs.get(run, {}).get("steps_kept") == 3 for run in THREE_STEP_RUNS))


@pytest.fixture
def extreme_tab(extreme_server, browser):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    t = Tab(page, extreme_server)
    t.responses = []
    page.on("response", lambda r: t.responses.append((r.status, r.url)) if "/data/plugin/gradhealth/" in r.url else None)
    yield t
    page.close()


# Every attribute of every SVG element in the detail panel that is not a finite number where one belongs.
BAD_SVG_ATTRIBUTES = """() => {
    const bad = [];
    for (const node of document.querySelectorAll(".gh-detail svg, .gh-detail svg *")) {
        for (const a of node.attributes) {
            if (/NaN|Infinity/.test(a.value)) bad.push(`<${node.tagName} ${a.name}="${a.value.slice(0, 80)}">`);
        }
    }
    return bad;
}"""


def test_steps_past_2_53_are_drawn_and_opened_exactly(extreme_tab):
    tab = extreme_tab
    tab.open(f"gradhealth&p.gradhealth.run={BIG_RUN}")
    assert tab.ui.locator(".gh-hm-body").first.is_visible()
    assert "5 steps" in tab.ui.locator(".gh-summary").text_content()
    # Each of the five steps has its own painted column.
    texts = [str(s) for s in BIG_STEPS]
    xs = [tab.cell_point("a/kernel", t)[0] for t in texts]
    assert all(b - a > 20 for a, b in zip(xs, xs[1:])), xs
    for t in texts:
        assert tab.pixel(".gh-hm-body", "a/kernel", t)[3] == 255, t
    # The axis names the steps themselves, not their rounded doubles.
    target = texts[1]
    x, y = tab.cell_point("b/kernel", target)
    tab.page.mouse.move(x, y)
    tip = tab.ui.locator(".gh-tooltip")
    tip.wait_for(state="visible", timeout=2000)
    assert "1,152,921,504,606,846,977" in tip.text_content()
    tab.page.mouse.click(x, y)
    detail = tab.ui.locator(".gh-detail")
    detail.wait_for(state="visible", timeout=5000)
    tab.ui.locator(".gh-detail h3", has_text="Histogram at step 1,152,921,504,606,846,977").wait_for(timeout=5000)
    bars = detail.locator("rect.gh-bar")
    bars.first.wait_for(timeout=5000)
    assert bars.count() == len(_cell(tab.base, BIG_RUN, "b/kernel", target)["histogram"])
    detail.locator("path.gh-series").wait_for(timeout=5000)
    cells = [url for status, url in tab.responses if "/cell?" in url]
    assert any(f"step={target}" in url for url in cells), cells
    assert not [(status, url) for status, url in tab.responses if status != 200]
    hash_ = urllib.parse.unquote(tab.page.url.split("#", 1)[1])
    assert f"p.gradhealth.step={target}" in hash_
    # The next logged step is the next integer, not the next double.
    detail.get_by_role("button", name="next step").click()
    tab.ui.locator(".gh-detail h3", has_text="Histogram at step 1,152,921,504,606,846,978").wait_for(timeout=5000)
    assert tab.frame.evaluate(BAD_SVG_ATTRIBUTES) == []
    assert tab.errors == []


def test_extreme_bucket_edges_draw_finite_charts(extreme_tab):
    tab = extreme_tab
    tab.open(f"gradhealth&p.gradhealth.run={EDGES_RUN}")
    detail = tab.ui.locator(".gh-detail")
    for layer, buckets in ((WIDE, WIDE_BUCKETS), (TINY, TINY_BUCKETS)):
        x, y = tab.cell_point(layer, 2)
        tab.page.mouse.click(x, y)
        tab.ui.locator(".gh-detail .gh-detail-title", has_text=layer).wait_for(timeout=5000)
        sync_api.expect(detail.locator("rect.gh-bar")).to_have_count(len(buckets), timeout=5000)
        # The series on a log scale (max |x|), then on a linear one (mean).
        for metric in ("max_abs", "mean"):
            detail.locator("select").select_option(metric)
            title = f"{metric.replace('_', ' ')} over steps"
            detail.locator("svg.gh-chart > title", has_text=title).wait_for(state="attached", timeout=5000)
            assert detail.locator("path.gh-series").count() == 1
            assert tab.frame.evaluate(BAD_SVG_ATTRIBUTES) == [], (layer, metric)
    assert tab.errors == []


def test_a_partly_written_last_step_is_hatched_with_a_note(extreme_tab):
    tab = extreme_tab
    tab.open(f"gradhealth&p.gradhealth.run={PARTIAL_RUN}")
    last, before = PARTIAL_STEPS[-1], PARTIAL_STEPS[-2]
    assert "(incomplete)" in tab.ui.locator(".gh-summary").text_content()
    overlay = ".gh-hm-overlay"
    # The missing layers' cells in the last column are hatched, earlier columns are not.
    assert tab.pixel(overlay, "l7/kernel", before)[3] == 0
    hatched = tab.frame.evaluate(
        """([l, s]) => {
            const c = window.__gradhealth.cellCenter(l, s);
            const canvas = document.querySelector(".gh-hm-overlay");
            const r = canvas.getBoundingClientRect();
            const k = canvas.width / r.width;
            const x0 = Math.floor((c.x - r.left - 4) * k), y0 = Math.floor((c.y - r.top - 4) * k);
            const d = canvas.getContext("2d").getImageData(x0, y0, Math.ceil(8 * k), Math.ceil(8 * k)).data;
            let painted = 0;
            for (let i = 3; i < d.length; i += 4) if (d[i] > 0) painted++;
            return painted;
        }""", ["l7/kernel", last])
    assert hatched > 0
    x, y = tab.cell_point("l7/kernel", last)
    tab.page.mouse.move(x, y)
    tip = tab.ui.locator(".gh-tooltip")
    tip.wait_for(state="visible", timeout=2000)
    assert "3 of 8 layers so far" in tip.text_content()
    x, y = tab.cell_point("l0/kernel", before)
    tab.page.mouse.move(x, y)
    tab.frame.wait_for_function("!document.querySelector('.gh-tooltip').textContent.includes('layers so far')")
    assert tab.errors == []


def test_the_axis_of_a_three_step_run_names_only_steps_inside_it(extreme_server, browser):
    for run, steps in THREE_STEP_RUNS.items():
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        tab = Tab(page, extreme_server)
        try:
            tab.open(f"gradhealth&p.gradhealth.run={run}")
            tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(run)}")
            named = [int(s) for s in tab.frame.evaluate("window.__gradhealth.axisSteps()")]
            # Cells reach half an interval past the first and last step (-50 to 250); the axis names none of that.
            assert named and all(steps[0] <= s <= steps[-1] for s in named), (run, named)
            assert steps[0] in named and steps[-1] in named, (run, named)
            assert tab.errors == []
        finally:
            page.close()


# --------------------------------------------------------------------------- the demo runs, as a new user sees them

DEMO = REPO / "demo" / "runs"
DEMO_VIEWPORT = {"width": 1600, "height": 1000}


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    from tests.test_demos import BROKEN, CLEAN

    # Every demo run with data (a sweep trial's own folder holds only its hyperparameters: no run).
    expected = set(BROKEN) | set(CLEAN)
    # The log goes to a scratch folder: the demo runs are part of the repository.
    yield from _serve(DEMO, lambda runs: expected <= set(runs), tmp_path_factory.mktemp("demo_log"))


@pytest.fixture
def demo_tab(demo_server, browser):
    """Factory: demo_tab(run, role=None) -> a new page at 1600x1000 with the tab open on that run."""
    pages = []

    def open_run(run, role=None):
        page = browser.new_page(viewport=DEMO_VIEWPORT)
        pages.append(page)
        tab = Tab(page, demo_server)
        tab.open(f"gradhealth&p.gradhealth.run={urllib.parse.quote(run, safe='')}"
                 + (f"&p.gradhealth.role={role}" if role else ""))
        tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(run)}")
        tab.ui.locator("li.gh-finding").first.wait_for(timeout=20_000)
        return tab

    yield open_run
    for page in pages:
        page.close()


def _served_findings(tab, run):
    return _get(f"{tab.base}/data/plugin/gradhealth/findings?run={urllib.parse.quote(run, safe='')}")["findings"]


def test_the_run_track_shows_every_occurrence_of_a_periodic_spike(demo_tab):
    run = "periodic/bad_batch"
    tab = demo_tab(run)
    periodic = next(f for f in _served_findings(tab, run) if f["kind"] == "periodic_spikes")
    tag = "train/global_gradient_norm"
    occurrences = [int(a) for a, b in periodic["covers_text"][tag]]
    assert periodic["period"] == 35 and occurrences == list(range(35, 281, 35))
    track = tab.ui.locator(".gh-track")
    # The norm's marks: the loss, which spiked on the same grid at 70, has its own.
    mark = track.locator(f".gh-track-mark[data-kind=periodic_spikes][data-tag='{tag}']")
    mark.wait_for(timeout=10_000)
    drawn = [int(s) for s in mark.locator(".gh-track-occurrence").evaluate_all("els => els.map(e => e.dataset.step)")]
    assert drawn == occurrences
    assert mark.locator(".gh-track-period-text").text_content() == "every 35 steps"
    # The loss and the learning-rate-free norm share the heatmap's axis: step 140 is where the heatmap's column is.
    x140 = mark.locator(".gh-track-occurrence[data-step='140']").evaluate(
        "e => { const r = e.getBoundingClientRect(); return r.left + r.width / 2; }")
    cell_x = tab.frame.evaluate("window.__gradhealth.cellCenter('sequential/dense/kernel', 140).x")
    assert abs(x140 - cell_x) < 1.5, (x140, cell_x)
    assert track.locator(".gh-track-label", has_text="loss").count() == 1
    # Validation folders, scalars only, are folded away under their shared word ("scalars only").
    # A run with a finding stays listed, whatever its data.
    folded = [r for r in _get(f"{tab.base}/data/plugin/gradhealth/runs")["runs"]
              if r.get("worst_status") == "no_data" and not r.get("worst_severity")]
    no_data = [r["run"] for r in folded]
    assert "healthy/keras/validation" in no_data
    words = {r["verdict_word"] for r in folded}
    group = tab.ui.locator(".gh-run-group details")
    heading = f"{words.pop() if len(words) == 1 else 'no layer data'} ({len(no_data)})"
    assert group.locator("summary").text_content() == heading
    assert group.get_attribute("open") is None and not group.locator("li.gh-run").first.is_visible()
    # Clicking the finding selects it on the track, and leaves the all-green heatmap unveiled.
    tab.ui.locator("li.gh-finding", has_text="Periodic spikes").click()
    tab.frame.wait_for_function("document.querySelector('li.gh-finding[aria-selected=true]') !== null")
    mark = track.locator(f".gh-track-mark[data-kind=periodic_spikes][data-tag='{tag}']")
    assert mark.get_attribute("opacity") is None
    # The loss's spike at 70 lies on the pattern's grid: one of its occurrences, no spike finding of its own.
    assert track.locator(".gh-track-mark[data-kind=spike]").count() == 0
    loss = track.locator(".gh-track-mark[data-kind=periodic_spikes][data-tag='loss']")
    assert loss.locator(".gh-track-occurrence").evaluate_all("els => els.map(e => e.dataset.step)") == ["70"]
    assert tab.pixel(".gh-hm-overlay", "sequential/dense/kernel", 140)[3] == 0
    tab.page.screenshot(path=str(_shots() / "track.png"))
    # A mark on the track selects its finding.
    tab.ui.locator("li.gh-finding", has_text="Periodic spikes").click()  # unselect
    tab.frame.wait_for_function("document.querySelector('li.gh-finding[aria-selected=true]') === null")
    box = mark.locator(".gh-track-occurrence[data-step='70']").bounding_box()
    tab.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + 2)
    selected = tab.ui.locator("li.gh-finding[aria-selected=true]")
    selected.wait_for(timeout=5000)
    assert "Periodic spikes" in selected.text_content()
    assert tab.errors == []


def test_the_run_track_bands_a_spike_episode_and_its_marks_take_the_keyboard(server, browser):
    run = SPIKE_RUN
    page = browser.new_page(viewport=DEMO_VIEWPORT)
    tab = Tab(page, server)
    try:
        tab.open(f"gradhealth&p.gradhealth.run={run}")
        tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(run)}")
        spike = next(f for f in _served_findings(tab, run) if f["kind"] == "spike")
        first, last = (int(s) for s in spike["covers_text"]["loss"][0])
        assert (first, last) == SPIKE_STEPS  # an episode of consecutive logged steps
        mark = tab.ui.locator(".gh-track .gh-track-mark[data-kind=spike][data-tag='loss']")
        mark.wait_for(timeout=10_000)
        # The band covers the whole episode, from its first step's x to its last's.
        band = mark.locator(f".gh-track-episode[data-first='{first}'][data-last='{last}']")
        left, right = band.evaluate("e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; }")
        x_first, x_last = (tab.frame.evaluate(f"window.__gradhealth.cellCenter({json.dumps(HEALTHY)}, {step}).x")
                           for step in (first, last))
        assert left <= x_first + 1.5 and right >= x_last - 1.5 and right - left > 2, (left, right, x_first, x_last)
        assert f"Spike at steps {first} to {last}" in mark.get_attribute("aria-label")
        # Marks are buttons in the tab order: focused, Enter selects the finding, and the focus stays on the mark.
        assert mark.get_attribute("tabindex") == "0" and mark.get_attribute("role") == "button"
        mark.focus()
        tab.page.keyboard.press("Enter")
        selected = tab.ui.locator("li.gh-finding[aria-selected=true]")
        selected.wait_for(timeout=5000)
        assert "Spike" in selected.text_content()
        assert tab.frame.evaluate("document.activeElement.dataset.kind") == "spike"
        assert tab.errors == []
    finally:
        page.close()


def test_a_drag_across_a_finding_band_on_the_run_track_zooms_and_selects_nothing(demo_tab):
    run = "exploding/unclipped"
    tab = demo_tab(run)
    # The explosion's band covers the global norm's row from step 6 to the last step.
    tag = "train/global_gradient_norm"
    band = tab.ui.locator(f".gh-track .gh-track-mark[data-kind=exploding_gradients][data-tag='{tag}'] .gh-track-span").first
    band.wait_for(timeout=10_000)
    box = band.bounding_box()
    x_from, x_to = (tab.frame.evaluate(f"window.__gradhealth.cellCenter('layer_0', {step}).x") for step in (50, 200))
    frame = tab.page.locator(FRAME).bounding_box()
    y = box["y"] + box["height"] / 2
    tab.page.mouse.move(frame["x"] + x_from, y)
    tab.page.mouse.down()
    for k in range(1, 11):
        tab.page.mouse.move(frame["x"] + x_from + (x_to - x_from) * k / 10, y)
    tab.page.mouse.up()
    tab.frame.wait_for_function("window.__gradhealth.viewState.zoom !== null", timeout=5000)
    lo, hi = (int(s) for s in tab.frame.evaluate("window.__gradhealth.viewState.zoom.map(String)"))
    assert 40 <= lo <= 55 and 195 <= hi <= 210, (lo, hi)
    tab.frame.wait_for_timeout(400)
    state = tab.frame.evaluate("window.__gradhealth.viewState")
    assert state["finding"] == "" and "finding=" not in tab.page.url, (state, tab.page.url)
    # A click (no drag) on the same band still selects its finding.
    tab.page.mouse.click(frame["x"] + (x_from + x_to) / 2, y)
    tab.frame.wait_for_function("window.__gradhealth.viewState.finding !== ''", timeout=5000)
    assert tab.ui.locator("li.gh-finding[aria-selected=true]", has_text="xploding").count() == 1
    assert tab.errors == []


def test_a_step_between_logged_histograms_names_the_nearest_and_zeros_sit_on_a_log_charts_floor(demo_tab):
    run = "exploding/unclipped"
    tab = demo_tab(run, "gradient")
    # layer_10's exact statistics are logged at every step, grad_hist/layer_10 every 10th.
    x, y = tab.cell_point("layer_10", 85)
    tab.page.mouse.click(x, y)
    detail = tab.ui.locator(".gh-detail")
    buttons = detail.locator("button.gh-hist-elsewhere")
    buttons.first.wait_for(timeout=10_000)
    note = buttons.first.evaluate("e => e.parentElement.textContent")
    assert note.startswith("No histogram at step 85: grad_hist/layer_10 was logged at other steps only; "
                           "the nearest are step 80 before and step 90 after."), note
    assert "exact statistics only" not in detail.text_content()
    assert buttons.evaluate_all("els => els.map(e => e.textContent)") == ["\u2190 step 80", "step 90 \u2192"]
    # The max |g| chart is on a log scale; the gradient is exactly 0 at many steps: they sit on its floor.
    served = _get(f"{tab.base}/data/plugin/gradhealth/series?" + urllib.parse.urlencode(
        {"run": run, "layer": "layer_10", "metric": "max_abs", "role": "gradient"}))["series"]["gradient"]
    zeros = [s for s, v in zip(served["steps"], served["values"]) if v == 0]
    assert len(zeros) > 100
    detail.locator("select[aria-label='Metric to chart over steps']").select_option("max_abs")
    floor = detail.locator(".gh-floor")
    floor.wait_for(timeout=10_000)
    drawn = [int(s) for s in floor.locator(".gh-floor-point").evaluate_all("els => els.map(e => e.dataset.step)")]
    assert drawn == zeros
    text = floor.locator(".gh-floor-text").text_content()
    assert text.startswith(f"0 at {len(zeros)} steps from {zeros[0]} to {zeros[-1]}"), text
    # The floor lies at the plot's bottom edge, below every drawn point: read in one go from the chart's
    # own coordinates, as the panel may lay itself out again between two reads of the page.
    floor_y, lowest = floor.evaluate("""g => {
        const path = g.ownerSVGElement.querySelector('path.gh-series');
        const ys = [...path.getAttribute('d').matchAll(/[ML][-0-9.]+,([-0-9.]+)/g)].map(m => Number(m[1]));
        return [Math.min(...Array.from(g.querySelectorAll('.gh-floor-point'), c => Number(c.getAttribute('cy')))),
                Math.max(...ys)]; }""")
    assert floor_y > lowest, (floor_y, lowest)
    detail.screenshot(path=str(_shots() / "detail_between_histograms.png"))
    # The nearest logged step opens with its histogram.
    buttons.first.click()
    tab.frame.wait_for_function("String(window.__gradhealth.viewState.step) === '80'", timeout=5000)
    detail.locator("rect.gh-bar").first.wait_for(timeout=10_000)
    assert detail.locator("button.gh-hist-elsewhere").count() == 0
    assert tab.errors == []


def test_a_run_opens_on_the_role_of_its_worst_finding(demo_tab):
    # No role in the URL: weight growth is about weights, so the tab opens on them.
    tab = demo_tab("weight_growth/no_decay")
    tab.frame.wait_for_function("window.__gradhealth.viewState.role === 'weight'", timeout=10_000)
    assert tab.ui.locator("select").filter(has=tab.ui.locator("option[value=weight]")).first.input_value() == "weight"
    # A role named in the URL stands.
    tab = demo_tab("weight_growth/no_decay", "gradient")
    tab.frame.wait_for_function("window.__gradhealth.viewState.role === 'gradient'", timeout=10_000)
    assert tab.errors == []


def _shots():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


# Runs, with the role their warn and critical findings are about.
COVERAGE_RUNS = [("exploding/unclipped", "gradient"), ("vanishing/sigmoid", "gradient"),
                 ("lr_too_high/lr_0.3", "gradient"), ("lr_too_high/lr_0.3", "weight"),
                 ("dead_relu/relu", "activation"), ("weight_growth/no_decay", "weight")]


def test_a_findings_outlines_hold_no_healthy_cell(demo_tab):
    checked = 0
    for run, role in COVERAGE_RUNS:
        tab = demo_tab(run, role)
        if run == "exploding/unclipped":
            # The README's first picture: the run, its track and its findings, nothing selected.
            tab.ui.locator(".gh-track .gh-track-line").first.wait_for(timeout=10_000)
            tab.page.screenshot(path=str(_shots() / "heatmap.png"))
        heatmap = _get(f"{tab.base}/data/plugin/gradhealth/heatmap?" + urllib.parse.urlencode({"run": run, "role": role}))
        for f in _served_findings(tab, run):
            rows = set(f["covers"]) & set(heatmap["layers"])
            if f["severity"] == "info" or (f["role"] or role) != role or not rows:
                continue
            # The names the message quotes are shown as code, without their backticks.
            item = tab.ui.locator("li.gh-finding").filter(has_text=f["message"].replace("`", "")[:60]).first
            quoted = item.locator("p code").all_text_contents()
            assert quoted and set(quoted) <= set(f["layers"]) | set(f["covers"]), (quoted, f["layers"])
            before = tab.frame.evaluate("window.__gradhealth.viewState.finding")
            item.click()
            tab.frame.wait_for_function(f"window.__gradhealth.viewState.finding !== {json.dumps(before)}")
            cells = tab.frame.evaluate("window.__gradhealth.highlightCells()")
            assert {c["layer"] for c in cells} == rows, (run, f["kind"])
            healthy = [c for c in cells if c["status"] == "ok"]
            assert not healthy, (run, f["kind"], healthy[:5])
            if run == "exploding/unclipped" and f["kind"] == "exploding_gradients":
                tab.page.screenshot(path=str(_shots() / "findings.png"))
            item.click()  # unselect before the next one
            checked += 1
        if run == "exploding/unclipped":
            # The detail panel gives each finding's steps on the layer clicked, not the union over its layers.
            x, y = tab.cell_point("layer_0", 30)
            tab.page.mouse.click(x, y)
            # Other findings on the layer may name exploding gradients as their cause; pick by the heading.
            heading = tab.ui.locator(".gh-finding-head strong", has_text=re.compile("^Exploding gradients$"))
            spans = tab.ui.locator(".gh-detail .gh-detail-finding", has=heading).locator(".gh-layer-spans")
            spans.wait_for(timeout=10_000)
            assert spans.text_content() == "On this layer: steps 7 to 8, 15, 17 and 30."
            tab.ui.locator(".gh-detail rect.gh-bar").first.wait_for(timeout=10_000)
            tab.page.mouse.move(5, 500)
            tab.ui.locator(".gh-tooltip").wait_for(state="hidden")
            tab.page.screenshot(path=str(_shots() / "detail.png"))
        assert tab.errors == []
    assert checked >= 8


def test_the_detail_panel_opens_in_view_below_26_rows(demo_tab):
    run = "vanishing/sigmoid"
    tab = demo_tab(run)
    layers = _get(f"{tab.base}/data/plugin/gradhealth/heatmap?run={run}&role=gradient")["layers"]
    assert len(layers) == 26
    x, y = tab.cell_point(layers[25], 200)
    tab.page.mouse.click(x, y)
    detail = tab.ui.locator(".gh-detail")
    detail.locator(".gh-metric-table").wait_for(timeout=10_000)
    tab.frame.wait_for_timeout(300)
    height = tab.frame.evaluate("innerHeight")
    for part in (".gh-detail-title", ".gh-detail-status", ".gh-metric-table"):
        box = tab.frame.evaluate(f"(() => {{ const r = document.querySelector('.gh-detail {part}').getBoundingClientRect();"
                                 " return [r.top, r.bottom]; })()")
        assert 0 <= box[0] and box[1] <= height, (part, box, height)
    assert detail.locator(".gh-detail-title").text_content() == layers[25]
    assert tab.errors == []



def test_a_validation_half_points_to_its_train_run_instead_of_how_to_log(demo_server, browser):
    # Keras' validation folder holds scalars only: the tab says where its layers are and opens them,
    # never the integrations' how-to, which no validation run could follow.
    page = browser.new_page(viewport=DEMO_VIEWPORT)
    try:
        tab = Tab(page, demo_server)
        tab.open(f"gradhealth&p.gradhealth.run={urllib.parse.quote('healthy/keras/train', safe='')}")
        tab.ui.locator(".gh-run-group summary").click()
        half = tab.ui.locator("li.gh-run[data-run='healthy/keras/validation']")
        assert half.locator(".gh-badge").text_content().startswith("scalars only")
        half.click()
        message = tab.ui.locator(".gh-message", has_text="its layers are in")
        message.wait_for(timeout=20_000)
        assert "healthy/keras/train" in message.text_content()
        assert "GradientHealthCallback" not in message.text_content()
        before = tab.drawn()
        message.locator("button", has_text="Open healthy/keras/train").click()
        tab.frame.wait_for_function("window.__gradhealth.viewState.run === 'healthy/keras/train'")
        tab.wait_redraw(before)
        assert tab.errors == []
    finally:
        page.close()


@pytest.fixture(scope="module")
def dead_relu_server(tmp_path_factory):
    """TensorBoard on the demo's dead_relu runs alone (``relu``, ``leaky_relu``): PyTorch histograms only."""
    yield from _serve(DEMO / "dead_relu", lambda runs: {"relu", "leaky_relu"} <= set(runs),
                      tmp_path_factory.mktemp("dead_relu_log"))


def test_an_update_ratio_that_proves_nothing_is_painted_not_judged_and_the_legend_says_so(dead_relu_server, browser):
    # PyTorch weight histograms alone: where two steps' histograms show no change bigger than they resolve, the
    # update ratio's lower bound is 0, which the server marks not_judged. The tab paints such a cell in the
    # grey of what it did not judge, never the dark end of the scale, and its legend's grey swatch says both.
    run = "relu"
    page = browser.new_page(viewport=DEMO_VIEWPORT)
    tab = Tab(page, dead_relu_server)
    tab.open(f"gradhealth&p.gradhealth.run={run}&p.gradhealth.role=weight")
    tab.frame.wait_for_function(f"window.__gradhealth.viewState.run === {json.dumps(run)}")
    tab.set_metric("update_ratio")
    served = _get(f"{tab.base}/data/plugin/gradhealth/heatmap?" + urllib.parse.urlencode(
        {"run": run, "role": "weight", "metric": "update_ratio"}))
    names = served["quality_names"]
    cells = {names[q]: (served["layers"][i], served["steps"][j])
             for i, codes in enumerate(served["quality_cells"]) for j, q in enumerate(codes)}
    grey = [0x9e, 0x9e, 0x9e, 255]
    assert tab.pixel(".gh-hm-body", *cells["not_judged"]) == grey, cells["not_judged"]
    # A proven bound keeps its colour on the scale.
    assert tab.pixel(".gh-hm-body", *cells["lower_bound"]) != grey, cells["lower_bound"]
    legend = tab.ui.locator(".gh-legend")
    item = legend.locator(".gh-legend-item", has_text="no data / not judged")
    assert item.locator(".gh-swatch").evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(158, 158, 158)"
    item.hover()
    assert item.get_attribute("title").startswith("no data: nothing logged for this layer at this step; "
                                                  "not judged: a lower bound of 0 proves nothing")
    # Every item of the legend says what it means on hover; the scale, what its values are.
    titles = legend.locator(".gh-legend-item").evaluate_all("els => els.map(e => e.title)")
    assert titles and all(titles), titles
    assert titles[0].endswith("Lower bound: the true value is at least this"), titles
    x, y = tab.cell_point(*cells["not_judged"])
    tab.page.mouse.move(x, y)
    tip = tab.ui.locator(".gh-tooltip")
    tip.wait_for(state="visible", timeout=5000)
    assert "not judged (a lower bound of 0 proves nothing" in tip.text_content()
    tab.page.locator(FRAME).screenshot(path=str(_shots() / "update_ratio_not_judged.png"))
    assert tab.errors == []
    page.close()
