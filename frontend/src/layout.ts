// Pure layout: where steps and rows go, hit testing, which labels to draw and how
// to shorten them. Text widths come from a `measure` callback so the same code runs
// against a canvas in the browser and against a fixed-width estimate in tests.

import { formatStepTick, nextNiceInterval, niceIntervalAtLeast } from "./format";
import { ceilStep, floorStep, multiplesBetween, offset } from "./steps";
import type { Step } from "./steps";

export type Measure = (text: string) => number;

// A row label's height: labels are thinned on rows lower than this.
export const LABEL_ROW_H = 13;
// Rows shrink to fit the viewport down to this, the height at which every row keeps its label;
// more rows than fit scroll (and a long model folds its blocks by itself).
export const ROW_MIN_H = LABEL_ROW_H;
export const ROW_MAX_H = 28;
export const AXIS_HEIGHT = 26;
export const LABEL_GAP = 12;
// Browsers refuse or silently blank canvases beyond these sizes.
export const MAX_CANVAS_SIDE = 16384;
export const MAX_CANVAS_AREA = 64 * 1024 * 1024;

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(Math.max(v, lo), hi);
}

/** Row height for `rows` layers sharing `availableHeight` CSS pixels, within readable bounds. */
export function rowHeight(rows: number, availableHeight: number): number {
  if (rows <= 0) return ROW_MAX_H;
  return clamp(Math.floor(availableHeight / rows), ROW_MIN_H, ROW_MAX_H);
}

/**
 * The scroll offset that shows row `pos` (rows `cellH` tall, `viewH` of them in sight from `top`):
 * `top` when the row is wholly in sight already, else the row centred, so the rows around it show too.
 */
export function revealTop(pos: number, cellH: number, viewH: number, top: number): number {
  const y = pos * cellH;
  if (y >= top && y + cellH <= top + viewH) return top;
  return Math.max(0, y - (viewH - cellH) / 2);
}

/** Label every k-th row so labels never overlap: 1 when rows are tall enough for text. */
export function rowLabelStride(cellH: number, labelH = LABEL_ROW_H): number {
  return cellH >= labelH ? 1 : Math.ceil(labelH / Math.max(1, cellH));
}

/**
 * Backing-store scale for a canvas of cssW x cssH: the device pixel ratio, reduced
 * when the canvas would exceed what browsers can allocate.
 */
export function backingScale(cssW: number, cssH: number, dpr: number): number {
  const w = Math.max(1, cssW);
  const h = Math.max(1, cssH);
  const ratio = dpr > 0 && Number.isFinite(dpr) ? dpr : 1;
  return Math.min(ratio, MAX_CANVAS_SIDE / w, MAX_CANVAS_SIDE / h, Math.sqrt(MAX_CANVAS_AREA / (w * h)));
}

/** Device-pixel edge of column/row boundary `i`; rounding shared edges avoids seams. */
export function edge(i: number, size: number, scale: number): number {
  return Math.round(i * size * scale);
}

/**
 * Where each logged step's cell starts and ends on the step axis: cells are
 * centred on their step and meet halfway to the neighbours, so the x axis is a
 * true step scale and an irregular logging interval shows as wider cells. The
 * outer cells extend half their neighbour gap. Returns n + 1 edges for n step
 * positions (`steps.offsets`), which must not descend: far from the origin,
 * neighbouring steps may round to one position and their cells to no width.
 */
export function columnEdges(steps: ArrayLike<number>): Float64Array {
  const n = steps.length;
  const e = new Float64Array(n + 1);
  if (n === 0) return e;
  if (n === 1) {
    e[0] = steps[0] - 0.5;
    e[1] = steps[0] + 0.5;
    return e;
  }
  e[0] = steps[0] - (steps[1] - steps[0]) / 2;
  for (let j = 1; j < n; j++) e[j] = (steps[j - 1] + steps[j]) / 2;
  e[n] = steps[n - 1] + (steps[n - 1] - steps[n - 2]) / 2;
  return e;
}

/**
 * Column edges of a binned heatmap, as positions from `origin`: each column spans its bin, from its first
 * step (`firsts`) to its last (`lasts`), half a step out. Runs binned alike have their columns at the same steps.
 */
export function binEdges(firsts: readonly Step[], lasts: readonly Step[], origin: Step): Float64Array {
  const n = firsts.length;
  const e = new Float64Array(n + 1);
  for (let j = 0; j < n; j++) e[j] = offset(firsts[j], origin) - 0.5;
  e[n] = n > 0 && lasts.length === n ? offset(lasts[n - 1], origin) + 0.5 : 0.5;
  return e;
}

/** The step range shown: a zoom window in step units, as positions relative to an origin step. */
export interface StepRange {
  lo: number;
  hi: number;
}

export function fullRange(edges: Float64Array): StepRange {
  return { lo: edges[0], hi: edges[edges.length - 1] };
}

