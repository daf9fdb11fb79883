// Pure row folding: the layers of one block of the model (the server's `blocks`:
// transformer.h.3, layer4.1, dense_3) drawn as one row showing, per step, the
// worst of its members. A folded heatmap is an ordinary Heatmap whose rows are
// the folded blocks and the other layers, so every view draws it unchanged; what
// a row stands for is kept beside it (`foldOf`).

import { rowLoaded } from "./api";
import type { BlockRow, Heatmap } from "./api";
import { ROW_MIN_H } from "./layout";
import { statusRank } from "./vocabulary";

/**
 * Which blocks are folded: "auto" folds every block when the rows do not fit
 * the screen and none otherwise; "all" folds every block but those in
 * `except`; "none" folds only those in `except`. Treated as immutable.
 */
export interface FoldState {
  mode: "auto" | "all" | "none";
  except: readonly string[];
}

export const AUTO_FOLD: FoldState = Object.freeze({ mode: "auto", except: Object.freeze([]) as readonly string[] });

// Between the mode and the block names in the URL ("all|transformer.h.3"): not in layer names.
const SEP = "|";
// "transformer.h.3~9" in the URL: transformer.h.3 to transformer.h.9 (no module or scope name holds a "~").
const RANGE = "~";
// A range in a hand-edited URL names at most this many blocks.
const MAX_RANGE = 100_000;

/** What the fold button says for a run of `blocks` blocks, `folded` of them folded now. With no block
 * there is nothing to fold: the button is hidden and disabled, and its title says why. */
export function foldButtonText(blocks: number, folded: number): { text: string; title: string; enabled: boolean } {
  if (blocks <= 0) {
    return { text: "Fold all", title: "Nothing to fold: no two rows of this run belong to one module or block", enabled: false };
  }
  if (folded > 0) {
    return { text: "Unfold all", title: `Show every layer of the ${folded} folded block${folded === 1 ? "" : "s"} (the link keeps it)`, enabled: true };
  }
  const each = blocks === 1 ? "the block" : `each of the ${blocks} blocks`;
  return { text: "Fold all", title: `Fold ${each} into one row of its worst layer (the link keeps it)`, enabled: true };
}

/** A name as a prefix and a number it ends in, when written without leading zeros ("h.10" -> ["h.", 10]). */
function numbered(name: string): [string, number] | null {
  const m = /^(.*?)(0|[1-9][0-9]{0,8})$/.exec(name);
  return m ? [m[1], Number(m[2])] : null;
}

/** Block names with runs of consecutive numbers after one prefix written as one range ("h.0~23"). */
function compressNames(names: readonly string[]): string[] {
  const out: string[] = [];
  const runs = new Map<string, number[]>();
  for (const name of names) {
    const n = numbered(name);
    if (n) runs.set(n[0], [...(runs.get(n[0]) ?? []), n[1]]);
    else out.push(name);
  }
  for (const [prefix, numbers] of runs) {
    const sorted = [...new Set(numbers)].sort((a, b) => a - b);
    for (let i = 0; i < sorted.length; ) {
      let j = i;
      while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
      out.push(j > i ? `${prefix}${sorted[i]}${RANGE}${sorted[j]}` : `${prefix}${sorted[i]}`);
      i = j + 1;
    }
  }
  return out;
}

/** The block names an item of the URL names: itself, or every name of its range. */
function expandName(item: string): string[] {
  const at = item.lastIndexOf(RANGE);
  const first = at > 0 ? numbered(item.slice(0, at)) : null;
  const last = /^(0|[1-9][0-9]{0,8})$/.test(item.slice(at + 1)) ? Number(item.slice(at + 1)) : -1;
  if (!first || last <= first[1] || last - first[1] > MAX_RANGE) return [item];
  return Array.from({ length: last - first[1] + 1 }, (_, k) => `${first[0]}${first[1] + k}`);
}

/**
 * The fold state as one URL parameter ("all", "none|head", "all|transformer.h.0~11"); undefined
 * for "auto". Numbered blocks go as ranges, so a link stays short however many are listed.
 */
export function encodeFold(f: FoldState): string | undefined {
  if (f.mode === "auto") return undefined;
  return [f.mode, ...compressNames(f.except)].join(SEP);
}

