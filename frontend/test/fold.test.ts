import { describe, expect, it } from "vitest";
import type { BlockRow, Heatmap } from "../src/api";
import {
  AUTO_FOLD,
  foldButtonText,
  anyFolded,
  foldAll,
  blockOfRow,
  decodeFold,
  encodeFold,
  foldedTooltipLines,
  foldHeatmap,
  foldOf,
  foldsByItself,
  isFolded,
  labelParts,
  layerAt,
  layerToOpen,
  rowMembers,
  runRowLabels,
  sourceLayers,
  toggleBlock,
  unfoldBlock,
  worstRows,
} from "../src/fold";
import { LABEL_ROW_H, ROW_MIN_H, rowHeight, rowLabelWidth } from "../src/layout";
import { orderRows } from "../src/rows";

const NAMES = ["no_data", "ok", "warn", "critical"];
const [NO, OK, WARN, CRIT] = [0, 1, 2, 3];

function heatmap(over: Partial<Heatmap> = {}): Heatmap {
  // Rows: embed (alone), h.0.attn, h.0.mlp, h.1.attn, head; block h.0 has two rows, h.1 one, out of order below.
  return {
    run: "r", role: "gradient", metric: "health",
    layers: ["embed", "h.0.attn", "h.1.attn", "h.0.mlp", "h.1.mlp"],
    blocks: [null, "h.0", "h.1", "h.0", "h.1"],
    steps: [0n, 10n, 20n],
    values: [
      [0.9, 0.9, 0.9],
      [0.9, 0.4, null],
      [0.8, 0.8, 0.8],
      [0.7, 0.1, 0.6],
      [0.95, 0.2, 0.3],
    ],
    status: [
      [OK, OK, OK],
      [OK, WARN, NO],
      [OK, OK, OK],
      [OK, CRIT, OK],
      [OK, CRIT, WARN],
    ],
    status_names: NAMES,
    quality: "exact", qualities: ["exact"], finiteOnlyCells: false, notJudgedCells: false, scale: "linear",
    rules: [
      ["", "", ""],
      ["", "w", null],
      ["", "", ""],
      ["", "c1", ""],
      ["", "c2", "w2"],
    ],
    quality_cells: [[1, 1, 1], [1, 2, 0], [1, 1, 1], [1, 1, 1], [1, 2, 2]],
    quality_names: ["no_data", "exact", "estimated"],
    decided_by: ["convention", "convention", "convention", "convention", "name"],
    incomplete: null,
    binned: false, stepsLast: null, stepOffsets: null, windowSteps: 3, stepsTotal: 3,
    loaded: null, rowWorst: null, blockNames: [], blockWorst: new Map(), blockRows: new Map(), valueRange: null,
    ...over,
  };
}

describe("fold state in the URL", () => {
  it("round-trips a mode and its exceptions; auto is left out", () => {
    const f = { mode: "all" as const, except: ["transformer.h.3", "layer4.1"] };
    expect(encodeFold(f)).toBe("all|transformer.h.3|layer4.1");
    expect(decodeFold(encodeFold(f))).toEqual(f);
    expect(decodeFold("none")).toEqual({ mode: "none", except: [] });
    expect(encodeFold(AUTO_FOLD)).toBeUndefined();
  });

  it("writes numbered blocks as ranges, so a deep model's link stays short; older links still open", () => {
    const gpt2 = Array.from({ length: 24 }, (_, i) => `transformer.h.${i}`);
    const some = { mode: "all" as const, except: [...gpt2.slice(0, 12), "head", "layer4.1", "layer4.2", "b.07"] };
    expect(encodeFold(some)).toBe("all|head|transformer.h.0~11|layer4.1~2|b.07");
    expect(new Set(decodeFold(encodeFold(some)).except)).toEqual(new Set(some.except));
    const hundreds = Array.from({ length: 1000 }, (_, i) => `model.layers.${i}`);
    expect(encodeFold({ mode: "none", except: hundreds.filter((_, i) => i !== 500) })).toBe("none|model.layers.0~499|model.layers.501~999");
    // As links listed blocks before: one by one.
    expect(decodeFold("all|transformer.h.3|transformer.h.4")).toEqual({ mode: "all", except: ["transformer.h.3", "transformer.h.4"] });
    // Not a range: kept as a name.
    expect(decodeFold("all|a~b|h.5~2|h.1~99999999").except).toEqual(["a~b", "h.5~2", "h.1~99999999"]);
  });

  it("reads anything malformed as automatic", () => {
    expect(decodeFold(undefined)).toEqual(AUTO_FOLD);
    expect(decodeFold("sideways|a")).toEqual(AUTO_FOLD);
    expect(decodeFold("all||a|a")).toEqual({ mode: "all", except: ["a"] });
  });
});

