import { describe, expect, it } from "vitest";
import { parseRuns } from "../src/api";
import { quotedPieces, unreadableNote, unreadableStepsNote } from "../src/messages";

describe("unreadableNote", () => {
  it("is null when every tag was read", () => {
    expect(unreadableNote([])).toBeNull();
  });

  it("names the tags and why, a few of them", () => {
    const tags = ["a", "b", "c", "d", "e"].map((tag) => ({ tag, why: `${tag} holds text` }));
    expect(unreadableNote(tags.slice(0, 1))).toBe("Not read: 1 tag whose data cannot be read: a (a holds text).");
    expect(unreadableNote(tags)).toBe(
      "Not read: 5 tags whose data cannot be read: a (a holds text); b (b holds text); c (c holds text); and 2 more.",
    );
  });

  it("reads the runs route's unreadable list, ignoring what is not an entry", () => {
    const body = { runs: [{ run: "r", unreadable: [{ tag: "x", why: "metadata names role ''" }, 3, null] }] };
    expect(parseRuns(body).runs[0].unreadable).toEqual([{ tag: "x", why: "metadata names role ''" }]);
    expect(parseRuns({ runs: [{ run: "r" }] }).runs[0].unreadable).toEqual([]);
  });
});

describe("unreadableStepsNote", () => {
  it("is null when no tag has such steps", () => {
    expect(unreadableStepsNote([])).toBeNull();
  });

  it("names the tags, how many of their steps and the first, a few of them", () => {
    const tags = ["a", "b", "c", "d"].map((tag) => ({ tag, steps: 2, of: 40, why: "negative counts at step 8" }));
    expect(unreadableStepsNote(tags.slice(0, 1))).toBe(
      "No data at some steps of 1 tag, whose tensors there cannot be read: a (2 of 40 steps; the first: negative counts at step 8).",
    );
    expect(unreadableStepsNote(tags)).toMatch(/^No data at some steps of 4 tags, .*; c \(2 of 40 steps; .*\); and 1 more\.$/);
  });

  it("reads the runs route's unreadable_steps list, ignoring what is not an entry", () => {
    const entry = { tag: "x", steps: 1, of: 4, first_step: 2, why: "bucket edges decrease at step 2" };
    const body = { runs: [{ run: "r", unreadable_steps: [entry, "y", null] }] };
    expect(parseRuns(body).runs[0].unreadable_steps).toEqual([{ tag: "x", steps: 1, of: 4, why: entry.why }]);
    expect(parseRuns({ runs: [{ run: "r" }] }).runs[0].unreadable_steps).toEqual([]);
  });
});

describe("quotedPieces", () => {
  it("sets the names the server quotes apart from the words around them", () => {
    expect(quotedPieces("layer `3`: activations are mostly dead")).toEqual([
      { text: "layer ", quoted: false },
      { text: "3", quoted: true },
      { text: ": activations are mostly dead", quoted: false },
    ]);
    expect(quotedPieces("layers `a`, `b` and 2 more")).toEqual([
      { text: "layers ", quoted: false },
      { text: "a", quoted: true },
      { text: ", ", quoted: false },
      { text: "b", quoted: true },
      { text: " and 2 more", quoted: false },
    ]);
    expect(quotedPieces("`loss` spikes")).toEqual([{ text: "loss", quoted: true }, { text: " spikes", quoted: false }]);
  });

  it("leaves a text without quotes, or with an odd backtick, as it is", () => {
    expect(quotedPieces("gradients explode")).toEqual([{ text: "gradients explode", quoted: false }]);
    expect(quotedPieces("a ` stray")).toEqual([{ text: "a ` stray", quoted: false }]);
  });
});
