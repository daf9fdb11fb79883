// Entry point: TensorBoard's plugin_entry.html imports this module and calls render().

import { ApiError, fetchFindings, fetchHeatmap, fetchRuns, METRICS, orderedRoles } from "./api";
import type { Finding, Heatmap, RunInfo } from "./api";
import { mergeDomains, statusName } from "./colors";
import type { Domain } from "./colors";
import { DetailPanel } from "./detail";
import { button, cssVar, download, el, setOptions } from "./dom";
import { findingId, findingSpans, findingsCsv, findingsJson, safeFileName, sortFindings } from "./findings";
import { formatStep, humanize } from "./format";
import { DEFAULT_STATE, fromFragment, KEYS, toFragment, encodeState, decodeState } from "./hash";
import type { ViewState } from "./hash";
import { heatmapDomain, HeatmapView } from "./heatmap";
import { connectHost, hostDarkMode, hostStorage, watchHostDarkMode } from "./host";
import type { StepRange } from "./layout";
import { buildLegend, drawLegend } from "./legend";
import { FindingsList, RunList, worstRun } from "./panels";
import { orderRows, rowSeverity, SORT_KEYS } from "./rows";
import { injectStyles } from "./styles";
import { Tooltip } from "./tooltip";

const POLL_MS = 30_000;
// A host reload and a poll landing together should fetch once.
const MIN_REFRESH_GAP_MS = 3_000;
const HOST_PREFIX = "p.gradhealth.";

type MessageKind = "info" | "error" | "loading";

function code(text: string): HTMLElement {
  return el("code", "", text);
}

function paragraph(...parts: (string | Node)[]): HTMLParagraphElement {
  const p = el("p");
  p.append(...parts);
  return p;
}

function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  return `Unexpected error: ${e instanceof Error ? e.message : String(e)}`;
}

function snippet(text: string): HTMLPreElement {
  return el("pre", "", text);
}

export function howToLog(): HTMLElement[] {
  return [
    paragraph(
      "Gradient Health reads per-layer gradient, weight and activation statistics. ",
      "Log them with one of the integrations (exact statistics, cheap; see ",
      code("docs/integrations_torch.md"),
      " and ",
      code("docs/integrations_keras_tf.md"),
      " in the gradhealth sources):",
    ),
    paragraph("PyTorch: ", code("gradhealth_plugin.torch.watch")),
    snippet('from gradhealth_plugin.torch import watch\nwatch(model, "runs/exp1", optimizer=optimizer, every_n_steps=50)'),
    paragraph("Keras: ", code("gradhealth_plugin.keras.GradientHealthCallback")),
    snippet('from gradhealth_plugin.keras import GradientHealthCallback\nmodel.fit(x, y, callbacks=[GradientHealthCallback("runs/exp1", probe_data=(x[:64], y[:64]))])'),
    paragraph("TensorFlow custom loop: ", code("gradhealth_plugin.tf")),
    snippet('from gradhealth_plugin.tf import GradientHealthLogger\ngh = GradientHealthLogger("runs/exp1", every_n_steps=50)\nwith gh.step(optimizer.iterations, grads, model.trainable_variables):\n    optimizer.apply_gradients(zip(grads, model.trainable_variables))'),
    paragraph(
      "Plain histograms work too: ",
      code("tf.summary.histogram(\"gradients/dense/kernel\", g, step=step)"),
      ", Keras' ",
      code("TensorBoard(histogram_freq=1)"),
      " (weights only), or PyTorch's ",
      code("SummaryWriter.add_histogram(name + \".grad\", p.grad, step)"),
      ".",
    ),
  ];
}

function noRolesMessage(run: RunInfo): HTMLElement[] {
  const out: HTMLElement[] = [
    paragraph("Run ", code(run.run), " has no gradient, weight or activation data that matches a layer."),
  ];
  if (run.unclassified.length > 0) {
    const shown = run.unclassified.slice(0, 10).join(", ");
    const more = run.unclassified.length > 10 ? ` and ${run.unclassified.length - 10} more` : "";
    out.push(paragraph(`Histogram tags that could not be assigned a role: ${shown}${more}.`));
  }
  out.push(...howToLog());
  return out;
}

