// Painting of the canvas heatmap: the cell raster, the visible rows with their
// labels and gutters, the step axis, and the overlay (finding veil, selection,
// hover, zoom brush). Pure functions of a Scene, so the view keeps only state.

import { cssVar, measurer } from "./dom";
import {
  AXIS_HEIGHT,
  columnAt,
  pixelColumns,
  rowLabelStride,
  rowLabelTextWidth,
  stepAxisLabels,
  truncateMiddle,
  xOfStep,
} from "./layout";
import type { AxisLabel, OutsideRange, StepRange } from "./layout";
import { rasterize } from "./model";
import { formatStep } from "./format";
import { indexOfStep, offset } from "./steps";
import type { Step } from "./steps";
import type { Heatmap, StepSpan } from "./api";
import { isFoldedRow, labelParts } from "./fold";
import { GUESS_MARK, isGuessed } from "./role_guess";
import type { CellModel } from "./model";

export const FONT_FAMILY = "Roboto, sans-serif";
export const ROW_FONT = `12px ${FONT_FAMILY}`;
const SMALL_ROW_FONT = `10px ${FONT_FAMILY}`;
const AXIS_FONT = `11px ${FONT_FAMILY}`;

export interface Geometry {
  labelW: number;
  plotW: number;
  cellH: number;
  viewH: number;
  totalH: number;
  scale: number;
}

export interface Hit {
  pos: number;
  row: number;
  col: number;
}

export interface Selection {
  layer: string;
  step: Step;
}

/** A selected finding's cells: per layer, the spans of steps it covers. */
export interface Highlight {
  spans: Map<string, StepSpan[]>;
  /** A note (info) leaves its cells ok: its outline is dashed, so it never reads as a status. */
  note: boolean;
}

/** What the painters read: the view's data, geometry and marks. */
export interface Scene {
  h: Heatmap | null;
  model: CellModel | null;
  geo: Geometry | null;
  /** The step at position 0: positions (edges, range) are offsets from it. */
  origin: Step;
  edges: Float64Array;
  /** The whole axis: the cells, and the track's scalars where they were logged before or past them. */
  full: StepRange;
  /** Stretches of `full` where these rows logged nothing (the loss went on past their last step): "not logged". */
  unlogged: OutsideRange[];
  /** Positions of the first and last step logged on this axis, rows and track alike: the axis names steps there. */
  labelled: StepRange;
  /** The step window shown. */
  readonly range: StepRange;
  order: number[];
  position: Map<string, number>;
  /** Row labels shortened to fit, by layer name. */
  labels: Map<string, string>;
  selection: Selection | null;
  highlight: Highlight | null;
  hover: Hit | null;
  brush: { x0: number; x1: number } | null;
  offscreen: HTMLCanvasElement;
  readonly scrollTop: number;
}

export function plotDeviceWidth(g: Geometry | null): number {
  return g ? Math.max(1, Math.round(g.plotW * g.scale)) : 1;
}

/** Row label font for a row height. */
export function rowFont(cellH: number): string {
  return cellH >= 14 ? ROW_FONT : SMALL_ROW_FONT;
}

/** Rasterises every row into the offscreen canvas: one pixel row per layer. */
export function raster(s: Scene): void {
  const m = s.model;
  if (!m || !s.geo) return;
  const w = plotDeviceWidth(s.geo);
  const rows = Math.max(1, s.order.length);
  const px = pixelColumns(s.edges, s.range, w);
  if (s.offscreen.width !== w || s.offscreen.height !== rows) {
    s.offscreen.width = w;
    s.offscreen.height = rows;
  }
  const ctx = s.offscreen.getContext("2d");
  if (!ctx) return;
  const image = ctx.createImageData(w, rows);
  rasterize(m, s.order, px, new Uint32Array(image.data.buffer), 0);
  ctx.putImageData(image, 0, 0);
}

function resetCanvas(ctx: CanvasRenderingContext2D, canvas: HTMLCanvasElement): void {
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, canvas.width, canvas.height);
}

