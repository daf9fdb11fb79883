import { describe, expect, it } from "vitest";
import { linearTicks, scaleLinear, scaleLog, scaleSymlog, tickStep } from "../src/scale";
import { innermostEdge } from "../src/charts";

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

describe("extreme domains", () => {
  const finite = (xs: number[]): boolean => xs.every((x) => Number.isFinite(x));

  it("maps bucket edges of +-1.7e308 to finite pixels with a few ticks", () => {
    const s = scaleLinear([-1.7e308, 1.7e308], [0, 400]);
    expect(finite([s(-1.7e308), s(0), s(1.7e308), s(Number.MAX_VALUE)])).toBe(true);
    expect(s(-1.7e308)).toBeGreaterThanOrEqual(0);
    expect(s(1.7e308)).toBeLessThanOrEqual(400);
    expect(s(0)).toBeCloseTo(200, 0);
    const ticks = s.ticks(5);
    expect(ticks.length).toBeGreaterThan(1);
    expect(ticks.length).toBeLessThanOrEqual(20);
    expect(finite(ticks.map(s))).toBe(true);
    expect(finite([s.invert(0), s.invert(200), s.invert(400)])).toBe(true);
    expect(linearTicks(-Number.MAX_VALUE, Number.MAX_VALUE, 5).length).toBeLessThanOrEqual(20);
    expect(Number.isFinite(tickStep(-Number.MAX_VALUE, Number.MAX_VALUE, 5))).toBe(true);
  });

  it("maps subnormal edges to finite, distinct pixels", () => {
    const s = scaleLinear([5e-324, 2e-323], [0, 400]);
    expect(finite([s(5e-324), s(1e-323), s(2e-323)])).toBe(true);
    expect(s(2e-323)).toBeGreaterThan(s(5e-324));
    const ticks = s.ticks(5);
    expect(ticks.length).toBeGreaterThan(0);
    expect(ticks.length).toBeLessThanOrEqual(50);
    expect(finite(ticks.map(s))).toBe(true);
    expect(tickStep(0, 5e-324, 5)).toBeGreaterThan(0);
  });

  it("keeps a log scale over subnormal and huge values finite", () => {
    const tiny = scaleLog([5e-324, 1e-320], [200, 0]);
    expect(finite([tiny(5e-324), tiny(1e-322), tiny(1e-320)])).toBe(true);
    expect(tiny(1e-320)).toBeLessThan(tiny(5e-324));
    expect(finite(tiny.ticks(6).map(tiny))).toBe(true);
    expect(tiny.ticks(6).every((t) => t > 0)).toBe(true);
    const huge = scaleLog([1, 1.7e308], [200, 0]);
    expect(finite([huge(1), huge(1.7e308)])).toBe(true);
    expect(huge.ticks(6).every((t) => Number.isFinite(t))).toBe(true);
    expect(huge.ticks(6).length).toBeLessThanOrEqual(8);
  });
});

describe("symmetric log scale", () => {
  it("gives every octave of either sign one width, and the band around zero two", () => {
    const s = scaleSymlog([-8, 8], [0, 800], 1 / 1024);
    const width = (a: number, b: number): number => s(b) - s(a);
    expect(width(4, 8)).toBeCloseTo(width(1 / 1024, 1 / 512));
    expect(width(-8, -4)).toBeCloseTo(width(4, 8));
    expect(width(-1 / 1024, 1 / 1024)).toBeCloseTo(2 * width(4, 8));
    expect(s(0)).toBeCloseTo(400);
    expect(s.invert(s(0.3))).toBeCloseTo(0.3);
    expect(s.invert(s(-1e-4))).toBeCloseTo(-1e-4);
  });

  it("ticks at zero and at powers of ten of either sign", () => {
    const ticks = scaleSymlog([-5, 50], [0, 600], 1e-3).ticks(20);
    expect(ticks).toContain(0);
    expect(ticks).toContain(10);
    expect(ticks).toContain(-1);
    expect(ticks.every((v) => v >= -5 && v <= 50)).toBe(true);
    expect([...ticks].sort((a, b) => a - b)).toEqual(ticks);
  });

  it("takes the band around zero from the edges between buckets, not the tensor's min and max", () => {
    // Positive values only: the first bucket's left edge is the exact min, far inside the zero band.
    expect(innermostEdge([[1e-9, 0.25, 3], [0.25, 0.5, 4], [0.5, 0.9, 5]])).toBe(0.25);
    expect(innermostEdge([[-(2 ** -20), 2 ** -20, 1], [2 ** -20, 2 ** -19, 2]])).toBe(2 ** -20);
    expect(innermostEdge([[0.3, 0.7, 2]])).toBe(0.3);
  });
});
