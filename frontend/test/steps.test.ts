import { describe, expect, it } from "vitest";
import {
  ceilStep, compareSteps, floorDiv, floorStep, indexOfStep, jsonWithSteps, multiplesBetween, offsets, parseStep,
  stepField, stepListField, stepsUnion,
} from "../src/steps";

const BIG = 2n ** 60n;

describe("steps", () => {
  it("parses decimal strings and integral numbers only", () => {
    expect(parseStep("1152921504606846977")).toBe(BIG + 1n);
    expect(parseStep("-5")).toBe(-5n);
    expect(parseStep(12)).toBe(12n);
    for (const bad of ["", " 5", "1_000", "+5", "1e3", "\uff15", "0x10", 1.5, Number.NaN, null, undefined, {}]) {
      expect(parseStep(bad)).toBeNull();
    }
  });

  it("prefers the exact _text twin of a field", () => {
    // JSON.parse reads 1152921504606846977 as 1152921504606847000.
    expect(stepField({ step: 1152921504606847000, step_text: "1152921504606846977" }, "step")).toBe(BIG + 1n);
    expect(stepField({ step: 7 }, "step")).toBe(7n);
    expect(stepField({ step_text: "x", step: 7 }, "step")).toBe(7n);
    expect(stepListField({ steps: [1, 2], steps_text: ["1152921504606846976", "1152921504606846977"] }, "steps")).toEqual([BIG, BIG + 1n]);
    expect(stepListField({ steps: [1, "x"] }, "steps")).toBeNull();
    expect(stepListField({}, "steps")).toBeNull();
  });

  it("places steps past 2^53 apart, relative to the first", () => {
    expect(Array.from(offsets([BIG, BIG + 1n, BIG + 4n]))).toEqual([0, 1, 4]);
    // From zero they would collapse into one double.
    expect(Number(BIG + 1n)).toBe(Number(BIG));
    expect(floorStep(BIG, 2.7)).toBe(BIG + 2n);
    expect(ceilStep(BIG, 2.2)).toBe(BIG + 3n);
    expect(floorStep(BIG, -0.5)).toBe(BIG - 1n);
  });

  it("finds and orders steps exactly", () => {
    const steps = [BIG, BIG + 1n, BIG + 2n];
    expect(indexOfStep(steps, BIG + 1n)).toBe(1);
    expect(indexOfStep(steps, BIG + 3n)).toBe(-1);
    expect(compareSteps(BIG, BIG + 1n)).toBe(-1);
    expect(compareSteps(BIG + 1n, BIG + 1n)).toBe(0);
  });

  it("lists multiples of an interval, bounded in count", () => {
    expect(floorDiv(-7n, 2n)).toBe(-4n);
    expect(floorDiv(7n, 2n)).toBe(3n);
    expect(multiplesBetween(-7n, 7n, 5n, 10)).toEqual([-5n, 0n, 5n]);
    expect(multiplesBetween(BIG + 1n, BIG + 3n, 1n, 10)).toEqual([BIG + 1n, BIG + 2n, BIG + 3n]);
    expect(multiplesBetween(0n, 10n ** 18n, 1n, 100)).toBeNull();
    expect(multiplesBetween(5n, 4n, 1n, 10)).toEqual([]);
  });

  it("writes bigints into JSON as decimal strings", () => {
    expect(jsonWithSteps({ step: BIG + 1n, n: 2 })).toBe('{"step":"1152921504606846977","n":2}');
  });
});

describe("stepsUnion", () => {
  it("spans from the first of the spans to the last, exactly; null for none", () => {
    expect(stepsUnion([[0n, 990n], [0n, 590n]])).toEqual([0n, 990n]);
    expect(stepsUnion([[BIG + 5n, BIG + 9n], null, [BIG + 1n, BIG + 6n]])).toEqual([BIG + 1n, BIG + 9n]);
    expect(stepsUnion([null, undefined])).toBeNull();
  });
});