/**
 * The range a step axis spans: the cells' (null: no cell) widened to hold `others`, the positions of the first
 * and last point of other series drawn on it (the run's loss, logged past the layers), half a step out as a
 * lone cell's edges are. Neither: one step around 0.
 */
export function spanRange(cells: StepRange | null, others: StepRange | null): StepRange {
  const out = others ? { lo: others.lo - 0.5, hi: others.hi + 0.5 } : null;
  if (!cells) return out ?? { lo: 0, hi: 1 };
  return out ? { lo: Math.min(cells.lo, out.lo), hi: Math.max(cells.hi, out.hi) } : cells;
}

/** Where a step axis reaches, on its own origin step: the range it spans and the stretch where it names steps. */
export interface AxisSpan {
  origin: Step;
  full: StepRange;
  labelled: StepRange;
}

/** A range of positions from origin `from`, as positions from origin `to`: the same steps. */
export function moveRange(r: StepRange, from: Step, to: Step): StepRange {
  const d = offset(from, to);
  return { lo: r.lo + d, hi: r.hi + d };
}

function joinRanges(a: StepRange, b: StepRange): StepRange {
  return { lo: Math.min(a.lo, b.lo), hi: Math.max(a.hi, b.hi) };
}

/**
 * The axis holding every one of `spans` (compared runs' axes, each on its own origin), on `origin`: one step
 * axis for all, so the same step lies at the same x in each. Null when no span is given.
 */
export function unionSpans(spans: readonly (AxisSpan | null)[], origin: Step): AxisSpan | null {
  let out: AxisSpan | null = null;
  for (const s of spans) {
    if (!s) continue;
    const full = moveRange(s.full, s.origin, origin);
    const labelled = moveRange(s.labelled, s.origin, origin);
    out = out ? { origin, full: joinRanges(out.full, full), labelled: joinRanges(out.labelled, labelled) } : { origin, full, labelled };
  }
  return out;
}

/** A stretch of an axis outside the layers' cells, `after` them or before them. */
export interface OutsideRange extends StepRange {
  after: boolean;
}

/** The stretches of `full` outside `logged` (where the layers have cells): before it, after it, or both. */
export function outsideRanges(full: StepRange, logged: StepRange): OutsideRange[] {
  const out: OutsideRange[] = [];
  if (full.lo < logged.lo) out.push({ lo: full.lo, hi: Math.min(full.hi, logged.lo), after: false });
  if (full.hi > logged.hi) out.push({ lo: Math.max(full.lo, logged.hi), hi: full.hi, after: true });
  return out.filter((r) => r.hi > r.lo);
}

/** Clamps a zoom window to the data and keeps it at least one step wide. */
export function clampRange(r: StepRange, full: StepRange): StepRange | null {
  let lo = Math.max(full.lo, Math.min(r.lo, r.hi));
  let hi = Math.min(full.hi, Math.max(r.lo, r.hi));
  if (!(hi > lo)) return null;
  if (hi - lo < 1) {
    const mid = (lo + hi) / 2;
    lo = Math.max(full.lo, mid - 0.5);
    hi = Math.min(full.hi, mid + 0.5);
  }
  // Far from the origin a step is narrower than a double's resolution.
  if (!(hi > lo) || (lo <= full.lo && hi >= full.hi)) return null;
  return { lo, hi };
}

export function xOfStep(step: number, r: StepRange, width: number): number {
  return ((step - r.lo) / (r.hi - r.lo)) * width;
}

export function stepOfX(x: number, r: StepRange, width: number): number {
  return r.lo + (x / width) * (r.hi - r.lo);
}

