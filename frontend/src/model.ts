// Pure cell colouring: one packed pixel and one priority per heatmap cell, computed
// once per heatmap so drawing, zooming and scrolling only copy numbers.

import type { Heatmap } from "./api";
import {
  DIVERGING_LUT, healthBands, HEALTH_LUTS, HEALTH_NONFINITE_COLOR, hexToRgb, LOADING_COLOR, LUT_SIZE, NO_DATA_COLOR,
  NONFINITE_COLOR, NONFINITE_QUALITY, NOT_JUDGED_COLOR, packRgb, STATUS_COLORS, VIRIDIS_LUT,
} from "./colors";
import type { Domain } from "./colors";
import type { PixelColumns } from "./layout";
import { NOT_JUDGED_QUALITY } from "./quality";
import { statusRank, vocabulary } from "./vocabulary";

export const NO_DATA_PIXEL = packRgb(hexToRgb(NO_DATA_COLOR));
export const LOADING_PIXEL = packRgb(hexToRgb(LOADING_COLOR));
export const NONFINITE_PIXEL = packRgb(hexToRgb(NONFINITE_COLOR));
export const HEALTH_NONFINITE_PIXEL = packRgb(hexToRgb(HEALTH_NONFINITE_COLOR));
export const NOT_JUDGED_PIXEL = packRgb(hexToRgb(NOT_JUDGED_COLOR));
const NO_DATA_LUT = new Uint32Array(LUT_SIZE).fill(NO_DATA_PIXEL);

export interface CellModel {
  rows: number;
  cols: number;
  /** Packed ImageData pixel per cell, row-major. */
  colors: Uint32Array;
  /**
   * Which cell a pixel shows when it covers several steps: the worst status
   * first, then the lowest health score (health view) or the most extreme value
   * (metric views).
   */
  priority: Uint16Array;
  /**
   * Health view: a critical cell the raster gives less than 2 pixels is painted
   * 2 pixels wide in the status colour, since its darkest shade reads as black
   * in one pixel; a NaN/Inf cell keeps its own paint (`keep`), widened alike. Null elsewhere: a metric
   * view's colour is the value's.
   */
  narrow: { rank: number; pixel: number; keep: number } | null;
}

// The status whose cells are never shown narrower than 2 pixels.
const CRITICAL = "critical";

interface RowContext {
  colors: Uint32Array;
  priority: Uint16Array;
  /** Rank per status code, and how many codes there are. */
  rankOf: Uint8Array;
  codes: number;
  /** Health: per rank, the band's start, scale to LUT positions and table. */
  bandLo: Float64Array;
  bandScale: Float64Array;
  bandLut: Uint32Array[];
  /**
   * Metrics: the colour table and t = (f(v) * half - lo) * k, f = log on a log
   * domain; `half` is 0.5 where the domain spans more than a double holds
   * (+-1.7e308), 1 otherwise, and `lo` is the domain's low end times `half`.
   */
  lut: Uint32Array;
  log: boolean;
  half: number;
  lo: number;
  k: number;
  flat: boolean;
  diverging: boolean;
}

const TOP = LUT_SIZE - 1;

// Above every colour-scale position within a status rank: a pixel covering several steps shows NaN/Inf first.
const NONFINITE_PRIORITY = 511;

// One row per call: small monomorphic functions that the JIT optimises after a
// few rows, where one big loop over millions of cells would run unoptimised for long.
/** Health: a cell whose tensor held NaN or Inf (quality `nonfinite`'s) gets its own paint, as in the metric views. */
function healthRow(
  c: RowContext, values: readonly (number | null)[], status: readonly number[], quality: readonly number[] | undefined,
  nonfinite: number, base: number,
): void {
  const { colors, priority, rankOf, codes, bandLo, bandScale, bandLut } = c;
  const n = values.length;
  for (let j = 0; j < n; j++) {
    const code = status[j];
    const rank = code >= 0 && code < codes ? rankOf[code] : 0;
    const v = values[j];
    if (rank !== 0 && quality !== undefined && quality[j] === nonfinite) {
      colors[base + j] = HEALTH_NONFINITE_PIXEL;
      priority[base + j] = (rank << 9) | NONFINITE_PRIORITY;
      continue;
    }
    if (rank === 0 || v === null || !Number.isFinite(v)) {
      colors[base + j] = NO_DATA_PIXEL;
      priority[base + j] = rank << 9;
      continue;
    }
    let x = (v - bandLo[rank]) * bandScale[rank];
    x = x < 0 ? 0 : x > TOP ? TOP : x;
    const idx = Math.round(x);
    colors[base + j] = bandLut[rank][idx];
    priority[base + j] = (rank << 9) | (TOP - idx);
  }
}


