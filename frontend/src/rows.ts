// Pure row ordering: which layers the heatmap shows, in which order.

import type { Heatmap } from "./api";
import { statusRank } from "./vocabulary";

export type SortKey = "model" | "name" | "severity";
export const SORT_KEYS: readonly SortKey[] = ["model", "name", "severity"];

export interface RowSeverity {
  /** Worst status rank per row (0 no data, 1 ok, 2 warn, 3 critical). */
  worst: Uint8Array;
  /** How many cells of the row have that worst status. */
  count: Uint32Array;
}

export function rowSeverity(h: Pick<Heatmap, "status" | "status_names"> & { rowWorst?: RowSeverity | null }): RowSeverity {
  // Rows not loaded yet: the server said each row's worst (codes are ranks, as the vocabulary's).
  if (h.rowWorst) return h.rowWorst;
  const rows = h.status.length;
  const worst = new Uint8Array(rows);
  const count = new Uint32Array(rows);
  const ranks = h.status_names.map(statusRank);
  for (let i = 0; i < rows; i++) {
    let w = 0;
    let c = 0;
    for (const code of h.status[i]) {
      const r = ranks[code] ?? 0;
      if (r > w) {
        w = r;
        c = 1;
      } else if (r === w) c++;
    }
    worst[i] = w;
    count[i] = c;
  }
  return { worst, count };
}

/** Case-insensitive substring match; several words separated by spaces must all match. */
export function matchesFilter(name: string, filter: string): boolean {
  const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
  const lower = name.toLowerCase();
  return words.every((w) => lower.includes(w));
}

/**
 * Indices of the rows to draw, top to bottom. Model order is the order the API
 * lists layers in; severity puts the worst rows first (more worst cells first,
 * model order among equals); name sorts naturally ("dense_2" before "dense_10").
 * A row standing for several layers (a folded block, `members`) matches the
 * filter when its name or one of theirs does.
 */
export function orderRows(
  layers: readonly string[],
  filter: string,
  sort: SortKey,
  severity?: RowSeverity,
  members?: (row: number) => readonly string[],
): number[] {
  const idx: number[] = [];
  for (let i = 0; i < layers.length; i++) {
    if (matchesFilter(layers[i], filter) || (filter && members?.(i).some((m) => matchesFilter(m, filter)))) idx.push(i);
  }
  if (sort === "name") {
    const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
    idx.sort((a, b) => collator.compare(layers[a], layers[b]) || a - b);
  } else if (sort === "severity" && severity) {
    idx.sort((a, b) => severity.worst[b] - severity.worst[a] || severity.count[b] - severity.count[a] || a - b);
  }
  return idx;
}
