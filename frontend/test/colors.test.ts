import { describe, expect, it } from "vitest";
import {
  cellColor,
  computeDomain,
  denormalize,
  healthColor,
  healthBands,
  hexToRgb,
  luminance,
  metricColor,
  normalize,
  NO_DATA_COLOR,
  rgbToCss,
  statusColor,
  statusName,
  STATUS_COLORS,
  viridis,
  diverging,
  HEALTH_LUTS,
  LUT_SIZE,
  mergeDomains,
  metricDomain,
  packRgb,
  unpackRgb,
  VIRIDIS_LUT,
} from "../src/colors";
import type { Domain } from "../src/colors";

const NAMES = ["no_data", "ok", "warn", "critical"];

describe("viridis", () => {
  it("has the published endpoints and midpoint", () => {
    expect(viridis(0)).toEqual(hexToRgb("#440154"));
    expect(viridis(0.5)).toEqual(hexToRgb("#21918c"));
    expect(viridis(1)).toEqual(hexToRgb("#fde725"));
  });

  it("clamps out-of-range input and maps NaN to the bottom", () => {
    expect(viridis(-3)).toEqual(viridis(0));
    expect(viridis(7)).toEqual(viridis(1));
    expect(viridis(Number.NaN)).toEqual(viridis(0));
  });

  it("has strictly increasing luminance", () => {
    let prev = -1;
    for (let k = 0; k <= 100; k++) {
      const l = luminance(viridis(k / 100));
      expect(l).toBeGreaterThan(prev);
      prev = l;
    }
    expect(luminance(viridis(1)) - luminance(viridis(0))).toBeGreaterThan(0.6);
  });

  it("has monotone luminance at 8-bit resolution, up to channel rounding", () => {
    let prev = -1;
    for (let k = 0; k <= 255; k++) {
      const l = luminance(viridis(k / 255));
      // Rounding each channel to an integer can cost ~1/1000 of luminance.
      expect(l).toBeGreaterThan(prev - 1e-3);
      prev = Math.max(prev, l);
    }
  });

  it("returns integer channels in 0..255", () => {
    for (let k = 0; k <= 100; k++) {
      for (const ch of viridis(k / 100)) {
        expect(Number.isInteger(ch)).toBe(true);
        expect(ch).toBeGreaterThanOrEqual(0);
        expect(ch).toBeLessThanOrEqual(255);
      }
    }
  });

  it("formats CSS colours", () => {
    expect(rgbToCss([1, 2, 3])).toBe("rgb(1,2,3)");
  });
});

