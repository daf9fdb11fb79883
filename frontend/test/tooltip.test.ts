import { describe, expect, it } from "vitest";
import { parseHeatmap } from "../src/api";
import type { CellRole } from "../src/api";
import { cellTooltipLines, layerLines, ruleValueLine, unloggedLines, withCellAnswer } from "../src/tooltip";

const BASE = {
  run: "R", role: "gradient", metric: "health", layers: ["a", "b"],
  values: [[0.9, 0.9, 0.9], [0.9, 0.9, null]],
  status: [[1, 1, 1], [1, 1, 0]],
  status_names: ["no_data", "ok", "warn", "critical"],
};

describe("the tooltip where the layers logged nothing", () => {
  const h = parseHeatmap({ ...BASE, steps: [0, 10, 20], window: { first_step_text: "0", last_step_text: "150" } });

  it("names the step and the layers' last step (or first, before them)", () => {
    expect(unloggedLines(h, 228n, true, "")).toEqual([["step", "228"],
      ["layers", "not logged: no gradient data after step 150; the run track above shows the steps logged here"]]);
    expect(Object.fromEntries(unloggedLines(h, 0n, false, "R"))).toMatchObject({ run: "R" });
    expect(Object.fromEntries(unloggedLines(h, 0n, false, ""))["layers"]).toMatch(/^not logged: no gradient data before step 0;/);
  });
});

