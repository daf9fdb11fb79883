// Pure handling of findings: order, identity, where they are on the heatmap, and
// export as CSV or JSON.

import type { Finding, FindingAxis, StepSpan } from "./api";
import { formatStep, formatStepRange } from "./format";
import { isRecord } from "./json";
import { compareSteps, jsonWithSteps, parseStep, stepField } from "./steps";
import type { Step } from "./steps";
import { isEventKind, kindIndex, mildestSeverity, severityRank } from "./vocabulary";

/** Most severe first, then earliest, then the backend's kind order; stable. */
export function sortFindings(findings: readonly Finding[]): Finding[] {
  return findings
    .map((f, i) => ({ f, i }))
    .sort(
      (a, b) =>
        severityRank(b.f.severity) - severityRank(a.f.severity) ||
        compareSteps(a.f.first_step, b.f.first_step) ||
        kindIndex(a.f.kind) - kindIndex(b.f.kind) ||
        a.i - b.i,
    )
    .map(({ f }) => f);
}

/** A short identity that survives a reload with new steps as long as the finding starts the same. */
export function findingId(f: Finding): string {
  return `${f.kind}.${f.role ?? "any"}.${f.first_step}.${f.layers[0] ?? ""}`;
}

/**
 * The steps a finding covers, per layer: exactly the cells whose status it sets
 * (the server's `covers`: a layer's healthy steps between two spans stay out).
 * From an older server, the layer's own span from evidence.layers, else the finding's.
 */
export function findingSpans(f: Finding, role?: string): Map<string, StepSpan[]> {
  // A finding gathered from several roles covers a row only at that row's own steps.
  const covers = (role !== undefined ? f.coversByRole?.get(role) : undefined) ?? f.covers;
  if (covers) return new Map([...covers].filter(([, spans]) => spans.length > 0));
  const perLayer = isRecord(f.evidence.layers) ? f.evidence.layers : {};
  const out = new Map<string, StepSpan[]>();
  for (const layer of f.layers) {
    const e = perLayer[layer];
    const first = isRecord(e) ? stepField(e, "first_step") : null;
    const last = isRecord(e) ? stepField(e, "last_step") : null;
    out.set(layer, [first !== null && last !== null ? [first, last] : [f.first_step, f.last_step]]);
  }
  return out;
}

/** A layer and a step of it: what the detail panel shows. */
export interface CellRef {
  layer: string;
  step: Step;
}

/**
 * The cell a finding click shows in the detail panel, given the layers of the role it is shown
 * in (model order) and the cell shown now: that layer when the finding covers it, else the first
 * layer it covers; the step shown when the finding covers it there, else the layer's first covered
 * step. Null when the finding covers no layer of the role (a run-level scalar's): no cell is its.
 */
export function findingCell(f: Finding, role: string, layers: readonly string[], current: CellRef | null): CellRef | null {
  const spans = findingSpans(f, role);
  const covered = layers.filter((l) => (spans.get(l)?.length ?? 0) > 0);
  if (covered.length === 0) return null;
  const layer = current && covered.includes(current.layer) ? current.layer : covered[0];
  const own = spans.get(layer) as StepSpan[];
  const step = current && current.layer === layer && own.some(([a, b]) => a <= current.step && current.step <= b) ? current.step : own[0][0];
  return { layer, step };
}

/** "steps 7 to 8, 15, 17 and 30": a layer's covered spans in words; "epochs 3 and 5" in another `axis`'s unit
 * ("steps 3 and 5 of its own axis" where no name tells what its steps count). */
export function spansText(spans: readonly StepSpan[], max = 6, axis?: Pick<FindingAxis, "unit" | "other">): string {
  if (spans.length === 0) return "no step";
  const one = ([a, b]: StepSpan): string => (a === b ? formatStep(a) : `${formatStep(a)} to ${formatStep(b)}`);
  const shown = spans.slice(0, max).map(one);
  const rest = spans.length - shown.length;
  if (rest > 0) shown.push(`${rest} more`);
  const list = shown.length === 1 ? shown[0] : `${shown.slice(0, -1).join(", ")} and ${shown[shown.length - 1]}`;
  const single = spans.length === 1 && spans[0][0] === spans[0][1];
  const unit = axis?.unit ?? "step";
  const own = axis?.other && unit === "step" ? " of its own axis" : "";
  return `${single ? unit : `${unit}s`} ${list}${own}`;
}

/** "steps 7 to 210"; "epochs 0 to 29" for a finding told in its own step axis (`Finding.axis`): the steps
 * its text gives, never the layers' steps it was placed at. */
export function findingStepsText(f: Finding): string {
  return f.axis ? spansText([[f.axis.first_step, f.axis.last_step]], 1, f.axis) : formatStepRange(f.first_step, f.last_step);
}

/**
 * The findings list's entries, in the order given: a finding alone, or its repeats folded into one entry
 * where the first of them is. Notes (info) of one kind, role and cause fold: a long run gives one spike
 * note per event, a dozen or more, that would bury its warnings. Warnings and critical findings fold only
 * for kinds that give one finding per event (a spike), by kind, role, severity and cause; another warning of
 * one kind can be another problem (weights too fast, weights barely moving) and stays whole. Only the list
 * folds them, every finding stays one.
 */
export function foldNotes(findings: readonly Finding[]): Finding[][] {
  const entries: Finding[][] = [];
  const folds = new Map<string, Finding[]>();
  for (const f of findings) {
    const key = f.severity === mildestSeverity() || isEventKind(f.kind) ? foldKey(f) : null;
    const fold = key === null ? undefined : folds.get(key);
    if (fold) {
      fold.push(f);
      continue;
    }
    const entry = [f];
    if (key !== null) folds.set(key, entry);
    entries.push(entry);
  }
  return entries;
}

