// Pure handling of findings: order, identity, where they are on the heatmap, and
// export as CSV or JSON.

import type { Finding, Severity } from "./api";

export const SEVERITY_RANK: Readonly<Record<Severity, number>> = { info: 1, warn: 2, critical: 3 };

// The API's vocabulary, in the order the backend uses as a tie-breaker.
export const KINDS = [
  "nonfinite", "exploding_gradients", "vanishing_gradients", "dead_units", "weight_growth",
  "skewed_distribution", "bimodal_weights", "update_ratio", "spike", "periodic_spikes",
  "depth_vanishing", "init_scale",
] as const;

export const KIND_LABELS: Readonly<Record<string, string>> = {
  nonfinite: "NaN / Inf values",
  exploding_gradients: "Exploding gradients",
  vanishing_gradients: "Vanishing gradients",
  dead_units: "Dead units",
  weight_growth: "Weight growth",
  skewed_distribution: "Skewed distribution",
  bimodal_weights: "Bimodal weights",
  update_ratio: "Update-to-weight ratio",
  spike: "Spike",
  periodic_spikes: "Periodic spikes",
  depth_vanishing: "Gradients vanish with depth",
  init_scale: "Initialisation scale",
};

export function kindLabel(kind: string): string {
  return KIND_LABELS[kind] ?? kind.replace(/_/g, " ");
}

/** The metric that shows a finding (or a cell rule) best in a layer's chart. */
export function kindMetric(kind: string | null | undefined, role: string): string {
  switch (kind) {
    case "nonfinite":
      return "nonfinite";
    case "exploding_gradients":
      return "max_abs";
    case "vanishing_gradients":
    case "depth_vanishing":
      return "mean_abs";
    case "dead_units":
      return "zero_fraction";
    case "weight_growth":
      return "std_rel_first";
    case "skewed_distribution":
      return "skewness";
    case "update_ratio":
      return "update_ratio";
    case "bimodal_weights":
    case "init_scale":
      return "std";
    case "spike":
    case "periodic_spikes":
      return "l2";
    default:
      return role === "weight" ? "std" : role === "activation" ? "zero_fraction" : role === "update" ? "update_ratio" : "max_abs";
  }
}

function kindIndex(kind: string): number {
  const i = (KINDS as readonly string[]).indexOf(kind);
  return i < 0 ? KINDS.length : i;
}

/** Most severe first, then earliest, then the backend's kind order; stable. */
export function sortFindings(findings: readonly Finding[]): Finding[] {
  return findings
    .map((f, i) => ({ f, i }))
    .sort(
      (a, b) =>
        (SEVERITY_RANK[b.f.severity] ?? 0) - (SEVERITY_RANK[a.f.severity] ?? 0) ||
        a.f.first_step - b.f.first_step ||
        kindIndex(a.f.kind) - kindIndex(b.f.kind) ||
        a.i - b.i,
    )
    .map(({ f }) => f);
}

/** A short identity that survives a reload with new steps as long as the finding starts the same. */
export function findingId(f: Finding): string {
  return `${f.kind}.${f.role ?? "any"}.${f.first_step}.${f.layers[0] ?? ""}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Step span per layer: the layer's own span from evidence.layers when the
 * backend gives one, the finding's span otherwise.
 */
export function findingSpans(f: Finding): Map<string, [number, number]> {
  const perLayer = isRecord(f.evidence.layers) ? f.evidence.layers : {};
  const out = new Map<string, [number, number]>();
  for (const layer of f.layers) {
    const e = perLayer[layer];
    if (isRecord(e) && typeof e.first_step === "number" && typeof e.last_step === "number") {
      out.set(layer, [e.first_step, e.last_step]);
    } else {
      out.set(layer, [f.first_step, f.last_step]);
    }
  }
  return out;
}

/** Steps at which a spike finding marks a layer. */
export function spikeSteps(f: Finding, layer: string): number[] {
  if (f.kind !== "spike" && f.kind !== "periodic_spikes") return [];
  const perLayer = isRecord(f.evidence.layers) ? f.evidence.layers : {};
  const e = perLayer[layer];
  if (isRecord(e) && Array.isArray(e.spike_steps)) {
    return e.spike_steps.filter((s): s is number => typeof s === "number");
  }
  if (isRecord(e) && typeof e.step === "number") return [e.step];
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
  return JSON.stringify({ run, findings }, null, 2) + "\n";
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
