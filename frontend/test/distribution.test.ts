import { describe, expect, it } from "vitest";
import { bandPairs, bandPath, fetchDistribution, medianIndex, parseDistribution, valueRange } from "../src/distribution";

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
