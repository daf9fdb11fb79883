// The sweep view: one line per run (a Keras trial's train and validation runs are one)
// with its hyperparameters, worst finding, the kinds found and a strip of its heatmap's
// worst status per step, from one `sweep` request. Lines sort by any column and filter
// by text and kind; a click opens the run's heatmap. Plain DOM built once per answer:
// sorting and filtering move and hide the rows they have, so 200 runs stay responsive.

import { getJson, parseFindingAxis, parseSampling } from "./api";
import type { FetchLike, FindingAxis, RunInfo } from "./api";
import { statusColor, statusName } from "./colors";
import { el, setOptions } from "./dom";
import { spansText } from "./findings";
import { DEFAULT_SWEEP, isSweepColumn } from "./hash";
import type { SweepViewState } from "./hash";
import { isRecord, malformed } from "./json";
import { runBadge } from "./panels";
import { matchesFilter } from "./rows";
import { compareRunNames, nameBreaks } from "./run_names";
import { offset, parseStep } from "./steps";
import type { Step } from "./steps";
import { kindIndex, kindLabel, mildestSeverity, severityRank, statusNames } from "./vocabulary";

export type HparamValue = number | string | boolean;

export interface SweepKind {
  kind: string;
  severity: string;
  /** Its first step on the layers' axis. */
  first_step_text: string;
  /** The finding's own step axis (an epoch's loss), with its steps there; null: the layers' axis. */
  axis: FindingAxis | null;
  layer: string | null;
  /** The run it was found in (a trial's validation run, say); "" when the line's own. */
  run: string;
}

export interface SweepLine {
  /** The run the line opens. */
  run: string;
  /** What the line is called: the trial of a Keras fit's train and validation runs, else the run. */
  name: string;
  error: string | null;
  hparams: Record<string, HparamValue>;
  worst_severity: string | null;
  worst_status: string;
  /** False where no gradients were logged, so no gradient problem could be judged (as in `runs`). */
  gradients_judged: boolean;
  /** What TensorBoard's sampling dropped, as in `runs`; null where every logged step was read. */
  sampling: RunInfo["sampling"];
  /** The line in one word, as the run list's badge says it (`RunInfo.verdict_word`). */
  verdict_word: string | null;
  /** `role`: the heatmap that shows it (null: it is about scalars alone). */
  worst: { kind: string; severity: string; message: string; first_step_text: string; layer: string | null; role: string | null } | null;
  kinds: SweepKind[];
  /** The worst status code per (binned) step, each column from `steps_text` to `last_steps_text`. */
  strip: { steps_text: string[]; last_steps_text: string[]; status: number[] };
}

export interface Sweep {
  hparams: { name: string; type: string }[];
  lines: SweepLine[];
  /** The sentences of what the hyperparameters explain, strongest first. */
  splits: string[];
}

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

function hparamValues(v: unknown): Record<string, HparamValue> {
  const out: Record<string, HparamValue> = {};
  if (isRecord(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === "string" || typeof x === "boolean" || (typeof x === "number" && Number.isFinite(x))) out[k] = x;
    }
  }
  return out;
}

function parseKind(k: unknown): SweepKind | null {
  if (!isRecord(k) || typeof k.kind !== "string") return null;
  return {
    kind: k.kind, severity: str(k.severity) ?? "", first_step_text: str(k.first_step_text) ?? "", axis: parseFindingAxis(k.axis),
    layer: str(k.layer), run: str(k.run) ?? "",
  };
}

/** Where a kind starts, as the findings cards say it: on its finding's own axis where it has one ("epoch 3"),
 * else "step 120" on the layers' axis. */
export function onsetText(k: Pick<SweepKind, "first_step_text" | "axis">): string {
  return k.axis ? spansText([[k.axis.first_step, k.axis.first_step]], 1, k.axis) : `step ${k.first_step_text}`;
}

