// SVG charts of the detail panel: a layer's histogram at one step and its metric
// over all steps. Every label is set with textContent.

import type { Bucket, Severity, Threshold } from "./api";
import { STATUS_COLORS } from "./colors";
import { svg } from "./dom";
import { formatStep, formatValue, humanize } from "./format";
import { stepAxisLabels } from "./layout";
import { scaleLinear, scaleLog } from "./scale";
import type { Scale } from "./scale";
import { offset, offsets } from "./steps";
import type { Step } from "./steps";
import { provesNothing, qualityText, valueText } from "./quality";

const SEVERITY_COLORS: Readonly<Record<Severity, string>> = {
  critical: STATUS_COLORS.critical,
  warn: STATUS_COLORS.warn,
  info: "#1e88e5",
};

export function severityColor(s: Severity): string {
  return SEVERITY_COLORS[s] ?? SEVERITY_COLORS.info;
}

interface Margin {
  top: number;
  right: number;
  bottom: number;
  left: number;
}

const MARGIN: Margin = { top: 12, right: 14, bottom: 26, left: 58 };

interface Tick {
  x: number;
  text: string;
  /** Where the text starts, when it is kept inside the axis rather than centred on the tick. */
  left?: number;
}

function axisBottom(g: SVGGElement, ticks: readonly Tick[], y: number, x0: number, x1: number): void {
  g.append(svg("line", { x1: x0, x2: x1, y1: y + 0.5, y2: y + 0.5, class: "gh-axis-line" }));
  for (const t of ticks) {
    const x = Math.round(t.x) + 0.5;
    if (!(x >= x0 - 1 && x <= x1 + 1)) continue;
    g.append(svg("line", { x1: x, x2: x, y1: y, y2: y + 4, class: "gh-axis-line" }));
    const at = t.left === undefined ? { x, "text-anchor": "middle" } : { x: t.left, "text-anchor": "start" };
    g.append(svg("text", { ...at, y: y + 15, class: "gh-axis-text" }, t.text));
  }
}

// About 6.5 px per character of the axis' 11 px text, and room between labels for a sparse axis.
const CHAR_W = 6.5;
const STEP_LABEL_GAP = 40;

/** Round steps under a chart's step axis, exact however large the steps. */
function stepTicks(xs: Scale, origin: Step, x0: number, x1: number): Tick[] {
  const [lo, hi] = xs.domain;
  return stepAxisLabels({ lo, hi }, x1 - x0, (text) => text.length * CHAR_W, origin, STEP_LABEL_GAP)
    .map((l) => ({ x: x0 + l.tick, text: l.text, left: x0 + l.left }));
}

function axisLeft(g: SVGGElement, ticks: number[], scale: (v: number) => number, x: number, x1: number, y0: number, y1: number): void {
  g.append(svg("line", { x1: x + 0.5, x2: x + 0.5, y1: y0, y2: y1, class: "gh-axis-line" }));
  for (const t of ticks) {
    const y = Math.round(scale(t)) + 0.5;
    if (y < y0 - 1 || y > y1 + 1) continue;
    g.append(svg("line", { x1: x + 1, x2: x1, y1: y, y2: y, class: "gh-grid-line" }));
    g.append(svg("text", { x: x - 5, y: y + 4, "text-anchor": "end", class: "gh-axis-text" }, formatValue(t, 3)));
  }
}

export interface Span {
  first: Step;
  last: Step;
  severity: Severity;
  label: string;
}

export interface LineChartInput {
  /** Exact steps, ascending; the chart places them by their offset from the first. */
  steps: readonly Step[];
  values: readonly (number | null)[];
  /** Status name per point (ok, warn, critical, no_data). */
  status: readonly string[];
  quality: readonly string[];
  log: boolean;
  thresholds: readonly Threshold[];
  spans: readonly Span[];
  spikes: readonly Step[];
  selected: Step | null;
  metric: string;
  onPick(step: Step): void;
}

