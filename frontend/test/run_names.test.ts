import { describe, expect, it } from "vitest";
import { sortRuns } from "../src/panels";
import { orderRows } from "../src/rows";
import { compareRunNames, nameBreaks, widestPiece } from "../src/run_names";

describe("run names", () => {
  it("read <digits>.<digits> as one decimal number", () => {
    const runs = ["lr_0.001_sgd", "lr_1_adam", "lr_0.01_adam", "lr_0.3_adam", "lr_0.001_adam", "LR_0.01_sgd", "lr_10_adam"];
    expect([...runs].sort(compareRunNames)).toEqual([
      "lr_0.001_adam", "lr_0.001_sgd", "lr_0.01_adam", "LR_0.01_sgd", "lr_0.3_adam", "lr_1_adam", "lr_10_adam"]);
    // Exact, however long the digits; trailing zeros of a fraction change nothing but the tie-break.
    expect(compareRunNames("a_12345678901234567891", "a_12345678901234567890")).toBeGreaterThan(0);
    expect(compareRunNames("lr_0.05", "lr_0.5")).toBeLessThan(0);
    expect(compareRunNames("lr_0.10", "lr_0.1")).not.toBe(0);
    expect(["run_10", "run_2", "run_1.5/seed_20", "run_1.5/seed_3"].sort(compareRunNames)).toEqual([
      "run_1.5/seed_3", "run_1.5/seed_20", "run_2", "run_10"]);
  });

  it("leave layer rows in their natural order: layer4.10 after layer4.9", () => {
    const layers = ["layer4.10", "layer4.9", "layer4.1"];
    expect(orderRows(layers, "", "name").map((i) => layers[i])).toEqual(["layer4.1", "layer4.9", "layer4.10"]);
  });

  it("order the run list by name, and worst first on request", () => {
    const run = (name: string, worst: string | null) =>
      ({ run: name, worst_severity: worst, worst_status: worst ?? "ok", finding_counts: worst ? { [worst]: 1 } : {} });
    const runs = [run("sweep/lr_0.01_adam/train", null), run("sweep/lr_1_sgd/train", "critical"), run("sweep/lr_0.001_sgd/train", null),
      run("sweep/lr_0.001_adam/train", "warn")];
    expect(sortRuns(runs, "name").map((r) => r.run)).toEqual([
      "sweep/lr_0.001_adam/train", "sweep/lr_0.001_sgd/train", "sweep/lr_0.01_adam/train", "sweep/lr_1_sgd/train"]);
    expect(sortRuns(runs, "worst").map((r) => r.run)).toEqual([
      "sweep/lr_1_sgd/train", "sweep/lr_0.001_adam/train", "sweep/lr_0.01_adam/train", "sweep/lr_0.001_sgd/train"]);
  });
});

describe("run name breaks", () => {
  it("cut a name after its separators, the pieces joined being the name", () => {
    expect(nameBreaks("resnet101_noise_lr20")).toEqual(["resnet101_", "noise_", "lr20"]);
    expect(nameBreaks("sweep/lr_0.01-bs=64,seed_3")).toEqual(["sweep/", "lr_", "0.01-", "bs=", "64,", "seed_", "3"]);
    expect(nameBreaks("resnet.cifar10_wd_1.5e-4")).toEqual(["resnet.", "cifar10_", "wd_", "1.5e-4"]);
    expect(nameBreaks("train")).toEqual(["train"]);
    // A run of separators is one break, after its last: no line starts with "_" or "/".
    expect(nameBreaks("a__b_")).toEqual(["a__", "b_"]);
    expect(nameBreaks("wenjunpku__learning-tensorflow/iris_model")).toEqual(
      ["wenjunpku__", "learning-", "tensorflow/", "iris_", "model"]);
    expect(nameBreaks("run._x/_y")).toEqual(["run._", "x/_", "y"]);
    for (const name of ["lr_1e-3", "resnet101_noise_lr20", "x/y/z", "", "<img src=x>"]) expect(nameBreaks(name).join("")).toBe(name);
  });
});

describe("run name signs", () => {
  it("keep a hyphen before a digit inside the number: an exponent's or a sign's, never a break", () => {
    expect(nameBreaks("lr_1e-3")).toEqual(["lr_", "1e-3"]);
    expect(nameBreaks("lr_1E-3_bs-64")).toEqual(["lr_", "1E-3_", "bs-", "64"]);
    expect(nameBreaks("shift_-1")).toEqual(["shift_", "-1"]);
    expect(nameBreaks("lr=-0.1")).toEqual(["lr=", "-0.1"]);
    // Between words, or after a name's letters, a hyphen still separates.
    expect(nameBreaks("bs-64")).toEqual(["bs-", "64"]);
    expect(nameBreaks("a-b")).toEqual(["a-", "b"]);
    expect(widestPiece("lr_1e-3")).toBe(4);
  });
});

describe("run name width", () => {
  it("is its longest piece, so no piece need break beside the badge", () => {
    expect(widestPiece("wenjunpku__learning-tensorflow/iris_model")).toBe("wenjunpku__".length);
    expect(widestPiece("train")).toBe(5);
    expect(widestPiece("")).toBe(0);
  });
});