/** Checks the parts of a sweep answer the view relies on; tolerates extra fields. */
export function parseSweep(body: unknown): Sweep {
  if (!isRecord(body) || !Array.isArray(body.runs)) throw malformed('expected {"runs": [...]}');
  const hparams = (Array.isArray(body.hparams) ? body.hparams : [])
    .filter(isRecord)
    .flatMap((h) => (typeof h.name === "string" ? [{ name: h.name, type: str(h.type) ?? "text" }] : []));
  const lines = body.runs.filter(isRecord).flatMap((r): SweepLine[] => {
    if (typeof r.run !== "string") return [];
    const strip = isRecord(r.strip) ? r.strip : {};
    const w = isRecord(r.worst) && typeof r.worst.kind === "string" ? r.worst : null;
    return [{
      run: r.run,
      name: str(r.trial) ?? r.run,
      error: str(r.error),
      hparams: hparamValues(r.hparams),
      worst_severity: str(r.worst_severity),
      worst_status: str(r.worst_status) ?? "no_data",
      gradients_judged: r.gradients_judged !== false,
      sampling: parseSampling(r.sampling),
      verdict_word: str(r.verdict_word),
      worst: w && {
        kind: w.kind as string, severity: str(w.severity) ?? "", message: str(w.message) ?? "",
        first_step_text: str(w.first_step_text) ?? "", layer: str(w.layer), role: str(w.role),
      },
      kinds: (Array.isArray(r.kinds) ? r.kinds : []).flatMap((k) => parseKind(k) ?? []),
      strip: {
        steps_text: Array.isArray(strip.steps_text) ? strip.steps_text.map(String) : [],
        last_steps_text: Array.isArray(strip.last_steps_text) ? strip.last_steps_text.map(String) : [],
        status: Array.isArray(strip.status) ? strip.status.map((s) => (typeof s === "number" ? s : 0)) : [],
      },
    }];
  });
  const splits = (Array.isArray(body.splits) ? body.splits : []).flatMap((s) => (isRecord(s) && typeof s.sentence === "string" ? [s.sentence] : []));
  return { hparams, lines, splits };
}

export async function fetchSweep(fetchFn?: FetchLike): Promise<Sweep> {
  return parseSweep(await getJson("sweep", {}, fetchFn));
}

// ---- sorting and filtering (pure) -------------------------------------------------------

/** A column: "name", "worst", "kinds", or "hp:" and a hyperparameter's name. */
export interface SweepSort {
  column: string;
  descending: boolean;
}

export const HPARAM_PREFIX = "hp:";
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

export function formatHparam(v: HparamValue | undefined): string {
  return v === undefined ? "\u2013" : String(v);
}

/** Numbers by size, then booleans, then text naturally ("lr_2" before "lr_10"). */
export function compareValues(a: HparamValue, b: HparamValue): number {
  const order = (v: HparamValue): number => (typeof v === "number" ? 0 : typeof v === "boolean" ? 1 : 2);
  if (order(a) !== order(b)) return order(a) - order(b);
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  return collator.compare(String(a), String(b));
}

/** How bad a line is: its badge's rank (failed and no data lowest), then its worst kind's order. */
function worstRank(l: SweepLine): number {
  return lineBadge(l).rank;
}

/** The lines in `sort`'s order; a line without the sorted hyperparameter goes last either way; ties keep their order. */
export function sortLines(lines: readonly SweepLine[], sort: SweepSort): SweepLine[] {
  const sign = sort.descending ? -1 : 1;
  const indexed = lines.map((line, i) => ({ line, i }));
  const hp = sort.column.startsWith(HPARAM_PREFIX) ? sort.column.slice(HPARAM_PREFIX.length) : null;
  const compare = (a: SweepLine, b: SweepLine): number => {
    if (hp !== null) {
      const [x, y] = [a.hparams[hp], b.hparams[hp]];
      if (x === undefined || y === undefined) return x === y ? 0 : x === undefined ? 1 : -1;
      return sign * compareValues(x, y);
    }
    if (sort.column === "worst") {
      const ka = a.worst ? kindIndex(a.worst.kind) : Infinity;
      const kb = b.worst ? kindIndex(b.worst.kind) : Infinity;
      return sign * (worstRank(a) - worstRank(b) || kb - ka);
    }
    if (sort.column === "kinds") {
      const sev = (l: SweepLine): number => l.kinds.reduce((s, k) => s + severityRank(k.severity), 0);
      return sign * (a.kinds.length - b.kinds.length || sev(a) - sev(b));
    }
    return sign * compareRunNames(a.name, b.name);
  };
  indexed.sort((a, b) => compare(a.line, b.line) || a.i - b.i);
  return indexed.map((x) => x.line);
}

/**
 * Whether a line shows: every word of `text` is in its name or one of its hyperparameters
 * ("name=value" counts, so "optimizer=sgd" picks one value), and it found `kind` ("" for any).
 */
