// Pure number formatting for tooltips, legends and the step axis.

/**
 * Compact, stable rendering of a metric value: up to `digits` significant digits,
 * exponent notation for very large or very small magnitudes, no trailing zeros.
 */
export function formatValue(v: number | null | undefined, digits = 4): string {
  if (v === null || v === undefined) return "no data";
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "+inf" : "-inf";
  if (v === 0) return "0";
  const abs = Math.abs(v);
  if (abs >= 1e5 || abs < 1e-3) {
    const [mantissa, exponent] = v.toExponential(digits - 1).split("e");
    return `${trimZeros(mantissa)}e${exponent.replace("+", "")}`;
  }
  // Through Number so 12345 prints as 12350 rather than toPrecision's 1.235e+4.
  return String(Number(v.toPrecision(digits)));
}

function trimZeros(s: string): string {
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}

/** A step (exact, a bigint) or a count of steps (a number). */
export type Integral = number | bigint;

function whole(v: number | bigint): bigint | null {
  return typeof v === "bigint" ? v : Number.isFinite(v) ? BigInt(Math.trunc(v)) : null;
}

/** Full step number with digit grouping, for tooltips. */
export function formatStep(step: Integral): string {
  const s = whole(step);
  if (s === null) return String(step);
  const digits = (s < 0n ? -s : s).toString();
  return (s < 0n ? "-" : "") + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** "step 1,200" or "steps 1,200 to 3,400". */
export function formatStepRange(first: Integral, last: Integral): string {
  return whole(first) === whole(last) ? `step ${formatStep(first)}` : `steps ${formatStep(first)} to ${formatStep(last)}`;
}

/**
 * Step label for an axis whose ticks are multiples of `interval`. Every label of
 * one axis uses the same unit (k / M only when the interval is a multiple of it),
 * so "1k, 1200, 1400" never happens. With no interval, the plain number.
 */
export function formatStepTick(step: Integral, interval: Integral = 1): string {
  const s = whole(step);
  const i = whole(interval) ?? 1n;
  if (s === null) return String(step);
  if (i !== 0n && i % 1_000_000n === 0n) return s === 0n ? "0" : `${s / 1_000_000n}M`;
  if (i !== 0n && i % 1_000n === 0n) return s === 0n ? "0" : `${s / 1_000n}k`;
  return s.toString();
}

/** The "nice" intervals 1, 2, 5, 10, 20, 50, ... that are >= lower (and >= 1). */
export function niceIntervalAtLeast(lower: number): number {
  if (!(lower > 1)) return 1;
  const base = Math.pow(10, Math.floor(Math.log10(lower)));
  for (const m of [1, 2, 5, 10]) {
    if (m * base >= lower) return m * base;
  }
  return 10 * base;
}

/** The nice interval that follows `interval` in the 1, 2, 5 sequence. */
export function nextNiceInterval(interval: number): number {
  return niceIntervalAtLeast(interval * 1.5);
}

/** Human label of a metric or rule name: "max_abs" -> "max abs". */
export function humanize(name: string): string {
  return name.replace(/_/g, " ");
}

/**
 * What a layer name the PyTorch integration gives a module's later call in one forward pass means:
 * `relu[1]` is module `relu`'s second call, logged as a layer of its own. Null for any other name.
 */
export function callText(name: string): string | null {
  const m = /^(\S+)\[([1-9]\d*)\]$/.exec(name);
  if (m === null) return null;
  return (
    `${name} is the ${ordinal(Number(m[2]) + 1)} call of module ${m[1]} in forward: a module called several ` +
    "times in one forward pass (a shared ReLU) is logged once per call, [1] for the second"
  );
}

/** "second", "third", ..., "21st": a call's rank in words. */
function ordinal(n: number): string {
  const words: Record<number, string> = { 2: "second", 3: "third", 4: "fourth", 5: "fifth" };
  if (words[n]) return words[n];
  const teen = n % 100 >= 10 && n % 100 <= 20;
  const suffix = teen ? "th" : ({ 1: "st", 2: "nd", 3: "rd" } as Record<number, string>)[n % 10] ?? "th";
  return `${n}${suffix}`;
}