interface Plot {
  g: SVGGElement;
  /** Pixel x of a step position (its offset from `origin`), and of a step. */
  xs: Scale;
  x: (step: Step) => number;
  /** Positions of the input's steps. */
  at: Float64Array;
  y: (v: number) => number;
  log: boolean;
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

/** The value range a chart shows: every finite point and threshold line (positive ones on a log scale). */
function valueRange(input: LineChartInput): { log: boolean; lo: number; hi: number; lines: Threshold[] } {
  const log = input.log && input.values.some((v) => v !== null && v > 0 && Number.isFinite(v));
  const lines = input.thresholds.filter((t) => Number.isFinite(t.value) && (log ? t.value > 0 : true));
  // Loops, not Math.min(...values): a long series would overflow the call stack.
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of [...input.values, ...lines.map((t) => t.value)]) {
    if (v === null || !Number.isFinite(v) || (log && v <= 0)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (lo === hi) {
    // Widened without leaving the doubles: 1.7e308 * 10 would be infinite.
    [lo, hi] = log ? [lo / 10, Math.min(hi * 10, Number.MAX_VALUE)] : around(lo, 1);
  }
  return { log, lo, hi, lines };
}

/** A range around one value: `unit` either side, or a quarter of the value where a unit is lost in it. */
function around(v: number, unit: number): [number, number] {
  const pad = v - unit !== v && v + unit !== v ? unit : Math.abs(v) / 4;
  return [Math.max(v - pad, -Number.MAX_VALUE), Math.min(v + pad, Number.MAX_VALUE)];
}

function drawSpans(p: Plot, spans: readonly Span[]): void {
  for (const s of spans) {
    const a = p.x(s.first);
    const b = p.x(s.last);
    const rect = svg("rect", {
      x: Math.min(a, b) - 2, y: p.y0, width: Math.max(4, Math.abs(b - a) + 4), height: p.y1 - p.y0,
      fill: severityColor(s.severity), "fill-opacity": 0.14, class: "gh-span",
    });
    rect.append(svg("title", {}, s.label));
    p.g.append(rect);
  }
}

function drawThresholds(p: Plot, lines: readonly Threshold[]): void {
  for (const t of lines) {
    const ty = Math.round(p.y(t.value)) + 0.5;
    const line = svg("line", { x1: p.x0, x2: p.x1, y1: ty, y2: ty, class: "gh-threshold" });
    line.append(svg("title", {}, `${formatValue(t.value)}: ${t.meaning}`));
    p.g.append(line);
    p.g.append(svg("text", { x: p.x1 - 2, y: ty + (t.side === "above" ? -4 : 12), "text-anchor": "end", class: "gh-threshold-text" },
      `${t.side === "above" ? "\u2191" : "\u2193"} ${formatValue(t.value)}`));
  }
}

/** The series as a path broken at missing values, with dots on unhealthy and isolated points. */
function drawSeries(p: Plot, input: LineChartInput): void {
  const { values } = input;
  let d = "";
  let pen = false;
  p.at.forEach((at, i) => {
    const v = values[i];
    if (v === null || !Number.isFinite(v) || (p.log && v <= 0)) {
      pen = false;
      return;
    }
    d += `${pen ? "L" : "M"}${p.xs(at).toFixed(1)},${p.y(v).toFixed(1)}`;
    pen = true;
  });
  p.g.append(svg("path", { d, class: "gh-series" }));
  p.at.forEach((at, i) => {
    const v = values[i];
    const st = input.status[i];
    const alone = (values[i - 1] ?? null) === null && (values[i + 1] ?? null) === null;
    if (v === null || !Number.isFinite(v) || (p.log && v <= 0)) return;
    if (st === "warn" || st === "critical" || alone) {
      p.g.append(svg("circle", { cx: p.xs(at), cy: p.y(v), r: st === "critical" ? 3.5 : 2.5, fill: STATUS_COLORS[st] ?? "currentColor" }));
    }
  });
}

/** A run of consecutive points at or below zero, which a log scale cannot place. */
export interface FloorRun {
  /** Indices of its first and last point. */
  from: number;
  to: number;
  /** Every value exactly zero (else some negative). */
  zero: boolean;
}

/** The values a chart draws: none where a value is of a tensor's finite values alone ("finite_only", at a
 * step that held NaN or Inf), nor where it proves nothing ("not_judged": an update ratio's lower bound of 0,
 * never a point on the chart's floor). The zeros an overflow leaves are not the tensor's value; the readout
 * still tells them, labelled. */
export function drawnValues(values: readonly (number | null)[], quality: readonly string[]): (number | null)[] {
  return values.map((v, i) => (quality[i] === "finite_only" || provesNothing(quality[i]) ? null : v));
}

/** The runs of finite values <= 0: on a log chart they are pinned to the bottom edge, not left out. */
export function floorRuns(values: readonly (number | null)[]): FloorRun[] {
  const out: FloorRun[] = [];
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v) || v > 0) return;
    const last = out[out.length - 1];
    if (last && last.to === i - 1) {
      last.to = i;
      last.zero &&= v === 0;
    } else {
      out.push({ from: i, to: i, zero: v === 0 });
    }
  });
  return out;
}