export function lineMatches(line: SweepLine, text: string, kind: string): boolean {
  if (kind && !line.kinds.some((k) => k.kind === kind)) return false;
  const haystack = [line.name, ...Object.entries(line.hparams).map(([k, v]) => `${k}=${formatHparam(v)}`)].join(" ");
  return matchesFilter(haystack, text);
}

export function filterLines(lines: readonly SweepLine[], text: string, kind: string): SweepLine[] {
  return lines.filter((l) => lineMatches(l, text, kind));
}

/** The kinds any line found, in the backend's kind order. */
export function kindsFound(lines: readonly SweepLine[]): string[] {
  return [...new Set(lines.flatMap((l) => l.kinds.map((k) => k.kind)))].sort((a, b) => kindIndex(a) - kindIndex(b));
}

// ---- the view -----------------------------------------------------------------------------

export interface SweepEvents {
  /** A line was clicked: open that run's heatmap, on `role` when it names one. */
  open(run: string, role: string | null): void;
  /** The sort or a filter changed, by the user or because the answer has no such column or kind. */
  changed(state: SweepViewState): void;
}

/** Every strip is this wide, whatever its run's length: each column an equal share of its run's steps. */
export const STRIP_WIDTH_PX = 240;
const STRIP_HEIGHT_PX = 12;

export const SWEEP_CSS = `
.gh-sweep { display: flex; flex-direction: column; gap: 8px; }
.gh-sweep-splits { margin: 0; padding-left: 18px; }
.gh-sweep-splits li { margin: 2px 0; }
.gh-sweep-note { color: var(--gh-muted); }
.gh-sweep-controls { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 14px; color: var(--gh-muted); }
.gh-sweep-controls label { display: inline-flex; align-items: center; gap: 6px; }
.gh-sweep-controls input[type="search"] { width: 200px; }
.gh-sweep-table { border-collapse: collapse; font-size: 12px; }
.gh-sweep-table th { text-align: left; font-weight: 500; color: var(--gh-muted); padding: 4px 10px 4px 0; cursor: pointer; white-space: nowrap; user-select: none; }
.gh-sweep-table th[aria-sort="ascending"]::after { content: " \\25b2"; }
.gh-sweep-table th[aria-sort="descending"]::after { content: " \\25bc"; }
.gh-sweep-table td { padding: 3px 10px 3px 0; border-top: 1px solid var(--gh-border); vertical-align: middle; }
.gh-sweep-table tbody tr { cursor: pointer; }
.gh-sweep-name .gh-name-piece { white-space: nowrap; }
.gh-sweep-table tbody tr:hover { background: var(--gh-hover); }
.gh-sweep-kinds { display: flex; flex-wrap: wrap; gap: 3px; }
.gh-sweep-strip { display: block; image-rendering: pixelated; width: ${STRIP_WIDTH_PX}px; height: ${STRIP_HEIGHT_PX}px; }
.gh-sweep-strip-head { width: ${STRIP_WIDTH_PX}px; }
.gh-sweep-empty { color: var(--gh-muted); padding: 4px 0; }
`;

function sortHeader(text: string, column: string): HTMLTableCellElement {
  const th = el("th", "", text);
  th.dataset.column = column;
  th.scope = "col";
  th.title = "Sort by this column; click again to reverse";
  return th;
}

/**
 * The x of each column's left edge over `width` pixels, and of the strip's right end (n + 1 values):
 * columns are placed by step, as the heatmap places its own, on the axis from the run's first step to
 * its last, each column running to the next one's first step. A run logged at every one of its first
 * 30 steps and every 100th after gives those 30 steps their share of steps, not of logged steps.
 * Steps that cannot be read (an older server) fall back to one equal share per column.
 */
export function stripEdges(strip: SweepLine["strip"], width: number = STRIP_WIDTH_PX): Float64Array {
  const n = strip.status.length;
  const edges = new Float64Array(n + 1);
  const firsts = strip.steps_text.slice(0, n).map(parseStep);
  const end = parseStep(strip.last_steps_text[n - 1] ?? strip.steps_text[n - 1]);
  const origin = firsts[0];
  const exact = n > 0 && origin !== null && end !== null && firsts.length === n && firsts.every((f) => f !== null);
  // One step's width past the last step, so the last column (and a one-step run) has room.
  const span = exact ? offset(end, origin) + 1 : n;
  for (let i = 0; i <= n; i++) {
    const at = !exact ? i : i === n ? span : offset(firsts[i] as Step, origin);
    edges[i] = span > 0 ? (at / span) * width : 0;
  }
  return edges;
}

