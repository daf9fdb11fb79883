import { describe, expect, it } from "vitest";
import { fetchVocabulary } from "../src/api";
import { kindIndex, kindMetric, parseVocabulary, scoreBands, severitiesWorstFirst, statusNames, statusRank } from "../src/vocabulary";
import fixture from "./fixtures/vocabulary.json";

describe("vocabulary", () => {
  it("is fetched from the relative vocabulary route", async () => {
    const urls: string[] = [];
    const v = await fetchVocabulary(async (url) => {
      urls.push(url);
      return new Response(JSON.stringify(fixture), { status: 200 });
    });
    expect(urls).toEqual(["vocabulary"]);
    expect(v.kinds.map((k) => k.kind)[0]).toBe("nonfinite");
  });

  it("answers every lookup from the installed fixture", () => {
    expect(kindIndex("exploding_gradients")).toBe(1);
    expect(kindIndex("new_kind")).toBe(fixture.kinds.length);
    expect(kindMetric("spike", "gradient")).toBe("l2");
    expect(kindMetric(null, "update")).toBe("update_ratio");
    expect(kindMetric(null, "unknown_role")).toBe("max_abs");
    expect(severitiesWorstFirst()).toEqual(["critical", "warn", "info"]);
    expect(statusNames()).toEqual(["no_data", "ok", "warn", "critical"]);
    expect(statusRank("critical")).toBe(3);
    expect(scoreBands().map((b) => b.status)).toEqual(["critical", "warn", "ok"]);
  });

  it("rejects an answer without its lists", () => {
    expect(() => parseVocabulary({ kinds: [] })).toThrow(/Malformed/);
  });
});
