import { describe, expect, it } from "vitest";
import type { Finding } from "../src/api";
import { parseFindings } from "../src/api";
import {
  causeText,
  csvCell,
  CSV_COLUMNS,
  findingId,
  findingCell,
  findingsCsv,
  findingsFor,
  findingsJson,
  findingSpans,
  findingStepsText,
  foldLayers,
  foldNotes,
  foldSteps,
  safeFileName,
  sortFindings,
  spansText,
  spikeSteps,
} from "../src/findings";
import { kindLabel, kindMetric } from "../src/vocabulary";

const BIG = 2n ** 60n;

function finding(over: Partial<Finding>): Finding {
  return {
    run: "R", kind: "spike", severity: "info", layers: ["a"], first_step: 0n, last_step: 0n,
    message: "m", advice: "a", evidence: {}, role: "gradient", covers: null, ...over,
  };
}

describe("sortFindings", () => {
  it("puts the most severe first, then the earliest, then the kind order", () => {
    const fs = [
      finding({ kind: "spike", severity: "info", first_step: 1n }),
      finding({ kind: "weight_growth", severity: "warn", first_step: 50n }),
      finding({ kind: "exploding_gradients", severity: "critical", first_step: 90n }),
      finding({ kind: "vanishing_gradients", severity: "warn", first_step: 50n }),
      finding({ kind: "nonfinite", severity: "critical", first_step: 90n }),
    ];
    expect(sortFindings(fs).map((f) => f.kind)).toEqual([
      "nonfinite", "exploding_gradients", "vanishing_gradients", "weight_growth", "spike",
    ]);
    expect(fs[0].kind).toBe("spike");
  });

  it("orders steps past 2^53 that a double cannot tell apart", () => {
    const fs = [finding({ message: "later", first_step: BIG + 1n }), finding({ message: "earlier", first_step: BIG })];
    expect(sortFindings(fs).map((f) => f.message)).toEqual(["earlier", "later"]);
  });

  it("is stable for equal findings", () => {
    const a = finding({ message: "first" });
    const b = finding({ message: "second" });
    expect(sortFindings([a, b]).map((f) => f.message)).toEqual(["first", "second"]);
  });
});

