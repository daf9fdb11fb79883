import { describe, expect, it } from "vitest";
import { countsText, foldedText, groupRuns, growingRuns, roleToOpen, runBadge, runTitle, runToShow, worstRun } from "../src/panels";

const run = (name: string, worst: "info" | "warn" | "critical" | null, status = "ok") => ({
  run: name, worst_severity: worst, worst_status: status,
});

describe("run badges", () => {
  it("names each run's worst finding", () => {
    expect(runBadge(run("a", "critical")).text).toBe("critical");
    expect(runBadge(run("a", null)).text).toBe("healthy");
    expect(runBadge(run("a", null, "no_data")).text).toBe("no data");
    expect(runBadge(run("a", "warn")).rank).toBeGreaterThan(runBadge(run("a", "info")).rank);
  });

  it("calls a run with notes only healthy, as the sweep does, ranked above one without findings", () => {
    expect(runBadge(run("a", "info"))).toMatchObject({ text: "healthy (notes only)", cls: "gh-status-ok" });
    expect(runBadge(run("a", "info")).rank).toBeGreaterThan(runBadge(run("a", null)).rank);
    expect(runBadge({ ...run("a", "info"), gradients_judged: false }).text).toBe("no warnings (notes only)");
  });

  it("calls a run without gradients 'no warnings', never healthy", () => {
    expect(runBadge({ ...run("a", null), gradients_judged: false }).text).toBe("no warnings");
    expect(runBadge({ ...run("a", null), gradients_judged: true }).text).toBe("healthy");
    expect(runBadge({ ...run("a", "warn"), gradients_judged: false }).text).toBe("warn");
  });

  it("calls a run whose steps sampling dropped 'no warnings', never healthy", () => {
    const sampling = { rows: 8, kept_min: 500, kept_max: 500, logged: 2993, logged_at_least: true, plugins: ["histograms"], flag: "", message: "" };
    expect(runBadge({ ...run("a", null), sampling } as never).text).toBe("no warnings");
    expect(runBadge({ ...run("a", null), sampling: null }).text).toBe("healthy");
    expect(runBadge({ ...run("a", "critical"), sampling } as never).text).toBe("critical");
  });

  it("says the server's verdict word, the one the CLI prints, never a word of its own", () => {
    // A validation half with a note: the fields alone once read "no data (notes only)".
    const half = { ...run("x/validation", "info", "no_data"), gradients_judged: false, verdict_word: "scalars only (notes only)" };
    expect(runBadge(half).text).toBe("scalars only (notes only)");
    expect(runBadge({ ...run("a", "warn"), verdict_word: "warn" })).toMatchObject({ text: "warn", cls: "gh-sev-warn" });
    expect(runBadge({ ...run("a", null), verdict_word: "no warnings" })).toMatchObject({ text: "no warnings", cls: "gh-status-ok" });
    expect(runBadge({ ...run("a", null), verdict_word: "healthy" })).toEqual(runBadge(run("a", null)));
    expect(runBadge({ ...run("a", "info"), verdict_word: "healthy (notes only)" })).toEqual(runBadge(run("a", "info")));
    expect(runBadge({ ...run("a", null), verdict_word: "healthy", growing: true }).text).toBe("healthy so far");
  });

  it("never gives a run where nothing was judged the green of a run judged clean", () => {
    // Rows of an unknown role only (tensorboardX `other` histograms), no loss: no rule could run.
    const unjudged = { ...run("hist", null), gradients_judged: false, verdict_word: "not judged" };
    expect(runBadge(unjudged)).toEqual({ text: "not judged", cls: "gh-status-no_data", rank: 0 });
    const scalars = { ...run("x/validation", null, "no_data"), verdict_word: "scalars only" };
    expect(runBadge(scalars)).toEqual({ text: "scalars only", cls: "gh-status-no_data", rank: 0 });
    expect(runBadge(scalars).rank).toBeLessThan(runBadge({ ...run("a", null), verdict_word: "no warnings" }).rank);
  });

  it("heads the folded runs with their shared word", () => {
    const scalars = (name: string) => ({ ...run(name, null, "no_data"), verdict_word: "scalars only" });
    expect(foldedText([scalars("a/validation"), scalars("b/validation")])).toBe("scalars only (2)");
    expect(foldedText([scalars("a/validation"), { ...run("c", null, "no_data"), verdict_word: "not judged" }])).toBe("no layer data (2)");
  });

  it("opens the sickest run first", () => {
    const runs = [run("a", null), run("b", "warn"), run("c", "critical"), run("d", "critical")];
    expect(worstRun(runs as never)?.run).toBe("c");
    expect(worstRun([])).toBeUndefined();
  });

  it("marks a run the server could not analyse as failed, with its error, and opens another first", () => {
    const error = "run 'b' could not be analysed (ValueError: x); the TensorBoard log has the details";
    const failed = { ...run("b", null, "no_data"), error };
    expect(runBadge(failed)).toEqual({ text: "failed", cls: "gh-run-failed", rank: 0 });
    expect(runBadge({ ...run("a", null), error: null }).text).toBe("healthy");
    expect(worstRun([failed, run("a", null)] as never)?.run).toBe("a");
    expect(runTitle({ ...failed, finding_counts: {}, last_step: null })).toBe(`b\n${error}`);
    expect(runTitle({ run: "a", finding_counts: { warn: 2 }, last_step: 9n, error: null })).toBe("a\n2 warn\nlast step 9");
    // The badge's word said as the report says it, under the run's name.
    const verdict = "no warnings (no gradients logged: exploding and vanishing gradients not judged)";
    expect(runTitle({ run: "a", finding_counts: {}, last_step: 9n, verdict })).toBe(`a\n${verdict}\nno findings\nlast step 9`);
  });

  it("summarises finding counts", () => {
    expect(countsText({ critical: 1, warn: 0, info: 6 })).toBe("1 critical, 6 info");
    expect(countsText({})).toBe("no findings");
  });

  it("folds runs with no data under one entry, keeping failed runs listed", () => {
    const runs = [
      { run: "train", worst_status: "ok", error: null },
      { run: "validation", worst_status: "no_data", error: null },
      { run: "broken", worst_status: "no_data", error: "could not be read" },
      { run: "nan_validation", worst_status: "no_data", error: null, worst_severity: "critical" as const },
    ];
    const { listed, noData } = groupRuns(runs);
    expect(listed.map((r) => r.run)).toEqual(["train", "broken", "nan_validation"]);
    expect(noData.map((r) => r.run)).toEqual(["validation"]);
  });
});

