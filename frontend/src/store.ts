// All fetching and caching: the vocabulary (once), the run list with a signature
// that tells a poll whether anything changed, the findings of the open run, the
// heatmaps shown, and the detail panel's cells and series.

import { fetchCell, fetchFindings, fetchHeatmap, fetchRuns, fetchSeries, fetchTrack, fetchVocabulary, pinVersions } from "./api";
import type { Cell, Finding, Heatmap, HeatmapWindow, RunInfo, Series, Track } from "./api";
import { sortFindings } from "./findings";
import { growingRuns } from "./panels";
import type { Step } from "./steps";
import { errorText } from "./json";
import { installVocabulary } from "./vocabulary";
import type { Vocabulary } from "./vocabulary";

export interface HeatmapPair {
  primary: Heatmap;
  second: Heatmap | null;
  /** Why the compared run's heatmap is missing; "" when it loaded or none was asked for. */
  secondError: string;
}

export class Store {
  private vocab: Promise<Vocabulary> | null = null;
  runs: RunInfo[] = [];
  /** What the server rejected from gradhealth.json. */
  configProblems: string[] = [];
  private runsSignature = "";
  private growingSignature = "";
  findings: Finding[] = [];
  /** The run `findings` belong to. */
  findingsRun = "";
  heatmaps: [Heatmap | null, Heatmap | null] = [null, null];
  private cells = new Map<string, Promise<Cell>>();
  private series = new Map<string, Promise<Series>>();
  private tracks = new Map<string, Promise<Track>>();

  /** Fetches the vocabulary once and installs it; a failure is retried on the next call. */
  loadVocabulary(): Promise<Vocabulary> {
    if (!this.vocab) {
      this.vocab = fetchVocabulary().then((v) => {
        installVocabulary(v);
        return v;
      });
      this.vocab.catch(() => (this.vocab = null));
    }
    return this.vocab;
  }

  /**
   * Fetches the run list. "data" when a run's data differs from the list held before (its heatmaps
   * and findings may have changed), "badges" when only which runs are growing did, else null.
   */
  async loadRuns(): Promise<"data" | "badges" | null> {
    const { runs, config_problems } = await fetchRuns();
    const before = this.runsSignature;
    const grewBefore = this.growingSignature;
    const growing = growingRuns(this.runs, runs);
    for (const r of runs) r.growing = growing.has(r.run);
    this.runs = runs;
    pinVersions(runs);
    this.configProblems = config_problems;
    this.runsSignature = JSON.stringify(
      runs.map((r) => [r.run, String(r.last_step), r.steps_kept, r.finding_counts, r.roles, r.error]),
    );
    // A run that stopped growing keeps its data: only its badge drops "so far".
    this.growingSignature = [...growing].join("\n");
    if (before !== this.runsSignature) return "data";
    return grewBefore !== this.growingSignature ? "badges" : null;
  }

  /** Fetches a run's findings, most severe first; false when another run was asked for meanwhile. */
  async loadFindings(run: string, current: () => string): Promise<boolean> {
    let findings: Finding[];
    try {
      findings = sortFindings((await fetchFindings(run)).findings);
    } catch (e) {
      if (run !== current()) return false;
      this.findings = [];
      this.findingsRun = run;
      throw e;
    }
    if (run !== current()) return false;
    this.findings = findings;
    this.findingsRun = run;
    return true;
  }

  /**
   * Fetches the heatmap of a run and, with `compare`, of a second run; only the first may fail.
   * `part` asks for a window of steps and a column budget: a long run comes binned; the compared
   * run's may name other rows (`comparePart`).
   */
  async fetchHeatmaps(
    run: string,
    compare: string,
    role: string,
    metric: string,
    part: HeatmapWindow = {},
    comparePart: HeatmapWindow = part,
  ): Promise<HeatmapPair> {
    let secondError = "";
    const c = compare
      ? fetchHeatmap(compare, role, metric, undefined, comparePart).catch((e: unknown) => {
          secondError = errorText(e);
          return null;
        })
      : Promise.resolve(null);
    const [primary, second] = await Promise.all([fetchHeatmap(run, role, metric, undefined, part), c]);
    return { primary, second, secondError };
  }

  /** More rows of a heatmap shown (`part` as it was asked for, with the rows wanted). */
  fetchRows(run: string, role: string, metric: string, part: HeatmapWindow): Promise<Heatmap> {
    return fetchHeatmap(run, role, metric, undefined, part);
  }

  /** A layer's cell at a step, fetched once until `invalidate`. */
  cell(run: string, layer: string, role: string, step: Step): Promise<Cell> {
    return cached(this.cells, [run, layer, role, step], () => fetchCell(run, layer, step, role));
  }

  /** A layer's metric over all steps, fetched once until `invalidate`. */
  seriesOf(run: string, layer: string, role: string, metric: string): Promise<Series> {
    return cached(this.series, [run, layer, role, metric], () => fetchSeries(run, layer, metric, role));
  }

  /** A run's loss, gradient norm and learning rate for the track, fetched once until `invalidate`. */
  /** The run's whole track (kept), or its points in a zoom window (asked each time: zooms are many). */
  trackOf(run: string, window: [Step, Step] | null = null): Promise<Track> {
    return window ? fetchTrack(run, window) : cached(this.tracks, [run], () => fetchTrack(run));
  }

  /** Forgets cached cells, series and tracks: the data was reloaded. */
  invalidate(): void {
    this.cells.clear();
    this.series.clear();
    this.tracks.clear();
  }
}

/** The promise cached under `parts`, made by `load` when absent; a failure is not kept. */
function cached<T>(cache: Map<string, Promise<T>>, parts: (string | number | bigint)[], load: () => Promise<T>): Promise<T> {
  const key = parts.join("\u0000");
  let p = cache.get(key);
  if (!p) {
    p = load();
    p.catch(() => cache.delete(key));
    cache.set(key, p);
  }
  return p;
}
