import { describe, expect, it } from "vitest";
import { linearTicks, scaleLinear, scaleLog, tickStep } from "../src/scale";

describe("linear scale", () => {
  it("picks round tick steps", () => {
    expect(tickStep(0, 1, 5)).toBe(0.2);
    expect(tickStep(0, 100, 5)).toBe(20);
    expect(tickStep(0, 7, 5)).toBe(2);
    expect(tickStep(-3e-5, 3e-5, 4)).toBeCloseTo(2e-5);
  });

  it("writes ticks without floating-point dust", () => {
    expect(linearTicks(0, 1, 5)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(linearTicks(0.1, 0.35, 5)).toEqual([0.1, 0.15, 0.2, 0.25, 0.3, 0.35]);
    expect(linearTicks(-1, 1, 4)).toEqual([-1, -0.5, 0, 0.5, 1]);
    expect(linearTicks(2, 2, 5)).toEqual([2]);
  });

  it("maps, inverts and widens the domain to round bounds", () => {
    const s = scaleLinear([0.13, 9.7], [0, 100]);
    expect(s.domain).toEqual([0, 10]);
    expect(s(5)).toBe(50);
    expect(s.invert(25)).toBe(2.5);
    const flat = scaleLinear([3, 3], [0, 100]);
    expect(flat(3)).toBe(50);
    const raw = scaleLinear([10, 20], [0, 100], false);
    expect(raw(15)).toBe(50);
  });
});

describe("log scale", () => {
  it("spans whole decades and ticks at powers of ten", () => {
    const s = scaleLog([0.003, 450], [100, 0]);
    expect(s.domain).toEqual([1e-3, 1e3]);
    expect(s(1)).toBeCloseTo(50);
    expect(s.invert(50)).toBeCloseTo(1);
    expect(s.ticks(10)).toEqual([1e-3, 1e-2, 1e-1, 1, 10, 100, 1e3]);
    expect(s.ticks(3).length).toBeLessThanOrEqual(4);
  });

  it("widens a range inside one decade", () => {
    expect(scaleLog([10, 10], [0, 1]).domain).toEqual([10, 100]);
  });
});
