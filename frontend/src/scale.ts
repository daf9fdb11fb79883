// Linear and log scales for the detail charts: domain -> pixels, "nice" bounds and
// round ticks. (A charting library would do this too, at ten times the bundle size.)

import { niceIntervalAtLeast } from "./format";

export interface Scale {
  (v: number): number;
  invert(px: number): number;
  ticks(count: number): number[];
  domain: [number, number];
}

/** A round step (1, 2 or 5 times a power of ten) giving about `count` ticks over [lo, hi]. */
export function tickStep(lo: number, hi: number, count: number): number {
  const raw = Math.abs(hi - lo) / Math.max(1, count);
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  return niceIntervalAtLeast(raw / power) * power;
}

/** Multiples of the tick step within [lo, hi], without floating-point dust (0.30000000000000004). */
export function linearTicks(lo: number, hi: number, count: number): number[] {
  if (!(hi > lo)) return Number.isFinite(lo) ? [lo] : [];
  const step = tickStep(lo, hi, count);
  const digits = Math.max(0, -Math.floor(Math.log10(step)) + 1);
  const out: number[] = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) {
    out.push(Number((k * step).toFixed(Math.min(20, digits))) + 0);
  }
  return out;
}

export function scaleLinear(domain: [number, number], range: [number, number], nice = true): Scale {
  let [lo, hi] = domain;
  if (nice && hi > lo) {
    const step = tickStep(lo, hi, 5);
    lo = Math.floor(lo / step) * step;
    hi = Math.ceil(hi / step) * step;
  }
  const [r0, r1] = range;
  const k = hi === lo ? 0 : (r1 - r0) / (hi - lo);
  const f = ((v: number) => (hi === lo ? (r0 + r1) / 2 : r0 + (v - lo) * k)) as Scale;
  f.invert = (px) => (k === 0 ? lo : lo + (px - r0) / k);
  f.ticks = (count) => linearTicks(lo, hi, count);
  f.domain = [lo, hi];
  return f;
}

/** Log scale over positive values, widened to whole decades. */
export function scaleLog(domain: [number, number], range: [number, number]): Scale {
  const lo = Number(`1e${Math.floor(Math.log10(domain[0]))}`);
  let hi = Number(`1e${Math.ceil(Math.log10(domain[1]))}`);
  if (hi <= lo) hi = lo * 10;
  const [r0, r1] = range;
  const a = Math.log10(lo);
  const k = (r1 - r0) / (Math.log10(hi) - a);
  const f = ((v: number) => r0 + (Math.log10(v) - a) * k) as Scale;
  f.invert = (px) => Math.pow(10, a + (px - r0) / k);
  f.ticks = (count) => {
    const first = Math.round(a);
    const last = Math.round(Math.log10(hi));
    const every = Math.max(1, Math.ceil((last - first + 1) / Math.max(1, count)));
    const out: number[] = [];
    for (let e = first; e <= last; e += every) out.push(Number(`1e${e}`));
    return out;
  };
  f.domain = [lo, hi];
  return f;
}
