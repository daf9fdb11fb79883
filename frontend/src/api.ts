// HTTP access to the plugin's JSON routes. Paths are relative: the page's
// <base href="plugin/gradhealth/"> resolves them under /data/plugin/gradhealth/.

import { ApiError, isRecord, malformed } from "./json";
import { base64Bytes, top24Rows, uintRows, VALUE_ENCODING } from "./packed";
import { parseTraining } from "./ranks";
import type { Training } from "./ranks";
import { indexOfStep, parseStep, stepField, stepListField } from "./steps";
import type { Step } from "./steps";
import { isSeverity, mildestSeverity, parseVocabulary, statusNames } from "./vocabulary";
import type { Vocabulary } from "./vocabulary";

export { ApiError } from "./json";

export interface RoleSource {
  tags: string[];
  source: string;
  /** How the role was decided: rule, convention, pairing, name or fallback. */
  decided_by?: string;
}

export interface LayerInfo {
  name: string;
  group: string;
  order: number;
  roles: Record<string, RoleSource>;
}

/** A severity name from the vocabulary (info, warn, critical). */
export type Severity = string;

/** A histogram tag read but for `steps` of its `of` steps read, which hold no histogram; `why` says the first. */
export interface UnreadableSteps {
  tag: string;
  steps: number;
  of: number;
  why: string;
}

export interface RunInfo {
  run: string;
  layers: LayerInfo[];
  roles: string[];
  scalars: Record<string, string[]>;
  unclassified: string[];
  steps_kept: number;
  last_step: Step | null;
  /** Steps the writers logged (largest over the rows); more than kept when TensorBoard sampled. */
  steps_logged: number | null;
  /** What TensorBoard's sampling dropped in this run; null when it kept every logged step. */
  sampling: Sampling | null;
  /** The same for the run-level scalars (the loss, ...), in the server's words; null when none lost points. */
  scalars_sampling: string | null;
  /** Severity of the run's worst finding; null when it has none. */
  worst_severity: Severity | null;
  /** The role of the run's most severe warn or critical finding, which the tab opens on when the URL names none. */
  worst_role: string | null;
  /** ok / warn / critical / no_data, as the heatmap's statuses. */
  worst_status: string;
  /** Number of findings per severity. */
  finding_counts: Record<string, number>;
  /** False when nothing logged could show exploding or vanishing gradients: then "ok" is not "healthy". */
  gradients_judged: boolean;
  /** What the run's logs could not judge, in the server's words; null when it judged every kind. */
  coverage_note: string | null;
  /**
   * The run in one word, as `gradhealth report` says it: "critical", "warn", "healthy", "no warnings",
   * "scalars only" or "not judged" (the last four with " (notes only)" when it has notes); null from an
   * older server, when the badge is worded from the fields above.
   */
  verdict_word: string | null;
  /** The verdict in a sentence, as `gradhealth report` prints it ("no warnings (no gradients logged: …)"); null from an older server. */
  verdict: string | null;
  /** The run beside this one that holds its training's layers (Keras' X/train beside X/validation); null if none. */
  layers_in: string | null;
  /** Why the server could not analyse the run, in its words; null when it could. A failed run has nothing else. */
  error: string | null;
  /** The run's data version (`pinVersions`); null from a server that names none. */
  version: string | null;
  /** Tags left out because what they hold cannot be read, each with why. */
  unreadable: { tag: string; why: string }[];
  /** Histogram tags read but for some steps, which hold no histogram (no data there), with how many and the first. */
  unreadable_steps: UnreadableSteps[];
  /** The training many workers logged that this run is one rank of; null when it is none. */
  training: Training | null;
  /**
   * Set by the page, not the server: its steps changed since the previous look at the run list
   * (TensorBoard still reading it, or a training still writing it), so its findings are so far.
   */
  growing?: boolean;
}

/** The server's account of the steps TensorBoard's reservoir sampling dropped in a run. */
export interface Sampling {
  /** One sentence, written by the server: kept against logged, and the flag that keeps every step. */
  message: string;
  flag: string;
  kept_min: number;
  kept_max: number;
  logged: number;
  logged_at_least: boolean;
}

export interface RunsResponse {
  runs: RunInfo[];
  /** Entries of gradhealth.json the server rejected (defaults kept), one line each, in its words. */
  config_problems: string[];
}

/** The heatmap's last step while the writer is still writing it: fewer layers have it than the step before. */
export interface Incomplete {
  step: Step;
  /** Rows with data at that step, and at the step before. */
  layers: number;
  layers_before: number;
}

export interface Heatmap {
  run: string;
  role: string;
  metric: string;
  layers: string[];
  /** Ascending and exact (see steps.ts). */
  steps: Step[];
  values: (number | null)[][];
  status: number[][];
  status_names: string[];
  quality: string;
  /**
   * The quality names the cells hold, in code order ("mixed" is exact beside estimated values or bounds):
   * the summary line words them. Empty when the server does not say (then `quality` alone).
   */
  qualities: string[];
  /** Whether some cell is a NaN/Inf step's (`finite_only`), which `quality` leaves out beside others. */
  finiteOnlyCells: boolean;
  /** Whether some cell proves nothing (`not_judged`: an update ratio's lower bound of 0), painted as not judged. */
  notJudgedCells: boolean;
  scale: "linear" | "log";
  rules: (string | null)[][];
  /** Per cell, an index into quality_names; null when the server does not send it. */
  quality_cells: number[][] | null;
  quality_names: string[];
  /** Per row, how its role was decided (rule, convention, pairing, name, fallback). */
  decided_by: string[];
  /** Per row, the block of the model the tab folds it into; null for a layer of its own. */
  blocks: (string | null)[];
  incomplete: Incomplete | null;
  /**
   * True when each column is a bin of steps (the window held more steps than the
   * column budget): `steps` are the bins' first steps, `stepsLast` their last, and
   * each cell is its bin's worst, from the step `cellStep` gives.
   */
  binned: boolean;
  stepsLast: Step[] | null;
  /** Per cell of a binned heatmap, its step minus its column's (a number, or digits past 2^53). */
  stepOffsets: (number | string)[][] | null;
  /** Steps in the window sent, and in the whole run (equal: the whole run was asked for). */
  windowSteps: number;
  stepsTotal: number;
  /**
   * The role's first and last step in the whole run, whatever the window (null: no step, or not said):
   * past them nothing was logged for these rows, though the run's loss may go on.
   */
  loggedSteps?: [Step, Step] | null;
  /**
   * Per row, 1 when its cells are here; null when every row's are (no row window was asked for).
   * A row not here yet holds cells of no data and is drawn as loading (`rowLoaded`).
   */
  loaded: Uint8Array | null;
  /** Per row, its worst status code in the window and in how many columns: the server's, with a row window. */
  rowWorst: RowWorst | null;
  /** The blocks in order of their first row: what a row window's block numbers name. */
  blockNames: string[];
  /** Per block, its worst status code folded and in how many columns; empty without a row window. */
  blockWorst: Map<string, [number, number]>;
  /** The folded blocks the server sent: per block its cells, each its worst member's. */
  blockRows: Map<string, BlockRow>;
  /** The colour scale's ends over every row of the window (null: compute them from the cells, all here). */
  valueRange: ValueRange | null;
}

