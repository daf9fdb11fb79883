import { describe, expect, it } from "vitest";
import {
  ApiError,
  buildUrl,
  cellQuality,
  fetchCell,
  fetchFindings,
  fetchHeatmap,
  fetchRuns,
  getJson,
  orderedRoles,
  parseCell,
  parseFindings,
  parseHeatmap,
  parseRuns,
  parseSeries,
  parseTrack,
  pinVersions,
} from "../src/api";
import type { FetchLike } from "../src/api";

const HEATMAP = {
  run: "R",
  role: "gradient",
  metric: "health",
  layers: ["dense/kernel", "dense/bias"],
  steps: [0, 10, 20],
  values: [[0.93, null, 0.2], [1.0, 0.9, 0.88]],
  status: [[1, 0, 3], [1, 1, 1]],
  status_names: ["no_data", "ok", "warn", "critical"],
  quality: "estimated",
  scale: "linear",
  rules: [["", null, "exploding_gradients"], ["", "", ""]],
};

function respond(status: number, body: string, seen: string[] = []): FetchLike {
  return async (url) => {
    seen.push(url);
    return new Response(body, { status, statusText: status === 200 ? "OK" : "Bad", headers: { "Content-Type": "application/json" } });
  };
}

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error("expected the request to fail");
}

describe("getJson", () => {
  it("builds relative URLs with encoded parameters", async () => {
    const seen: string[] = [];
    await getJson("heatmap", { run: "a b/c&d", role: "gradient" }, respond(200, "{}", seen));
    expect(seen).toEqual(["heatmap?run=a+b%2Fc%26d&role=gradient"]);
    expect(buildUrl("runs")).toBe("runs");
  });

  it("names the data version the last run list gave for the run asked about, and no other", async () => {
    const seen: string[] = [];
    const { runs } = parseRuns({ runs: [{ run: "a", version: "f00d.3" }, { run: "b" }] });
    expect(runs.map((r) => r.version)).toEqual(["f00d.3", null]);
    pinVersions(runs);
    try {
      await getJson("heatmap", { run: "a", start: "10" }, respond(200, "{}", seen));
      await getJson("heatmap", { run: "b" }, respond(200, "{}", seen));
      await getJson("sweep", {}, respond(200, "{}", seen));
      pinVersions(parseRuns({ runs: [{ run: "a", version: "f00d.4" }] }).runs);
      await fetchFindings("a", respond(200, '{"findings": []}', seen));
    } finally {
      pinVersions([]);
    }
    await getJson("heatmap", { run: "a" }, respond(200, "{}", seen));
    expect(seen).toEqual(["heatmap?run=a&start=10&version=f00d.3", "heatmap?run=b", "sweep",
      "findings?run=a&version=f00d.4", "heatmap?run=a"]);
  });

  it("surfaces the server's error message", async () => {
    const err = await rejection(getJson("heatmap", {}, respond(404, '{"error": "run not found: x"}')));
    expect(err).toBeInstanceOf(ApiError);
    expect(err.message).toBe("run not found: x");
    expect(err.status).toBe(404);
  });

  it("reports HTTP errors without a JSON body", async () => {
    const err = await rejection(getJson("runs", {}, respond(500, "<html>oops</html>")));
    expect(err.message).toBe("runs: HTTP 500 Bad");
    expect(err.status).toBe(500);
  });

  it("rejects invalid JSON, e.g. a bare NaN", async () => {
    const err = await rejection(getJson("heatmap", {}, respond(200, '{"values": [[NaN]]}')));
    expect(err).toBeInstanceOf(ApiError);
    expect(err.message).toContain("not valid JSON");
  });

  it("treats an error field as an error even with status 200", async () => {
    const err = await rejection(getJson("runs", {}, respond(200, '{"error": "boom"}')));
    expect(err.message).toBe("boom");
  });

  it("reports network failures", async () => {
    const failing: FetchLike = async () => {
      throw new TypeError("Failed to fetch");
    };
    const err = await rejection(getJson("runs", {}, failing));
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(0);
    expect(err.message).toContain("Failed to fetch");
  });
});

