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

/** Full step number with digit grouping, for tooltips. */
export function formatStep(step: number): string {
  const sign = step < 0 ? "-" : "";
  return sign + String(Math.abs(Math.trunc(step))).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** "step 1,200" or "steps 1,200 to 3,400". */
export function formatStepRange(first: number, last: number): string {
  return first === last ? `step ${formatStep(first)}` : `steps ${formatStep(first)} to ${formatStep(last)}`;
}

/**
 * Step label for an axis whose ticks are multiples of `interval`. Every label of
 * one axis uses the same unit (k / M only when the interval is a multiple of it),
 * so "1k, 1200, 1400" never happens. With no interval, the plain number.
 */
export function formatStepTick(step: number, interval = 1): string {
  if (interval % 1_000_000 === 0) return step === 0 ? "0" : `${step / 1_000_000}M`;
  if (interval % 1_000 === 0) return step === 0 ? "0" : `${step / 1_000}k`;
  return String(step);
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
