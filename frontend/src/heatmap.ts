// Canvas heatmap: rows = layers, columns = logged steps at their true position.
//
// Cells are rasterised once into an offscreen canvas (one pixel row per layer, one
// pixel per device pixel of width) and copied to the screen scaled with
// nearest-neighbour sampling; scrolling and hovering never touch the cells again.
// The step axis and the visible rows are sticky inside a scroll box, so hundreds
// of layers scroll without one DOM node per row. Outlines (hover, selection, a
// finding's span, the zoom brush) live on a transparent overlay canvas.

import { cellQuality } from "./api";
import type { Heatmap } from "./api";
import { metricDomain, STATUS_LABELS, statusName } from "./colors";
import type { Domain } from "./colors";
import { cssVar, el, measurer } from "./dom";
import { formatStep, formatValue, humanize } from "./format";
import {
  AXIS_HEIGHT,
  backingScale,
  clampRange,
  columnAt,
  columnEdges,
  fullRange,
  pixelColumns,
  rowHeight,
  rowLabelStride,
  rowLabelTextWidth,
  rowLabelWidth,
  stepAxisLabels,
  stepOfX,
  truncateMiddle,
  xOfStep,
} from "./layout";
import type { StepRange } from "./layout";
import { buildCells, rasterize } from "./model";
import type { CellModel } from "./model";
import type { Tooltip } from "./tooltip";

export const FONT_FAMILY = "Roboto, sans-serif";
const ROW_FONT = `12px ${FONT_FAMILY}`;
const SMALL_ROW_FONT = `10px ${FONT_FAMILY}`;
const AXIS_FONT = `11px ${FONT_FAMILY}`;
// A drag shorter than this is a click.
const BRUSH_MIN_PX = 5;

/** Domain for the colour map of a heatmap; null for health, which has a fixed one. */
export function heatmapDomain(h: Heatmap): Domain | null {
  if (h.metric === "health") return null;
  return metricDomain(h.metric, h.values, h.scale, (i, j) => statusName(h.status[i][j], h.status_names) === "no_data");
}

export interface HeatmapEvents {
  select(layer: string, step: number): void;
  zoom(range: StepRange | null): void;
  scrolled?(top: number): void;
}

export interface Selection {
  layer: string;
  step: number;
}

interface Geometry {
  labelW: number;
  plotW: number;
  cellH: number;
  viewH: number;
  totalH: number;
  scale: number;
}

interface Hit {
  pos: number;
  row: number;
  col: number;
}

export class HeatmapView {
  readonly root = el("div", "gh-hm");
  readonly caption = el("div", "gh-hm-caption");
  private readonly scroller = el("div", "gh-hm-scroll");
  private readonly axis = el("canvas", "gh-hm-axis");
  private readonly space = el("div", "gh-hm-space");
  private readonly port = el("div", "gh-hm-port");
  private readonly body = el("canvas", "gh-hm-body");
  private readonly overlay = el("canvas", "gh-hm-overlay");
  private offscreen = document.createElement("canvas");

  private h: Heatmap | null = null;
  private model: CellModel | null = null;
  private domain: Domain | null = null;
  private edges: Float64Array = new Float64Array(1);
  private full: StepRange = { lo: 0, hi: 1 };
  private zoomRange: StepRange | null = null;
  private order: number[] = [];
  private position = new Map<string, number>();
  private geo: Geometry | null = null;
  private labels = new Map<string, string>();
  private selection: Selection | null = null;
  private highlight: Map<string, [number, number]> | null = null;
  private hover: Hit | null = null;
  private brush: { x0: number; x1: number } | null = null;
  private pending = 0;
  private rasterDirty = true;

  constructor(
    private readonly tooltip: Tooltip,
    private readonly events: HeatmapEvents,
    private readonly runLabel: () => string = () => "",
  ) {
    this.port.tabIndex = 0;
    this.port.setAttribute("role", "grid");
    this.port.setAttribute("aria-label", "Heatmap: layers by steps. Arrow keys move the selection.");
    this.port.append(this.body, this.overlay);
    this.space.append(this.port);
    this.scroller.append(this.axis, this.space);
    this.root.append(this.caption, this.scroller);
    this.caption.hidden = true;

    this.scroller.addEventListener("scroll", () => {
      this.tooltip.hide();
      this.hover = null;
      this.schedule();
      this.events.scrolled?.(this.scroller.scrollTop);
    });
    for (const target of [this.port, this.axis] as HTMLElement[]) {
      target.addEventListener("mousedown", (e) => this.onDown(e));
      target.addEventListener("dblclick", () => this.events.zoom(null));
    }
    this.port.addEventListener("mousemove", (e) => this.onMove(e));
    this.port.addEventListener("mouseleave", () => {
      this.hover = null;
      this.tooltip.hide();
      this.paintOverlay();
    });
    this.port.addEventListener("keydown", (e) => this.onKey(e));
    window.addEventListener("mousemove", (e) => this.onDrag(e));
    window.addEventListener("mouseup", (e) => this.onUp(e));
  }