describe("runs still growing", () => {
  const listed = (name: string, steps: number, last: bigint | null) => ({ run: name, steps_kept: steps, last_step: last });

  it("counts a run whose kept steps or last step changed since the previous list", () => {
    const before = [listed("done", 50, 49n), listed("reading", 20, 19n), listed("sampled", 10, 90n)];
    const after = [listed("done", 50, 49n), listed("reading", 35, 34n), listed("sampled", 10, 99n), listed("new", 5, 4n)];
    // A run new to the list has no earlier count to compare with.
    expect([...growingRuns(before, after)].sort()).toEqual(["reading", "sampled"]);
    expect(growingRuns([], after).size).toBe(0);
  });

  it("gives a growing run's verdict as so far, never a plain healthy", () => {
    expect(runBadge({ ...run("a", null), growing: true }).text).toBe("healthy so far");
    expect(runBadge({ ...run("a", "warn"), growing: true })).toMatchObject({ text: "warn so far", cls: "gh-sev-warn" });
    expect(runBadge({ ...run("a", "info"), growing: true }).text).toBe("healthy (notes only) so far");
    expect(runBadge({ ...run("a", null), growing: false }).text).toBe("healthy");
    expect(runBadge({ ...run("a", null), growing: true, error: "unreadable" }).text).toBe("failed");
    expect(runTitle({ run: "a", finding_counts: {}, last_step: 9n, growing: true })).toContain("still growing");
  });
});

describe("the run to show", () => {
  const runs = [
    { ...run("demo/sweep/lr_1_sgd/validation", "critical"), roles: [], worst_role: null },
    { ...run("demo/healthy", null), roles: [], worst_role: null },
  ] as never[];

  it("keeps the run a link names while it is not listed, and says so once past the patience", () => {
    expect(runToShow(runs, "nu3/resnet101_lrjump", 8_000, 60_000)).toEqual({ waitFor: "nu3/resnet101_lrjump", overdue: false });
    expect(runToShow(runs, "nu3/resnet101_lrjump", 60_000, 60_000)).toEqual({ waitFor: "nu3/resnet101_lrjump", overdue: true });
    expect(runToShow([], "nu3/resnet101_lrjump", 0, 60_000)).toEqual({ waitFor: "nu3/resnet101_lrjump", overdue: false });
  });

  it("opens the named run once listed, and the worst run when none is named", () => {
    expect(runToShow(runs, "demo/healthy", 0, 60_000)).toEqual({ open: "demo/healthy" });
    expect(runToShow(runs, "", 0, 60_000)).toEqual({ open: "demo/sweep/lr_1_sgd/validation" });
    expect(runToShow([], "", 0, 60_000)).toEqual({ open: "" });
  });
});

describe("the role a run opens on", () => {
  const run = { roles: ["gradient", "activation", "weight"], worst_role: "gradient" };

  it("is the role asked for when the run has it, else the role of its worst finding", () => {
    expect(roleToOpen(run, "weight")).toBe("weight");
    // Another run's role (the one the list was on) is no reason to stay on it.
    expect(roleToOpen(run, "")).toBe("gradient");
    expect(roleToOpen(run, "update")).toBe("gradient");
    expect(roleToOpen({ ...run, worst_role: null }, "")).toBe("");
  });
});
