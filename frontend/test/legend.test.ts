import { describe, expect, it } from "vitest";
import { parseHeatmap } from "../src/api";
import { healthBands, NONFINITE_COLOR, rgbToCss, STATUS_COLORS, viridis } from "../src/colors";
import { heatmapDomain } from "../src/heatmap";
import { gradientCss, healthGradientCss, legendSwatches } from "../src/legend";

describe("legend swatches", () => {
  it("marks NaN/Inf in the health view as in a metric's, in a paint apart from the critical scores", () => {
    const health = legendSwatches("health");
    expect(health.map(([, label]) => label)).toEqual(["ok", "warn", "critical", "NaN / Inf", "no data"]);
    const [nan] = health.filter(([, label]) => label === "NaN / Inf");
    expect(nan[0]).not.toBe(STATUS_COLORS.critical);
    expect(new Set(health.map(([color]) => color)).size).toBe(health.length);
    expect(legendSwatches("max_abs")).toEqual([[NONFINITE_COLOR, "NaN / Inf"], [STATUS_COLORS.no_data, "no data"]]);
  });
});

describe("legend gradients", () => {
  it("samples a colour map from 0% to 100%", () => {
    const css = gradientCss(viridis, 3);
    expect(css).toBe(
      `linear-gradient(to right, ${rgbToCss(viridis(0))} 0%, ${rgbToCss(viridis(0.5))} 50%, ${rgbToCss(viridis(1))} 100%)`,
    );
  });

  it("draws the health bands with hard edges at their boundaries", () => {
    const css = healthGradientCss();
    expect(css).toContain(`${rgbToCss(healthBands()[0].to)} 25%, ${rgbToCss(healthBands()[1].from)} 25%`);
    expect(css).toContain(`${rgbToCss(healthBands()[1].to)} 60%, ${rgbToCss(healthBands()[2].from)} 60%`);
    expect(css.startsWith("linear-gradient(to right, ")).toBe(true);
    expect(css.endsWith(`${rgbToCss(healthBands()[2].to)} 100%)`)).toBe(true);
  });
});

describe("heatmapDomain", () => {
  const base = {
    layers: ["a", "b"],
    steps: [0, 1],
    values: [[1e-3, 50], [2, null]],
    status: [[1, 0], [3, 0]],
    status_names: ["no_data", "ok", "warn", "critical"],
  };

  it("ignores cells whose status is no_data", () => {
    expect(heatmapDomain(parseHeatmap({ ...base, metric: "l2", scale: "log" }))).toEqual({
      min: 1e-3,
      max: 2,
      scale: "log",
    });
  });

  it("ignores cells of the finite values of a NaN/Inf step", () => {
    const quality = { quality_cells: [[1, 1], [5, 0]], quality_names: ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only"] };
    expect(heatmapDomain(parseHeatmap({ ...base, ...quality, metric: "l2", scale: "log" }))).toEqual({
      min: 1e-3,
      max: 1e-3,
      scale: "log",
    });
  });

  it("has no domain for health, whose colours are fixed", () => {
    expect(heatmapDomain(parseHeatmap({ ...base, metric: "health" }))).toBeNull();
  });
});
