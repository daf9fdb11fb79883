// The run list (left) and the findings list (right).

import type { Finding, RunInfo } from "./api";
import { button, el } from "./dom";
import { causeText, findingId, findingStepsText, foldKey, foldLayers, foldNotes, foldSteps } from "./findings";
import { formatStep } from "./format";
import { ranksButton } from "./ranks";
import { layerCode, paragraph, quotedText } from "./messages";
import { compareRunNames, nameBreaks, widestPiece } from "./run_names";
import { matchesFilter } from "./rows";
import { kindLabel, mildestSeverity, severitiesWorstFirst, severityRank } from "./vocabulary";

/**
 * Worst finding of a run as one word and a rank (higher is worse) for sorting: what the run
 * list and the sweep both say of a run. A run whose findings are all of the mildest severity
 * (notes) reads as healthy, "healthy (notes only)": a note is no problem to act on. It still
 * ranks above a run with no finding at all.
 */
export function runBadge(
  r: Pick<RunInfo, "worst_severity" | "worst_status">
    & Partial<Pick<RunInfo, "gradients_judged" | "error" | "sampling" | "growing" | "verdict_word">>,
): { text: string; cls: string; rank: number } {
  // A run the server could not analyse says nothing about training: ranked with no data.
  if (r.error) return { text: "failed", cls: "gh-run-failed", rank: 0 };
  // Steps still arriving (TensorBoard reading the run, or a training writing it): what the
  // steps read so far show, not a verdict on the run.
  if (r.growing) {
    const read = runBadge({ ...r, growing: false });
    return { ...read, text: `${read.text} so far` };
  }
  // The server's word, the one `gradhealth report` prints: the tab never words a run otherwise.
  if (r.verdict_word) return wordBadge(r.verdict_word, r.worst_severity);
  // Any finding ranks above a healthy run (1) and one with no data (0).
  const rank = r.worst_severity ? severityRank(r.worst_severity) : 0;
  if (rank > 0 && r.worst_severity === mildestSeverity()) {
    const clean = runBadge({ ...r, worst_severity: null });
    return { text: `${clean.text} (notes only)`, cls: clean.cls, rank: rank + 1 };
  }
  if (rank > 0) return { text: r.worst_severity as string, cls: `gh-sev-${r.worst_severity}`, rank: rank + 1 };
  if (r.worst_status === "no_data") return { text: "no data", cls: "gh-status-no_data", rank: 0 };
  // Without gradients the logs cannot show the gradient problems: no warning is not health.
  if (r.gradients_judged === false) return { text: "no warnings", cls: "gh-status-ok", rank: 1 };
  // Steps TensorBoard's sampling dropped were never read: no warning in the rest is not health.
  if (r.sampling) return { text: "no warnings", cls: "gh-status-ok", rank: 1 };
  return { text: "healthy", cls: "gh-status-ok", rank: 1 };
}

// Words for a run where nothing, or nothing about its layers, could be judged: no health is claimed,
// so they are drawn in the no-data grey, never the green of a run judged clean.
const UNJUDGED_WORDS = ["not judged", "scalars only"];

/** The badge of the server's verdict word (`RunInfo.verdict_word`): its colour and its rank among runs. */
export function wordBadge(word: string, worst: string | null): { text: string; cls: string; rank: number } {
  const rank = worst ? severityRank(worst) : 0;
  if (rank > 0 && worst !== mildestSeverity()) return { text: word, cls: `gh-sev-${worst}`, rank: rank + 1 };
  const unjudged = UNJUDGED_WORDS.some((w) => word.startsWith(w));
  const cls = unjudged ? "gh-status-no_data" : "gh-status-ok";
  // Notes rank above a run without findings, as in the fallback below; an unjudged run ranks with no data.
  return { text: word, cls, rank: rank > 0 ? rank + 1 : unjudged ? 0 : 1 };
}

/** The run to open first: the one with the worst finding, the first listed among equals. */
export function worstRun(runs: readonly RunInfo[]): RunInfo | undefined {
  let best: RunInfo | undefined;
  for (const r of runs) if (!best || runBadge(r).rank > runBadge(best).rank) best = r;
  return best;
}

/**
 * The runs of `after` whose steps changed since `before` was listed (kept steps or last step):
 * TensorBoard is still reading them, or a training still writing them. A run new to the list
 * has nothing to compare with and is not counted.
 */
export function growingRuns(
  before: readonly Pick<RunInfo, "run" | "steps_kept" | "last_step">[],
  after: readonly Pick<RunInfo, "run" | "steps_kept" | "last_step">[],
): Set<string> {
  const was = new Map(before.map((r) => [r.run, r]));
  return new Set(after.flatMap((r) => {
    const b = was.get(r.run);
    return b && (b.steps_kept !== r.steps_kept || String(b.last_step) !== String(r.last_step)) ? [r.run] : [];
  }));
}