  get data(): Heatmap | null {
    return this.h;
  }

  get colorDomain(): Domain | null {
    return this.domain;
  }

  /** New data, colour domain, row order and zoom; keeps selection and highlight. */
  setData(h: Heatmap, domain: Domain | null, order: number[], zoom: StepRange | null): void {
    this.zoomRange = zoom;
    this.h = h;
    this.domain = domain;
    this.model = buildCells(h, domain, this.model);
    this.edges = columnEdges(h.steps);
    this.full = h.steps.length > 0 ? fullRange(this.edges) : { lo: 0, hi: 1 };
    this.setOrder(order);
  }

  setOrder(order: number[]): void {
    this.order = order;
    this.position = new Map(order.map((row, pos) => [this.h?.layers[row] ?? "", pos]));
    this.labels.clear();
    this.rasterDirty = true;
    this.layout();
  }

  setZoom(range: StepRange | null): void {
    this.zoomRange = range;
    this.rasterDirty = true;
    this.paintAll();
  }

  /** The step window in use: the zoom clamped to this heatmap's steps, or all of them. */
  get range(): StepRange {
    return (this.zoomRange && clampRange(this.zoomRange, this.full)) ?? this.full;
  }

  get fullSteps(): StepRange {
    return this.full;
  }

  setSelection(sel: Selection | null): void {
    this.selection = sel;
    this.paintOverlay();
  }

  setHighlight(spans: Map<string, [number, number]> | null): void {
    this.highlight = spans;
    this.paintOverlay();
  }

  setCaption(text: string): void {
    this.caption.hidden = !text;
    this.caption.textContent = text;
  }

  get scrollTop(): number {
    return this.scroller.scrollTop;
  }

  set scrollTop(v: number) {
    if (Math.abs(this.scroller.scrollTop - v) >= 1) this.scroller.scrollTop = v;
  }

  clear(): void {
    this.h = null;
    this.model = null;
    this.geo = null;
    this.tooltip.hide();
    for (const c of [this.axis, this.body, this.overlay]) {
      c.width = 0;
      c.height = 0;
    }
  }

