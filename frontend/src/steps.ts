// Steps, exactly. TensorBoard's steps are 64-bit integers; JavaScript's numbers hold
// integers exactly only up to 2^53, past which neighbouring steps collapse into one.
// So a step is a bigint wherever it names something (a column, a request, a label,
// the URL), read from the decimal strings the routes send beside every step number,
// and a double only where it places something on screen: its offset from an origin
// step (a heatmap's or a chart's first), which keeps neighbouring steps apart.

import { isRecord } from "./json";

export type Step = bigint;

const STEP_TEXT = /^-?[0-9]+$/;

/** A step from a decimal string or an integral number; null for anything else. */
export function parseStep(v: unknown): Step | null {
  if (typeof v === "string") return STEP_TEXT.test(v) ? BigInt(v) : null;
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  return null;
}

/**
 * The step in `rec[key]`, read from its exact twin `rec[key + "_text"]` when the
 * server sends one (it always does; numbers alone come from older servers and fixtures).
 */
export function stepField(rec: Record<string, unknown>, key: string): Step | null {
  return parseStep(rec[`${key}_text`]) ?? parseStep(rec[key]);
}

/** The steps in `rec[key]` (a list), from its `_text` twin when there is one; null when malformed. */
export function stepListField(rec: Record<string, unknown>, key: string): Step[] | null {
  const text = rec[`${key}_text`];
  const list = Array.isArray(text) ? text : rec[key];
  if (!Array.isArray(list)) return null;
  const out: Step[] = [];
  for (const v of list) {
    const s = parseStep(v);
    if (s === null) return null;
    out.push(s);
  }
  return out;
}

/** A record's step fields, where it is a record at all. */
export function stepOf(v: unknown, key: string): Step | null {
  return isRecord(v) ? stepField(v, key) : null;
}

export function compareSteps(a: Step, b: Step): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The steps from the first of `spans` (each its first and last step) to the last of them; null for none. */
export function stepsUnion(spans: readonly ([Step, Step] | null | undefined)[]): [Step, Step] | null {
  let out: [Step, Step] | null = null;
  for (const s of spans) {
    if (!s) continue;
    out = out ? [s[0] < out[0] ? s[0] : out[0], s[1] > out[1] ? s[1] : out[1]] : [s[0], s[1]];
  }
  return out;
}

/** Position of a step on a layout axis: its distance from `origin`, as a double. */
export function offset(step: Step, origin: Step): number {
  return Number(step - origin);
}

/** Positions of ascending steps relative to their first (ascending too, though far ones may round together). */
export function offsets(steps: readonly Step[], origin: Step = steps[0] ?? 0n): Float64Array {
  const out = new Float64Array(steps.length);
  for (let i = 0; i < steps.length; i++) out[i] = Number(steps[i] - origin);
  return out;
}

/** The whole step at or below a layout position (any finite double). */
export function floorStep(origin: Step, position: number): Step {
  return origin + BigInt(Math.floor(position));
}

/** The whole step nearest a layout position. */
export function roundStep(origin: Step, position: number): Step {
  return origin + BigInt(Math.round(position));
}

/** The whole step at or above a layout position. */
export function ceilStep(origin: Step, position: number): Step {
  return origin + BigInt(Math.ceil(position));
}

/** Index of `step` in ascending `steps`, or -1. */
export function indexOfStep(steps: readonly Step[], step: Step): number {
  let lo = 0;
  let hi = steps.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (steps[mid] < step) lo = mid + 1;
    else if (steps[mid] > step) hi = mid - 1;
    else return mid;
  }
  return -1;
}

/** Integer division rounding toward minus infinity (bigint's `/` rounds toward zero). */
export function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
}

/** Steps that are multiples of `interval` from `first` to `last`, at most `limit` of them (else null). */
export function multiplesBetween(first: Step, last: Step, interval: bigint, limit: number): Step[] | null {
  if (interval <= 0n || last < first) return [];
  const a = -floorDiv(-first, interval) * interval;
  const b = floorDiv(last, interval) * interval;
  if (b < a) return [];
  if ((b - a) / interval >= BigInt(limit)) return null;
  const out: Step[] = [];
  for (let m = a; m <= b; m += interval) out.push(m);
  return out;
}

/** JSON with bigints written as decimal strings (JSON.stringify throws on them). */
export function jsonWithSteps(value: unknown, space?: number): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v), space);
}
