import { describe, expect, it } from "vitest";
import {
  bandPairs, bandPath, drawnValues, fetchDistribution, medianIndex, parseDistribution, stepReadout, symlog, symlogTicks, valueAxis,
  valueRange,
} from "../src/distribution";
import type { RoleDistribution } from "../src/distribution";

const PERCENTILES = [0, 6.68, 15.87, 30.85, 50, 69.15, 84.13, 93.32, 100];

function answer(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    run: "r",
    layer: "fc1.weight",
    percentiles: PERCENTILES,
    distributions: {
      weight: {
        source: "gradhealth",
        axis: "row",
        steps: [0, 10],
        steps_text: ["0", "10"],
        values: [PERCENTILES.map((p) => p / 10), PERCENTILES.map((p) => p / 5)],
      },
      ...over,
    },
  };
}

describe("parseDistribution", () => {
  it("reads steps from their exact decimal twins", () => {
    const big = answer({
      gradient: {
        source: "histogram",
        axis: "other",
        steps: [2 ** 60, 2 ** 60],
        steps_text: ["1152921504606846976", "1152921504606846977"],
        values: [PERCENTILES.map(() => 1), PERCENTILES.map(() => null)],
      },
    });
    const d = parseDistribution(big);
    expect(d.percentiles).toEqual(PERCENTILES);
    expect(d.roles.weight.steps).toEqual([0n, 10n]);
    expect(d.roles.gradient.steps).toEqual([1152921504606846976n, 1152921504606846977n]);
    expect(d.roles.gradient.axis).toBe("other");
    expect(d.roles.gradient.values[1].every((v) => v === null)).toBe(true);
  });

  it("leaves out a role whose steps and values differ in length, and reads a role without histograms", () => {
    const d = parseDistribution(
      answer({
        bad: { source: "gradhealth", steps: [0], steps_text: ["0"], values: [] },
        activation: { source: null, axis: "row", steps: [], steps_text: [], values: [] },
      }),
    );
    expect(Object.keys(d.roles).sort()).toEqual(["activation", "weight"]);
    expect(d.roles.activation.source).toBeNull();
  });

  it("refuses an answer that is not a distribution", () => {
    expect(() => parseDistribution({ run: "r" })).toThrow(/distribution/);
  });

  it("is what fetchDistribution gives, asking the route for one layer and role", async () => {
    let asked = "";
    const fake = async (url: string): Promise<Response> => {
      asked = url;
      return new Response(JSON.stringify(answer()), { status: 200 });
    };
    const d = await fetchDistribution("r", "fc1.weight", "weight", fake);
    expect(asked).toBe("distribution?run=r&layer=fc1.weight&role=weight");
    expect(d.roles.weight.values[1][8]).toBe(20);
  });
});

describe("bands", () => {
  it("pairs percentiles from the outside in, around the median", () => {
    expect(bandPairs(PERCENTILES)).toEqual([[0, 8], [1, 7], [2, 6], [3, 5]]);
    expect(medianIndex(PERCENTILES)).toBe(4);
    expect(medianIndex([0, 100])).toBe(-1);
  });

  it("takes the value range over every finite value", () => {
    const d = parseDistribution(answer()).roles.weight;
    expect(valueRange(d)).toEqual([0, 20]);
    expect(valueRange({ ...d, values: [[null, null]] })).toBeNull();
  });

  it("breaks a band where a step has no value and draws a lone step as a sliver", () => {
    const at = new Float64Array([0, 1, 2, 3]);
    const values = [[0, 1], [0, 1], [null, null], [0, 1]];
    const path = bandPath(at, values, 0, 1, (x) => x * 10, (v) => 100 - v);
    // Two closed shapes: steps 0-1, then step 3 alone.
    expect(path.match(/Z/g)?.length).toBe(2);
    expect(path.startsWith("M0.0,99.0L10.0,99.0L10.0,100.0L0.0,100.0Z")).toBe(true);
    expect(path).toContain("M29.0,99.0L31.0,99.0L31.0,100.0L29.0,100.0Z");
  });
});