/** Index j with edges[j] <= v < edges[j + 1], or -1 outside every cell. */
export function columnAt(edges: Float64Array, v: number): number {
  const n = edges.length - 1;
  if (n <= 0 || !(v >= edges[0]) || !(v < edges[n])) return -1;
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (edges[mid] <= v) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** First index j with a[j] >= v, or with a[j] > v when strict. */
function bound(edges: Float64Array, v: number, strict: boolean): number {
  let lo = 0;
  let hi = edges.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (edges[mid] < v || (strict && edges[mid] === v)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export interface PixelColumns {
  /** Per device pixel: first and last column it shows, or -1 / -2 for none. */
  start: Int32Array;
  end: Int32Array;
}

/**
 * Which columns each of `width` pixels across the range shows: the column under
 * the pixel's centre plus every column whose own centre falls inside the pixel.
 * Every column in range is thus shown by at least one pixel: when thousands of
 * steps share few pixels, a pixel can show the worst of them and a single
 * critical step never disappears; when cells are wider than a pixel, each pixel
 * shows exactly its own cell and no cell grows into its neighbour.
 */
export function pixelColumns(edges: Float64Array, r: StepRange, width: number): PixelColumns {
  const w = Math.max(0, Math.floor(width));
  const start = new Int32Array(w);
  const end = new Int32Array(w);
  const n = Math.max(0, edges.length - 1);
  const mids = new Float64Array(n);
  for (let c = 0; c < n; c++) mids[c] = (edges[c] + edges[c + 1]) / 2;
  const span = (r.hi - r.lo) / Math.max(1, w);
  for (let x = 0; x < w; x++) {
    const pxLo = r.lo + x * span;
    const pxHi = pxLo + span;
    const c = columnAt(edges, pxLo + span / 2);
    // Columns with their centre in [pxLo, pxHi): a contiguous run, adjacent to c.
    const a = bound(mids, pxLo, false);
    const b = bound(mids, pxHi, false) - 1;
    let s = c;
    let e = c;
    if (a <= b) {
      s = c < 0 ? a : Math.min(a, c);
      e = c < 0 ? b : Math.max(b, c);
    }
    start[x] = s;
    end[x] = s < 0 ? -2 : e;
  }
  return { start, end };
}

export interface AxisLabel {
  step: Step;
  text: string;
  /** Left edge of the text, in CSS pixels. */
  left: number;
  width: number;
  /** Where the tick goes, in CSS pixels. */
  tick: number;
}

export function labelsOverlap(labels: readonly AxisLabel[], gap = LABEL_GAP): boolean {
  for (let k = 1; k < labels.length; k++) {
    const prev = labels[k - 1];
    if (labels[k].left < prev.left + prev.width + gap) return true;
  }
  return false;
}

/**
 * Step-axis labels that never overlap: round step numbers (multiples of 1, 2, 5,
 * 10, ...) at their true position, with the smallest interval whose labels fit,
 * all in one unit (no "1k, 1200"). The range is in positions relative to
 * `origin`; the labels' steps are exact, however large. `within` (positions too)
 * keeps the labels inside the logged steps: a heatmap's outer cells reach half
 * an interval past its first and last step, and no step is named there.
 */
export function stepAxisLabels(r: StepRange, width: number, measure: Measure, origin: Step = 0n, gap = LABEL_GAP,
  within?: StepRange): AxisLabel[] {
  if (!(width > 0) || !(r.hi > r.lo) || !Number.isFinite(r.hi - r.lo)) return [];
  const first = ceilStep(origin, within ? Math.max(r.lo, within.lo) : r.lo);
  const last = floorStep(origin, within ? Math.min(r.hi, within.hi) : r.hi);
  if (last < first) return [];
  const widest = Math.max(measure(String(first)), measure(String(last)));
  // About this many labels fit side by side; the tick count stays bounded near it.
  const room = Math.max(1, Math.floor(width / (widest + gap)));
  let interval = niceIntervalAtLeast((r.hi - r.lo) / room);
  for (let guard = 0; guard < 64 && Number.isFinite(interval); guard++) {
    const every = BigInt(interval);
    const ticks = multiplesBetween(first, last, every, 4 * room + 4);
    if (ticks !== null) {
      const labels = ticks.map((m): AxisLabel => {
        const tick = xOfStep(offset(m, origin), r, width);
        const text = formatStepTick(m, every);
        const w = measure(text);
        return { step: m, text, width: w, tick, left: Math.max(0, Math.min(tick - w / 2, width - w)) };
      });
      if (labels.length <= 1 || !labelsOverlap(labels, gap)) return labels;
    }
    interval = nextNiceInterval(interval);
  }
  return [];
}

/**
 * Shortens text to fit maxWidth with an ellipsis in the middle. Layer names are
 * paths whose end ("dense_3/kernel") is the most telling part, so two thirds of
 * the kept characters come from the end.
 */
export function truncateMiddle(text: string, maxWidth: number, measure: Measure): string {
  if (measure(text) <= maxWidth) return text;
  const chars = Array.from(text);
  const build = (keep: number): string => {
    const head = Math.floor(keep / 3);
    const tail = keep - head;
    return chars.slice(0, head).join("") + "\u2026" + chars.slice(chars.length - tail).join("");
  };
  let lo = 0;
  let hi = chars.length - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (measure(build(mid)) <= maxWidth) lo = mid;
    else hi = mid - 1;
  }
  return build(lo);
}

export const ROW_LABEL_MIN_W = 80;
export const ROW_LABEL_MAX_W = 260;
const ROW_LABEL_PAD = 16;

/** Width of the row-label column: the longest name, within fixed bounds. */
export function rowLabelWidth(names: readonly string[], measure: Measure): number {
  // Measuring thousands of names per resize is wasted work: the longest few decide.
  const candidates = names.length > 200 ? [...names].sort((a, b) => b.length - a.length).slice(0, 50) : names;
  const widest = candidates.reduce((w, name) => Math.max(w, measure(name)), 0);
  return Math.ceil(clamp(widest + ROW_LABEL_PAD, ROW_LABEL_MIN_W, ROW_LABEL_MAX_W));
}

/** Inner width available for a row label's text in a column of `columnWidth`. */
export function rowLabelTextWidth(columnWidth: number): number {
  return columnWidth - ROW_LABEL_PAD;
}