export interface RowWorst {
  worst: Uint8Array;
  count: Uint32Array;
}

/** A folded block's cells as the server sent them: per column its worst member's, and which member (a row). */
export interface BlockRow {
  values: (number | null)[];
  status: number[];
  rules: (string | null)[];
  quality: number[] | null;
  stepOffsets: (number | string)[] | null;
  members: number[];
}

export interface ValueRange {
  finite: [number, number] | null;
  positive: [number, number] | null;
}

/** Whether a row's cells are here (see `Heatmap.loaded`). */
export function rowLoaded(h: Heatmap, row: number): boolean {
  return h.loaded === null || h.loaded[row] === 1;
}

/** What part of a run's heatmap to ask for: a window of steps (null: all) and a column budget. */
export interface HeatmapWindow {
  window?: [Step, Step] | null;
  columns?: number;
  /** Ask for the compact layout (`compactCells`): a third of the bytes, read without parsing a number per code. */
  compact?: boolean;
  /**
   * A row window: only these rows' cells (row numbers of `layers`) and these folded blocks'
   * (numbers of `blockNames`). Both undefined: every row.
   */
  rows?: readonly number[];
  blocks?: readonly number[];
}

/** Ascending distinct numbers as the routes' spans: [0, 1, 2, 5, 7, 8] -> "0:2,5,7:8". */
export function spansText(numbers: readonly number[]): string {
  const sorted = [...new Set(numbers)].sort((a, b) => a - b);
  const out: string[] = [];
  for (let k = 0; k < sorted.length; ) {
    let e = k;
    while (e + 1 < sorted.length && sorted[e + 1] === sorted[e] + 1) e++;
    out.push(e === k ? String(sorted[k]) : `${sorted[k]}:${sorted[e]}`);
    k = e + 1;
  }
  return out.join(",");
}

export interface Finding {
  run: string;
  kind: string;
  severity: Severity;
  layers: string[];
  first_step: Step;
  last_step: Step;
  message: string;
  advice: string;
  evidence: Record<string, unknown>;
  role: string | null;
  period?: number | null;
  artefact?: boolean;
  cause?: string;
  /**
   * For run-level scalars told in their own step axis (an epoch's loss): what one step counts and the
   * finding's steps there. `first_step`/`last_step` stay where its values were written on the layers' axis.
   */
  axis?: FindingAxis;
  /**
   * Per layer (or run-level scalar), the steps the finding covers: spans of that
   * layer's consecutive logged steps, exactly the cells whose status it sets.
   * Null from a server that does not send them.
   */
  covers: Map<string, StepSpan[]> | null;
  /**
   * For a finding gathered from several roles (one `nonfinite` finding for a run's gradients,
   * weights and outputs): per role, per layer, the steps it covers in that role's rows.
   */
  coversByRole?: Map<string, Map<string, StepSpan[]>>;
}

/** The step axis a finding counts in, where it is not the layers' plain steps (`Finding.axis`). */
export interface FindingAxis {
  /** "epoch", "iteration", "batch" or "step". */
  unit: string;
  /** Counts steps otherwise than the layers' rows. */
  other: boolean;
  first_step: Step;
  last_step: Step;
}

/** An inclusive range of exact steps. */
export type StepSpan = [Step, Step];

/** One run-level scalar of the track above the heatmap (loss, global gradient norm, learning rate). */
export interface TrackSeries {
  tag: string;
  /** The scalar kind (loss, grad_norm_total, learning_rate) and what to call it. */
  kind: string;
  label: string;
  /** "row" when its steps are the heatmap's, "other" when not (per epoch), "unknown" when the logs cannot tell. */
  axis: "row" | "other" | "unknown";
  /** Real logged steps, ascending; a long series is thinned to each bin's first, lowest and highest points. */
  steps: Step[];
  values: (number | null)[];
  /** Points the series logged, and whether `steps` holds fewer of them. */
  logged: number;
  binned: boolean;
  scale: "linear" | "log";
  /** Spans of steps whose value is NaN or infinite. */
  nonfinite: StepSpan[];
}

export interface Track {
  run: string;
  series: TrackSeries[];
}

export interface FindingsResponse {
  run: string;
  findings: Finding[];
}

export interface MetricValue {
  value: number | null;
  quality: string;
}

/** One histogram bucket: [left edge, right edge, count]. */
export type Bucket = [number, number, number];

/**
 * What the cell rule that fired at a cell read (the server's `rule_read`): of a kind's rules, the one holding
 * there, its statistic (as |x| with `abs`), the value and quality it read, and its threshold (null: any).
 */
export interface RuleRead {
  kind: string;
  metric: string;
  abs: boolean;
  value: number | null;
  quality: string;
  limit: number | null;
  side: "above" | "below";
}

export interface CellRole {
  tags: string[];
  source: string;
  status: string;
  score: number | null;
  rule: string | null;
  /** At an ok cell where a cell rule fired: why that is no warning, in the server's words; else null. */
  held: string | null;
  /** What the rule of the cell's kind that fired there read; null where none of its cell rules holds. */
  rule_read: RuleRead | null;
  metrics: Record<string, MetricValue>;
  histogram: Bucket[] | null;
  /** Why a logged histogram is not (wholly) drawn (NaN or Inf bucket edges), in the server's words. */
  histogram_note: string | null;
  /** "octaves": buckets of |x| an octave wide (gradhealth's own histograms); "linear": as logged. */
  histogram_buckets: "octaves" | "linear" | null;
  /** The tag the histogram comes from, and its step on that tag's own axis; "other" when that axis
   * is not the row's (per epoch, say). */
  histogram_tag: string | null;
  histogram_step: Step | null;
  histogram_axis: "row" | "other" | null;
  /** Seconds the histogram was written after the row's step (another axis only). */
  histogram_seconds_from_step: number | null;
  /** No histogram at this step, though its tag was logged at others: the tag and its nearest kept
   * steps before and after (null where there is none). */
  histogram_elsewhere: { tag: string; before: Step | null; after: Step | null } | null;
  /** Steps of this row kept by TensorBoard and logged by the writer; null when the server does not say. */
  steps_kept: number | null;
  steps_logged: number | null;
  steps_logged_at_least: boolean;
}