describe("where a finding is", () => {
  const f = finding({
    kind: "exploding_gradients", layers: ["a", "b", "c"], first_step: 10n, last_step: 160n,
    evidence: { layers: { a: { first_step: 10, last_step: 30 }, b: { first_step: 20, last_step: "x" } } },
  });

  it("uses each layer's own span when the evidence has one (a server without covers)", () => {
    expect(findingSpans(f)).toEqual(new Map([["a", [[10n, 30n]]], ["b", [[10n, 160n]]], ["c", [[10n, 160n]]]]));
  });

  it("covers exactly the steps the server says, per layer, healthy steps between spans left out", () => {
    const covered = finding({
      ...f,
      covers: new Map([["a", [[7n, 8n], [15n, 15n]]], ["b", [[9n, 9n]]], ["c", []]]),
    });
    // A layer the finding names but covers nowhere (a comparison layer) gets no outline.
    expect(findingSpans(covered)).toEqual(new Map([["a", [[7n, 8n], [15n, 15n]]], ["b", [[9n, 9n]]]]));
    expect(spansText([[7n, 8n], [15n, 15n], [1200n, 3400n]])).toBe("steps 7 to 8, 15 and 1,200 to 3,400");
    expect(spansText([[15n, 15n]])).toBe("step 15");
    expect(spansText([[1n, 1n], [3n, 3n], [5n, 5n]], 2)).toBe("steps 1, 3 and 1 more");
    const periodic = finding({ kind: "periodic_spikes", covers: new Map([["loss", [[35n, 35n], [70n, 70n], [105n, 105n]]]]) });
    expect(spikeSteps(periodic, "loss")).toEqual([35n, 70n, 105n]);
  });

  it("names a cause in words", () => {
    expect(causeText("learning_rate_too_high")).toBe("Likely cause: learning rate too high");
    expect(causeText("dead_relu")).toBe("Likely cause: dying ReLUs");
    expect(causeText("learning_rate_jump")).toBe("Likely cause: learning-rate jump");
    expect(causeText("some_new_cause")).toBe("Likely cause: some new cause");
  });

  it("reads steps past 2^53 exactly from the server's decimal twins", () => {
    const big = finding({
      kind: "exploding_gradients", layers: ["a"], first_step: BIG, last_step: BIG + 4n,
      evidence: { layers: { a: { first_step: 1152921504606847000, first_step_text: "1152921504606846977",
                                 last_step: 1152921504606847000, last_step_text: "1152921504606846979" } } },
    });
    expect(findingSpans(big).get("a")).toEqual([[BIG + 1n, BIG + 3n]]);
    const spikes = finding({ kind: "spike", evidence: { layers: { a: { spike_steps: [1, 2], spike_steps_text: ["1152921504606846977", "1152921504606846978"] } } } });
    expect(spikeSteps(spikes, "a")).toEqual([BIG + 1n, BIG + 2n]);
    const one = finding({ kind: "spike", evidence: { layers: { a: { step: 1152921504606847000, step_text: "1152921504606846977" } } } });
    expect(spikeSteps(one, "a")).toEqual([BIG + 1n]);
  });

  it("lists spike steps per layer", () => {
    const p = finding({ kind: "periodic_spikes", layers: ["a"], evidence: { layers: { a: { spike_steps: [20, 40, "x"] } } } });
    expect(spikeSteps(p, "a")).toEqual([20n, 40n]);
    expect(spikeSteps(finding({ first_step: 7n, evidence: { layers: { a: { step: 7 } } } }), "a")).toEqual([7n]);
    expect(spikeSteps(f, "a")).toEqual([]);
  });

  it("finds the findings of a layer and role; no role means any role", () => {
    const fs = [f, finding({ layers: ["a"], role: "weight" }), finding({ layers: ["a"], role: null })];
    expect(findingsFor(fs, "a", "gradient")).toEqual([fs[0], fs[2]]);
    expect(findingsFor(fs, "z", "gradient")).toEqual([]);
  });

  it("has a stable id and readable labels", () => {
    expect(findingId(f)).toBe("exploding_gradients.gradient.10.a");
    expect(kindLabel("dead_units")).toBe("Dead units");
    expect(kindLabel("new_kind")).toBe("new kind");
    expect(kindMetric("exploding_gradients", "gradient")).toBe("max_abs");
    expect(kindMetric(null, "activation")).toBe("zero_fraction");
  });
});

describe("export", () => {
  it("escapes CSV fields", () => {
    expect(csvCell("plain")).toBe("plain");
    expect(csvCell('say "hi", ok')).toBe('"say ""hi"", ok"');
    expect(csvCell("two\nlines")).toBe('"two\nlines"');
    expect(csvCell(null)).toBe("");
    expect(csvCell(3.5)).toBe("3.5");
    expect(csvCell(-2)).toBe("-2");
    expect(csvCell(Number.NaN)).toBe("");
  });

  it("neutralises spreadsheet formulas in text", () => {
    expect(csvCell("=HYPERLINK(\"x\")")).toBe("\"'=HYPERLINK(\"\"x\"\")\"");
    expect(csvCell("+1")).toBe("'+1");
    expect(csvCell("@sum")).toBe("'@sum");
    expect(csvCell("-x")).toBe("'-x");
  });

  it("writes one header and one row per finding", () => {
    const csv = findingsCsv([
      finding({ layers: ["a,b", "<img src=x onerror=alert(1)>"], message: 'x "y"', period: 20, artefact: true }),
    ]);
    const lines = csv.trimEnd().split("\r\n");
    expect(lines[0]).toBe(CSV_COLUMNS.join(","));
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('"a,b; <img src=x onerror=alert(1)>"');
    expect(lines[1]).toContain('"x ""y"""');
    expect(lines[1]).toContain(",20,true,");
  });

  it("writes JSON that reads back", () => {
    const fs = [finding({ kind: "dead_units" })];
    const back = JSON.parse(findingsJson("R", fs));
    expect(back.findings[0].kind).toBe("dead_units");
    expect(back.findings[0].first_step).toBe("0");
  });

  it("exports steps past 2^53 exactly", () => {
    const fs = [finding({ first_step: BIG + 1n, last_step: BIG + 3n })];
    expect(JSON.parse(findingsJson("R", fs)).findings[0]).toMatchObject({ first_step: "1152921504606846977", last_step: "1152921504606846979" });
    expect(findingsCsv(fs)).toContain(",1152921504606846977,1152921504606846979,");
    expect(csvCell(-5n)).toBe("-5");
  });

  it("builds safe file names", () => {
    expect(safeFileName("gradhealth", "../runs/a b", "weight")).toBe("gradhealth-_runs_a_b-weight");
    expect(safeFileName("..")).toBe("gradhealth");
  });
});