/**
 * The run the tab shows. The run the view state names, when listed. Otherwise, when the state
 * names one (a link, a run deleted since), it is not swapped for another: the tab waits for it,
 * as TensorBoard may not have loaded it yet, and says once `waitedMs` reaches `patienceMs` that
 * it has not appeared. A state naming no run opens the worst.
 */
export function runToShow(
  runs: readonly RunInfo[],
  named: string,
  waitedMs: number,
  patienceMs: number,
): { open: string } | { waitFor: string; overdue: boolean } {
  if (named && !runs.some((r) => r.run === named)) return { waitFor: named, overdue: waitedMs >= patienceMs };
  return { open: named || (worstRun(runs)?.run ?? "") };
}

/**
 * The role a run opens on: the one asked for (a link's, a sweep line's) when the run has it,
 * else the role of the run's worst finding; "" leaves the choice to the toolbar's default.
 */
export function roleToOpen(run: Pick<RunInfo, "roles" | "worst_role">, asked: string): string {
  if (asked && run.roles.includes(asked)) return asked;
  return run.worst_role !== null && run.roles.includes(run.worst_role) ? run.worst_role : "";
}

/** A run's tooltip in the list: its name, then why it failed or its findings and last step. */
export function runTitle(
  r: Pick<RunInfo, "run" | "finding_counts" | "last_step"> & Partial<Pick<RunInfo, "error" | "growing" | "verdict">>,
): string {
  if (r.error) return `${r.run}\n${r.error}`;
  const growing = r.growing ? "\nstill growing: more steps were read since the previous look" : "";
  // The badge's word in the report's sentence: what "no warnings" leaves unjudged.
  const verdict = r.verdict ? `\n${r.verdict}` : "";
  return `${r.run}${verdict}\n${countsText(r.finding_counts)}${r.last_step !== null ? `\nlast step ${formatStep(r.last_step)}` : ""}${growing}`;
}

export function countsText(counts: Record<string, number>): string {
  const parts = severitiesWorstFirst().filter((s) => (counts[s] ?? 0) > 0).map((s) => `${counts[s]} ${s}`);
  return parts.length ? parts.join(", ") : "no findings";
}

/**
 * The runs listed one by one, and those with no layer data (a validation folder
 * of scalars only), which the list folds under one collapsed "no data" entry.
 * A run with a finding (a validation loss turned NaN) stays listed: folding it
 * away would hide the finding.
 */
export function groupRuns<R extends Pick<RunInfo, "worst_status" | "error"> & Partial<Pick<RunInfo, "worst_severity">>>(
  runs: readonly R[],
): { listed: R[]; noData: R[] } {
  const listed: R[] = [];
  const noData: R[] = [];
  for (const r of runs) (r.worst_status === "no_data" && !r.error && !r.worst_severity ? noData : listed).push(r);
  return { listed, noData };
}

/**
 * The run list's order: "worst" puts the worst badge first (more findings of that severity first),
 * "name" orders the names as a person reads them (lr_0.001 before lr_0.01); ties keep their order.
 */
export function sortRuns<R extends Pick<RunInfo, "run" | "worst_severity" | "worst_status" | "finding_counts">>(
  runs: readonly R[],
  sort: string,
): R[] {
  const indexed = runs.map((r, i) => ({ r, i, rank: runBadge(r).rank }));
  const count = (r: R): number => r.finding_counts[r.worst_severity ?? ""] ?? 0;
  if (sort === "worst") indexed.sort((a, b) => b.rank - a.rank || count(b.r) - count(a.r) || a.i - b.i);
  else indexed.sort((a, b) => compareRunNames(a.r.run, b.r.run) || a.i - b.i);
  return indexed.map(({ r }) => r);
}

/** The folded runs' heading: their badge's word when they share one ("scalars only (3)"), else "no layer data (3)". */
export function foldedText(runs: readonly Parameters<typeof runBadge>[0][]): string {
  const words = new Set(runs.map((r) => runBadge(r).text));
  return `${words.size === 1 ? [...words][0] : "no layer data"} (${runs.length})`;
}

export class RunList {
  readonly root = el("aside", "gh-runs");
  private readonly list = el("ul");
  private readonly filter = el("input");
  private readonly sort = el("select");
  private runs: RunInfo[] = [];
  private selected = "";
  private compared = "";