/**
 * Metric views: a cell whose tensor held NaN or Inf (its `quality` code is `nonfinite`'s, finite_only) gets
 * the NaN/Inf paint whatever its value, which is of the finite numbers alone or none; one whose value proves
 * nothing (`unjudged`'s code, not_judged) the not-judged paint, never the colour of its number.
 */
function metricRow(
  c: RowContext, values: readonly (number | null)[], status: readonly number[], quality: readonly number[] | undefined,
  nonfinite: number, unjudged: number, base: number,
): void {
  const { colors, priority, rankOf, codes, lut, log, half, lo, k, flat, diverging } = c;
  const n = values.length;
  for (let j = 0; j < n; j++) {
    const code = status[j];
    const rank = code >= 0 && code < codes ? rankOf[code] : 0;
    const v = values[j];
    if (rank !== 0 && quality !== undefined && quality[j] === nonfinite) {
      colors[base + j] = NONFINITE_PIXEL;
      priority[base + j] = (rank << 9) | NONFINITE_PRIORITY;
      continue;
    }
    if (rank !== 0 && quality !== undefined && quality[j] === unjudged) {
      colors[base + j] = NOT_JUDGED_PIXEL;
      priority[base + j] = rank << 9;
      continue;
    }
    if (rank === 0 || v === null || !Number.isFinite(v)) {
      colors[base + j] = NO_DATA_PIXEL;
      priority[base + j] = rank << 9;
      continue;
    }
    let x = flat ? TOP / 2 : log ? (v > 0 ? (Math.log(v) - lo) * k : 0) : (v * half - lo) * k;
    x = x < 0 ? 0 : x > TOP ? TOP : x;
    const idx = Math.round(x);
    colors[base + j] = lut[idx];
    priority[base + j] = (rank << 9) | (diverging ? Math.abs(2 * idx - TOP) >> 1 : idx);
  }
}

/** Colours and priorities of every cell; `reuse` lends its buffers when they are big enough. */
export function buildCells(h: Heatmap, domain: Domain | null, reuse?: CellModel | null): CellModel {
  const rows = h.layers.length;
  const cols = h.steps.length;
  // Reusing buffers spares the garbage collector tens of MB per redraw of a large heatmap.
  const fits = reuse && reuse.colors.length >= rows * cols;
  const colors = fits ? reuse.colors.subarray(0, rows * cols) : new Uint32Array(rows * cols);
  const priority = fits ? reuse.priority.subarray(0, rows * cols) : new Uint16Array(rows * cols);
  const codes = h.status_names.length;
  const ranks = Math.max(0, ...vocabulary().statuses.map((s) => s.code)) + 1;
  const rankOf = new Uint8Array(Math.max(ranks, codes));
  h.status_names.forEach((name, code) => (rankOf[code] = statusRank(name)));
  // Per rank; a rank without a band (no data) paints grey.
  const bandLo = new Float64Array(ranks);
  const bandScale = new Float64Array(ranks);
  const bandLut: Uint32Array[] = Array.from({ length: ranks }, () => NO_DATA_LUT);
  for (const b of healthBands()) {
    const r = statusRank(b.status);
    bandLo[r] = b.lo;
    bandScale[r] = TOP / (b.hi - b.lo);
    bandLut[r] = HEALTH_LUTS[b.status];
  }
  const log = domain?.scale === "log";
  let lo = 0;
  let k = 0;
  let half = 1;
  if (domain) {
    lo = log ? (domain.min > 0 ? Math.log(domain.min) : 0) : domain.min;
    let hi = log ? (domain.max > 0 ? Math.log(domain.max) : 0) : domain.max;
    if (!Number.isFinite(hi - lo)) {
      half = 0.5;
      lo *= half;
      hi *= half;
    }
    k = hi === lo ? 0 : TOP / (hi - lo);
  }
  const ctx: RowContext = {
    colors, priority, rankOf, codes, bandLo, bandScale, bandLut,
    // Without a domain (no finite value anywhere) every cell is grey but those of NaN/Inf.
    lut: !domain ? NO_DATA_LUT : domain.diverging ? DIVERGING_LUT : VIRIDIS_LUT,
    log, half, lo, k, flat: k === 0, diverging: domain?.diverging === true,
  };
  const health = h.metric === "health";
  // -1 (matches no cell) when the answer names no such quality.
  const nonfinite = h.quality_names.indexOf(NONFINITE_QUALITY);
  const unjudged = h.quality_names.indexOf(NOT_JUDGED_QUALITY);
  for (let i = 0; i < rows; i++) {
    if (h.loaded && !h.loaded[i]) {
      colors.fill(LOADING_PIXEL, i * cols, (i + 1) * cols);
      priority.fill(0, i * cols, (i + 1) * cols);
    } else if (health) healthRow(ctx, h.values[i], h.status[i], h.quality_cells?.[i], nonfinite, i * cols);
    else metricRow(ctx, h.values[i], h.status[i], h.quality_cells?.[i], nonfinite, unjudged, i * cols);
  }
  const narrow = health
    ? { rank: statusRank(CRITICAL), pixel: packRgb(hexToRgb(STATUS_COLORS[CRITICAL])), keep: HEALTH_NONFINITE_PIXEL }
    : null;
  return { rows, cols, colors, priority, narrow };
}