describe("findingSpans by role", () => {
  it("outlines a finding gathered from several roles at the shown role's own steps", () => {
    const [f] = parseFindings({
      findings: [
        {
          kind: "nonfinite",
          severity: "critical",
          layers: ["fc1.weight"],
          first_step: 5,
          last_step: 9,
          role: null,
          evidence: {},
          covers: { "fc1.weight": [[5, 9]] },
          covers_by_role: { gradient: { "fc1.weight": [[5, 9]] }, weight: { "fc1.weight": [[6, 9]] } },
          covers_by_role_text: { gradient: { "fc1.weight": [["5", "9"]] }, weight: { "fc1.weight": [["6", "9"]] } },
        },
      ],
    }).findings;
    expect(findingSpans(f, "weight").get("fc1.weight")).toEqual([[6n, 9n]]);
    expect(findingSpans(f, "gradient").get("fc1.weight")).toEqual([[5n, 9n]]);
    // A role the finding has no rows in, or none given: the layer's union.
    expect(findingSpans(f).get("fc1.weight")).toEqual([[5n, 9n]]);
    expect(findingSpans(f, "activation").get("fc1.weight")).toEqual([[5n, 9n]]);
  });
});

describe("findingCell", () => {
  const layers = ["a", "b", "c"];
  const f = finding({
    kind: "exploding_gradients", layers: ["c", "b"], first_step: 20n, last_step: 60n,
    covers: new Map([["b", [[40n, 60n]]], ["c", [[20n, 30n], [50n, 50n]]]]) as Finding["covers"],
  });

  it("moves a panel on a layer the finding leaves out to its first covered layer and step, in model order", () => {
    expect(findingCell(f, "gradient", layers, { layer: "a", step: 40n })).toEqual({ layer: "b", step: 40n });
    expect(findingCell(f, "gradient", layers, null)).toEqual({ layer: "b", step: 40n });
  });

  it("keeps a covered layer, and its step when the finding covers it there", () => {
    expect(findingCell(f, "gradient", layers, { layer: "c", step: 50n })).toEqual({ layer: "c", step: 50n });
    expect(findingCell(f, "gradient", layers, { layer: "c", step: 40n })).toEqual({ layer: "c", step: 20n });
  });

  it("is null when the finding covers no layer of the role", () => {
    const loss = finding({ kind: "loss_spike", layers: ["loss"], role: null, covers: new Map([["loss", [[5n, 5n]]]]) as Finding["covers"] });
    expect(findingCell(loss, "gradient", layers, { layer: "a", step: 0n })).toBeNull();
  });
});

