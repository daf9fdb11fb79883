// Canvas heatmap: rows = layers, columns = steps. Row labels are DOM elements in a
// fixed column so they stay put while a wide heatmap scrolls horizontally.

import type { Heatmap } from "./api";
import { cellColor, computeDomain, NO_DATA_COLOR, rgbToCss, STATUS_LABELS, statusName } from "./colors";
import type { Domain, Rgb } from "./colors";
import { cssVar, el, measurer } from "./dom";
import { formatStep, formatValue } from "./format";
import {
  backingScale,
  cellAt,
  chooseStepLabels,
  computeGrid,
  edge,
  rowLabelTextWidth,
  rowLabelWidth,
  truncateMiddle,
} from "./layout";
import type { AxisLabel, Grid } from "./layout";

export const FONT_FAMILY = "Roboto, sans-serif";
const ROW_FONT = `12px ${FONT_FAMILY}`;
const AXIS_FONT = `11px ${FONT_FAMILY}`;

/** Domain for the colour map of a heatmap; null for health, which has a fixed one. */
export function heatmapDomain(h: Heatmap): Domain | null {
  if (h.metric === "health") return null;
  return computeDomain(h.values, h.scale, (i, j) => statusName(h.status[i][j], h.status_names) === "no_data");
}

export class HeatmapView {
  readonly root: HTMLDivElement;
  private readonly labelColumn: HTMLDivElement;
  private readonly scroller: HTMLDivElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly highlight: HTMLDivElement;
  private readonly tooltip: HTMLDivElement;
  private data: Heatmap | null = null;
  private domain: Domain | null = null;
  private grid: Grid | null = null;

  constructor(tooltip: HTMLDivElement) {
    this.tooltip = tooltip;
    this.root = el("div", "gh-heatmap");
    this.labelColumn = el("div", "gh-rowlabels");
    this.scroller = el("div", "gh-scroller");
    this.canvas = el("canvas", "gh-canvas");
    this.highlight = el("div", "gh-highlight");
    this.highlight.hidden = true;
    this.scroller.append(this.canvas, this.highlight);
    this.root.append(this.labelColumn, this.scroller);
    this.canvas.addEventListener("mousemove", (e) => this.onHover(e));
    this.canvas.addEventListener("mouseleave", () => this.hideHover());
    this.scroller.addEventListener("scroll", () => this.hideHover());
  }

  show(h: Heatmap, domain: Domain | null): void {
    this.data = h;
    this.domain = domain;
    this.hideHover();
    this.draw();
  }

  clear(): void {
    this.data = null;
    this.grid = null;
    this.hideHover();
    this.labelColumn.replaceChildren();
    this.canvas.width = 0;
    this.canvas.height = 0;
  }

  /** Lays out and paints the current data for the current container size. */
  draw(): void {
    const h = this.data;
    if (!h) return;
    const measureRow = measurer(ROW_FONT);
    const measureAxis = measurer(AXIS_FONT);
    const labelW = rowLabelWidth(h.layers, measureRow);
    const top = this.root.getBoundingClientRect().top;
    const grid = computeGrid({
      rows: h.layers.length,
      cols: h.steps.length,
      availableWidth: Math.max(100, this.root.clientWidth - labelW - 2),
      availableHeight: Math.max(100, window.innerHeight - top - 40),
    });
    this.grid = grid;
    const labels = chooseStepLabels(h.steps, grid.cellW, measureAxis);
    const width = Math.ceil(Math.max(grid.plotW, ...labels.map((l) => l.left + l.width)));
    const height = Math.ceil(grid.axisH + grid.plotH);
    this.drawRowLabels(h.layers, labelW, grid, measureRow);
    this.paint(h, grid, labels, width, height);
  }

  private drawRowLabels(layers: readonly string[], labelW: number, grid: Grid, measure: (t: string) => number): void {
    this.labelColumn.style.width = `${labelW}px`;
    const header = el("div", "gh-axis-title", "step");
    header.style.height = `${grid.axisH}px`;
    header.style.lineHeight = `${grid.axisH}px`;
    const textW = rowLabelTextWidth(labelW);
    const rows = layers.map((name) => {
      const row = el("div", "gh-rowlabel", truncateMiddle(name, textW, measure));
      row.title = name;
      row.style.height = `${grid.cellH}px`;
      row.style.lineHeight = `${grid.cellH}px`;
      return row;
    });
    this.labelColumn.replaceChildren(header, ...rows);
  }