/** One-pixel gutters between rows and columns once cells are big enough to read as a grid. */
function paintGutters(ctx: CanvasRenderingContext2D, s: Scene, g: Geometry, rows: [number, number], height: number): void {
  const sc = g.scale;
  const x0 = Math.round(g.labelW * sc);
  const w = plotDeviceWidth(g);
  const top = s.scrollTop;
  ctx.fillStyle = cssVar("--gh-bg", "#ffffff");
  if (g.cellH * sc >= 8) {
    for (let p = rows[0]; p <= rows[1] + 1; p++) ctx.fillRect(x0, Math.round((p * g.cellH - top) * sc) - 1, w, 1);
  }
  const r = s.range;
  const edges = s.edges;
  // A window wholly before or past the cells (the loss logged on after them) has no column to part.
  if (!(r.hi > edges[0] && r.lo < edges[edges.length - 1])) return;
  const c0 = Math.max(0, columnAt(edges, r.lo));
  const c1 = columnAt(edges, Math.min(r.hi, edges[edges.length - 1] - 1e-9));
  // The cells' own width decides, not the plot's: columns stopping short of the axis' end (a compared run
  // shorter than the other, rows not logged past a step) are parted as the same columns would be without it.
  const covered = Math.min(r.hi, edges[c1 + 1]) - Math.max(r.lo, edges[c0]);
  if (c1 >= c0 && (xOfStep(r.lo + covered, r, g.plotW) * sc) / (c1 - c0 + 1) >= 8) {
    for (let c = c0 + 1; c <= c1; c++) ctx.fillRect(x0 + Math.round(xOfStep(edges[c], r, g.plotW) * sc) - 1, 0, 1, height);
  }
}

/**
 * Row labels of positions first..last: every layer when rows are tall enough, every k-th otherwise;
 * a folded block always, as its name is what tells it from the layers around it.
 */
function paintRowLabels(ctx: CanvasRenderingContext2D, s: Scene, h: Heatmap, g: Geometry, rows: [number, number]): void {
  const [first, last] = rows;
  ctx.setTransform(g.scale, 0, 0, g.scale, 0, 0);
  const stride = rowLabelStride(g.cellH);
  const font = rowFont(g.cellH);
  ctx.font = font;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  ctx.fillStyle = cssVar("--gh-fg", "#212121");
  const measure = measurer(font);
  const textW = rowLabelTextWidth(g.labelW);
  for (let p = first; p <= last; p++) {
    if (p % stride !== 0 && !isFoldedRow(h, s.order[p])) continue;
    const name = h.layers[s.order[p]];
    let text = s.labels.get(name);
    if (text === undefined) {
      // A row whose role was guessed says so where it is named.
      const [before, after] = labelParts(h, s.order[p]);
      const mark = after + (isGuessed(h.decided_by[s.order[p]]) ? GUESS_MARK : "");
      text = truncateMiddle(name, textW - measure(before + mark), measure) + mark;
      s.labels.set(name, text);
    }
    const y = p * g.cellH - s.scrollTop + g.cellH / 2;
    ctx.fillText(text, g.labelW - 8, y);
    // A block's disclosure marker stands at the left edge, where a column of them lines up.
    const marker = labelParts(h, s.order[p])[0];
    if (marker) {
      ctx.textAlign = "left";
      ctx.fillText(marker, 4, y);
      ctx.textAlign = "right";
    }
  }
}

/** The visible rows: cells copied from the raster, gutters, labels. */
export function paintBody(s: Scene, canvas: HTMLCanvasElement): void {
  const g = s.geo;
  const h = s.h;
  const ctx = canvas.getContext("2d");
  if (!g || !h || !ctx) return;
  resetCanvas(ctx, canvas);
  const top = s.scrollTop;
  const first = Math.max(0, Math.floor(top / g.cellH));
  const last = Math.min(s.order.length - 1, Math.floor((top + g.viewH - 1) / g.cellH));
  if (last < first) return;
  const w = plotDeviceWidth(g);
  ctx.imageSmoothingEnabled = false;
  const y0 = (first * g.cellH - top) * g.scale;
  const count = last - first + 1;
  ctx.drawImage(s.offscreen, 0, first, w, count, Math.round(g.labelW * g.scale), Math.round(y0), w, Math.round(count * g.cellH * g.scale));
  paintGutters(ctx, s, g, [first, last], canvas.height);
  paintUnlogged(ctx, s, h, g, Math.min(g.viewH, s.order.length * g.cellH - top));
  paintRowLabels(ctx, s, h, g, [first, last]);
  paintLoadingRows(ctx, s, h, g, [first, last]);
}

