import { describe, expect, it } from "vitest";
import { cellStep, columnOfStep, fetchHeatmap, holdsEveryStep, parseHeatmap } from "../src/api";
import type { FetchLike } from "../src/api";

// Two bins of a 20-step run: steps 0-9 and 10-19; row 0's worst cells at steps 7 and 10.
const BINNED = {
  run: "R", role: "gradient", metric: "health",
  layers: ["a", "b"],
  steps: [0, 10], steps_text: ["0", "10"], steps_last_text: ["9", "19"],
  step_offsets: [[7, 0], [0, "9"]],
  values: [[0.1, 0.5], [0.9, 0.8]],
  status: [[3, 2], [1, 1]],
  rules: [["nonfinite", "spike"], ["", ""]],
  binned: true,
  window: { start_text: null, end_text: null, steps: 20, steps_total: 20 },
};

describe("a binned heatmap", () => {
  it("names each cell's own step and finds the column of any step", () => {
    const h = parseHeatmap(BINNED);
    expect(h.binned).toBe(true);
    expect(cellStep(h, 0, 0)).toBe(7n);
    expect(cellStep(h, 0, 1)).toBe(10n);
    expect(cellStep(h, 1, 1)).toBe(19n);
    expect([0n, 7n, 9n, 10n, 19n, 20n, -1n].map((s) => columnOfStep(h, s))).toEqual([0, 0, 0, 1, 1, -1, -1]);
    expect(holdsEveryStep(h)).toBe(false);
  });

  it("refuses offsets or last steps that do not match the columns", () => {
    expect(() => parseHeatmap({ ...BINNED, step_offsets: [[7], [0, 0]] })).toThrow(/step_offsets\[0\]/);
    expect(() => parseHeatmap({ ...BINNED, steps_last_text: ["9"] })).toThrow(/steps_last_text/);
  });

  it("asks for a window and a column budget", async () => {
    const seen: string[] = [];
    const fetchFn: FetchLike = async (url) => {
      seen.push(url);
      return new Response(JSON.stringify(BINNED), { status: 200 });
    };
    await fetchHeatmap("R", "gradient", "health", fetchFn, { columns: 512, window: [3n, 2n ** 63n - 1n] });
    expect(seen[0]).toContain("columns=512");
    expect(seen[0]).toContain("start=3&end=9223372036854775807");
  });

  it("reads the compact layout as the same cells", () => {
    // BINNED's cells: one byte each naming its [status, quality, rule]; values 3 bytes each (a double's
    // top 3: 0.1, 0.5, 0.9 and 0.8 rounded to 13 significant bits), offsets a byte each, row after row.
    const compact = {
      ...BINNED, status: undefined, rules: undefined,
      cell_kinds: [[3, 2, "nonfinite"], [2, 2, "spike"], [1, 2, ""]],
      cells: btoa(String.fromCharCode(0, 1, 2, 2)), cell_bytes: 1,
      values: btoa(String.fromCharCode(0x3f, 0xb9, 0x9a, 0x3f, 0xe0, 0x00, 0x3f, 0xec, 0xcd, 0x3f, 0xe9, 0x9a)),
      value_encoding: "f64top24",
      step_offsets: btoa(String.fromCharCode(7, 0, 0, 9)), step_offset_bytes: 1,
    };
    const rowsOf = parseHeatmap(BINNED);
    const h = parseHeatmap(compact);
    expect(h.status).toEqual(rowsOf.status);
    expect(h.rules).toEqual(rowsOf.rules);
    h.values.forEach((row, i) => row.forEach((v, j) => expect(v).toBeCloseTo(rowsOf.values[i][j] as number, 3)));
    expect(h.values[0][1]).toBe(0.5);
    expect(h.stepOffsets).toEqual([[7, 0], [0, 9]]);
    expect(h.quality_cells).toEqual([[2, 2], [2, 2]]);
    expect(cellStep(h, 1, 1)).toBe(19n);
    // Two bytes a cell, little-endian.
    const wide = parseHeatmap({ ...compact, cell_bytes: 2, cells: btoa(String.fromCharCode(2, 0, 1, 0, 0, 0, 0, 0)) });
    expect(wide.status).toEqual([[1, 2], [3, 3]]);
    expect(() => parseHeatmap({ ...compact, cells: btoa(String.fromCharCode(0, 1, 2)) })).toThrow(/cells must hold 4/);
    expect(() => parseHeatmap({ ...compact, cells: btoa(String.fromCharCode(0, 1, 2, 3)) })).toThrow(/kind 3/);
    expect(() => parseHeatmap({ ...compact, cells: "!!" })).toThrow(/base64/);
    expect(() => parseHeatmap({ ...compact, values: btoa("abcdefghi") })).toThrow(/values must hold 4/);
    expect(() => parseHeatmap({ ...compact, values: [0.1, 0.5, 0.9, 0.8] })).toThrow(/values must be base64/);
    expect(() => parseHeatmap({ ...compact, value_encoding: "f32" })).toThrow(/value_encoding/);
    expect(() => parseHeatmap({ ...compact, step_offsets: btoa("abc") })).toThrow(/step_offsets must hold 4/);
    expect(() => parseHeatmap({ ...compact, step_offset_bytes: 3 })).toThrow(/step_offset_bytes/);
    // Offsets of two bytes, little-endian.
    const wideSteps = parseHeatmap({ ...compact, step_offset_bytes: 2, step_offsets: btoa(String.fromCharCode(7, 0, 0, 0, 0, 0, 9, 1)) });
    expect(wideSteps.stepOffsets).toEqual([[7, 0], [0, 265]]);
    expect(() => parseHeatmap({ ...compact, cell_kinds: [[3, 2]] })).toThrow(/cell_kinds/);
  });

  it("asks for the compact layout when told to", async () => {
    const seen: string[] = [];
    const fetchFn: FetchLike = async (url) => {
      seen.push(url);
      return new Response(JSON.stringify(BINNED), { status: 200 });
    };
    await fetchHeatmap("R", "gradient", "health", fetchFn, { columns: 512, compact: true });
    await fetchHeatmap("R", "gradient", "health", fetchFn, { columns: 512 });
    expect(seen[0]).toContain("layout=compact");
    expect(seen[1]).not.toContain("layout=");
  });

  it("reads a full-resolution answer as holding every step", () => {
    const h = parseHeatmap({ ...BINNED, binned: false, steps_last_text: undefined, step_offsets: undefined,
      steps: [0, 10], steps_text: undefined, window: { steps: 2, steps_total: 2 } });
    expect(h.binned).toBe(false);
    expect(cellStep(h, 0, 1)).toBe(10n);
    expect(columnOfStep(h, 10n)).toBe(1);
    expect(columnOfStep(h, 7n)).toBe(-1);
    expect(holdsEveryStep(h)).toBe(true);
  });
});
