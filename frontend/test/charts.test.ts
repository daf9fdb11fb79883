import { describe, expect, it } from "vitest";
import { drawnValues, floorRuns, floorText } from "../src/charts";

describe("a log chart's values at or below zero", () => {
  const steps = [0n, 10n, 20n, 30n, 40n, 50n, 60n];

  it("are found as runs of consecutive points, exact zeros told from negatives", () => {
    expect(floorRuns([1, 0.5, 0, 0, null, 0, -1])).toEqual([
      { from: 2, to: 3, zero: true }, { from: 5, to: 6, zero: false },
    ]);
    // Missing and non-finite values are no data, not zero.
    expect(floorRuns([1, null, NaN, Infinity, 2])).toEqual([]);
  });

  it("are named by their steps", () => {
    expect(floorText(floorRuns([1, 2, 3, 0, 0, 0, 0]), steps)).toBe("0 at steps 30\u201360");
    expect(floorText(floorRuns([1, -2, 3, 4, 5, 6, 7]), steps)).toBe("\u2264 0 at step 10");
    expect(floorText(floorRuns([0, 1, 0, 1, 0, 1, 0]), steps)).toBe("0 at 4 steps from 0 to 60");
    expect(floorText(floorRuns([0, 0, 1, 0, 1, 1, 0]), steps)).toBe("0 at steps 0\u201310, 30, 60");
    expect(floorText([], steps)).toBe("");
  });
});

describe("a chart at steps whose tensor held NaN or Inf", () => {
  it("draws nothing there: the finite values' statistics are not the tensor's, nor floored as zeros", () => {
    const values = [0.4, 0.5, 0, 0, 0.4];
    const quality = ["exact", "exact", "finite_only", "finite_only", "exact"];
    expect(drawnValues(values, quality)).toEqual([0.4, 0.5, null, null, 0.4]);
    expect(floorRuns(drawnValues(values, quality))).toEqual([]);
    expect(drawnValues([0, 1], ["", ""])).toEqual([0, 1]);
  });

  it("draws no point where a value proves nothing (not_judged), never one on a log chart's floor", () => {
    const drawn = drawnValues([0, 0, 2e-3], ["not_judged", "lower_bound", "lower_bound"]);
    expect(drawn).toEqual([null, 0, 2e-3]);
    expect(floorRuns(drawnValues([0, 0], ["not_judged", "not_judged"]))).toEqual([]);
  });
});