export interface Cell {
  run: string;
  layer: string;
  step: Step;
  roles: Record<string, CellRole>;
}

export interface SeriesRole {
  steps: Step[];
  values: (number | null)[];
  quality: string[];
  status: number[];
}

export interface Threshold {
  name: string;
  value: number;
  /** Which side of the line is unhealthy. */
  side: "above" | "below";
  meaning: string;
}

export interface Series {
  run: string;
  layer: string;
  metric: string;
  series: Record<string, SeriesRole>;
  status_names: string[];
  thresholds: Record<string, Threshold[]>;
}

export const ROLES = ["gradient", "weight", "activation", "update"] as const;

/** Roles of a run in the canonical order, then any the page does not know yet. */
export function orderedRoles(run: Pick<RunInfo, "roles">): string[] {
  const known = ROLES.filter((r) => run.roles.includes(r));
  return [...known, ...run.roles.filter((r) => !(ROLES as readonly string[]).includes(r))];
}

export const METRICS = [
  "health", "mean", "std", "min", "max", "max_abs", "mean_abs", "l2", "skewness",
  "kurtosis", "zero_fraction", "small_fraction", "nonfinite", "std_rel_first",
  "update_ratio", "count",
] as const;

export const DEFAULT_QUALITY_NAMES = [
  "no_data", "exact", "estimated", "upper_bound", "lower_bound", "finite_only", "not_judged",
];

export type FetchLike = (url: string, init?: RequestInit) => Promise<Response>;

export function buildUrl(path: string, params: Record<string, string> = {}): string {
  const query = new URLSearchParams(params).toString();
  return query ? `${path}?${query}` : path;
}

// Each run's data version as the last run list named it.
const runVersions = new Map<string, string>();

/**
 * Makes every later request about one of these runs name its data version (`version=`): a zoom, the
 * next rows or a cell is then cut from the data the tab shows, and the server lists nothing to tell
 * whether the run changed (a poll of the run list brings new data, and new versions).
 */
export function pinVersions(runs: readonly RunInfo[]): void {
  runVersions.clear();
  for (const r of runs) if (r.version !== null) runVersions.set(r.run, r.version);
}

/**
 * GET a JSON route. Any failure becomes an ApiError carrying the server's
 * {"error": "..."} message when there is one, so the page can show it verbatim.
 */
export async function getJson(
  path: string,
  params: Record<string, string> = {},
  fetchFn: FetchLike = (url, init) => fetch(url, init),
): Promise<unknown> {
  const version = params.run === undefined ? undefined : runVersions.get(params.run);
  const url = buildUrl(path, version === undefined || "version" in params ? params : { ...params, version });
  let resp: Response;
  try {
    resp = await fetchFn(url, { headers: { Accept: "application/json" }, cache: "no-store" });
  } catch (e) {
    throw new ApiError(`Could not reach the server (${String(e instanceof Error ? e.message : e)})`, 0);
  }
  const text = await resp.text();
  let body: unknown;
  let parsed = true;
  try {
    body = JSON.parse(text);
  } catch {
    parsed = false;
  }
  const serverMessage = isRecord(body) && typeof body.error === "string" ? body.error : null;
  if (!resp.ok) {
    throw new ApiError(serverMessage ?? `${path}: HTTP ${resp.status} ${resp.statusText}`.trim(), resp.status);
  }
  if (!parsed) throw new ApiError(`${path}: response is not valid JSON`, resp.status);
  if (serverMessage !== null) throw new ApiError(serverMessage, resp.status);
  return body;
}

