import { describe, expect, it } from "vitest";
import { ApiError, buildUrl, fetchHeatmap, fetchRuns, getJson, orderedRoles, parseHeatmap, parseRuns } from "../src/api";
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
    expect(runs[0].last_step).toBe(19);
  });

  it("fills missing optional fields", () => {
    const { runs } = parseRuns({ runs: [{ run: "eval" }] });
    expect(runs[0]).toEqual({
      run: "eval",
      layers: [],
      roles: [],
      scalars: {},
      unclassified: [],
      steps_kept: 0,
      last_step: null,
    });
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

  it("rejects rows or columns that do not match layers and steps", () => {
    expect(() => parseHeatmap({ ...HEATMAP, values: [[1, 2, 3]] })).toThrow(/one row per layer/);
    expect(() => parseHeatmap({ ...HEATMAP, status: [[1, 1], [1, 1, 1]] })).toThrow(/status\[0\]/);
    expect(() => parseHeatmap({ ...HEATMAP, values: [["a", 1, 2], [1, 2, 3]] })).toThrow(ApiError);
    expect(() => parseHeatmap({ ...HEATMAP, steps: ["0", "10", "20"] })).toThrow(/steps/);
  });

  it("treats an unknown scale as linear", () => {
    expect(parseHeatmap({ ...HEATMAP, scale: "symlog" }).scale).toBe("linear");
    expect(parseHeatmap({ ...HEATMAP, scale: "log" }).scale).toBe("log");
  });
});
