import { describe, expect, it } from "vitest";
import {
  backingScale,
  binEdges,
  unionSpans,
  clampRange,
  columnAt,
  columnEdges,
  edge,
  fullRange,
  outsideRanges,
  LABEL_GAP,
  labelsOverlap,
  MAX_CANVAS_AREA,
  MAX_CANVAS_SIDE,
  pixelColumns,
  revealTop,
  ROW_LABEL_MAX_W,
  ROW_LABEL_MIN_W,
  ROW_MAX_H,
  ROW_MIN_H,
  rowHeight,
  rowLabelStride,
  rowLabelWidth,
  spanRange,
  stepAxisLabels,
  stepOfX,
  truncateMiddle,
  xOfStep,
} from "../src/layout";
import type { AxisLabel, Measure } from "../src/layout";

// Roughly an 11px sans-serif digit; the real page measures with a canvas.
const measure: Measure = (text) => text.length * 6.5;

function range(n: number, start = 0, stride = 1): number[] {
  return Array.from({ length: n }, (_, i) => start + i * stride);
}

function assertReadable(labels: readonly AxisLabel[], width: number): void {
  expect(labels.length).toBeGreaterThan(0);
  for (let k = 0; k < labels.length; k++) {
    const l = labels[k];
    expect(l.left).toBeGreaterThanOrEqual(0);
    if (l.width <= width) expect(l.left + l.width).toBeLessThanOrEqual(width + 1e-9);
    if (k > 0) {
      const prev = labels[k - 1];
      expect(l.tick).toBeGreaterThan(prev.tick);
      expect(l.step).toBeGreaterThan(prev.step);
      expect(l.left).toBeGreaterThanOrEqual(prev.left + prev.width + LABEL_GAP);
    }
  }
  expect(labelsOverlap(labels)).toBe(false);
}

describe("columnEdges", () => {
  it("centres cells on their steps and meets halfway", () => {
    expect(Array.from(columnEdges([0, 10, 20]))).toEqual([-5, 5, 15, 25]);
    expect(Array.from(columnEdges([0, 10, 40]))).toEqual([-5, 5, 25, 55]);
  });

  it("gives a single step a cell one step wide", () => {
    expect(Array.from(columnEdges([7]))).toEqual([6.5, 7.5]);
    expect(Array.from(columnEdges([]))).toEqual([0]);
  });

  it("finds the column under a step", () => {
    const e = columnEdges([0, 10, 40]);
    expect(columnAt(e, 0)).toBe(0);
    expect(columnAt(e, 4.9)).toBe(0);
    expect(columnAt(e, 5)).toBe(1);
    expect(columnAt(e, 24.9)).toBe(1);
    expect(columnAt(e, 25)).toBe(2);
    expect(columnAt(e, 54.9)).toBe(2);
    expect(columnAt(e, 55)).toBe(-1);
    expect(columnAt(e, -5.1)).toBe(-1);
    expect(columnAt(e, Number.NaN)).toBe(-1);
  });
});

describe("step range", () => {
  const full = fullRange(columnEdges(range(101, 0, 10)));

  it("maps steps to x and back", () => {
    const r = { lo: 0, hi: 100 };
    expect(xOfStep(50, r, 400)).toBe(200);
    expect(stepOfX(100, r, 400)).toBe(25);
  });

  it("clamps a zoom window to the data and drops a window covering everything", () => {
    expect(clampRange({ lo: 100, hi: 200 }, full)).toEqual({ lo: 100, hi: 200 });
    expect(clampRange({ lo: 200, hi: 100 }, full)).toEqual({ lo: 100, hi: 200 });
    expect(clampRange({ lo: -1000, hi: 5000 }, full)).toBeNull();
    expect(clampRange({ lo: 5000, hi: 6000 }, full)).toBeNull();
    const tiny = clampRange({ lo: 500, hi: 500.2 }, full);
    expect(tiny).not.toBeNull();
    expect((tiny?.hi ?? 0) - (tiny?.lo ?? 0)).toBeCloseTo(1);
  });
});

