import { describe, expect, it } from "vitest";
import { parseHeatmap } from "../src/api";
import { DIVERGING_LUT, HEALTH_LUTS, hexToRgb, LUT_SIZE, packRgb, VIRIDIS_LUT } from "../src/colors";
import { columnEdges, fullRange, pixelColumns } from "../src/layout";
import { buildCells, HEALTH_NONFINITE_PIXEL, NO_DATA_PIXEL, NONFINITE_PIXEL, NOT_JUDGED_PIXEL, rasterize } from "../src/model";
import { offsets } from "../src/steps";
import { statusRank } from "../src/vocabulary";
import { NO_DATA_COLOR, STATUS_COLORS } from "../src/colors";

const NAMES = ["no_data", "ok", "warn", "critical"];

function heatmap(values: (number | null)[][], status: number[][], metric = "health", scale = "linear"): ReturnType<typeof parseHeatmap> {
  return parseHeatmap({
    layers: values.map((_, i) => `l${i}`),
    steps: values[0].map((_, j) => j * 10),
    values,
    status,
    status_names: NAMES,
    metric,
    scale,
  });
}

describe("buildCells", () => {
  it("colours health cells by status band and missing cells grey", () => {
    const h = heatmap([[1, 0, null]], [[1, 3, 0]]);
    const m = buildCells(h, null);
    expect(m.colors[0]).toBe(HEALTH_LUTS.ok[LUT_SIZE - 1]);
    expect(m.colors[1]).toBe(HEALTH_LUTS.critical[0]);
    expect(m.colors[2]).toBe(NO_DATA_PIXEL);
    expect(NO_DATA_PIXEL).toBe(packRgb(hexToRgb(NO_DATA_COLOR)));
  });

  it("ranks worse statuses and lower scores higher", () => {
    const h = heatmap([[0.9, 0.7, 0.5, 0.3, 0.1, null]], [[1, 1, 2, 2, 3, 0]]);
    const p = Array.from(buildCells(h, null).priority);
    expect(p[1]).toBeGreaterThan(p[0]);
    expect(p[2]).toBeGreaterThan(p[1]);
    expect(p[3]).toBeGreaterThan(p[2]);
    expect(p[4]).toBeGreaterThan(p[3]);
    expect(p[5]).toBe(0);
  });

  it("colours metric cells through the domain", () => {
    const h = heatmap([[1, 100, 10000]], [[1, 1, 3]], "l2", "log");
    const m = buildCells(h, { min: 1, max: 10000, scale: "log" });
    expect(m.colors[0]).toBe(VIRIDIS_LUT[0]);
    expect(m.colors[1]).toBe(VIRIDIS_LUT[128]);
    expect(m.colors[2]).toBe(VIRIDIS_LUT[LUT_SIZE - 1]);
    expect(m.priority[2]).toBeGreaterThan(m.priority[1]);
  });

  it("paints a metric cell whose tensor held NaN/Inf apart from the scale and from no data", () => {
    // mean |x| at 4 steps: ok, all NaN (no value), part NaN (value of the finite part: 0), no data.
    const h = parseHeatmap({
      layers: ["l0"], steps: [0, 10, 20, 30], values: [[5, null, 0, null]], status: [[1, 3, 3, 0]],
      status_names: NAMES, metric: "mean_abs", scale: "linear",
      quality_cells: [[1, 5, 5, 0]], quality_names: ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only"],
    });
    for (const domain of [{ min: 0, max: 10, scale: "linear" as const }, null]) {
      const m = buildCells(h, domain);
      expect(m.colors[1]).toBe(NONFINITE_PIXEL);
      expect(m.colors[2]).toBe(NONFINITE_PIXEL);
      expect(m.colors[3]).toBe(NO_DATA_PIXEL);
      expect(NONFINITE_PIXEL).not.toBe(NO_DATA_PIXEL);
      expect(NONFINITE_PIXEL).toBe(packRgb(hexToRgb(STATUS_COLORS.critical)));
    }
    // A pixel over several steps shows the NaN/Inf one first.
    const m = buildCells(h, { min: 0, max: 10, scale: "linear" });
    expect(m.priority[1]).toBeGreaterThan(m.priority[0]);
  });

  it("paints a cell the server marks not judged in the not-judged grey, whatever its number, and a bound of 0 it did not mark by it", () => {
    const h = parseHeatmap({
      layers: ["k"], steps: [0, 10, 20, 30], values: [[1e-3, 0, 0, 1e-1]], status: [[1, 2, 1, 1]], status_names: NAMES,
      metric: "update_ratio", scale: "log",
      quality_cells: [[4, 6, 6, 4]],
      quality_names: ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only", "not_judged"],
    });
    const m = buildCells(h, { min: 1e-3, max: 1e-1, scale: "log" });
    expect(m.colors[1]).toBe(NOT_JUDGED_PIXEL);
    expect(m.colors[2]).toBe(NOT_JUDGED_PIXEL);
    expect(NOT_JUDGED_PIXEL).toBe(packRgb(hexToRgb(NO_DATA_COLOR)));
    // Never the dark end of the scale, where the lowest ratio shown is painted.
    expect(m.colors[0]).toBe(VIRIDIS_LUT[0]);
    expect(m.colors[1]).not.toBe(VIRIDIS_LUT[0]);
    // The mark decides, not the number: the same 0 as a lower bound the server did not mark is on the scale.
    const unmarked = buildCells({ ...h, quality_cells: [[4, 4, 4, 4]] }, { min: 1e-3, max: 1e-1, scale: "log" });
    expect(unmarked.colors[1]).toBe(VIRIDIS_LUT[0]);
  });

  it("paints a health cell whose tensor held NaN/Inf apart from the critical scores and from no data", () => {
    const qualityNames = ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only"];
    // Health at 4 steps: ok, critical at a NaN step, critical (finite), no data.
    const body = {
      layers: ["l0"], steps: [0, 10, 20, 30], values: [[0.9, 0.05, 0.05, null]], status: [[1, 3, 3, 0]],
      status_names: NAMES, metric: "health", scale: "linear", quality_cells: [[1, 5, 1, 0]], quality_names: qualityNames,
    };
    const m = buildCells(parseHeatmap(body), null);
    expect(m.colors[1]).toBe(HEALTH_NONFINITE_PIXEL);
    expect(m.colors[2]).toBe(HEALTH_LUTS.critical[Math.round((0.05 / 0.25) * (LUT_SIZE - 1))]);
    expect(m.colors[3]).toBe(NO_DATA_PIXEL);
    // No score's shade, nor the status colour a narrow critical cell is widened in.
    for (const lut of Object.values(HEALTH_LUTS)) expect(lut).not.toContain(HEALTH_NONFINITE_PIXEL);
    expect(HEALTH_NONFINITE_PIXEL).not.toBe(packRgb(hexToRgb(STATUS_COLORS.critical)));
    expect(m.priority[1]).toBeGreaterThan(m.priority[2]);
    // In one pixel it is widened to two in its own paint, not in the critical status colour.
    const lone = parseHeatmap({ ...body, values: [[0.9, 0.05, 0.9, 0.9]], status: [[1, 3, 1, 1]], quality_cells: [[1, 5, 1, 1]] });
    const e = columnEdges(offsets(lone.steps));
    const out = new Uint32Array(4);
    rasterize(buildCells(lone, null), [0], pixelColumns(e, fullRange(e), 4), out, 0);
    expect(Array.from(out).filter((c) => c === HEALTH_NONFINITE_PIXEL).length).toBe(2);
  });

  it("knows the status ranks", () => {
    expect(NAMES.map(statusRank)).toEqual([0, 1, 2, 3]);
    expect(statusRank("weird")).toBe(0);
  });
});

