// The backend's vocabulary (GET vocabulary): finding kinds with their labels and
// chart metrics, severities, statuses and the health score bands. The page reads it
// once at start and installs it here, so no kind, rank or band is written twice.

import { isRecord, malformed } from "./json";

export interface KindInfo {
  kind: string;
  label: string;
  /** The metric whose chart shows a finding of this kind best. */
  metric: string;
  /** One finding per event (a spike): repeats are the same problem again, so they fold at any severity. */
  events: boolean;
  /** Logged steps in a row its cell rules must hold for its finding; null for a kind without cell rules. */
  steps_needed: number | null;
}

export interface ScoreBand {
  status: string;
  lo: number;
  hi: number;
}

export interface VocabularyThreshold {
  role: string | null;
  metric: string;
  name: string;
  value: number;
  side: "above" | "below";
  meaning: string;
}

export interface Vocabulary {
  /** In the backend's kind order, the tie-break of the findings sort. */
  kinds: KindInfo[];
  /** The metric a chart shows for a role when no kind picks one. */
  role_metric: Record<string, string>;
  severities: { severity: string; rank: number }[];
  statuses: { status: string; code: number }[];
  health_bands: ScoreBand[];
  thresholds: VocabularyThreshold[];
}

function list<T>(body: Record<string, unknown>, name: string, item: (v: Record<string, unknown>) => T | null): T[] {
  const v = body[name];
  if (!Array.isArray(v)) throw malformed(`vocabulary.${name} must be a list`);
  return v.filter(isRecord).flatMap((x) => {
    const out = item(x);
    return out === null ? [] : [out];
  });
}

const text = (v: unknown): string | null => (typeof v === "string" ? v : null);
const number = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

function threshold(t: Record<string, unknown>): VocabularyThreshold | null {
  const [metric, name, value] = [text(t.metric), text(t.name), number(t.value)];
  if (metric === null || name === null || value === null) return null;
  return { role: text(t.role), metric, name, value, side: t.side === "below" ? "below" : "above", meaning: text(t.meaning) ?? "" };
}

/** Checks the parts of a vocabulary response the page relies on; tolerates extra fields. */
export function parseVocabulary(body: unknown): Vocabulary {
  if (!isRecord(body)) throw malformed("vocabulary is not an object");
  const roleMetric: Record<string, string> = {};
  if (isRecord(body.role_metric)) {
    for (const [role, metric] of Object.entries(body.role_metric)) if (typeof metric === "string") roleMetric[role] = metric;
  }
  return {
    kinds: list(body, "kinds", (k) => {
      const kind = text(k.kind);
      return kind === null ? null
        : { kind, label: text(k.label) ?? kind, metric: text(k.metric) ?? "", events: k.events === true,
            steps_needed: number(k.steps_needed) };
    }),
    role_metric: roleMetric,
    severities: list(body, "severities", (s) => {
      const [severity, rank] = [text(s.severity), number(s.rank)];
      return severity === null || rank === null ? null : { severity, rank };
    }),
    statuses: list(body, "statuses", (s) => {
      const [status, code] = [text(s.status), number(s.code)];
      return status === null || code === null ? null : { status, code };
    }),
    health_bands: list(body, "health_bands", (b) => {
      const [status, lo, hi] = [text(b.status), number(b.lo), number(b.hi)];
      return status === null || lo === null || hi === null ? null : { status, lo, hi };
    }),
    thresholds: Array.isArray(body.thresholds) ? list(body, "thresholds", threshold) : [],
  };
}

let installed: Vocabulary | null = null;

/** Makes `v` the vocabulary every lookup below reads; the store calls it once the route answered. */
export function installVocabulary(v: Vocabulary): void {
  installed = v;
}

/** The installed vocabulary; reading it before the store loaded it is a programming error. */
export function vocabulary(): Vocabulary {
  if (!installed) throw new Error("gradhealth: the vocabulary is read before it was loaded");
  return installed;
}

export function kindLabel(kind: string): string {
  return vocabulary().kinds.find((k) => k.kind === kind)?.label ?? kind.replace(/_/g, " ");
}

/** Whether the backend gives one finding per event of this kind (a spike), whose repeats fold at any severity. */
export function isEventKind(kind: string): boolean {
  return vocabulary().kinds.find((k) => k.kind === kind)?.events === true;
}

/** The metric that shows a finding (or a cell rule named after a kind) best in a layer's chart. */
export function kindMetric(kind: string | null | undefined, role: string): string {
  const v = vocabulary();
  const known = v.kinds.find((k) => k.kind === kind)?.metric;
  // A role the backend does not map reads like the first one listed (gradients).
  return known || (v.role_metric[role] ?? Object.values(v.role_metric)[0] ?? "");
}

/** Logged steps in a row a kind's cell rules must hold for its finding; null when unknown. */
export function kindStepsNeeded(kind: string): number | null {
  return vocabulary().kinds.find((k) => k.kind === kind)?.steps_needed ?? null;
}

/** Position in the backend's kind order; unknown kinds sort last. */
export function kindIndex(kind: string): number {
  const kinds = vocabulary().kinds;
  const i = kinds.findIndex((k) => k.kind === kind);
  return i < 0 ? kinds.length : i;
}

/** Rank of a severity (higher is worse); 0 for one the backend does not name. */
export function severityRank(severity: string): number {
  return vocabulary().severities.find((s) => s.severity === severity)?.rank ?? 0;
}

export function isSeverity(v: unknown): v is string {
  return typeof v === "string" && severityRank(v) > 0;
}

/** Severity names, worst first. */
export function severitiesWorstFirst(): string[] {
  return [...vocabulary().severities].sort((a, b) => b.rank - a.rank).map((s) => s.severity);
}

/** The mildest severity: what a finding without one reads as. */
export function mildestSeverity(): string {
  const all = severitiesWorstFirst();
  return all[all.length - 1] ?? "";
}

/** How bad a status is, the backend's status code (0 no data ... worst); unknown names count as no data. */
export function statusRank(name: string): number {
  return vocabulary().statuses.find((s) => s.status === name)?.code ?? 0;
}

/** Status names indexed by code, for answers that do not carry status_names. */
export function statusNames(): string[] {
  const out: string[] = [];
  for (const s of vocabulary().statuses) out[s.code] = s.status;
  return Array.from(out, (s) => s ?? "");
}

/** The health score bands, lowest scores first. */
export function scoreBands(): ScoreBand[] {
  return [...vocabulary().health_bands].sort((a, b) => a.lo - b.lo);
}