describe("an axis spanning the track's scalars too", () => {
  // Histograms every 10 steps to step 150 (cells to 155), the loss every step to 299.
  const cells = fullRange(columnEdges(range(16, 0, 10)));

  it("reaches the loss's last step, half a step out, and keeps the cells' range without one", () => {
    expect(spanRange(cells, { lo: 0, hi: 299 })).toEqual({ lo: -5, hi: 299.5 });
    expect(spanRange(cells, { lo: 0, hi: 100 })).toEqual(cells);
    expect(spanRange(cells, null)).toEqual(cells);
    expect(spanRange(null, { lo: 3, hi: 7 })).toEqual({ lo: 2.5, hi: 7.5 });
    expect(spanRange(null, null)).toEqual({ lo: 0, hi: 1 });
  });

  it("finds the stretches without cells, after them or before them", () => {
    expect(outsideRanges({ lo: -5, hi: 299.5 }, cells)).toEqual([{ lo: 155, hi: 299.5, after: true }]);
    expect(outsideRanges({ lo: -20, hi: 155 }, cells)).toEqual([{ lo: -20, hi: -5, after: false }]);
    expect(outsideRanges(cells, cells)).toEqual([]);
    // A zoom window wholly past the cells is wholly outside them.
    expect(outsideRanges({ lo: 170, hi: 299 }, cells)).toEqual([{ lo: 170, hi: 299, after: true }]);
  });
});

describe("pixelColumns", () => {
  it("shows one column per pixel when cells are wider than pixels", () => {
    const e = columnEdges([0, 1, 2, 3]);
    const px = pixelColumns(e, fullRange(e), 40);
    expect(px.start.length).toBe(40);
    for (let x = 0; x < 40; x++) {
      expect(px.start[x]).toBe(px.end[x]);
      expect(px.start[x]).toBe(Math.floor(x / 10));
    }
  });

  it("covers every column when many steps share a pixel", () => {
    const steps = range(1000);
    const e = columnEdges(steps);
    const px = pixelColumns(e, fullRange(e), 100);
    const seen = new Uint8Array(1000);
    for (let x = 0; x < 100; x++) {
      expect(px.start[x]).toBeGreaterThanOrEqual(0);
      for (let c = px.start[x]; c <= px.end[x]; c++) seen[c]++;
    }
    expect(Array.from(seen).every((n) => n >= 1)).toBe(true);
    expect(Array.from(seen).filter((n) => n > 1).length).toBeLessThan(100);
  });

  it("keeps a narrow cell that straddles a pixel boundary", () => {
    const e = new Float64Array([0, 9.9, 10.1, 20]);
    for (const w of [1, 2, 3, 4, 7]) {
      const px = pixelColumns(e, { lo: 0, hi: 20 }, w);
      let shown = false;
      for (let x = 0; x < w; x++) if (px.start[x] <= 1 && px.end[x] >= 1) shown = true;
      expect(shown).toBe(true);
    }
  });

  it("does not widen cells wider than a pixel", () => {
    const e = columnEdges([0, 10, 20]);
    const px = pixelColumns(e, fullRange(e), 300);
    for (let x = 0; x < 300; x++) expect(px.end[x]).toBe(px.start[x]);
  });

  it("never reaches outside the data", () => {
    const e = columnEdges([100, 200]);
    const px = pixelColumns(e, { lo: 0, hi: 400 }, 8);
    expect(px.start[0]).toBe(-1);
    expect(px.end[0]).toBe(-2);
    expect(px.start[1]).toBe(0);
    expect(px.start[3]).toBe(1);
    expect(px.start[4]).toBe(1);
    expect(px.start[5]).toBe(-1);
    expect(px.start[7]).toBe(-1);
  });

  it("maps a zoomed window", () => {
    const e = columnEdges(range(100));
    const px = pixelColumns(e, { lo: 9.5, hi: 19.5 }, 10);
    expect(Array.from(px.start)).toEqual(range(10, 10));
  });
});