// "Not logged": stripes across the rows where the axis goes on (for the loss) past their last step. Set
// apart from the grey of "no data" (a row without a value at a logged step) and from the white stripes of
// rows still loading.
const UNLOGGED_STRIPE_GAP = 8;
const UNLOGGED_LABEL_PAD = 6;

/** Plot x ranges (CSS pixels) of the stretches not logged in the window shown, each at least a pixel wide. */
export function unloggedX(s: Scene): { a: number; b: number; after: boolean }[] {
  const g = s.geo;
  if (!g) return [];
  return s.unlogged.flatMap((u) => {
    const a = Math.max(0, xOfStep(u.lo, s.range, g.plotW));
    const b = Math.min(g.plotW, xOfStep(u.hi, s.range, g.plotW));
    return b - a >= 1 ? [{ a, b, after: u.after }] : [];
  });
}

/** The words over a stretch not logged: after the rows' last step, or before their first. */
export function unloggedLabel(h: Heatmap, after: boolean): string {
  const ends = h.loggedSteps;
  if (!ends) return "not logged";
  return after ? `not logged after step ${formatStep(ends[1])}` : `not logged before step ${formatStep(ends[0])}`;
}

function paintUnlogged(ctx: CanvasRenderingContext2D, s: Scene, h: Heatmap, g: Geometry, bottom: number): void {
  if (bottom <= 0) return;
  ctx.setTransform(g.scale, 0, 0, g.scale, 0, 0);
  const measure = measurer(AXIS_FONT);
  for (const { a, b, after } of unloggedX(s)) {
    const x = g.labelW + a;
    const w = b - a;
    ctx.save();
    ctx.beginPath();
    ctx.rect(x, 0, w, bottom);
    ctx.clip();
    ctx.fillStyle = cssVar("--gh-panel", "#f5f5f5");
    ctx.fillRect(x, 0, w, bottom);
    ctx.strokeStyle = cssVar("--gh-border", "#d0d0d0");
    ctx.lineWidth = 1;
    ctx.beginPath();
    // Stripes falling to the right (the loading rows' rise): anchored to the plot, so they do not crawl on a zoom.
    const start = g.labelW + Math.floor((a - bottom) / UNLOGGED_STRIPE_GAP) * UNLOGGED_STRIPE_GAP;
    for (let d = start; d < x + w; d += UNLOGGED_STRIPE_GAP) {
      ctx.moveTo(d, 0);
      ctx.lineTo(d + bottom, bottom);
    }
    ctx.stroke();
    // Its name along the top, where it fits: the longest that does.
    const text = [unloggedLabel(h, after), "not logged"].find((t) => measure(t) + 2 * UNLOGGED_LABEL_PAD <= w);
    if (text && bottom >= 14) {
      ctx.font = AXIS_FONT;
      ctx.textAlign = "left";
      ctx.textBaseline = "middle";
      ctx.fillStyle = cssVar("--gh-muted", "#616161");
      ctx.fillText(text, x + UNLOGGED_LABEL_PAD, Math.min(bottom / 2, 12));
    }
    ctx.restore();
  }
}

// The stripes across a row still loading: its cells are not here, so no status (not even "no data")
// is drawn, nor the worst status the server counted (a red bar read as a critical layer).
const LOADING_STRIPE = "rgba(255, 255, 255, 0.75)";
const LOADING_STRIPE_GAP = 6;

