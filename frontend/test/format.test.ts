import { describe, expect, it } from "vitest";
import {
  formatStep,
  formatStepTick,
  formatValue,
  nextNiceInterval,
  niceIntervalAtLeast,
  stepTicks,
} from "../src/format";

describe("formatValue", () => {
  it("prints ordinary numbers with four significant digits and no trailing zeros", () => {
    expect(formatValue(0)).toBe("0");
    expect(formatValue(1)).toBe("1");
    expect(formatValue(0.5)).toBe("0.5");
    expect(formatValue(0.93)).toBe("0.93");
    expect(formatValue(3.14159)).toBe("3.142");
    expect(formatValue(-12.5)).toBe("-12.5");
    expect(formatValue(12345)).toBe("12350");
    expect(formatValue(0.001)).toBe("0.001");
  });

  it("switches to exponent notation for extreme magnitudes", () => {
    expect(formatValue(1e-4)).toBe("1e-4");
    expect(formatValue(1.23456e-7)).toBe("1.235e-7");
    expect(formatValue(-2.5e8)).toBe("-2.5e8");
    expect(formatValue(100000)).toBe("1e5");
  });

  it("names missing and non-finite values", () => {
    expect(formatValue(null)).toBe("no data");
    expect(formatValue(undefined)).toBe("no data");
    expect(formatValue(Number.NaN)).toBe("NaN");
    expect(formatValue(Number.POSITIVE_INFINITY)).toBe("+inf");
    expect(formatValue(Number.NEGATIVE_INFINITY)).toBe("-inf");
  });

  it("honours the digits argument", () => {
    expect(formatValue(3.14159, 2)).toBe("3.1");
  });
});

describe("step formatting", () => {
  it("groups digits for tooltips", () => {
    expect(formatStep(0)).toBe("0");
    expect(formatStep(999)).toBe("999");
    expect(formatStep(1000)).toBe("1,000");
    expect(formatStep(1234567)).toBe("1,234,567");
    expect(formatStep(-4200)).toBe("-4,200");
  });

  it("shortens tick labels by the unit of the axis interval", () => {
    expect(formatStepTick(500)).toBe("500");
    expect(formatStepTick(1000)).toBe("1000");
    expect(formatStepTick(1200, 200)).toBe("1200");
    expect(formatStepTick(0, 1000)).toBe("0");
    expect(formatStepTick(1000, 1000)).toBe("1k");
    expect(formatStepTick(25000, 5000)).toBe("25k");
    expect(formatStepTick(3500000, 500000)).toBe("3500k");
    expect(formatStepTick(3000000, 1000000)).toBe("3M");
    expect(formatStepTick(0, 1000000)).toBe("0");
  });
});

describe("nice intervals", () => {
  it("rounds up to 1, 2, 5 times a power of ten", () => {
    expect(niceIntervalAtLeast(0)).toBe(1);
    expect(niceIntervalAtLeast(1)).toBe(1);
    expect(niceIntervalAtLeast(1.1)).toBe(2);
    expect(niceIntervalAtLeast(3)).toBe(5);
    expect(niceIntervalAtLeast(7)).toBe(10);
    expect(niceIntervalAtLeast(10)).toBe(10);
    expect(niceIntervalAtLeast(11)).toBe(20);
    expect(niceIntervalAtLeast(4999)).toBe(5000);
  });

  it("steps through the sequence", () => {
    const seq = [1];
    while (seq.length < 7) seq.push(nextNiceInterval(seq[seq.length - 1]));
    expect(seq).toEqual([1, 2, 5, 10, 20, 50, 100]);
  });
});

describe("stepTicks", () => {
  it("puts multiples that were logged on their column centres", () => {
    const steps = [0, 10, 20, 30, 40, 50, 60];
    expect(stepTicks(steps, 20)).toEqual([
      { step: 0, pos: 0.5 },
      { step: 20, pos: 2.5 },
      { step: 40, pos: 4.5 },
      { step: 60, pos: 6.5 },
    ]);
  });

  it("interpolates multiples that fall between logged steps", () => {
    expect(stepTicks([3, 7, 12, 19, 26, 31], 10)).toEqual([
      { step: 10, pos: 1.5 + 3 / 5 },
      { step: 20, pos: 3.5 + 1 / 7 },
      { step: 30, pos: 4.5 + 4 / 5 },
    ]);
  });

  it("returns ticks in increasing position", () => {
    let s = 0;
    const steps = Array.from({ length: 500 }, (_, i) => (s += 1 + (i % 9)));
    const ticks = stepTicks(steps, 50);
    for (let k = 1; k < ticks.length; k++) expect(ticks[k].pos).toBeGreaterThan(ticks[k - 1].pos);
    expect(ticks[0].pos).toBeGreaterThanOrEqual(0.5);
    expect(ticks[ticks.length - 1].pos).toBeLessThanOrEqual(steps.length - 0.5);
  });

  it("handles empty input and ranges with no multiple", () => {
    expect(stepTicks([], 5)).toEqual([]);
    expect(stepTicks([3, 4], 10)).toEqual([]);
    expect(stepTicks([1, 2], 0)).toEqual([]);
    expect(stepTicks([10], 5)).toEqual([{ step: 10, pos: 0.5 }]);
  });
});