describe("parseRuns", () => {
  it("accepts the documented shape", async () => {
    const body = {
      runs: [
        {
          run: "train",
          layers: [{ name: "dense/kernel", group: "dense", order: 0, roles: {} }],
          roles: ["gradient", "weight"],
          scalars: { loss: ["epoch_loss"] },
          unclassified: ["layer1/X"],
          steps_kept: 20,
          last_step: 19,
        },
      ],
    };
    const { runs } = await fetchRuns(respond(200, JSON.stringify(body)));
    expect(runs[0].run).toBe("train");
    expect(runs[0].roles).toEqual(["gradient", "weight"]);
    expect(runs[0].last_step).toBe(19n);
    const big = parseRuns({ runs: [{ run: "b", last_step: 1152921504606847000, last_step_text: "1152921504606846977" }] });
    expect(big.runs[0].last_step).toBe(2n ** 60n + 1n);
  });

  it("fills missing optional fields", () => {
    const { runs } = parseRuns({ runs: [{ run: "eval" }] });
    expect(runs[0]).toEqual({
      run: "eval",
      layers: [],
      roles: [],
      scalars: {},
      unclassified: [],
      unreadable: [],
      unreadable_steps: [],
      steps_kept: 0,
      last_step: null,
      steps_logged: null,
      sampling: null,
      scalars_sampling: null,
      worst_severity: null,
      worst_role: null,
      worst_status: "no_data",
      finding_counts: {},
      gradients_judged: true,
      coverage_note: null,
      verdict_word: null,
      verdict: null,
      layers_in: null,
      error: null,
      version: null,
      training: null,
    });
  });

  it("reads the training a rank belongs to", () => {
    const training = { name: "exp/rank*", rank: "rank1", ranks: ["rank0", "rank1"], runs: ["exp/rank0", "exp/rank1"] };
    const { runs } = parseRuns({ runs: [{ run: "exp/rank1", training }, { run: "train", training: null }] });
    expect(runs.map((r) => r.training)).toEqual([training, null]);
  });

  it("keeps the role of the run's worst finding", () => {
    const { runs } = parseRuns({ runs: [{ run: "a", worst_role: "weight" }, { run: "b", worst_role: 3 }] });
    expect(runs.map((r) => r.worst_role)).toEqual(["weight", null]);
  });

  it("keeps a run the server could not analyse, with its error, next to the others", () => {
    const error = "run 'b' could not be analysed (ValueError: x); the TensorBoard log has the details";
    const { runs } = parseRuns({ runs: [{ run: "a", roles: ["gradient"] }, { run: "b", error }] });
    expect(runs.map((r) => [r.run, r.error])).toEqual([["a", null], ["b", error]]);
    expect(runs[1].layers).toEqual([]);
    expect(runs[1].roles).toEqual([]);
  });

  it("reads the config entries the server rejected, and none when it names none", () => {
    const line = "gradhealth.json: spike_window must be an integer from 3 to 1000; got 0; using 11";
    expect(parseRuns({ runs: [], config_problems: [line, 3, null] }).config_problems).toEqual([line]);
    expect(parseRuns({ runs: [] }).config_problems).toEqual([]);
    expect(parseRuns({ runs: [], config_problems: "x" }).config_problems).toEqual([]);
  });

  it("reads what a run could not judge", () => {
    const { runs } = parseRuns({ runs: [{ run: "train", gradients_judged: false, coverage_note: "Not judged: Exploding gradients." }] });
    expect(runs[0].gradients_judged).toBe(false);
    expect(runs[0].coverage_note).toBe("Not judged: Exploding gradients.");
  });

  it("reads what TensorBoard's sampling dropped, in the server's words", () => {
    const sampling = { message: "TensorBoard kept 100 of 1,000 logged steps in 2 rows", flag: "--samples_per_plugin=histograms=0",
      kept_min: 100, kept_max: 100, logged: 1000, logged_at_least: false, rows: 2, plugins: ["histograms"] };
    const { runs } = parseRuns({ runs: [{ run: "a", steps_kept: 100, steps_logged: 1000, sampling }, { run: "b", sampling: {} }] });
    expect(runs[0].steps_logged).toBe(1000);
    expect(runs[0].sampling).toEqual({ message: sampling.message, flag: sampling.flag, kept_min: 100, kept_max: 100,
      logged: 1000, logged_at_least: false });
    expect(runs[1].sampling).toBeNull();
  });

  it("reads each run's worst finding and counts", () => {
    const { runs } = parseRuns({
      runs: [{ run: "a", worst_severity: "critical", worst_status: "critical", findings: { info: 6, warn: 2, critical: 1 } }],
    });
    expect(runs[0].worst_severity).toBe("critical");
    expect(runs[0].worst_status).toBe("critical");
    expect(runs[0].finding_counts).toEqual({ info: 6, warn: 2, critical: 1 });
    expect(parseRuns({ runs: [{ run: "b", worst_severity: "bogus" }] }).runs[0].worst_severity).toBeNull();
  });

  it("rejects malformed responses", () => {
    expect(() => parseRuns({})).toThrow(ApiError);
    expect(() => parseRuns({ runs: [{ name: "x" }] })).toThrow(/runs\[0\]/);
  });

  it("orders roles canonically", () => {
    expect(orderedRoles({ roles: ["weight", "custom", "update", "gradient"] })).toEqual([
      "gradient",
      "weight",
      "update",
      "custom",
    ]);
  });
});