// The band under a log chart's lowest positive value where its values at or below zero are drawn.
const FLOOR_PX = 10;
// Runs named in a log chart's floor note at most; the others are counted.
const FLOOR_RUNS_NAMED = 3;

/** The floor note: "0 at steps 41-299", "<= 0 at step 7", a few runs comma-separated, many counted
 * ("0 at 270 steps from 10 to 299"). */
export function floorText(runs: readonly FloorRun[], steps: readonly Step[]): string {
  if (!runs.length) return "";
  const what = runs.every((r) => r.zero) ? "0" : "\u2264 0";
  const first = formatStep(steps[runs[0].from]);
  const last = formatStep(steps[runs[runs.length - 1].to]);
  if (runs.length > FLOOR_RUNS_NAMED) {
    const count = runs.reduce((n, r) => n + r.to - r.from + 1, 0);
    return `${what} at ${count.toLocaleString("en-US")} steps from ${first} to ${last}`;
  }
  const named = runs.map((r) => r.from === r.to ? formatStep(steps[r.from]) : `${formatStep(steps[r.from])}\u2013${formatStep(steps[r.to])}`);
  const one = runs.length === 1 && runs[0].from === runs[0].to;
  return `${what} at step${one ? "" : "s"} ${named.join(", ")}`;
}

/** A log chart's values at or below zero: hollow markers on the bottom edge, joined by a dashed line
 * that drops from the last positive point and climbs back to the next, and a note naming their steps,
 * so "became exactly zero" does not read as "not logged". */
function drawFloor(p: Plot, input: LineChartInput): void {
  const { values, steps } = input;
  const runs = floorRuns(values);
  if (!p.log || !runs.length) return;
  const yf = p.y1 - 3;
  const positive = (i: number): boolean => {
    const v = values[i];
    return v !== undefined && v !== null && Number.isFinite(v) && v > 0;
  };
  const g = svg("g", { class: "gh-floor" });
  for (const r of runs) {
    let d = positive(r.from - 1) ? `M${p.xs(p.at[r.from - 1]).toFixed(1)},${p.y(values[r.from - 1] as number).toFixed(1)}L` : "M";
    d += `${p.xs(p.at[r.from]).toFixed(1)},${yf}L${p.xs(p.at[r.to]).toFixed(1)},${yf}`;
    if (positive(r.to + 1)) d += `L${p.xs(p.at[r.to + 1]).toFixed(1)},${p.y(values[r.to + 1] as number).toFixed(1)}`;
    g.append(svg("path", { d, fill: "none", stroke: "var(--gh-link)", "stroke-width": 1, "stroke-dasharray": "3 2", class: "gh-floor-line" }));
    for (let i = r.from; i <= r.to; i++) {
      const dot = svg("circle", { cx: p.xs(p.at[i]), cy: yf, r: 2.5, fill: "none", stroke: "var(--gh-link)",
        class: "gh-floor-point", "data-step": steps[i].toString() });
      g.append(dot);
    }
  }
  const text = floorText(runs, steps);
  const note = svg("text", { x: p.x0 + 4, y: yf - 5, class: "gh-floor-text", style: "fill: var(--gh-link); font-size: 10px; paint-order: stroke; stroke: var(--gh-panel); stroke-width: 3px" },
    `${text} (drawn on the bottom edge)`);
  note.append(svg("title", {}, `${text}: values at or below zero have no place on a log scale`));
  g.append(note);
  p.g.append(g);
}

function drawMarks(p: Plot, spikes: readonly Step[], selected: Step | null): void {
  for (const s of spikes) {
    const x = p.x(s);
    const tri = svg("path", { d: `M${x - 4},${p.y0}L${x + 4},${p.y0}L${x},${p.y0 + 7}Z`, class: "gh-spike" });
    tri.append(svg("title", {}, `spike at step ${formatStep(s)}`));
    p.g.append(tri);
  }
  if (selected !== null) {
    const x = Math.round(p.x(selected)) + 0.5;
    p.g.append(svg("line", { x1: x, x2: x, y1: p.y0, y2: p.y1, class: "gh-selected-step" }));
  }
}

