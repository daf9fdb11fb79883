// Entry point: TensorBoard's plugin_entry.html imports this module and calls render().

import { ApiError, fetchHeatmap, fetchRuns, METRICS, orderedRoles } from "./api";
import type { Heatmap, RunInfo } from "./api";
import { el, setOptions } from "./dom";
import { formatStep } from "./format";
import { heatmapDomain, HeatmapView } from "./heatmap";
import { buildLegend } from "./legend";
import { injectStyles } from "./styles";

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

function noRunsMessage(): HTMLElement[] {
  return [
    paragraph("No per-layer histograms found in the log directory."),
    paragraph(
      "Gradient Health reads weight and gradient histograms. Log them every few steps: ",
      "in TensorFlow with ",
      code("tf.summary.histogram(name, values, step=step)"),
      " (or ",
      code("tf.keras.callbacks.TensorBoard(histogram_freq=1)"),
      "), in PyTorch with ",
      code("SummaryWriter.add_histogram(name, tensor, step)"),
      " for each parameter and its ",
      code(".grad"),
      ".",
    ),
  ];
}

function noRolesMessage(run: RunInfo): HTMLElement[] {
  const out: HTMLElement[] = [
    paragraph("Run ", code(run.run), " has no weight or gradient histograms that match a layer."),
  ];
  if (run.unclassified.length > 0) {
    const shown = run.unclassified.slice(0, 10).join(", ");
    const more = run.unclassified.length > 10 ? ` and ${run.unclassified.length - 10} more` : "";
    out.push(paragraph(`Histogram tags that could not be assigned a role: ${shown}${more}.`));
  }
  out.push(...noRunsMessage().slice(1));
  return out;
}

class App {
  private readonly runSelect = el("select");
  private readonly roleSelect = el("select");
  private readonly metricSelect = el("select");
  private readonly info = el("span", "gh-summary");
  private readonly message = el("div", "gh-message");
  private readonly legendSlot = el("div");
  private readonly tooltip = el("div", "gh-tooltip");
  private readonly view = new HeatmapView(this.tooltip);
  private runs: RunInfo[] = [];
  // Only the newest request may update the page; slower, older answers are dropped.
  private requestId = 0;

  constructor(body: HTMLElement) {
    const app = el("div", "gh-app");
    const toolbar = el("div", "gh-toolbar");
    const picker = (text: string, select: HTMLSelectElement): HTMLLabelElement => {
      const label = el("label", "", text);
      label.append(select);
      return label;
    };
    toolbar.append(
      picker("Run", this.runSelect),
      picker("Role", this.roleSelect),
      picker("Metric", this.metricSelect),
      this.info,
    );
    this.tooltip.hidden = true;
    this.tooltip.setAttribute("role", "tooltip");
    app.append(toolbar, this.message, this.legendSlot, this.view.root);
    body.replaceChildren(app, this.tooltip);

    setOptions(
      this.metricSelect,
      METRICS.map((m) => ({ value: m, text: m })),
      ["health"],
    );
    this.runSelect.addEventListener("change", () => this.onRunChange());
    this.roleSelect.addEventListener("change", () => void this.load());
    this.metricSelect.addEventListener("change", () => void this.load());

    let pending = 0;
    window.addEventListener("resize", () => {
      cancelAnimationFrame(pending);
      pending = requestAnimationFrame(() => this.view.draw());
    });
  }

  private setMessage(kind: MessageKind | null, content: (string | Node)[] = []): void {
    this.message.hidden = kind === null;
    this.message.className = `gh-message gh-${kind ?? "none"}`;
    this.message.replaceChildren(...content);
  }

  private showHeatmap(visible: boolean): void {
    this.view.root.hidden = !visible;
    this.legendSlot.hidden = !visible;
    if (!visible) this.view.clear();
  }

  async start(): Promise<void> {
    this.showHeatmap(false);
    this.setMessage("loading", ["Loading runs\u2026"]);
    try {
      this.runs = (await fetchRuns()).runs;
    } catch (e) {
      this.disablePickers();
      this.setMessage("error", [errorText(e)]);
      return;
    }
    if (this.runs.length === 0) {
      this.disablePickers();
      this.setMessage("info", noRunsMessage());
      return;
    }
    setOptions(
      this.runSelect,
      this.runs.map((r) => ({ value: r.run, text: r.run })),
      [],
    );
    this.onRunChange();
  }

  private disablePickers(): void {
    for (const select of [this.runSelect, this.roleSelect, this.metricSelect]) select.disabled = true;
  }

  private currentRun(): RunInfo | undefined {
    return this.runs.find((r) => r.run === this.runSelect.value);
  }

  private onRunChange(): void {
    const run = this.currentRun();
    if (!run) return;
    setOptions(
      this.roleSelect,
      orderedRoles(run).map((r) => ({ value: r, text: r })),
      [this.roleSelect.value, "gradient"],
    );
    void this.load();
  }

  private async load(): Promise<void> {
    const run = this.currentRun();
    const id = ++this.requestId;
    if (!run) return;
    const role = this.roleSelect.value;
    const metric = this.metricSelect.value;
    if (!role) {
      this.info.textContent = "";
      this.showHeatmap(false);
      this.setMessage("info", noRolesMessage(run));
      return;
    }
    this.view.root.classList.add("gh-stale");
    this.info.textContent = "Loading\u2026";
    let h: Heatmap;
    try {
      h = await fetchHeatmap(run.run, role, metric);
    } catch (e) {
      if (id !== this.requestId) return;
      this.info.textContent = "";
      this.showHeatmap(false);
      this.setMessage("error", [errorText(e)]);
      return;
    } finally {
      if (id === this.requestId) this.view.root.classList.remove("gh-stale");
    }
    if (id !== this.requestId) return;
    this.info.textContent = [
      `${h.layers.length} layers`,
      `${h.steps.length} steps`,
      h.steps.length > 0 ? `last step ${formatStep(h.steps[h.steps.length - 1])}` : "",
      h.quality ? `quality: ${h.quality}` : "",
    ]
      .filter(Boolean)
      .join(" \u00b7 ");
    if (h.layers.length === 0 || h.steps.length === 0) {
      this.showHeatmap(false);
      this.setMessage("info", [paragraph("No ", code(role), " data for run ", code(run.run), " yet.")]);
      return;
    }
    this.setMessage(null);
    const domain = heatmapDomain(h);
    this.legendSlot.replaceChildren(buildLegend(h, domain));
    this.showHeatmap(true);
    this.view.show(h, domain);
  }
}

/** Builds the Gradient Health tab into document.body. */
export function render(): void {
  injectStyles(document);
  void new App(document.body).start();
}
