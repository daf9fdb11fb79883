// What the detail panel says above a layer's histogram. A row's histogram can be
// logged on another step axis than its statistics (Keras' callback writes histograms
// per epoch, gradhealth's summaries per optimizer step): then its step N is not the
// row's step N, and the panel says which histogram it shows and when it was written.

import type { CellRole } from "./api";
import { formatStep } from "./format";
import type { Step } from "./steps";

export interface HistogramLabel {
  title: string;
  note: string;
}

function seconds(s: number): string {
  const a = Math.abs(s);
  if (a < 1) return `${Math.round(a * 1000)} ms`;
  if (a < 120) return `${a.toFixed(a < 10 ? 1 : 0)} s`;
  if (a < 7200) return `${(a / 60).toFixed(0)} min`;
  return `${(a / 3600).toFixed(1)} h`;
}

/** The title and note for the histogram of `role` at the row's `step`. */
export function histogramLabel(step: Step, role: CellRole | undefined): HistogramLabel {
  if (!role || role.histogram_axis !== "other" || role.histogram_step === null) {
    return { title: `Histogram at step ${formatStep(step)}`, note: "" };
  }
  const own = formatStep(role.histogram_step);
  const tag = role.histogram_tag ?? "the histogram";
  const dt = role.histogram_seconds_from_step;
  const when = dt === null ? "" : `, written ${seconds(dt)} ${dt >= 0 ? "after" : "before"} this row's step ${formatStep(step)}`;
  return {
    title: `Histogram nearest in time (its own step ${own})`,
    note:
      `${tag} is logged on another step axis than this row (per epoch, for example): ` +
      `its step ${own} is not step ${own} here. Shown: the one written nearest in time${when}.`,
  };
}

/** The outline's label: the previous row step, or, on another axis, the histogram's own step. */
export function outlineLabel(prevStep: Step, ghost: CellRole | undefined): string {
  if (ghost && ghost.histogram_axis === "other" && ghost.histogram_step !== null) {
    return `Outline: the histogram nearest to step ${formatStep(prevStep)} (its own step ${formatStep(ghost.histogram_step)}).`;
  }
  return `Outline: step ${formatStep(prevStep)}.`;
}

/** Why a row shows no histogram at `step`, and the nearest steps its histogram tag was logged at
 * (for the panel's buttons that open them): a row of exact statistics at every step may carry a
 * histogram only every N-th, which is not "exact statistics only". */
export function missingHistogram(step: Step, role: CellRole): { text: string; before: Step | null; after: Step | null } {
  // A tensor whose every value was NaN or Inf has no histogram of finite values to draw, whatever was logged.
  const bad = role.metrics.nonfinite?.value ?? null;
  const count = role.metrics.count?.value ?? null;
  if (bad !== null && bad > 0 && (count === null || bad >= count)) {
    const n = (x: number): string => Math.round(x).toLocaleString("en-US");
    const of = count === null ? "" : ` (${n(bad)} of ${n(count)})`;
    return {
      text: `No histogram at step ${formatStep(step)}: every value of this tensor${of} was NaN or Inf, and a histogram holds finite values only.`,
      before: null, after: null,
    };
  }
  const elsewhere = role.histogram_elsewhere;
  if (!elsewhere || (elsewhere.before === null && elsewhere.after === null)) {
    return { text: "No histogram for this tensor at this step: it was logged as exact statistics only.", before: null, after: null };
  }
  const { tag, before, after } = elsewhere;
  const near = [before !== null ? `step ${formatStep(before)} before` : "", after !== null ? `step ${formatStep(after)} after` : ""]
    .filter((s) => s).join(" and ");
  return {
    text: `No histogram at step ${formatStep(step)}: ${tag} was logged at other steps only; the nearest ${before !== null && after !== null ? "are" : "is"} ${near}.`,
    before, after,
  };
}