/** Reads the URL parameter back (block names one by one, as older links list them, or as ranges); anything malformed is "auto". */
export function decodeFold(text: string | undefined): FoldState {
  const [mode, ...names] = (text ?? "").split(SEP);
  if (mode !== "all" && mode !== "none") return AUTO_FOLD;
  return { mode, except: [...new Set(names.filter(Boolean).flatMap(expandName))] };
}

/** Whether blocks fold by themselves: more rows than the heatmap's height holds at the smallest row height. */
export function foldsByItself(rows: number, viewHeight: number): boolean {
  return rows > Math.floor(viewHeight / ROW_MIN_H);
}

/** Whether `block` is folded; `auto` says whether "auto" folds (see `foldsByItself`). */
export function isFolded(f: FoldState, block: string, auto: boolean): boolean {
  const all = f.mode === "all" || (f.mode === "auto" && auto);
  return f.except.includes(block) ? !all : all;
}

/**
 * The state after a click on `block`'s row: "auto" becomes what it showed, with that block changed.
 * Given the run's blocks, the exceptions never list more than half of them: past that, the mode
 * flips and the other blocks are listed, so the state (and its link) stays short.
 */
export function toggleBlock(f: FoldState, block: string, auto: boolean, blocks?: readonly string[]): FoldState {
  const mode = f.mode === "auto" ? (auto ? "all" : "none") : f.mode;
  const except = f.mode === "auto" ? [] : f.except.filter((b) => b !== block);
  if (f.mode === "auto" || except.length === f.except.length) except.push(block);
  if (!blocks || except.length * 2 <= blocks.length) return { mode, except };
  const listed = new Set(except);
  return { mode: mode === "all" ? "none" : "all", except: blocks.filter((b) => !listed.has(b)) };
}

/**
 * The state with `block` open, so a row shown on its own (a link's or a finding's layer) is not hidden in it;
 * `f` itself when the block is open already. Every other block stays as `f` has it (see `toggleBlock`).
 */
export function unfoldBlock(f: FoldState, block: string, auto: boolean, blocks?: readonly string[]): FoldState {
  return isFolded(f, block, auto) ? toggleBlock(f, block, auto, blocks) : f;
}

/** Whether any of `blocks` is folded now: the fold-all control then unfolds them all. */
export function anyFolded(f: FoldState, blocks: readonly string[], auto: boolean): boolean {
  return blocks.some((b) => isFolded(f, b, auto));
}

/** The fold-all control's state: every block open when any was folded, else every block folded. */
export function foldAll(f: FoldState, blocks: readonly string[], auto: boolean): FoldState {
  return { mode: anyFolded(f, blocks, auto) ? "none" : "all", except: [] };
}

/** What the rows of a folded heatmap stand for. */
export interface Folding {
  /** The heatmap as the server sent it. */
  source: Heatmap;
  /** Per row shown, the source rows it stands for, in model order (one for a layer of its own). */
  members: number[][];
  /** Per row shown, its block when the row is a folded block, else null. */
  folded: (string | null)[];
  /** Per row shown, per column: the source row whose cell the row shows there. */
  pick: number[][];
  /** Per row shown, whether it is a folded block the filter cuts: its cells are its kept members' rows, not the server's fold. */
  partial: boolean[];
}

const foldings = new WeakMap<Heatmap, Folding>();

/** What a heatmap's rows stand for when `foldHeatmap` folded it; undefined for one it did not. */
export function foldOf(h: Heatmap): Folding | undefined {
  return foldings.get(h);
}

/**
 * Per column, which of `rows` is worst: the worst status, then the lowest
 * health score (health) or the highest value (metrics), then model order.
 */
export function worstRows(h: Pick<Heatmap, "status" | "status_names" | "values" | "metric">, rows: readonly number[]): number[] {
  const ranks = h.status_names.map(statusRank);
  const cols = h.status[rows[0]]?.length ?? 0;
  const lowWorst = h.metric === "health";
  const out: number[] = new Array(cols);
  for (let j = 0; j < cols; j++) {
    let best = rows[0];
    let bestRank = ranks[h.status[best][j]] ?? 0;
    let bestValue = h.values[best][j];
    for (let k = 1; k < rows.length; k++) {
      const r = rows[k];
      const rank = ranks[h.status[r][j]] ?? 0;
      const v = h.values[r][j];
      let worse = rank > bestRank;
      if (rank === bestRank && v !== null) {
        worse = bestValue === null || (lowWorst ? v < bestValue : v > bestValue);
      }
      if (worse) {
        best = r;
        bestRank = rank;
        bestValue = v;
      }
    }
    out[j] = best;
  }
  return out;
}