describe("parseHeatmap", () => {
  it("accepts the documented shape", async () => {
    const seen: string[] = [];
    const h = await fetchHeatmap("R", "gradient", "health", respond(200, JSON.stringify(HEATMAP), seen));
    expect(seen).toEqual(["heatmap?run=R&role=gradient&metric=health"]);
    expect(h.values[0][1]).toBeNull();
    expect(h.status[0][2]).toBe(3);
    expect(h.rules[0][2]).toBe("exploding_gradients");
    expect(h.scale).toBe("linear");
  });

  it("derives status and rules when absent", () => {
    const h = parseHeatmap({ ...HEATMAP, status: undefined, rules: undefined, status_names: undefined });
    expect(h.status).toEqual([[1, 0, 1], [1, 1, 1]]);
    expect(h.rules[0]).toEqual(["", null, ""]);
    expect(h.status_names).toEqual(["no_data", "ok", "warn", "critical"]);
  });

  it("reads whether some cell is a NaN/Inf step's, none where the server does not say", () => {
    expect(parseHeatmap({ ...HEATMAP, finite_only_cells: true }).finiteOnlyCells).toBe(true);
    expect(parseHeatmap(HEATMAP).finiteOnlyCells).toBe(false);
  });

  it("reads the qualities the cells hold, none where the server does not say", () => {
    expect(parseHeatmap({ ...HEATMAP, quality: "mixed", qualities: ["exact", "upper_bound"] }).qualities).toEqual(["exact", "upper_bound"]);
    expect(parseHeatmap(HEATMAP).qualities).toEqual([]);
  });

  it("reads how each row's role was decided, convention where the server does not say", () => {
    expect(parseHeatmap({ ...HEATMAP, decided_by: ["name", "fallback"] }).decided_by).toEqual(["name", "fallback"]);
    expect(parseHeatmap({ ...HEATMAP, decided_by: ["name"] }).decided_by).toEqual(["convention", "convention"]);
    expect(parseHeatmap(HEATMAP).decided_by).toEqual(["convention", "convention"]);
  });

  it("reads the role's first and last step in the whole run, whatever the window", () => {
    const zoomed = { ...HEATMAP, window: { steps: 0, steps_total: 16, first_step_text: "0", last_step_text: "150" } };
    expect(parseHeatmap(zoomed).loggedSteps).toEqual([0n, 150n]);
    // An older server: the answer's own ends when it holds the whole run, else unknown.
    expect(parseHeatmap(HEATMAP).loggedSteps).toEqual([HEATMAP.steps[0], HEATMAP.steps[2]].map(BigInt));
    expect(parseHeatmap({ ...HEATMAP, window: { steps: 3, steps_total: 16 } }).loggedSteps).toBeNull();
  });

  it("reads each row's block, none where the server does not say or says something else", () => {
    expect(parseHeatmap({ ...HEATMAP, blocks: ["h.0", null] }).blocks).toEqual(["h.0", null]);
    expect(parseHeatmap({ ...HEATMAP, blocks: [3, ""] }).blocks).toEqual([null, null]);
    expect(parseHeatmap({ ...HEATMAP, blocks: ["h.0"] }).blocks).toEqual([null, null]);
    expect(parseHeatmap(HEATMAP).blocks).toEqual([null, null]);
  });

  it("rejects rows or columns that do not match layers and steps", () => {
    expect(() => parseHeatmap({ ...HEATMAP, values: [[1, 2, 3]] })).toThrow(/one row per layer/);
    expect(() => parseHeatmap({ ...HEATMAP, status: [[1, 1], [1, 1, 1]] })).toThrow(/status\[0\]/);
    expect(() => parseHeatmap({ ...HEATMAP, values: [["a", 1, 2], [1, 2, 3]] })).toThrow(ApiError);
    expect(() => parseHeatmap({ ...HEATMAP, steps: ["a", "b", "c"] })).toThrow(/steps/);
    expect(() => parseHeatmap({ ...HEATMAP, steps: [0, 10.5, 20] })).toThrow(/steps/);
    expect(() => parseHeatmap({ ...HEATMAP, steps_text: ["0", "1e1", "20"] })).toThrow(/steps/);
    expect(() => parseHeatmap({ ...HEATMAP, steps_text: ["0", "10"] })).toThrow(/one entry per step/);
  });

  it("reads steps past 2^53 exactly from their decimal twins", () => {
    // As JSON.parse reads the server's numbers: 2^60 .. 2^60+2 all become 1152921504606847000.
    const steps = [1152921504606847000, 1152921504606847000, 1152921504606847000];
    const steps_text = ["1152921504606846976", "1152921504606846977", "1152921504606846978"];
    expect(() => parseHeatmap({ ...HEATMAP, steps })).toThrow(/ascending/);
    const h = parseHeatmap({ ...HEATMAP, steps, steps_text });
    expect(h.steps).toEqual([2n ** 60n, 2n ** 60n + 1n, 2n ** 60n + 2n]);
  });

  it("reads an incomplete last step, only as the last column", () => {
    const incomplete = { step: 20, step_text: "20", layers: 1, layers_before: 2 };
    expect(parseHeatmap({ ...HEATMAP, incomplete }).incomplete).toEqual({ step: 20n, layers: 1, layers_before: 2 });
    expect(parseHeatmap({ ...HEATMAP, incomplete: { ...incomplete, step: 10, step_text: "10" } }).incomplete).toBeNull();
    expect(parseHeatmap({ ...HEATMAP, incomplete: null }).incomplete).toBeNull();
    expect(parseHeatmap(HEATMAP).incomplete).toBeNull();
  });

  it("treats an unknown scale as linear", () => {
    expect(parseHeatmap({ ...HEATMAP, scale: "symlog" }).scale).toBe("linear");
    expect(parseHeatmap({ ...HEATMAP, scale: "log" }).scale).toBe("log");
  });
});

