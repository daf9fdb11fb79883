// Detail panel for one layer: its histogram at the selected step (with the
// neighbouring logged steps a click away), its metrics at that step, a metric
// over all steps with thresholds, spikes and findings marked, and the findings.

import { METRICS } from "./api";
import type { Cell, CellRole, Finding, Series, Threshold } from "./api";
import { histogramChart, lineChart, severityColor } from "./charts";
import { histogramLabel, missingHistogram, outlineLabel } from "./histogram_label";
import type { Span } from "./charts";
import { STATUS_LABELS, statusName } from "./colors";
import { button, el, setOptions } from "./dom";
import { causeText, findingsFor, findingSpans, findingStepsText, spansText, spikeSteps } from "./findings";
import { callText, formatStep, formatStepRange, formatValue, humanize } from "./format";
import { errorText } from "./json";
import { paragraph, quotedText } from "./messages";
import { DistributionView } from "./distribution";
import { roleGuessBox } from "./role_guess";
import type { Step } from "./steps";
import { kindLabel, kindMetric } from "./vocabulary";
import { metricCell } from "./quality";

const LOG_METRICS = new Set(["std", "max_abs", "mean_abs", "l2", "std_rel_first", "update_ratio"]);

export interface DetailTarget {
  run: string;
  layer: string;
  role: string;
  step: Step;
  /** Steps at which this layer has data in the heatmap, ascending. */
  steps: Step[];
  /** The row's cells have not arrived yet: its steps are unknown, so what depends on them waits. */
  loading?: boolean;
  /** The heatmap's metric; health picks a metric that fits the cell's rule. */
  metric: string;
  rule: string | null;
  findings: Finding[];
  /** How the row's role was decided, and its first tag: a guessed role offers the rule that fixes it. */
  decidedBy?: string;
  tag?: string;
}

/** The dashed lines of a chart in sentences: one per meaning, with every value that has it. */
export function thresholdSentences(lines: readonly Threshold[]): string[] {
  const byMeaning = new Map<string, number[]>();
  for (const t of lines) byMeaning.set(t.meaning, [...(byMeaning.get(t.meaning) ?? []), t.value]);
  return [...byMeaning].map(([meaning, values]) => {
    const at = values.map((v) => formatValue(v)).join(" and ");
    return `Dashed line${values.length > 1 ? "s" : ""} at ${at}: ${meaning || "a configured limit"}.`;
  });
}

export interface DetailEvents {
  step(step: Step): void;
  close(): void;
  /** The cell's histogram and metrics are drawn: the panel has its height. */
  drawn?(): void;
}

/** Where the panel gets its data (the store, which caches it). */
export interface DetailData {
  cell(run: string, layer: string, role: string, step: Step): Promise<Cell>;
  seriesOf(run: string, layer: string, role: string, metric: string): Promise<Series>;
}

export class DetailPanel {
  readonly root = el("section", "gh-detail");
  private readonly title = el("h2", "gh-detail-title");
  private readonly subtitle = el("div", "gh-detail-sub");
  private readonly status = el("div", "gh-detail-status");
  private readonly guess = el("div");
  private readonly histTitle = el("h3", "", "Histogram");
  private readonly histNote = el("div", "gh-note");
  private readonly histBox = el("div", "gh-chart-box");
  private readonly prev: HTMLButtonElement;
  private readonly next: HTMLButtonElement;
  private readonly ghost = el("input");
  private readonly metricsBox = el("div", "gh-metrics");
  private readonly seriesSelect = el("select");
  private readonly seriesNote = el("div", "gh-note");
  private readonly seriesBox = el("div", "gh-chart-box");
  private readonly findingsBox = el("div", "gh-detail-findings");
  private readonly distribution = new DistributionView((step) => this.events.step(step), () => this.drawHistogram());
  private target: DetailTarget | null = null;
  private seriesMetric = "";
  /** `seriesMetric` was picked before the cell's rule was known (its row loading): the rule picks it when it arrives. */
  private metricUnknown = false;
  private token = 0;
  private lastSeries: Series | null = null;
  private lastCell: Cell | null = null;
  private lastGhost: Cell | null = null;

