// Pure view state <-> URL parameters, so a link reopens the same run, role,
// metric, zoom and selection.

import { METRICS } from "./api";
import { AUTO_FOLD, decodeFold, encodeFold } from "./fold";
import type { FoldState } from "./fold";
import { SORT_KEYS } from "./rows";
import type { SortKey } from "./rows";
import { parseStep } from "./steps";
import type { Step } from "./steps";

export interface ViewState {
  run: string;
  /** Second run shown side by side; "" for none. */
  compare: string;
  role: string;
  metric: string;
  filter: string;
  sort: SortKey;
  /** Step window of the heatmap, in whole steps (exact, as every step); null shows every step. */
  zoom: [Step, Step] | null;
  /** Selected cell: layer and step; "" / null for none. */
  layer: string;
  step: Step | null;
  /** Selected finding's id (findingId); "" for none. */
  finding: string;
  /** The heatmap of one run, or the sweep: a line per run. */
  view: "heatmap" | "sweep";
  /** Which blocks of layers are folded into one row. */
  fold: FoldState;
  /** The sweep's sort column and direction, text filter and kind filter. */
  sweep: SweepViewState;
}

/**
 * How the sweep's lines are sorted and filtered. `column`: "" (the server's order), "name",
 * "worst", "kinds", or "hp:" and a hyperparameter's name; `kind`: a finding kind, "" for any.
 */
export interface SweepViewState {
  column: string;
  descending: boolean;
  text: string;
  kind: string;
}

export const DEFAULT_SWEEP: Readonly<SweepViewState> = Object.freeze({ column: "", descending: false, text: "", kind: "" });

/** Whether `column` names a sweep column: which hyperparameters there are, only the sweep's answer says. */
export function isSweepColumn(column: string): boolean {
  return column === "name" || column === "worst" || column === "kinds" || (column.startsWith("hp:") && column.length > 3);
}

export const DEFAULT_STATE: Readonly<ViewState> = {
  run: "",
  compare: "",
  role: "",
  metric: "health",
  filter: "",
  sort: "model",
  zoom: null,
  layer: "",
  step: null,
  finding: "",
  view: "heatmap",
  fold: AUTO_FOLD,
  sweep: DEFAULT_SWEEP,
};

/**
 * The state after a run is picked (with `compare` beside it; "" for none): the
 * selection, finding and zoom were about the run left, and so was the fold
 * choice: another model's rows fold by themselves or not, as "auto" decides.
 */
export function openRun(s: ViewState, run: string, compare: string): ViewState {
  return { ...s, run, compare, layer: "", step: null, finding: "", zoom: null, fold: AUTO_FOLD };
}

/** Parameter names; short because they end up in a shared URL. */
export const KEYS = ["run", "cmp", "role", "metric", "filter", "sort", "zoom", "layer", "step", "finding", "view", "fold", "ssort", "sfilter", "skind"] as const;
export type Key = (typeof KEYS)[number];

/** The state as URL parameters; values equal to the defaults are left out. */
export function encodeState(s: ViewState): Partial<Record<Key, string>> {
  const out: Partial<Record<Key, string>> = {};
  if (s.run) out.run = s.run;
  if (s.compare) out.cmp = s.compare;
  if (s.role) out.role = s.role;
  if (s.metric && s.metric !== DEFAULT_STATE.metric) out.metric = s.metric;
  if (s.filter) out.filter = s.filter;
  if (s.sort !== DEFAULT_STATE.sort) out.sort = s.sort;
  if (s.zoom) out.zoom = `${s.zoom[0]}~${s.zoom[1]}`;
  if (s.layer) out.layer = s.layer;
  if (s.step !== null) out.step = s.step.toString();
  if (s.finding) out.finding = s.finding;
  if (s.view !== DEFAULT_STATE.view) out.view = s.view;
  const fold = encodeFold(s.fold);
  if (fold) out.fold = fold;
  // The sweep's sort and filters belong to links of the sweep; a heatmap's link stays short.
  if (s.view === "sweep") {
    // "-" before the column sorts it descending; no column starts with one.
    if (s.sweep.column) out.ssort = `${s.sweep.descending ? "-" : ""}${s.sweep.column}`;
    if (s.sweep.text) out.sfilter = s.sweep.text;
    if (s.sweep.kind) out.skind = s.sweep.kind;
  }
  return out;
}

/** The sweep's sort and filters from URL parameters; a malformed column is left out (the kind is checked against the answer). */
function decodeSweep(p: Partial<Record<string, string>>): SweepViewState {
  const sort = p.ssort ?? "";
  const descending = sort.startsWith("-");
  const column = descending ? sort.slice(1) : sort;
  const ok = isSweepColumn(column);
  return { column: ok ? column : "", descending: ok && descending, text: p.sfilter ?? "", kind: p.skind ?? "" };
}

// A zoom edge: a step, or a decimal number as older links wrote them ("10.5").
const DECIMAL = /^(-?[0-9]+)(\.[0-9]*)?$/;

/** A zoom edge as a whole step, rounded outward (down for the low edge, up for the high one). */
function zoomEdge(text: string | undefined, up: boolean): Step | null {
  const m = text === undefined ? null : DECIMAL.exec(text);
  if (!m) return null;
  const whole = BigInt(m[1]);
  const fraction = /[1-9]/.test(m[2] ?? "");
  if (!fraction) return whole;
  // BigInt() truncates toward zero: "-10.5" is -10 and lies above the number.
  const below = m[1].startsWith("-") ? whole - 1n : whole;
  return up ? below + 1n : below;
}

/** Reads URL parameters back; anything malformed falls back to its default. */
export function decodeState(p: Partial<Record<string, string>>): ViewState {
  const s: ViewState = { ...DEFAULT_STATE };
  s.run = p.run ?? "";
  s.compare = p.cmp ?? "";
  s.role = p.role ?? "";
  if (p.metric && (METRICS as readonly string[]).includes(p.metric)) s.metric = p.metric;
  s.filter = p.filter ?? "";
  if (p.sort && (SORT_KEYS as readonly string[]).includes(p.sort)) s.sort = p.sort as SortKey;
  if (p.zoom) {
    const [a, b] = p.zoom.split("~");
    const lo = zoomEdge(a, false);
    const hi = zoomEdge(b, true);
    if (lo !== null && hi !== null && hi > lo) s.zoom = [lo, hi];
  }
  s.layer = p.layer ?? "";
  s.step = typeof p.step === "string" ? parseStep(p.step) : null;
  s.finding = p.finding ?? "";
  s.fold = decodeFold(p.fold);
  if (!s.layer) s.step = null;
  if (p.view === "sweep") s.view = "sweep";
  s.sweep = decodeSweep(p);
  return s;
}

/** "run=a&role=gradient" for a URL fragment; every value percent-encoded. */
export function toFragment(s: ViewState): string {
  return Object.entries(encodeState(s))
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v as string)}`)
    .join("&");
}

/** Parses a fragment ("#run=a&role=b" or without the #) into a state. */
export function fromFragment(fragment: string): ViewState {
  const text = fragment.startsWith("#") ? fragment.slice(1) : fragment;
  const p: Record<string, string> = {};
  for (const part of text.split("&")) {
    if (!part) continue;
    const eq = part.indexOf("=");
    if (eq <= 0) continue;
    try {
      p[decodeURIComponent(part.slice(0, eq))] = decodeURIComponent(part.slice(eq + 1));
    } catch {
      // A malformed escape in a hand-edited URL: skip that parameter only.
    }
  }
  return decodeState(p);
}
