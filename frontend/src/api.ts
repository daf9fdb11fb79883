// HTTP access to the plugin's JSON routes. Paths are relative: the page's
// <base href="plugin/gradhealth/"> resolves them under /data/plugin/gradhealth/.

export interface RoleSource {
  tags: string[];
  source: string;
}

export interface LayerInfo {
  name: string;
  group: string;
  order: number;
  roles: Record<string, RoleSource>;
}

export interface RunInfo {
  run: string;
  layers: LayerInfo[];
  roles: string[];
  scalars: Record<string, string[]>;
  unclassified: string[];
  steps_kept: number;
  last_step: number | null;
}

export interface RunsResponse {
  runs: RunInfo[];
}

export interface Heatmap {
  run: string;
  role: string;
  metric: string;
  layers: string[];
  steps: number[];
  values: (number | null)[][];
  status: number[][];
  status_names: string[];
  quality: string;
  scale: "linear" | "log";
  rules: (string | null)[][];
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

export const DEFAULT_STATUS_NAMES = ["no_data", "ok", "warn", "critical"];

/** An error to show to the user; `status` is the HTTP status, 0 when there was none. */
export class ApiError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

export type FetchLike = (url: string, init?: RequestInit) => Promise<Response>;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function buildUrl(path: string, params: Record<string, string> = {}): string {
  const query = new URLSearchParams(params).toString();
  return query ? `${path}?${query}` : path;
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
  const url = buildUrl(path, params);
  let resp: Response;
  try {
    resp = await fetchFn(url, { headers: { Accept: "application/json" } });
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

function malformed(what: string): ApiError {
  return new ApiError(`Malformed response: ${what}`, 0);
}

function stringArray(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

/** Checks the parts of a runs response the page relies on; tolerates extra fields. */
export function parseRuns(body: unknown): RunsResponse {
  if (!isRecord(body) || !Array.isArray(body.runs)) throw malformed('expected {"runs": [...]}');
  const runs = body.runs.map((r, i): RunInfo => {
    if (!isRecord(r) || typeof r.run !== "string") throw malformed(`runs[${i}] has no "run" name`);
    return {
      run: r.run,
      layers: Array.isArray(r.layers) ? (r.layers as LayerInfo[]) : [],
      roles: stringArray(r.roles),
      scalars: isRecord(r.scalars) ? (r.scalars as Record<string, string[]>) : {},
      unclassified: stringArray(r.unclassified),
      steps_kept: typeof r.steps_kept === "number" ? r.steps_kept : 0,
      last_step: typeof r.last_step === "number" ? r.last_step : null,
    };
  });
  return { runs };
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
  const { layers, steps, values } = body;
  if (!Array.isArray(layers) || !layers.every((l) => typeof l === "string")) {
    throw malformed("heatmap.layers must be a list of names");
  }
  if (!Array.isArray(steps) || !steps.every((s) => typeof s === "number")) {
    throw malformed("heatmap.steps must be a list of numbers");
  }
  const rows = layers.length;
  const cols = steps.length;
  const grid = <T>(name: string, v: unknown, ok: (x: unknown) => x is T): T[][] => {
    if (!Array.isArray(v) || v.length !== rows) {
      throw malformed(`heatmap.${name} must have one row per layer (${rows})`);
    }
    return v.map((row: unknown, i) => {
      if (!Array.isArray(row) || row.length !== cols || !row.every(ok)) {
        throw malformed(`heatmap.${name}[${i}] must have one entry per step (${cols})`);
      }
      return row as T[];
    });
  };
  const vals = grid("values", values, isCell);
  const status =
    body.status === undefined || body.status === null
      ? vals.map((row) => row.map((v) => (v === null ? 0 : 1)))
      : grid("status", body.status, (x): x is number => typeof x === "number");
  const rules =
    body.rules === undefined || body.rules === null
      ? vals.map((row) => row.map((v) => (v === null ? null : "")))
      : grid("rules", body.rules, (x): x is string | null => x === null || typeof x === "string");
  const names = stringArray(body.status_names);
  return {
    run: typeof body.run === "string" ? body.run : "",
    role: typeof body.role === "string" ? body.role : "",
    metric: typeof body.metric === "string" ? body.metric : "",
    layers: layers as string[],
    steps: steps as number[],
    values: vals,
    status,
    status_names: names.length > 0 ? names : DEFAULT_STATUS_NAMES,
    quality: typeof body.quality === "string" ? body.quality : "",
    scale: body.scale === "log" ? "log" : "linear",
    rules,
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
): Promise<Heatmap> {
  return parseHeatmap(await getJson("heatmap", { run, role, metric }, fetchFn));
}