  constructor(
    private readonly events: DetailEvents,
    private readonly data: DetailData,
  ) {
    this.root.hidden = true;
    this.root.setAttribute("aria-label", "Layer detail");
    const close = button("\u00d7", () => this.events.close(), "gh-icon-button", "Close the detail panel");
    close.setAttribute("aria-label", "Close");
    const head = el("div", "gh-detail-head");
    const titles = el("div");
    titles.append(this.title, this.subtitle, this.status, this.guess);
    head.append(titles, close);

    this.prev = button("\u2190 prev step", () => this.move(-1), "gh-button", "Previous logged step");
    this.next = button("next step \u2192", () => this.move(1), "gh-button", "Next logged step");
    this.ghost.type = "checkbox";
    this.ghost.checked = true;
    this.ghost.addEventListener("change", () => this.drawHistogram());
    const ghostLabel = el("label", "gh-check");
    ghostLabel.append(this.ghost, el("span", "", "outline the previous step"));
    const histHead = el("div", "gh-section-head");
    histHead.append(this.histTitle, this.prev, this.next, ghostLabel, this.distribution.logToggle);

    setOptions(this.seriesSelect, METRICS.map((m) => ({ value: m, text: humanize(m) })), ["max_abs"]);
    this.seriesSelect.addEventListener("change", () => {
      this.seriesMetric = this.seriesSelect.value;
      this.metricUnknown = false;
      void this.loadSeries();
    });
    const seriesHead = el("div", "gh-section-head");
    this.seriesSelect.setAttribute("aria-label", "Metric to chart over steps");
    seriesHead.append(el("h3", "", "Over all steps"), this.seriesSelect);

    const left = el("div", "gh-detail-col");
    left.append(histHead, this.histNote, this.histBox, el("h3", "", "At this step"), this.metricsBox);
    const right = el("div", "gh-detail-col");
    // The distribution over steps beside the histogram at one step, above the metric over the same steps.
    right.append(this.distribution.root, seriesHead, this.seriesNote, this.seriesBox, el("h3", "", "Findings for this layer"),
      this.findingsBox);
    const cols = el("div", "gh-detail-cols");
    cols.append(left, right);
    this.root.append(head, cols);
    this.root.addEventListener("keydown", (e) => {
      if (e.key === "Escape") this.events.close();
    });
  }

  get isOpen(): boolean {
    return !this.root.hidden;
  }

  close(): void {
    this.root.hidden = true;
    this.target = null;
    this.token++;
  }

  open(t: DetailTarget): void {
    const same = this.target && this.target.run === t.run && this.target.layer === t.layer && this.target.role === t.role;
    const before = this.seriesMetric;
    // A panel opened on a row still loading (a link's) picks again once the row and its rules are here,
    // so it charts what a click on the loaded cell does.
    if (!same || !this.seriesMetric || (this.metricUnknown && t.loading !== true)) {
      this.seriesMetric = t.metric !== "health" ? t.metric : kindMetric(t.rule, t.role);
      this.metricUnknown = t.metric === "health" && t.loading === true;
    }
    this.target = t;
    this.root.hidden = false;
    this.title.textContent = t.layer;
    // A module's later call in forward (relu[1]) says what it is on hover.
    this.title.title = callText(t.layer) ?? "";
    this.subtitle.textContent = `${t.role} \u00b7 run ${t.run}`;
    this.guess.replaceChildren(roleGuessBox(t.decidedBy, t.role, t.tag));
    this.seriesSelect.value = this.seriesMetric;
    this.drawFindings();
    this.updateButtons();
    this.distribution.show(t.run, t.layer, t.role, t.step, t.steps, t.loading === true);
    void this.loadCell();
    if (this.metricUnknown) this.waitForRule();
    else if (!same || !this.lastSeries || this.seriesMetric !== before) void this.loadSeries();
    else this.drawSeries();
  }

  /** Under the health metric the chart shows the metric of the cell's rule: nothing is charted before it is known. */
  private waitForRule(): void {
    this.lastSeries = null;
    this.seriesBox.replaceChildren();
    this.seriesNote.textContent = "Loading\u2026";
    this.seriesNote.className = "gh-note";
  }

  /** Redraws charts for a new width. */
  relayout(): void {
    if (!this.isOpen) return;
    this.drawHistogram();
    this.drawSeries();
    this.distribution.relayout();
  }

  private neighbours(): { prev: Step | null; next: Step | null } {
    const t = this.target;
    if (!t) return { prev: null, next: null };
    let prev: Step | null = null;
    let next: Step | null = null;
    for (const s of t.steps) {
      if (s < t.step) prev = s;
      else if (s > t.step) {
        next = s;
        break;
      }
    }
    return { prev, next };
  }

  private updateButtons(): void {
    const { prev, next } = this.neighbours();
    this.prev.disabled = prev === null;
    this.next.disabled = next === null;
    this.prev.title = prev === null ? "No earlier logged step" : `Step ${formatStep(prev)}`;
    this.next.title = next === null ? "No later logged step" : `Step ${formatStep(next)}`;
  }

  private move(dir: -1 | 1): void {
    const { prev, next } = this.neighbours();
    const s = dir < 0 ? prev : next;
    if (s !== null) this.events.step(s);
  }