describe("rasterize", () => {
  it("paints one pixel row per layer in the given order", () => {
    const h = heatmap([[1, 1], [0, 0]], [[1, 1], [3, 3]]);
    const m = buildCells(h, null);
    const e = columnEdges(offsets(h.steps));
    const px = pixelColumns(e, fullRange(e), 4);
    const out = new Uint32Array(8);
    rasterize(m, [1, 0], px, out, 0);
    expect(Array.from(out.slice(0, 4))).toEqual(new Array(4).fill(m.colors[2]));
    expect(Array.from(out.slice(4))).toEqual(new Array(4).fill(m.colors[0]));
  });

  it("keeps a single critical step visible when many steps share a pixel", () => {
    const n = 1000;
    const values = [Array.from({ length: n }, (_, j) => (j === 537 ? 0.05 : 0.95))];
    const status = [Array.from({ length: n }, (_, j) => (j === 537 ? 3 : 1))];
    const h = heatmap(values, status);
    const m = buildCells(h, null);
    const e = columnEdges(offsets(h.steps));
    const px = pixelColumns(e, fullRange(e), 50);
    const out = new Uint32Array(50);
    rasterize(m, [0], px, out, 0);
    // Two pixels in the status colour (its darkest shade reads as black in one), the rest untouched.
    const red = packRgb(hexToRgb(STATUS_COLORS.critical));
    const at = Array.from(out).flatMap((c, x) => (c === red ? [x] : []));
    expect(at.length).toBe(2);
    expect(at[1] - at[0]).toBe(1);
    expect(Array.from(out).filter((c) => c !== red)).toEqual(new Array(48).fill(m.colors[0]));
  });

  it("widens a one-pixel critical column into its milder neighbour without moving the others", () => {
    // Four columns over 4 pixels: ok, critical, warn, ok.
    const h = heatmap([[0.95, 0.05, 0.5, 0.95]], [[1, 3, 2, 1]]);
    const m = buildCells(h, null);
    const e = columnEdges(offsets(h.steps));
    const out = new Uint32Array(4);
    rasterize(m, [0], pixelColumns(e, fullRange(e), 4), out, 0);
    const red = packRgb(hexToRgb(STATUS_COLORS.critical));
    expect(Array.from(out)).toEqual([m.colors[0], red, red, m.colors[3]]);
    // A critical cell two pixels wide keeps its shade; a metric view keeps its value colours.
    const wide = new Uint32Array(8);
    rasterize(m, [0], pixelColumns(e, fullRange(e), 8), wide, 0);
    expect(Array.from(wide)).toEqual([0, 0, 1, 1, 2, 2, 3, 3].map((j) => m.colors[j]));
    const metric = buildCells(heatmap([[1, 2, 3, 4]], [[1, 3, 2, 1]], "l2"), { min: 1, max: 4, scale: "linear" });
    rasterize(metric, [0], pixelColumns(e, fullRange(e), 4), out, 0);
    expect(Array.from(out)).toEqual(Array.from(metric.colors));
  });

  it("leaves pixels without a column to the background", () => {
    const h = heatmap([[1]], [[1]]);
    const m = buildCells(h, null);
    const px = pixelColumns(columnEdges(offsets(h.steps)), { lo: -10, hi: 10 }, 4);
    const out = new Uint32Array(4);
    rasterize(m, [0], px, out, 7);
    expect(Array.from(out)).toEqual([7, 7, m.colors[0], 7]);
  });
});

describe("extreme values", () => {
  it("colours a metric domain of +-1.7e308 across the whole map", () => {
    const h = heatmap([[-1.7e308, 0, 1.7e308]], [[1, 1, 1]], "mean");
    const m = buildCells(h, { min: -1.7e308, max: 1.7e308, scale: "linear", diverging: true });
    expect(m.colors[0]).toBe(DIVERGING_LUT[0]);
    expect(m.colors[1]).toBe(DIVERGING_LUT[128]);
    expect(m.colors[2]).toBe(DIVERGING_LUT[LUT_SIZE - 1]);
  });
});