describe("foldNotes", () => {
  // A long ResNet run's findings, most severe first: the warnings, then one spike note per event.
  const spike = (first: bigint, last: bigint, layers: string[]): Finding =>
    finding({ kind: "spike", severity: "info", role: "gradient", first_step: first, last_step: last, layers });
  const warnings = [
    finding({ kind: "vanishing_gradients", severity: "critical", first_step: 340n, layers: ["conv1.weight"] }),
    finding({ kind: "update_ratio", severity: "warn", role: "weight", first_step: 0n, layers: ["conv1.weight"] }),
    finding({ kind: "update_ratio", severity: "warn", role: "weight", first_step: 110n, layers: ["fc.weight"] }),
  ];
  const spikes = [
    spike(1n, 1n, ["layer1.2.bn3.bias", "layer2.2.conv2.weight"]),
    spike(180n, 180n, ["conv1.weight", "layer3.5.bn2.weight"]),
    spike(220n, 240n, ["conv1.weight", "layer3.5.bn2.weight", "layer2.1.bn3.weight"]),
    spike(740n, 740n, ["layer3.5.bn2.weight"]),
  ];
  const dead = finding({ kind: "dead_units", severity: "info", role: "activation", layers: ["relu", "layer1.0.relu[1]"] });
  const lossSpike = finding({ kind: "spike", severity: "info", role: null, first_step: 14n, layers: ["loss"] });
  const caused = { ...spike(1503n, 1510n, ["fc.weight"]), cause: "learning_rate_jump" };
  const late = finding({ kind: "vanishing_gradients", severity: "info", first_step: 2960n, layers: ["fc.bias"] });
  const listed = [...warnings, dead, spikes[0], lossSpike, spikes[1], spikes[2], spikes[3], caused, late];

  it("folds the notes of one kind and role into one entry where the first of them is", () => {
    const entries = foldNotes(listed);
    expect(entries.map((e) => e.length)).toEqual([1, 1, 1, 1, 4, 1, 1, 1]);
    expect(entries[4]).toEqual(spikes);
    // The warnings stay first and alone; every finding is listed once.
    expect(entries.slice(0, 3).map((e) => e[0])).toEqual(warnings);
    expect(entries.flat()).toHaveLength(listed.length);
  });

  it("keeps apart notes of another role, a note that names its cause, and warnings of a kind that is not one event each", () => {
    const entries = foldNotes(listed);
    expect(entries.find((e) => e.includes(lossSpike))).toEqual([lossSpike]);
    expect(entries.find((e) => e.includes(caused))).toEqual([caused]);
    const twoWarnings = foldNotes(warnings.slice(1));
    expect(twoWarnings.map((e) => e.length)).toEqual([1, 1]);
  });

  it("keeps apart notes whose advice differs: an epoch's mean loss and one batch's", () => {
    const epochMean = { ...lossSpike, first_step: 28n, layers: ["epoch_loss"], advice: "an epoch's average" };
    const again = { ...epochMean, first_step: 42n };
    expect(foldNotes([lossSpike, epochMean, again]).map((e) => e.length)).toEqual([1, 2]);
  });

  it("keeps notes of two runs apart", () => {
    const other = { ...spikes[1], run: "other" };
    expect(foldNotes([spikes[0], other]).map((e) => e.length)).toEqual([1, 1]);
  });

  // The run's layers in model order, as the heatmap draws them.
  const model = ["conv1.weight", "layer1.2.bn3.bias", "layer2.1.bn3.weight", "layer2.2.conv2.weight", "layer3.5.bn2.weight"];

  it("says where the folded notes are: their steps, and their layers in model order", () => {
    expect(foldSteps(spikes)).toBe("steps 1, 180, 220 to 240 and 740");
    expect(foldSteps([...spikes, ...spikes], 3)).toBe("steps 1, 180, 220 to 240 and 5 more");
    // layer3.5.bn2.weight is in most of them, but comes last in the model.
    expect(foldLayers(spikes, model)).toEqual({ names: ["conv1.weight", "layer1.2.bn3.bias", "layer2.1.bn3.weight"], more: 2 });
    expect(foldLayers(spikes.slice(3), model)).toEqual({ names: ["layer3.5.bn2.weight"], more: 0 });
    // A name the model does not hold (a scalar) comes after its layers.
    expect(foldLayers([lossSpike, spikes[3]], model)).toEqual({ names: ["layer3.5.bn2.weight", "loss"], more: 0 });
  });

  // resnet101_noise_lr20's warning spikes: two of one layer, one of another.
  const warnSpike = (step: bigint, layer: string): Finding =>
    finding({ kind: "spike", severity: "warn", role: "gradient", first_step: step, last_step: step, layers: [layer] });
  const warnSpikes = [warnSpike(110n, "layer4.1.bn2.bias"), warnSpike(150n, "layer4.1.bn2.bias"), warnSpike(300n, "layer4.2.bn1.bias")];

  it("folds repeated warnings of a kind that gives one finding per event, apart from its notes", () => {
    const entries = foldNotes([...warnings, ...warnSpikes, spikes[0], spikes[1]]);
    expect(entries.map((e) => e.length)).toEqual([1, 1, 1, 3, 2]);
    expect(entries[3]).toEqual(warnSpikes);
    // A critical spike is not folded into the warnings.
    const critical = { ...warnSpikes[2], severity: "critical" };
    expect(foldNotes([...warnSpikes.slice(0, 2), critical]).map((e) => e.length)).toEqual([2, 1]);
  });

  it("names every layer of folded warnings, in model order", () => {
    const order = ["conv1.weight", "layer4.1.bn2.bias", "layer4.2.bn1.bias", "fc.weight"];
    const many = [...warnSpikes, warnSpike(400n, "fc.weight"), warnSpike(500n, "conv1.weight")];
    expect(foldLayers(many, order)).toEqual({ names: ["conv1.weight", "layer4.1.bn2.bias", "layer4.2.bn1.bias", "fc.weight"], more: 0 });
  });
});