/** Rows still loading: diagonal stripes over their cells, set apart from the grey of "no data". */
function paintLoadingRows(ctx: CanvasRenderingContext2D, s: Scene, h: Heatmap, g: Geometry, rows: [number, number]): void {
  const { loaded } = h;
  if (!loaded) return;
  ctx.setTransform(g.scale, 0, 0, g.scale, 0, 0);
  ctx.strokeStyle = LOADING_STRIPE;
  ctx.lineWidth = 2;
  for (let p = rows[0]; p <= rows[1]; p++) {
    if (loaded[s.order[p]]) continue;
    const y = p * g.cellH - s.scrollTop;
    ctx.save();
    ctx.beginPath();
    ctx.rect(g.labelW, y, g.plotW, g.cellH);
    ctx.clip();
    ctx.beginPath();
    // Anchored to the rows' top, so the stripes of neighbouring loading rows line up as one band.
    const phase = (p * g.cellH) % LOADING_STRIPE_GAP;
    for (let x = g.labelW - g.cellH - phase; x < g.labelW + g.plotW; x += LOADING_STRIPE_GAP) {
      ctx.moveTo(x, y + g.cellH);
      ctx.lineTo(x + g.cellH, y);
    }
    ctx.stroke();
    ctx.restore();
  }
}

/** The step axis' labels: round steps in the window shown, never outside the logged steps. */
export function axisLabels(s: Scene): AxisLabel[] {
  const g = s.geo;
  const h = s.h;
  if (!g || !h || h.steps.length === 0) return [];
  return stepAxisLabels(s.range, g.plotW, measurer(AXIS_FONT), s.origin, undefined, s.labelled);
}

export function paintAxis(s: Scene, canvas: HTMLCanvasElement): void {
  const g = s.geo;
  const ctx = canvas.getContext("2d");
  if (!g || !ctx) return;
  const sc = g.scale;
  resetCanvas(ctx, canvas);
  ctx.setTransform(sc, 0, 0, sc, 0, 0);
  ctx.fillStyle = cssVar("--gh-bg", "#ffffff");
  ctx.fillRect(0, 0, g.labelW + g.plotW, AXIS_HEIGHT);
  ctx.font = AXIS_FONT;
  ctx.fillStyle = cssVar("--gh-muted", "#616161");
  ctx.textAlign = "right";
  ctx.textBaseline = "alphabetic";
  const r = s.range;
  const zoomed = r.lo > s.full.lo || r.hi < s.full.hi;
  ctx.fillText(zoomed ? "step (zoomed)" : "step", g.labelW - 8, AXIS_HEIGHT - 9);
  ctx.textAlign = "left";
  ctx.strokeStyle = cssVar("--gh-border", "#bdbdbd");
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (const label of axisLabels(s)) {
    const x = g.labelW + Math.round(label.tick * sc) / sc + 0.5 / sc;
    ctx.moveTo(x, AXIS_HEIGHT - 6);
    ctx.lineTo(x, AXIS_HEIGHT - 1);
    ctx.fillText(label.text, g.labelW + label.left, AXIS_HEIGHT - 9);
  }
  ctx.stroke();
}

/** The column of a step: its own when logged (exactly, however large), else the cell it falls in; -1 outside. */
export function columnOfStep(s: Scene, step: Step): number {
  const exact = s.h ? indexOfStep(s.h.steps, step) : -1;
  return exact >= 0 ? exact : columnAt(s.edges, offset(step, s.origin));
}

/** CSS-pixel x range (relative to the plot) of the cells of steps a..b, clipped to the plot. */
export function spanX(s: Scene, a: Step, b: Step): [number, number] | null {
  return columnsX(s, columnOfStep(s, a), columnOfStep(s, b));
}

/** CSS-pixel x range (relative to the plot) of columns ca..cb, clipped to the plot. */
function columnsX(s: Scene, ca: number, cb: number): [number, number] | null {
  const g = s.geo;
  if (!g) return null;
  if (ca < 0 || cb < 0) return null;
  const r = s.range;
  const x0 = Math.max(0, xOfStep(s.edges[ca], r, g.plotW));
  const x1 = Math.min(g.plotW, xOfStep(s.edges[cb + 1], r, g.plotW));
  if (x1 <= x0) return null;
  // Keep a cell thinner than a pixel visible.
  return x1 - x0 < 2 ? [x0 - 1, x0 + 1] : [x0, x1];
}

