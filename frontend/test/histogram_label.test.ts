import { describe, expect, it } from "vitest";
import type { CellRole } from "../src/api";
import { histogramLabel, missingHistogram, outlineLabel } from "../src/histogram_label";

function role(over: Partial<CellRole>): CellRole {
  return {
    tags: ["gradhealth/weight/dense/kernel", "dense/kernel/histogram"],
    source: "gradhealth+histogram",
    status: "ok",
    score: 1,
    rule: null,
    held: null,
    rule_read: null,
    metrics: {},
    histogram: [[0, 1, 3]],
    histogram_note: null,
    histogram_buckets: "linear",
    histogram_tag: "dense/kernel/histogram",
    histogram_step: 120n,
    histogram_axis: "row",
    histogram_seconds_from_step: null,
    histogram_elsewhere: null,
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

describe("missingHistogram", () => {
  const none = { histogram: null, histogram_tag: null, histogram_step: null, histogram_axis: null } as const;

  it("names the histogram tag's nearest logged steps when it was logged at other steps", () => {
    const m = missingHistogram(85n, role({ ...none, histogram_elsewhere: { tag: "grad_hist/layer_10", before: 80n, after: 90n } }));
    expect(m).toEqual({
      text: "No histogram at step 85: grad_hist/layer_10 was logged at other steps only; the nearest are step 80 before and step 90 after.",
      before: 80n, after: 90n,
    });
    expect(missingHistogram(299n, role({ ...none, histogram_elsewhere: { tag: "h", before: 290n, after: null } })).text)
      .toBe("No histogram at step 299: h was logged at other steps only; the nearest is step 290 before.");
  });

  it("says exact statistics only when no histogram was logged at any step", () => {
    expect(missingHistogram(85n, role({ ...none })).text)
      .toBe("No histogram for this tensor at this step: it was logged as exact statistics only.");
  });
});

describe("missingHistogram at a step whose every value was NaN/Inf", () => {
  it("says so, never that the tensor was logged as exact statistics only", () => {
    const r = role({
      histogram: [], histogram_buckets: "octaves", histogram_tag: "gradhealth/gradient/conv.weight",
      metrics: { count: { value: 256, quality: "exact" }, nonfinite: { value: 256, quality: "exact" } },
    });
    const missing = missingHistogram(2000n, r);
    expect(missing.text).toBe(
      "No histogram at step 2,000: every value of this tensor (256 of 256) was NaN or Inf, and a histogram holds finite values only.",
    );
    expect(missing.text).not.toContain("exact statistics only");
  });

  it("keeps the other reasons where some values were finite", () => {
    const r = role({ histogram: [], metrics: { count: { value: 256, quality: "exact" }, nonfinite: { value: 3, quality: "exact" } } });
    expect(missingHistogram(5n, r).text).toContain("exact statistics only");
  });
});

