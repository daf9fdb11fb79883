import { describe, expect, it } from "vitest";
import { fetchHeatmap, mergeRows, pageNext, parseHeatmap, rowLoaded, spansText } from "../src/api";
import type { FetchLike } from "../src/api";
import { foldHeatmap, layerAt } from "../src/fold";
import { orderRows, rowSeverity } from "../src/rows";

const NAMES = ["no_data", "ok", "warn", "critical"];

/** A row window's answer (rows layout) over layers x, b.0, b.1, y: `rows` sent and block b folded. */
function windowBody(rows: number[], withBlock: boolean, steps = [0, 10, 20]): Record<string, unknown> {
  const own: Record<number, number[]> = { 0: [0.9, 0.8, 0.7], 3: [0.6, 0.5, 0.4] };
  const cells = rows.map((r) => own[r] ?? [0.1, 0.2, 0.3]);
  const status = rows.map(() => [1, 1, 1]);
  if (withBlock) {
    cells.push([0.05, 0.3, 0.2]);
    status.push([3, 2, 1]);
  }
  return {
    run: "r", role: "gradient", metric: "health",
    layers: ["x", "b.0", "b.1", "y"], blocks: [null, "b", "b", null],
    steps, steps_text: steps.map(String), status_names: NAMES, quality_names: ["no_data", "exact"],
    values: cells, status, rules: status.map((row) => row.map((s) => (s === 3 ? "nonfinite" : ""))),
    quality_cells: status.map((row) => row.map(() => 1)),
    binned: false, incomplete: null, window: { steps: 3, steps_total: 3 },
    rows_sent: rows, blocks_sent: withBlock ? [0] : [], block_names: ["b"],
    block_members: withBlock ? [[2, 1, 1]] : [],
    row_worst: [1, 3, 2, 1], row_worst_columns: [3, 1, 1, 3], block_worst: [3], block_worst_columns: [1],
    value_range: { finite: [0.05, 0.95], positive: [0.05, 0.95] },
  };
}

describe("row windows", () => {
  it("writes row numbers as spans", () => {
    expect(spansText([8, 5, 0, 1, 2, 7, 2])).toBe("0:2,5,7:8");
    expect(spansText([])).toBe("");
  });

  it("asks for rows and blocks only when told to", async () => {
    const urls: string[] = [];
    const fetchFn: FetchLike = async (url) => {
      urls.push(String(url));
      return new Response(JSON.stringify(windowBody([0], true)), { status: 200 });
    };
    await fetchHeatmap("r", "gradient", "health", fetchFn, { rows: [3, 0, 1], blocks: [] });
    await fetchHeatmap("r", "gradient", "health", fetchFn, {});
    const [windowed, whole] = urls.map((u) => new URL(u, "http://x/").searchParams);
    expect([windowed.get("rows"), windowed.get("blocks")]).toEqual(["0:1,3", ""]);
    expect(whole.has("rows") || whole.has("blocks")).toBe(false);
  });

  it("puts the rows sent in their places, the others not loaded, the block apart", () => {
    const h = parseHeatmap(windowBody([0], true));
    expect(Array.from(h.loaded ?? [])).toEqual([1, 0, 0, 0]);
    expect(h.values[0]).toEqual([0.9, 0.8, 0.7]);
    expect(h.values[3]).toEqual([null, null, null]);
    expect(h.status[3]).toEqual([0, 0, 0]);
    expect(h.blockRows.get("b")?.members).toEqual([2, 1, 1]);
    expect(rowLoaded(h, 0) && !rowLoaded(h, 3)).toBe(true);
    // Severity sorting takes the server's worst per row, not the placeholders.
    expect(orderRows(h.layers, "", "severity", rowSeverity(h))).toEqual([1, 2, 0, 3]);
  });

  it("folds a block from the server's cells, and its worst member from its pick", () => {
    const h = parseHeatmap(windowBody([0], true));
    const f = foldHeatmap(h, () => true);
    expect(f.layers).toEqual(["x", "b", "y"]);
    expect(f.values[1]).toEqual([0.05, 0.3, 0.2]);
    expect(f.status[1]).toEqual([3, 2, 1]);
    expect(Array.from(f.loaded ?? [])).toEqual([1, 1, 0]);
    expect([layerAt(f, 1, 0), layerAt(f, 1, 1)]).toEqual(["b.1", "b.0"]);
    expect(Array.from(f.rowWorst?.worst ?? [])).toEqual([1, 3, 1]);
    // Unfolded without its members' rows: loading; with them, as they are.
    const bare = parseHeatmap(windowBody([0], false));
    expect(Array.from(foldHeatmap(bare, () => true).loaded ?? [])).toEqual([1, 0, 0]);
  });

  it("merges the rows of a later answer of the same heatmap, and refuses another", () => {
    const h = parseHeatmap(windowBody([0], true));
    const more = parseHeatmap(windowBody([1, 3], false));
    const both = mergeRows(h, more);
    expect(Array.from(both?.loaded ?? [])).toEqual([1, 1, 0, 1]);
    expect(both?.values[3]).toEqual([0.6, 0.5, 0.4]);
    expect(both?.values[0]).toEqual([0.9, 0.8, 0.7]);
    expect(both?.blockRows.has("b")).toBe(true);
    expect(mergeRows(h, parseHeatmap(windowBody([3], false, [0, 10, 30])))).toBeNull();
  });

  it("follows the pages of an answer cut to fit, and gives what was asked for in one piece", async () => {
    // The whole answer of x, b.0, b.1, y, as the server sends it when it fits.
    const whole = windowBody([0, 1, 2, 3], false);
    for (const key of ["rows_sent", "blocks_sent", "block_names", "block_members", "row_worst", "row_worst_columns",
      "block_worst", "block_worst_columns", "value_range"]) delete whole[key];
    const page = (rows: number[], withBlock: boolean, next: Record<string, string> | null): Record<string, unknown> =>
      next ? { ...windowBody(rows, withBlock), page: { max_cells: 6, rows_total: 4, rows_span: [rows[0], rows[rows.length - 1]], next } }
        : windowBody(rows, withBlock);
    const asked: string[] = [];
    const serve = (answers: Record<string, Record<string, unknown>>): FetchLike => async (url) => {
      const q = new URL(String(url), "http://x/").searchParams;
      const key = q.has("rows") ? `${q.get("rows")}|${q.get("blocks")}` : "whole";
      asked.push(key);
      return new Response(JSON.stringify(answers[key]), { status: 200 });
    };
    const paged = await fetchHeatmap("r", "gradient", "health", serve({
      whole: page([0, 1], false, { rows: "2:3", blocks: "" }),
      "2:3|": windowBody([2, 3], false),
    }), {});
    expect(asked).toEqual(["whole", "2:3|"]);
    expect(paged).toEqual(parseHeatmap(whole));
    // A row window cut within its rows: the rest of them, then the block asked for.
    asked.length = 0;
    const win = await fetchHeatmap("r", "gradient", "health", serve({
      "0:3|0": page([0], false, { rows: "3", blocks: "0" }),
      "3|0": windowBody([3], true),
    }), { rows: [0, 1, 2, 3], blocks: [0] });
    expect(asked).toEqual(["0:3|0", "3|0"]);
    expect(Array.from(win.loaded ?? [])).toEqual([1, 0, 0, 1]);
    expect(win.values[3]).toEqual([0.6, 0.5, 0.4]);
    expect(win.blockRows.get("b")?.members).toEqual([2, 1, 1]);
    expect(pageNext(windowBody([0], false))).toBeNull();
    expect(() => pageNext({ page: { next: { rows: 1 } } })).toThrow();
  });
});

