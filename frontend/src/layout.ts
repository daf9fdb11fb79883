// Pure layout: cell sizes, hit testing, which labels to draw and how to shorten them.
// Text widths come from a `measure` callback so the same code runs against a canvas
// in the browser and against a fixed-width estimate in tests.

import { formatStepTick, nextNiceInterval, niceIntervalAtLeast, stepTicks } from "./format";

export type Measure = (text: string) => number;

export const CELL_MIN_W = 1;
export const CELL_MAX_W = 48;
// Rows never get shorter than a row label, so every layer keeps a readable name.
export const CELL_MIN_H = 16;
export const CELL_MAX_H = 28;
export const AXIS_HEIGHT = 26;
export const LABEL_GAP = 12;
// Browsers refuse or silently blank canvases beyond these sizes.
export const MAX_CANVAS_SIDE = 16384;
export const MAX_CANVAS_AREA = 64 * 1024 * 1024;

export interface GridInput {
  rows: number;
  cols: number;
  availableWidth: number;
  availableHeight: number;
}

export interface Grid {
  rows: number;
  cols: number;
  cellW: number;
  cellH: number;
  /** Height of the step axis above the cells, in CSS pixels. */
  axisH: number;
  plotW: number;
  plotH: number;
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(Math.max(v, lo), hi);
}

/**
 * Cell sizes: the steps share the available width (scrolling horizontally once a
 * column would be thinner than a pixel), rows share the available height within
 * readable bounds.
 */
export function computeGrid(input: GridInput): Grid {
  const rows = Math.max(0, Math.floor(input.rows));
  const cols = Math.max(0, Math.floor(input.cols));
  const cellW = cols > 0 ? clamp(input.availableWidth / cols, CELL_MIN_W, CELL_MAX_W) : CELL_MAX_W;
  const cellH = rows > 0 ? clamp(Math.floor(input.availableHeight / rows), CELL_MIN_H, CELL_MAX_H) : CELL_MAX_H;
  return { rows, cols, cellW, cellH, axisH: AXIS_HEIGHT, plotW: cellW * cols, plotH: cellH * rows };
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

/** The cell under a point given in CSS pixels relative to the canvas, if any. */
export function cellAt(x: number, y: number, g: Grid): { row: number; col: number } | null {
  const py = y - g.axisH;
  if (x < 0 || py < 0 || x >= g.plotW || py >= g.plotH) return null;
  const col = Math.min(g.cols - 1, Math.floor(x / g.cellW));
  const row = Math.min(g.rows - 1, Math.floor(py / g.cellH));
  return col >= 0 && row >= 0 ? { row, col } : null;
}

export interface AxisLabel {
  step: number;
  text: string;
  /** Left edge of the text, in CSS pixels. */
  left: number;
  width: number;
  /** Where the tick goes, in CSS pixels. */
  tick: number;
}

function place(step: number, interval: number, tick: number, plotW: number, measure: Measure): AxisLabel {
  const text = formatStepTick(step, interval);
  const width = measure(text);
  // Centred on the tick, but pushed inside the plot at both ends.
  const left = Math.max(0, Math.min(tick - width / 2, plotW - width));
  return { step, text, left, width, tick };
}

export function labelsOverlap(labels: readonly AxisLabel[], gap = LABEL_GAP): boolean {
  for (let k = 1; k < labels.length; k++) {
    const prev = labels[k - 1];
    if (labels[k].left < prev.left + prev.width + gap) return true;
  }
  return false;
}

function greedyLabels(steps: readonly number[], cellW: number, measure: Measure, gap: number): AxisLabel[] {
  const plotW = steps.length * cellW;
  const out: AxisLabel[] = [];
  let freeFrom = -Infinity;
  steps.forEach((step, col) => {
    const label = place(step, 1, (col + 0.5) * cellW, plotW, measure);
    if (label.left >= freeFrom) {
      out.push(label);
      freeFrom = label.left + label.width + gap;
    }
  });
  return out;
}

/**
 * Step-axis labels that never overlap. The axis reads as a step scale: labels are
 * round step numbers (multiples of 1, 2, 5, 10, ...) at their place among the
 * columns, using the smallest interval whose labels fit. A single step, or steps
 * out of order, get a left-to-right greedy pick of the logged steps instead.
 */
export function chooseStepLabels(
  steps: readonly number[],
  cellW: number,
  measure: Measure,
  gap = LABEL_GAP,
): AxisLabel[] {
  const n = steps.length;
  if (n === 0) return [];
  const plotW = n * cellW;
  const ascending = steps.every((s, i) => i === 0 || s > steps[i - 1]);
  if (n > 1 && ascending && steps.every(Number.isInteger)) {
    const range = steps[n - 1] - steps[0];
    const widest = Math.max(measure(String(steps[0])), measure(String(steps[n - 1])));
    // No interval below this can fit, and starting here bounds the tick count by
    // the number of labels the width can hold, however the steps are spread.
    let interval = niceIntervalAtLeast(range / Math.max(1, Math.floor(plotW / (widest + gap))));
    for (;;) {
      const labels = stepTicks(steps, interval).map((t) => place(t.step, interval, t.pos * cellW, plotW, measure));
      if (labels.length === 0) break;
      if (!labelsOverlap(labels, gap)) return labels;
      if (labels.length === 1) break;
      interval = nextNiceInterval(interval);
    }
  }
  return greedyLabels(steps, cellW, measure, gap);
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
export const ROW_LABEL_MAX_W = 280;
const ROW_LABEL_PAD = 16;

/** Width of the row-label column: the longest name, within fixed bounds. */
export function rowLabelWidth(names: readonly string[], measure: Measure): number {
  const widest = names.reduce((w, name) => Math.max(w, measure(name)), 0);
  return Math.ceil(clamp(widest + ROW_LABEL_PAD, ROW_LABEL_MIN_W, ROW_LABEL_MAX_W));
}

/** Inner width available for a row label's text in a column of `columnWidth`. */
export function rowLabelTextWidth(columnWidth: number): number {
  return columnWidth - ROW_LABEL_PAD;
}