describe("which blocks fold", () => {
  it("folds by itself only when the rows do not fit at the smallest row height", () => {
    const h = 100 * ROW_MIN_H;
    expect(foldsByItself(100, h)).toBe(false);
    expect(foldsByItself(101, h)).toBe(true);
  });

  it("folds every block, all but the exceptions, or only the exceptions", () => {
    expect(isFolded(AUTO_FOLD, "a", true)).toBe(true);
    expect(isFolded(AUTO_FOLD, "a", false)).toBe(false);
    expect(isFolded({ mode: "all", except: ["a"] }, "a", false)).toBe(false);
    expect(isFolded({ mode: "all", except: ["a"] }, "b", false)).toBe(true);
    expect(isFolded({ mode: "none", except: ["a"] }, "a", true)).toBe(true);
    expect(isFolded({ mode: "none", except: ["a"] }, "b", true)).toBe(false);
  });

  it("a click turns automatic folding into what it showed, with that block changed, and a second click undoes it", () => {
    const once = toggleBlock(AUTO_FOLD, "h.0", true);
    expect(once).toEqual({ mode: "all", except: ["h.0"] });
    expect(isFolded(once, "h.0", true)).toBe(false);
    expect(isFolded(once, "h.1", true)).toBe(true);
    expect(toggleBlock(once, "h.0", true)).toEqual({ mode: "all", except: [] });
    expect(toggleBlock(AUTO_FOLD, "h.1", false)).toEqual({ mode: "none", except: ["h.1"] });
  });

  it("never lists more than half of the run's blocks: past that, the mode flips", () => {
    const blocks = ["h.0", "h.1", "h.2", "h.3"];
    let f = toggleBlock(AUTO_FOLD, "h.0", true, blocks);
    f = toggleBlock(f, "h.1", true, blocks);
    expect(f).toEqual({ mode: "all", except: ["h.0", "h.1"] });
    f = toggleBlock(f, "h.2", true, blocks);
    expect(f).toEqual({ mode: "none", except: ["h.3"] });
    expect(blocks.map((b) => isFolded(f, b, true))).toEqual([false, false, false, true]);
    expect(toggleBlock(f, "h.3", true, blocks)).toEqual({ mode: "none", except: [] });
    expect(AUTO_FOLD.except).toEqual([]);
  });
});

describe("unfoldBlock", () => {
  it("opens a folded block and keeps every other block as it was", () => {
    const blocks = ["h.0", "h.1", "h.2", "h.3"];
    const open = unfoldBlock(AUTO_FOLD, "h.2", true, blocks);
    expect(open).toEqual({ mode: "all", except: ["h.2"] });
    expect(blocks.map((b) => isFolded(open, b, true))).toEqual([true, true, false, true]);
    // A link's own choice stays: "none" with two blocks folded loses only the one opened.
    const link = { mode: "none" as const, except: ["h.1", "h.3"] };
    expect(unfoldBlock(link, "h.3", true, blocks)).toEqual({ mode: "none", except: ["h.1"] });
  });

  it("leaves an open block's state as it is, the same object", () => {
    const link = { mode: "all" as const, except: ["h.1"] };
    expect(unfoldBlock(link, "h.1", true)).toBe(link);
    expect(unfoldBlock(AUTO_FOLD, "h.0", false)).toBe(AUTO_FOLD);
    expect(unfoldBlock({ mode: "none", except: [] }, "h.0", true)).toEqual({ mode: "none", except: [] });
  });
});

describe("worstRows", () => {
  it("takes the worst status, then the lowest score (health) or highest value (metrics), then model order", () => {
    const h = heatmap();
    // Column 0: all ok; lowest score is h.0.mlp (0.7). Column 1: two critical; h.0.mlp 0.1 < h.1.mlp 0.2.
    expect(worstRows(h, [1, 3, 4])).toEqual([3, 3, 4]);
    // A metric: the highest value among equals (column 0: h.1.mlp 0.95).
    expect(worstRows({ ...h, metric: "l2" }, [1, 3, 4])).toEqual([4, 4, 4]);
    // No data never beats data.
    expect(worstRows(h, [1, 2])).toEqual([2, 1, 2]);
  });
});