  /** `onRanks(run, partner)`: a rank's "ranks" button asks to show it beside another rank of its training. */
  constructor(
    private readonly onSelect: (run: string) => void,
    private readonly onRanks: (run: string, partner: string) => void = () => undefined,
  ) {
    const title = el("h2", "gh-side-title", "Runs");
    this.sort.append(new Option("by name", "name"), new Option("worst first", "worst"));
    this.sort.title = "Order of the runs";
    this.sort.addEventListener("change", () => this.draw());
    title.append(this.sort);
    this.filter.type = "search";
    this.filter.placeholder = "Filter runs";
    this.filter.setAttribute("aria-label", "Filter runs");
    this.filter.addEventListener("input", () => this.draw());
    this.list.setAttribute("role", "listbox");
    this.list.setAttribute("aria-label", "Runs");
    this.root.append(title, this.filter, this.list);
  }

  set(runs: RunInfo[], selected: string, compared: string): void {
    this.runs = runs;
    this.selected = selected;
    this.compared = compared;
    this.filter.hidden = runs.length <= 8;
    this.draw();
  }

  private draw(): void {
    const shown = sortRuns(this.runs.filter((r) => matchesFilter(r.run, this.filter.hidden ? "" : this.filter.value)), this.sort.value);
    const { listed, noData } = groupRuns(shown);
    this.list.replaceChildren(...listed.map((r) => this.item(r)));
    if (noData.length > 0) {
      const group = el("li", "gh-run-group");
      const details = el("details");
      // Folded unless the run shown is one of them.
      details.open = noData.some((r) => r.run === this.selected || r.run === this.compared);
      const summary = el("summary", "gh-muted", foldedText(noData));
      summary.title = `Runs with no layer data to draw (scalars only, such as a validation folder):\n${noData.map((r) => r.run).join("\n")}`;
      const inner = el("ul");
      inner.append(...noData.map((r) => this.item(r)));
      details.append(summary, inner);
      group.append(details);
      this.list.append(group);
    }
    if (shown.length === 0) this.list.append(el("li", "gh-muted", "No run matches."));
  }

  private item(r: RunInfo): HTMLLIElement {
    const li = el("li", "gh-run");
    li.setAttribute("role", "option");
    li.setAttribute("aria-selected", String(r.run === this.selected));
    if (r.run === this.compared) li.classList.add("gh-compared");
    li.dataset.run = r.run;
    const badge = runBadge(r);
    // The whole name on hover too, with the run's counts.
    li.title = runTitle(r);
    li.append(runName(r.run));
    const ranks = ranksButton(this.runs, r.run, this.onRanks);
    if (ranks) li.append(ranks);
    li.append(el("span", `gh-badge ${badge.cls}`, badge.text));
    li.addEventListener("click", () => this.onSelect(r.run));
    return li;
  }
}

export interface FindingsEvents {
  select(f: Finding | null): void;
  exportCsv(): void;
  exportJson(): void;
}

export class FindingsList {
  readonly root = el("aside", "gh-findings");
  private readonly title = el("h2", "gh-side-title", "Findings");
  private readonly body = el("div");
  private readonly csv: HTMLButtonElement;
  private readonly json: HTMLButtonElement;
  // Folded entries the user opened (by `foldKey`): a new selection redraws the list, they stay open.
  private readonly openFolds = new Set<string>();
  private layerOrder: readonly string[] = [];

  constructor(private readonly events: FindingsEvents) {
    this.csv = button("CSV", () => this.events.exportCsv(), "gh-button", "Download the findings as CSV");
    this.json = button("JSON", () => this.events.exportJson(), "gh-button", "Download the findings as JSON");
    const head = el("div", "gh-side-title");
    head.append(this.title, el("span", "gh-spacer"), this.csv, this.json);
    this.title.style.margin = "0";
    this.root.append(head, this.body);
  }

  loading(): void {
    this.body.replaceChildren(el("p", "gh-note", "Loading findings\u2026"));
  }

  /** Scrolls the list (not the page) so the selected finding shows. */
  reveal(): void {
    const item = this.body.querySelector<HTMLElement>('li[aria-selected="true"]');
    if (!item) return;
    const box = this.root.getBoundingClientRect();
    const r = item.getBoundingClientRect();
    if (r.top < box.top) this.root.scrollTop -= box.top - r.top + 8;
    else if (r.bottom > box.bottom) this.root.scrollTop += r.bottom - box.bottom + 8;
  }

  error(message: string): void {
    this.title.textContent = "Findings";
    this.csv.disabled = this.json.disabled = true;
    this.body.replaceChildren(el("p", "gh-error-text", message));
  }

