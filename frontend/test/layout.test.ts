import { describe, expect, it } from "vitest";
import {
  AXIS_HEIGHT,
  backingScale,
  CELL_MAX_H,
  CELL_MAX_W,
  CELL_MIN_H,
  CELL_MIN_W,
  cellAt,
  chooseStepLabels,
  computeGrid,
  edge,
  labelsOverlap,
  LABEL_GAP,
  MAX_CANVAS_AREA,
  MAX_CANVAS_SIDE,
  ROW_LABEL_MAX_W,
  ROW_LABEL_MIN_W,
  rowLabelWidth,
  truncateMiddle,
} from "../src/layout";
import type { AxisLabel, Measure } from "../src/layout";

// Roughly an 11px sans-serif digit; the real page measures with a canvas.
const measure: Measure = (text) => text.length * 6.5;

function range(n: number, start = 0, stride = 1): number[] {
  return Array.from({ length: n }, (_, i) => start + i * stride);
}

function assertReadable(labels: readonly AxisLabel[], steps: readonly number[], cellW: number, ordered = true): void {
  const plotW = steps.length * cellW;
  expect(labels.length).toBeGreaterThan(0);
  for (let k = 0; k < labels.length; k++) {
    const l = labels[k];
    expect(l.left).toBeGreaterThanOrEqual(0);
    if (l.width <= plotW) expect(l.left + l.width).toBeLessThanOrEqual(plotW + 1e-9);
    if (k > 0) {
      const prev = labels[k - 1];
      expect(l.tick).toBeGreaterThan(prev.tick);
      if (ordered) expect(l.step).toBeGreaterThan(prev.step);
      expect(l.left).toBeGreaterThanOrEqual(prev.left + prev.width + LABEL_GAP);
    }
  }
  expect(labelsOverlap(labels)).toBe(false);
}

describe("chooseStepLabels", () => {
  const cases: [string, number[]][] = [
    ["10 steps", range(10)],
    ["10 sparse steps", range(10, 0, 1000)],
    ["1,000 steps", range(1000)],
    ["1,000 steps from 50,000", range(1000, 50000, 7)],
    ["5,000 steps", range(5000)],
    ["5,000 steps of 250", range(5000, 0, 250)],
  ];
  for (const width of [300, 900, 1600]) {
    for (const [name, steps] of cases) {
      it(`never overlaps: ${name} in ${width}px`, () => {
        const grid = computeGrid({ rows: 5, cols: steps.length, availableWidth: width, availableHeight: 500 });
        assertReadable(chooseStepLabels(steps, grid.cellW, measure), steps, grid.cellW);
      });
    }
  }

  it("never overlaps for irregular steps", () => {
    let s = 0;
    const steps = range(3000).map((i) => (s += 1 + ((i * 7919) % 13)));
    for (const cellW of [0.2, 1, 3, 17]) {
      assertReadable(chooseStepLabels(steps, cellW, measure), steps, cellW);
    }
  });

  it("never overlaps for unordered steps", () => {
    const steps = [5, 3, 900000, 2, 1, 77777, 12];
    const labels = chooseStepLabels(steps, 10, measure);
    assertReadable(labels, steps, 10, false);
    for (const l of labels) expect(steps).toContain(l.step);
  });

  it("labels every column when there is room", () => {
    const labels = chooseStepLabels(range(10), 40, measure);
    expect(labels.map((l) => l.text)).toEqual(range(10).map(String));
  });

  it("prefers round steps", () => {
    const labels = chooseStepLabels(range(1000), 1, measure);
    const interval = labels[1].step - labels[0].step;
    expect([10, 20, 50, 100, 200, 500]).toContain(interval);
    for (const l of labels) expect(l.step % interval).toBe(0);
    expect(labels.length).toBeGreaterThan(3);
  });

  it("uses one unit for every label of an axis", () => {
    const labels = chooseStepLabels(range(5000, 0, 250), 1, measure);
    expect(labels.length).toBeGreaterThan(3);
    const suffixed = labels.filter((l) => l.text.endsWith("k"));
    expect(suffixed.length === 0 || suffixed.length === labels.length - 1).toBe(true);
  });

  it("places labels of logged steps over their columns", () => {
    const steps = range(100, 0, 10);
    for (const l of chooseStepLabels(steps, 9, measure)) {
      const col = steps.indexOf(l.step);
      expect(col).toBeGreaterThanOrEqual(0);
      expect(l.tick).toBeCloseTo((col + 0.5) * 9);
      expect(l.text).toBe(String(l.step));
    }
  });

  it("labels irregular steps with round numbers between their columns", () => {
    const steps = [0, 7, 15, 22, 31, 38, 46, 53, 61, 70, 77, 85, 93, 100];
    const labels = chooseStepLabels(steps, 20, measure);
    expect(labels.length).toBeGreaterThan(2);
    for (const l of labels) {
      expect(l.step % 10).toBe(0);
      const after = steps.findIndex((s) => s >= l.step);
      expect(l.tick).toBeLessThanOrEqual((after + 0.5) * 20 + 1e-9);
      if (after > 0) expect(l.tick).toBeGreaterThan((after - 0.5) * 20);
    }
  });

  it("returns nothing for no steps and one label for one step", () => {
    expect(chooseStepLabels([], 10, measure)).toEqual([]);
    expect(chooseStepLabels([42], 48, measure).map((l) => l.text)).toEqual(["42"]);
  });
});