/** The strip's column at `x` pixels from its left edge, of the columns whose edges `stripEdges` gives. */
export function stripColumnAt(x: number, edges: Float64Array): number {
  const n = edges.length - 1;
  let lo = 0;
  // The last column whose left edge is at or before x.
  for (let hi = n - 1; lo < hi;) {
    const mid = (lo + hi + 1) >> 1;
    if (edges[mid] <= x) lo = mid;
    else hi = mid - 1;
  }
  return Math.min(Math.max(0, n - 1), lo);
}

/** What the strip's column `i` says on hover: its step (or steps, for a binned column) and status. */
export function stripColumnText(strip: SweepLine["strip"], i: number, names: readonly string[]): string {
  const first = strip.steps_text[i];
  const last = strip.last_steps_text[i] ?? first;
  const steps = last === first ? `step ${first}` : `steps ${first}\u2013${last}`;
  return `${steps}: ${statusName(strip.status[i], names).replace(/_/g, " ")}`;
}

function stripCanvas(strip: SweepLine["strip"], names: readonly string[]): HTMLCanvasElement {
  const canvas = el("canvas", "gh-sweep-strip");
  const n = strip.status.length;
  canvas.width = STRIP_WIDTH_PX;
  canvas.height = STRIP_HEIGHT_PX;
  canvas.dataset.statuses = strip.status.map((s) => statusName(s, names)).join(" ");
  const whole = n > 0 ? `worst status per step, steps ${strip.steps_text[0]} to ${strip.last_steps_text[n - 1] ?? strip.steps_text[n - 1]}` : "no steps";
  canvas.title = whole;
  const edges = stripEdges(strip);
  canvas.dataset.edges = Array.from(edges, (x) => x.toFixed(1)).join(" ");
  if (n > 0) {
    canvas.addEventListener("mousemove", (e) => {
      const scale = STRIP_WIDTH_PX / (canvas.clientWidth || STRIP_WIDTH_PX);
      canvas.title = stripColumnText(strip, stripColumnAt(e.offsetX * scale, edges), names);
    });
    canvas.addEventListener("mouseleave", () => (canvas.title = whole));
  }
  const ctx = canvas.getContext("2d");
  if (ctx) {
    // Worst last: where columns narrower than a pixel share one (densely logged steps), it shows the
    // worst of them, as a binned column does.
    const order = [...strip.status.keys()].sort((a, b) => strip.status[a] - strip.status[b]);
    for (const i of order) {
      // Whole pixels, so neighbouring columns neither overlap nor leave a gap.
      const [x0, x1] = [Math.round(edges[i]), Math.round(edges[i + 1])];
      ctx.fillStyle = statusColor(statusName(strip.status[i], names));
      ctx.fillRect(x0, 0, Math.max(1, x1 - x0), STRIP_HEIGHT_PX);
    }
  }
  return canvas;
}

/**
 * A line's name cell: its pieces (`nameBreaks`) each kept on one line, so a squeezed table wraps the name
 * only between its parts ("lr_" / "1e-3"), never inside one.
 */
function sweepName(name: string): HTMLTableCellElement {
  const td = el("td", "gh-sweep-name");
  nameBreaks(name).forEach((piece, i) => {
    if (i > 0) td.append(el("wbr"));
    td.append(el("span", "gh-name-piece", piece));
  });
  return td;
}

/** A line's badge as the run list words it (`runBadge`): the same run reads the same in both. */
function lineBadge(l: SweepLine): { text: string; cls: string; rank: number } {
  return runBadge({
    worst_severity: l.worst_severity, worst_status: l.worst_status, error: l.error, gradients_judged: l.gradients_judged,
    sampling: l.sampling, verdict_word: l.verdict_word,
  });
}

/**
 * The worst column's badge: the worst finding's kind where it is more than a note, else
 * the run list's badge ("healthy (notes only)" for a run with notes only).
 */
export function worstBadge(line: SweepLine): { text: string; cls: string } {
  const { text, cls } = lineBadge(line);
  if (!line.worst || line.error || line.worst_severity === mildestSeverity()) return { text, cls };
  return { text: kindLabel(line.worst.kind), cls };
}

/**
 * A kind's chip: "<label> \u00b7 <onset> \u00b7 <first layer>" and its hover text. A bare onset number is a step
 * of the layers' axis, as the column's header says; one on its finding's own axis names it ("epoch 3").
 */
