import { describe, expect, it } from "vitest";
import { compareValues, filterLines, kindChipText, kindsFound, parseSweep, sortLines, STRIP_WIDTH_PX, stripColumnAt, stripColumnText, stripEdges, worstBadge } from "../src/sweep";
import type { SweepLine } from "../src/sweep";
import fixture from "./fixtures/vocabulary.json";

const KINDS = fixture.kinds.map((k) => k.kind);

function line(name: string, hparams: SweepLine["hparams"], kinds: string[] = [], worst: string | null = null): SweepLine {
  return {
    run: `${name}/train`, name, error: null, hparams, worst_severity: worst, worst_status: worst ?? "ok", gradients_judged: true, sampling: null, verdict_word: null,
    worst: kinds.length ? { kind: kinds[0], severity: worst ?? "warn", message: "", first_step_text: "0", layer: null, role: null } : null,
    kinds: kinds.map((kind) => ({ kind, severity: worst ?? "warn", first_step_text: "0", axis: null, layer: "dense", run: "" })),
    strip: { steps_text: [], last_steps_text: [], status: [] },
  };
}

const names = (lines: SweepLine[]) => lines.map((l) => l.name);

describe("sweep order", () => {
  const lines = [
    line("a", { lr: 0.1, schedule: "lr_10" }),
    line("b", { lr: 1e-3, schedule: "lr_2" }),
    line("c", { lr: 0.01, schedule: "lr_1" }),
    line("d", { schedule: "lr_3" }),
    line("e", { lr: 1, schedule: "LR_2" }),
  ];

  it("sorts numbers by size, never as text, and a missing value last either way", () => {
    expect(names(sortLines(lines, { column: "hp:lr", descending: false }))).toEqual(["b", "c", "a", "e", "d"]);
    expect(names(sortLines(lines, { column: "hp:lr", descending: true }))).toEqual(["e", "a", "c", "b", "d"]);
  });

  it("sorts text naturally, digits as numbers, ties in their order", () => {
    expect(names(sortLines(lines, { column: "hp:schedule", descending: false }))).toEqual(["c", "b", "e", "d", "a"]);
    const runs = [line("trial_10", {}), line("trial_2", {}), line("trial_1", {})];
    expect(names(sortLines(runs, { column: "name", descending: false }))).toEqual(["trial_1", "trial_2", "trial_10"]);
  });

  it("puts numbers before booleans before text", () => {
    expect([true, "sgd", 3, false, 0.5].sort(compareValues)).toEqual([0.5, 3, false, true, "sgd"]);
  });

  it("sorts by the worst finding, worst first when reversed", () => {
    const mixed = [line("ok", {}), line("crit", {}, [KINDS[0]], "critical"), line("warn", {}, [KINDS[1]], "warn")];
    expect(names(sortLines(mixed, { column: "worst", descending: true }))).toEqual(["crit", "warn", "ok"]);
    expect(names(sortLines(mixed, { column: "worst", descending: false }))).toEqual(["ok", "warn", "crit"]);
  });
});

describe("sweep filter", () => {
  const lines = [
    line("lr_0.3_sgd", { learning_rate: 0.3, optimizer: "sgd" }, [KINDS[0], KINDS[2]], "warn"),
    line("lr_0.3_adam", { learning_rate: 0.3, optimizer: "adam" }, [KINDS[2]], "warn"),
    line("lr_0.01_sgd", { learning_rate: 0.01, optimizer: "sgd" }),
  ];

  it("matches every word against the name and the hyperparameters' values", () => {
    expect(names(filterLines(lines, "sgd", ""))).toEqual(["lr_0.3_sgd", "lr_0.01_sgd"]);
    expect(names(filterLines(lines, "optimizer=adam", ""))).toEqual(["lr_0.3_adam"]);
    expect(names(filterLines(lines, "learning_rate=0.3 SGD", ""))).toEqual(["lr_0.3_sgd"]);
    expect(names(filterLines(lines, "", ""))).toHaveLength(3);
  });

  it("keeps only the lines that found a kind", () => {
    expect(names(filterLines(lines, "", KINDS[0]))).toEqual(["lr_0.3_sgd"]);
    expect(names(filterLines(lines, "adam", KINDS[2]))).toEqual(["lr_0.3_adam"]);
    expect(kindsFound(lines)).toEqual([KINDS[0], KINDS[2]]);
  });
});

