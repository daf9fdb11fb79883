import { describe, expect, it } from "vitest";
import type { Heatmap } from "../src/api";
import { keptLayers, pastText, summaryText } from "../src/summary";

function heatmap(over: Partial<Heatmap> = {}): Heatmap {
  const layers = ["h.0.attn.c_attn.weight", "h.0.mlp.c_fc.weight", "h.1.attn.c_attn.weight", "h.1.mlp.c_fc.weight"];
  const steps = [200n, 210n, 226n, 230n, 241n, 288n];
  return {
    run: "r", role: "gradient", metric: "max_abs",
    layers, blocks: ["h.0", "h.0", "h.1", "h.1"], steps,
    values: layers.map(() => steps.map(() => 1)), status: layers.map(() => steps.map(() => 1)),
    status_names: ["no_data", "ok", "warn", "critical"], quality: "exact", qualities: ["exact"], finiteOnlyCells: false, notJudgedCells: false, scale: "log",
    rules: layers.map(() => steps.map(() => "")), quality_cells: null, quality_names: [],
    decided_by: layers.map(() => "convention"), incomplete: null,
    binned: false, stepsLast: null, stepOffsets: null, windowSteps: 6, stepsTotal: 6,
    loaded: null, rowWorst: null, blockNames: [], blockWorst: new Map(), blockRows: new Map(), valueRange: null,
    ...over,
  };
}

describe("the summary line", () => {
  it("counts every layer with no filter", () => {
    expect(summaryText(heatmap())).toBe("4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 exact values");
  });

  it("says exact values are exact when some steps held NaN/Inf, and that they did", () => {
    expect(summaryText(heatmap({ finiteOnlyCells: true }))).toBe(
      "4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 exact values; NaN/Inf at some steps");
    expect(summaryText(heatmap({ quality: "finite_only", qualities: ["finite_only"], finiteOnlyCells: true }))).toBe(
      "4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 values of finite numbers only");
  });

  it("says bounds are bounds where some values prove nothing, and that some were not judged", () => {
    const bounds = { quality: "lower_bound", qualities: ["lower_bound"], notJudgedCells: true };
    expect(summaryText(heatmap(bounds))).toBe("4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 lower bounds; not judged at some steps");
    expect(summaryText(heatmap({ quality: "not_judged", qualities: ["not_judged"], notJudgedCells: true }))).toBe(
      "4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 values not judged");
  });

  it("says which qualities a mixed heatmap holds: exact values beside bounds are no estimates", () => {
    expect(summaryText(heatmap({ metric: "zero_fraction", quality: "mixed", qualities: ["exact", "upper_bound"] }))).toBe(
      "4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 exact values and upper bounds");
    expect(summaryText(heatmap({ quality: "mixed", qualities: ["exact", "estimated"] }))).toBe(
      "4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 exact and estimated values");
  });

  it("says how many of the layers the filter keeps", () => {
    expect(keptLayers(heatmap(), "mlp c_fc")).toBe(2);
    expect(summaryText(heatmap(), "mlp.c_fc")).toBe("2 of 4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 exact values");
    expect(summaryText(heatmap(), "nothing")).toMatch(/^0 of 4 layers/);
    expect(summaryText(heatmap(), "h.")).toMatch(/^4 layers/);
  });

  it("describes the steps in a zoom window the loaded columns hold", () => {
    expect(summaryText(heatmap(), "", [226n, 241n])).toBe("4 layers \u00b7 3 steps \u00b7 last 241 \u00b7 exact values");
    expect(summaryText(heatmap(), "", [100n, 400n])).toBe("4 layers \u00b7 6 steps \u00b7 last 288 \u00b7 exact values");
  });

  it("says where the layers' steps end when the loss was logged past them", () => {
    const h = heatmap({ loggedSteps: [200n, 288n] });
    const reach = { first: 0n, last: 299n, lastTags: ["loss"] };
    expect(pastText(h, reach)).toBe("no gradient data after step 288; loss to 299");
    expect(summaryText(h, "", null, reach)).toBe(
      "4 layers · 6 steps · last 288 · exact values · no gradient data after step 288; loss to 299");
    // Zoomed past the layers: no step of theirs in view, still said.
    expect(summaryText(h, "", [290n, 299n], reach)).toBe(
      "4 layers · 0 steps · exact values · no gradient data after step 288; loss to 299");
    // Nothing to say where the scalars end with the layers, or are not known.
    expect(pastText(h, { ...reach, last: 288n })).toBe("");
    expect(pastText(h, null)).toBe("");
    expect(pastText(heatmap({ loggedSteps: null }), reach)).toBe("");
  });

  it("ends a zoomed binned column at the window's end", () => {
    const h = heatmap({ binned: true, steps: [0n, 100n, 200n], stepsLast: [99n, 199n, 299n], windowSteps: 300 });
    expect(summaryText(h, "", [150n, 250n])).toBe("4 layers \u00b7 2 columns \u00b7 last 250 \u00b7 exact values");
    expect(summaryText(h)).toBe("4 layers \u00b7 300 steps in 3 columns \u00b7 last 299 \u00b7 exact values");
  });
});
