import { describe, expect, it } from "vitest";
import { DEFAULT_QUALITY_NAMES } from "../src/api";
import { metricCell, qualitiesValues, qualityShort, qualityText, qualityValues } from "../src/quality";

describe("quality words", () => {
  it("says what each quality the routes send means, in words", () => {
    expect(qualityText("finite_only")).toBe("finite values only: this step also held NaN/Inf");
    expect(qualityText("lower_bound")).toBe("lower bound: the true value is at least this");
    expect(qualityText("upper_bound")).toBe("upper bound: the true value is at most this");
    expect(qualityText("estimated")).toBe("estimated from histogram buckets");
    for (const code of [...DEFAULT_QUALITY_NAMES, "mixed"]) {
      expect(qualityText(code)).not.toMatch(/_/);
      expect(qualityShort(code)).not.toMatch(/_/);
      expect(qualityValues(code)).not.toMatch(/_/);
    }
  });

  it("reads a code it does not know without its underscores", () => {
    expect(qualityText("some_new_code")).toBe("some new code");
  });

  it("keeps a table cell and the summary line short", () => {
    expect(qualityShort("finite_only")).toBe("finite values only");
    // "mixed" alone may be exact values beside bounds: it never claims they are estimates.
    expect(qualityValues("mixed")).toBe("exact and other values");
    expect(qualityValues("estimated")).toBe("estimated values");
    expect(qualityValues("lower_bound")).toBe("lower bounds");
  });

  it("words the qualities a heatmap holds, never calling bounds estimates", () => {
    expect(qualitiesValues(["exact", "estimated"])).toBe("exact and estimated values");
    expect(qualitiesValues(["exact", "upper_bound"])).toBe("exact values and upper bounds");
    expect(qualitiesValues(["estimated", "lower_bound"])).toBe("estimated values and lower bounds");
    expect(qualitiesValues(["estimated", "upper_bound", "lower_bound"])).toBe("estimated values, upper and lower bounds");
    expect(qualitiesValues(["exact", "estimated", "upper_bound"])).toBe("exact and estimated values, upper bounds");
    expect(qualitiesValues(["upper_bound"])).toBe("upper bounds");
    expect(qualitiesValues(["finite_only"])).toBe("values of finite numbers only");
  });
});

describe("metricCell", () => {
  const fmt = (v: number | null): string => (v === null ? "no data" : String(v));

  it("reads NaN/Inf, never no data, for a statistic without a value at a step that held NaN/Inf", () => {
    expect(metricCell(null, "finite_only", fmt)).toEqual(["NaN/Inf", "", "no finite value: this step held NaN/Inf"]);
  });

  it("says a value the server marks not judged proves nothing, and keeps other zeros, bounds of 0 too", () => {
    const [value, words, meaning] = metricCell(0, "not_judged", fmt);
    expect([value, words]).toEqual(["not judged", ""]);
    expect(meaning).toMatch(/proves nothing/);
    // The server's mark decides, not the number: a lower bound of 0 it did not mark is a bound of 0.
    expect(metricCell(0, "lower_bound", fmt)).toEqual(["0", "lower bound", "lower bound: the true value is at least this"]);
    expect(metricCell(0, "exact", fmt)[0]).toBe("0");
  });

  it("keeps no data for a statistic not logged, and the quality of a value", () => {
    expect(metricCell(null, "no_data", fmt)).toEqual(["no data", "", ""]);
    expect(metricCell(0, "finite_only", fmt)).toEqual(["0", "finite values only", "finite values only: this step also held NaN/Inf"]);
  });
});

