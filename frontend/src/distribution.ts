// A layer's distribution over steps, beside its histogram at one step: the
// `distribution` route's percentiles drawn as nested bands (the extremes, then
// 7-93%, 16-84% and 31-69%, and the median line), as TensorBoard's
// Distributions tab draws them; and the switch that draws the histogram's
// counts on a log scale, where a ReLU output's spike at zero hides the rest.

import { getJson } from "./api";
import type { FetchLike } from "./api";
import { NONFINITE_COLOR } from "./colors";
import { el, svg } from "./dom";
import { formatStep, formatValue } from "./format";
import { errorText, isRecord, malformed } from "./json";
import { scaleLinear } from "./scale";
import { offsets, stepListField } from "./steps";
import type { Step } from "./steps";

export interface RoleDistribution {
  /** "gradhealth" (its own summaries' histograms), "histogram", or null: nothing to draw. */
  source: string | null;
  /** "other" when the histograms count steps otherwise than the row (per epoch). */
  axis: "row" | "other";
  steps: Step[];
  /** Per step, one value per percentile (null where a step has no counted value). */
  values: (number | null)[][];
  /** Per step, how many of the tensor's values were NaN or Inf and of how many; null where it held none. */
  nonfinite: (number | null)[];
  nonfiniteOf: (number | null)[];
}

export interface Distribution {
  layer: string;
  /** In percent, ascending; the first and last are 0 and 100. */
  percentiles: number[];
  roles: Record<string, RoleDistribution>;
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Checks the `distribution` route's answer; a role whose lists disagree in length is left out. */
export function parseDistribution(body: unknown): Distribution {
  if (!isRecord(body) || !isRecord(body.distributions) || !Array.isArray(body.percentiles)) {
    throw malformed('distribution: expected {"percentiles": [...], "distributions": {...}}');
  }
  const percentiles = body.percentiles.map(num).filter((p): p is number => p !== null);
  const roles: Record<string, RoleDistribution> = {};
  for (const [role, d] of Object.entries(body.distributions)) {
    if (!isRecord(d) || !Array.isArray(d.values)) continue;
    const steps = stepListField(d, "steps");
    if (steps === null || steps.length !== d.values.length) continue;
    // Absent (an older server) or of another length: no step is known to have held NaN/Inf.
    const perStep = (v: unknown): (number | null)[] =>
      Array.isArray(v) && v.length === steps.length ? v.map(num) : steps.map(() => null);
    roles[role] = {
      source: typeof d.source === "string" ? d.source : null,
      axis: d.axis === "other" ? "other" : "row",
      steps,
      values: d.values.map((row) =>
        Array.isArray(row) && row.length === percentiles.length ? row.map(num) : percentiles.map(() => null),
      ),
      nonfinite: perStep(d.nonfinite),
      nonfiniteOf: perStep(d.nonfinite_of),
    };
  }
  return { layer: typeof body.layer === "string" ? body.layer : "", percentiles, roles };
}

export async function fetchDistribution(run: string, layer: string, role: string, fetchFn?: FetchLike): Promise<Distribution> {
  return parseDistribution(await getJson("distribution", { run, layer, role }, fetchFn));
}

/** Whether the tensor held NaN or Inf at step index i. */
export function heldNonFinite(d: RoleDistribution, i: number): boolean {
  const bad = d.nonfinite[i];
  return bad !== null && bad !== undefined && bad > 0;
}

/**
 * The percentiles a chart draws: none at a step whose tensor held NaN or Inf, where the histogram
 * counts the finite values alone (a few zeros left by NaN would draw as a flat line at 0).
 */
export function drawnValues(d: RoleDistribution): (number | null)[][] {
  return d.values.map((row, i) => (heldNonFinite(d, i) ? row.map(() => null) : row));
}

/** A hover's words for step index i: "NaN/Inf: 81 of 108", or the percentiles. */
export function stepReadout(d: RoleDistribution, i: number, median: number): string {
  const row = d.values[i];
  const spread = `median ${formatValue(median >= 0 ? row[median] : null)}, ${formatValue(row[0])} .. ${formatValue(row[row.length - 1])}`;
  if (!heldNonFinite(d, i)) return `step ${formatStep(d.steps[i])}: ${spread}`;
  const of = d.nonfiniteOf[i];
  const n = (x: number): string => Math.round(x).toLocaleString("en-US");
  const bad = `NaN/Inf: ${n(d.nonfinite[i] as number)}${of === null ? "" : ` of ${n(of)}`}`;
  const finite = of !== null && (d.nonfinite[i] as number) >= of ? "" : `; finite values only: ${spread}`;
  return `step ${formatStep(d.steps[i])}: ${bad}${finite}`;
}

/** Bands to fill, outermost first: pairs of percentile indices symmetric about the median. */
export function bandPairs(percentiles: readonly number[]): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0, j = percentiles.length - 1; i < j; i++, j--) out.push([i, j]);
  return out;
}