/**
 * The rows of a folded block that `keep` keeps (source row numbers, model order): all of them when
 * it keeps none, as the row is then hidden whole by the same filter.
 */
function keptMembers(h: Heatmap, rows: number[], keep: ((layer: string) => boolean) | undefined): number[] {
  if (!keep) return rows;
  const kept = rows.filter((i) => keep(h.layers[i]));
  return kept.length > 0 ? kept : rows;
}

/**
 * The heatmap with each block `folded(block)` says is folded drawn as one row,
 * where its first member stood, showing per column its worst member's cell.
 * With `keep` (the layer filter), a folded block stands for the members it keeps
 * only: its size, its cells and the member a click opens leave the others out.
 * Returns `h` itself when nothing folds.
 */
export function foldHeatmap(h: Heatmap, folded: (block: string) => boolean, keep?: (layer: string) => boolean): Heatmap {
  const rowOf = new Map<string, number>();
  const all: number[][] = [];
  const names: (string | null)[] = [];
  h.layers.forEach((_, i) => {
    const block = h.blocks[i];
    if (block && folded(block)) {
      const at = rowOf.get(block);
      if (at !== undefined) {
        all[at].push(i);
        return;
      }
      rowOf.set(block, all.length);
      names.push(block);
    } else {
      names.push(null);
    }
    all.push([i]);
  });
  if (rowOf.size === 0) return h;
  const members = all.map((rows, r) => (names[r] === null ? rows : keptMembers(h, rows, keep)));
  // A block the filter cuts: the server's fold covers every member, so the tab folds the kept ones.
  const partial = members.map((rows, r) => rows.length !== all[r].length);
  // A folded block's cells: the server's fold when it sent one, else its members' worst when all are
  // here, else none yet (the row is drawn as loading, its cells its first member's placeholders).
  const served = names.map((name, r) => (name === null || partial[r] ? undefined : h.blockRows.get(name)));
  const ready = members.map((rows, r) => names[r] === null ? rowLoaded(h, rows[0]) : served[r] !== undefined || rows.every((i) => rowLoaded(h, i)));
  const cols = h.steps.length;
  const pick = members.map((rows, r) =>
    names[r] === null ? [] : (served[r]?.members ?? (ready[r] ? worstRows(h, rows) : new Array<number>(cols).fill(rows[0]))),
  );
  // A layer of its own keeps its row's arrays; a folded block takes each cell from its pick.
  const grid = <T>(g: T[][], own: (b: BlockRow) => T[] | null): T[][] =>
    members.map((rows, r) => {
      if (names[r] === null) return g[rows[0]];
      const b = served[r];
      return (b && own(b)) || pick[r].map((src, j) => g[src][j]);
    });
  const worst = h.rowWorst;
  // A row's worst status and in how many columns: a cut block's from its cells once they are here,
  // before from its members' (the count then a lower bound); a whole block's as the server said.
  const ranks = h.status_names.map(statusRank);
  const rowWorstOf = (r: number): [number, number] => {
    const rows = members[r];
    if (names[r] === null) return worst ? [worst.worst[rows[0]], worst.count[rows[0]]] : [0, 0];
    if (!partial[r]) return h.blockWorst.get(names[r] as string) ?? [0, 0];
    if (ready[r]) {
      const ws = pick[r].map((src, j) => ranks[h.status[src][j]] ?? 0);
      const w = Math.max(0, ...ws);
      return [w, ws.filter((x) => x === w).length];
    }
    const w = Math.max(0, ...rows.map((i) => worst?.worst[i] ?? 0));
    return [w, Math.max(0, ...rows.map((i) => (worst?.worst[i] === w ? worst.count[i] : 0)))];
  };
  const out: Heatmap = {
    ...h,
    layers: members.map((rows, r) => names[r] ?? h.layers[rows[0]]),
    blocks: members.map((rows, r) => names[r] ?? h.blocks[rows[0]]),
    decided_by: members.map((rows) => h.decided_by[rows[0]]),
    values: grid(h.values, (b) => b.values),
    status: grid(h.status, (b) => b.status),
    rules: grid(h.rules, (b) => b.rules),
    quality_cells: h.quality_cells ? grid(h.quality_cells, (b) => b.quality) : null,
    // A binned column's cell names the step it came from: the worst member's.
    stepOffsets: h.stepOffsets ? grid(h.stepOffsets, (b) => b.stepOffsets) : null,
    loaded: h.loaded ? Uint8Array.from(ready, Number) : null,
    // The server's worst per row: a folded block's is the block's.
    rowWorst: worst && {
      worst: Uint8Array.from(members, (_, r) => rowWorstOf(r)[0]),
      count: Uint32Array.from(members, (_, r) => rowWorstOf(r)[1]),
    },
  };
  foldings.set(out, { source: h, members, folded: names, pick: pick.map((p, r) => (names[r] === null ? [] : p)), partial });
  return out;
}