describe("domain and normalize", () => {
  const lin: Domain = { min: 2, max: 6, scale: "linear" };
  const log: Domain = { min: 1e-4, max: 1, scale: "log" };

  it("maps a linear domain onto 0..1", () => {
    expect(normalize(2, lin)).toBe(0);
    expect(normalize(4, lin)).toBe(0.5);
    expect(normalize(6, lin)).toBe(1);
    expect(normalize(100, lin)).toBe(1);
    expect(normalize(-100, lin)).toBe(0);
  });

  it("maps a log domain by orders of magnitude", () => {
    expect(normalize(1e-4, log)).toBeCloseTo(0);
    expect(normalize(1e-2, log)).toBeCloseTo(0.5);
    expect(normalize(1e-3, log)).toBeCloseTo(0.25);
    expect(normalize(1, log)).toBeCloseTo(1);
  });

  it("puts non-positive values at the bottom of a log scale", () => {
    expect(normalize(0, log)).toBe(0);
    expect(normalize(-5, log)).toBe(0);
  });

  it("returns null for missing or non-finite values", () => {
    expect(normalize(null, lin)).toBeNull();
    expect(normalize(undefined, lin)).toBeNull();
    expect(normalize(Number.NaN, lin)).toBeNull();
    expect(normalize(Number.POSITIVE_INFINITY, log)).toBeNull();
  });

  it("puts every value of a constant domain in the middle", () => {
    expect(normalize(3, { min: 3, max: 3, scale: "linear" })).toBe(0.5);
    expect(normalize(3, { min: 3, max: 3, scale: "log" })).toBe(0.5);
  });

  it("denormalize inverts normalize", () => {
    for (const d of [lin, log]) {
      for (const t of [0, 0.25, 0.5, 1]) {
        expect(normalize(denormalize(t, d), d)).toBeCloseTo(t);
      }
    }
  });

  it("finds the middle of a domain wider than a double holds", () => {
    expect(denormalize(0.5, { min: -1.7e308, max: 1.7e308, scale: "linear", diverging: true })).toBe(0);
    expect(denormalize(1, { min: -1.7e308, max: 1.7e308, scale: "linear" })).toBe(1.7e308);
    expect(normalize(1.7e308, { min: -1.7e308, max: 1.7e308, scale: "linear" })).toBe(1);
    expect(normalize(0, { min: -1.7e308, max: 1.7e308, scale: "linear" })).toBe(0.5);
  });

  it("computes min and max over finite values, skipping nulls", () => {
    expect(computeDomain([[1, null, 5], [null, -2, 3]], "linear")).toEqual({ min: -2, max: 5, scale: "linear" });
  });

  it("uses only positive values for a log domain", () => {
    expect(computeDomain([[0, 1e-3], [-1, 10]], "log")).toEqual({ min: 1e-3, max: 10, scale: "log" });
  });

  it("falls back to linear when a log domain has no positive value", () => {
    expect(computeDomain([[0, -1]], "log")).toEqual({ min: -1, max: 0, scale: "linear" });
  });

  it("returns null when nothing can be coloured", () => {
    expect(computeDomain([[null, null]], "linear")).toBeNull();
    expect(computeDomain([], "log")).toBeNull();
  });

  it("honours the skip predicate", () => {
    expect(computeDomain([[1, 100]], "linear", (_i, j) => j === 1)).toEqual({ min: 1, max: 1, scale: "linear" });
  });
});

describe("status and health colours", () => {
  it("names status codes through status_names", () => {
    expect(statusName(0, NAMES)).toBe("no_data");
    expect(statusName(3, NAMES)).toBe("critical");
    expect(statusName(9, NAMES)).toBe("no_data");
    expect(statusName(null, NAMES)).toBe("no_data");
  });

  it("has a colour for every status and grey for unknown ones", () => {
    for (const name of NAMES) expect(statusColor(name)).toBe(STATUS_COLORS[name]);
    expect(statusColor("mystery")).toBe(NO_DATA_COLOR);
  });

  it("gives each status a contiguous third of the score range", () => {
    expect(healthBands().map((b) => b.status)).toEqual(["critical", "warn", "ok"]);
    expect(healthBands()[0].lo).toBe(0);
    expect(healthBands()[2].hi).toBe(1);
    for (let k = 1; k < healthBands().length; k++) expect(healthBands()[k].lo).toBe(healthBands()[k - 1].hi);
  });

  it("colours a perfect score with the ok colour", () => {
    expect(healthColor(1, "ok")).toEqual(hexToRgb(STATUS_COLORS.ok));
  });

  it("keeps a health cell inside its status band", () => {
    const [critical, warn, ok] = healthBands();
    expect(healthColor(1, "critical")).toEqual(critical.to);
    expect(healthColor(0, "critical")).toEqual(critical.from);
    expect(healthColor(0, "ok")).toEqual(ok.from);
    expect(healthColor(0.99, "warn")).toEqual(warn.to);
    expect(healthColor(0.5, "no_data")).toBeNull();
    expect(healthColor(null, "ok")).toBeNull();
    expect(healthColor(Number.NaN, "ok")).toBeNull();
  });

  it("shades by score within a band", () => {
    const a = healthColor(0.7, "ok");
    const b = healthColor(0.95, "ok");
    expect(a).not.toEqual(b);
    expect(luminance(a!)).toBeGreaterThan(luminance(b!));
  });

  it("draws no_data and null cells grey for every metric", () => {
    const d: Domain = { min: 0, max: 1, scale: "linear" };
    expect(cellColor("health", null, "ok", null)).toBeNull();
    expect(cellColor("health", 0.9, "no_data", null)).toBeNull();
    expect(cellColor("mean", null, "ok", d)).toBeNull();
    expect(cellColor("mean", 0.5, "no_data", d)).toBeNull();
    expect(cellColor("mean", 0.5, "ok", null)).toBeNull();
    expect(cellColor("mean", 0.5, "critical", d)).toEqual(viridis(0.5));
    expect(cellColor("health", 0.2, "critical", null)).toEqual(healthColor(0.2, "critical"));
  });

  it("colours metric values with viridis through the domain", () => {
    const log: Domain = { min: 1e-6, max: 1, scale: "log" };
    expect(metricColor(1e-3, log)).toEqual(viridis(0.5));
    expect(metricColor(null, log)).toBeNull();
    expect(metricColor(1, null)).toBeNull();
  });
});