  /** Recomputes sizes for the current container and repaints everything. */
  layout(): void {
    const h = this.h;
    if (!h) return;
    const names = this.order.map((i) => h.layers[i]);
    // Names never take more than a third of the width from the cells (two runs side by side).
    const labelW = Math.min(rowLabelWidth(names, measurer(ROW_FONT)), Math.max(80, Math.floor(this.root.clientWidth / 3)));
    const plotW = Math.max(120, Math.floor(this.root.clientWidth - labelW - 4));
    const maxViewH = Math.max(200, Math.floor(window.innerHeight * 0.62));
    const cellH = rowHeight(this.order.length, maxViewH);
    const totalH = Math.max(cellH, this.order.length * cellH);
    const viewH = Math.min(totalH, maxViewH);
    const width = labelW + plotW;
    const scale = backingScale(width, viewH, window.devicePixelRatio || 1);
    const old = this.geo;
    this.geo = { labelW, plotW, cellH, viewH, totalH, scale };
    if (!old || old.labelW !== labelW || old.plotW !== plotW || old.scale !== scale || old.cellH !== cellH) {
      this.labels.clear();
      this.rasterDirty = true;
    }
    this.scroller.style.height = `${AXIS_HEIGHT + viewH}px`;
    this.space.style.height = `${totalH}px`;
    this.port.style.height = `${viewH}px`;
    this.port.style.top = `${AXIS_HEIGHT}px`;
    size(this.axis, width, AXIS_HEIGHT, scale);
    size(this.body, width, viewH, scale);
    size(this.overlay, width, viewH, scale);
    this.paintAll();
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.paintBody();
      this.paintOverlay();
    });
  }

  /** Paints synchronously: callers (and the benchmark) see the pixels on return. */
  paintAll(): void {
    if (this.pending) {
      cancelAnimationFrame(this.pending);
      this.pending = 0;
    }
    if (this.rasterDirty) this.raster();
    this.paintAxis();
    this.paintBody();
    this.paintOverlay();
  }

  private plotDeviceWidth(): number {
    const g = this.geo;
    return g ? Math.max(1, Math.round(g.plotW * g.scale)) : 1;
  }

  private raster(): void {
    this.rasterDirty = false;
    const m = this.model;
    if (!m || !this.geo) return;
    const w = this.plotDeviceWidth();
    const rows = Math.max(1, this.order.length);
    const px = pixelColumns(this.edges, this.range, w);
    if (this.offscreen.width !== w || this.offscreen.height !== rows) {
      this.offscreen.width = w;
      this.offscreen.height = rows;
    }
    const ctx = this.offscreen.getContext("2d");
    if (!ctx) return;
    const image = ctx.createImageData(w, rows);
    rasterize(m, this.order, px, new Uint32Array(image.data.buffer), 0);
    ctx.putImageData(image, 0, 0);
  }

  private paintBody(): void {
    const g = this.geo;
    const h = this.h;
    const ctx = this.body.getContext("2d");
    if (!g || !h || !ctx) return;
    const s = g.scale;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.body.width, this.body.height);
    const top = this.scroller.scrollTop;
    const first = Math.max(0, Math.floor(top / g.cellH));
    const last = Math.min(this.order.length - 1, Math.floor((top + g.viewH - 1) / g.cellH));
    if (last < first) return;

    const x0 = Math.round(g.labelW * s);
    const w = this.plotDeviceWidth();
    ctx.imageSmoothingEnabled = false;
    const y0 = (first * g.cellH - top) * s;
    const count = last - first + 1;
    ctx.drawImage(this.offscreen, 0, first, w, count, x0, Math.round(y0), w, Math.round(count * g.cellH * s));

    const bg = cssVar("--gh-bg", "#ffffff");
    ctx.fillStyle = bg;
    // One-pixel gutters once cells are big enough to read as a grid.
    if (g.cellH * s >= 8) {
      for (let p = first; p <= last + 1; p++) {
        const y = Math.round((p * g.cellH - top) * s);
        ctx.fillRect(x0, y - 1, w, 1);
      }
    }
    const r = this.range;
    const edges = this.edges;
    const c0 = Math.max(0, columnAt(edges, r.lo));
    const c1 = columnAt(edges, Math.min(r.hi, edges[edges.length - 1] - 1e-9));
    if (c1 >= c0 && (g.plotW * s) / (c1 - c0 + 1) >= 8) {
      for (let c = c0 + 1; c <= c1; c++) {
        const x = x0 + Math.round(xOfStep(edges[c], r, g.plotW) * s);
        ctx.fillRect(x - 1, 0, 1, this.body.height);
      }
    }

    // Row labels: every layer when rows are tall enough, every k-th otherwise.
    ctx.setTransform(s, 0, 0, s, 0, 0);
    const stride = rowLabelStride(g.cellH);
    const font = g.cellH >= 14 ? ROW_FONT : SMALL_ROW_FONT;
    ctx.font = font;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    ctx.fillStyle = cssVar("--gh-fg", "#212121");
    const measure = measurer(font);
    const textW = rowLabelTextWidth(g.labelW);
    for (let p = first - (first % stride); p <= last; p += stride) {
      if (p < first) continue;
      const name = h.layers[this.order[p]];
      let text = this.labels.get(name);
      if (text === undefined) {
        text = truncateMiddle(name, textW, measure);
        this.labels.set(name, text);
      }
      const y = p * g.cellH - top + g.cellH / 2;
      ctx.fillText(text, g.labelW - 8, y);
    }
  }

  private paintAxis(): void {
    const g = this.geo;
    const ctx = this.axis.getContext("2d");
    if (!g || !ctx) return;
    const s = g.scale;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.axis.width, this.axis.height);
    ctx.setTransform(s, 0, 0, s, 0, 0);
    ctx.fillStyle = cssVar("--gh-bg", "#ffffff");
    ctx.fillRect(0, 0, g.labelW + g.plotW, AXIS_HEIGHT);
    ctx.font = AXIS_FONT;
    ctx.fillStyle = cssVar("--gh-muted", "#616161");
    ctx.textAlign = "right";
    ctx.textBaseline = "alphabetic";
    const r = this.range;
    const zoomed = r.lo > this.full.lo || r.hi < this.full.hi;
    ctx.fillText(zoomed ? "step (zoomed)" : "step", g.labelW - 8, AXIS_HEIGHT - 9);
    ctx.textAlign = "left";
    ctx.strokeStyle = cssVar("--gh-border", "#bdbdbd");
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (const label of stepAxisLabels(r, g.plotW, measurer(AXIS_FONT))) {
      const x = g.labelW + Math.round(label.tick * s) / s + 0.5 / s;
      ctx.moveTo(x, AXIS_HEIGHT - 6);
      ctx.lineTo(x, AXIS_HEIGHT - 1);
      ctx.fillText(label.text, g.labelW + label.left, AXIS_HEIGHT - 9);
    }
    ctx.stroke();
  }

  /** CSS-pixel x range (relative to the plot) of the cells of steps a..b, clipped to the plot. */
  private spanX(a: number, b: number): [number, number] | null {
    const g = this.geo;
    if (!g) return null;
    const ca = columnAt(this.edges, a);
    const cb = columnAt(this.edges, b);
    if (ca < 0 || cb < 0) return null;
    const r = this.range;
    const x0 = Math.max(0, xOfStep(this.edges[ca], r, g.plotW));
    const x1 = Math.min(g.plotW, xOfStep(this.edges[cb + 1], r, g.plotW));
    if (x1 <= x0) return null;
    // Keep a cell thinner than a pixel visible.
    return x1 - x0 < 2 ? [x0 - 1, x0 + 1] : [x0, x1];
  }

  private paintOverlay(): void {
    const g = this.geo;
    const ctx = this.overlay.getContext("2d");
    if (!g || !ctx) return;
    const s = g.scale;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.overlay.width, this.overlay.height);
    ctx.setTransform(s, 0, 0, s, 0, 0);
    const top = this.scroller.scrollTop;
    const fg = cssVar("--gh-fg", "#212121");
    const bg = cssVar("--gh-bg", "#ffffff");
    const rowY = (pos: number): number => pos * g.cellH - top;

    if (this.highlight) {
      // Veil everything but the finding's cells, then outline them.
      const rects: [number, number, number, number][] = [];
      for (const [layer, [a, b]] of this.highlight) {
        const pos = this.position.get(layer);
        if (pos === undefined) continue;
        const span = this.spanX(a, b);
        if (!span) continue;
        const y = rowY(pos);
        if (y + g.cellH < 0 || y > g.viewH) continue;
        const last = rects[rects.length - 1];
        const x = g.labelW + span[0];
        const w = span[1] - span[0];
        if (last && last[0] === x && last[2] === w && Math.abs(last[1] + last[3] - y) < 0.5) last[3] += g.cellH;
        else rects.push([x, y, w, g.cellH]);
      }
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
        ctx.strokeRect(ox, oy, ow, oh);
      }
    }

    const sel = this.selection;
    if (sel) {
      const pos = this.position.get(sel.layer);
      const span = pos === undefined ? null : this.spanX(sel.step, sel.step);
      if (pos !== undefined) {
        ctx.fillStyle = fg;
        ctx.globalAlpha = 0.08;
        ctx.fillRect(0, rowY(pos), g.labelW, g.cellH);
        ctx.globalAlpha = 1;
      }
      if (pos !== undefined && span) {
        const w = Math.max(3, span[1] - span[0]);
        ctx.lineWidth = 3;
        ctx.strokeStyle = bg;
        ctx.strokeRect(g.labelW + span[0] - 1.5, rowY(pos) - 1.5, w + 3, g.cellH + 3);
        ctx.lineWidth = 2;
        ctx.strokeStyle = fg;
        ctx.strokeRect(g.labelW + span[0] - 1, rowY(pos) - 1, w + 2, g.cellH + 2);
      }
    }

    const hv = this.hover;
    if (hv && this.h && !this.brush) {
      const step = this.h.steps[hv.col];
      const span = this.spanX(step, step);
      if (span) {
        ctx.lineWidth = 1;
        ctx.strokeStyle = fg;
        ctx.strokeRect(g.labelW + span[0] + 0.5, rowY(hv.pos) + 0.5, Math.max(2, span[1] - span[0] - 1), g.cellH - 1);
      }
    }

    if (this.brush) {
      const a = Math.max(0, Math.min(this.brush.x0, this.brush.x1));
      const b = Math.min(g.plotW, Math.max(this.brush.x0, this.brush.x1));
      ctx.fillStyle = cssVar("--gh-accent", "#f57c00");
      ctx.globalAlpha = 0.2;
      ctx.fillRect(g.labelW + a, 0, b - a, g.viewH);
      ctx.globalAlpha = 1;
      ctx.strokeStyle = cssVar("--gh-accent", "#f57c00");
      ctx.lineWidth = 1;
      ctx.strokeRect(g.labelW + a + 0.5, 0.5, Math.max(0, b - a - 1), g.viewH - 1);
    }
  }

  /** The cell under a point in client coordinates. */
  private hitAt(clientX: number, clientY: number): Hit | null {
    const g = this.geo;
    const h = this.h;
    if (!g || !h) return null;
    const rect = this.port.getBoundingClientRect();
    const x = clientX - rect.left - g.labelW;
    const y = clientY - rect.top;
    if (x < 0 || x >= g.plotW || y < 0 || y >= g.viewH) return null;
    const pos = Math.floor((y + this.scroller.scrollTop) / g.cellH);
    if (pos < 0 || pos >= this.order.length) return null;
    const col = columnAt(this.edges, stepOfX(x, this.range, g.plotW));
    if (col < 0) return null;
    return { pos, row: this.order[pos], col };
  }

  private plotX(clientX: number): number {
    const g = this.geo;
    return g ? clientX - this.port.getBoundingClientRect().left - g.labelW : 0;
  }

  private onMove(e: MouseEvent): void {
    if (this.brush) return;
    const hit = this.hitAt(e.clientX, e.clientY);
    const h = this.h;
    if (!hit || !h) {
      this.hover = null;
      this.paintOverlay();
      this.labelTooltip(e);
      return;
    }
    this.hover = hit;
    this.paintOverlay();
    const { row, col } = hit;
    const status = statusName(h.status[row][col], h.status_names);
    const rule = h.rules[row][col];
    const value = h.values[row][col];
    const lines: [string, string][] = [];
    const run = this.runLabel();
    if (run) lines.push(["run", run]);
    lines.push(
      ["layer", h.layers[row]],
      ["step", formatStep(h.steps[col])],
      [h.metric === "health" ? "score" : humanize(h.metric), value === null ? "no data" : `${formatValue(value)} (${cellQuality(h, row, col)})`],
      ["status", (STATUS_LABELS[status] ?? status) + (rule ? ` \u2014 ${humanize(rule)}` : "")],
    );
    this.tooltip.show(lines, e.clientX, e.clientY);
  }

  /** Hovering a (possibly shortened) row label shows the full layer name. */
  private labelTooltip(e: MouseEvent): void {
    const g = this.geo;
    const h = this.h;
    if (!g || !h) return;
    const rect = this.port.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const pos = Math.floor((e.clientY - rect.top + this.scroller.scrollTop) / g.cellH);
    if (x >= 0 && x < g.labelW && pos >= 0 && pos < this.order.length) {
      this.tooltip.show([["layer", h.layers[this.order[pos]]]], e.clientX, e.clientY);
    } else {
      this.tooltip.hide();
    }
  }

  private dragStart: { x: number; clientX: number; clientY: number } | null = null;

  private onDown(e: MouseEvent): void {
    if (e.button !== 0 || !this.geo) return;
    const x = this.plotX(e.clientX);
    if (x < 0 || x > this.geo.plotW) return;
    this.dragStart = { x, clientX: e.clientX, clientY: e.clientY };
  }

  private onDrag(e: MouseEvent): void {
    const d = this.dragStart;
    if (!d || !this.geo) return;
    const x = this.plotX(e.clientX);
    if (!this.brush && Math.abs(x - d.x) < BRUSH_MIN_PX) return;
    this.brush = { x0: d.x, x1: Math.max(0, Math.min(this.geo.plotW, x)) };
    this.hover = null;
    this.tooltip.hide();
    this.paintOverlay();
  }

  private onUp(e: MouseEvent): void {
    const d = this.dragStart;
    this.dragStart = null;
    if (!d || !this.geo || !this.h) return;
    const brush = this.brush;
    this.brush = null;
    if (brush) {
      const r = this.range;
      const a = stepOfX(Math.min(brush.x0, brush.x1), r, this.geo.plotW);
      const b = stepOfX(Math.max(brush.x0, brush.x1), r, this.geo.plotW);
      this.paintOverlay();
      this.events.zoom(clampRange({ lo: a, hi: b }, this.full));
      return;
    }
    const hit = this.hitAt(d.clientX, d.clientY) ?? this.hitAt(e.clientX, e.clientY);
    if (hit) this.events.select(this.h.layers[hit.row], this.h.steps[hit.col]);
  }

  private onKey(e: KeyboardEvent): void {
    const h = this.h;
    const sel = this.selection;
    if (!h || !sel || !["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"].includes(e.key)) return;
    const pos = this.position.get(sel.layer);
    const col = h.steps.indexOf(sel.step);
    if (pos === undefined || col < 0) return;
    e.preventDefault();
    let p = pos;
    let c = col;
    if (e.key === "ArrowLeft") c = Math.max(0, col - 1);
    if (e.key === "ArrowRight") c = Math.min(h.steps.length - 1, col + 1);
    if (e.key === "ArrowUp") p = Math.max(0, pos - 1);
    if (e.key === "ArrowDown") p = Math.min(this.order.length - 1, pos + 1);
    this.events.select(h.layers[this.order[p]], h.steps[c]);
    this.scrollToLayer(h.layers[this.order[p]], false);
  }

  /** Scrolls the rows so `layer` is visible; centred unless `center` is false and it already shows. */
  scrollToLayer(layer: string, center = true): void {
    const g = this.geo;
    const pos = this.position.get(layer);
    if (!g || pos === undefined) return;
    const y = pos * g.cellH;
    const top = this.scroller.scrollTop;
    if (!center && y >= top && y + g.cellH <= top + g.viewH) return;
    this.scroller.scrollTop = Math.max(0, y - (center ? g.viewH / 2 - g.cellH / 2 : 0));
    this.paintBody();
    this.paintOverlay();
  }

  /**
   * Client coordinates of the centre of a cell, scrolling it into view first;
   * null when the layer or step is not shown. Used by the browser tests and the
   * benchmark to point at cells.
   */
  cellCenter(layer: string, step: number): { x: number; y: number } | null {
    const g = this.geo;
    const pos = this.position.get(layer);
    const span = this.spanX(step, step);
    if (!g || pos === undefined || !span) return null;
    this.scrollToLayer(layer, false);
    const rect = this.port.getBoundingClientRect();
    return {
      x: rect.left + g.labelW + (span[0] + span[1]) / 2,
      y: rect.top + pos * g.cellH - this.scroller.scrollTop + g.cellH / 2,
    };
  }

  /** The whole heatmap (every row, not just the visible ones) on one canvas, for export. */
  toCanvas(title: string): HTMLCanvasElement | null {
    const g = this.geo;
    const h = this.h;
    if (!g || !h) return null;
    if (this.rasterDirty) this.raster();
    const titleH = 24;
    const width = g.labelW + g.plotW;
    const height = titleH + AXIS_HEIGHT + g.totalH;
    const s = Math.min(g.scale, backingScale(width, height, g.scale));
    const out = document.createElement("canvas");
    out.width = Math.round(width * s);
    out.height = Math.round(height * s);
    const ctx = out.getContext("2d");
    if (!ctx) return null;
    ctx.fillStyle = cssVar("--gh-bg", "#ffffff");
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.offscreen, 0, 0, this.offscreen.width, this.offscreen.height,
      Math.round(g.labelW * s), Math.round((titleH + AXIS_HEIGHT) * s), Math.round(g.plotW * s), Math.round(g.totalH * s));
    ctx.drawImage(this.axis, 0, 0, this.axis.width, this.axis.height, 0, Math.round(titleH * s), Math.round(width * s), Math.round(AXIS_HEIGHT * s));
    ctx.setTransform(s, 0, 0, s, 0, 0);
    ctx.fillStyle = cssVar("--gh-fg", "#212121");
    ctx.font = `bold 13px ${FONT_FAMILY}`;
    ctx.textBaseline = "middle";
    ctx.fillText(title, 4, titleH / 2);
    const font = g.cellH >= 14 ? ROW_FONT : SMALL_ROW_FONT;
    ctx.font = font;
    ctx.textAlign = "right";
    const stride = rowLabelStride(g.cellH);
    const measure = measurer(font);
    for (let p = 0; p < this.order.length; p += stride) {
      const name = h.layers[this.order[p]];
      ctx.fillText(truncateMiddle(name, rowLabelTextWidth(g.labelW), measure), g.labelW - 8, titleH + AXIS_HEIGHT + p * g.cellH + g.cellH / 2);
    }
    return out;
  }
}

function size(c: HTMLCanvasElement, w: number, h: number, scale: number): void {
  const dw = Math.max(1, Math.round(w * scale));
  const dh = Math.max(1, Math.round(h * scale));
  if (c.width !== dw) c.width = dw;
  if (c.height !== dh) c.height = dh;
  c.style.width = `${w}px`;
  c.style.height = `${h}px`;
}