/** The index of the median (50%), or -1. */
export function medianIndex(percentiles: readonly number[]): number {
  return percentiles.findIndex((p) => Math.abs(p - 50) < 1e-9);
}

/** The smallest and largest finite value of a distribution, or null when it has none. */
export function valueRange(d: RoleDistribution): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const row of d.values) {
    for (const v of row) {
      if (v === null) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return Number.isFinite(lo) && Number.isFinite(hi) ? [lo, hi] : null;
}

/**
 * The value axis of a distribution chart: linear, or symmetric log (linear within +-`linear`, log
 * beyond) when the extremes reach far past the bulk: a linear axis sized by a gradient's +-2,000 at one
 * step draws its usual 1e-6 as one flat line.
 */
export interface ValueAxis {
  kind: "linear" | "symlog";
  /** symlog: the half-width of the linear part around zero. */
  linear: number;
}

// The extremes (or the bulk itself over the run) spanning more than this factor of the bulk's
// small values make the axis symmetric log.
const SYMLOG_SPREAD = 1000;

/** The axis that shows the bulk of `d`: its inner bands (every percentile but min and max). */
export function valueAxis(d: RoleDistribution): ValueAxis {
  const inner: number[] = [];
  let full = 0;
  for (const row of d.values) {
    row.forEach((v, k) => {
      if (v === null) return;
      full = Math.max(full, Math.abs(v));
      if (k > 0 && k < row.length - 1 && v !== 0) inner.push(Math.abs(v));
    });
  }
  if (!inner.length) return { kind: "linear", linear: 0 };
  inner.sort((a, b) => a - b);
  // A small value of the bulk, not its very smallest: one near-zero percentile would stretch the axis.
  const small = inner[Math.floor(inner.length * 0.1)];
  return full > SYMLOG_SPREAD * small ? { kind: "symlog", linear: small } : { kind: "linear", linear: 0 };
}

/** The symmetric log transform: sign(v) log10(1 + |v| / c). */
export function symlog(v: number, c: number): number {
  return Math.sign(v) * Math.log10(1 + Math.abs(v) / c);
}

/** Round ticks of a symmetric log axis over [lo, hi]: 0 and powers of ten past `c`, at most `perSide` a side. */
export function symlogTicks(lo: number, hi: number, c: number, perSide = 3): number[] {
  const side = (top: number): number[] => {
    if (!(top > c)) return [];
    const k0 = Math.ceil(Math.log10(c));
    const k1 = Math.floor(Math.log10(top));
    const stride = Math.max(1, Math.ceil((k1 - k0 + 1) / perSide));
    const out: number[] = [];
    for (let k = k1; k >= k0; k -= stride) out.push(10 ** k);
    return out;
  };
  const ticks = [...side(-lo).map((v) => -v), ...(lo <= 0 && hi >= 0 ? [0] : []), ...side(hi).reverse()];
  return ticks.filter((t) => t >= lo && t <= hi);
}

const MARGIN = { top: 10, right: 14, bottom: 26, left: 58 };
// Outermost band palest, as TensorBoard shades them.
const BAND_OPACITY = [0.14, 0.24, 0.36, 0.5];

/** Nested percentile bands over steps, the median as a line, the selected step marked. */
export function distributionChart(
  d: RoleDistribution,
  percentiles: readonly number[],
  width: number,
  height: number,
  selected: Step | null,
  onPick: (step: Step) => void,
): SVGSVGElement {
  const root = svg("svg", { width, height, class: "gh-chart", role: "img" });
  root.append(svg("title", {}, "distribution over steps"));
  const shown = { ...d, values: drawnValues(d) };
  const [x0, x1, y0, y1] = [MARGIN.left, width - MARGIN.right, MARGIN.top, height - MARGIN.bottom];
  const origin = d.steps[0] ?? 0n;
  const at = offsets(d.steps, origin);
  const first = at.length ? at[0] : 0;
  const last = at.length ? at[at.length - 1] : 0;
  // Steps as offsets from the first, exact whatever their size; the axis ends at the first and last step.
  const xs = scaleLinear(first === last ? [first - 1, last + 1] : [first, last], [x0, x1], false);
  const range = valueRange(shown) ?? [0, 1];
  const axis = valueAxis(shown);
  let ys: Axis;
  let ticks: number[];
  if (axis.kind === "symlog") {
    const c = axis.linear;
    const inner = scaleLinear([symlog(range[0], c), symlog(range[1], c)], [y1, y0], false);
    ys = (v) => inner(symlog(v, c));
    ticks = symlogTicks(range[0], range[1], c);
  } else {
    const linear = scaleLinear(range[0] === range[1] ? [range[0] - 1, range[1] + 1] : range, [y1, y0]);
    ys = linear;
    ticks = linear.ticks(5);
  }
  const g = svg("g");
  root.append(g);
  // Said on the chart: the gaps between ticks are decades, not equal steps. Hidden while the hover's
  // readout, on the same line, speaks.
  const note = axis.kind === "symlog"
    ? svg("text", { x: x1, y: y0 + 10, "text-anchor": "end", class: "gh-axis-text gh-symlog-note" },
      `symmetric log axis, linear within \u00b1${formatValue(axis.linear, 2)}`)
    : null;
  if (note) g.append(note);
  for (const t of ticks) {
    const y = Math.round(ys(t)) + 0.5;
    g.append(svg("line", { x1: x0, x2: x1, y1: y, y2: y, class: "gh-grid-line" }));
    g.append(svg("text", { x: x0 - 5, y: y + 4, "text-anchor": "end", class: "gh-axis-text" }, formatValue(t, 3)));
  }
  g.append(svg("line", { x1: x0, x2: x1, y1: y1 + 0.5, y2: y1 + 0.5, class: "gh-axis-line" }));
  for (const [i, text] of [[0, formatStep(d.steps[0] ?? 0n)], [at.length - 1, formatStep(d.steps[d.steps.length - 1] ?? 0n)]] as const) {
    if (i < 0 || i >= at.length) continue;
    g.append(svg("text", { x: xs(at[i]), y: y1 + 15, "text-anchor": i === 0 ? "start" : "end", class: "gh-axis-text" }, text));
  }
  bandPairs(percentiles).forEach(([lo, hi], k) => {
    g.append(svg("path", { d: bandPath(at, shown.values, lo, hi, xs, ys), style: `fill: var(--gh-bar); fill-opacity: ${BAND_OPACITY[k] ?? 0.5}` }));
  });
  const mid = medianIndex(percentiles);
  // Styled here, not as the series line: the panel's metric chart owns that class.
  if (mid >= 0) {
    g.append(svg("path", { d: linePath(at, shown.values, mid, xs, ys), class: "gh-dist-median", style: "fill: none; stroke: var(--gh-link); stroke-width: 1.5" }));
  }
  // Steps whose tensor held NaN or Inf: a gap in the bands, and a mark in the critical hue along the bottom
  // (the top holds the axis' note).
  const marks = svg("g", { class: "gh-dist-nonfinite" });
  for (let i = 0; i < at.length; i++) {
    if (!heldNonFinite(d, i)) continue;
    const x = xs(at[i]);
    const mark = svg("rect", { x: x - 1.5, y: y1 - 6, width: 3, height: 6, style: `fill: ${NONFINITE_COLOR}`, "data-step": d.steps[i].toString() });
    mark.append(svg("title", {}, stepReadout(d, i, mid)));
    marks.append(mark);
  }
  if (marks.childNodes.length) g.append(marks);
  if (selected !== null && d.steps.length) {
    const x = Math.round(xs(Number(selected - origin))) + 0.5;
    if (x >= x0 - 1 && x <= x1 + 1) g.append(svg("line", { x1: x, x2: x, y1: y0, y2: y1, class: "gh-selected-step" }));
  }
  const readout = svg("text", { x: x0 + 4, y: y0 + 10, class: "gh-readout" });
  const hit = svg("rect", { x: x0, y: y0, width: Math.max(0, x1 - x0), height: Math.max(0, y1 - y0), fill: "transparent", class: "gh-hit" });
  g.append(readout, hit);
  const nearest = (clientX: number): number => {
    const pos = xs.invert(clientX - root.getBoundingClientRect().left);
    let best = 0;
    for (let i = 1; i < at.length; i++) if (Math.abs(at[i] - pos) < Math.abs(at[best] - pos)) best = i;
    return best;
  };
  hit.addEventListener("mousemove", (e) => {
    if (!at.length) return;
    readout.textContent = stepReadout(d, nearest(e.clientX), mid);
    note?.setAttribute("visibility", "hidden");
  });
  hit.addEventListener("mouseleave", () => {
    readout.textContent = "";
    note?.setAttribute("visibility", "visible");
  });
  hit.addEventListener("click", (e) => {
    if (at.length) onPick(d.steps[nearest(e.clientX)]);
  });
  return root;
}

type Axis = (v: number) => number;

/** The band between percentiles lo and hi, broken where a step has no value. */
export function bandPath(at: Float64Array, values: (number | null)[][], lo: number, hi: number, xs: Axis, ys: Axis): string {
  let d = "";
  let run: number[] = [];
  const flush = (): void => {
    if (!run.length) return;
    // A lone step is a thin vertical band, one pixel either side.
    const pad = run.length === 1 ? 1 : 0;
    const top = run.map((i, k) => `${k ? "L" : "M"}${(xs(at[i]) - pad).toFixed(1)},${ys(values[i][hi] as number).toFixed(1)}`);
    if (pad) top.push(`L${(xs(at[run[0]]) + pad).toFixed(1)},${ys(values[run[0]][hi] as number).toFixed(1)}`);
    const bottom = run.slice().reverse().map((i) => `L${(xs(at[i]) + pad).toFixed(1)},${ys(values[i][lo] as number).toFixed(1)}`);
    if (pad) bottom.push(`L${(xs(at[run[0]]) - pad).toFixed(1)},${ys(values[run[0]][lo] as number).toFixed(1)}`);
    d += top.join("") + bottom.join("") + "Z";
    run = [];
  };
  for (let i = 0; i < at.length; i++) {
    if (values[i][lo] === null || values[i][hi] === null) flush();
    else run.push(i);
  }
  flush();
  return d;
}

function linePath(at: Float64Array, values: (number | null)[][], k: number, xs: Axis, ys: Axis): string {
  let d = "";
  let pen = false;
  for (let i = 0; i < at.length; i++) {
    const v = values[i][k];
    if (v === null) {
      pen = false;
      continue;
    }
    d += `${pen ? "L" : "M"}${xs(at[i]).toFixed(1)},${ys(v).toFixed(1)}`;
    pen = true;
  }
  return d;
}

/**
 * The detail panel's distribution section and its log-count switch. `show` fetches a layer's
 * distribution when the layer, role or its steps changed; `select` only moves the marked step.
 */
export class DistributionView {
  readonly root = el("div");
  /** Goes beside the histogram's title: it switches that chart's counts to a log scale. */
  readonly logToggle = el("label", "gh-check");
  private readonly box = el("div", "gh-chart-box");
  private readonly note = el("div", "gh-note");
  private readonly check = el("input");
  private key = "";
  private data: Distribution | null = null;
  private role = "";
  private selected: Step | null = null;

  constructor(
    private readonly pick: (step: Step) => void,
    onLogCount: () => void,
    private readonly fetchFn?: FetchLike,
  ) {
    this.check.type = "checkbox";
    this.check.addEventListener("change", onLogCount);
    this.logToggle.title = "Draw the histogram's counts on a log scale: a spike (a ReLU's zeros) no longer hides the rest";
    this.logToggle.append(this.check, el("span", "", "log counts"));
    const head = el("div", "gh-section-head");
    head.append(el("h3", "", "Distribution over steps"));
    this.root.append(head, this.note, this.box);
  }

  get logCount(): boolean {
    return this.check.checked;
  }

  /** Shows a layer's distribution in one role, marking `step`; fetches only what changed. */
  show(run: string, layer: string, role: string, step: Step, steps: readonly Step[], loading = false): void {
    this.selected = step;
    this.role = role;
    if (loading) {
      // The row's steps arrive with its cells and are part of the key: asking now would ask again then.
      this.key = "";
      this.data = null;
      this.box.replaceChildren();
      this.note.textContent = "Loading\u2026";
      this.note.className = "gh-note";
      return;
    }
    const key = [run, layer, role, steps.length, String(steps[steps.length - 1] ?? "")].join("\u0000");
    if (key === this.key) {
      this.draw();
      return;
    }
    this.key = key;
    void this.load(run, layer, role, key);
  }

  relayout(): void {
    this.draw();
  }

  private async load(run: string, layer: string, role: string, key: string): Promise<void> {
    this.note.textContent = "Loading\u2026";
    this.note.className = "gh-note";
    try {
      const d = await fetchDistribution(run, layer, role, this.fetchFn);
      if (key !== this.key) return;
      this.data = d;
      this.draw();
    } catch (e) {
      if (key !== this.key) return;
      this.data = null;
      this.box.replaceChildren();
      this.note.textContent = errorText(e);
      this.note.className = "gh-note gh-error-text";
    }
  }

  private draw(): void {
    const d = this.data?.roles[this.role];
    if (!this.data || !d) return;
    if (!d.source || d.steps.length === 0) {
      this.box.replaceChildren();
      this.note.textContent = "No histograms logged for this tensor: its distribution over steps cannot be drawn.";
      return;
    }
    const width = Math.max(260, this.box.clientWidth || 420);
    // Histograms on another step axis: their steps are not the row's, so none is marked or picked.
    const row = d.axis === "row";
    this.box.replaceChildren(
      distributionChart(d, this.data.percentiles, width, 170, row ? this.selected : null, row ? this.pick : () => undefined),
    );
    const from = d.source === "gradhealth" ? "gradhealth's histograms (up to 4,096 values a step)" : "the logged histograms";
    const axis = d.axis === "other" ? " Its histograms count steps otherwise than this row (per epoch): no step is marked." : "";
    const scale = valueAxis(d).kind === "symlog"
      ? " The extremes reach far beyond the bulk: values on a symmetric log axis, so both show." : "";
    const bad = d.nonfinite.some((v) => v !== null && v > 0)
      ? " Red marks along the bottom: steps whose tensor held NaN/Inf (no bands there: a histogram counts finite values only)." : "";
    this.note.textContent = `Bands: min-max, 7-93%, 16-84%, 31-69% of the values; line: median. From ${from}.${axis}${scale}${bad}`;
  }
}
