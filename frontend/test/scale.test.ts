import { describe, expect, it } from "vitest";
import { linearTicks, scaleLinear, scaleLog, tickStep } from "../src/scale";
import { uniformBuckets } from "../src/charts";

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

describe("octave buckets spread onto equal bins", () => {
  // Octaves of |x| below max |x| = 1 of either sign, and the band around zero, with a bell's counts.
  const octaves: [number, number, number][] = [];
  for (let j = 0; j < 20; j++) {
    const [a, b] = [2 ** -(j + 1), 2 ** -j];
    const share = Math.exp(-8 * ((a + b) / 2) ** 2) * (b - a) * 1000;  // a normal density of sigma 0.25
    octaves.push([-b, -a, share], [a, b, share]);
  }
  octaves.push([-(2 ** -20), 2 ** -20, 3]);

  it("keeps every count and gives every bin one width", () => {
    const bins = uniformBuckets(octaves, 40);
    expect(bins).toHaveLength(40);
    const total = (bs: [number, number, number][]): number => bs.reduce((t, [, , c]) => t + c, 0);
    expect(total(bins)).toBeCloseTo(total(octaves), 6);
    const widths = bins.map(([l, r]) => r - l);
    for (const w of widths) expect(w).toBeCloseTo(0.05, 9);
    expect(bins[0][0]).toBe(-1);
    expect(bins[39][1]).toBe(1);
  });

  it("draws a centred tensor as one hump, not two", () => {
    const counts = uniformBuckets(octaves, 40).map(([, , c]) => c);
    const peak = counts.indexOf(Math.max(...counts));
    expect(Math.abs(peak - 19.5)).toBeLessThanOrEqual(1);
    expect(counts[0]).toBeLessThan(counts[19] / 2);
  });

  it("puts a bucket without width in the bin holding it", () => {
    expect(uniformBuckets([[0, 0, 5], [0, 1, 4]], 4).map(([, , c]) => c)).toEqual([6, 1, 1, 1]);
    expect(uniformBuckets([[2, 2, 5]], 4)).toEqual([[2, 2, 5]]);
  });
});