describe("a finding told in its own step axis", () => {
  // Keras' validation run: epoch_loss counts epochs 0-29, written about iterations 7 to 210.
  const sent = {
    run: "validation", kind: "no_progress", severity: "warn", layers: ["epoch_loss"], first_step: 7, last_step: 210,
    first_step_text: "7", last_step_text: "210", message: "m", advice: "a", evidence: {}, role: null,
    axis: { unit: "epoch", other: true, first_step: 0, last_step: 29, first_step_text: "0", last_step_text: "29" },
  };

  it("heads its card with its own steps and their unit, never the layers' steps it was placed at", () => {
    const [f] = parseFindings({ findings: [sent] }).findings;
    expect(f.axis).toEqual({ unit: "epoch", other: true, first_step: 0n, last_step: 29n });
    expect(findingStepsText(f)).toBe("epochs 0 to 29");
    expect(findingStepsText({ ...f, axis: { ...f.axis!, last_step: 0n } })).toBe("epoch 0");
    // Another axis whose unit no name tells still says the steps are not the layers'.
    expect(findingStepsText({ ...f, axis: { ...f.axis!, unit: "step" } })).toBe("steps 0 to 29 of its own axis");
    // A finding on the layers' axis, or from a server that sends no axis: the layers' steps.
    const [plain] = parseFindings({ findings: [{ ...sent, axis: undefined }] }).findings;
    expect(plain.axis).toBeUndefined();
    expect(findingStepsText(plain)).toBe("steps 7 to 210");
  });

  it("lists folded notes of one axis at their own steps, and mixed ones at the layers'", () => {
    const [f] = parseFindings({ findings: [sent] }).findings;
    const spike = (own: bigint, at: bigint): Finding =>
      ({ ...f, kind: "spike", severity: "info", first_step: at, last_step: at,
        axis: { unit: "epoch", other: true, first_step: own, last_step: own } });
    expect(foldSteps([spike(3n, 28n), spike(5n, 42n)])).toBe("epochs 3 and 5");
    expect(foldSteps([spike(3n, 28n), { ...spike(5n, 42n), axis: undefined }])).toBe("steps 28 and 42");
  });
});