/** Hover readout and click-to-pick over the plot area. */
function addReadout(p: Plot, root: SVGSVGElement, input: LineChartInput): void {
  const { steps, values } = input;
  const guide = svg("line", { x1: 0, x2: 0, y1: p.y0, y2: p.y1, class: "gh-guide", visibility: "hidden" });
  const readout = svg("text", { x: p.x0 + 4, y: p.y0 + 10, class: "gh-readout" });
  const hit = svg("rect", { x: p.x0, y: p.y0, width: Math.max(0, p.x1 - p.x0), height: Math.max(0, p.y1 - p.y0), fill: "transparent", class: "gh-hit" });
  p.g.append(guide, readout, hit);
  const nearest = (clientX: number): number => {
    const rect = root.getBoundingClientRect();
    const at = p.xs.invert(clientX - rect.left);
    let best = 0;
    for (let i = 1; i < p.at.length; i++) if (Math.abs(p.at[i] - at) < Math.abs(p.at[best] - at)) best = i;
    return best;
  };
  hit.addEventListener("mousemove", (e) => {
    if (!steps.length) return;
    const i = nearest(e.clientX);
    const x = p.xs(p.at[i]);
    guide.setAttribute("x1", String(x));
    guide.setAttribute("x2", String(x));
    guide.setAttribute("visibility", "visible");
    const q = input.quality[i] ? ` (${qualityText(input.quality[i])})` : "";
    const v = values[i];
    readout.textContent = `step ${formatStep(steps[i])}: ` + (v !== null && input.quality[i]
      ? valueText(v, input.quality[i], formatValue) : `${formatValue(v)}${q}`);
  });
  hit.addEventListener("mouseleave", () => {
    guide.setAttribute("visibility", "hidden");
    readout.textContent = "";
  });
  hit.addEventListener("click", (e) => {
    if (steps.length) input.onPick(steps[nearest(e.clientX)]);
  });
}

/** Line chart of one metric over steps, with thresholds, finding spans, spikes and the selected step. */
export function lineChart(given: LineChartInput, width: number, height: number): SVGSVGElement {
  const input = { ...given, values: drawnValues(given.values, given.quality) };
  const root = svg("svg", { width, height, class: "gh-chart", role: "img" });
  root.append(svg("title", {}, `${humanize(input.metric)} over steps`));
  const [x0, x1, y0, y1] = [MARGIN.left, width - MARGIN.right, MARGIN.top, height - MARGIN.bottom];
  const { steps } = input;
  const { log, lo, hi, lines } = valueRange(input);
  // Steps as offsets from the first: steps past 2^53 stay apart as doubles.
  const origin = steps[0] ?? input.selected ?? 0n;
  const at = offsets(steps, origin);
  const first = at.length ? at[0] : 0;
  const last = at.length ? at[at.length - 1] : 0;
  const xs = scaleLinear(first === last ? [first - 1, last + 1] : [first, last], [x0, x1], false);
  // Values at or below zero on a log scale sit on a floor under the lowest positive value (drawFloor).
  const floor = log && floorRuns(input.values).length > 0 ? FLOOR_PX : 0;
  const ys = log ? scaleLog([lo, hi], [y1 - floor, y0]) : scaleLinear([lo, hi], [y1, y0]);
  // A positive value stays above the floor's band, whatever the scale's rounding does at its edge.
  const y = (v: number): number => (log && v <= 0 ? y1 : Math.min(ys(v), y1 - floor));
  const p: Plot = { g: svg("g"), xs, x: (s) => xs(offset(s, origin)), at, y, log, x0, x1, y0, y1 };
  root.append(p.g);
  drawSpans(p, input.spans);
  axisLeft(p.g, ys.ticks(log ? 6 : 5), y, x0, x1, y0, y1);
  axisBottom(p.g, stepTicks(xs, origin, x0, x1), y1, x0, x1);
  drawThresholds(p, lines);
  drawSeries(p, input);
  drawFloor(p, input);
  drawMarks(p, input.spikes, input.selected);
  addReadout(p, root, given);
  return root;
}

/**
 * Histogram of one step as bars, with an optional second histogram (a
 * neighbouring step) drawn as an outline for comparison; `logCount` draws the
 * counts on a log scale (empty buckets then draw nothing). `octaves`: the
 * buckets are octaves of |x| (gradhealth's own histograms), drawn spread onto
 * equal bins (`uniformBuckets`), their counts then approximate ("≈").
 */