function stringArray(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function severity(v: unknown): Severity | null {
  return isSeverity(v) ? v : null;
}

function counts(v: unknown): Record<string, number> {
  const out: Record<string, number> = {};
  if (isRecord(v)) {
    for (const [k, n] of Object.entries(v)) if (typeof n === "number") out[k] = n;
  }
  return out;
}

export function parseSampling(v: unknown): Sampling | null {
  if (!isRecord(v) || typeof v.message !== "string") return null;
  const n = (x: unknown): number => (typeof x === "number" && Number.isFinite(x) ? x : 0);
  return {
    message: v.message,
    flag: typeof v.flag === "string" ? v.flag : "",
    kept_min: n(v.kept_min),
    kept_max: n(v.kept_max),
    logged: n(v.logged),
    logged_at_least: v.logged_at_least === true,
  };
}

/** Checks the parts of a runs response the page relies on; tolerates extra fields. */
export function parseRuns(body: unknown): RunsResponse {
  if (!isRecord(body) || !Array.isArray(body.runs)) throw malformed('expected {"runs": [...]}');
  const runs = body.runs.map((r, i): RunInfo => {
    if (!isRecord(r) || typeof r.run !== "string") throw malformed(`runs[${i}] has no "run" name`);
    const layers = Array.isArray(r.layers)
      ? r.layers.filter((l): l is LayerInfo => isRecord(l) && typeof l.name === "string")
      : [];
    return {
      run: r.run,
      layers,
      roles: stringArray(r.roles),
      scalars: isRecord(r.scalars) ? (r.scalars as Record<string, string[]>) : {},
      unclassified: stringArray(r.unclassified),
      steps_kept: typeof r.steps_kept === "number" ? r.steps_kept : 0,
      last_step: stepField(r, "last_step"),
      steps_logged: typeof r.steps_logged === "number" ? r.steps_logged : null,
      sampling: parseSampling(r.sampling),
      scalars_sampling: isRecord(r.scalars_sampling) && typeof r.scalars_sampling.message === "string" ? r.scalars_sampling.message : null,
      worst_severity: severity(r.worst_severity),
      worst_role: typeof r.worst_role === "string" ? r.worst_role : null,
      worst_status: typeof r.worst_status === "string" ? r.worst_status : "no_data",
      finding_counts: counts(r.findings),
      gradients_judged: r.gradients_judged !== false,
      coverage_note: typeof r.coverage_note === "string" ? r.coverage_note : null,
      verdict_word: typeof r.verdict_word === "string" ? r.verdict_word : null,
      verdict: typeof r.verdict === "string" ? r.verdict : null,
      layers_in: typeof r.layers_in === "string" ? r.layers_in : null,
      error: typeof r.error === "string" ? r.error : null,
      version: typeof r.version === "string" ? r.version : null,
      training: parseTraining(r.training),
      unreadable: Array.isArray(r.unreadable)
        ? r.unreadable
            .filter(isRecord)
            .map((u) => ({ tag: String(u.tag ?? ""), why: String(u.why ?? "") }))
        : [],
      unreadable_steps: Array.isArray(r.unreadable_steps)
        ? r.unreadable_steps.filter(isRecord).map((u) => ({
            tag: String(u.tag ?? ""),
            steps: typeof u.steps === "number" ? u.steps : 0,
            of: typeof u.of === "number" ? u.of : 0,
            why: String(u.why ?? ""),
          }))
        : [],
    };
  });
  return { runs, config_problems: stringArray(body.config_problems) };
}

function isCell(v: unknown): v is number | null {
  return v === null || typeof v === "number";
}

/**
 * Checks a heatmap's shape (one row per layer, one column per step) so drawing
 * never indexes past an array, and fills the optional parts: status derived from
 * values when absent, default status names, empty rules.
 */
export function parseHeatmap(body: unknown): Heatmap {
  if (!isRecord(body)) throw malformed("heatmap is not an object");
  const { layers, values } = body;
  if (!Array.isArray(layers) || !layers.every((l) => typeof l === "string")) {
    throw malformed("heatmap.layers must be a list of names");
  }
  const exact = stepListField(body, "steps");
  if (exact === null) {
    throw malformed("heatmap.steps must be a list of integer steps");
  }
  if (!exact.every((s, i) => i === 0 || s > exact[i - 1])) {
    throw malformed("heatmap.steps must be strictly ascending");
  }
  const cols = exact.length;
  // A row window's matrices hold the rows sent, then the blocks sent; else one row per layer.
  const window = rowWindow(body, layers.length);
  const rows = window ? window.rows.length + window.blocks.length : layers.length;
  // Plain loops: a large heatmap has millions of cells and this runs on every load.
  const grid = <T>(name: string, v: unknown, ok: (x: unknown) => x is T): T[][] => {
    if (!Array.isArray(v) || v.length !== rows) {
      throw malformed(`heatmap.${name} must have one row per layer (${rows})`);
    }
    for (let i = 0; i < rows; i++) {
      const row: unknown = v[i];
      let good = Array.isArray(row) && row.length === cols;
      if (good) {
        const r = row as unknown[];
        for (let j = 0; j < cols && good; j++) good = ok(r[j]);
      }
      if (!good) throw malformed(`heatmap.${name}[${i}] must have one entry per step (${cols})`);
    }
    return v as T[][];
  };
  const isNumber = (x: unknown): x is number => typeof x === "number";
  const compact = typeof body.cells === "string" ? compactCells(body, rows, cols) : null;
  const vals = compact?.values ?? grid("values", values, isCell);
  const status =
    compact?.status ??
    (body.status === undefined || body.status === null
      ? vals.map((row) => row.map((v) => (v === null ? 0 : 1)))
      : grid("status", body.status, isNumber));
  const rules =
    compact?.rules ??
    (body.rules === undefined || body.rules === null
      ? vals.map((row) => row.map((v) => (v === null ? null : "")))
      : grid("rules", body.rules, (x): x is string | null => x === null || typeof x === "string"));
  const qualityCells =
    compact?.quality ??
    (body.quality_cells === undefined || body.quality_cells === null
      ? null
      : grid("quality_cells", body.quality_cells, isNumber));
  const names = stringArray(body.status_names);
  const qualityNames = stringArray(body.quality_names);
  const binned = body.binned === true;
  const stepsLast = binned ? stepListField({ steps: body.steps_last_text }, "steps") : null;
  if (binned && (stepsLast === null || stepsLast.length !== cols)) {
    throw malformed("heatmap.steps_last_text must have one step per column");
  }
  const isOffset = (x: unknown): x is number | string => typeof x === "number" || typeof x === "string";
  const stepOffsets = !binned
    ? null
    : compact
      ? compactOffsets(body, rows, cols)
      : grid("step_offsets", body.step_offsets, isOffset);
  const win = isRecord(body.window) ? body.window : {};
  const count = (x: unknown, fallback: number): number => (typeof x === "number" && Number.isFinite(x) ? x : fallback);
  const n = layers.length;
  const h: Heatmap = {
    binned,
    stepsLast,
    stepOffsets,
    windowSteps: count(win.steps, cols),
    stepsTotal: count(win.steps_total, cols),
    loggedSteps: loggedSteps(win, exact, stepsLast, count(win.steps, cols) >= count(win.steps_total, cols)),
    run: typeof body.run === "string" ? body.run : "",
    role: typeof body.role === "string" ? body.role : "",
    metric: typeof body.metric === "string" ? body.metric : "",
    layers: layers as string[],
    steps: exact,
    values: vals,
    status,
    status_names: names.length > 0 ? names : statusNames(),
    quality: typeof body.quality === "string" ? body.quality : "",
    qualities: stringArray(body.qualities),
    finiteOnlyCells: body.finite_only_cells === true,
    notJudgedCells: body.not_judged_cells === true,
    scale: body.scale === "log" ? "log" : "linear",
    rules,
    quality_cells: qualityCells,
    quality_names: qualityNames.length > 0 ? qualityNames : DEFAULT_QUALITY_NAMES,
    decided_by: decidedBy(body.decided_by, n),
    blocks: blockNames(body.blocks, n),
    incomplete: parseIncomplete(body.incomplete, exact),
    loaded: null,
    rowWorst: null,
    blockNames: [],
    blockWorst: new Map(),
    blockRows: new Map(),
    valueRange: null,
  };
  return window ? spreadRows(h, window, body, cols) : h;
}

/**
 * The role's first and last logged step in the whole run: the server's, else (an older server) the
 * answer's own ends when it holds the whole run; null when neither tells.
 */
function loggedSteps(win: Record<string, unknown>, steps: readonly Step[], lasts: readonly Step[] | null,
  whole: boolean): [Step, Step] | null {
  const first = stepField(win, "first_step");
  const last = stepField(win, "last_step");
  if (first !== null && last !== null && first <= last) return [first, last];
  const end = (lasts ?? steps)[steps.length - 1];
  return whole && steps.length > 0 && end !== undefined ? [steps[0], end] : null;
}

/** What a row window's answer says besides its cells. */
interface RowWindow {
  rows: number[];
  blocks: number[];
  blockNames: string[];
}

/** The row window an answer holds; null for an answer of every row. */
function rowWindow(body: Record<string, unknown>, layers: number): RowWindow | null {
  if (body.rows_sent === undefined) return null;
  const blockNames = stringArray(body.block_names);
  const numbers = (name: string, below: number): number[] => {
    const v = body[name];
    const ok = Array.isArray(v) && v.every((x, i) => Number.isInteger(x) && x >= 0 && x < below && (i === 0 || x > v[i - 1]));
    if (!ok) throw malformed(`heatmap.${name} must list ascending numbers below ${below}`);
    return v as number[];
  };
  return { rows: numbers("rows_sent", layers), blocks: numbers("blocks_sent", blockNames.length), blockNames };
}

/**
 * A row window's heatmap as one of every row: the rows sent in their places, every other row
 * holding cells of no data and marked not loaded; the blocks sent as `blockRows`.
 */
function spreadRows(h: Heatmap, w: RowWindow, body: Record<string, unknown>, cols: number): Heatmap {
  const n = h.layers.length;
  const sent = w.rows.length;
  const isRow = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= 0 && (x as number) < n;
  const members = Array.isArray(body.block_members) && Array.isArray(body.block_members[0])
    ? (body.block_members as unknown[][]).flat()
    : body.block_members;
  const picks = rowsOf("block_members", members, w.blocks.length, cols, isRow);
  const worst = (name: string, length: number): number[] => {
    const v = body[name];
    if (!Array.isArray(v) || v.length !== length || !v.every((x) => Number.isInteger(x) && x >= 0)) {
      throw malformed(`heatmap.${name} must hold a count per row`);
    }
    return v as number[];
  };
  // The rows not sent share one row of each kind: nothing writes into a heatmap's rows.
  const none = <T>(fill: T): T[] => new Array<T>(cols).fill(fill);
  const spread = <T>(m: T[][], fill: T): T[][] => {
    const out = new Array<T[]>(n).fill(none(fill));
    w.rows.forEach((row, k) => (out[row] = m[k]));
    return out;
  };
  const loaded = new Uint8Array(n);
  for (const row of w.rows) loaded[row] = 1;
  const blockRows = new Map<string, BlockRow>();
  w.blocks.forEach((b, k) => {
    blockRows.set(w.blockNames[b], {
      values: h.values[sent + k],
      status: h.status[sent + k],
      rules: h.rules[sent + k],
      quality: h.quality_cells?.[sent + k] ?? null,
      stepOffsets: h.stepOffsets?.[sent + k] ?? null,
      members: picks[k],
    });
  });
  const blockWorst = worst("block_worst", w.blockNames.length);
  const blockColumns = worst("block_worst_columns", w.blockNames.length);
  const range = isRecord(body.value_range) ? body.value_range : {};
  const ends = (v: unknown): [number, number] | null =>
    Array.isArray(v) && v.length === 2 && v.every((x) => typeof x === "number" && Number.isFinite(x)) ? [v[0], v[1]] : null;
  return {
    ...h,
    values: spread(h.values, null),
    status: spread(h.status, 0),
    rules: spread(h.rules, null),
    quality_cells: h.quality_cells ? spread(h.quality_cells, 0) : null,
    stepOffsets: h.stepOffsets ? spread(h.stepOffsets, 0) : null,
    loaded,
    rowWorst: { worst: Uint8Array.from(worst("row_worst", n)), count: Uint32Array.from(worst("row_worst_columns", n)) },
    blockNames: w.blockNames,
    blockWorst: new Map(w.blockNames.map((b, i) => [b, [blockWorst[i], blockColumns[i]]])),
    blockRows,
    valueRange: { finite: ends(range.finite), positive: ends(range.positive) },
  };
}

/**
 * The rows of `more` (a row window's answer) added to those of `held`: one heatmap with both's
 * rows and blocks. Null when they are not the same heatmap (another run, metric, window or
 * columns, or the data changed its rows): then `more` replaces `held`.
 */
export function mergeRows(held: Heatmap, more: Heatmap): Heatmap | null {
  if (!held.loaded || !more.loaded) return null;
  const same = <T>(a: readonly T[] | null, b: readonly T[] | null): boolean =>
    a === b || (a !== null && b !== null && a.length === b.length && a.every((x, i) => x === b[i]));
  if (held.run !== more.run || held.role !== more.role || held.metric !== more.metric || !same(held.layers, more.layers) ||
      !same(held.steps, more.steps) || !same(held.stepsLast, more.stepsLast) || !same(held.blockNames, more.blockNames)) {
    return null;
  }
  const loaded = held.loaded.slice();
  const take = <T>(a: T[][], b: T[][]): T[][] => a.map((row, i) => (more.loaded?.[i] ? b[i] : row));
  for (let i = 0; i < loaded.length; i++) loaded[i] |= more.loaded[i];
  return {
    ...more,
    values: take(held.values, more.values),
    status: take(held.status, more.status),
    rules: take(held.rules, more.rules),
    quality_cells: held.quality_cells && more.quality_cells ? take(held.quality_cells, more.quality_cells) : null,
    stepOffsets: held.stepOffsets && more.stepOffsets ? take(held.stepOffsets, more.stepOffsets) : null,
    loaded,
    blockRows: new Map([...held.blockRows, ...more.blockRows]),
  };
}

/** The cells of a compact answer as the matrices of the default layout. */
interface CompactCells {
  values: (number | null)[][];
  status: number[][];
  rules: (string | null)[][];
  quality: number[][];
}

/**
 * Reads the compact layout: `cells` (base64, `cell_bytes` per cell, little-endian) names each
 * cell's [status, quality, rule] in `cell_kinds`; `values` is base64 of 3 bytes a cell (`top24Rows`),
 * rows one after the other.
 */
function compactCells(body: Record<string, unknown>, rows: number, cols: number): CompactCells {
  const kinds = body.cell_kinds;
  const okKind = (k: unknown): k is [number, number, string | null] =>
    Array.isArray(k) && k.length === 3 && typeof k[0] === "number" && typeof k[1] === "number" && (k[2] === null || typeof k[2] === "string");
  if (!Array.isArray(kinds) || !kinds.every(okKind)) throw malformed("heatmap.cell_kinds must list [status, quality, rule] triples");
  const width = body.cell_bytes === 2 ? 2 : 1;
  let bytes: string;
  try {
    bytes = atob(body.cells as string);
  } catch {
    throw malformed("heatmap.cells must be base64");
  }
  if (bytes.length !== rows * cols * width) throw malformed(`heatmap.cells must hold ${rows * cols} cells`);
  const status: number[][] = new Array<number[]>(rows);
  const quality: number[][] = new Array<number[]>(rows);
  const rules: (string | null)[][] = new Array<(string | null)[]>(rows);
  const k0 = kinds.map((k) => k[0] as number);
  const k1 = kinds.map((k) => k[1] as number);
  const k2 = kinds.map((k) => k[2] as string | null);
  // Plain loops over the decoded bytes: a large heatmap has millions of cells.
  let at = 0;
  for (let i = 0; i < rows; i++) {
    const s = new Array<number>(cols);
    const q = new Array<number>(cols);
    const r = new Array<string | null>(cols);
    for (let j = 0; j < cols; j++, at += width) {
      const code = width === 1 ? bytes.charCodeAt(at) : bytes.charCodeAt(at) | (bytes.charCodeAt(at + 1) << 8);
      if (code >= kinds.length) throw malformed(`heatmap.cells names kind ${code} of ${kinds.length}`);
      s[j] = k0[code];
      q[j] = k1[code];
      r[j] = k2[code];
    }
    status[i] = s;
    quality[i] = q;
    rules[i] = r;
  }
  return { values: compactValues(body, rows, cols), status, rules, quality };
}

/** Base64 `field` of the body as bytes, or the answer is malformed. */
function packedField(body: Record<string, unknown>, field: string): Uint8Array {
  const text = body[field];
  if (typeof text === "string") {
    try {
      return base64Bytes(text);
    } catch {
      // Reported below.
    }
  }
  throw malformed(`heatmap.${field} must be base64`);
}

/** The compact layout's values (`value_encoding` f64top24); NaN and infinities none, as in the rows layout. */
function compactValues(body: Record<string, unknown>, rows: number, cols: number): (number | null)[][] {
  if (body.value_encoding !== VALUE_ENCODING) throw malformed(`heatmap.value_encoding must be ${VALUE_ENCODING}`);
  const bytes = packedField(body, "values");
  if (bytes.length !== rows * cols * 3) throw malformed(`heatmap.values must hold ${rows * cols} cells`);
  return top24Rows(bytes, rows, cols, true);
}

/** The compact layout's step offsets: `step_offset_bytes` bytes a cell, unsigned, little-endian. */
function compactOffsets(body: Record<string, unknown>, rows: number, cols: number): (number | string)[][] {
  const width = body.step_offset_bytes;
  if (width !== 1 && width !== 2 && width !== 4 && width !== 8) throw malformed("heatmap.step_offset_bytes must be 1, 2, 4 or 8");
  const bytes = packedField(body, "step_offsets");
  if (bytes.length !== rows * cols * width) throw malformed(`heatmap.step_offsets must hold ${rows * cols} cells`);
  return uintRows(bytes, width, rows, cols);
}

/** A flat list of rows x cols entries, rows one after the other, as one list per row. */
function rowsOf<T>(name: string, v: unknown, rows: number, cols: number, ok: (x: unknown) => x is T): T[][] {
  if (!Array.isArray(v) || v.length !== rows * cols) throw malformed(`heatmap.${name} must hold ${rows * cols} cells`);
  for (let k = 0; k < v.length; k++) {
    if (!ok(v[k])) throw malformed(`heatmap.${name}[${k}] is not a cell`);
  }
  const out = new Array<T[]>(rows);
  for (let i = 0; i < rows; i++) out[i] = (v as T[]).slice(i * cols, (i + 1) * cols);
  return out;
}

/** The step a cell's value and status come from: its column's, or in a binned heatmap the one the server named. */
export function cellStep(h: Heatmap, row: number, col: number): Step {
  const off = h.stepOffsets?.[row]?.[col];
  if (off === undefined || off === 0) return h.steps[col];
  return h.steps[col] + BigInt(off);
}

/** The column showing `step`: the one it heads or, binned, the bin holding it; -1 when none. */
export function columnOfStep(h: Heatmap, step: Step): number {
  const last = h.stepsLast;
  if (!last) return indexOfStep(h.steps, step);
  let lo = 0;
  let hi = h.steps.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (last[mid] < step) lo = mid + 1;
    else if (h.steps[mid] > step) hi = mid - 1;
    else return mid;
  }
  return -1;
}