/** The block a row's label folds or unfolds: the folded block, or the block of a layer shown open; null for none. */
export function blockOfRow(h: Heatmap, row: number): string | null {
  return h.blocks[row] ?? null;
}

/** Whether a row is a folded block. */
export function isFoldedRow(h: Heatmap, row: number): boolean {
  return (foldOf(h)?.folded[row] ?? null) !== null;
}

/** The layers a row stands for: its members when folded, else its own name. */
export function rowMembers(h: Heatmap, row: number): string[] {
  const f = foldOf(h);
  if (!f || f.folded[row] === null) return [h.layers[row]];
  return f.members[row].map((i) => f.source.layers[i]);
}

/** The layer whose cell a row shows at column `col`: the worst member of a folded block, else the row's own layer. */
export function layerAt(h: Heatmap, row: number, col: number): string {
  const f = foldOf(h);
  if (!f || f.folded[row] === null) return h.layers[row];
  return f.source.layers[f.pick[row][col]];
}

/** The layer a click on `layer`'s row at `step` opens: a folded block's worst member there, else `layer`. */
export function layerToOpen(h: Heatmap | null, layer: string, step: bigint): string {
  if (!h) return layer;
  const row = h.layers.indexOf(layer);
  const col = h.steps.indexOf(step);
  return row >= 0 && col >= 0 ? layerAt(h, row, col) : layer;
}

/** What a row label adds around the name: a disclosure marker, and a folded block's size. */
export function labelParts(h: Heatmap, row: number): [string, string] {
  const f = foldOf(h);
  if (f && f.folded[row] !== null) return ["\u25b8 ", ` (${f.members[row].length})`];
  return h.blocks[row] ? ["\u25be ", ""] : ["", ""];
}

/** The tooltip of a folded block's cell: the block, and which member the cell shows. */
export function foldedTooltipLines(h: Heatmap, row: number, col: number, lines: [string, string][]): [string, string][] {
  if (!isFoldedRow(h, row)) return lines;
  const n = rowMembers(h, row).length;
  return lines.flatMap((line): [string, string][] =>
    line[0] === "layer" ? [["block", `${line[1]} (${n} layers, click its name to unfold)`], ["worst layer", layerAt(h, row, col)]] : [line],
  );
}

/** The layers of a heatmap in model order, folded or not: what a finding's spans are looked up in. */
export function sourceLayers(h: Heatmap): string[] {
  return foldOf(h)?.source.layers ?? h.layers;
}

/**
 * Every label a run's rows can have, whichever role is shown and whichever blocks are folded: the
 * run's layers (of every role) as an open block's member marked guessed, the longest they get, and
 * the heatmap's blocks folded. The label column is sized for these, so it keeps its width for the run.
 */
export function runRowLabels(layers: readonly string[], h: Heatmap): string[] {
  const sizes = new Map<string, number>();
  for (const b of h.blocks) if (b) sizes.set(b, (sizes.get(b) ?? 0) + 1);
  return [...layers.map((name) => `\u25be ${name} ?`), ...[...sizes].map(([b, n]) => `\u25b8 ${b} (${n})`)];
}
