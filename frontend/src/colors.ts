// Pure colour helpers: value -> colour. No DOM access, so they are unit-tested in node.

import { BRBG_HEX, VIRIDIS_HEX } from "./colormaps";
import { fraction, lerp } from "./scale";
import { scoreBands } from "./vocabulary";
import type { ScoreBand } from "./vocabulary";

export type Rgb = readonly [number, number, number];
export type Scale = "linear" | "log";

export function hexToRgb(hex: string): Rgb {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

export function rgbToCss(c: Rgb): string {
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function clamp01(t: number): number {
  return t < 0 ? 0 : t > 1 ? 1 : t;
}

function interpolate(table: readonly Rgb[], t: number): Rgb {
  const x = clamp01(t) * (table.length - 1);
  const i = Math.min(Math.floor(x), table.length - 2);
  const f = x - i;
  const a = table[i];
  const b = table[i + 1];
  return [
    Math.round(a[0] + (b[0] - a[0]) * f),
    Math.round(a[1] + (b[1] - a[1]) * f),
    Math.round(a[2] + (b[2] - a[2]) * f),
  ];
}

/** Colour maps are tables of LUT_SIZE colours, so drawing a cell is one array lookup. */
export const LUT_SIZE = 256;

function table(hex: string): readonly Rgb[] {
  return Array.from({ length: hex.length / 6 }, (_, k) => hexToRgb(`#${hex.slice(k * 6, k * 6 + 6)}`));
}

// Viridis for magnitudes: perceptually uniform, luminance rising monotonically, so
// brighter always means larger; it survives greyscale and colour-vision deficiencies.
const VIRIDIS = table(VIRIDIS_HEX);
// Brown-blue-green for signed values centred on zero (ColorBrewer BrBG): no red or
// green, so it never reads as a health status.
const DIVERGING = table(BRBG_HEX);

/** Viridis colour for t in [0, 1]; values outside are clamped, NaN maps to 0. */
export function viridis(t: number): Rgb {
  return VIRIDIS[Math.round(clamp01(Number.isNaN(t) ? 0 : t) * (LUT_SIZE - 1))];
}

/** Diverging colour for t in [0, 1], 0.5 being zero; NaN maps to the middle. */
export function diverging(t: number): Rgb {
  return DIVERGING[Math.round(clamp01(Number.isNaN(t) ? 0.5 : t) * (LUT_SIZE - 1))];
}

/** WCAG relative luminance in [0, 1]; used by tests and to pick legible text colours. */
export function luminance(c: Rgb): number {
  const lin = (v: number): number => {
    const s = v / 255;
    return s <= 0.04045 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
}

export interface Domain {
  min: number;
  max: number;
  scale: Scale;
  /** Signed values around zero: a symmetric domain drawn with the diverging map. */
  diverging?: boolean;
}

// Metrics whose sign matters: drawn with a diverging map centred on zero when
// their values fall on both sides of it.
export const SIGNED_METRICS: ReadonlySet<string> = new Set(["mean", "min", "max", "skewness", "kurtosis"]);

function usable(v: number | null | undefined, scale: Scale): v is number {
  return typeof v === "number" && Number.isFinite(v) && (scale === "linear" || v > 0);
}

/**
 * Colour-map domain of a heatmap: min and max of the finite values (positive ones
 * for a log scale). Falls back to linear when a log scale has no positive value, and
 * returns null when there is nothing to colour at all.
 */
export function computeDomain(
  values: readonly (readonly (number | null)[])[],
  scale: Scale,
  skip?: (row: number, col: number) => boolean,
): Domain | null {
  let min = Infinity;
  let max = -Infinity;
  values.forEach((row, i) =>
    row.forEach((v, j) => {
      if (!usable(v, scale) || (skip && skip(i, j))) return;
      if (v < min) min = v;
      if (v > max) max = v;
    }),
  );
  if (min > max) return scale === "log" ? computeDomain(values, "linear", skip) : null;
  return { min, max, scale };
}

/**
 * The colour domain of a metric: log or linear as the API says; signed metrics
 * whose values straddle zero get a domain symmetric around it.
 */
export function metricDomain(
  metric: string,
  values: readonly (readonly (number | null)[])[],
  scale: Scale,
  skip?: (row: number, col: number) => boolean,
): Domain | null {
  const d = computeDomain(values, scale, skip);
  if (d && d.scale === "linear" && SIGNED_METRICS.has(metric) && d.min < 0 && d.max > 0) {
    const m = Math.max(-d.min, d.max);
    return { min: -m, max: m, scale: "linear", diverging: true };
  }
  return d;
}

/** One domain covering both, so two heatmaps side by side share a colour scale. */
export function mergeDomains(a: Domain | null, b: Domain | null): Domain | null {
  if (!a || !b) return a ?? b;
  if (a.scale !== b.scale) return a.scale === "linear" ? a : b;
  const min = Math.min(a.min, b.min);
  const max = Math.max(a.max, b.max);
  if (a.diverging || b.diverging) {
    const m = Math.max(-min, max);
    return { min: -m, max: m, scale: "linear", diverging: true };
  }
  return { min, max, scale: a.scale };
}

/**
 * Position of a value in the domain, in [0, 1]. Null for missing or non-finite
 * values. On a log scale, non-positive values sit at the bottom of the range
 * because they are below every representable value.
 */
export function normalize(v: number | null | undefined, d: Domain): number | null {
  if (typeof v !== "number" || !Number.isFinite(v)) return null;
  if (d.scale === "log") {
    if (v <= 0 || d.min <= 0) return 0;
    const lo = Math.log(d.min);
    const hi = Math.log(d.max);
    return hi === lo ? 0.5 : clamp01((Math.log(v) - lo) / (hi - lo));
  }
  return d.max === d.min ? 0.5 : clamp01(fraction(v, d.min, d.max));
}

/** Inverse of normalize, for legend labels. */
export function denormalize(t: number, d: Domain): number {
  if (d.scale === "log" && d.min > 0) {
    return Math.exp(Math.log(d.min) + (Math.log(d.max) - Math.log(d.min)) * t);
  }
  return lerp(d.min, d.max, t);
}

// Status palette, used for the legend swatches. Hues follow the usual traffic-light
// meaning; the green leans to teal and the three differ in luminance so they stay
// apart for red-green colour blindness.
export const STATUS_COLORS: Readonly<Record<string, string>> = {
  no_data: "#9e9e9e",
  ok: "#1a9e77",
  warn: "#f5a623",
  critical: "#d7263d",
};

export const NO_DATA_COLOR = STATUS_COLORS.no_data;
// A metric cell whose tensor held NaN or Inf: its value (if any) is of the finite numbers alone, so it
// is drawn apart from the colour scale, in the critical hue its status has, never as "no data" grey.
export const NONFINITE_COLOR = STATUS_COLORS.critical;
// A health cell whose tensor held NaN or Inf: there the critical hue is a score's (the critical band's
// shades), so it gets a hue no band uses, apart from every score and from "no data".
export const HEALTH_NONFINITE_COLOR = "#6a3d9a";
export const NONFINITE_LABEL = "NaN / Inf";

/** The paint of a cell whose tensor held NaN or Inf in a view of `metric` (health or a metric's). */
export function nonfiniteColor(metric: string): string {
  return metric === "health" ? HEALTH_NONFINITE_COLOR : NONFINITE_COLOR;
}
// The quality code (`quality_names`) of a value at a step whose tensor held NaN or Inf.
export const NONFINITE_QUALITY = "finite_only";
// A value that proves nothing (an update ratio's lower bound of 0): painted as the tab paints what it did not
// judge (a run's "not judged" badge, a coverage note), in the no-data grey, apart from the colour scale.
export const NOT_JUDGED_COLOR = NO_DATA_COLOR;
// A row whose cells are still on their way: paler than "no data", so it never reads as a hole.
export const LOADING_COLOR = "#dfe4ea";

export const STATUS_LABELS: Readonly<Record<string, string>> = {
  no_data: "no data",
  ok: "ok",
  warn: "warn",
  critical: "critical",
};

/** Name of a status code, via the API's status_names; unknown codes read as no_data. */
export function statusName(code: number | null | undefined, names: readonly string[]): string {
  if (typeof code !== "number" || code < 0 || code >= names.length) return "no_data";
  return names[code];
}

export function statusColor(name: string): string {
  return STATUS_COLORS[name] ?? NO_DATA_COLOR;
}

export interface HealthBand {
  status: string;
  /** Score range of the band, from the vocabulary. */
  lo: number;
  hi: number;
  /** Colours at lo and hi. */
  from: Rgb;
  to: Rgb;
}

// Each status owns the score band the backend gives it (the vocabulary's
// health_bands) and its own hue, so a cell's hue always agrees with the status the
// rules decided, whatever its score. Within a band the shade shows the score: the
// worst and the best cells are the most saturated, cells near a boundary are pale.
export const HEALTH_SHADES: Readonly<Record<string, { from: Rgb; to: Rgb }>> = {
  critical: { from: hexToRgb("#a50f15"), to: hexToRgb("#e5484d") },
  warn: { from: hexToRgb("#e8850c"), to: hexToRgb("#f9c74f") },
  ok: { from: hexToRgb("#9fd8b9"), to: hexToRgb(STATUS_COLORS.ok) },
};

let bandsFor: readonly ScoreBand[] | null = null;
let bands: HealthBand[] = [];

/** The vocabulary's score bands, lowest scores first, with their shades; bands without a shade are left out. */
export function healthBands(): readonly HealthBand[] {
  const ranges = scoreBands();
  if (bandsFor === null || ranges.length !== bandsFor.length || ranges.some((r, i) => r !== bandsFor?.[i])) {
    bandsFor = ranges;
    bands = ranges.flatMap((r) => (HEALTH_SHADES[r.status] ? [{ ...r, ...HEALTH_SHADES[r.status] }] : []));
  }
  return bands;
}

/** Colour of a health cell, or null when it should be drawn as no data. */
export function healthColor(score: number | null | undefined, status: string): Rgb | null {
  const band = healthBands().find((b) => b.status === status);
  if (!band || typeof score !== "number" || !Number.isFinite(score)) return null;
  const t = (Math.min(Math.max(score, band.lo), band.hi) - band.lo) / (band.hi - band.lo);
  return interpolate([band.from, band.to], t);
}

/** Colour of a metric cell, or null when it should be drawn as no data. */
export function metricColor(v: number | null | undefined, d: Domain | null): Rgb | null {
  if (!d) return null;
  const t = normalize(v, d);
  if (t === null) return null;
  return d.diverging ? diverging(t) : viridis(t);
}

/**
 * Colour of one heatmap cell, or null for "draw as no data": status no_data or a
 * null value is always grey, whatever the metric.
 */
export function cellColor(
  metric: string,
  value: number | null | undefined,
  status: string,
  domain: Domain | null,
): Rgb | null {
  if (status === "no_data" || value === null || value === undefined) return null;
  return metric === "health" ? healthColor(value, status) : metricColor(value, domain);
}

/** Packs a colour as one ImageData pixel (opaque), in the machine's byte order. */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
export function packRgb(c: Rgb): number {
  return LITTLE_ENDIAN
    ? ((255 << 24) | (c[2] << 16) | (c[1] << 8) | c[0]) >>> 0
    : ((c[0] << 24) | (c[1] << 16) | (c[2] << 8) | 255) >>> 0;
}

export function unpackRgb(p: number): Rgb {
  return LITTLE_ENDIAN ? [p & 255, (p >>> 8) & 255, (p >>> 16) & 255] : [p >>> 24, (p >>> 16) & 255, (p >>> 8) & 255];
}

/** Colour maps as packed pixel tables, built once. */
export const VIRIDIS_LUT = Uint32Array.from(VIRIDIS, packRgb);
export const DIVERGING_LUT = Uint32Array.from(DIVERGING, packRgb);
export const HEALTH_LUTS: Readonly<Record<string, Uint32Array>> = Object.fromEntries(
  Object.entries(HEALTH_SHADES).map(([status, b]) => [
    status,
    Uint32Array.from({ length: LUT_SIZE }, (_, k) => packRgb(interpolate([b.from, b.to], k / (LUT_SIZE - 1)))),
  ]),
);