describe("valueAxis", () => {
  const role = (values: (number | null)[][]): RoleDistribution => ({ source: "gradhealth", axis: "row", steps: values.map((_, i) => BigInt(i)), values,
    nonfinite: values.map(() => null), nonfiniteOf: values.map(() => null) });
  // Percentiles 0, 7, 16, 31, 50, 69, 84, 93, 100 of a gradient around 1e-6, its extremes +-2,000 at one step.
  const bulk = (s: number, lo = -3 * s, hi = 3 * s): number[] => [lo, -1.5 * s, -s, -0.5 * s, 0, 0.5 * s, s, 1.5 * s, hi];

  it("is symmetric log when the extremes dwarf the bulk, linear around the bulk's small values", () => {
    const d = role([bulk(1e-6), bulk(2e-6, -2000, 2000), bulk(1e-6)]);
    const axis = valueAxis(d);
    expect(axis.kind).toBe("symlog");
    expect(axis.linear).toBeGreaterThan(1e-7);
    expect(axis.linear).toBeLessThan(1e-5);
    // The bulk's 16-84% band takes a share of the height one can see (a linear axis gives it 5e-10).
    const c = axis.linear;
    const share = (symlog(1e-6, c) - symlog(-1e-6, c)) / (symlog(2000, c) - symlog(-2000, c));
    expect(share).toBeGreaterThan(0.04);
  });

  it("stays linear when the extremes are of the bulk's size", () => {
    expect(valueAxis(role([bulk(0.1), bulk(0.12)])).kind).toBe("linear");
    expect(valueAxis(role([[null, null, null, null, null, null, null, null, null]])).kind).toBe("linear");
  });

  it("ticks 0 and powers of ten, a few a side, inside the range", () => {
    const ticks = symlogTicks(-2000, 2000, 1e-6);
    expect(ticks).toContain(0);
    expect(ticks.length).toBeLessThanOrEqual(7);
    expect(ticks.every((t) => t === 0 || Math.abs(Math.log10(Math.abs(t)) % 1) < 1e-9)).toBe(true);
    expect(ticks).toEqual([...ticks].sort((a, b) => a - b));
    expect(symlogTicks(0, 5, 1e-3).every((t) => t >= 0 && t <= 5)).toBe(true);
  });
});

describe("steps whose tensor held NaN/Inf", () => {
  const held = answer({
    gradient: {
      source: "gradhealth", axis: "row", steps: [0, 10, 20], steps_text: ["0", "10", "20"],
      values: [PERCENTILES.map((p) => p / 10), PERCENTILES.map(() => 0), PERCENTILES.map(() => null)],
      nonfinite: [null, 81, 108], nonfinite_of: [null, 108, 108],
    },
  });

  it("reads the counts, and none from an answer without them", () => {
    const d = parseDistribution(held).roles.gradient;
    expect(d.nonfinite).toEqual([null, 81, 108]);
    expect(d.nonfiniteOf).toEqual([null, 108, 108]);
    expect(parseDistribution(answer()).roles.weight.nonfinite).toEqual([null, null]);
  });

  it("draws no percentiles there: they are of the finite values alone", () => {
    const d = parseDistribution(held).roles.gradient;
    const drawn = drawnValues(d);
    expect(drawn[0]).toEqual(d.values[0]);
    expect(drawn[1].every((v) => v === null)).toBe(true);
  });

  it("says how many values were NaN/Inf in the hover", () => {
    const d = parseDistribution(held).roles.gradient;
    const mid = medianIndex(PERCENTILES);
    expect(stepReadout(d, 1, mid)).toBe("step 10: NaN/Inf: 81 of 108; finite values only: median 0, 0 .. 0");
    expect(stepReadout(d, 2, mid)).toBe("step 20: NaN/Inf: 108 of 108");
    expect(stepReadout(d, 0, mid)).toContain("step 0: median 5");
  });
});

