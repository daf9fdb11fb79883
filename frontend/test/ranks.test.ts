import { describe, expect, it } from "vitest";
import { parseTraining, rankPartner } from "../src/ranks";
import type { Training } from "../src/ranks";

const training = (runs: string[], rank: string): Training => ({
  name: "exp/rank*", rank, ranks: runs.map((r) => r.split("/")[1]), runs,
});

const RANKS = ["exp/rank0", "exp/rank1", "exp/rank2"];

const listed = (worst: Record<string, "info" | "warn" | "critical" | null> = {}) =>
  RANKS.map((run) => ({ run, training: training(RANKS, run.split("/")[1]), worst_severity: worst[run] ?? null }));

describe("ranks of one training", () => {
  it("reads the runs route's training, and nothing else as one", () => {
    const t = { name: "exp/rank*", rank: "rank1", ranks: ["rank0", "rank1"], runs: ["exp/rank0", "exp/rank1"] };
    expect(parseTraining(t)).toEqual(t);
    expect(parseTraining(null)).toBeNull();
    expect(parseTraining({ ...t, runs: ["exp/rank0"] })).toBeNull();
    expect(parseTraining({ ...t, ranks: [0, 1] })).toBeNull();
    expect(parseTraining({ ...t, rank: undefined })).toBeNull();
  });

  it("puts a rank beside the lowest rank, which a diverging rank is judged against", () => {
    expect(rankPartner(listed(), "exp/rank2")).toBe("exp/rank0");
    expect(rankPartner(listed(), "exp/rank1")).toBe("exp/rank0");
  });

  it("puts the lowest rank beside the rank with the worst finding, else the next rank", () => {
    expect(rankPartner(listed(), "exp/rank0")).toBe("exp/rank1");
    expect(rankPartner(listed({ "exp/rank2": "warn", "exp/rank1": "info" }), "exp/rank0")).toBe("exp/rank2");
  });

  it("offers nothing for a run that is no rank, or whose other ranks are not listed", () => {
    expect(rankPartner([{ run: "train", training: null, worst_severity: null }], "train")).toBe("");
    expect(rankPartner(listed().slice(0, 1), "exp/rank0")).toBe("");
    expect(rankPartner(listed(), "elsewhere")).toBe("");
    // The lowest rank gone from the list: a higher rank is put beside the next one listed.
    expect(rankPartner(listed().slice(1), "exp/rank2")).toBe("exp/rank1");
  });
});