function rasterRow(m: CellModel, row: number, px: PixelColumns, out: Uint32Array, o: number, background: number, pick: Int32Array): void {
  const { start, end } = px;
  const { colors, priority } = m;
  const base = row * m.cols;
  const width = start.length;
  for (let x = 0; x < width; x++) {
    const s = start[x];
    const e = end[x];
    if (s < 0) {
      out[o + x] = background;
      pick[x] = -1;
      continue;
    }
    let best = base + s;
    let bp = priority[best];
    for (let c = base + s + 1; c <= base + e; c++) {
      if (priority[c] > bp) {
        bp = priority[c];
        best = c;
      }
    }
    out[o + x] = colors[best];
    pick[x] = best;
  }
  if (m.narrow) widenNarrow(m, m.narrow, pick, out, o);
}

/**
 * A critical cell shown in one pixel becomes two, in the status colour: the
 * pixel itself and a neighbour showing something milder (right, else left).
 * Columns keep their places; the neighbour gives up one pixel to it.
 */
function widenNarrow(m: CellModel, narrow: NonNullable<CellModel["narrow"]>, pick: Int32Array, out: Uint32Array, o: number): void {
  const { colors, priority } = m;
  const width = pick.length;
  const rankAt = (x: number): number => (x >= 0 && x < width && pick[x] >= 0 ? priority[pick[x]] >> 9 : -1);
  const milder = (x: number): boolean => x >= 0 && x < width && rankAt(x) < narrow.rank;
  for (let x = 0; x < width; x++) {
    const c = pick[x];
    if (c < 0 || priority[c] >> 9 !== narrow.rank) continue;
    if ((x > 0 && pick[x - 1] === c) || (x + 1 < width && pick[x + 1] === c)) continue;
    const paint = colors[c] === narrow.keep ? narrow.keep : narrow.pixel;
    out[o + x] = paint;
    const n = milder(x + 1) ? x + 1 : milder(x - 1) ? x - 1 : -1;
    if (n >= 0) out[o + n] = paint;
  }
}

/**
 * Paints the rows `order` into `out`, one pixel row per layer and one pixel per
 * entry of `px`; pixels that show no column get `background`.
 */
export function rasterize(
  m: CellModel,
  order: readonly number[],
  px: PixelColumns,
  out: Uint32Array,
  background: number,
): void {
  const width = px.start.length;
  // Per pixel of a row, the cell it shows (-1: none).
  const pick = new Int32Array(width);
  for (let k = 0; k < order.length; k++) rasterRow(m, order[k], px, out, k * width, background, pick);
}
