import { describe, expect, it } from "vitest";
import {
  callText,
  formatStep,
  formatStepRange,
  formatStepTick,
  humanize,
  formatValue,
  nextNiceInterval,
  niceIntervalAtLeast,
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

  it("prints steps past 2^53 exactly", () => {
    const big = 2n ** 60n + 1n;
    expect(formatStep(big)).toBe("1,152,921,504,606,846,977");
    expect(formatStep(-big)).toBe("-1,152,921,504,606,846,977");
    expect(formatStepRange(big, big)).toBe("step 1,152,921,504,606,846,977");
    expect(formatStepRange(big - 1n, big)).toBe("steps 1,152,921,504,606,846,976 to 1,152,921,504,606,846,977");
    expect(formatStepTick(big)).toBe("1152921504606846977");
    expect(formatStepTick(5n * 10n ** 18n, 10n ** 18n)).toBe("5000000000000M");
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

describe("labels", () => {
  it("formats step ranges", () => {
    expect(formatStepRange(1200, 1200)).toBe("step 1,200");
    expect(formatStepRange(10, 3400)).toBe("steps 10 to 3,400");
  });

  it("humanizes metric names", () => {
    expect(humanize("max_abs")).toBe("max abs");
    expect(humanize("std_rel_first")).toBe("std rel first");
  });
});

describe("callText", () => {
  it("says a module's later call in forward is that call of the module", () => {
    expect(callText("layer1.0.relu[1]")).toBe(
      "layer1.0.relu[1] is the second call of module layer1.0.relu in forward: a module called several times " +
        "in one forward pass (a shared ReLU) is logged once per call, [1] for the second",
    );
    expect(callText("relu[2]")).toMatch(/^relu\[2\] is the third call of module relu in forward/);
    expect(callText("act[20]")).toMatch(/^act\[20\] is the 21st call of module act /);
    expect(callText("act[10]")).toMatch(/ the 11th call /);
  });

  it("says nothing of other names", () => {
    for (const name of ["relu", "layer1.0.relu", "relu[0]", "relu[x]", "a [1]", "[1]", "w[01]"]) expect(callText(name)).toBeNull();
  });
});
