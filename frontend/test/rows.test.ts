import { describe, expect, it } from "vitest";
import { matchesFilter, orderRows, rowSeverity } from "../src/rows";

const NAMES = ["no_data", "ok", "warn", "critical"];

describe("orderRows", () => {
  const layers = ["dense_10/kernel", "dense_2/kernel", "conv/bias", "dense_2/bias"];

  it("keeps model order by default", () => {
    expect(orderRows(layers, "", "model")).toEqual([0, 1, 2, 3]);
  });

  it("sorts names naturally", () => {
    expect(orderRows(layers, "", "name").map((i) => layers[i])).toEqual([
      "conv/bias", "dense_2/bias", "dense_2/kernel", "dense_10/kernel",
    ]);
  });

  it("filters by case-insensitive substrings, every word must match", () => {
    expect(orderRows(layers, "KERNEL", "model")).toEqual([0, 1]);
    expect(orderRows(layers, "dense_2 bias", "model")).toEqual([3]);
    expect(orderRows(layers, "nothing", "model")).toEqual([]);
    expect(matchesFilter("a/b", "  ")).toBe(true);
  });

  it("puts the worst rows first, more bad cells first, model order among equals", () => {
    const sev = rowSeverity({
      status: [
        [1, 1, 1],
        [1, 3, 1],
        [2, 2, 1],
        [3, 3, 0],
      ],
      status_names: NAMES,
    });
    expect(Array.from(sev.worst)).toEqual([1, 3, 2, 3]);
    expect(Array.from(sev.count)).toEqual([3, 1, 2, 2]);
    expect(orderRows(["a", "b", "c", "d"], "", "severity", sev)).toEqual([3, 1, 2, 0]);
  });
});