/** Whether a heatmap holds every step of its run: zooming it needs nothing from the server. */
export function holdsEveryStep(h: Heatmap): boolean {
  return !h.binned && h.windowSteps >= h.stepsTotal;
}

/** The server's incomplete last step, kept only when it is the heatmap's last column. */
function parseIncomplete(v: unknown, steps: readonly Step[]): Incomplete | null {
  if (!isRecord(v)) return null;
  const step = stepField(v, "step");
  if (step === null || step !== steps[steps.length - 1]) return null;
  const n = (x: unknown): number => (typeof x === "number" && Number.isFinite(x) ? x : 0);
  return { step, layers: n(v.layers), layers_before: n(v.layers_before) };
}

/** One entry per row; rows the server says nothing about count as decided by convention. */
function decidedBy(v: unknown, rows: number): string[] {
  const given = Array.isArray(v) && v.length === rows ? v : [];
  return Array.from({ length: rows }, (_, i) => (typeof given[i] === "string" ? (given[i] as string) : "convention"));
}

/** One block name or null per row; a server that does not send them folds nothing. */
function blockNames(v: unknown, rows: number): (string | null)[] {
  const given = Array.isArray(v) && v.length === rows ? v : [];
  return Array.from({ length: rows }, (_, i) => (typeof given[i] === "string" && given[i] !== "" ? (given[i] as string) : null));
}

