// Linear and log scales for the detail charts: domain -> pixels, "nice" bounds and
// round ticks. (A charting library would do this too, at ten times the bundle size.)
//
// Any finite data must give finite pixels and a bounded number of ticks: bucket
// edges of +-1.7e308 span more than a double holds, and subnormal edges (5e-324)
// have spans and tick steps that underflow to zero.

import { niceIntervalAtLeast } from "./format";

export interface Scale {
  (v: number): number;
  invert(px: number): number;
  ticks(count: number): number[];
  domain: [number, number];
}

/** More ticks than any axis draws; a request beyond it gets the domain's ends. */
export const MAX_TICKS = 1000;
// Pixels stay finite for values far outside the domain (they are clipped anyway).
const MAX_FRACTION = 1e6;

/** hi - lo, halved where it would overflow (any two finite doubles), never infinite. */
function halfSafeSpan(lo: number, hi: number): { span: number; halved: boolean } {
  const span = hi - lo;
  return Number.isFinite(span) ? { span, halved: false } : { span: hi / 2 - lo / 2, halved: true };
}

/** Where v lies between lo and hi (0 at lo, 1 at hi), finite for finite arguments with hi > lo. */
export function fraction(v: number, lo: number, hi: number): number {
  const { span, halved } = halfSafeSpan(lo, hi);
  const t = halved ? (v / 2 - lo / 2) / span : (v - lo) / span;
  return Math.max(-MAX_FRACTION, Math.min(MAX_FRACTION, t));
}

/** The value at fraction t between lo and hi, without overflowing on the way. */
export function lerp(lo: number, hi: number, t: number): number {
  const v = lo + (hi - lo) * t;
  return Number.isFinite(v) ? v : lo * (1 - t) + hi * t;
}

/** A round step (1, 2 or 5 times a power of ten) giving about `count` ticks over [lo, hi]. */
export function tickStep(lo: number, hi: number, count: number): number {
  const n = Math.max(1, count);
  const { span, halved } = halfSafeSpan(Math.min(lo, hi), Math.max(lo, hi));
  const raw = halved ? (span / n) * 2 : span / n;
  if (!Number.isFinite(raw)) return 1;
  // A subnormal span divided underflows: one step over the whole span then.
  if (!(raw > 0)) return span > 0 ? span : 1;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = niceIntervalAtLeast(raw / power) * power;
  return Number.isFinite(step) && step > 0 ? step : raw;
}

/** A tick value without floating-point dust (0.30000000000000004) at the step's precision. */
function clean(v: number, step: number): number {
  const digits = Math.max(0, -Math.floor(Math.log10(step)) + 1);
  // toFixed takes at most 20 digits; finer steps (subnormals) keep 15 significant ones.
  return (digits <= 20 ? Number(v.toFixed(digits)) : Number(v.toPrecision(15))) + 0;
}

/** Multiples of the tick step within [lo, hi], at most MAX_TICKS of them. */
export function linearTicks(lo: number, hi: number, count: number): number[] {
  if (!(hi > lo)) return Number.isFinite(lo) ? [lo] : [];
  const step = tickStep(lo, hi, count);
  const first = Math.ceil(lo / step - 1e-9);
  const last = Math.floor(hi / step + 1e-9);
  if (!Number.isFinite(first) || !Number.isFinite(last) || last - first + 1 > Math.min(MAX_TICKS, Math.max(1, count) * 10)) {
    return [lo, hi];
  }
  const out: number[] = [];
  for (let k = first; k <= last; k++) {
    const v = k * step;
    if (Number.isFinite(v)) out.push(clean(v, step));
  }
  return out;
}

export function scaleLinear(domain: [number, number], range: [number, number], nice = true): Scale {
  let [lo, hi] = domain;
  if (nice && hi > lo) {
    const step = tickStep(lo, hi, 5);
    // Rounding out past the largest double keeps the data's own bound.
    const a = Math.floor(lo / step) * step;
    const b = Math.ceil(hi / step) * step;
    if (Number.isFinite(a)) lo = a;
    if (Number.isFinite(b)) hi = b;
  }
  const [r0, r1] = range;
  const flat = !(hi > lo);
  const f = ((v: number) => (flat ? (r0 + r1) / 2 : r0 + fraction(v, lo, hi) * (r1 - r0))) as Scale;
  f.invert = (px) => (flat || r1 === r0 ? lo : lerp(lo, hi, (px - r0) / (r1 - r0)));
  f.ticks = (count) => linearTicks(lo, hi, count);
  f.domain = [lo, hi];
  return f;
}

/** 10^e, or null where a double has no such power (below 1e-323, above 1e308). */
function powerOfTen(e: number): number | null {
  const v = Number(`1e${e}`);
  return v > 0 && Number.isFinite(v) ? v : null;
}

/** Log scale over positive values, widened to whole decades. */
export function scaleLog(domain: [number, number], range: [number, number]): Scale {
  // Decades by their exponent: 10^-324 is no double (it is 0), but its exponent is fine.
  const e0 = Math.floor(Math.log10(domain[0]));
  const a = Number.isFinite(e0) ? e0 : -324;
  const e1 = Math.ceil(Math.log10(domain[1]));
  const b = Number.isFinite(e1) && e1 > a ? e1 : a + 1;
  const [r0, r1] = range;
  const k = (r1 - r0) / (b - a);
  const f = ((v: number) => r0 + Math.max(-MAX_FRACTION, Math.min(MAX_FRACTION, (Math.log10(v) - a) / (b - a))) * (r1 - r0)) as Scale;
  f.invert = (px) => Math.pow(10, a + (px - r0) / k);
  f.ticks = (count) => {
    const every = Math.max(1, Math.ceil((b - a + 1) / Math.max(1, count)));
    const out: number[] = [];
    for (let e = a; e <= b; e += every) {
      const v = powerOfTen(e);
      if (v !== null) out.push(v);
    }
    return out;
  };
  f.domain = [powerOfTen(a) ?? Number.MIN_VALUE, powerOfTen(b) ?? Number.MAX_VALUE];
  return f;
}