interface Ink {
  ctx: CanvasRenderingContext2D;
  g: Geometry;
  fg: string;
  bg: string;
  rowY(pos: number): number;
}

/**
 * The finding's cells as rectangles in CSS pixels ([x, y, width, height], x from
 * the canvas' left edge), one per span of each shown layer, spans equal in
 * adjacent rows merged into one. Rows scrolled out of view are included.
 */
export function highlightRects(s: Scene, spans: Map<string, StepSpan[]>): [number, number, number, number][] {
  const g = s.geo;
  if (!g) return [];
  const cells: [number, number, number][] = [];
  for (const [layer, list] of spans) {
    const pos = s.position.get(layer);
    if (pos === undefined) continue;
    for (const [a, b] of list) {
      const span = spanX(s, a, b);
      if (span) cells.push([pos, g.labelW + span[0], span[1] - span[0]]);
    }
  }
  // Top to bottom, so equal spans of neighbouring rows meet.
  cells.sort((p, q) => p[0] - q[0] || p[1] - q[1] || p[2] - q[2]);
  const rects: [number, number, number, number][] = [];
  const open = new Map<string, [number, number, number, number]>();
  for (const [k, [pos, x, w]] of cells.entries()) {
    // Members of one folded block share its row: their equal spans are one cell.
    const above = cells[k - 1];
    if (above && above[0] === pos && above[1] === x && above[2] === w) continue;
    const y = pos * g.cellH - s.scrollTop;
    const key = `${x}:${w}`;
    const prev = open.get(key);
    if (prev && Math.abs(prev[1] + prev[3] - y) < 0.5) {
      prev[3] += g.cellH;
    } else {
      const rect: [number, number, number, number] = [x, y, w, g.cellH];
      rects.push(rect);
      open.set(key, rect);
    }
  }
  return rects;
}

/** Veils everything but the finding's cells, then outlines them (dashed for a note); no rows, no veil. */
function paintHighlight(s: Scene, ink: Ink, hl: Highlight): void {
  const { ctx, g, fg, bg } = ink;
  const rects = highlightRects(s, hl.spans).filter(([, y, , hh]) => y + hh >= 0 && y <= g.viewH);
  if (![...hl.spans.keys()].some((layer) => s.position.has(layer))) return;
  ctx.globalAlpha = 0.55;
  ctx.fillStyle = bg;
  ctx.fillRect(g.labelW, 0, g.plotW, g.viewH);
  ctx.globalAlpha = 1;
  for (const [x, y, w, hh] of rects) ctx.clearRect(x, y, w, hh);
  // Outlines stay inside the plot so a span reaching its edge keeps all four sides.
  const right = g.labelW + g.plotW;
  for (const [x, y, w, hh] of rects) {
    const ox = Math.max(g.labelW + 1, x - 1);
    const ow = Math.min(right - 1, x + w + 1) - ox;
    const oy = Math.max(1, y - 1);
    const oh = Math.min(g.viewH - 1, y + hh + 1) - oy;
    ctx.lineWidth = 4;
    ctx.strokeStyle = bg;
    ctx.strokeRect(ox, oy, ow, oh);
    ctx.lineWidth = 2;
    ctx.strokeStyle = fg;
    ctx.setLineDash(hl.note ? [4, 3] : []);
    ctx.strokeRect(ox, oy, ow, oh);
    ctx.setLineDash([]);
  }
}