describe("sweep answer", () => {
  it("reads a trial's line, a failed run and the split sentences", () => {
    const s = parseSweep({
      hparams: [{ name: "lr", type: "number" }],
      runs: [
        { run: "t/train", trial: "t", hparams: { lr: 0.1, bad: null }, worst_severity: "warn", worst_status: "warn",
          worst: { kind: KINDS[0], severity: "warn", message: "m", first_step_text: "4", layer: "d" },
          kinds: [{ kind: KINDS[0], severity: "warn", first_step_text: "4", layer: "d", run: "t/validation" }],
          strip: { steps: [0, 4], steps_text: ["0", "4"], status: [1, 2] } },
        { run: "broken", error: "could not be read" },
      ],
      splits: [{ sentence: "Warnings or worse in 4 of 4 runs with lr >= 0.1, in 0 of 4 below" }],
    });
    expect(s.lines[0].name).toBe("t");
    expect(s.lines[0].run).toBe("t/train");
    expect(s.lines[0].hparams).toEqual({ lr: 0.1 });
    expect(s.lines[0].kinds[0].run).toBe("t/validation");
    expect(s.lines[0].strip.status).toEqual([1, 2]);
    expect(s.lines[1]).toMatchObject({ name: "broken", error: "could not be read", kinds: [], worst: null });
    expect(s.splits).toHaveLength(1);
    expect(() => parseSweep({ lines: [] })).toThrow();
  });
});

describe("sweep kinds told in their own step axis", () => {
  const label = fixture.kinds[0].label;
  const kind = (first_step_text: string, axis: unknown) => ({ kind: KINDS[0], severity: "warn", first_step: Number(first_step_text), first_step_text, axis, layer: "epoch_loss", run: "t/validation" });
  const kinds = parseSweep({
    runs: [{ run: "t/train", kinds: [
      // Keras' epoch_loss: NaN from epoch 3, written where the layers' axis was at step 28.
      kind("28", { unit: "epoch", other: true, first_step: 3, last_step: 9, first_step_text: "3", last_step_text: "9" }),
      kind("28", { unit: "step", other: true, first_step: 3, last_step: 9 }),
      kind("120", null),
    ] }],
  }).lines[0].kinds;

  it("name the finding's own axis and its step there, as its card does; the layers' axis keeps its step", () => {
    expect(kinds[0].axis).toEqual({ unit: "epoch", other: true, first_step: 3n, last_step: 9n });
    const { text, title } = kindChipText(kinds[0], "t/train");
    expect(text).toBe(`${label} \u00b7 epoch 3 \u00b7 epoch_loss`);
    expect(title).toBe(`${label} (warn) from epoch 3, first at epoch_loss, in t/validation`);
    expect(kindChipText(kinds[1], "t/train").text).toBe(`${label} \u00b7 step 3 of its own axis \u00b7 epoch_loss`);
    // On the layers' axis: the bare step, as the column's header says.
    expect(kinds[2].axis).toBeNull();
    const onLayers = kindChipText(kinds[2], "t/train");
    expect(onLayers.text).toBe(`${label} \u00b7 120 \u00b7 epoch_loss`);
    expect(onLayers.title).toContain("from step 120");
  });
});

describe("sweep names", () => {
  it("read a run name's decimals as numbers: lr_0.001 < lr_0.01 < lr_0.3 < lr_1", () => {
    const lines = ["lr_0.01_adam", "lr_1_sgd", "lr_0.001_sgd", "lr_0.3_adam", "lr_0.001_adam", "lr_0.01_sgd"].map((n) => line(n, {}));
    expect(names(sortLines(lines, { column: "name", descending: false }))).toEqual([
      "lr_0.001_adam", "lr_0.001_sgd", "lr_0.01_adam", "lr_0.01_sgd", "lr_0.3_adam", "lr_1_sgd"]);
    expect(names(sortLines(lines, { column: "name", descending: true }))[0]).toBe("lr_1_sgd");
  });
});