export function kindChipText(k: SweepKind, lineRun: string): { text: string; title: string } {
  const where = [`from ${onsetText(k)}`, k.layer ? `first at ${k.layer}` : "", k.run && k.run !== lineRun ? `in ${k.run}` : ""];
  const onset = k.axis ? onsetText(k) : k.first_step_text;
  return {
    text: `${kindLabel(k.kind)} \u00b7 ${onset}${k.layer ? ` \u00b7 ${k.layer}` : ""}`,
    title: `${kindLabel(k.kind)} (${k.severity}) ${where.filter(Boolean).join(", ")}`,
  };
}

function kindChip(k: SweepKind, line: SweepLine): HTMLElement {
  const { text, title } = kindChipText(k, line.run);
  const chip = el("span", `gh-badge gh-sev-${k.severity}`, text);
  chip.dataset.kind = k.kind;
  chip.title = title;
  return chip;
}

export class SweepView {
  readonly root = el("div", "gh-sweep");
  readonly filterInput = el("input");
  readonly kindSelect = el("select");
  private readonly splits = el("div");
  private readonly count = el("span");
  private readonly table = el("table", "gh-sweep-table");
  private readonly body = el("tbody");
  private readonly empty = el("div", "gh-sweep-empty", "No run matches.");
  private sweep: Sweep = { hparams: [], lines: [], splits: [] };
  private rows = new Map<SweepLine, HTMLTableRowElement>();
  private sort: SweepSort = { column: "", descending: false };
  /** The sort and filters asked for (by a link or the user), kept whichever answer comes. */
  private wanted: SweepViewState = DEFAULT_SWEEP;
  /** Whether an answer was shown. */
  loaded = false;

  constructor(private readonly events: SweepEvents, wanted: SweepViewState = DEFAULT_SWEEP) {
    this.wanted = wanted;
    this.filterInput.type = "search";
    this.filterInput.placeholder = "Filter runs or values";
    this.filterInput.setAttribute("aria-label", "Filter the runs by name or hyperparameter value");
    this.kindSelect.setAttribute("aria-label", "Show only the runs with this finding");
    const controls = el("div", "gh-sweep-controls");
    const filterLabel = el("label", "", "Runs");
    filterLabel.append(this.filterInput);
    const kindLabelEl = el("label", "", "Found");
    kindLabelEl.append(this.kindSelect);
    controls.append(filterLabel, kindLabelEl, this.count);
    this.table.append(el("thead"), this.body);
    this.empty.hidden = true;
    this.root.append(this.splits, controls, this.table, this.empty);
    this.filterInput.addEventListener("input", () => this.userChanged({ text: this.filterInput.value }));
    this.kindSelect.addEventListener("change", () => this.userChanged({ kind: this.kindSelect.value }));
    this.table.tHead?.addEventListener("click", (e) => {
      const th = (e.target as HTMLElement).closest("th");
      if (th?.dataset.column) this.sortBy(th.dataset.column);
    });
    this.body.addEventListener("click", (e) => {
      const tr = (e.target as HTMLElement).closest("tr");
      if (tr?.dataset.run) this.events.open(tr.dataset.run, tr.dataset.role ?? null);
    });
  }

  /** Shows a new answer; the filter and sort the user chose stay. */
  set(sweep: Sweep): void {
    this.sweep = sweep;
    this.loaded = true;
    this.drawSplits();
    const kinds = kindsFound(sweep.lines);
    setOptions(this.kindSelect, [{ value: "", text: "any finding" }, ...kinds.map((k) => ({ value: k, text: kindLabel(k) }))], [this.kindSelect.value]);
    this.kindSelect.disabled = kinds.length === 0;
    const names = statusNames();
    this.rows = new Map(sweep.lines.map((l) => [l, this.row(l, names)]));
    this.show();
  }

  /** Sorts and filters as a link says (a hash change); applied to the answer shown, if any. */
  restore(wanted: SweepViewState): void {
    this.wanted = wanted;
    if (this.loaded) this.show();
  }

  sortBy(column: string): void {
    this.userChanged({ column, descending: this.sort.column === column ? !this.sort.descending : false });
  }

  private userChanged(part: Partial<SweepViewState>): void {
    this.wanted = { ...this.wanted, ...part };
    this.show();
    this.events.changed(this.wanted);
  }

