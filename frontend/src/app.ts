// The tab: wires the store, the view state and the views together. It decides what
// to load when the state changes and what to show when an answer arrives.

import { cellStep, columnOfStep, holdsEveryStep, mergeRows, orderedRoles, rowLoaded, spansText } from "./api";
import type { Finding, Heatmap, HeatmapWindow, RunInfo, Track } from "./api";
import { mergeDomains, statusName } from "./colors";
import type { Domain } from "./colors";
import { DetailPanel } from "./detail";
import { button, el } from "./dom";
import { exportFindings, exportPng } from "./export";
import { findingCell, findingId, findingSpans } from "./findings";
import { foldAll, foldHeatmap, foldOf, foldsByItself, isFolded, layerToOpen, rowMembers, runRowLabels, sourceLayers, toggleBlock, unfoldBlock } from "./fold";
import { fromFragment, openRun } from "./hash";
import type { ViewState } from "./hash";
import { heatmapDomain, HeatmapView, maxViewHeight } from "./heatmap";
import { ROW_MIN_H, unionSpans } from "./layout";
import { connectHost, hostDarkMode, watchHostDarkMode, watchHostHash } from "./host";
import { errorText } from "./json";
import { buildLegend, legendMarks } from "./legend";
import { code, howToLog, noRolesMessage, paragraph, setMessage, unreadableNote, unreadableStepsNote } from "./messages";
import { FindingsList, roleToOpen, RunList, runToShow, worstRun } from "./panels";
import { matchesFilter, orderRows, rowSeverity } from "./rows";
import { keptLayers, summaryText } from "./summary";
import { linkedState, persistState, readState, sameState } from "./state";
import { parseStep, stepsUnion } from "./steps";
import type { Step } from "./steps";
import { Store } from "./store";
import { fetchSweep, SweepView } from "./sweep";
import type { HeatmapPair } from "./store";
import { Toolbar } from "./toolbar";
import { Tooltip } from "./tooltip";
import { trackReach } from "./track";
import { mildestSeverity } from "./vocabulary";

const POLL_MS = 30_000;
// A detail panel showing less than this of itself (CSS pixels) is scrolled into view.
const DETAIL_MIN_VISIBLE = 320;
// A host reload and a poll landing together should fetch once.
const MIN_REFRESH_GAP_MS = 3_000;
// While the run a link names is not listed (TensorBoard still loading the log directory), the
// list is asked this often; past the patience the tab says the run has not appeared.
const WAIT_POLL_MS = 5_000;
const WAIT_PATIENCE_MS = 60_000;

/** Steps at which a heatmap row has data (binned: the step each column's cell came from). */
function rowSteps(h: Heatmap, layer: string): Step[] {
  const i = h.layers.indexOf(layer);
  if (i < 0) return [];
  return h.steps.flatMap((_, j) => (statusName(h.status[i][j], h.status_names) !== "no_data" ? [cellStep(h, i, j)] : []));
}

/**
 * Whether a heatmap already shows a zoom window as well as the server would: every step
 * of it at full resolution or, unzoomed (null), the whole run (binned or not).
 */
function holdsWindow(h: Heatmap, zoom: [Step, Step] | null): boolean {
  if (holdsEveryStep(h)) return true;
  if (zoom === null) return h.windowSteps >= h.stepsTotal;
  const n = h.steps.length;
  return !h.binned && n > 0 && zoom[0] >= h.steps[0] && zoom[1] <= h.steps[n - 1];
}

// A zoom after a quiet spell this long is fetched at once (its coarse redraw is no reason to wait);
// one following another within it waits this long after the last, so a burst of zooms asks twice at most.
const ZOOM_FETCH_MS = 80;

function sameZoom(a: [Step, Step] | null, b: [Step, Step] | null): boolean {
  return a === b || (a !== null && b !== null && a[0] === b[0] && a[1] === b[1]);
}
// Column budgets are multiples of this many CSS pixels, so resizing the window rarely asks again;
// rounded down, so a column is never narrower than a pixel and a click lands on the cell it shows.
const COLUMN_BUCKET = 128;
// Rows are fetched this long after the last scroll, so a scroll asks once where it stops.
const ROWS_FETCH_MS = 100;

/** Rows asked for above and below those in sight, so a short scroll finds its rows loaded. */
function rowMargin(visible: number): number {
  return Math.max(8, Math.ceil(visible / 4));
}

/** The numbers first..last-1. */
function numbers(first: number, last: number): number[] {
  return Array.from({ length: Math.max(0, last - first) }, (_, i) => first + i);
}

function setTheme(dark: boolean): void {
  document.documentElement.dataset.theme = dark ? "dark" : "light";
}

/** Counts a page event in a data attribute, for the browser tests. */
function countOnPage(name: "ghDrawn" | "ghHostReloads" | "ghSweepDrawn" | "ghZoomDrawn" | "ghRowsDrawn"): void {
  const data = document.documentElement.dataset;
  data[name] = String(Number(data[name] ?? "0") + 1);
}

export class App {
  private state: ViewState = readState();
  private readonly store = new Store();
  private readonly tooltip = new Tooltip();
  private readonly toolbar: Toolbar;
  private readonly views: [HeatmapView, HeatmapView];
  private readonly detail: DetailPanel;
  private readonly runList: RunList;
  private readonly findingsList: FindingsList;
  private readonly summary = el("span", "gh-summary");
  // Said when the layer filter keeps no layer, with a way to clear it.
  private readonly filterNote = el("div", "gh-message gh-filter-note");
  /** What TensorBoard's sampling dropped in the run shown, in the server's words. */
  private readonly samplingNote = el("div", "gh-sampling-note");
  /** What the run's logs could not judge (no gradients logged, ...), in the server's words. */
  private readonly coverageNote = el("div", "gh-sampling-note gh-coverage-note");
  /** The entries of gradhealth.json the server rejected, above the run list. */
  private readonly configNotice = el("div", "gh-sampling-note gh-config-notice");
  // Messages about the whole log directory go above everything; about one run, in the centre.
  private readonly globalMessage = el("div", "gh-message");
  private readonly message = el("div", "gh-message");
  private readonly main = el("div", "gh-main");
  private readonly legendSlot = el("div");
  private readonly hint = el("div", "gh-hint");
  private readonly heatmapBox = el("div", "gh-heatmaps");
  /** The sweep view, in place of the run list, heatmaps and findings while it shows. */
  private readonly sweepView: SweepView;
  private readonly sweepBox = el("div", "gh-sweep-box");
  private readonly sweepMessage = el("div", "gh-message");
  private sweepRequest = 0;
  // Only the newest request may update the page; slower, older answers are dropped.
  private requestId = 0;
  private zoomTimer = 0;
  private rowsTimer = 0;
  /** What each heatmap shown was asked for: more of its rows are asked for alike. */
  private parts: [HeatmapWindow, HeatmapWindow] = [{}, {}];
  /** The row windows asked for since the heatmaps shown arrived: each is asked once. */
  private rowsAsked = new Set<string>();
  private trackTimer = 0;
  /** When the last zoom asked for a fetch (performance.now()). */
  private lastZoomAt = -Infinity;
  private lastRefresh = 0;
  /** A cell was clicked: its panel is brought into view once drawn. */
  private revealPending = false;
  /**
   * The selected layer's row is shown with the next heatmaps drawn: unfolded, scrolled to. A link naming a
   * layer sets it, as does a finding that moves the panel to another role's heatmap.
   */
  private revealRow = this.state.layer !== "";
  /** The run tracks of the heatmaps shown (null: none, or not loaded). */
  private tracks: [Track | null, Track | null] = [null, null];
  /** The whole runs' tracks, as loaded with the run (`tracks` may hold a zoom window's instead). */
  private wholeTracks: [Track | null, Track | null] = [null, null];
  private syncingScroll = false;
  /** The run the view state names while it is not listed, and since when (Date.now()). */
  private waiting: { run: string; since: number } | null = null;
  private waitTimer = 0;