describe("cell tooltip", () => {
  it("calls a value the server marks not judged so, and keeps a positive bound", () => {
    const h = parseHeatmap({
      ...BASE, metric: "update_ratio", steps: [0, 10, 20], values: [[null, 0, 0.2], [0.9, 0.9, null]],
      quality_cells: [[0, 6, 4], [1, 1, 0]],
      quality_names: ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only", "not_judged"],
    });
    const zero = Object.fromEntries(cellTooltipLines(h, 0, 1, ""))["update ratio"];
    expect(zero).toMatch(/^not judged \(a lower bound of 0 proves nothing/);
    expect(zero).not.toMatch(/at least this/);
    expect(Object.fromEntries(cellTooltipLines(h, 0, 2, ""))["update ratio"])
      .toBe("0.2 (lower bound: the true value is at least this)");
  });

  it("names the exact step, however large", () => {
    const h = parseHeatmap({ ...BASE, steps: [0, 0, 0], steps_text: ["1152921504606846976", "1152921504606846977", "1152921504606846978"] });
    expect(Object.fromEntries(cellTooltipLines(h, 0, 1, ""))["step"]).toBe("1,152,921,504,606,846,977");
  });

  it("says the last column is incomplete while the writer is writing it", () => {
    const incomplete = { step: 20, step_text: "20", layers: 1, layers_before: 2 };
    const h = parseHeatmap({ ...BASE, steps: [0, 10, 20], incomplete });
    const last = Object.fromEntries(cellTooltipLines(h, 1, 2, ""));
    expect(last["incomplete"]).toBe("1 of 2 layers so far; the writer may still be writing this step");
    expect(Object.fromEntries(cellTooltipLines(h, 0, 1, ""))["incomplete"]).toBeUndefined();
    const whole = parseHeatmap({ ...BASE, steps: [0, 10, 20] });
    expect(Object.fromEntries(cellTooltipLines(whole, 1, 2, ""))["incomplete"]).toBeUndefined();
  });

  it("names the rule as the findings list does, and says exact or estimated per cell", () => {
    const h = parseHeatmap({
      ...BASE, steps: [0, 10, 20], status: [[1, 2, 3], [1, 1, 0]],
      rules: [["", "dead_units", "exploding_gradients"], ["", "", null]],
      quality_cells: [[1, 1, 2], [2, 5, 0]],
      quality_names: ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only"],
    });
    const warn = Object.fromEntries(cellTooltipLines(h, 0, 1, ""));
    expect(warn["status"]).toBe("warn \u2014 Dead units");
    expect(warn["score"]).toBe("0.9 (exact)");
    expect(Object.fromEntries(cellTooltipLines(h, 0, 2, ""))["score"]).toBe("0.9 (estimated from histogram buckets)");
    // A quality in words, never its code; a score at a NaN/Inf step is no statistic of finite values.
    expect(Object.fromEntries(cellTooltipLines(h, 1, 1, ""))["score"]).toBe("0.9 (this step held NaN/Inf)");
    const metric = parseHeatmap({ ...BASE, metric: "max_abs", steps: [0, 10, 20], quality_cells: [[1, 1, 2], [2, 5, 0]],
      quality_names: ["no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only"] });
    expect(Object.fromEntries(cellTooltipLines(metric, 1, 1, ""))["max abs"]).toBe("0.9 (finite values only: this step also held NaN/Inf)");
  });

  it("says of an ok cell where a rule held how many steps in a row, against the steps a finding needs", () => {
    const h = parseHeatmap({
      ...BASE, steps: [0, 10, 20, 30], values: [[0.6001, 0.6001, 0.9, 0.6001], [0.9, 0.9, 0.9, 0.9]],
      status: [[1, 1, 1, 1], [1, 1, 1, 1]],
      rules: [["vanishing_gradients", "vanishing_gradients", "", "vanishing_gradients"], ["", "", "", ""]],
    });
    const two = Object.fromEntries(cellTooltipLines(h, 0, 1, ""));
    expect(two["status"]).toBe("ok \u2014 Vanishing gradients");
    expect(two["held"]).toBe("vanishing gradients at this step, one of 2 logged steps in a row; a finding needs 5 logged steps in a row");
    expect(Object.fromEntries(cellTooltipLines(h, 0, 3, ""))["held"]).toBe(
      "vanishing gradients at this step only; a finding needs 5 logged steps in a row");
    expect(Object.fromEntries(cellTooltipLines(h, 0, 2, ""))["held"]).toBeUndefined();
    expect(Object.fromEntries(cellTooltipLines(h, 1, 0, ""))["held"]).toBeUndefined();
  });

  it("counts the steps in a row in view where a zoom's window may cut them, and takes the cell answer's count", () => {
    // A zoom's answer: 4 of the run's 60 steps. The stretch at the window's start may begin before it.
    const h = parseHeatmap({
      ...BASE, steps: [20, 21, 22, 23], values: [[0.6001, 0.6001, 0.9, 0.6001], [0.9, 0.9, 0.9, 0.9]],
      status: [[1, 1, 1, 1], [1, 1, 1, 1]], window: { steps: 4, steps_total: 60 },
      rules: [["vanishing_gradients", "vanishing_gradients", "", "vanishing_gradients"], ["", "", "", ""]],
    });
    const lines = cellTooltipLines(h, 0, 1, "");
    expect(Object.fromEntries(lines)["held"]).toBe(
      "vanishing gradients at this step, one of 2 logged steps in a row in view; a finding needs 5 logged steps in a row");
    expect(Object.fromEntries(cellTooltipLines(h, 0, 3, ""))["held"]).toBe(
      "vanishing gradients at this step, the only one in view; a finding needs 5 logged steps in a row");
    // The cell's answer counts over the whole row: its line replaces the heatmap's, in place.
    const whole = "vanishing gradients at this step, one of 4 logged steps in a row; a finding needs 5 logged steps in a row";
    const cell = { held: whole, rule_read: null, metrics: {} } as unknown as CellRole;
    const answered = withCellAnswer(lines, cell, parseHeatmap({ ...BASE, metric: "max_abs", steps: [20, 21, 22] }), "vanishing_gradients");
    expect(answered.map(([k]) => k)).toEqual(lines.map(([k]) => k));
    expect(Object.fromEntries(answered)["held"]).toBe(whole);
    // A health cell also gets its rule's value, after the lines.
    const read = { ...cell, rule_read: { kind: "vanishing_gradients", metric: "small_fraction", abs: false, value: 1,
      quality: "exact", limit: 0.9, side: "above" } } as CellRole;
    expect(withCellAnswer(lines, read, h, "vanishing_gradients").slice(-2)).toEqual(
      [["held", whole], ["small fraction", "1 (exact); rule: above 0.9"]]);
    expect(withCellAnswer(lines, undefined, h, "vanishing_gradients")).toEqual(lines);
  });

  it("says what a module's later call in forward is, on a cell and on a row label", () => {
    const h = parseHeatmap({ ...BASE, layers: ["relu", "relu[1]"], steps: [0, 10, 20] });
    expect(Object.fromEntries(cellTooltipLines(h, 0, 0, ""))["call"]).toBeUndefined();
    const call = Object.fromEntries(cellTooltipLines(h, 1, 0, ""))["call"];
    expect(call).toMatch(/^relu\[1\] is the second call of module relu in forward/);
    expect(layerLines("relu[1]")).toEqual([["layer", "relu[1]"], ["call", call]]);
    expect(layerLines("relu")).toEqual([["layer", "relu"]]);
  });
});

describe("a health cell's rule value", () => {
  const cell = (metrics: CellRole["metrics"]): CellRole => ({
    tags: [], source: "", status: "critical", score: 0.1, rule: "exploding_gradients", held: null, metrics,
    histogram: null, histogram_note: null,
  } as unknown as CellRole);

  it("is the statistic the deciding rule reads, with its quality", () => {
    const c = cell({ max_abs: { value: 1234.5, quality: "estimated" }, l2: { value: 9, quality: "exact" } });
    expect(ruleValueLine(c, "exploding_gradients", "gradient")).toEqual(["max abs", "1235 (estimated from histogram buckets)"]);
    expect(ruleValueLine(cell({ nonfinite: { value: 12, quality: "exact" } }), "nonfinite", "gradient")).toEqual(["nonfinite", "12 (exact)"]);
  });

  it("is the statistic and threshold of the rule that fired there, as the server says, not the kind's chart metric", () => {
    const read = (over: object): CellRole => ({
      ...cell({ mean_abs: { value: 0, quality: "exact" }, small_fraction: { value: 1, quality: "exact" } }),
      rule: "vanishing_gradients",
      rule_read: { kind: "vanishing_gradients", metric: "small_fraction", abs: false, value: 1, quality: "exact",
        limit: 0.9, side: "above", ...over },
    });
    // Vanishing gradients' chart metric is mean |x|; the fraction near zero is what fired.
    expect(ruleValueLine(read({}), "vanishing_gradients", "gradient")).toEqual(["small fraction", "1 (exact); rule: above 0.9"]);
    // One statistic, two thresholds: the update ratio barely moving, not too fast.
    const slow = read({ kind: "update_ratio", metric: "update_ratio", value: 0, limit: 1e-6, side: "below" });
    expect(ruleValueLine(slow, "update_ratio", "weight")).toEqual(["update ratio", "0 (exact); rule: below 1e-6"]);
    const grown = read({ kind: "weight_growth", metric: "mean", abs: true, value: 0.5, limit: 0.3 });
    expect(ruleValueLine(grown, "weight_growth", "weight")).toEqual(["|mean|", "0.5 (exact); rule: above 0.3"]);
    // Without a rule of the cell's kind holding there: the kind's chart metric.
    expect(ruleValueLine({ ...read({}), rule_read: null }, "vanishing_gradients", "gradient")).toEqual(["mean abs", "0 (exact)"]);
  });

  it("reads NaN/Inf where the tensor had no finite value, and is absent where the cell lacks the statistic", () => {
    expect(ruleValueLine(cell({ max_abs: { value: null, quality: "finite_only" } }), "exploding_gradients", "gradient"))
      .toEqual(["max abs", "NaN/Inf (no finite value: this step held NaN/Inf)"]);
    expect(ruleValueLine(cell({}), "exploding_gradients", "gradient")).toBeNull();
    expect(ruleValueLine(undefined, "exploding_gradients", "gradient")).toBeNull();
  });
});