  /**
   * Puts the wanted sort and filters into the controls and the table. A column this answer
   * lacks (no such hyperparameter) or a kind no line found is dropped, and said as changed,
   * so a link names only what the view shows.
   */
  private show(): void {
    const w = this.wanted;
    const hp = w.column.startsWith(HPARAM_PREFIX) ? w.column.slice(HPARAM_PREFIX.length) : null;
    const columnOk = w.column === "" || (isSweepColumn(w.column) && (hp === null || this.sweep.hparams.some((h) => h.name === hp)));
    const kindOk = w.kind === "" || kindsFound(this.sweep.lines).includes(w.kind);
    const shown: SweepViewState = {
      column: columnOk ? w.column : "",
      descending: columnOk && w.descending,
      text: w.text,
      kind: kindOk ? w.kind : "",
    };
    this.sort = { column: shown.column, descending: shown.descending };
    if (this.filterInput.value !== shown.text) this.filterInput.value = shown.text;
    this.kindSelect.value = shown.kind;
    this.drawHead();
    this.apply();
    if (!columnOk || !kindOk) {
      this.wanted = shown;
      this.events.changed(shown);
    }
  }

  private drawSplits(): void {
    const { splits, lines } = this.sweep;
    if (splits.length > 0) {
      const list = el("ul", "gh-sweep-splits");
      list.append(...splits.map((s) => el("li", "", s)));
      this.splits.replaceChildren(el("div", "gh-sweep-note", "What the hyperparameters explain:"), list);
    } else if (this.sweep.hparams.length === 0) {
      this.splits.replaceChildren(el("div", "gh-sweep-note", "No run logged hyperparameters (hp.hparams, hp.KerasCallback or add_hparams)."));
    } else {
      this.splits.replaceChildren(el("div", "gh-sweep-note", `The hyperparameters explain no finding clearly in these ${lines.length} runs.`));
    }
  }

  private drawHead(): void {
    const tr = el("tr");
    tr.append(
      sortHeader("run", "name"),
      ...this.sweep.hparams.map((h) => sortHeader(h.name, HPARAM_PREFIX + h.name)),
      sortHeader("worst", "worst"),
      sortHeader("found (from step, first layer)", "kinds"),
      el("th", "gh-sweep-strip-head", "status per step"),
    );
    for (const th of tr.querySelectorAll<HTMLElement>("th[data-column]")) {
      if (th.dataset.column === this.sort.column) th.setAttribute("aria-sort", this.sort.descending ? "descending" : "ascending");
    }
    this.table.tHead?.replaceChildren(tr);
  }

  private row(line: SweepLine, names: readonly string[]): HTMLTableRowElement {
    const tr = el("tr");
    tr.dataset.run = line.run;
    if (line.worst?.role) tr.dataset.role = line.worst.role;
    tr.title = `Open the heatmap of ${line.run}`;
    const worst = el("td");
    const { text, cls } = worstBadge(line);
    const b = el("span", `gh-badge ${cls}`, text);
    b.title = line.error ?? line.worst?.message ?? text;
    worst.append(b);
    const kinds = el("td");
    const chips = el("div", "gh-sweep-kinds");
    chips.append(...line.kinds.map((k) => kindChip(k, line)));
    kinds.append(chips);
    const strip = el("td");
    strip.append(stripCanvas(line.strip, names));
    tr.append(
      sweepName(line.name),
      ...this.sweep.hparams.map((h) => el("td", typeof line.hparams[h.name] === "number" ? "gh-num" : "", formatHparam(line.hparams[h.name]))),
      worst,
      kinds,
      strip,
    );
    return tr;
  }

  /** Orders and hides the built rows as the sort and filters say. */
  private apply(): void {
    const ordered = this.sort.column ? sortLines(this.sweep.lines, this.sort) : this.sweep.lines;
    const text = this.filterInput.value;
    const kind = this.kindSelect.value;
    let shown = 0;
    const rows = ordered.map((l) => {
      const tr = this.rows.get(l) as HTMLTableRowElement;
      tr.hidden = !lineMatches(l, text, kind);
      if (!tr.hidden) shown++;
      return tr;
    });
    this.body.replaceChildren(...rows);
    // Lines there are, none shown: say so rather than leave a bare header.
    this.empty.hidden = shown > 0 || this.sweep.lines.length === 0;
    this.count.textContent = `${shown} of ${this.sweep.lines.length} runs`;
  }

  /** The names of the lines shown, top to bottom, for the browser tests. */
  shownNames(): string[] {
    return Array.from(this.body.rows).filter((r) => !r.hidden).map((r) => r.cells[0].textContent ?? "");
  }
}