  constructor(body: HTMLElement) {
    this.toolbar = new Toolbar({
      role: (role) => this.change({ role }),
      metric: (metric) => this.change({ metric }),
      compare: (compare) => this.change({ compare }),
      sort: (sort) => this.reorder({ sort }),
      filter: (filter) => this.reorder({ filter }),
      resetZoom: () => this.setZoom(null),
      reload: () => void this.refresh(true),
      png: () => exportPng(this.views, this.state),
      sweep: () => this.setView(this.state.view === "sweep" ? "heatmap" : "sweep"),
      foldAll: () => this.foldAll(),
    });
    this.sweepView = new SweepView({
      open: (run, role) => this.openFromSweep(run, role),
      changed: (sweep) => {
        this.state.sweep = sweep;
        this.persist();
      },
    }, this.state.sweep);
    this.views = [this.makeView(0), this.makeView(1)];
    this.detail = new DetailPanel({
      step: (step) => this.selectCell(this.state.layer, step, 0),
      close: () => this.closeDetail(),
      drawn: () => {
        // Once its charts are in, the panel is as tall as it gets: the page can scroll it up.
        if (this.revealPending) this.revealDetail();
        this.revealPending = false;
      },
    }, this.store);
    this.runList = new RunList((run) => this.selectRun(run), (run, partner) => this.showRanks(run, partner));
    this.findingsList = new FindingsList({
      select: (f) => this.selectFinding(f),
      exportCsv: () => exportFindings(this.store.findingsRun, this.store.findings, "csv"),
      exportJson: () => exportFindings(this.store.findingsRun, this.store.findings, "json"),
    });
    this.buildPage(body);
    this.listenToWindow();
  }

  private makeView(index: 0 | 1): HeatmapView {
    return new HeatmapView(
      this.tooltip,
      {
        // A folded block's cell opens its worst layer at that step.
        select: (layer, step) => this.selectCell(layerToOpen(this.views[index].data, layer, step), step, index),
        toggleBlock: (block, offset) => this.toggleBlock(block, index, offset),
        zoom: (zoom) => this.setZoom(zoom),
        scrolled: (top) => {
          this.syncScroll(index, top);
          this.scheduleRowFetch();
        },
        finding: (id) => this.selectFindingById(id, index),
      },
      () => (this.state.compare ? (this.store.heatmaps[index]?.run ?? "") : ""),
    );
  }

  private buildPage(body: HTMLElement): void {
    const app = el("div", "gh-app");
    this.views[1].root.hidden = true;
    this.heatmapBox.append(this.views[0].root, this.views[1].root);
    this.hint.textContent = "Hover a cell for its numbers; click it for the layer's histogram and history; drag across steps to zoom, double-click to zoom out.";
    const center = el("div", "gh-center");
    const head = el("div", "gh-center-head");
    head.append(this.legendSlot, this.summary);
    this.filterNote.hidden = true;
    center.append(this.message, head, this.filterNote, this.samplingNote, this.coverageNote, this.hint, this.heatmapBox, this.detail.root);
    this.samplingNote.hidden = true;
    this.coverageNote.hidden = true;
    this.main.append(this.runList.root, center, this.findingsList.root);
    this.main.hidden = true;
    this.configNotice.hidden = true;
    this.sweepBox.append(this.sweepMessage, this.sweepView.root);
    this.sweepBox.hidden = true;
    app.append(this.toolbar.root, this.globalMessage, this.configNotice, this.main, this.sweepBox);
    body.replaceChildren(app, this.tooltip.root);
  }