  private paint(h: Heatmap, grid: Grid, labels: readonly AxisLabel[], width: number, height: number): void {
    const scale = backingScale(width, height, window.devicePixelRatio || 1);
    const canvas = this.canvas;
    canvas.width = Math.max(1, Math.round(width * scale));
    canvas.height = Math.max(1, Math.round(height * scale));
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext("2d");
    if (!ctx) return;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);

    // Cells in device pixels with rounded shared edges: no seams, no blur.
    const cssCache = new Map<number, string>();
    const css = (c: Rgb | null): string => {
      if (!c) return NO_DATA_COLOR;
      const key = (c[0] << 16) | (c[1] << 8) | c[2];
      let s = cssCache.get(key);
      if (s === undefined) {
        s = rgbToCss(c);
        cssCache.set(key, s);
      }
      return s;
    };
    const top = Math.round(grid.axisH * scale);
    // A one-pixel gutter separates cells once they are big enough to read as a grid.
    const gapX = grid.cellW * scale >= 6 ? 1 : 0;
    const gapY = grid.cellH * scale >= 6 ? 1 : 0;
    for (let i = 0; i < grid.rows; i++) {
      const y0 = top + edge(i, grid.cellH, scale);
      const y1 = top + edge(i + 1, grid.cellH, scale);
      const values = h.values[i];
      const status = h.status[i];
      for (let j = 0; j < grid.cols; j++) {
        const x0 = edge(j, grid.cellW, scale);
        const x1 = edge(j + 1, grid.cellW, scale);
        if (x1 <= x0) continue;
        const name = statusName(status[j], h.status_names);
        ctx.fillStyle = css(cellColor(h.metric, values[j], name, this.domain));
        ctx.fillRect(x0, y0, Math.max(1, x1 - x0 - gapX), Math.max(1, y1 - y0 - gapY));
      }
    }

    ctx.setTransform(scale, 0, 0, scale, 0, 0);
    ctx.font = AXIS_FONT;
    ctx.textBaseline = "alphabetic";
    ctx.textAlign = "left";
    ctx.fillStyle = cssVar("--gh-muted", "#616161");
    ctx.strokeStyle = cssVar("--gh-border", "#bdbdbd");
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (const label of labels) {
      const x = Math.round(label.tick * scale) / scale + 0.5 / scale;
      ctx.moveTo(x, grid.axisH - 6);
      ctx.lineTo(x, grid.axisH - 1);
      ctx.fillText(label.text, label.left, grid.axisH - 9);
    }
    ctx.stroke();
  }

  private onHover(e: MouseEvent): void {
    const h = this.data;
    const g = this.grid;
    if (!h || !g) return;
    const rect = this.canvas.getBoundingClientRect();
    const hit = cellAt(e.clientX - rect.left, e.clientY - rect.top, g);
    if (!hit) {
      this.hideHover();
      return;
    }
    const { row, col } = hit;
    const status = statusName(h.status[row][col], h.status_names);
    const rule = h.rules[row][col];
    const lines: [string, string][] = [
      ["layer", h.layers[row]],
      ["step", formatStep(h.steps[col])],
      [h.metric === "health" ? "score" : h.metric, formatValue(h.values[row][col])],
      ["quality", h.quality || "unknown"],
      ["status", (STATUS_LABELS[status] ?? status) + (rule ? ` (${rule})` : "")],
    ];
    this.tooltip.replaceChildren(
      ...lines.map(([key, value]) => {
        const line = el("div", "gh-tip-line");
        line.append(el("span", "gh-tip-key", key), el("span", "gh-tip-value", value));
        return line;
      }),
    );
    this.tooltip.hidden = false;
    this.placeTooltip(e.clientX, e.clientY);

    const hl = this.highlight;
    hl.hidden = false;
    hl.style.left = `${col * g.cellW}px`;
    hl.style.top = `${g.axisH + row * g.cellH}px`;
    hl.style.width = `${Math.max(g.cellW, 3)}px`;
    hl.style.height = `${g.cellH}px`;
  }

  private placeTooltip(x: number, y: number): void {
    const tip = this.tooltip;
    const pad = 12;
    const w = tip.offsetWidth;
    const ht = tip.offsetHeight;
    // Below-right of the pointer, flipped when it would leave the viewport.
    const left = x + pad + w > window.innerWidth ? Math.max(0, x - pad - w) : x + pad;
    const top = y + pad + ht > window.innerHeight ? Math.max(0, y - pad - ht) : y + pad;
    tip.style.left = `${left}px`;
    tip.style.top = `${top}px`;
  }

  private hideHover(): void {
    this.tooltip.hidden = true;
    this.highlight.hidden = true;
  }
}
