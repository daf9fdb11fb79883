import { describe, expect, it } from "vitest";
import { parseHeatmap } from "../src/api";
import { healthBands, NONFINITE_COLOR, rgbToCss, STATUS_COLORS, viridis } from "../src/colors";
import { heatmapDomain } from "../src/heatmap";
import { gradientCss, healthGradientCss, legendSwatches, scaleMeaning } from "../src/legend";

describe("legend swatches", () => {
  it("marks NaN/Inf in the health view as in a metric's, in a paint apart from the critical scores", () => {
    const health = legendSwatches("health");
    expect(health.map(([, label]) => label)).toEqual(["ok", "warn", "critical", "NaN / Inf", "no data"]);
    const [nan] = health.filter(([, label]) => label === "NaN / Inf");
    expect(nan[0]).not.toBe(STATUS_COLORS.critical);
    expect(new Set(health.map(([color]) => color)).size).toBe(health.length);
    expect(legendSwatches("max_abs").map(([color, label]) => [color, label])).toEqual(
      [[NONFINITE_COLOR, "NaN / Inf"], [STATUS_COLORS.no_data, "no data"]]);
  });

  it("names not judged on the grey swatch where some cell proves nothing, in the paint such cells get", () => {
    const [, grey] = legendSwatches("update_ratio", true);
    expect(grey[0]).toBe(STATUS_COLORS.no_data);
    expect(grey[1]).toBe("no data / not judged");
    expect(grey[2]).toMatch(/^no data: nothing logged for this layer at this step; not judged: a lower bound of 0 proves nothing/);
  });

  it("says in one sentence what each item means", () => {
    const meanings = Object.fromEntries(legendSwatches("health").map(([, label, meaning]) => [label, meaning]));
    expect(meanings).toEqual({
      ok: "ok: no warn or critical finding covers this layer at this step",
      warn: "warn: a warn finding covers this layer at this step",
      critical: "critical: a critical finding covers this layer at this step",
      "NaN / Inf": "NaN / Inf: this step's tensor held NaN or Inf; painted apart from the colour scale, whatever its finite values say",
      "no data": "no data: nothing logged for this layer at this step",
    });
  });

  it("says what a colour scale's values are, in the words of their quality", () => {
    expect(scaleMeaning(["lower_bound"])).toMatch(/\. Lower bound: the true value is at least this$/);
    expect(scaleMeaning(["lower_bound", "not_judged"])).toMatch(/\. Lower bound: the true value is at least this$/);
    expect(scaleMeaning(["exact", "upper_bound"])).toMatch(/\. Values: exact values and upper bounds$/);
    expect(scaleMeaning([])).toBe("the colour scale, from the lowest to the highest value shown; cells painted apart from it are not on it");
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

  it("ignores cells the server marks not judged (painted so), whatever their number", () => {
    const quality = {
      quality_cells: [[4, 0], [6, 0]],
      quality_names: ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only", "not_judged"],
    };
    const zeros = { ...base, values: [[1e-3, 50], [0, null]] };
    expect(heatmapDomain(parseHeatmap({ ...zeros, ...quality, metric: "update_ratio", scale: "linear" }))).toEqual({
      min: 1e-3,
      max: 1e-3,
      scale: "linear",
    });
  });

  it("has no domain for health, whose colours are fixed", () => {
    expect(heatmapDomain(parseHeatmap({ ...base, metric: "health" }))).toBeNull();
  });
});
