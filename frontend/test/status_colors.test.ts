// The status colours are part of what the tab means: pinned here to exact values, the
// heatmap's cells painted with them, and critical kept apart from warn by luminance
// alone, so a reader who cannot tell red from orange still can.
import { describe, expect, it } from "vitest";
import { parseHeatmap } from "../src/api";
import { healthBands, healthColor, hexToRgb, luminance, STATUS_COLORS, statusColor, unpackRgb } from "../src/colors";
import type { Rgb } from "../src/colors";
import { buildCells } from "../src/model";
import { CSS } from "../src/styles";

const NAMES = ["no_data", "ok", "warn", "critical"];

const PINNED_STATUS: Record<string, string> = {
  no_data: "#9e9e9e",
  ok: "#1a9e77",
  warn: "#f5a623",
  critical: "#d7263d",
};

// Score band and the colours at its two ends.
const PINNED_BANDS: Record<string, { lo: number; hi: number; from: string; to: string }> = {
  critical: { lo: 0, hi: 0.25, from: "#a50f15", to: "#e5484d" },
  warn: { lo: 0.25, hi: 0.6, from: "#e8850c", to: "#f9c74f" },
  ok: { lo: 0.6, hi: 1, from: "#9fd8b9", to: "#1a9e77" },
};

/** WCAG contrast ratio of two colours. */
function contrast(a: Rgb, b: Rgb): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

function bandShades(status: string): Rgb[] {
  const b = PINNED_BANDS[status];
  return Array.from({ length: 11 }, (_, k) => healthColor(b.lo + ((b.hi - b.lo) * k) / 10, status)!);
}

describe("status colours", () => {
  it("are the pinned colours", () => {
    for (const [name, hex] of Object.entries(PINNED_STATUS)) {
      expect(STATUS_COLORS[name]).toBe(hex);
      expect(statusColor(name)).toBe(hex);
    }
  });

  it("are the pinned colours in the badges and finding borders", () => {
    const css = CSS.replace(/\s+/g, " ");
    for (const name of ["critical", "warn"]) {
      const hex = PINNED_STATUS[name];
      expect(css).toContain(`.gh-sev-${name}, .gh-status-${name} { background: ${hex}; border-color: ${hex};`);
      expect(css).toContain(`.gh-finding.gh-sev-border-${name} { border-left-color: ${hex}; }`);
    }
    for (const name of ["ok", "no_data"]) {
      const hex = PINNED_STATUS[name];
      expect(css).toContain(`.gh-status-${name} { background: ${hex}; border-color: ${hex};`);
    }
  });

  it("keep critical apart from warn by luminance: darker, at a contrast of at least 2", () => {
    const critical = hexToRgb(STATUS_COLORS.critical);
    const warn = hexToRgb(STATUS_COLORS.warn);
    expect(luminance(critical)).toBeLessThan(luminance(warn));
    expect(contrast(critical, warn)).toBeGreaterThanOrEqual(2);
  });
});

describe("health bands", () => {
  it("give each status its pinned score band and end colours", () => {
    expect(healthBands().map((b) => b.status)).toEqual(["critical", "warn", "ok"]);
    for (const band of healthBands()) {
      const pinned = PINNED_BANDS[band.status];
      expect([band.lo, band.hi]).toEqual([pinned.lo, pinned.hi]);
      expect(band.from).toEqual(hexToRgb(pinned.from));
      expect(band.to).toEqual(hexToRgb(pinned.to));
    }
  });

  it("colour the ends of each band with the pinned colours", () => {
    for (const [status, b] of Object.entries(PINNED_BANDS)) {
      expect(healthColor(b.lo, status)).toEqual(hexToRgb(b.from));
      expect(healthColor(b.hi, status)).toEqual(hexToRgb(b.to));
    }
  });

  it("make every critical shade darker than every warn shade", () => {
    const brightestCritical = bandShades("critical").reduce((a, c) => (luminance(c) > luminance(a) ? c : a));
    const darkestWarn = bandShades("warn").reduce((a, c) => (luminance(c) < luminance(a) ? c : a));
    expect(luminance(brightestCritical)).toBeLessThan(luminance(darkestWarn));
    expect(contrast(brightestCritical, darkestWarn)).toBeGreaterThanOrEqual(1.4);
  });

  it("paint heatmap cells with the pinned colours of their status", () => {
    // One row: critical at both ends of its band, warn at both ends of its band, ok at a perfect score.
    const scores = [0, 0.25, 0.25, 0.6, 1];
    const status = [3, 3, 2, 2, 1];
    const h = parseHeatmap({
      layers: ["l0"],
      steps: scores.map((_, j) => j),
      values: [scores],
      status: [status],
      status_names: NAMES,
      metric: "health",
      scale: "linear",
    });
    const m = buildCells(h, null);
    const painted = Array.from(m.colors, (p) => unpackRgb(p));
    expect(painted).toEqual(
      [PINNED_BANDS.critical.from, PINNED_BANDS.critical.to, PINNED_BANDS.warn.from, PINNED_BANDS.warn.to,
        PINNED_BANDS.ok.to].map(hexToRgb),
    );
  });
});