describe("diverging domains and shared scales", () => {
  it("centres signed metrics that straddle zero", () => {
    const d = metricDomain("mean", [[-2, 1], [0.5, null]], "linear");
    expect(d).toEqual({ min: -2, max: 2, scale: "linear", diverging: true });
    expect(normalize(0, d as Domain)).toBe(0.5);
  });

  it("keeps one-signed and unsigned metrics sequential", () => {
    expect(metricDomain("mean", [[1, 2]], "linear")).toEqual({ min: 1, max: 2, scale: "linear" });
    expect(metricDomain("zero_fraction", [[-1, 2]], "linear")?.diverging).toBeUndefined();
    expect(metricDomain("l2", [[1e-3, 10]], "log")).toEqual({ min: 1e-3, max: 10, scale: "log" });
  });

  it("merges two domains into one covering both", () => {
    expect(mergeDomains({ min: 1, max: 5, scale: "log" }, { min: 0.1, max: 2, scale: "log" })).toEqual({ min: 0.1, max: 5, scale: "log" });
    expect(mergeDomains(null, { min: 1, max: 2, scale: "linear" })).toEqual({ min: 1, max: 2, scale: "linear" });
    expect(mergeDomains({ min: -1, max: 1, scale: "linear", diverging: true }, { min: 0, max: 3, scale: "linear" })).toEqual({
      min: -3, max: 3, scale: "linear", diverging: true,
    });
    expect(mergeDomains(null, null)).toBeNull();
  });

  it("draws signed values with the diverging map, pale at zero", () => {
    const d: Domain = { min: -1, max: 1, scale: "linear", diverging: true };
    expect(metricColor(0, d)).toEqual(diverging(0.5));
    expect(luminance(diverging(0.5))).toBeGreaterThan(luminance(diverging(0)));
    expect(luminance(diverging(0.5))).toBeGreaterThan(luminance(diverging(1)));
  });
});

describe("pixel tables", () => {
  it("packs colours as ImageData pixels and back", () => {
    const c: [number, number, number] = [12, 200, 77];
    expect(unpackRgb(packRgb(c))).toEqual(c);
    const bytes = new Uint8Array(new Uint32Array([packRgb(c)]).buffer);
    expect(Array.from(bytes)).toEqual([12, 200, 77, 255]);
  });

  it("samples viridis and the health bands at 256 levels", () => {
    expect(VIRIDIS_LUT.length).toBe(LUT_SIZE);
    expect(unpackRgb(VIRIDIS_LUT[0])).toEqual(viridis(0));
    expect(unpackRgb(VIRIDIS_LUT[LUT_SIZE - 1])).toEqual(viridis(1));
    for (const b of healthBands()) {
      expect(unpackRgb(HEALTH_LUTS[b.status][0])).toEqual(b.from);
      expect(unpackRgb(HEALTH_LUTS[b.status][LUT_SIZE - 1])).toEqual(b.to);
    }
  });
});

describe("health bands match the backend's score bands", () => {
  it("colours a score with its status's hue", () => {
    expect(healthColor(0.1, "critical")).not.toBeNull();
    expect(healthColor(0.25, "critical")).toEqual(healthBands()[0].to);
    expect(healthColor(0.6, "warn")).toEqual(healthBands()[1].to);
    expect(healthColor(1, "ok")).toEqual(healthBands()[2].to);
  });
});