  private listenToWindow(): void {
    let pending = 0;
    window.addEventListener("resize", () => {
      cancelAnimationFrame(pending);
      pending = requestAnimationFrame(() => this.relayout());
    });
    window.addEventListener("hashchange", () => this.applyState(fromFragment(location.hash)));
    // Inside TensorBoard a link changes TensorBoard's URL, not the tab's own.
    watchHostHash(() => {
      const linked = linkedState();
      if (linked) this.applyState(linked);
    });
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible" && Date.now() - this.lastRefresh > POLL_MS) void this.refresh(false);
    });
  }

  private relayout(): void {
    for (const v of this.views) v.layout();
    this.detail.relayout();
    this.scheduleRowFetch();
  }

  private syncScroll(from: 0 | 1, top: number): void {
    if (this.syncingScroll || !this.state.compare) return;
    this.syncingScroll = true;
    this.views[1 - from].scrollTop = top;
    this.syncingScroll = false;
  }

  // ---- state ------------------------------------------------------------------------

  /** Role, metric or compared run changed: the heatmaps are fetched again. */
  private change(part: Partial<Pick<ViewState, "role" | "metric" | "compare">>): void {
    Object.assign(this.state, part);
    void this.loadHeatmaps();
  }

  /** Row filter or order changed: the loaded heatmaps are redrawn. */
  private reorder(part: Partial<Pick<ViewState, "sort" | "filter">>): void {
    const refold = part.filter !== undefined && part.filter !== this.state.filter;
    Object.assign(this.state, part);
    // A folded block stands for the layers the filter keeps: the filter refolds the heatmaps.
    if (refold && this.paintHeatmaps()) {
      this.applyHighlight(false);
      this.persist();
    } else this.applyOrder();
  }

  private persist(): void {
    persistState(this.state);
  }

  /** A state from a link (the page's URL or TensorBoard's): shown in place of the current one. */
  private applyState(next: ViewState): void {
    if (sameState(next, this.state)) return;
    const runChanged = next.run !== this.state.run;
    const viewChanged = next.view !== this.state.view;
    this.revealRow = next.layer !== "";
    this.state = next;
    if (this.showView()) {
      this.sweepView.restore(next.sweep);
      if (viewChanged) void this.loadSweep();
      return;
    }
    if (runChanged || viewChanged) void this.loadRun();
    else void this.loadHeatmaps();
  }

  // ---- loading ----------------------------------------------------------------------

  async start(): Promise<void> {
    const dark = hostDarkMode();
    if (dark !== null) setTheme(dark);
    watchHostDarkMode((d) => {
      setTheme(d);
      this.relayout();
    });
    connectHost(() => {
      // Counted on the page so the browser tests can tell a host reload from a poll.
      countOnPage("ghHostReloads");
      void this.refresh(false);
    });
    window.setInterval(() => {
      // A zero-width window is this tab's iframe hidden behind another TensorBoard tab.
      if (document.visibilityState === "visible" && window.innerWidth > 0) void this.refresh(false);
    }, POLL_MS);
    await this.loadAll();
  }

  /** Hides everything about runs and says why in the global message. */
  private showNoRuns(kind: "info" | "error" | "loading", content: (string | Node)[]): void {
    this.main.hidden = true;
    this.toolbar.showControls(false);
    setMessage(this.globalMessage, kind, content);
  }

  /** First load, and reload while there is nothing to show yet. */
  private async loadAll(): Promise<void> {
    setMessage(this.globalMessage, "loading", ["Loading runs\u2026"]);
    this.lastRefresh = Date.now();
    try {
      // The vocabulary names what the runs and findings say: it must be there before either is drawn.
      await Promise.all([this.store.loadVocabulary(), this.store.loadRuns()]);
    } catch (e) {
      this.showNoRuns("error", [errorText(e), " ", button("Retry", () => void this.loadAll())]);
      return;
    }
    this.showConfigProblems();
    const choice = this.chooseRun();
    if (this.store.runs.length === 0 && "waitFor" in choice && !choice.overdue) {
      // TensorBoard has listed no run yet: the run a link names may be among the first it loads.
      this.showNoRuns("loading", this.waitingText(choice.waitFor, false));
      return;
    }
    if (this.store.runs.length === 0) {
      const box = el("div", "gh-empty");
      box.append(...("waitFor" in choice ? this.waitingText(choice.waitFor, true) : []));
      box.append(el("h2", "", "No gradient health data yet"), ...howToLog());
      this.showNoRuns("info", [box]);
      return;
    }
    setMessage(this.globalMessage, null);
    if (this.showView()) {
      this.persist();
      await this.loadSweep();
    } else {
      await this.loadRun();
    }
  }

  // ---- the sweep --------------------------------------------------------------------

  /** Shows the sweep (with two runs or more) or the heatmap, as the state says; true for the sweep. */
  private showView(): boolean {
    const available = this.store.runs.length >= 2;
    const sweep = this.state.view === "sweep" && available;
    this.main.hidden = sweep;
    this.sweepBox.hidden = !sweep;
    this.toolbar.showControls(!sweep);
    this.toolbar.setSweep(available, sweep);
    return sweep;
  }

  private setView(view: ViewState["view"]): void {
    this.state.view = view;
    if (this.showView()) {
      this.persist();
      void this.loadSweep();
    } else {
      void this.loadRun();
    }
  }

  /** Fetches the sweep (one request for every run's line) and shows it. */
  private async loadSweep(): Promise<void> {
    const id = ++this.sweepRequest;
    // A reload keeps the table shown until the new answer replaces it.
    if (!this.sweepView.loaded) setMessage(this.sweepMessage, "loading", ["Loading the sweep\u2026"]);
    try {
      const sweep = await fetchSweep();
      if (id !== this.sweepRequest) return;
      setMessage(this.sweepMessage, null);
      this.sweepView.set(sweep);
      countOnPage("ghSweepDrawn");
    } catch (e) {
      if (id === this.sweepRequest) setMessage(this.sweepMessage, "error", [errorText(e)]);
    }
  }

  /** A sweep line was clicked: its run's heatmap opens, on the role of its worst finding when it names one. */
  private openFromSweep(run: string, role: string | null): void {
    this.state.view = "heatmap";
    this.showView();
    const named = role && this.store.runs.find((r) => r.run === run)?.roles.includes(role) ? role : "";
    if (run !== this.state.run) {
      this.selectRun(run, named);
      return;
    }
    if (named) this.state.role = named;
    void this.loadRun();
  }

  private showConfigProblems(): void {
    const problems = this.store.configProblems;
    this.configNotice.hidden = problems.length === 0;
    this.configNotice.replaceChildren(
      el("div", "", "Rejected from the gradhealth config (defaults kept):"),
      ...problems.map((p) => el("div", "gh-config-problem", p)),
    );
  }

  /** The shown run's layers in model order, the order the heatmap draws its rows. */
  private layerOrder(): string[] {
    return [...(this.currentRun()?.layers ?? [])].sort((a, b) => a.order - b.order).map((l) => l.name);
  }

  private currentRun(): RunInfo | undefined {
    return this.store.runs.find((r) => r.run === this.state.run);
  }

  private drawRunPickers(): void {
    this.runList.set(this.store.runs, this.state.run, this.state.compare);
    this.state.compare = this.toolbar.setCompareRuns(this.store.runs, this.state.run, this.state.compare);
  }

  /**
   * Opens another run, on `role` when given; else as a first open does, on the role of its worst
   * finding (the run left's role may show none of the new run's warnings).
   */
  private selectRun(run: string, role = ""): void {
    if (run === this.state.run) return;
    this.state = { ...openRun(this.state, run, this.state.compare === run ? "" : this.state.compare), role };
    void this.loadRun();
  }

  /** What to show for the run the state names: it, the worst run when none is named, or a wait for it. */
  private chooseRun(): ReturnType<typeof runToShow> {
    const named = this.state.run;
    const since = this.waiting?.run === named ? this.waiting.since : Date.now();
    const choice = runToShow(this.store.runs, named, Date.now() - since, WAIT_PATIENCE_MS);
    this.waiting = "waitFor" in choice ? { run: named, since } : null;
    clearTimeout(this.waitTimer);
    // Not overdue: asked again soon, so the run opens as soon as TensorBoard lists it (the usual poll goes on after).
    if ("waitFor" in choice && !choice.overdue) this.waitTimer = window.setTimeout(() => void this.refresh(false), WAIT_POLL_MS);
    return choice;
  }

  private waitingText(run: string, overdue: boolean): (string | Node)[] {
    if (!overdue) return [paragraph("Waiting for run ", code(run), " to load: TensorBoard has not listed it yet. It opens here once it is.")];
    const worst = worstRun(this.store.runs);
    return [
      paragraph(
        "Run ", code(run), " has not appeared. TensorBoard may still be reading the log directory, or the link names a run that is not in it. ",
        ...(worst
          ? ["It opens here if it appears; meanwhile pick a run from the list or ", button(`open ${worst.run}`, () => this.selectRun(worst.run)), "."]
          : ["It opens here if it appears."]),
      ),
    ];
  }

  /** The run the state names is not listed yet: says so in the centre, with the run list beside it. */
  private showWaiting(run: string, overdue: boolean): void {
    ++this.requestId;
    this.store.heatmaps = [null, null];
    this.drawRunPickers();
    this.detail.close();
    this.samplingNote.hidden = this.coverageNote.hidden = true;
    this.findingsList.loading();
    this.summary.textContent = "";
    this.showHeatmaps(false);
    setMessage(this.message, overdue ? "info" : "loading", this.waitingText(run, overdue));
  }

  /** A rank of a training beside another rank of it, in the compare view. */
  private showRanks(run: string, partner: string): void {
    this.state = openRun(this.state, run, partner);
    void this.loadRun();
  }

  /** Loads the selected run: its roles, heatmap(s) and findings. */
  private async loadRun(): Promise<void> {
    // A run the state names is kept, listed or not yet: never swapped for another.
    const choice = this.chooseRun();
    if ("waitFor" in choice) {
      this.showWaiting(choice.waitFor, choice.overdue);
      return;
    }
    this.state.run = choice.open;
    const run = this.currentRun();
    if (!run) return;
    this.drawRunPickers();
    // A URL naming no role (or one the run lacks) opens the run on the role its worst finding is about.
    this.state.role = this.toolbar.setRoles(orderedRoles(run), roleToOpen(run, this.state.role));
    this.toolbar.showState(this.state);
    if (run.error !== null) {
      // Its routes would answer the same error: say it once, in the centre and in the findings.
      ++this.requestId;
      this.samplingNote.hidden = this.coverageNote.hidden = true;
      this.findingsList.error(run.error);
      this.showNoHeatmap("error", [run.error]);
      this.persist();
      return;
    }
    await Promise.all([this.loadFindings(), this.loadHeatmaps()]);
  }

  private async loadFindings(): Promise<void> {
    this.findingsList.loading();
    try {
      if (!(await this.store.loadFindings(this.state.run, () => this.state.run))) return;
    } catch (e) {
      this.findingsList.error(errorText(e));
      return;
    }
    const findings = this.store.findings;
    if (!findings.some((f) => findingId(f) === this.state.finding)) this.state.finding = "";
    this.findingsList.set(findings, this.state.finding, this.layerOrder());
    this.applyHighlight(false);
    this.drawTracks();
    if (this.detail.isOpen) this.openDetail();
  }

  /** Says in the centre why there is no heatmap to draw. */
  private showNoHeatmap(kind: "info" | "error", content: (string | Node)[]): void {
    this.summary.textContent = "";
    this.showHeatmaps(false);
    setMessage(this.message, kind, content);
  }

  private async loadHeatmaps(): Promise<void> {
    const run = this.currentRun();
    const id = ++this.requestId;
    if (!run) return;
    const notes = [run.sampling?.message ?? null, run.scalars_sampling].filter((m): m is string => m !== null);
    this.samplingNote.hidden = notes.length === 0;
    this.samplingNote.textContent = notes.join(" ");
    const coverage = [
      run.coverage_note,
      unreadableNote(run.unreadable),
      unreadableStepsNote(run.unreadable_steps),
    ].filter((n): n is string => n !== null);
    this.coverageNote.hidden = coverage.length === 0;
    this.coverageNote.textContent = coverage.join(" ");
    this.drawRunPickers();
    const { role, metric, compare } = this.state;
    if (!role) {
      this.showNoHeatmap("info", noRolesMessage(run, (r) => this.selectRun(r)));
      this.persist();
      return;
    }
    this.heatmapBox.classList.add("gh-stale");
    this.summary.textContent = "Loading\u2026";
    // The track is an addition: a server without it, or a failure, leaves the heatmap as it is.
    const tracks = Promise.all([run.run, compare].map((r) => (r ? this.store.trackOf(r).catch(() => null) : Promise.resolve(null))));
    let pair: HeatmapPair;
    let parts: [HeatmapWindow, HeatmapWindow];
    try {
      parts = [this.heatmapPart(run.run, 0), this.heatmapPart(compare, 1)];
      pair = await this.store.fetchHeatmaps(run.run, compare, role, metric, ...parts);
    } catch (e) {
      if (id !== this.requestId) return;
      this.heatmapBox.classList.remove("gh-stale");
      this.showNoHeatmap("error", [errorText(e)]);
      return;
    }
    if (id !== this.requestId) return;
    this.heatmapBox.classList.remove("gh-stale");
    this.parts = parts;
    this.rowsAsked.clear();
    this.showPair(run, pair);
    this.persist();
    if (!holdsWindow(pair.primary, this.state.zoom) || this.binnedApart(parts)) this.scheduleZoomFetch();
    const [mine, theirs] = await tracks;
    if (id !== this.requestId) return;
    this.tracks = this.wholeTracks = [mine, theirs];
    // The axis spans the whole tracks' steps (a loss logged on past the layers), whatever window is drawn.
    [run.run, compare].forEach((r, i) => {
      if (r) this.views[i].setTrackReach(r, trackReach(this.wholeTracks[i]));
    });
    this.shareAxis();
    this.showSummary();
    this.drawTracks();
    if (this.state.zoom) void this.loadTrackWindow();
  }

  /**
   * A thinned track (a long run's series, binned per pixel) gets the zoom window's own points;
   * back to the whole run, the whole-run track is drawn again.
   */
  private async loadTrackWindow(): Promise<void> {
    const zoom = this.state.zoom;
    if (!zoom) {
      if (this.tracks !== this.wholeTracks) {
        this.tracks = this.wholeTracks;
        this.drawTracks();
      }
      return;
    }
    const runs = this.wholeTracks.map((t) => (t?.series.some((s) => s.binned) ? t.run : null));
    if (runs.every((r) => r === null)) return;
    const id = this.requestId;
    const got = await Promise.all(runs.map((r, i) => (r ? this.store.trackOf(r, zoom).catch(() => null) : Promise.resolve(this.wholeTracks[i]))));
    // A newer zoom or run asked since: its own answer draws.
    if (id !== this.requestId || this.state.zoom !== zoom) return;
    this.tracks = [got[0] ?? this.wholeTracks[0], got[1] ?? this.wholeTracks[1]];
    this.drawTracks();
  }

  /** The run tracks above the heatmaps; the compared run's without findings (they are not loaded). */
  private drawTracks(): void {
    const own = this.store.findingsRun === this.store.heatmaps[0]?.run ? this.store.findings : [];
    this.views[0].setTrack(this.tracks[0], own, this.state.finding);
    this.views[1].setTrack(this.tracks[1], [], "");
  }

  /** Draws freshly loaded heatmaps, or says that the run has no data for the role yet. */
  private showPair(run: RunInfo, { primary, second, secondError }: HeatmapPair): void {
    this.store.heatmaps = [primary, second];
    this.showSummary();
    if (primary.layers.length === 0 || primary.steps.length === 0) {
      this.showHeatmaps(false);
      setMessage(this.message, "info", [paragraph("No ", code(this.state.role), " data for run ", code(run.run), " yet."), ...howToLog()]);
      return;
    }
    setMessage(this.message, secondError ? "error" : null, secondError ? [`Compared run: ${secondError}`] : []);
    this.showHeatmaps(true);
    this.drawHeatmaps();
    if (this.state.layer && this.state.step !== null && primary.layers.includes(this.state.layer)) {
      this.openDetail();
      if (this.revealRow) {
        this.showRow();
        // The panel too, as a click on the cell brings it into view: now, and once its charts are in.
        this.revealPending = true;
        this.revealDetail();
      }
    } else {
      this.closeDetail(false);
    }
    this.revealRow = false;
    this.applyHighlight(false);
  }

  /**
   * Shows the selected layer's own row in the main heatmap: its block unfolded when folded (every
   * other block as it was), the row scrolled into sight; the selection marks its cell there.
   */
  private showRow(): void {
    const h = this.store.heatmaps[0];
    const layer = this.state.layer;
    const row = h ? h.layers.indexOf(layer) : -1;
    if (!h || row < 0) return;
    const block = h.blocks[row];
    const fold = block ? unfoldBlock(this.state.fold, block, this.autoFolds(), this.runBlocks()) : this.state.fold;
    if (fold !== this.state.fold) {
      this.state.fold = fold;
      this.drawHeatmaps();
      this.persist();
    }
    this.views[0].revealLayer(layer);
    this.syncScroll(0, this.views[0].scrollTop);
    // The rows now in sight, the selected one among them, may not be here yet.
    this.scheduleRowFetch();
  }

  private showHeatmaps(visible: boolean): void {
    this.heatmapBox.hidden = !visible;
    this.legendSlot.hidden = !visible;
    this.hint.hidden = !visible;
    this.toolbar.setCanExport(visible);
    if (!visible) {
      this.filterNote.hidden = true;
      for (const v of this.views) v.clear();
      this.detail.close();
    }
  }

  private order(h: Heatmap): number[] {
    const severity = this.state.sort === "severity" ? rowSeverity(h) : undefined;
    return orderRows(h.layers, this.state.filter, this.state.sort, severity, (row) => rowMembers(h, row));
  }

  /** Whether the blocks fold by themselves: the main run's rows would not fit the screen. */
  private autoFolds(): boolean {
    const a = this.store.heatmaps[0];
    return a !== null && a !== undefined && foldsByItself(a.layers.length, maxViewHeight());
  }

  /** A heatmap as drawn: the blocks the state folds, each as one row. */
  private folded(h: Heatmap): Heatmap {
    const auto = this.autoFolds();
    const filter = this.state.filter;
    return foldHeatmap(h, (block) => isFolded(this.state.fold, block, auto), filter ? (layer) => matchesFilter(layer, filter) : undefined);
  }

  /**
   * A block's label was clicked: it folds or unfolds in both views, and the URL remembers it. The rows keep
   * their height and the block's row stays where the clicked row was, under the pointer: clicking one
   * block's name after another never hits a row that slid there.
   */
  private toggleBlock(block: string, from: 0 | 1 = 0, offset: number | null = null): void {
    const h = this.store.heatmaps[0];
    const blocks = h ? [...new Set(h.blocks.filter((b): b is string => b !== null))] : undefined;
    this.state.fold = toggleBlock(this.state.fold, block, this.autoFolds(), blocks);
    for (const v of this.views) v.holdRowHeight();
    this.drawHeatmaps();
    if (offset !== null) {
      this.views[from].placeBlock(block, offset);
      this.syncScroll(from, this.views[from].scrollTop);
    }
    this.applyHighlight(false);
    this.persist();
  }

  /** The main run's blocks, in model order. */
  private runBlocks(): string[] {
    const h = this.store.heatmaps[0];
    return h ? [...new Set(h.blocks.filter((b): b is string => b !== null))] : [];
  }

  /** The fold button: every block unfolds when any was folded, else all fold; the URL remembers it. */
  private foldAll(): void {
    this.state.fold = foldAll(this.state.fold, this.runBlocks(), this.autoFolds());
    this.drawHeatmaps();
    this.applyHighlight(false);
    this.persist();
  }

  private drawHeatmaps(): void {
    if (this.paintHeatmaps()) countOnPage("ghDrawn");
  }

  /** Draws the heatmaps held (false: none); rows arriving are drawn so too, without counting a new heatmap. */
  private paintHeatmaps(): boolean {
    const [rawA, rawB] = this.store.heatmaps;
    if (!rawA) return false;
    const a = this.folded(rawA);
    const blocks = this.runBlocks();
    const auto = this.autoFolds();
    this.toolbar.setFold(blocks.length, blocks.filter((b) => isFolded(this.state.fold, b, auto)).length);
    const b = rawB ? this.folded(rawB) : null;
    const da = heatmapDomain(a);
    const shared: Domain | null = b ? mergeDomains(da, heatmapDomain(b)) : da;
    const marks = legendMarks(a, b);
    const decidedBy = [...a.decided_by, ...(b?.decided_by ?? [])];
    this.legendSlot.replaceChildren(buildLegend(a.metric, a.scale, shared, b !== null, decidedBy, marks));
    const zoom = this.state.zoom;
    this.views[1].root.hidden = b === null;
    this.views[0].setCaption(b ? a.run : "");
    // Layout reads the container width, so the compare view is shown first.
    // Compared runs' label columns are sized for both runs' names: their plots are as wide, step for step.
    const labels = rawB ? [...this.runLabels(rawA), ...this.runLabels(rawB)] : this.runLabels(rawA);
    this.views[0].setRunLabels(labels);
    this.views[0].setData(a, shared, this.order(a), zoom);
    if (b && rawB) {
      this.views[1].setCaption(b.run);
      this.views[1].setRunLabels(labels);
      this.views[1].setData(b, shared, this.order(b), zoom);
    } else {
      this.views[1].clear();
    }
    this.shareAxis();
    const sel = this.state.layer && this.state.step !== null ? { layer: this.state.layer, step: this.state.step } : null;
    for (const v of this.views) v.setSelection(sel);
    this.toolbar.setZoomed(this.state.zoom !== null);
    this.showSummary();
    this.scheduleRowFetch();
    return true;
  }

  /**
   * Compared runs share one step axis, the union of theirs: columns of the same step line up, and a run's
   * columns past its own steps are drawn as not logged. One run shown spans its own.
   */
  private shareAxis(): void {
    const comparing = this.views[1].data !== null;
    const span = comparing ? unionSpans(this.views.map((v) => v.ownSpan), this.views[0].scene.origin) : null;
    for (const v of this.views) v.setSharedSpan(span);
  }

  /** Every label the rows of a heatmap's run can have: its label column is sized for them. */
  private runLabels(h: Heatmap): string[] {
    const layers = this.store.runs.find((r) => r.run === h.run)?.layers.map((l) => l.name) ?? [];
    return runRowLabels(layers, h);
  }

  /** The summary line for the main heatmap under the filter and zoom shown, and a note when the filter keeps no layer. */
  private showSummary(): void {
    const h = this.store.heatmaps[0];
    if (!h) return;
    const filter = this.state.filter;
    const reach = this.wholeTracks[0]?.run === h.run ? trackReach(this.wholeTracks[0]) : null;
    this.summary.textContent = summaryText(h, filter, this.state.zoom, reach);
    const none = filter !== "" && h.layers.length > 0 && h.steps.length > 0 && keptLayers(h, filter) === 0;
    this.filterNote.hidden = !none;
    if (!none) {
      this.filterNote.replaceChildren();
      return;
    }
    const clear = button("Clear the filter", () => {
      this.toolbar.filterInput.value = "";
      this.reorder({ filter: "" });
    });
    this.filterNote.replaceChildren(`No layer matches \u201c${filter}\u201d. `, clear);
  }

  private applyOrder(): void {
    for (const v of this.views) {
      const h = v.data;
      if (h) v.setOrder(this.order(h));
    }
    this.persist();
    this.scheduleRowFetch();
  }

  /**
   * Zooms every view to a window of whole steps (null: every step): at once with the
   * columns loaded, then, where they are bins or miss part of the window, with the
   * window's own columns fetched from the server.
   */
  private setZoom(zoom: [Step, Step] | null): void {
    this.state.zoom = zoom;
    // Asked for before the loaded columns are redrawn: the answer is on its way while they are.
    // Compared runs are zoomed together: either one missing the window's columns asks for both.
    const shown = this.store.heatmaps.filter((h): h is Heatmap => h !== null);
    if (shown.length > 0 && !shown.every((h) => holdsWindow(h, zoom))) this.scheduleZoomFetch();
    // The heatmap's columns hold the window: only a thinned track may need the window's points.
    else this.scheduleTrackFetch();
    for (const v of this.views) v.setZoom(zoom);
    this.toolbar.setZoomed(this.state.zoom !== null);
    this.showSummary();
    this.persist();
  }

  /**
   * What to ask the server for: a column budget about the heatmap's width and, when
   * zoomed into a run the last answer did not hold whole, the zoom window.
   */
  private heatmapPart(run: string, index: 0 | 1 = 0): HeatmapWindow {
    // The plot's width once drawn; before, the page's less a label column.
    const width = this.views[0].scene.geo?.plotW ?? Math.max(COLUMN_BUCKET, (this.heatmapBox.clientWidth || window.innerWidth) - 200);
    const columns = Math.max(1, Math.floor(width / COLUMN_BUCKET)) * COLUMN_BUCKET;
    const last = this.store.heatmaps[0];
    const whole = !last || last.run !== this.state.run || holdsEveryStep(last);
    const compared = this.comparedWindow();
    return { columns, window: whole ? compared : (this.state.zoom ?? compared), compact: true, ...this.rowPart(run, index) };
  }

  /**
   * The window compared runs are asked for unzoomed: the union of their logged steps, once both answered
   * (null before, and with one run shown). The server bins a run over the window asked, so runs of different
   * lengths asked for one window and budget come in the same bins, column for column on the shared axis.
   */
  private comparedWindow(): [Step, Step] | null {
    const [a, b] = this.store.heatmaps;
    const { run, compare, role } = this.state;
    if (!compare || !a || !b || a.run !== run || b.run !== compare || a.role !== role || b.role !== role) return null;
    return stepsUnion([a.loggedSteps, b.loggedSteps]);
  }

  /** Whether compared runs came binned over windows of their own (asked before both were known): asked again over one. */
  private binnedApart(parts: [HeatmapWindow, HeatmapWindow]): boolean {
    const w = this.comparedWindow();
    const binned = this.store.heatmaps.some((h) => h?.binned === true);
    return w !== null && this.state.zoom === null && binned && !parts.every((p) => sameZoom(p.window ?? null, w));
  }

  /**
   * Which rows to ask for: every row when they fit the heatmap's height at the smallest row
   * height; else the rows in sight plus a margin (`wantedRows`) when the run's heatmap is shown,
   * and before it is, the first screenful in model order, as rows and as folded blocks (a long
   * model folds by itself, unless the URL says otherwise).
   */
  private rowPart(run: string, index: 0 | 1): Pick<HeatmapWindow, "rows" | "blocks"> {
    const role = this.state.role;
    const count = this.store.runs.find((r) => r.run === run)?.layers.filter((l) => role in l.roles).length ?? 0;
    const capacity = Math.floor(maxViewHeight() / ROW_MIN_H);
    if (count <= capacity) return {};
    const shown = this.store.heatmaps[index];
    if (shown && shown.loaded && shown.run === run && shown.role === role && this.views[index].data) {
      return this.wantedRows(index, false);
    }
    const first = numbers(0, capacity + rowMargin(capacity));
    return { rows: first, blocks: this.state.fold.mode === "none" ? [] : first };
  }

  /** The rows and folded blocks of a view in sight plus a margin; with `missing`, only those not loaded yet. */
  private wantedRows(index: 0 | 1, missing: boolean): { rows: number[]; blocks: number[] } {
    const view = this.views[index];
    const shown = view.data;
    const source = this.store.heatmaps[index];
    const g = view.scene.geo;
    const rows: number[] = [];
    const blocks: number[] = [];
    if (!shown || !source || !g) return { rows, blocks };
    const order = view.scene.order;
    const first = Math.floor(view.scrollTop / g.cellH);
    const last = Math.floor((view.scrollTop + g.viewH - 1) / g.cellH);
    const margin = rowMargin(last - first + 1);
    const folding = foldOf(shown);
    const blockNumber = new Map(source.blockNames.map((b, i) => [b, i]));
    for (let pos = Math.max(0, first - margin); pos <= Math.min(order.length - 1, last + margin); pos++) {
      const r = order[pos];
      const block = folding?.folded[r] ?? null;
      if (block !== null && folding?.partial[r]) {
        // A block the filter cuts is folded here from its kept members' own rows.
        for (const row of folding.members[r]) if (!missing || !rowLoaded(source, row)) rows.push(row);
        continue;
      }
      if (block !== null) {
        const b = blockNumber.get(block);
        if (b !== undefined && (!missing || !rowLoaded(shown, r))) blocks.push(b);
        continue;
      }
      const row = folding ? folding.members[r][0] : r;
      if (!missing || !rowLoaded(source, row)) rows.push(row);
    }
    return { rows, blocks };
  }

  private scheduleRowFetch(): void {
    clearTimeout(this.rowsTimer);
    this.rowsTimer = window.setTimeout(() => void this.loadRows(), ROWS_FETCH_MS);
  }

  /**
   * Fetches the rows in sight that are not loaded yet (scrolled to, unfolded, sorted into view)
   * and draws them in; an answer for a heatmap no longer shown is dropped.
   */
  private async loadRows(): Promise<void> {
    const id = this.requestId;
    const { role, metric } = this.state;
    let selectedArrived = false;
    const fetchOne = async (index: 0 | 1, held: Heatmap, want: { rows: number[]; blocks: number[] }): Promise<Heatmap | null> => {
      const key = [index, spansText(want.rows), spansText(want.blocks)].join("|");
      if ((want.rows.length === 0 && want.blocks.length === 0) || this.rowsAsked.has(key)) return null;
      this.rowsAsked.add(key);
      try {
        return await this.store.fetchRows(held.run, role, metric, { ...this.parts[index], ...want });
      } catch {
        this.rowsAsked.delete(key);
        return null;
      }
    };
    const merged = await Promise.all(
      ([0, 1] as const).map(async (index) => {
        const held = this.store.heatmaps[index];
        if (!held || !held.loaded) return false;
        const want = this.wantedRows(index, true);
        const asks = [want];
        // The selected layer's own row (its panel lists its steps), asked apart: asked with its
        // block folded, the server would send it as the block only.
        const selected = index === 0 ? held.layers.indexOf(this.state.layer) : -1;
        if (selected >= 0 && !rowLoaded(held, selected) && !want.rows.includes(selected)) asks.push({ rows: [selected], blocks: [] });
        const answers = await Promise.all(asks.map((w) => fetchOne(index, held, w)));
        let changed = false;
        for (const more of answers) {
          const now = this.store.heatmaps[index];
          const both = more && id === this.requestId && now ? mergeRows(now, more) : null;
          if (!both || !now) continue;
          selectedArrived ||= selected >= 0 && !rowLoaded(now, selected) && rowLoaded(both, selected);
          this.store.heatmaps[index] = both;
          changed = true;
        }
        return changed;
      }),
    );
    if (!merged.some(Boolean) || id !== this.requestId) return;
    this.paintHeatmaps();
    this.applyHighlight(false);
    if (selectedArrived && this.detail.isOpen) this.openDetail();
    countOnPage("ghRowsDrawn");
  }

  private scheduleZoomFetch(): void {
    const now = performance.now();
    const quiet = now - this.lastZoomAt >= ZOOM_FETCH_MS;
    this.lastZoomAt = now;
    clearTimeout(this.zoomTimer);
    if (quiet) void this.loadZoom();
    else this.zoomTimer = window.setTimeout(() => void this.loadZoom(), ZOOM_FETCH_MS);
  }

  /** Fetches the zoom window's columns and draws them; a failure keeps the coarser columns shown. */
  private async loadZoom(): Promise<void> {
    const run = this.currentRun();
    const { role, metric, compare, zoom } = this.state;
    if (!run || !role) return;
    const id = ++this.requestId;
    let pair: HeatmapPair;
    let parts: [HeatmapWindow, HeatmapWindow];
    try {
      const window = zoom ?? this.comparedWindow();
      parts = [{ ...this.heatmapPart(run.run, 0), window }, { ...this.heatmapPart(compare, 1), window }];
      pair = await this.store.fetchHeatmaps(run.run, compare, role, metric, ...parts);
    } catch {
      return;
    }
    // A zoom since (its own fetch pending) makes this answer's window one no longer shown.
    if (id !== this.requestId || pair.primary.steps.length === 0 || !sameZoom(zoom, this.state.zoom)) return;
    this.parts = parts;
    this.rowsAsked.clear();
    this.store.heatmaps = [pair.primary, pair.second];
    this.drawHeatmaps();
    this.applyHighlight(false);
    countOnPage("ghZoomDrawn");
    void this.loadTrackWindow();
  }

  /** The track's zoom window, asked after the same pause as the heatmap's (one request per wheel gesture). */
  private scheduleTrackFetch(): void {
    clearTimeout(this.trackTimer);
    this.trackTimer = window.setTimeout(() => void this.loadTrackWindow(), ZOOM_FETCH_MS);
  }

  // ---- selection --------------------------------------------------------------------

  private selectCell(layer: string, step: Step, view: 0 | 1): void {
    const compared = this.store.heatmaps[1];
    if (view === 1 && compared) {
      // A click in the compared run opens that run.
      this.state = { ...this.state, run: compared.run, compare: this.state.run, layer, step, finding: "" };
      void this.loadRun();
      return;
    }
    this.state.layer = layer;
    this.state.step = step;
    for (const v of this.views) v.setSelection({ layer, step });
    this.openDetail();
    // A folded block's member, or a row the keyboard moved to, may not be here yet.
    this.scheduleRowFetch();
    this.revealPending = true;
    this.revealDetail();
    this.persist();
  }

  /**
   * Brings a panel opened below the fold into view: its top goes to a third of
   * the window, so the heatmap's last rows, where it was clicked, stay in sight above it.
   */
  private revealDetail(): void {
    const top = this.detail.root.getBoundingClientRect().top;
    if (top > window.innerHeight - DETAIL_MIN_VISIBLE || top < 0) window.scrollBy({ top: top - window.innerHeight / 3 });
  }

  private openDetail(): void {
    const h = this.store.heatmaps[0];
    const { layer, step } = this.state;
    if (!h || !layer || step === null) return;
    const row = h.layers.indexOf(layer);
    if (row < 0) {
      // Not a layer of the heatmap shown (another role's, after a role switch): nothing to ask the server about.
      this.closeDetail(false);
      return;
    }
    const col = columnOfStep(h, step);
    const source = this.store.runs.find((r) => r.run === h.run)?.layers.find((l) => l.name === layer)?.roles[h.role];
    this.detail.open({
      run: h.run,
      layer,
      role: h.role,
      step,
      steps: rowSteps(h, layer),
      loading: !rowLoaded(h, row),
      metric: h.metric,
      rule: col >= 0 && cellStep(h, row, col) === step ? h.rules[row][col] : null,
      findings: this.store.findingsRun === h.run ? this.store.findings : [],
      decidedBy: source?.decided_by,
      tag: source?.tags[0],
    });
  }

  private closeDetail(persist = true): void {
    this.detail.close();
    this.state.layer = "";
    this.state.step = null;
    for (const v of this.views) v.setSelection(null);
    if (persist) this.persist();
  }

  /** A mark on a run track was clicked: its finding is selected (a compared run's opens that run). */
  private selectFindingById(id: string, view: 0 | 1): void {
    if (view === 1) return;
    const f = this.store.findings.find((x) => findingId(x) === id);
    if (f) this.selectFinding(f);
  }

  private selectFinding(f: Finding | null): void {
    this.state.finding = f ? findingId(f) : "";
    this.findingsList.set(this.store.findings, this.state.finding, this.layerOrder());
    this.findingsList.reveal();
    this.views[0].setSelectedFinding(this.state.finding);
    const switchRole = f !== null && f.role !== null && f.role !== this.state.role && this.currentRun()?.roles.includes(f.role) === true;
    const role = switchRole && f?.role ? f.role : this.state.role;
    // An open panel follows the finding: its layer and step, or it closes when no cell is the finding's.
    const moved = f !== null && this.detail.isOpen ? this.moveDetailTo(f, role) : false;
    if (switchRole) {
      // The finding is about another role: show that role's heatmap (the panel opens there with
      // it, on its row), then outline it.
      this.revealRow = moved;
      this.state.role = role;
      this.toolbar.roleSelect.value = role;
      void this.loadHeatmaps();
      return;
    }
    if (moved) this.showSelection();
    this.applyHighlight(true);
    // After the outlines' scroll: the row the panel is about shows, on its own (outside its folded block).
    if (moved) this.showRow();
    this.persist();
  }

  /**
   * Points the selection at the cell of `f` an open panel should show in `role`'s heatmap;
   * closes the panel when there is none. True when the selection moved to a cell.
   */
  private moveDetailTo(f: Finding, role: string): boolean {
    const layers = [...(this.currentRun()?.layers ?? [])].filter((l) => role in l.roles).sort((a, b) => a.order - b.order).map((l) => l.name);
    const { layer, step } = this.state;
    const cell = findingCell(f, role, layers, layer && step !== null ? { layer, step } : null);
    if (!cell) {
      this.closeDetail(false);
      return false;
    }
    this.state.layer = cell.layer;
    this.state.step = cell.step;
    return true;
  }

  /** Shows the selected cell in the heatmaps and the panel (its row fetched if not here yet). */
  private showSelection(): void {
    const { layer, step } = this.state;
    if (!layer || step === null) return;
    for (const v of this.views) v.setSelection({ layer, step });
    this.openDetail();
    this.scheduleRowFetch();
  }

  /** Outlines the selected finding's cells; with `reveal`, makes sure they are on screen. */
  private applyHighlight(reveal: boolean): void {
    const f = this.store.findings.find((x) => findingId(x) === this.state.finding);
    const view = this.views[0];
    const h = view.data;
    if (!f || !h) {
      view.setHighlight(null);
      view.setSelectedFinding("");
      return;
    }
    const spans = findingSpans(f, this.state.role);
    const shown = sourceLayers(h).filter((l) => spans.has(l));
    if (reveal && (shown.length > 0 || this.onTrack(f))) this.unhide(f, shown);
    view.setHighlight({ spans, note: f.severity === mildestSeverity() });
    view.setSelectedFinding(this.state.finding);
    if (reveal && shown.length > 0) view.scrollToLayer(shown[0]);
    if (reveal && (shown.length > 0 || this.onTrack(f))) {
      const rect = view.root.getBoundingClientRect();
      if (rect.top < 0 || rect.top > window.innerHeight - 80) view.root.scrollIntoView({ block: "start", behavior: "smooth" });
    }
  }

  /** Whether a finding is about a run-level scalar the track shows. */
  private onTrack(f: Finding): boolean {
    return (this.tracks[0]?.series ?? []).some((s) => f.covers?.has(s.tag));
  }

  /** Clears a layer filter or zoom that would hide a finding's cells. */
  private unhide(f: Finding, shown: string[]): void {
    if (this.state.filter && shown.length > 0 && !orderRows(shown, this.state.filter, "model").length) {
      this.toolbar.filterInput.value = "";
      this.reorder({ filter: "" });
    }
    const z = this.state.zoom;
    if (z && (f.last_step < z[0] || f.first_step > z[1])) this.setZoom(null);
  }

  // ---- live data --------------------------------------------------------------------

  /**
   * Fetches the run list and, when anything changed (or `force`), the current
   * heatmaps, findings and detail, keeping run, role, zoom and selection.
   */
  async refresh(force: boolean): Promise<void> {
    if (!force && Date.now() - this.lastRefresh < MIN_REFRESH_GAP_MS) return;
    this.lastRefresh = Date.now();
    if (this.store.runs.length === 0) {
      await this.loadAll();
      return;
    }
    this.toolbar.setReloading(true);
    try {
      await this.reloadRuns(force);
    } finally {
      this.toolbar.setReloading(false);
    }
  }

  private async reloadRuns(force: boolean): Promise<void> {
    let changed: "data" | "badges" | null;
    try {
      changed = await this.store.loadRuns();
    } catch (e) {
      setMessage(this.globalMessage, "error", [`Could not refresh: ${errorText(e)}`]);
      return;
    }
    setMessage(this.globalMessage, null);
    this.showConfigProblems();
    if (!force && changed === "badges" && !this.waiting) {
      // Only a badge's "so far" came or went: the runs' data, and so the heatmaps, are as they were.
      this.drawRunPickers();
      return;
    }
    // While waiting for a run, each answer is looked at: the wait may be over, or overdue.
    if (!force && changed === null && !this.waiting) return;
    if (this.showView()) {
      this.store.invalidate();
      await this.loadSweep();
      return;
    }
    this.store.invalidate();
    this.drawRunPickers();
    await this.loadRun();
  }

  // ---- hooks for the browser tests and the benchmark ---------------------------------

  /**
   * Client coordinates of a cell's centre in the main heatmap (null when not shown).
   * The step may be a decimal string: a test names steps past 2^53 exactly that way.
   */
  cellCenter(layer: string, step: Step | number | string, view: 0 | 1 = 0): { x: number; y: number } | null {
    const s = typeof step === "bigint" ? step : parseStep(step);
    return s === null ? null : this.views[view].cellCenter(layer, s);
  }

  /** Rebuilds and repaints the heatmaps from the loaded data, synchronously. */
  redraw(): void {
    this.drawHeatmaps();
  }

  /** Zooms to a window of whole steps (numbers or decimal strings; null: every step), as a brush would. */
  zoomTo(range: [number | string, number | string] | null): void {
    const lo = range ? parseStep(range[0]) : null;
    const hi = range ? parseStep(range[1]) : null;
    this.setZoom(lo !== null && hi !== null && hi > lo ? [lo, hi] : null);
  }

  /** A view's plot in client coordinates: where its first column may start and how wide it is (null: not drawn). */
  plotBox(view: 0 | 1 = 0): { left: number; width: number } | null {
    const v = this.views[view];
    const g = v.scene.geo;
    return g && v.data ? { left: v.port.getBoundingClientRect().left + g.labelW, width: g.plotW } : null;
  }

  /** The steps a view's axis names, as decimal strings. */
  axisSteps(view: 0 | 1 = 0): string[] {
    return this.views[view].axisSteps();
  }

  /** The cells inside the selected finding's outlines in a view, each with its status. */
  highlightCells(view: 0 | 1 = 0): { layer: string; step: string; status: string }[] {
    return this.views[view].highlightCells();
  }

  /** The names of the sweep's lines shown, top to bottom. */
  sweepNames(): string[] {
    return this.sweepView.shownNames();
  }

  /** The names of the rows a view draws, top to bottom (a folded block by its name). */
  rowAt(clientY: number, view: 0 | 1 = 0): { layer: string; cellH: number } | null {
    return this.views[view].rowAtY(clientY);
  }

  rowNames(view: 0 | 1 = 0): string[] {
    const v = this.views[view];
    const h = v.data;
    return h ? v.scene.order.map((i) => h.layers[i]) : [];
  }

  get viewState(): ViewState {
    return { ...this.state };
  }
}