function paintSelection(s: Scene, ink: Ink, sel: Selection): void {
  const { ctx, g, fg, bg } = ink;
  const pos = s.position.get(sel.layer);
  if (pos === undefined) return;
  const span = spanX(s, sel.step, sel.step);
  ctx.fillStyle = fg;
  ctx.globalAlpha = 0.08;
  ctx.fillRect(0, ink.rowY(pos), g.labelW, g.cellH);
  ctx.globalAlpha = 1;
  if (!span) return;
  const w = Math.max(3, span[1] - span[0]);
  ctx.lineWidth = 3;
  ctx.strokeStyle = bg;
  ctx.strokeRect(g.labelW + span[0] - 1.5, ink.rowY(pos) - 1.5, w + 3, g.cellH + 3);
  ctx.lineWidth = 2;
  ctx.strokeStyle = fg;
  ctx.strokeRect(g.labelW + span[0] - 1, ink.rowY(pos) - 1, w + 2, g.cellH + 2);
}

/**
 * Hatches the last column while the writer is still writing it (fewer layers
 * have it than the step before), so its missing cells read as "not yet", not as holes.
 */
function paintIncomplete(s: Scene, ink: Ink, h: Heatmap): void {
  if (!h.incomplete) return;
  const span = columnsX(s, h.steps.length - 1, h.steps.length - 1);
  if (!span) return;
  const { ctx, g } = ink;
  const x = g.labelW + span[0];
  const w = Math.max(2, span[1] - span[0]);
  const bottom = Math.min(g.viewH, s.order.length * g.cellH - s.scrollTop);
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, 0, w, bottom);
  ctx.clip();
  ctx.globalAlpha = 0.35;
  ctx.fillStyle = ink.bg;
  ctx.fillRect(x, 0, w, bottom);
  ctx.globalAlpha = 0.8;
  ctx.strokeStyle = ink.bg;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  for (let d = -bottom; d < w; d += 6) {
    ctx.moveTo(x + d, bottom);
    ctx.lineTo(x + d + bottom, 0);
  }
  ctx.stroke();
  ctx.restore();
}

function paintHover(s: Scene, ink: Ink, hv: Hit): void {
  const span = columnsX(s, hv.col, hv.col);
  if (!span) return;
  ink.ctx.lineWidth = 1;
  ink.ctx.strokeStyle = ink.fg;
  ink.ctx.strokeRect(ink.g.labelW + span[0] + 0.5, ink.rowY(hv.pos) + 0.5, Math.max(2, span[1] - span[0] - 1), ink.g.cellH - 1);
}

function paintBrush(ink: Ink, brush: { x0: number; x1: number }): void {
  const { ctx, g } = ink;
  const a = Math.max(0, Math.min(brush.x0, brush.x1));
  const b = Math.min(g.plotW, Math.max(brush.x0, brush.x1));
  ctx.fillStyle = cssVar("--gh-accent", "#f57c00");
  ctx.globalAlpha = 0.2;
  ctx.fillRect(g.labelW + a, 0, b - a, g.viewH);
  ctx.globalAlpha = 1;
  ctx.strokeStyle = cssVar("--gh-accent", "#f57c00");
  ctx.lineWidth = 1;
  ctx.strokeRect(g.labelW + a + 0.5, 0.5, Math.max(0, b - a - 1), g.viewH - 1);
}

/** The marks over the cells: a finding's span, the selection, the hovered cell, the zoom brush. */
export function paintOverlay(s: Scene, canvas: HTMLCanvasElement): void {
  const g = s.geo;
  const ctx = canvas.getContext("2d");
  if (!g || !ctx) return;
  resetCanvas(ctx, canvas);
  ctx.setTransform(g.scale, 0, 0, g.scale, 0, 0);
  const top = s.scrollTop;
  const ink: Ink = { ctx, g, fg: cssVar("--gh-fg", "#212121"), bg: cssVar("--gh-bg", "#ffffff"), rowY: (pos) => pos * g.cellH - top };
  if (s.h) paintIncomplete(s, ink, s.h);
  if (s.highlight) paintHighlight(s, ink, s.highlight);
  if (s.selection) paintSelection(s, ink, s.selection);
  if (s.hover && s.h && !s.brush) paintHover(s, ink, s.hover);
  if (s.brush) paintBrush(ink, s.brush);
}