  /** The run's findings, the one selected, and the run's layers in model order (folded entries name theirs so). */
  set(findings: readonly Finding[], selectedId: string, layerOrder: readonly string[] = []): void {
    this.layerOrder = layerOrder;
    this.title.textContent = `Findings (${findings.length})`;
    this.csv.disabled = this.json.disabled = findings.length === 0;
    if (findings.length === 0) {
      this.body.replaceChildren(el("p", "gh-note", "No findings: nothing in the steps read crosses a threshold."));
      return;
    }
    const list = el("ul");
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "Findings, most severe first");
    list.append(...foldNotes(findings).map((entry) => (entry.length === 1 ? this.item(entry[0], selectedId) : this.fold(entry, selectedId))));
    this.body.replaceChildren(list);
  }

  private item(f: Finding, selectedId: string): HTMLLIElement {
    const id = findingId(f);
    const li = el("li", `gh-finding gh-sev-border-${f.severity}`);
    li.setAttribute("role", "option");
    li.tabIndex = 0;
    li.dataset.finding = id;
    li.setAttribute("aria-selected", String(id === selectedId));
    const head = el("div", "gh-finding-head");
    head.append(
      el("span", `gh-badge gh-sev-${f.severity}`, f.severity),
      el("strong", "", kindLabel(f.kind)),
      el("span", "gh-muted", findingStepsText(f)),
    );
    li.append(head, paragraph(...quotedText(f.message)));
    if (f.cause) li.append(el("p", "gh-cause", causeText(f.cause)));
    li.append(el("p", "gh-advice", f.advice));
    const pick = (): void => this.events.select(id === selectedId ? null : f);
    li.addEventListener("click", pick);
    li.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        pick();
      }
    });
    return li;
  }

  /**
   * Repeated findings of one kind and role as one entry (`foldNotes`): their count, steps and layers (in
   * model order), and the findings themselves once opened. It stays open while one of them is selected,
   * and as the user left it.
   */
  private fold(notes: readonly Finding[], selectedId: string): HTMLLIElement {
    const first = notes[0];
    const key = foldKey(first);
    const li = el("li", `gh-finding-fold gh-sev-border-${first.severity}`);
    li.setAttribute("role", "group");
    const what = foldedWhat(first.severity, notes.length);
    li.setAttribute("aria-label", `${notes.length} ${kindLabel(first.kind)} ${what}`);
    li.dataset.fold = key;
    const details = el("details");
    details.open = this.openFolds.has(key) || notes.some((f) => findingId(f) === selectedId);
    details.addEventListener("toggle", () => {
      if (details.open) this.openFolds.add(key);
      else this.openFolds.delete(key);
    });
    // A summary keeps its disclosure triangle: no flex head inside it.
    const summary = el("summary");
    const on = first.role ? ` on ${first.role}s` : "";
    summary.append(
      el("span", `gh-badge gh-sev-${first.severity}`, first.severity),
      el("strong", "", kindLabel(first.kind)),
      el("span", "gh-muted", `${notes.length} ${what}${on}, ${foldSteps(notes)}`),
    );
    const { names, more } = foldLayers(notes, this.layerOrder);
    const layers = paragraph("In ");
    names.forEach((name, i) => {
      if (i > 0) layers.append(i === names.length - 1 && more === 0 ? " and " : ", ");
      layers.append(layerCode(name));
    });
    if (more > 0) layers.append(` and ${more} more`);
    const inner = el("ul");
    inner.append(...notes.map((f) => this.item(f, selectedId)));
    // Folded warnings show their layers while folded too: no layer's warning hides behind another's.
    if (first.severity === mildestSeverity()) details.append(summary, layers, inner);
    else {
      summary.append(layers);
      details.append(summary, inner);
    }
    li.append(details);
    return li;
  }
}

/** What a folded entry holds, counted: "notes", "warnings", "critical findings". */
function foldedWhat(severity: string, n: number): string {
  const one = severity === mildestSeverity() ? "note" : severity === "warn" ? "warning" : `${severity} finding`;
  return n === 1 ? one : `${one}s`;
}

/** A run's name in the list, whole: it wraps after its separators rather than being cut, so runs that
 * share a long prefix stay apart. */
function runName(run: string): HTMLSpanElement {
  const span = el("span", "gh-run-name");
  // As wide as its longest piece (or the whole row), so a piece breaks only where the row is too narrow for
  // it: the badge goes under the name rather than squeezing it to a letter a line.
  span.style.flexBasis = `${widestPiece(run)}ch`;
  nameBreaks(run).forEach((piece, i) => {
    if (i > 0) span.append(el("wbr"));
    span.append(piece);
  });
  return span;
}
