// What a value's quality code means, in words a person reads: the routes send the codes
// (metrics.QUALITY_NAMES, and "mixed" for a heatmap of exact and estimated cells), and every
// place the tab shows one (a chart's hover, a cell's tooltip, the detail table, the summary
// line) reads it from this one table.

interface QualityWords {
  /** A few words, for the summary line: "estimated values". */
  short: string;
  /** What the number is, for a hover or a table. */
  long: string;
}

const QUALITY: Record<string, QualityWords> = {
  no_data: { short: "no data", long: "no data" },
  exact: { short: "exact", long: "exact" },
  estimated: { short: "estimated", long: "estimated from histogram buckets" },
  upper_bound: { short: "upper-bound", long: "upper bound: the true value is at most this" },
  lower_bound: { short: "lower-bound", long: "lower bound: the true value is at least this" },
  finite_only: { short: "finite-only", long: "finite values only: this step also held NaN/Inf" },
  mixed: { short: "exact and estimated", long: "exact for some cells, estimated from histogram buckets for others" },
};

/** A quality code for a hover or a table: "finite values only: this step also held NaN/Inf". */
export function qualityText(code: string): string {
  return QUALITY[code]?.long ?? code.replace(/_/g, " ");
}

/** A quality code in a few words, for the summary line ("estimated" values). */
export function qualityShort(code: string): string {
  return QUALITY[code]?.short ?? code.replace(/_/g, " ");
}