  private cell(step: Step): Promise<Cell> {
    const t = this.target as DetailTarget;
    return this.data.cell(t.run, t.layer, t.role, step);
  }

  private async loadCell(): Promise<void> {
    const t = this.target;
    if (!t) return;
    const id = ++this.token;
    this.histTitle.textContent = `Histogram at step ${formatStep(t.step)}`;
    this.histNote.textContent = "Loading\u2026";
    this.histNote.className = "gh-note";
    if (!t.steps.includes(t.step)) {
      // Not an error: this layer was not logged at that step (the cell is grey).
      this.lastCell = null;
      this.histNote.textContent = `No ${t.role} data logged for this layer at step ${formatStep(t.step)}.`;
      this.histBox.replaceChildren();
      this.metricsBox.replaceChildren();
      this.status.replaceChildren();
      return;
    }
    const { prev } = this.neighbours();
    const ghost = prev !== null ? this.cell(prev).catch(() => null) : Promise.resolve(null);
    let cell: Cell;
    try {
      cell = await this.cell(t.step);
    } catch (e) {
      if (id !== this.token) return;
      this.lastCell = null;
      this.histNote.textContent = errorText(e);
      this.histNote.className = "gh-note gh-error-text";
      this.histBox.replaceChildren();
      this.metricsBox.replaceChildren();
      this.status.replaceChildren();
      return;
    }
    const g = await ghost;
    if (id !== this.token) return;
    this.lastCell = cell;
    this.lastGhost = g;
    this.histNote.textContent = "";
    this.drawStatus(cell.roles[t.role]);
    this.drawHistogram();
    this.drawMetrics(cell.roles[t.role]);
    this.events.drawn?.();
  }

  private drawStatus(r: CellRole | undefined): void {
    if (!r) {
      this.status.replaceChildren();
      return;
    }
    const badge = el("span", `gh-badge gh-status-${r.status}`, STATUS_LABELS[r.status] ?? r.status);
    const parts: (string | Node)[] = [badge];
    // The rule is the finding kind that set the status: named as the findings list names it.
    if (r.rule) parts.push(` ${kindLabel(r.rule)}`);
    if (r.score !== null) parts.push(` \u00b7 score ${formatValue(r.score, 3)}`);
    // An ok cell where a rule held: for how long, and why that is no warning.
    if (r.held) parts.push(el("span", "gh-held", ` \u00b7 ${r.held}`));
    parts.push(` \u00b7 ${r.source}: ${r.tags.join(", ")}`);
    // TensorBoard's sampling: the row shows fewer steps than its writer logged.
    if (r.steps_kept !== null && r.steps_logged !== null && r.steps_logged > r.steps_kept) {
      const logged = `${r.steps_logged_at_least ? "at least " : ""}${formatStep(r.steps_logged)}`;
      parts.push(el("span", "gh-sampled", ` \u00b7 ${formatStep(r.steps_kept)} of ${logged} logged steps kept`));
    }
    this.status.replaceChildren(...parts);
  }

  private drawHistogram(): void {
    const t = this.target;
    const cell = this.lastCell;
    if (!t || !cell) return;
    const r = cell.roles[t.role];
    const buckets = r?.histogram ?? null;
    if (!buckets || buckets.length === 0) {
      this.histBox.replaceChildren();
      if (!r || r.histogram_note) {
        this.histNote.textContent = r?.histogram_note ?? `No ${t.role} data at this step.`;
        return;
      }
      // Logged at other steps (every N-th): say so, with buttons that open the nearest ones.
      const missing = missingHistogram(t.step, r);
      const open = (step: Step | null, text: string): (string | HTMLButtonElement)[] => step === null ? []
        : [" ", button(text, () => this.events.step(step), "gh-button gh-hist-elsewhere", `Open step ${formatStep(step)}, which has a histogram`)];
      this.histNote.replaceChildren(missing.text,
        ...open(missing.before, `\u2190 step ${missing.before === null ? "" : formatStep(missing.before)}`),
        ...open(missing.after, `step ${missing.after === null ? "" : formatStep(missing.after)} \u2192`));
      return;
    }
    const { prev } = this.neighbours();
    const ghostRole = this.ghost.checked && this.lastGhost ? this.lastGhost.roles[t.role] : undefined;
    const ghost = ghostRole?.histogram ?? null;
    const width = Math.max(260, this.histBox.clientWidth || 420);
    this.histBox.replaceChildren(histogramChart(buckets, ghost, width, 190, this.distribution.logCount,
      r.histogram_buckets === "octaves"));
    const label = histogramLabel(t.step, r);
    this.histTitle.textContent = label.title;
    const outline = ghost && prev !== null ? outlineLabel(prev, ghostRole) : "";
    this.histNote.textContent = [label.note, outline, r.histogram_note ?? ""].filter((s) => s).join(" ");
  }