describe("computeGrid", () => {
  it("shares the width between steps within bounds", () => {
    expect(computeGrid({ rows: 3, cols: 10, availableWidth: 400, availableHeight: 600 }).cellW).toBe(40);
    expect(computeGrid({ rows: 3, cols: 2, availableWidth: 400, availableHeight: 600 }).cellW).toBe(CELL_MAX_W);
    const wide = computeGrid({ rows: 3, cols: 5000, availableWidth: 1000, availableHeight: 600 });
    expect(wide.cellW).toBe(CELL_MIN_W);
    expect(wide.plotW).toBe(5000);
  });

  it("keeps rows tall enough for their labels", () => {
    const many = computeGrid({ rows: 500, cols: 10, availableWidth: 400, availableHeight: 600 });
    expect(many.cellH).toBe(CELL_MIN_H);
    expect(many.plotH).toBe(500 * CELL_MIN_H);
    const few = computeGrid({ rows: 2, cols: 10, availableWidth: 400, availableHeight: 600 });
    expect(few.cellH).toBe(CELL_MAX_H);
    const mid = computeGrid({ rows: 30, cols: 10, availableWidth: 400, availableHeight: 600 });
    expect(mid.cellH).toBe(20);
    expect(mid.axisH).toBe(AXIS_HEIGHT);
  });

  it("survives empty data", () => {
    const g = computeGrid({ rows: 0, cols: 0, availableWidth: 400, availableHeight: 600 });
    expect(g.plotW).toBe(0);
    expect(g.plotH).toBe(0);
  });
});

describe("backingScale", () => {
  it("uses the device pixel ratio for ordinary sizes", () => {
    expect(backingScale(800, 600, 2)).toBe(2);
    expect(backingScale(800, 600, 1)).toBe(1);
    expect(backingScale(800, 600, 0)).toBe(1);
    expect(backingScale(800, 600, Number.NaN)).toBe(1);
  });

  it("shrinks canvases that browsers could not allocate", () => {
    const s = backingScale(12000, 9000, 2);
    expect(12000 * s).toBeLessThanOrEqual(MAX_CANVAS_SIDE);
    expect(12000 * s * 9000 * s).toBeLessThanOrEqual(MAX_CANVAS_AREA * 1.000001);
  });
});

describe("edge and cellAt", () => {
  it("rounds shared edges so adjacent cells tile exactly", () => {
    const widths = range(7).map((i) => edge(i + 1, 1.37, 1.5) - edge(i, 1.37, 1.5));
    expect(widths.reduce((a, b) => a + b, 0)).toBe(edge(7, 1.37, 1.5));
  });

  it("finds the cell under a point", () => {
    const g = computeGrid({ rows: 4, cols: 10, availableWidth: 200, availableHeight: 80 });
    expect(cellAt(0, g.axisH, g)).toEqual({ row: 0, col: 0 });
    expect(cellAt(g.cellW * 3 + 1, g.axisH + g.cellH * 2 + 1, g)).toEqual({ row: 2, col: 3 });
    expect(cellAt(g.plotW - 0.01, g.axisH + g.plotH - 0.01, g)).toEqual({ row: 3, col: 9 });
    expect(cellAt(5, g.axisH - 1, g)).toBeNull();
    expect(cellAt(g.plotW, g.axisH + 1, g)).toBeNull();
    expect(cellAt(-1, g.axisH + 1, g)).toBeNull();
  });
});

describe("row labels", () => {
  it("leaves short names alone", () => {
    expect(truncateMiddle("dense/kernel", 200, measure)).toBe("dense/kernel");
  });

  it("shortens long names to fit, keeping mostly the end", () => {
    const name = "model/encoder/layer_11/attention/self/query/kernel";
    const out = truncateMiddle(name, 130, measure);
    expect(measure(out)).toBeLessThanOrEqual(130);
    expect(out).toContain("\u2026");
    expect(name.endsWith(out.split("\u2026")[1])).toBe(true);
    expect(name.startsWith(out.split("\u2026")[0])).toBe(true);
    expect(out.split("\u2026")[1].length).toBeGreaterThan(out.split("\u2026")[0].length);
    // As long as fits: one more character would not.
    expect(out.length).toBe(Math.floor(130 / 6.5));
  });

  it("degrades to a bare ellipsis in no space", () => {
    expect(truncateMiddle("abcdef", 1, measure)).toBe("\u2026");
  });

  it("does not split surrogate pairs", () => {
    const out = truncateMiddle("\u{1F600}".repeat(40), 60, measure);
    expect(out).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  });

  it("sizes the label column to the longest name within bounds", () => {
    expect(rowLabelWidth(["a"], measure)).toBe(ROW_LABEL_MIN_W);
    expect(rowLabelWidth(["x".repeat(200)], measure)).toBe(ROW_LABEL_MAX_W);
    expect(rowLabelWidth(["dense/kernel", "conv2d_1/kernel"], measure)).toBe(Math.ceil(15 * 6.5 + 16));
  });
});