/**
 * What the findings folded together share: run, kind, role, severity, cause and advice (an epoch's mean loss
 * and one batch's are told apart by their advice, and never fold together).
 */
export function foldKey(f: Finding): string {
  return JSON.stringify([f.run, f.kind, f.role, f.severity, f.cause ?? null, f.advice]);
}

/**
 * The layers of folded findings in model order (`order`, the order the heatmap draws the run's rows; names
 * not in it, a scalar's, after them as they come), up to `max` named: { names, more } with `more` the count
 * left unnamed. Folded warnings name all their layers: one layer's warning never hides behind another's name.
 */
export function foldLayers(fold: readonly Finding[], order: readonly string[], max = 3): { names: string[]; more: number } {
  const rank = new Map(order.map((name, i) => [name, i]));
  const all = [...new Set(fold.flatMap((f) => f.layers))];
  // sort is stable: names outside the model keep the order they came in.
  all.sort((a, b) => (rank.get(a) ?? order.length) - (rank.get(b) ?? order.length));
  const shown = fold[0]?.severity === mildestSeverity() ? max : all.length;
  return { names: all.slice(0, shown), more: Math.max(0, all.length - shown) };
}

/** "steps 1, 180, 220 to 240 and 12 more": where folded findings begin and end, one span each; in their own
 * axis ("epochs 3 and 5") where every one is told in the same one. */
export function foldSteps(fold: readonly Finding[], max = 6): string {
  const axis = fold[0]?.axis;
  if (axis && fold.every((f) => f.axis?.unit === axis.unit && f.axis.other === axis.other)) {
    return spansText(fold.map((f): StepSpan => [f.axis!.first_step, f.axis!.last_step]), max, axis);
  }
  return spansText(fold.map((f): StepSpan => [f.first_step, f.last_step]), max);
}

/** Each cause the server names (`Finding.cause`), as a person reads it. */
export const CAUSE_LABELS: Readonly<Record<string, string>> = {
  learning_rate_too_high: "learning rate too high",
  learning_rate_jump: "learning-rate jump",
  dead_relu: "dying ReLUs",
  exploding_gradients: "the explosion before it",
};

/** "Likely cause: dying ReLUs", from the cause's name (dead_relu); a cause this tab does not know yet
 * reads as its name in words. */
export function causeText(cause: string): string {
  return `Likely cause: ${CAUSE_LABELS[cause] ?? cause.replace(/_/g, " ")}`;
}

/** Steps at which a spike finding marks a layer: every occurrence it covers. */
export function spikeSteps(f: Finding, layer: string): Step[] {
  if (f.kind !== "spike" && f.kind !== "periodic_spikes") return [];
  const covered = f.covers?.get(layer);
  if (covered) return covered.flatMap(([a, b]) => (a === b ? [a] : [a, b]));
  const perLayer = isRecord(f.evidence.layers) ? f.evidence.layers : {};
  const e = perLayer[layer];
  const listed = isRecord(e) ? (Array.isArray(e.spike_steps_text) ? e.spike_steps_text : e.spike_steps) : null;
  if (Array.isArray(listed)) return listed.map(parseStep).filter((s): s is Step => s !== null);
  const one = isRecord(e) ? stepField(e, "step") : null;
  if (one !== null) return [one];
  return f.layers.includes(layer) ? [f.first_step] : [];
}

/** Findings about one layer in one role (findings without a role apply to every role). */
export function findingsFor(findings: readonly Finding[], layer: string, role: string): Finding[] {
  return findings.filter((f) => f.layers.includes(layer) && (f.role === null || f.role === role));
}

export const CSV_COLUMNS = [
  "run", "severity", "kind", "role", "layers", "first_step", "last_step", "message", "advice",
  "period", "artefact", "cause",
] as const;

/**
 * One CSV field (RFC 4180): quoted when it holds a comma, quote or line break.
 * Text starting with = + - @ or a tab gets a leading apostrophe so a spreadsheet
 * never runs a layer name as a formula; numbers are written as they are.
 */
export function csvCell(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : "";
  if (typeof v === "bigint") return v.toString();
  let s = typeof v === "string" ? v : String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function findingsCsv(findings: readonly Finding[]): string {
  const lines = [CSV_COLUMNS.join(",")];
  for (const f of findings) {
    const row: unknown[] = [
      f.run, f.severity, f.kind, f.role ?? "", f.layers.join("; "), f.first_step, f.last_step,
      f.message, f.advice, f.period ?? null, f.artefact === undefined ? null : String(f.artefact), f.cause ?? null,
    ];
    lines.push(row.map(csvCell).join(","));
  }
  return lines.join("\r\n") + "\r\n";
}

export function findingsJson(run: string, findings: readonly Finding[]): string {
  // Steps as the routes' exact decimal strings: a JSON number past 2^53 reads back rounded.
  const plain = findings.map((f) => ({
    ...f,
    covers: f.covers ? Object.fromEntries(f.covers) : null,
    coversByRole: f.coversByRole
      ? Object.fromEntries([...f.coversByRole].map(([role, c]) => [role, Object.fromEntries(c)]))
      : undefined,
  }));
  return jsonWithSteps({ run, findings: plain }, 2) + "\n";
}

/** A file name from data: anything but letters, digits, dot, dash and underscore becomes "_". */
export function safeFileName(...parts: string[]): string {
  return parts
    .filter(Boolean)
    .join("-")
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .replace(/\.{2,}/g, "_")
    .replace(/_+/g, "_")
    .replace(/^[._]+/, "")
    .slice(0, 120) || "gradhealth";
}