describe("heatmap cell quality", () => {
  it("reads the per-cell quality codes", () => {
    const h = parseHeatmap({
      ...HEATMAP,
      quality: "mixed",
      quality_cells: [[1, 0, 2], [2, 2, 1]],
      quality_names: ["no_data", "exact", "estimated"],
    });
    expect(cellQuality(h, 0, 0)).toBe("exact");
    expect(cellQuality(h, 0, 2)).toBe("estimated");
    expect(cellQuality(h, 0, 1)).toBe("no_data");
  });

  it("falls back to the heatmap's summary without per-cell codes", () => {
    const h = parseHeatmap(HEATMAP);
    expect(h.quality_cells).toBeNull();
    expect(cellQuality(h, 1, 1)).toBe("estimated");
    expect(() => parseHeatmap({ ...HEATMAP, quality_cells: [[1]] })).toThrow(/quality_cells/);
  });

  it("rejects steps out of order, which would misplace columns", () => {
    expect(() => parseHeatmap({ ...HEATMAP, steps: [0, 20, 10] })).toThrow(/ascending/);
  });
});

describe("findings, cell and series", () => {
  const FINDING = {
    run: "R",
    kind: "exploding_gradients",
    severity: "critical",
    layers: ["dense/kernel"],
    first_step: 10,
    last_step: 30,
    message: "m",
    advice: "a",
    evidence: { threshold: 1000, layers: { "dense/kernel": { first_step: 10, last_step: 20 } } },
    role: "gradient",
  };

  it("parses findings and keeps optional fields only when present", async () => {
    const seen: string[] = [];
    const body = { run: "R", findings: [FINDING, { ...FINDING, kind: "periodic_spikes", severity: "info", period: 20, artefact: true, role: null }] };
    const f = await fetchFindings("R", respond(200, JSON.stringify(body), seen));
    expect(seen).toEqual(["findings?run=R"]);
    expect(f.findings[0].period).toBeUndefined();
    expect(f.findings[1]).toMatchObject({ period: 20, artefact: true, role: null, severity: "info" });
    expect(() => parseFindings({ findings: [{}] })).toThrow(/findings\[0\]/);
    expect(parseFindings({ findings: [{ ...FINDING, severity: "??" }] }).findings[0].severity).toBe("info");
  });

  it("reads the steps a finding covers per layer from their exact twins", () => {
    const covered = {
      ...FINDING,
      covers: { "dense/kernel": [[1152921504606847000, 1152921504606847000]], loss: [[35, 35], [70, 70]] },
      covers_text: { "dense/kernel": [["1152921504606846977", "1152921504606846979"]], loss: [["35", "35"], ["70", "70"], ["x", "1"]] },
    };
    const [f] = parseFindings({ findings: [covered] }).findings;
    expect(f.covers).toEqual(new Map([
      ["dense/kernel", [[2n ** 60n + 1n, 2n ** 60n + 3n]]],
      ["loss", [[35n, 35n], [70n, 70n]]],
    ]));
    // An older server sends no covers: the tab falls back to the evidence's spans.
    expect(parseFindings({ findings: [FINDING] }).findings[0].covers).toBeNull();
  });

  it("parses the run track, steps exact and non-finite spans included", () => {
    const body = {
      run: "R",
      series: [
        { tag: "loss", kind: "loss", label: "loss", axis: "row", steps: [0, 1], steps_text: ["1152921504606846977", "1152921504606846978"],
          values: [1.5, null], logged: 2, binned: false, scale: "log", nonfinite: [[1, 1]], nonfinite_text: [["1152921504606846978", "1152921504606846978"]] },
        { tag: "epoch_loss", kind: "loss", axis: "other", steps: [0], values: [2] },
      ],
    };
    const t = parseTrack(body);
    expect(t.series[0]).toMatchObject({ tag: "loss", axis: "row", scale: "log", values: [1.5, null] });
    expect(t.series[0].steps).toEqual([2n ** 60n + 1n, 2n ** 60n + 2n]);
    expect(t.series[0].nonfinite).toEqual([[2n ** 60n + 2n, 2n ** 60n + 2n]]);
    expect(t.series[1]).toMatchObject({ label: "epoch_loss", axis: "other", scale: "linear", logged: 1, nonfinite: [] });
    expect(() => parseTrack({ series: [{ tag: "x", steps: [0, 1], values: [1] }] })).toThrow(/one length/);
    expect(() => parseTrack({})).toThrow(/series/);
  });

  it("parses a cell with its histogram, dropping malformed buckets", async () => {
    const seen: string[] = [];
    const body = {
      run: "R", layer: "d", step: 10,
      roles: {
        gradient: {
          tags: ["g"], source: "histogram", status: "critical", score: 0, rule: "exploding_gradients",
          metrics: { max_abs: { value: 1e5, quality: "estimated" }, mean: { value: null, quality: "no_data" } },
          histogram: [[-1, 0, 3], [0, 1, 4], ["x", 1, 2]],
        },
      },
    };
    const c = await fetchCell("R", "d", 10n, "gradient", respond(200, JSON.stringify(body), seen));
    expect(seen).toEqual(["cell?run=R&layer=d&step=10&role=gradient"]);
    expect(c.step).toBe(10n);
    await fetchCell("R", "d", 2n ** 60n + 1n, "gradient", respond(200, JSON.stringify(body), seen));
    expect(seen[1]).toBe("cell?run=R&layer=d&step=1152921504606846977&role=gradient");
    expect(c.roles.gradient.histogram).toEqual([[-1, 0, 3], [0, 1, 4]]);
    expect(c.roles.gradient.metrics.max_abs).toEqual({ value: 1e5, quality: "estimated" });
    expect(c.roles.gradient.metrics.mean.value).toBeNull();
    expect(c.roles.gradient.histogram_note).toBeNull();
    expect(() => parseCell({})).toThrow(ApiError);
  });

  it("keeps the server's note on a histogram that cannot be drawn", () => {
    const note = "A histogram was logged at this step, but it cannot be drawn: its bucket edges are NaN or Inf.";
    const c = parseCell({ run: "R", layer: "d", step: 3, roles: { gradient: { histogram: [], histogram_note: note } } });
    expect(c.roles.gradient.histogram).toEqual([]);
    expect(c.roles.gradient.histogram_note).toBe(note);
  });

  it("reads what the rule that fired at a cell read, none where the server does not say", () => {
    const rule_read = { kind: "update_ratio", metric: "update_ratio", abs: false, value: 0, quality: "exact",
      threshold: "update_ratio_low", limit: 1e-6, side: "below" };
    const c = parseCell({ run: "R", layer: "d", step: 3, roles: { weight: { rule_read }, gradient: {} } });
    expect(c.roles.weight.rule_read).toEqual({ kind: "update_ratio", metric: "update_ratio", abs: false, value: 0,
      quality: "exact", limit: 1e-6, side: "below" });
    expect(c.roles.gradient.rule_read).toBeNull();
  });

  it("parses a series with its thresholds", () => {
    const s = parseSeries({
      run: "R", layer: "d", metric: "max_abs",
      series: { gradient: { steps: [0, 10], values: [1, null], quality: ["estimated", "no_data"], status: [1, 0] } },
      thresholds: { gradient: [{ name: "exploding_max_abs", value: 1000, side: "above", meaning: "explodes" }, { value: "x" }] },
      status_names: ["no_data", "ok", "warn", "critical"],
    });
    expect(s.series.gradient.values).toEqual([1, null]);
    expect(s.thresholds.gradient).toEqual([{ name: "exploding_max_abs", value: 1000, side: "above", meaning: "explodes" }]);
    expect(() => parseSeries({ series: { gradient: { steps: [0, 1], values: [1] } } })).toThrow(/differ in length/);
  });
});
