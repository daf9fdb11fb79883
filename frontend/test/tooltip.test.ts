import { describe, expect, it } from "vitest";
import { parseHeatmap } from "../src/api";
import { cellTooltipLines } from "../src/tooltip";

const BASE = {
  run: "R", role: "gradient", metric: "health", layers: ["a", "b"],
  values: [[0.9, 0.9, 0.9], [0.9, 0.9, null]],
  status: [[1, 1, 1], [1, 1, 0]],
  status_names: ["no_data", "ok", "warn", "critical"],
};

describe("cell tooltip", () => {
  it("names the exact step, however large", () => {
    const h = parseHeatmap({ ...BASE, steps: [0, 0, 0], steps_text: ["1152921504606846976", "1152921504606846977", "1152921504606846978"] });
    expect(Object.fromEntries(cellTooltipLines(h, 0, 1, ""))["step"]).toBe("1,152,921,504,606,846,977");
  });
});