/** Quality word of one heatmap cell ("exact", "estimated", ...), or the heatmap's summary. */
export function cellQuality(h: Heatmap, row: number, col: number): string {
  const code = h.quality_cells?.[row]?.[col];
  if (typeof code === "number" && code >= 0 && code < h.quality_names.length) return h.quality_names[code];
  return h.quality || "unknown";
}

export function parseFindings(body: unknown): FindingsResponse {
  if (!isRecord(body) || !Array.isArray(body.findings)) throw malformed('expected {"findings": [...]}');
  const findings = body.findings.map((f, i): Finding => {
    if (!isRecord(f) || typeof f.kind !== "string") throw malformed(`findings[${i}] has no kind`);
    const out: Finding = {
      run: typeof f.run === "string" ? f.run : "",
      kind: f.kind,
      severity: severity(f.severity) ?? mildestSeverity(),
      layers: stringArray(f.layers),
      first_step: stepField(f, "first_step") ?? 0n,
      last_step: stepField(f, "last_step") ?? stepField(f, "first_step") ?? 0n,
      message: typeof f.message === "string" ? f.message : "",
      advice: typeof f.advice === "string" ? f.advice : "",
      evidence: isRecord(f.evidence) ? f.evidence : {},
      role: typeof f.role === "string" ? f.role : null,
      covers: null,
    };
    out.covers = parseCovers(f);
    const byRole = isRecord(f.covers_by_role_text) ? f.covers_by_role_text : isRecord(f.covers_by_role) ? f.covers_by_role : null;
    if (byRole !== null) {
      out.coversByRole = new Map(
        Object.entries(byRole).flatMap(([role, c]) => (isRecord(c) ? [[role, parseCovers({ covers: c }) ?? new Map()]] : [])),
      );
    }
    if (typeof f.period === "number") out.period = f.period;
    if (typeof f.artefact === "boolean") out.artefact = f.artefact;
    if (typeof f.cause === "string") out.cause = f.cause;
    const axis = parseFindingAxis(f.axis);
    if (axis) out.axis = axis;
    return out;
  });
  return { run: typeof body.run === "string" ? body.run : "", findings };
}

