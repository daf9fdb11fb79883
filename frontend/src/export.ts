// Downloads: the heatmaps (every row, with title, axis and legend) as one PNG, and
// a run's findings as CSV or JSON.

import type { Finding } from "./api";
import { cssVar, download, measurer } from "./dom";
import { findingsCsv, findingsJson, safeFileName } from "./findings";
import { humanize } from "./format";
import type { HeatmapView } from "./heatmap";
import { FONT_FAMILY, rowFont } from "./heatmap_paint";
import { AXIS_HEIGHT, backingScale, rowLabelStride, rowLabelTextWidth, truncateMiddle } from "./layout";
import { drawLegend } from "./legend";

const TITLE_H = 24;
const GAP = 16;
const LEGEND_H = 28;

/** The whole heatmap of a view (every row, not just the visible ones) on one canvas. */
export function heatmapCanvas(view: HeatmapView, title: string): HTMLCanvasElement | null {
  const s = view.scene;
  const g = s.geo;
  const h = s.h;
  if (!g || !h) return null;
  view.ensureRaster();
  const width = g.labelW + g.plotW;
  const height = TITLE_H + AXIS_HEIGHT + g.totalH;
  const sc = Math.min(g.scale, backingScale(width, height, g.scale));
  const out = document.createElement("canvas");
  out.width = Math.round(width * sc);
  out.height = Math.round(height * sc);
  const ctx = out.getContext("2d");
  if (!ctx) return null;
  ctx.fillStyle = cssVar("--gh-bg", "#ffffff");
  ctx.fillRect(0, 0, out.width, out.height);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(s.offscreen, 0, 0, s.offscreen.width, s.offscreen.height,
    Math.round(g.labelW * sc), Math.round((TITLE_H + AXIS_HEIGHT) * sc), Math.round(g.plotW * sc), Math.round(g.totalH * sc));
  ctx.drawImage(view.axis, 0, 0, view.axis.width, view.axis.height, 0, Math.round(TITLE_H * sc), Math.round(width * sc), Math.round(AXIS_HEIGHT * sc));
  ctx.setTransform(sc, 0, 0, sc, 0, 0);
  ctx.fillStyle = cssVar("--gh-fg", "#212121");
  ctx.font = `bold 13px ${FONT_FAMILY}`;
  ctx.textBaseline = "middle";
  ctx.fillText(title, 4, TITLE_H / 2);
  const font = rowFont(g.cellH);
  ctx.font = font;
  ctx.textAlign = "right";
  const stride = rowLabelStride(g.cellH);
  const measure = measurer(font);
  for (let p = 0; p < s.order.length; p += stride) {
    const name = h.layers[s.order[p]];
    ctx.fillText(truncateMiddle(name, rowLabelTextWidth(g.labelW), measure), g.labelW - 8, TITLE_H + AXIS_HEIGHT + p * g.cellH + g.cellH / 2);
  }
  return out;
}

/** Downloads the shown heatmaps side by side with the legend under them. */
export function exportPng(views: readonly HeatmapView[], view: { run: string; role: string; metric: string }): void {
  const { run, role, metric } = view;
  const canvases = views
    .map((v) => (v.data ? heatmapCanvas(v, `${v.data.run} \u00b7 ${role} \u00b7 ${humanize(metric)}`) : null))
    .filter((c): c is HTMLCanvasElement => c !== null);
  const first = views[0]?.data;
  if (canvases.length === 0 || !first) return;
  const out = document.createElement("canvas");
  out.width = Math.max(360, canvases.reduce((w, c) => w + c.width, 0) + GAP * (canvases.length - 1));
  out.height = Math.max(...canvases.map((c) => c.height)) + LEGEND_H;
  const ctx = out.getContext("2d");
  if (!ctx) return;
  ctx.fillStyle = cssVar("--gh-bg", "#ffffff");
  ctx.fillRect(0, 0, out.width, out.height);
  let x = 0;
  for (const c of canvases) {
    ctx.drawImage(c, x, 0);
    x += c.width + GAP;
  }
  drawLegend(ctx, 8, out.height - LEGEND_H + 6, first.metric, views[0].colorDomain, cssVar("--gh-fg", "#212121"),
    views.some((v) => v.data?.notJudgedCells === true));
  out.toBlob((blob) => {
    if (blob) download(blob, `${safeFileName("gradhealth", run, role, metric)}.png`);
  }, "image/png");
}

export function exportFindings(run: string, findings: readonly Finding[], kind: "csv" | "json"): void {
  const name = safeFileName("gradhealth-findings", run);
  if (kind === "csv") {
    download(new Blob([findingsCsv(findings)], { type: "text/csv;charset=utf-8" }), `${name}.csv`);
  } else {
    download(new Blob([findingsJson(run, findings)], { type: "application/json" }), `${name}.json`);
  }
}