describe("sweep worst column", () => {
  it("says healthy (notes only) for a run whose findings are all notes, the kind otherwise", () => {
    const mildest = fixture.severities.reduce((a, b) => (a.rank < b.rank ? a : b)).severity;
    expect(worstBadge(line("notes", {}, [KINDS[0]], mildest))).toEqual({ text: "healthy (notes only)", cls: "gh-status-ok" });
    expect(worstBadge(line("warned", {}, [KINDS[0]], "warn")).text).toBe(fixture.kinds[0].label);
    expect(worstBadge(line("clean", {})).text).toBe("healthy");
    // As the run list says it: without gradients, notes only are "no warnings", never healthy.
    expect(worstBadge({ ...line("notes", {}, [KINDS[0]], mildest), gradients_judged: false }).text).toBe("no warnings (notes only)");
  });
});

describe("sweep strip", () => {
  const strip = { steps_text: ["0", "1", "2", "10"], last_steps_text: ["0", "1", "9", "20"], status: [1, 2, 2, 3] };
  const statuses = ["no_data", "ok", "warn", "critical"];

  it("places columns by step over the same width for any run, each to the next one's first step", () => {
    // Steps 0 to 20 and one past the last: 21 steps over 240 px.
    const edges = stripEdges(strip);
    const px = (step: number) => (step / 21) * STRIP_WIDTH_PX;
    expect(Array.from(edges)).toEqual([0, px(1), px(2), px(10), STRIP_WIDTH_PX]);
    expect(stripColumnAt(0, edges)).toBe(0);
    expect(stripColumnAt(px(5), edges)).toBe(2);
    expect(stripColumnAt(STRIP_WIDTH_PX / 2, edges)).toBe(3);
    expect(stripColumnAt(STRIP_WIDTH_PX - 1, edges)).toBe(3);
    expect(stripColumnAt(STRIP_WIDTH_PX + 5, edges)).toBe(3);
    expect(stripColumnAt(-3, edges)).toBe(0);
  });

  it("gives densely logged first steps their share of steps, not of logged steps", () => {
    // Every step of the first 30, then every 100th to 3000.
    const steps = [...Array.from({ length: 30 }, (_, i) => i), ...Array.from({ length: 30 }, (_, i) => 100 * (i + 1))];
    const dense = { steps_text: steps.map(String), last_steps_text: steps.map(String), status: steps.map(() => 1) };
    const edges = stripEdges(dense);
    expect(edges[30] / STRIP_WIDTH_PX).toBeCloseTo(100 / 3001, 6);
    expect(edges[30]).toBeLessThan(STRIP_WIDTH_PX * 0.05);
    expect(stripColumnAt(STRIP_WIDTH_PX / 2, edges)).toBe(30 + 14);
  });

  it("keeps steps past 2^53 apart, and falls back to equal shares without readable steps", () => {
    const big = { steps_text: ["9007199254740993", "9007199254740995"], last_steps_text: ["9007199254740993", "9007199254740996"], status: [1, 3] };
    expect(Array.from(stripEdges(big))).toEqual([0, STRIP_WIDTH_PX / 2, STRIP_WIDTH_PX]);
    const old = { steps_text: ["a", "b", "c"], last_steps_text: [], status: [1, 1, 1] };
    expect(Array.from(stripEdges(old))).toEqual([0, STRIP_WIDTH_PX / 3, (2 * STRIP_WIDTH_PX) / 3, STRIP_WIDTH_PX]);
    expect(Array.from(stripEdges({ steps_text: [], last_steps_text: [], status: [] }))).toEqual([0]);
  });

  it("says a column's step, or steps when binned, and its status", () => {
    expect(stripColumnText(strip, 1, statuses)).toBe("step 1: warn");
    expect(stripColumnText(strip, 3, statuses)).toBe("steps 10\u201320: critical");
  });
});
