import { describe, expect, it } from "vitest";
import type { Finding } from "../src/api";
import {
  csvCell,
  CSV_COLUMNS,
  findingId,
  findingsCsv,
  findingsFor,
  findingsJson,
  findingSpans,
  safeFileName,
  sortFindings,
  spikeSteps,
} from "../src/findings";
import { kindLabel, kindMetric } from "../src/vocabulary";

function finding(over: Partial<Finding>): Finding {
  return {
    run: "R", kind: "spike", severity: "info", layers: ["a"], first_step: 0, last_step: 0,
    message: "m", advice: "a", evidence: {}, role: "gradient", ...over,
  };
}

describe("sortFindings", () => {
  it("puts the most severe first, then the earliest, then the kind order", () => {
    const fs = [
      finding({ kind: "spike", severity: "info", first_step: 1 }),
      finding({ kind: "weight_growth", severity: "warn", first_step: 50 }),
      finding({ kind: "exploding_gradients", severity: "critical", first_step: 90 }),
      finding({ kind: "vanishing_gradients", severity: "warn", first_step: 50 }),
      finding({ kind: "nonfinite", severity: "critical", first_step: 90 }),
    ];
    expect(sortFindings(fs).map((f) => f.kind)).toEqual([
      "nonfinite", "exploding_gradients", "vanishing_gradients", "weight_growth", "spike",
    ]);
    expect(fs[0].kind).toBe("spike");
  });

  it("is stable for equal findings", () => {
    const a = finding({ message: "first" });
    const b = finding({ message: "second" });
    expect(sortFindings([a, b]).map((f) => f.message)).toEqual(["first", "second"]);
  });
});

describe("where a finding is", () => {
  const f = finding({
    kind: "exploding_gradients", layers: ["a", "b", "c"], first_step: 10, last_step: 160,
    evidence: { layers: { a: { first_step: 10, last_step: 30 }, b: { first_step: 20, last_step: "x" } } },
  });

  it("uses each layer's own span when the evidence has one", () => {
    expect(findingSpans(f)).toEqual(new Map([["a", [10, 30]], ["b", [10, 160]], ["c", [10, 160]]]));
  });

  it("lists spike steps per layer", () => {
    const p = finding({ kind: "periodic_spikes", layers: ["a"], evidence: { layers: { a: { spike_steps: [20, 40, "x"] } } } });
    expect(spikeSteps(p, "a")).toEqual([20, 40]);
    expect(spikeSteps(finding({ first_step: 7, evidence: { layers: { a: { step: 7 } } } }), "a")).toEqual([7]);
    expect(spikeSteps(f, "a")).toEqual([]);
  });

  it("finds the findings of a layer and role; no role means any role", () => {
    const fs = [f, finding({ layers: ["a"], role: "weight" }), finding({ layers: ["a"], role: null })];
    expect(findingsFor(fs, "a", "gradient")).toEqual([fs[0], fs[2]]);
    expect(findingsFor(fs, "z", "gradient")).toEqual([]);
  });

  it("has a stable id and readable labels", () => {
    expect(findingId(f)).toBe("exploding_gradients.gradient.10.a");
    expect(kindLabel("dead_units")).toBe("Dead units");
    expect(kindLabel("new_kind")).toBe("new kind");
    expect(kindMetric("exploding_gradients", "gradient")).toBe("max_abs");
    expect(kindMetric(null, "activation")).toBe("zero_fraction");
  });
});

describe("export", () => {
  it("escapes CSV fields", () => {
    expect(csvCell("plain")).toBe("plain");
    expect(csvCell('say "hi", ok')).toBe('"say ""hi"", ok"');
    expect(csvCell("two\nlines")).toBe('"two\nlines"');
    expect(csvCell(null)).toBe("");
    expect(csvCell(3.5)).toBe("3.5");
    expect(csvCell(-2)).toBe("-2");
    expect(csvCell(Number.NaN)).toBe("");
  });

  it("neutralises spreadsheet formulas in text", () => {
    expect(csvCell("=HYPERLINK(\"x\")")).toBe("\"'=HYPERLINK(\"\"x\"\")\"");
    expect(csvCell("+1")).toBe("'+1");
    expect(csvCell("@sum")).toBe("'@sum");
    expect(csvCell("-x")).toBe("'-x");
  });

  it("writes one header and one row per finding", () => {
    const csv = findingsCsv([
      finding({ layers: ["a,b", "<img src=x onerror=alert(1)>"], message: 'x "y"', period: 20, artefact: true }),
    ]);
    const lines = csv.trimEnd().split("\r\n");
    expect(lines[0]).toBe(CSV_COLUMNS.join(","));
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('"a,b; <img src=x onerror=alert(1)>"');
    expect(lines[1]).toContain('"x ""y"""');
    expect(lines[1]).toContain(",20,true,");
  });

  it("writes JSON that reads back", () => {
    const fs = [finding({ kind: "dead_units" })];
    expect(JSON.parse(findingsJson("R", fs))).toEqual({ run: "R", findings: fs });
  });

  it("builds safe file names", () => {
    expect(safeFileName("gradhealth", "../runs/a b", "weight")).toBe("gradhealth-_runs_a_b-weight");
    expect(safeFileName("..")).toBe("gradhealth");
  });
});