describe("stepAxisLabels", () => {
  const cases: [string, number, number][] = [
    ["10 steps", -0.5, 9.5],
    ["10 sparse steps", -500, 9500],
    ["1,000 steps", -0.5, 999.5],
    ["5,000 steps of 250", -125, 1_249_875],
    ["from 50,000", 49_996, 57_000],
  ];
  for (const width of [300, 900, 1600]) {
    for (const [name, lo, hi] of cases) {
      it(`never overlaps: ${name} in ${width}px`, () => {
        assertReadable(stepAxisLabels({ lo, hi }, width, measure), width);
      });
    }
  }

  it("prefers round steps in one unit", () => {
    const labels = stepAxisLabels({ lo: -0.5, hi: 999.5 }, 600, measure);
    const interval = labels[1].step - labels[0].step;
    expect([50n, 100n, 200n]).toContain(interval);
    for (const l of labels) expect(l.step % interval).toBe(0n);
    const k = stepAxisLabels({ lo: 0, hi: 1_250_000 }, 600, measure);
    expect(k.every((l) => l.step === 0n || l.text.endsWith("k") || l.text.endsWith("M"))).toBe(true);
  });

  it("puts ticks at the true step position", () => {
    for (const l of stepAxisLabels({ lo: 0, hi: 1000 }, 500, measure)) expect(l.tick).toBeCloseTo(Number(l.step) / 2);
  });

  it("labels steps past 2^53 exactly, from positions relative to the first", () => {
    const origin = 2n ** 60n;
    const labels = stepAxisLabels({ lo: -0.5, hi: 4.5 }, 1200, measure, origin);
    expect(labels.map((l) => l.step)).toEqual([0n, 1n, 2n, 3n, 4n].map((k) => origin + k));
    expect(labels[1].text).toBe("1152921504606846977");
    assertReadable(labels, 1200);
    // Round in absolute steps, not in offsets from the origin.
    const far = stepAxisLabels({ lo: 0, hi: 5000 }, 600, measure, 1234567n);
    expect(far.length).toBeGreaterThan(1);
    for (const l of far) expect(l.step % (far[1].step - far[0].step)).toBe(0n);
  });

  it("stays bounded for windows far from the origin and spans past 2^53", () => {
    // A window of 600 steps around 2^62 from the origin: offsets a double cannot step through one by one.
    const labels = stepAxisLabels({ lo: 2 ** 62, hi: 2 ** 62 + 2048 }, 800, measure);
    expect(labels.length).toBeGreaterThan(0);
    expect(labels.length).toBeLessThan(50);
    const huge = stepAxisLabels({ lo: -(2 ** 63), hi: 2 ** 63 }, 800, measure);
    expect(huge.length).toBeGreaterThan(0);
    expect(huge.length).toBeLessThan(50);
    assertReadable(huge, 800);
  });

  it("names no step before the first or after the last logged one", () => {
    // Three steps, 0, 100 and 200: their cells reach from -50 to 250.
    const e = columnEdges([0, 100, 200]);
    const r = fullRange(e);
    for (const width of [120, 300, 900]) {
      const labels = stepAxisLabels(r, width, measure, 0n, undefined, { lo: 0, hi: 200 });
      expect(labels.length).toBeGreaterThan(0);
      for (const l of labels) expect(l.step >= 0n && l.step <= 200n).toBe(true);
    }
    const small = stepAxisLabels(fullRange(columnEdges([0, 5, 10])), 900, measure, 0n, undefined, { lo: 0, hi: 10 });
    expect(small[0].step).toBe(0n);
    expect(small[small.length - 1].step).toBe(10n);
    // Without the bounds the half cells would be named.
    expect(stepAxisLabels(fullRange(columnEdges([0, 5, 10])), 900, measure)[0].step).toBeLessThan(0n);
  });

  it("ends on steps past 2**53, where an interval can be smaller than the gap between two doubles", () => {
    // Zoomed in on steps near 2**60: the doubles there are 128 and 256 apart, the label interval 50.
    for (const [lo, hi] of [[2 ** 60 - 128, 2 ** 60], [2 ** 60, 2 ** 60 + 256], [2 ** 62, 2 ** 62 + 2048]]) {
      const labels = stepAxisLabels({ lo, hi }, 800, measure);
      expect(labels.length).toBeGreaterThan(0);
      assertReadable(labels, 800);
    }
  });

  it("labels single steps and nothing for an empty window", () => {
    expect(stepAxisLabels({ lo: 41.5, hi: 42.5 }, 48, measure).map((l) => l.text)).toEqual(["42"]);
    expect(stepAxisLabels({ lo: 1, hi: 1 }, 100, measure)).toEqual([]);
    expect(stepAxisLabels({ lo: 0, hi: 10 }, 0, measure)).toEqual([]);
  });
});