/** Steps at which a heatmap row has data. */
function rowSteps(h: Heatmap, layer: string): number[] {
  const i = h.layers.indexOf(layer);
  if (i < 0) return [];
  return h.steps.filter((_, j) => statusName(h.status[i][j], h.status_names) !== "no_data");
}

class App {
  private state: ViewState = { ...DEFAULT_STATE };
  private runs: RunInfo[] = [];
  private runsSignature = "";
  private heatmaps: [Heatmap | null, Heatmap | null] = [null, null];
  private findings: Finding[] = [];
  private findingsRun = "";
  private readonly tooltip = new Tooltip();
  private readonly views: [HeatmapView, HeatmapView];
  private readonly detail: DetailPanel;
  private readonly runList: RunList;
  private readonly findingsList: FindingsList;
  private readonly roleSelect = el("select");
  private readonly metricSelect = el("select");
  private readonly compareSelect = el("select");
  private readonly sortSelect = el("select");
  private readonly filterInput = el("input");
  private readonly resetZoom: HTMLButtonElement;
  private readonly reloadButton: HTMLButtonElement;
  private readonly pngButton: HTMLButtonElement;
  private readonly summary = el("span", "gh-summary");
  /** What TensorBoard's sampling dropped in the run shown, in the server's words. */
  private readonly samplingNote = el("div", "gh-sampling-note");
  // Everything in the toolbar but Reload is about a run; hidden while there is none.
  private readonly controls = el("div", "gh-controls");
  // Messages about the whole log directory go above everything; about one run, in the centre.
  private readonly globalMessage = el("div", "gh-message");
  private readonly message = el("div", "gh-message");
  private readonly main = el("div", "gh-main");
  private readonly legendSlot = el("div");
  private readonly hint = el("div", "gh-hint");
  private readonly heatmapBox = el("div", "gh-heatmaps");
  // Only the newest request may update the page; slower, older answers are dropped.
  private requestId = 0;
  private lastRefresh = 0;
  private syncingScroll = false;

