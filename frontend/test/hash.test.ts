import { describe, expect, it } from "vitest";
import { decodeState, DEFAULT_STATE, encodeState, fromFragment, openRun, toFragment } from "../src/hash";
import type { ViewState } from "../src/hash";

const FULL: ViewState = {
  run: "exp 1/train&x=<img>",
  compare: "exp2",
  role: "weight",
  metric: "max_abs",
  filter: "dense kernel",
  sort: "severity",
  zoom: [100n, 2501n],
  layer: "dense/kernel#0",
  step: 1200n,
  finding: "exploding_gradients.gradient.10.dense/kernel",
  view: "sweep",
  fold: { mode: "all", except: ["transformer.h.3", "layer4.1"] },
  sweep: { column: "hp:learning rate&x", descending: true, text: "optimizer=sgd 0.3", kind: "dead_units" },
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
    expect(decodeState({ step: "10", layer: "l" }).step).toBe(10n);
    for (const bad of [" 5", "1_000", "\uff15", "+5", "1e3", "0x10"]) {
      expect(decodeState({ step: bad, layer: "l" }).step).toBeNull();
    }
  });

  it("keeps the sweep's sort and filters in a sweep's link, not a heatmap's", () => {
    const sweep = { column: "worst", descending: true, text: "sgd", kind: "weight_growth" };
    expect(encodeState({ ...DEFAULT_STATE, view: "sweep", sweep })).toEqual({ view: "sweep", ssort: "-worst", sfilter: "sgd", skind: "weight_growth" });
    expect(encodeState({ ...DEFAULT_STATE, view: "sweep", sweep: { ...sweep, descending: false } }).ssort).toBe("worst");
    expect(encodeState({ ...DEFAULT_STATE, run: "a", sweep })).toEqual({ run: "a" });
    expect(fromFragment("view=sweep&ssort=-hp%3Alr&sfilter=a%20b&skind=spike").sweep).toEqual({ column: "hp:lr", descending: true, text: "a b", kind: "spike" });
  });

  it("ignores a sweep column that is none", () => {
    for (const bad of ["bogus", "-", "--worst", "hp:", "-hp:", "Name"]) {
      expect(decodeState({ view: "sweep", ssort: bad }).sweep).toEqual({ column: "", descending: false, text: "", kind: "" });
    }
    expect(decodeState({}).sweep).toEqual(DEFAULT_STATE.sweep);
  });

  it("keeps steps past 2^53 exact", () => {
    const big = 2n ** 60n + 1n;
    const s = fromFragment(toFragment({ ...DEFAULT_STATE, layer: "l", step: big, zoom: [big - 1n, big + 2n] }));
    expect(s.step).toBe(big);
    expect(s.zoom).toEqual([big - 1n, big + 2n]);
    expect(toFragment({ ...DEFAULT_STATE, layer: "l", step: big })).toContain("step=1152921504606846977");
  });

  it("reads decimal zoom edges of older links outward to whole steps", () => {
    expect(decodeState({ zoom: "100~2500.5" }).zoom).toEqual([100n, 2501n]);
    expect(decodeState({ zoom: "-10.5~-2.25" }).zoom).toEqual([-11n, -2n]);
    expect(decodeState({ zoom: "4.0~7.00" }).zoom).toEqual([4n, 7n]);
    expect(decodeState({ zoom: "5.5~5.7" }).zoom).toEqual([5n, 6n]);
  });

  it("skips broken escapes and empty parts", () => {
    expect(fromFragment("#run=%E0%A4%A&role=weight&&=x&novalue").role).toBe("weight");
    expect(fromFragment("#run=%E0%A4%A&role=weight").run).toBe("");
  });

  it("picking another run resets what belonged to the run left, its fold choice too", () => {
    const next = openRun(FULL, "gpt2/gpt2_small", "");
    expect(next).toEqual({ ...FULL, run: "gpt2/gpt2_small", compare: "", layer: "", step: null, finding: "", zoom: null, fold: DEFAULT_STATE.fold });
    // The URL no longer names the blocks opened in the other run's model.
    expect(encodeState(next).fold).toBeUndefined();
    expect(openRun(FULL, "rank1", "rank0").compare).toBe("rank0");
  });
});
