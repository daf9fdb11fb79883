import { describe, expect, it } from "vitest";
import { decodeState, DEFAULT_STATE, encodeState, fromFragment, toFragment } from "../src/hash";
import type { ViewState } from "../src/hash";

const FULL: ViewState = {
  run: "exp 1/train&x=<img>",
  compare: "exp2",
  role: "weight",
  metric: "max_abs",
  filter: "dense kernel",
  sort: "severity",
  zoom: [100, 2500.5],
  layer: "dense/kernel#0",
  step: 1200,
  finding: "exploding_gradients.gradient.10.dense/kernel",
};

describe("hash state", () => {
  it("round-trips every field, whatever characters the names hold", () => {
    expect(fromFragment(toFragment(FULL))).toEqual(FULL);
    expect(fromFragment(`#${toFragment(FULL)}`)).toEqual(FULL);
  });

  it("leaves defaults out of the URL", () => {
    expect(toFragment(DEFAULT_STATE)).toBe("");
    expect(encodeState({ ...DEFAULT_STATE, run: "a" })).toEqual({ run: "a" });
    expect(toFragment({ ...DEFAULT_STATE, run: "a b", metric: "l2" })).toBe("run=a%20b&metric=l2");
  });

  it("falls back to defaults for malformed values", () => {
    const s = decodeState({ metric: "bogus", sort: "random", zoom: "5~2", step: "1.5", layer: "x" });
    expect(s.metric).toBe("health");
    expect(s.sort).toBe("model");
    expect(s.zoom).toBeNull();
    expect(s.step).toBeNull();
    expect(decodeState({ zoom: "a~b" }).zoom).toBeNull();
    expect(decodeState({ step: "10" }).step).toBeNull();
    expect(decodeState({ step: "10", layer: "l" }).step).toBe(10);
  });

  it("skips broken escapes and empty parts", () => {
    expect(fromFragment("#run=%E0%A4%A&role=weight&&=x&novalue").role).toBe("weight");
    expect(fromFragment("#run=%E0%A4%A&role=weight").run).toBe("");
  });
});