  private drawMetrics(r: CellRole | undefined): void {
    if (!r) {
      this.metricsBox.replaceChildren();
      return;
    }
    const table = el("table", "gh-metric-table");
    const rows = Object.entries(r.metrics).map(([name, mv]) => {
      const tr = el("tr");
      // "upper bound", not "upper_bound"; a value not logged says so once. The table keeps a few words;
      // the hover says what they mean.
      const [value, words, meaning] = metricCell(mv.value, mv.quality, (v) => formatValue(v));
      const quality = el("td", "gh-quality", words);
      const num = el("td", "gh-num", value);
      if (meaning) (words ? quality : num).title = meaning;
      tr.append(el("th", "", humanize(name)), num, quality);
      return tr;
    });
    table.append(...rows);
    this.metricsBox.replaceChildren(table);
  }

  private async loadSeries(): Promise<void> {
    const t = this.target;
    if (!t) return;
    const metric = this.seriesMetric;
    const p = this.data.seriesOf(t.run, t.layer, t.role, metric);
    this.seriesNote.textContent = "Loading\u2026";
    this.seriesNote.className = "gh-note";
    try {
      const s = await p;
      if (this.target !== t || this.seriesMetric !== metric) return;
      this.lastSeries = s;
      this.seriesNote.textContent = "";
      this.drawSeries();
    } catch (e) {
      if (this.target !== t || this.seriesMetric !== metric) return;
      this.lastSeries = null;
      this.seriesBox.replaceChildren();
      this.seriesNote.textContent = errorText(e);
      this.seriesNote.className = "gh-note gh-error-text";
    }
  }

  private drawSeries(): void {
    const t = this.target;
    const s = this.lastSeries;
    if (!t || !s || s.layer !== t.layer || s.metric !== this.seriesMetric) return;
    const data = s.series[t.role];
    if (!data) {
      this.seriesBox.replaceChildren();
      this.seriesNote.textContent = `No ${t.role} series for this layer.`;
      return;
    }
    const mine = findingsFor(t.findings, t.layer, t.role);
    // Each finding shades the steps it covers on this layer, not the union over its layers.
    const spans: Span[] = mine.flatMap((f) =>
      (findingSpans(f, t.role).get(t.layer) ?? []).map(([first, last]) => ({
        first, last, severity: f.severity, label: `${kindLabel(f.kind)}: ${formatStepRange(first, last)}`,
      })),
    );
    const spikes = mine.flatMap((f) => spikeSteps(f, t.layer));
    const width = Math.max(300, this.seriesBox.clientWidth || 520);
    this.seriesBox.replaceChildren(
      lineChart(
        {
          steps: data.steps,
          values: data.values,
          status: data.status.map((c) => statusName(c, s.status_names)),
          quality: data.quality,
          log: LOG_METRICS.has(s.metric),
          thresholds: s.thresholds[t.role] ?? [],
          spans,
          spikes,
          selected: t.step,
          metric: s.metric,
          onPick: (step) => this.events.step(step),
        },
        width,
        210,
      ),
    );
    const th = s.thresholds[t.role] ?? [];
    this.seriesNote.textContent = [...thresholdSentences(th), "Click the chart to pick a step."].join(" ");
  }

  private drawFindings(): void {
    const t = this.target;
    if (!t) return;
    const mine = findingsFor(t.findings, t.layer, t.role);
    if (mine.length === 0) {
      this.findingsBox.replaceChildren(el("p", "gh-note", "No findings for this layer."));
      return;
    }
    this.findingsBox.replaceChildren(
      ...mine.map((f) => {
        const item = el("div", "gh-detail-finding");
        const head = el("div", "gh-finding-head");
        const badge = el("span", `gh-badge gh-sev-${f.severity}`, f.severity);
        badge.style.borderColor = severityColor(f.severity);
        head.append(badge, el("strong", "", kindLabel(f.kind)), el("span", "gh-muted", ` ${findingStepsText(f)}`));
        item.append(head, paragraph(...quotedText(f.message)));
        // The message spans every layer of the finding; this layer's own steps may be fewer.
        if (f.layers.length > 1 || f.covers) {
          const own = findingSpans(f, t.role).get(t.layer);
          item.append(el("p", "gh-layer-spans", own ? `On this layer: ${spansText(own)}.` : "This layer is named for comparison; the finding covers none of its steps."));
        }
        if (f.cause) item.append(el("p", "gh-cause", causeText(f.cause)));
        item.append(el("p", "gh-advice", f.advice));
        return item;
      }),
    );
  }
}
