// One training logged by many workers: the server names each rank's training in the runs
// route; here, which other rank to put beside a rank, and the run list's button that does it.

import type { RunInfo } from "./api";
import { button } from "./dom";
import { severityRank } from "./vocabulary";

/** A run's place in a training many workers logged, as the runs route sends it. */
export interface Training {
  /** The runs' shared name, each rank number as "*": "exp/rank*". */
  name: string;
  /** This run's rank: "rank1", "node1/gpu3". */
  rank: string;
  /** Every rank and its run, lowest rank first. */
  ranks: string[];
  runs: string[];
}

/** The runs route's `training` of a run; null when it is none or malformed. */
export function parseTraining(v: unknown): Training | null {
  if (typeof v !== "object" || v === null) return null;
  const t = v as Record<string, unknown>;
  const strings = (x: unknown): x is string[] => Array.isArray(x) && x.every((s) => typeof s === "string");
  if (typeof t.name !== "string" || typeof t.rank !== "string" || !strings(t.ranks) || !strings(t.runs)) return null;
  if (t.ranks.length !== t.runs.length || t.runs.length < 2) return null;
  return { name: t.name, rank: t.rank, ranks: t.ranks, runs: t.runs };
}

/**
 * The rank to put beside `run`: the lowest rank (the one a diverging rank is judged
 * against), or for the lowest rank itself the rank with the worst finding, else the next
 * one. "" when the run is no rank of a training the list holds.
 */
export function rankPartner(runs: readonly Pick<RunInfo, "run" | "training" | "worst_severity">[], run: string): string {
  const training = runs.find((r) => r.run === run)?.training;
  if (!training) return "";
  const listed = training.runs.filter((r) => r !== run && runs.some((x) => x.run === r));
  if (listed.length === 0) return "";
  if (training.runs[0] !== run && listed.includes(training.runs[0])) return training.runs[0];
  const worst = (r: string): number => {
    const s = runs.find((x) => x.run === r)?.worst_severity;
    return s ? severityRank(s) : 0;
  };
  return listed.reduce((best, r) => (worst(r) > worst(best) ? r : best), listed[0]);
}

/** The run list's "ranks" button of a rank: shows it beside `partner`; null for a run that is no rank. */
export function ranksButton(
  runs: readonly Pick<RunInfo, "run" | "training" | "worst_severity">[],
  run: string,
  show: (run: string, partner: string) => void,
): HTMLButtonElement | null {
  const training = runs.find((r) => r.run === run)?.training;
  const partner = rankPartner(runs, run);
  if (!training || !partner) return null;
  const partnerRank = training.ranks[training.runs.indexOf(partner)];
  const b = button(
    "ranks",
    (e) => {
      e.stopPropagation(); // not also a click on the run
      show(run, partner);
    },
    "gh-button gh-ranks-button",
    `${training.rank} beside ${partnerRank}: ranks of training ${training.name} (${training.ranks.length} ranks)`,
  );
  b.setAttribute("aria-label", `Show ${training.rank} beside ${partnerRank}`);
  return b;
}
