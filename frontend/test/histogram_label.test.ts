import { describe, expect, it } from "vitest";
import type { CellRole } from "../src/api";
import { histogramLabel, outlineLabel } from "../src/histogram_label";

function role(over: Partial<CellRole>): CellRole {
  return {
    tags: ["gradhealth/weight/dense/kernel", "dense/kernel/histogram"],
    source: "gradhealth+histogram",
    status: "ok",
    score: 1,
    rule: null,
    metrics: {},
    histogram: [[0, 1, 3]],
    histogram_note: null,
    histogram_buckets: "linear",
    histogram_tag: "dense/kernel/histogram",
    histogram_step: 120n,
    histogram_axis: "row",
    histogram_seconds_from_step: null,
    steps_kept: 10,
    steps_logged: 10,
    steps_logged_at_least: false,
    ...over,
  };
}

describe("histogramLabel", () => {
  it("titles a histogram on the row's own axis with the row's step", () => {
    expect(histogramLabel(120n, role({}))).toEqual({ title: "Histogram at step 120", note: "" });
  });

  it("never titles a histogram from another step axis with the row's step", () => {
    const label = histogramLabel(3n, role({ histogram_axis: "other", histogram_step: 1n, histogram_seconds_from_step: 2.5 }));
    expect(label.title).toBe("Histogram nearest in time (its own step 1)");
    expect(label.title).not.toContain("step 3");
    expect(label.note).toContain("dense/kernel/histogram is logged on another step axis");
    expect(label.note).toContain("written 2.5 s after this row's step 3");
  });

  it("says 'before' when the histogram was written before the row's step", () => {
    const label = histogramLabel(9n, role({ histogram_axis: "other", histogram_step: 2n, histogram_seconds_from_step: -0.25 }));
    expect(label.note).toContain("written 250 ms before this row's step 9");
  });
});

describe("outlineLabel", () => {
  it("names the previous step on the row's axis", () => {
    expect(outlineLabel(7n, role({}))).toBe("Outline: step 7.");
  });

  it("names the outline histogram's own step on another axis", () => {
    expect(outlineLabel(7n, role({ histogram_axis: "other", histogram_step: 0n }))).toBe(
      "Outline: the histogram nearest to step 7 (its own step 0).",
    );
  });
});