describe("foldHeatmap", () => {
  it("leaves the heatmap as it is when nothing folds", () => {
    const h = heatmap();
    expect(foldHeatmap(h, () => false)).toBe(h);
    expect(foldOf(h)).toBeUndefined();
    expect(rowMembers(h, 1)).toEqual(["h.0.attn"]);
    expect(sourceLayers(h)).toBe(h.layers);
  });

  it("draws a folded block as one row where its first member stood, showing each step's worst member", () => {
    const h = heatmap();
    const f = foldHeatmap(h, (b) => b === "h.0");
    expect(f.layers).toEqual(["embed", "h.0", "h.1.attn", "h.1.mlp"]);
    expect(f.blocks).toEqual([null, "h.0", "h.1", "h.1"]);
    expect(f.status[1]).toEqual([OK, CRIT, OK]);
    expect(f.values[1]).toEqual([0.7, 0.1, 0.6]);
    expect(f.rules[1]).toEqual(["", "c1", ""]);
    expect(f.quality_cells?.[1]).toEqual([1, 1, 1]);
    // Rows of their own are the same arrays.
    expect(f.values[2]).toBe(h.values[2]);
    expect(rowMembers(f, 1)).toEqual(["h.0.attn", "h.0.mlp"]);
    expect(rowMembers(f, 0)).toEqual(["embed"]);
    expect(sourceLayers(f)).toBe(h.layers);
  });

  it("takes a binned column's step from the member it shows", () => {
    const offsets = [[0, 0, 0], [0, 1, 0], [0, 0, 0], [0, 7, 2], [0, 0, 0]];
    const f = foldHeatmap(heatmap({ binned: true, stepOffsets: offsets }), (b) => b === "h.0");
    // h.0 is h.0.attn (row 1) and h.0.mlp (row 3); h.0.mlp is worst at every step.
    expect(f.stepOffsets?.[1]).toEqual([0, 7, 2]);
  });

  it("says which member a folded cell shows, and opens that one", () => {
    const f = foldHeatmap(heatmap(), () => true);
    expect(f.layers).toEqual(["embed", "h.0", "h.1"]);
    expect(f.status[2]).toEqual([OK, CRIT, WARN]);
    expect(layerAt(f, 2, 0)).toBe("h.1.attn");
    expect(layerAt(f, 2, 1)).toBe("h.1.mlp");
    expect(layerToOpen(f, "h.1", 20n)).toBe("h.1.mlp");
    expect(layerToOpen(f, "embed", 20n)).toBe("embed");
    expect(layerToOpen(null, "x", 0n)).toBe("x");
    const lines = foldedTooltipLines(f, 2, 1, [["layer", "h.1"], ["step", "10"]]);
    expect(lines).toEqual([["block", "h.1 (2 layers, click its name to unfold)"], ["worst layer", "h.1.mlp"], ["step", "10"]]);
    expect(foldedTooltipLines(f, 0, 1, [["layer", "embed"]])).toEqual([["layer", "embed"]]);
  });

  it("marks folded blocks and the rows of open ones, and names the block a label click toggles", () => {
    const f = foldHeatmap(heatmap(), (b) => b === "h.0");
    expect(labelParts(f, 1)).toEqual(["\u25b8 ", " (2)"]);
    expect(labelParts(f, 2)).toEqual(["\u25be ", ""]);
    expect(labelParts(f, 0)).toEqual(["", ""]);
    expect([0, 1, 2, 3].map((r) => blockOfRow(f, r))).toEqual([null, "h.0", "h.1", "h.1"]);
  });

  it("lets a filter find a folded block by the names of its members", () => {
    const f = foldHeatmap(heatmap(), () => true);
    expect(orderRows(f.layers, "mlp", "model", undefined, (r) => rowMembers(f, r))).toEqual([1, 2]);
    expect(orderRows(f.layers, "mlp", "model")).toEqual([]);
  });

  it("folds a block over the members the filter keeps only: its size, its cells and the member a click opens", () => {
    const blockRows = new Map<string, BlockRow>([["h.1", { values: [0.95, 0.2, 0.3], status: [OK, CRIT, WARN], rules: ["", "c2", "w2"], quality: null, stepOffsets: null, members: [4, 4, 4] }]]);
    const h = heatmap({ blockRows });
    const f = foldHeatmap(h, () => true, (l) => l.includes("attn"));
    expect(f.layers).toEqual(["embed", "h.0", "h.1"]);
    expect(rowMembers(f, 1)).toEqual(["h.0.attn"]);
    expect(labelParts(f, 2)).toEqual(["\u25b8 ", " (1)"]);
    // h.1's server fold names h.1.mlp, which the filter leaves out: the kept member's own cells are shown.
    expect(f.status[2]).toEqual([OK, OK, OK]);
    expect(f.values[2]).toEqual([0.8, 0.8, 0.8]);
    expect(layerAt(f, 2, 1)).toBe("h.1.attn");
    expect(layerToOpen(f, "h.1", 10n)).toBe("h.1.attn");
    expect(foldedTooltipLines(f, 2, 1, [["layer", "h.1"]])).toEqual([["block", "h.1 (1 layers, click its name to unfold)"], ["worst layer", "h.1.attn"]]);
    expect(foldOf(f)?.partial).toEqual([false, true, true]);
    // A filter keeping every member leaves the server's fold in place.
    const whole = foldHeatmap(h, () => true, (l) => l.startsWith("h."));
    expect(whole.status[2]).toEqual([OK, CRIT, WARN]);
    expect(rowMembers(whole, 2)).toEqual(["h.1.attn", "h.1.mlp"]);
  });

  it("gives a cut block's row the worst of its kept members before their cells are here", () => {
    const rowWorst = { worst: Uint8Array.from([1, 2, 1, 3, 3]), count: Uint32Array.from([3, 1, 3, 1, 1]) };
    const h = heatmap({ loaded: Uint8Array.from([1, 0, 0, 0, 0]), rowWorst, blockWorst: new Map([["h.0", [3, 1] as [number, number]], ["h.1", [3, 1] as [number, number]]]) });
    const f = foldHeatmap(h, () => true, (l) => l.includes("attn"));
    expect(Array.from(f.rowWorst?.worst ?? [])).toEqual([1, 2, 1]);
    expect(Array.from(f.loaded ?? [])).toEqual([1, 0, 0]);
  });
});