export function histogramChart(
  logged: readonly Bucket[],
  loggedGhost: readonly Bucket[] | null,
  width: number,
  height: number,
  logCount = false,
  octaves = false,
): SVGSVGElement {
  const buckets = octaves ? uniformBuckets(logged) : logged;
  const ghost = octaves && loggedGhost ? uniformBuckets(loggedGhost) : loggedGhost;
  const root = svg("svg", { width, height, class: "gh-chart", role: "img" });
  root.append(svg("title", {}, "histogram"));
  const m = { ...MARGIN, left: 48 };
  const x0 = m.left;
  const x1 = width - m.right;
  const y0 = m.top;
  const y1 = height - m.bottom;
  const all = ghost ? [...buckets, ...ghost] : [...buckets];
  let lo = Infinity;
  let hi = -Infinity;
  let top = 1;
  for (const [l, r, c] of all) {
    lo = Math.min(lo, l, r);
    hi = Math.max(hi, l, r);
    top = Math.max(top, c);
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (lo === hi) [lo, hi] = around(lo, 0.5);
  const xs = scaleLinear([lo, hi], [x0, x1]);
  let least = top;
  for (const [, , c] of all) if (c > 0 && c < least) least = c;
  // On a log scale a bar rises from a decade below the smallest count (so that one shows); an empty bucket stays flat.
  const counts = logCount ? scaleLog([least / 2, top], [y1, y0]) : scaleLinear([0, top], [y1, y0]);
  const ys = (c: number): number => (logCount && !(c > 0) ? y1 : Math.min(y1, counts(c)));
  const g = svg("g");
  root.append(g);
  axisLeft(g, counts.ticks(4), ys, x0, x1, y0, y1);
  const ticks = xs.ticks(Math.max(2, Math.floor((x1 - x0) / 80))).map((v) => ({ x: xs(v), text: formatValue(v, 3) }));
  axisBottom(g, ticks, y1, x0, x1);
  const [dlo, dhi] = xs.domain;
  if (dlo < 0 && dhi > 0) {
    g.append(svg("line", { x1: xs(0), x2: xs(0), y1: y0, y2: y1, class: "gh-zero-line" }));
  }
  for (const [l, r, c] of buckets) {
    const a = xs(Math.min(l, r));
    const b = xs(Math.max(l, r));
    const bar = svg("rect", { x: a, y: ys(c), width: Math.max(1, b - a - (b - a > 3 ? 1 : 0)), height: Math.max(0, y1 - ys(c)), class: "gh-bar" });
    bar.append(svg("title", {}, `[${formatValue(l)}, ${formatValue(r)}): ${octaves ? "\u2248" : ""}${formatValue(c)}`));
    g.append(bar);
  }
  if (ghost && ghost.length) {
    const sorted = [...ghost].sort((p, q) => p[0] - q[0]);
    let d = "";
    for (const [l, r, c] of sorted) {
      d += `M${xs(l).toFixed(1)},${y1}V${ys(c).toFixed(1)}H${xs(r).toFixed(1)}V${y1}`;
    }
    g.append(svg("path", { d, class: "gh-ghost" }));
  }
  return root;
}

/** Equal bins an octave histogram is drawn on: about what TensorBoard's own histograms use. */
export const UNIFORM_BINS = 40;

/**
 * Octave buckets spread onto `bins` equal bins between their outermost edges, each bucket's
 * count shared out in proportion to its overlap with a bin (all of it to one bin when the bucket
 * has no width): drawn as counts, a bell stays a bell. Drawn as they are, the innermost octaves
 * are a pixel wide and the outermost two take half the axis; per octave, a centred tensor reads
 * as two humps.
 */
export function uniformBuckets(buckets: readonly Bucket[], bins = UNIFORM_BINS): Bucket[] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const [l, r] of buckets) {
    lo = Math.min(lo, l, r);
    hi = Math.max(hi, l, r);
  }
  if (!(hi > lo) || !Number.isFinite(hi - lo)) return [...buckets];
  const width = (hi - lo) / bins;
  const counts = new Array<number>(bins).fill(0);
  const binOf = (v: number): number => Math.min(bins - 1, Math.max(0, Math.floor((v - lo) / width)));
  for (const [a, b, c] of buckets) {
    const l = Math.min(a, b);
    const r = Math.max(a, b);
    if (!(r > l)) {
      counts[binOf(l)] += c;
      continue;
    }
    for (let k = binOf(l); k <= binOf(r); k++) {
      const overlap = Math.min(r, lo + (k + 1) * width) - Math.max(l, lo + k * width);
      if (overlap > 0) counts[k] += (c * overlap) / (r - l);
    }
  }
  return counts.map((c, k): Bucket => [lo + k * width, k === bins - 1 ? hi : lo + (k + 1) * width, c]);
}
