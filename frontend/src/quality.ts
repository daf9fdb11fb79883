// What a value's quality code means, in words a person reads: the routes send the codes
// (metrics.QUALITY_NAMES; a heatmap's "mixed", exact beside anything else, with the names present), and every
// place the tab shows one (a chart's hover, a cell's tooltip, the detail table, the summary
// line) reads it from this one table.

// What a value marked "not_judged" is: an update ratio's lower bound of 0, proven from the weights' histograms
// alone, proves nothing (a ratio is never negative): they show no change bigger than they resolve, and the
// true ratio may be anything.
const NOTHING_PROVEN =
  "a lower bound of 0 proves nothing: the weights' histograms show no change bigger than they resolve";
const NOTHING_PROVEN_LONG = `not judged: ${NOTHING_PROVEN}`;

interface QualityWords {
  /** The summary line's words for a heatmap's values: "estimated values". */
  values: string;
  /** A table cell's few words. */
  short: string;
  /** What the number is, for a hover. */
  long: string;
}

const QUALITY: Record<string, QualityWords> = {
  no_data: { values: "no data", short: "no data", long: "no data" },
  exact: { values: "exact values", short: "exact", long: "exact" },
  estimated: { values: "estimated values", short: "estimated", long: "estimated from histogram buckets" },
  upper_bound: { values: "upper bounds", short: "upper bound", long: "upper bound: the true value is at most this" },
  lower_bound: { values: "lower bounds", short: "lower bound", long: "lower bound: the true value is at least this" },
  finite_only: {
    values: "values of finite numbers only", short: "finite values only",
    long: "finite values only: this step also held NaN/Inf",
  },
  // An update ratio's lower bound of 0, which the server marks so: nothing proven (`provesNothing`).
  not_judged: { values: "values not judged", short: "not judged", long: NOTHING_PROVEN_LONG },
  // An older server's word alone, without the names present: exact beside something else.
  mixed: {
    values: "exact and other values", short: "mixed",
    long: "exact for some cells, estimated or bounded for others",
  },
};

const plain = (code: string): string => code.replace(/_/g, " ");

/** The quality code of a value that proves nothing (the server's, `metrics.NOT_JUDGED`). */
export const NOT_JUDGED_QUALITY = "not_judged";

/**
 * Whether a value proves nothing, as the server marks it (an update ratio's lower bound of 0): it is shown
 * as not judged, never as its number, and painted so.
 */
export function provesNothing(quality: string): boolean {
  return quality === NOT_JUDGED_QUALITY;
}

/** A value and its quality for a hover: "1.2e+03 (exact)", or "not judged (...)" where it proves nothing. */
export function valueText(value: number, quality: string, format: (v: number) => string): string {
  if (provesNothing(quality)) return `not judged (${NOTHING_PROVEN})`;
  return `${format(value)} (${qualityText(quality)})`;
}

/**
 * A statistic in the detail panel's table: its value, its quality in a few words, and what they mean
 * on hover. One without a value at a step whose tensor held NaN or Inf ("finite_only") has none of
 * finite numbers: it reads "NaN/Inf", never "no data", as the heatmap paints it.
 */
export function metricCell(value: number | null, quality: string, format: (v: number | null) => string,
): [string, string, string] {
  if (value === null && quality === "finite_only") return ["NaN/Inf", "", "no finite value: this step held NaN/Inf"];
  if (provesNothing(quality)) return ["not judged", "", NOTHING_PROVEN];
  if (value === null) return [format(value), "", ""];
  return [format(value), qualityShort(quality), qualityText(quality)];
}

/** A quality code for a hover: "finite values only: this step also held NaN/Inf". */
export function qualityText(code: string): string {
  return QUALITY[code]?.long ?? plain(code);
}

/** A quality code in a few words, for a table cell: "finite values only". */
export function qualityShort(code: string): string {
  return QUALITY[code]?.short ?? plain(code);
}

/** A heatmap's values by their quality, for the summary line: "estimated values". */
export function qualityValues(code: string): string {
  return QUALITY[code]?.values ?? `${plain(code)} values`;
}

/** Words joined as a sentence lists them: "a", "a and b", "a, b and c". */
function listed(words: readonly string[]): string {
  return words.length < 2 ? words.join("") : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

/**
 * The quality names a heatmap holds (`Heatmap.qualities`), for the summary line, those of one noun said
 * together: ["exact", "estimated"] "exact and estimated values", ["exact", "upper_bound"] "exact values
 * and upper bounds", ["estimated", "upper_bound", "lower_bound"] "estimated values, upper and lower bounds".
 */
export function qualitiesValues(names: readonly string[]): string {
  // Per noun ("values", "bounds"), in the order first met, the words before it.
  const groups = new Map<string, string[]>();
  for (const name of names) {
    const words = qualityValues(name);
    const cut = words.lastIndexOf(" ");
    const [before, noun] = cut < 0 || name === "finite_only" ? ["", words] : [words.slice(0, cut), words.slice(cut + 1)];
    const group = groups.get(noun) ?? [];
    if (!groups.has(noun)) groups.set(noun, group);
    if (before) group.push(before);
  }
  const phrases = [...groups].map(([noun, before]) => (before.length ? `${listed(before)} ${noun}` : noun));
  // "and" between two phrases, unless one has its own: "exact and estimated values, upper bounds".
  return phrases.length === 2 && !phrases.some((p) => p.includes(" and ")) ? listed(phrases) : phrases.join(", ");
}
