// The line above the heatmap: how many layers it shows, which steps, how exact its values are.

import type { Heatmap } from "./api";
import { formatStep } from "./format";
import { NOT_JUDGED_QUALITY, qualitiesValues, qualityValues } from "./quality";
import { matchesFilter } from "./rows";
import type { Step } from "./steps";
import type { TrackReach } from "./track";

/** How many of the heatmap's layers the filter keeps (all of them with no filter). */
export function keptLayers(h: Pick<Heatmap, "layers">, filter: string): number {
  return filter ? h.layers.filter((l) => matchesFilter(l, filter)).length : h.layers.length;
}

/**
 * The summary of a heatmap as the server sent it (unfolded), under a layer filter and a zoom
 * window: "47 of 292 layers" when the filter hides some, and the steps and last step in view.
 */
export function summaryText(h: Heatmap, filter = "", zoom: [Step, Step] | null = null,
  reach: TrackReach | null = null): string {
  const kept = keptLayers(h, filter);
  const layers = kept < h.layers.length ? `${kept} of ${h.layers.length} layers` : `${h.layers.length} layers`;
  const lasts = h.stepsLast ?? h.steps;
  // The columns in view: those whose steps meet the zoom window (a bin may start before it).
  let cols = h.steps.map((_, j) => j);
  if (zoom) cols = cols.filter((j) => lasts[j] >= zoom[0] && h.steps[j] <= zoom[1]);
  const zoomedIn = zoom !== null && cols.length < h.steps.length;
  const lastCol = cols[cols.length - 1];
  // A binned heatmap's last column starts at its bin's first step; its last step ends the bin.
  const last = lastCol === undefined ? null : zoom && lasts[lastCol] > zoom[1] ? zoom[1] : lasts[lastCol];
  // The values of a NaN/Inf step are of its finite part alone: said beside the others' quality, not as theirs.
  const nanNote = h.finiteOnlyCells && h.quality !== "finite_only";
  // Values that prove nothing (painted as not judged) are said beside the others' quality too.
  const unjudgedNote = h.notJudgedCells && h.quality !== NOT_JUDGED_QUALITY;
  return [
    layers,
    h.binned && !zoomedIn ? `${h.windowSteps} steps in ${h.steps.length} columns` : h.binned ? `${cols.length} columns` : `${cols.length} steps`,
    last !== null ? `last ${formatStep(last)}${h.incomplete && !zoomedIn ? " (incomplete)" : ""}` : "",
    h.quality && h.metric !== "health"
      ? valuesText(h) + (nanNote ? "; NaN/Inf at some steps" : "") + (unjudgedNote ? "; not judged at some steps" : "")
      : "",
    pastText(h, reach),
  ]
    .filter(Boolean)
    .join(" \u00b7 ");
}

/**
 * Where the run track's scalars were logged past the rows' last step: "no gradient data after step 150; loss
 * to 299" (the axis runs on for them, its columns there marked not logged); "" where they were not.
 */
export function pastText(h: Heatmap, reach: TrackReach | null): string {
  const last = h.loggedSteps?.[1];
  if (!reach || last === undefined || reach.last <= last) return "";
  return `no ${h.role} data after step ${formatStep(last)}; ${reach.lastTags.join(", ")} to ${formatStep(reach.last)}`;
}

/** What the heatmap's values are: the qualities its cells hold when the answer names them ("exact values and
 * upper bounds", where "mixed" alone would call bounds estimates), else its one word's. */
function valuesText(h: Heatmap): string {
  return h.qualities.length > 0 ? qualitiesValues(h.qualities) : qualityValues(h.quality);
}