describe("rows", () => {
  it("share the height within readable bounds", () => {
    expect(rowHeight(2, 600)).toBe(ROW_MAX_H);
    expect(rowHeight(30, 600)).toBe(20);
    expect(rowHeight(500, 600)).toBe(ROW_MIN_H);
    expect(rowHeight(0, 600)).toBe(ROW_MAX_H);
  });

  it("scroll a row into sight only when it is not wholly there, and then centre it", () => {
    // Rows 13 px, 260 px in sight (20 rows) from 130 (rows 10..29).
    expect(revealTop(10, 13, 260, 130)).toBe(130);
    expect(revealTop(29, 13, 260, 130)).toBe(130);
    // Far below, just below and half above: centred.
    expect(revealTop(177, 13, 260, 130)).toBe(177 * 13 - (260 - 13) / 2);
    expect(revealTop(30, 13, 260, 130)).toBe(30 * 13 - (260 - 13) / 2);
    expect(revealTop(12, 13, 260, 160)).toBe(12 * 13 - (260 - 13) / 2);
    // A row near the top centres to no scroll, not a negative one.
    expect(revealTop(2, 13, 260, 400)).toBe(0);
  });

  it("thin labels on short rows so they never overlap", () => {
    expect(rowLabelStride(16)).toBe(1);
    expect(rowLabelStride(13)).toBe(1);
    expect(rowLabelStride(6)).toBe(3);
    expect(rowLabelStride(4)).toBe(4);
    for (const h of [4, 5, 6, 7, 9, 12]) expect(rowLabelStride(h) * h).toBeGreaterThanOrEqual(13);
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

  it("rounds shared edges so adjacent cells tile exactly", () => {
    const widths = range(7).map((i) => edge(i + 1, 1.37, 1.5) - edge(i, 1.37, 1.5));
    expect(widths.reduce((a, b) => a + b, 0)).toBe(edge(7, 1.37, 1.5));
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
    const many = range(1000).map((i) => `layer_${i}`);
    expect(rowLabelWidth([...many, "a_much_longer_layer_name"], measure)).toBe(Math.ceil(24 * 6.5 + 16));
  });
});

describe("compared runs' step axis", () => {
  // Two runs logged every 10 steps: one to step 990, the other to 590; the second's steps counted from 100.
  const longSteps = Array.from({ length: 100 }, (_, i) => i * 10);
  const shortSteps = Array.from({ length: 50 }, (_, i) => 100 + i * 10);
  const own = (steps: number[], origin: bigint) => {
    const e = columnEdges(steps.map((s) => s - Number(origin)));
    return { origin, full: fullRange(e), labelled: { lo: steps[0] - Number(origin), hi: steps[steps.length - 1] - Number(origin) } };
  };

  it("is the union of the runs' axes, on each run's own origin", () => {
    const a = own(longSteps, 0n);
    const b = own(shortSteps, 100n);
    const onA = unionSpans([a, b], 0n)!;
    const onB = unionSpans([a, b], 100n)!;
    expect(onA.full).toEqual({ lo: -5, hi: 995 });
    expect(onA.labelled).toEqual({ lo: 0, hi: 990 });
    expect(onB.full).toEqual({ lo: -105, hi: 895 });
    // The same step at the same x in both, wherever each run's origin is; the shorter run's last step is not at the end.
    for (const step of [0, 100, 300, 590, 990]) {
      expect(xOfStep(step - 100, onB.full, 800)).toBeCloseTo(xOfStep(step, onA.full, 800), 9);
    }
    expect(xOfStep(590 - 100, onB.full, 800)).toBeLessThan(500);
    expect(unionSpans([null, null], 0n)).toBeNull();
    expect(unionSpans([null, b], 0n)!.full).toEqual({ lo: 95, hi: 595 });
  });

  it("puts runs binned alike (one window, one budget) column on column", () => {
    // Bins of 100 steps over the window 0..3990: the shorter run (to 2390) holds the first 24.
    const firsts = (n: number) => Array.from({ length: n }, (_, j) => BigInt(j * 100));
    const lasts = (n: number) => Array.from({ length: n }, (_, j) => BigInt(j * 100 + 90));
    const a = binEdges(firsts(40), lasts(40), 0n);
    const b = binEdges(firsts(24), lasts(24), 0n);
    const axis = unionSpans([{ origin: 0n, full: spanRange(fullRange(a), null), labelled: { lo: 0, hi: 3990 } },
      { origin: 0n, full: spanRange(fullRange(b), null), labelled: { lo: 0, hi: 2390 } }], 0n)!;
    expect(axis.full).toEqual({ lo: -0.5, hi: 3990.5 });
    // Each column starts where the longer run's does; the shorter run's last ends at its last step, 2390.
    for (let j = 0; j < 24; j++) expect(xOfStep(b[j], axis.full, 512)).toBe(xOfStep(a[j], axis.full, 512));
    expect(b[24]).toBe(2390.5);
  });
});