describe("the label column of a run", () => {
  it("is sized for every label the run's rows can have: it keeps its width whatever folds or which role shows", () => {
    const measure = (t: string): number => 7 * t.length;
    const h = heatmap();
    const run = [...h.layers, "a.much.longer.weight.only.logged"];
    const labels = runRowLabels(run, h);
    const width = (shown: Heatmap): number => rowLabelWidth([...labels, ...shown.layers.map((l, i) => labelParts(shown, i).join(l))], measure);
    const folded = foldHeatmap(h, () => true);
    expect(width(folded)).toBe(width(h));
    expect(width(heatmap({ layers: ["embed", "x", "y", "z", "w"] }))).toBe(width(h));
    expect(labels).toContain("\u25b8 h.0 (2)");
  });

  it("gives rows no lower than a label, however many there are", () => {
    expect(ROW_MIN_H).toBeGreaterThanOrEqual(LABEL_ROW_H);
    expect(rowHeight(10_000, 500)).toBe(ROW_MIN_H);
  });
});

describe("foldAll", () => {
  const blocks = ["layer1.0", "layer1.1", "layer2.0"];
  it("unfolds every block when any is folded, and folds them all when none is", () => {
    expect(foldAll(AUTO_FOLD, blocks, true)).toEqual({ mode: "none", except: [] });
    expect(foldAll({ mode: "none", except: ["layer1.1"] }, blocks, false)).toEqual({ mode: "none", except: [] });
    expect(foldAll({ mode: "none", except: [] }, blocks, true)).toEqual({ mode: "all", except: [] });
    expect(foldAll(AUTO_FOLD, blocks, false)).toEqual({ mode: "all", except: [] });
    expect(anyFolded({ mode: "all", except: blocks }, blocks, true)).toBe(false);
  });
  it("is kept in the link", () => {
    expect(encodeFold(foldAll(AUTO_FOLD, blocks, true))).toBe("none");
    expect(decodeFold("all")).toEqual({ mode: "all", except: [] });
  });
});

describe("the fold button", () => {
  it("is off, and says why, when the run has no block to fold", () => {
    const none = foldButtonText(0, 0);
    expect(none.enabled).toBe(false);
    expect(none.title).not.toContain("0 blocks");
    expect(none.title).toBe("Nothing to fold: no two rows of this run belong to one module or block");
  });

  it("folds the blocks, or unfolds the folded ones", () => {
    expect(foldButtonText(1, 0)).toEqual(
      { text: "Fold all", title: "Fold the block into one row of its worst layer (the link keeps it)", enabled: true });
    expect(foldButtonText(3, 0).title).toBe("Fold each of the 3 blocks into one row of its worst layer (the link keeps it)");
    expect(foldButtonText(3, 1)).toEqual(
      { text: "Unfold all", title: "Show every layer of the 1 folded block (the link keeps it)", enabled: true });
  });
});