/** A finding's own step axis (`Finding.axis`, also a sweep kind's); null where absent or malformed. */
export function parseFindingAxis(v: unknown): FindingAxis | null {
  const axis = isRecord(v) ? v : null;
  const [first, last] = axis ? [stepField(axis, "first_step"), stepField(axis, "last_step")] : [null, null];
  if (!axis || typeof axis.unit !== "string" || first === null || last === null) return null;
  return { unit: axis.unit, other: axis.other === true, first_step: first, last_step: last };
}

/** A list of [first, last] step pairs; pairs that are not two steps are left out. */
function parseSpans(v: unknown): StepSpan[] {
  if (!Array.isArray(v)) return [];
  const out: StepSpan[] = [];
  for (const pair of v) {
    if (!Array.isArray(pair) || pair.length !== 2) continue;
    const [a, b] = [parseStep(pair[0]), parseStep(pair[1])];
    if (a !== null && b !== null) out.push(a <= b ? [a, b] : [b, a]);
  }
  return out;
}

/** A finding's covered steps per layer, from the exact `covers_text` when sent; null when neither is. */
function parseCovers(f: Record<string, unknown>): Map<string, StepSpan[]> | null {
  const raw = isRecord(f.covers_text) ? f.covers_text : isRecord(f.covers) ? f.covers : null;
  if (raw === null) return null;
  return new Map(Object.entries(raw).map(([layer, spans]) => [layer, parseSpans(spans)]));
}

export function parseTrack(body: unknown): Track {
  if (!isRecord(body) || !Array.isArray(body.series)) throw malformed('track: expected {"series": [...]}');
  const series = body.series.map((s, i): TrackSeries => {
    if (!isRecord(s) || typeof s.tag !== "string") throw malformed(`track.series[${i}] has no tag`);
    const steps = stepListField(s, "steps");
    if (steps === null || !Array.isArray(s.values) || s.values.length !== steps.length) {
      throw malformed(`track.series[${i}]: steps and values must be lists of one length`);
    }
    return {
      tag: s.tag,
      kind: typeof s.kind === "string" ? s.kind : "",
      label: typeof s.label === "string" ? s.label : s.tag,
      axis: s.axis === "row" || s.axis === "other" ? s.axis : "unknown",
      steps,
      values: s.values.map((x) => num(x)),
      logged: typeof s.logged === "number" ? s.logged : steps.length,
      binned: s.binned === true,
      scale: s.scale === "log" ? "log" : "linear",
      nonfinite: parseSpans(Array.isArray(s.nonfinite_text) ? s.nonfinite_text : s.nonfinite),
    };
  });
  return { run: typeof body.run === "string" ? body.run : "", series };
}

function parseBuckets(v: unknown): Bucket[] | null {
  if (!Array.isArray(v)) return null;
  const out: Bucket[] = [];
  for (const b of v) {
    if (!Array.isArray(b) || b.length < 3) continue;
    const [l, r, c] = [num(b[0]), num(b[1]), num(b[2])];
    if (l === null || r === null || c === null) continue;
    out.push([l, r, c]);
  }
  return out;
}

function parseRuleRead(v: unknown): RuleRead | null {
  if (!isRecord(v) || typeof v.kind !== "string" || typeof v.metric !== "string") return null;
  return {
    kind: v.kind, metric: v.metric, abs: v.abs === true, value: num(v.value),
    quality: typeof v.quality === "string" ? v.quality : "", limit: num(v.limit), side: v.side === "below" ? "below" : "above",
  };
}

export function parseCell(body: unknown): Cell {
  if (!isRecord(body) || !isRecord(body.roles)) throw malformed('cell: expected {"roles": {...}}');
  const roles: Record<string, CellRole> = {};
  for (const [name, r] of Object.entries(body.roles)) {
    if (!isRecord(r)) continue;
    const metrics: Record<string, MetricValue> = {};
    if (isRecord(r.metrics)) {
      for (const [m, mv] of Object.entries(r.metrics)) {
        if (isRecord(mv)) {
          metrics[m] = { value: num(mv.value), quality: typeof mv.quality === "string" ? mv.quality : "" };
        }
      }
    }
    roles[name] = {
      tags: stringArray(r.tags),
      source: typeof r.source === "string" ? r.source : "",
      status: typeof r.status === "string" ? r.status : "no_data",
      score: num(r.score),
      rule: typeof r.rule === "string" ? r.rule : null,
      held: isRecord(r.held) && typeof r.held.text === "string" ? r.held.text : null,
      rule_read: parseRuleRead(r.rule_read),
      metrics,
      histogram: parseBuckets(r.histogram),
      histogram_note: typeof r.histogram_note === "string" ? r.histogram_note : null,
      histogram_buckets: r.histogram_buckets === "octaves" || r.histogram_buckets === "linear" ? r.histogram_buckets : null,
      histogram_tag: typeof r.histogram_tag === "string" ? r.histogram_tag : null,
      histogram_step: stepField(r, "histogram_step"),
      histogram_axis: r.histogram_axis === "row" || r.histogram_axis === "other" ? r.histogram_axis : null,
      histogram_seconds_from_step: num(r.histogram_seconds_from_step),
      histogram_elsewhere: isRecord(r.histogram_elsewhere) && typeof r.histogram_elsewhere.tag === "string"
        ? { tag: r.histogram_elsewhere.tag, before: stepField(r.histogram_elsewhere, "before"),
          after: stepField(r.histogram_elsewhere, "after") }
        : null,
      steps_kept: num(r.steps_kept),
      steps_logged: num(r.steps_logged),
      steps_logged_at_least: r.steps_logged_at_least === true,
    };
  }
  return {
    run: typeof body.run === "string" ? body.run : "",
    layer: typeof body.layer === "string" ? body.layer : "",
    step: stepField(body, "step") ?? 0n,
    roles,
  };
}