  constructor(body: HTMLElement) {
    const app = el("div", "gh-app");
    const toolbar = el("div", "gh-toolbar");
    const picker = (text: string, control: HTMLElement): HTMLLabelElement => {
      const label = el("label", "", text);
      label.append(control);
      return label;
    };
    this.filterInput.type = "search";
    this.filterInput.placeholder = "Filter layers";
    this.filterInput.setAttribute("aria-label", "Filter layers by name");
    setOptions(this.sortSelect, SORT_KEYS.map((k) => ({ value: k, text: k === "model" ? "model order" : k === "severity" ? "worst first" : "name" })), ["model"]);
    setOptions(this.metricSelect, METRICS.map((m) => ({ value: m, text: m === "health" ? "health (status + score)" : humanize(m) })), ["health"]);
    this.resetZoom = button("Reset zoom", () => this.setZoom(null), "gh-button", "Show every step (or double-click the heatmap)");
    this.reloadButton = button("\u21bb Reload", () => void this.refresh(true), "gh-button", "Fetch new steps now");
    this.pngButton = button("PNG", () => this.exportPng(), "gh-button", "Download the heatmap as a PNG image");
    this.controls.append(
      picker("Role", this.roleSelect),
      picker("Metric", this.metricSelect),
      picker("Layers", this.filterInput),
      picker("Sort", this.sortSelect),
      picker("Compare", this.compareSelect),
      this.resetZoom,
      el("span", "gh-spacer"),
      this.pngButton,
    );
    this.controls.hidden = true;
    toolbar.append(this.controls, this.reloadButton);
    this.resetZoom.disabled = true;

    const scrolled = (from: 0 | 1) => (top: number): void => {
      if (this.syncingScroll || !this.state.compare) return;
      this.syncingScroll = true;
      this.views[1 - from].scrollTop = top;
      this.syncingScroll = false;
    };
    const makeView = (index: 0 | 1): HeatmapView =>
      new HeatmapView(
        this.tooltip,
        {
          select: (layer, step) => this.selectCell(layer, step, index),
          zoom: (range) => this.setZoom(range),
          scrolled: scrolled(index),
        },
        () => (this.state.compare ? (this.heatmaps[index]?.run ?? "") : ""),
      );
    this.views = [makeView(0), makeView(1)];
    this.views[1].root.hidden = true;
    this.heatmapBox.append(this.views[0].root, this.views[1].root);
    this.hint.textContent = "Hover a cell for its numbers; click it for the layer's histogram and history; drag across steps to zoom, double-click to zoom out.";

    this.detail = new DetailPanel({
      step: (step) => this.selectCell(this.state.layer, step, 0),
      close: () => this.closeDetail(),
    });
    this.runList = new RunList((run) => this.selectRun(run));
    this.findingsList = new FindingsList({
      select: (f) => this.selectFinding(f),
      exportCsv: () => this.exportFindings("csv"),
      exportJson: () => this.exportFindings("json"),
    });

    const center = el("div", "gh-center");
    const head = el("div", "gh-center-head");
    head.append(this.legendSlot, this.summary);
    center.append(this.message, head, this.samplingNote, this.hint, this.heatmapBox, this.detail.root);
    this.samplingNote.hidden = true;
    this.main.append(this.runList.root, center, this.findingsList.root);
    this.main.hidden = true;
    app.append(toolbar, this.globalMessage, this.main);
    body.replaceChildren(app, this.tooltip.root);

    this.roleSelect.addEventListener("change", () => {
      this.state.role = this.roleSelect.value;
      void this.loadHeatmaps();
    });
    this.metricSelect.addEventListener("change", () => {
      this.state.metric = this.metricSelect.value;
      void this.loadHeatmaps();
    });
    this.compareSelect.addEventListener("change", () => {
      this.state.compare = this.compareSelect.value;
      void this.loadHeatmaps();
    });
    this.sortSelect.addEventListener("change", () => {
      this.state.sort = this.sortSelect.value as ViewState["sort"];
      this.applyOrder();
    });
    let filterTimer = 0;
    this.filterInput.addEventListener("input", () => {
      clearTimeout(filterTimer);
      filterTimer = window.setTimeout(() => {
        this.state.filter = this.filterInput.value;
        this.applyOrder();
      }, 120);
    });

    let pending = 0;
    window.addEventListener("resize", () => {
      cancelAnimationFrame(pending);
      pending = requestAnimationFrame(() => {
        for (const v of this.views) v.layout();
        this.detail.relayout();
      });
    });
    window.addEventListener("hashchange", () => this.onHashChange());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible" && Date.now() - this.lastRefresh > POLL_MS) void this.refresh(false);
    });
  }

  // ---- state and URL ----------------------------------------------------------------

  private readState(): ViewState {
    if (location.hash.length > 1) return fromFragment(location.hash);
    const storage = hostStorage();
    if (storage) {
      const p: Record<string, string> = {};
      for (const k of KEYS) {
        const v = storage.getString(HOST_PREFIX + k);
        if (typeof v === "string" && v !== "") p[k] = v;
      }
      return decodeState(p);
    }
    return { ...DEFAULT_STATE };
  }

  /** Writes the state into this page's URL and, inside TensorBoard, into TensorBoard's own URL. */
  private persist(): void {
    const fragment = toFragment(this.state);
    try {
      // Absolute: the page's <base href> would resolve a bare "#..." to another path.
      history.replaceState(history.state, "", `${location.pathname}${location.search}${fragment ? `#${fragment}` : ""}`);
    } catch {
      // Sandboxed documents may refuse; the host URL below still works.
    }
    const storage = hostStorage();
    if (!storage) return;
    const encoded = encodeState(this.state) as Record<string, string | undefined>;
    try {
      for (const k of KEYS) {
        storage.setString(HOST_PREFIX + k, encoded[k] ?? "", { defaultValue: "", useLocationReplace: true });
      }
    } catch {
      // An older TensorBoard without this storage API: the iframe's own URL keeps the state.
    }
  }

  private onHashChange(): void {
    const next = fromFragment(location.hash);
    if (toFragment(next) === toFragment(this.state)) return;
    const runChanged = next.run !== this.state.run;
    this.state = next;
    if (runChanged) void this.loadRun();
    else void this.loadHeatmaps();
  }

  // ---- loading ----------------------------------------------------------------------

  private setMessage(kind: MessageKind | null, content: (string | Node)[] = [], target = this.message): void {
    target.hidden = kind === null;
    target.className = `gh-message gh-${kind ?? "none"}`;
    target.replaceChildren(...content);
  }

  async start(): Promise<void> {
    this.state = this.readState();
    const dark = hostDarkMode();
    if (dark !== null) document.documentElement.dataset.theme = dark ? "dark" : "light";
    watchHostDarkMode((d) => {
      document.documentElement.dataset.theme = d ? "dark" : "light";
      for (const v of this.views) v.layout();
      this.detail.relayout();
    });
    let hostReloads = 0;
    connectHost(() => {
      // Counted on the page so the browser tests can tell a host reload from a poll.
      document.documentElement.dataset.ghHostReloads = String(++hostReloads);
      void this.refresh(false);
    });
    window.setInterval(() => {
      // A zero-width window is this tab's iframe hidden behind another TensorBoard tab.
      if (document.visibilityState === "visible" && window.innerWidth > 0) void this.refresh(false);
    }, POLL_MS);
    await this.loadAll();
  }

  /** First load, and reload while there is nothing to show yet. */
  private async loadAll(): Promise<void> {
    this.setMessage("loading", ["Loading runs\u2026"], this.globalMessage);
    this.lastRefresh = Date.now();
    try {
      this.setRuns((await fetchRuns()).runs);
    } catch (e) {
      this.main.hidden = true;
      this.controls.hidden = true;
      this.setMessage("error", [errorText(e), " ", button("Retry", () => void this.loadAll())], this.globalMessage);
      return;
    }
    if (this.runs.length === 0) {
      const box = el("div", "gh-empty");
      box.append(el("h2", "", "No gradient health data yet"), ...howToLog());
      this.setMessage("info", [box], this.globalMessage);
      this.main.hidden = true;
      this.controls.hidden = true;
      return;
    }
    this.setMessage(null, [], this.globalMessage);
    this.main.hidden = false;
    this.controls.hidden = false;
    await this.loadRun();
  }

  private setRuns(runs: RunInfo[]): void {
    this.runs = runs;
    this.runsSignature = JSON.stringify(runs.map((r) => [r.run, r.last_step, r.steps_kept, r.finding_counts, r.roles]));
  }

  private currentRun(): RunInfo | undefined {
    return this.runs.find((r) => r.run === this.state.run);
  }

  private drawRunPickers(): void {
    this.runList.set(this.runs, this.state.run, this.state.compare);
    setOptions(
      this.compareSelect,
      [{ value: "", text: "no other run" }, ...this.runs.filter((r) => r.run !== this.state.run).map((r) => ({ value: r.run, text: r.run }))],
      [this.state.compare],
    );
    this.compareSelect.disabled = this.runs.length < 2;
    this.state.compare = this.compareSelect.value;
  }

  private selectRun(run: string): void {
    if (run === this.state.run) return;
    this.state = { ...this.state, run, compare: this.state.compare === run ? "" : this.state.compare, layer: "", step: null, finding: "", zoom: null };
    void this.loadRun();
  }

  /** Loads the selected run: its roles, heatmap(s) and findings. */
  private async loadRun(): Promise<void> {
    if (!this.currentRun()) this.state.run = worstRun(this.runs)?.run ?? "";
    const run = this.currentRun();
    if (!run) return;
    this.drawRunPickers();
    const roles = orderedRoles(run);
    this.state.role = setOptions(this.roleSelect, roles.map((r) => ({ value: r, text: r })), [this.state.role, "gradient"]);
    this.metricSelect.value = this.state.metric;
    this.sortSelect.value = this.state.sort;
    this.filterInput.value = this.state.filter;
    await Promise.all([this.loadFindings(), this.loadHeatmaps()]);
  }

  private async loadFindings(): Promise<void> {
    const run = this.state.run;
    this.findingsList.loading();
    try {
      const f = await fetchFindings(run);
      if (run !== this.state.run) return;
      this.findings = sortFindings(f.findings);
      this.findingsRun = run;
    } catch (e) {
      if (run !== this.state.run) return;
      this.findings = [];
      this.findingsRun = run;
      this.findingsList.error(errorText(e));
      return;
    }
    if (!this.findings.some((f) => findingId(f) === this.state.finding)) this.state.finding = "";
    this.findingsList.set(this.findings, this.state.finding);
    this.applyHighlight(false);
    if (this.detail.isOpen) this.openDetail();
  }

  private async loadHeatmaps(): Promise<void> {
    const run = this.currentRun();
    const id = ++this.requestId;
    if (!run) return;
    this.samplingNote.hidden = run.sampling === null;
    this.samplingNote.textContent = run.sampling ? run.sampling.message : "";
    this.drawRunPickers();
    const { role, metric, compare } = this.state;
    if (!role) {
      this.summary.textContent = "";
      this.showHeatmaps(false);
      this.setMessage("info", noRolesMessage(run));
      this.persist();
      return;
    }
    this.heatmapBox.classList.add("gh-stale");
    this.summary.textContent = "Loading\u2026";
    let primary: Heatmap;
    let second: Heatmap | null = null;
    let secondError = "";
    try {
      const p = fetchHeatmap(run.run, role, metric);
      const c = compare ? fetchHeatmap(compare, role, metric).catch((e: unknown) => {
        secondError = errorText(e);
        return null;
      }) : Promise.resolve(null);
      [primary, second] = await Promise.all([p, c]);
    } catch (e) {
      if (id !== this.requestId) return;
      this.heatmapBox.classList.remove("gh-stale");
      this.summary.textContent = "";
      this.showHeatmaps(false);
      this.setMessage("error", [errorText(e)]);
      return;
    }
    if (id !== this.requestId) return;
    this.heatmapBox.classList.remove("gh-stale");
    this.heatmaps = [primary, second];
    this.summary.textContent = [
      `${primary.layers.length} layers`,
      `${primary.steps.length} steps`,
      primary.steps.length > 0 ? `last ${formatStep(primary.steps[primary.steps.length - 1])}` : "",
      primary.quality && primary.metric !== "health" ? `${primary.quality} values` : "",
    ]
      .filter(Boolean)
      .join(" \u00b7 ");
    if (primary.layers.length === 0 || primary.steps.length === 0) {
      this.showHeatmaps(false);
      this.setMessage("info", [paragraph("No ", code(role), " data for run ", code(run.run), " yet."), ...howToLog()]);
      this.persist();
      return;
    }
    this.setMessage(secondError ? "error" : null, secondError ? [`Compared run: ${secondError}`] : []);
    this.showHeatmaps(true);
    this.drawHeatmaps();
    if (this.state.layer && this.state.step !== null && primary.layers.includes(this.state.layer)) {
      this.openDetail();
    } else {
      this.closeDetail(false);
    }
    this.applyHighlight(false);
    this.persist();
  }

  private showHeatmaps(visible: boolean): void {
    this.heatmapBox.hidden = !visible;
    this.legendSlot.hidden = !visible;
    this.hint.hidden = !visible;
    this.pngButton.disabled = !visible;
    if (!visible) {
      for (const v of this.views) v.clear();
      this.detail.close();
    }
  }

  private order(h: Heatmap): number[] {
    return orderRows(h.layers, this.state.filter, this.state.sort, this.state.sort === "severity" ? rowSeverity(h) : undefined);
  }

  private drawHeatmaps(): void {
    const [a, b] = this.heatmaps;
    if (!a) return;
    const da = heatmapDomain(a);
    const db = b ? heatmapDomain(b) : null;
    const shared: Domain | null = b ? mergeDomains(da, db) : da;
    this.legendSlot.replaceChildren(buildLegend(a.metric, a.scale, shared, b !== null));
    const zoom = this.zoomRange();
    this.views[1].root.hidden = b === null;
    this.views[0].setCaption(b ? a.run : "");
    // Layout reads the container width, so the compare view is shown first.
    this.views[0].setData(a, shared, this.order(a), zoom);
    if (b) {
      this.views[1].setCaption(b.run);
      this.views[1].setData(b, shared, this.order(b), zoom);
    } else {
      this.views[1].clear();
    }
    const sel = this.state.layer && this.state.step !== null ? { layer: this.state.layer, step: this.state.step } : null;
    for (const v of this.views) v.setSelection(sel);
    this.resetZoom.disabled = !this.state.zoom;
    document.documentElement.dataset.ghDrawn = String(Number(document.documentElement.dataset.ghDrawn ?? "0") + 1);
  }

  private applyOrder(): void {
    this.views.forEach((v, i) => {
      const h = this.heatmaps[i];
      if (h && v.data) v.setOrder(this.order(h));
    });
    this.persist();
  }

  private zoomRange(): StepRange | null {
    return this.state.zoom ? { lo: this.state.zoom[0], hi: this.state.zoom[1] } : null;
  }

  private setZoom(range: StepRange | null): void {
    this.state.zoom = range ? [Math.round(range.lo * 100) / 100, Math.round(range.hi * 100) / 100] : null;
    for (const v of this.views) v.setZoom(this.zoomRange());
    this.resetZoom.disabled = !this.state.zoom;
    this.persist();
  }

  // ---- selection --------------------------------------------------------------------

  private selectCell(layer: string, step: number, view: 0 | 1): void {
    if (view === 1 && this.heatmaps[1]) {
      // A click in the compared run opens that run.
      const run = this.heatmaps[1].run;
      this.state = { ...this.state, run, compare: this.state.run, layer, step, finding: "" };
      void this.loadRun();
      return;
    }
    this.state.layer = layer;
    this.state.step = step;
    for (const v of this.views) v.setSelection({ layer, step });
    this.openDetail();
    this.persist();
  }

  private openDetail(): void {
    const h = this.heatmaps[0];
    const { layer, step } = this.state;
    if (!h || !layer || step === null) return;
    const row = h.layers.indexOf(layer);
    const col = h.steps.indexOf(step);
    this.detail.open({
      run: h.run,
      layer,
      role: h.role,
      step,
      steps: rowSteps(h, layer),
      metric: h.metric,
      rule: row >= 0 && col >= 0 ? h.rules[row][col] : null,
      findings: this.findingsRun === h.run ? this.findings : [],
    });
  }

  private closeDetail(persist = true): void {
    this.detail.close();
    this.state.layer = "";
    this.state.step = null;
    for (const v of this.views) v.setSelection(null);
    if (persist) this.persist();
  }

  private selectFinding(f: Finding | null): void {
    this.state.finding = f ? findingId(f) : "";
    this.findingsList.set(this.findings, this.state.finding);
    if (f && f.role && f.role !== this.state.role && this.currentRun()?.roles.includes(f.role)) {
      // The finding is about another role: show that role's heatmap, then outline it.
      this.state.role = f.role;
      this.roleSelect.value = f.role;
      void this.loadHeatmaps();
      return;
    }
    this.applyHighlight(true);
    this.persist();
  }

  /** Outlines the selected finding's cells; with `reveal`, makes sure they are on screen. */
  private applyHighlight(reveal: boolean): void {
    const f = this.findings.find((x) => findingId(x) === this.state.finding);
    const view = this.views[0];
    if (!f || !view.data) {
      view.setHighlight(null);
      return;
    }
    const spans = findingSpans(f);
    const h = view.data;
    const shown = f.layers.filter((l) => h.layers.includes(l));
    if (reveal && shown.length > 0) {
      if (this.state.filter && !orderRows(shown, this.state.filter, "model").length) {
        this.state.filter = "";
        this.filterInput.value = "";
        this.applyOrder();
      }
      const z = this.state.zoom;
      if (z && (f.last_step < z[0] || f.first_step > z[1])) this.setZoom(null);
    }
    view.setHighlight(spans);
    if (reveal && shown.length > 0) {
      view.scrollToLayer(shown[0]);
      const rect = view.root.getBoundingClientRect();
      if (rect.top < 0 || rect.top > window.innerHeight - 80) view.root.scrollIntoView({ block: "start", behavior: "smooth" });
    }
  }

  // ---- live data --------------------------------------------------------------------

  /**
   * Fetches the run list and, when anything changed (or `force`), the current
   * heatmaps, findings and detail, keeping run, role, zoom and selection.
   */
  async refresh(force: boolean): Promise<void> {
    if (!force && Date.now() - this.lastRefresh < MIN_REFRESH_GAP_MS) return;
    this.lastRefresh = Date.now();
    if (this.runs.length === 0) {
      await this.loadAll();
      return;
    }
    this.reloadButton.disabled = true;
    try {
      const before = this.runsSignature;
      let runs: RunInfo[];
      try {
        runs = (await fetchRuns()).runs;
      } catch (e) {
        this.setMessage("error", [`Could not refresh: ${errorText(e)}`], this.globalMessage);
        return;
      }
      this.setMessage(null, [], this.globalMessage);
      this.setRuns(runs);
      if (!force && before === this.runsSignature) return;
      if (!this.currentRun()) {
        this.state = { ...this.state, run: worstRun(runs)?.run ?? "", layer: "", step: null, finding: "" };
      }
      this.detail.invalidate();
      this.drawRunPickers();
      await this.loadRun();
    } finally {
      this.reloadButton.disabled = false;
    }
  }

  // ---- export -----------------------------------------------------------------------

  private exportPng(): void {
    const { run, role, metric } = this.state;
    const canvases = this.views
      .map((v, i) => (v.data ? v.toCanvas(`${this.heatmaps[i]?.run ?? ""} \u00b7 ${role} \u00b7 ${humanize(metric)}`) : null))
      .filter((c): c is HTMLCanvasElement => c !== null);
    if (canvases.length === 0) return;
    const gap = 16;
    const legendH = 28;
    const out = document.createElement("canvas");
    out.width = Math.max(360, canvases.reduce((w, c) => w + c.width, 0) + gap * (canvases.length - 1));
    out.height = Math.max(...canvases.map((c) => c.height)) + legendH;
    const ctx = out.getContext("2d");
    if (!ctx) return;
    ctx.fillStyle = cssVar("--gh-bg", "#ffffff");
    ctx.fillRect(0, 0, out.width, out.height);
    let x = 0;
    for (const c of canvases) {
      ctx.drawImage(c, x, 0);
      x += c.width + gap;
    }
    const a = this.heatmaps[0];
    if (a) drawLegend(ctx, 8, out.height - legendH + 6, a.metric, this.views[0].colorDomain, cssVar("--gh-fg", "#212121"));
    out.toBlob((blob) => {
      if (blob) download(blob, `${safeFileName("gradhealth", run, role, metric)}.png`);
    }, "image/png");
  }

  private exportFindings(kind: "csv" | "json"): void {
    const run = this.findingsRun;
    const name = safeFileName("gradhealth-findings", run);
    if (kind === "csv") {
      download(new Blob([findingsCsv(this.findings)], { type: "text/csv;charset=utf-8" }), `${name}.csv`);
    } else {
      download(new Blob([findingsJson(run, this.findings)], { type: "application/json" }), `${name}.json`);
    }
  }

  // ---- hooks for the browser tests and the benchmark ---------------------------------

  /** Client coordinates of a cell's centre in the main heatmap (null when not shown). */
  cellCenter(layer: string, step: number, view: 0 | 1 = 0): { x: number; y: number } | null {
    return this.views[view].cellCenter(layer, step);
  }

  /** Rebuilds and repaints the heatmaps from the loaded data, synchronously. */
  redraw(): void {
    this.drawHeatmaps();
  }

  /** Zooms to a step window (null: every step), as a brush would. */
  zoomTo(range: [number, number] | null): void {
    this.setZoom(range ? { lo: range[0], hi: range[1] } : null);
  }

  get viewState(): ViewState {
    return { ...this.state };
  }
}

declare global {
  interface Window {
    __gradhealth?: App;
  }
}

/** Builds the Gradient Health tab into document.body. */
export function render(): void {
  injectStyles(document);
  const app = new App(document.body);
  window.__gradhealth = app;
  void app.start();
}