export function parseSeries(body: unknown): Series {
  if (!isRecord(body) || !isRecord(body.series)) throw malformed('series: expected {"series": {...}}');
  const series: Record<string, SeriesRole> = {};
  for (const [name, s] of Object.entries(body.series)) {
    if (!isRecord(s) || !Array.isArray(s.steps) || !Array.isArray(s.values)) continue;
    const steps = stepListField(s, "steps");
    if (steps === null) throw malformed(`series.${name}.steps must be a list of integer steps`);
    const n = steps.length;
    if (s.values.length !== n) throw malformed(`series.${name}: steps and values differ in length`);
    series[name] = {
      steps,
      values: s.values.map((x) => num(x)),
      quality: Array.isArray(s.quality) && s.quality.length === n ? stringArray(s.quality) : new Array<string>(n).fill(""),
      status: Array.isArray(s.status) && s.status.length === n ? s.status.map((x) => (typeof x === "number" ? x : 0)) : new Array<number>(n).fill(1),
    };
  }
  const thresholds: Record<string, Threshold[]> = {};
  if (isRecord(body.thresholds)) {
    for (const [name, list] of Object.entries(body.thresholds)) {
      if (!Array.isArray(list)) continue;
      thresholds[name] = list.filter(isRecord).flatMap((t): Threshold[] => {
        const value = num(t.value);
        if (value === null) return [];
        return [{
          name: typeof t.name === "string" ? t.name : "",
          value,
          side: t.side === "below" ? "below" : "above",
          meaning: typeof t.meaning === "string" ? t.meaning : "",
        }];
      });
    }
  }
  const names = stringArray(body.status_names);
  return {
    run: typeof body.run === "string" ? body.run : "",
    layer: typeof body.layer === "string" ? body.layer : "",
    metric: typeof body.metric === "string" ? body.metric : "",
    series,
    status_names: names.length > 0 ? names : statusNames(),
    thresholds,
  };
}

export async function fetchRuns(fetchFn?: FetchLike): Promise<RunsResponse> {
  return parseRuns(await getJson("runs", {}, fetchFn));
}

export async function fetchHeatmap(
  run: string,
  role: string,
  metric: string,
  fetchFn?: FetchLike,
  part: HeatmapWindow = {},
): Promise<Heatmap> {
  const params: Record<string, string> = { run, role, metric };
  if (part.columns !== undefined) params.columns = String(part.columns);
  if (part.compact) params.layout = "compact";
  if (part.window) {
    params.start = part.window[0].toString();
    params.end = part.window[1].toString();
  }
  if (part.rows || part.blocks) {
    params.rows = spansText(part.rows ?? []);
    params.blocks = spansText(part.blocks ?? []);
  }
  let body = await getJson("heatmap", params, fetchFn);
  let h = parseHeatmap(body);
  // An answer of more cells than the server sends at once holds the first rows that fit and names the
  // rest (`page.next`): asked for in turn and merged, so the caller gets every row it asked for.
  for (let next = pageNext(body); next !== null; next = pageNext(body)) {
    if (next.rows === params.rows && next.blocks === params.blocks) break; // no progress: a broken server
    params.rows = next.rows;
    params.blocks = next.blocks;
    body = await getJson("heatmap", params, fetchFn);
    const both = mergeRows(h, parseHeatmap(body));
    // The data changed between pages: the rows merged so far stay, the others are marked not loaded.
    if (both === null) break;
    h = both;
  }
  return part.rows || part.blocks ? h : wholeOf(h);
}

/** The rows and blocks a paged heatmap answer names to ask for next; null for a last or only answer. */
export function pageNext(body: unknown): { rows: string; blocks: string } | null {
  const page = isRecord(body) && isRecord(body.page) ? body.page : null;
  const next = page && isRecord(page.next) ? page.next : null;
  if (!next) return null;
  if (typeof next.rows !== "string" || typeof next.blocks !== "string") throw malformed("heatmap.page.next must name rows and blocks");
  return { rows: next.rows, blocks: next.blocks };
}

/** Pages of an answer of every row, once every row has arrived, as that answer in one piece. */
function wholeOf(h: Heatmap): Heatmap {
  if (!h.loaded || !h.loaded.every((x) => x === 1)) return h;
  return { ...h, loaded: null, rowWorst: null, blockNames: [], blockWorst: new Map(), blockRows: new Map(), valueRange: null };
}

export async function fetchFindings(run: string, fetchFn?: FetchLike): Promise<FindingsResponse> {
  return parseFindings(await getJson("findings", { run }, fetchFn));
}

export async function fetchCell(run: string, layer: string, step: Step, role: string, fetchFn?: FetchLike): Promise<Cell> {
  return parseCell(await getJson("cell", { run, layer, step: step.toString(), role }, fetchFn));
}

export async function fetchSeries(run: string, layer: string, metric: string, role: string, fetchFn?: FetchLike): Promise<Series> {
  return parseSeries(await getJson("series", { run, layer, metric, role }, fetchFn));
}

/** The run's track; with a window (the heatmap's zoom), its points there, thinned within it only. */
export async function fetchTrack(run: string, window: [Step, Step] | null = null, fetchFn?: FetchLike): Promise<Track> {
  const params: Record<string, string> = { run };
  if (window) {
    params.start = window[0].toString();
    params.end = window[1].toString();
  }
  return parseTrack(await getJson("track", params, fetchFn));
}

export async function fetchVocabulary(fetchFn?: FetchLike): Promise<Vocabulary> {
  return parseVocabulary(await getJson("vocabulary", {}, fetchFn));
}
