import { describe, expect, it } from "vitest";
import type { Finding } from "../src/api";
import { thresholdSentences } from "../src/detail";
import type { Track, TrackSeries } from "../src/api";
import { beginsText, DRAG_PX, HIT_PX, inPlot, isClick, markText, marksNear, placeLabels, trackMarks, trackReach, valueExtent,
  zeroStart } from "../src/track";

function finding(over: Partial<Finding>): Finding {
  return {
    run: "R", kind: "spike", severity: "info", layers: ["loss"], first_step: 0n, last_step: 0n,
    message: "m", advice: "a", evidence: {}, role: null, covers: null, ...over,
  };
}

describe("the steps the track reaches", () => {
  const series = (tag: string, steps: bigint[], axis: TrackSeries["axis"] = "row"): TrackSeries => ({
    tag, kind: "loss", label: tag, axis, steps, values: steps.map(() => 1), logged: steps.length, binned: false,
    scale: "linear", nonfinite: [],
  });
  const track = (...s: TrackSeries[]): Track => ({ run: "R", series: s });

  it("spans the series drawn on the layers' axis, naming those that reach the last step", () => {
    const reach = trackReach(track(series("loss", [0n, 1n, 299n]), series("lr", [5n, 299n]), series("norm", [2n, 150n])));
    expect(reach).toEqual({ first: 0n, last: 299n, lastTags: ["loss", "lr"] });
  });

  it("leaves out a per-epoch series and empty ones; none drawn, no reach", () => {
    expect(trackReach(track(series("loss", [0n, 150n]), series("epoch_loss", [0n, 900n], "other"), series("e", []))))
      .toEqual({ first: 0n, last: 150n, lastTags: ["loss"] });
    expect(trackReach(track(series("epoch_loss", [0n, 9n], "other")))).toBeNull();
    expect(trackReach(null)).toBeNull();
  });

  it("tells a step in the window shown from one zoomed out of it", () => {
    const frame = { labelW: 100, plotW: 400, x: (step: bigint) => Number(step - 160n) * 2 };
    expect([inPlot(frame, 157n), inPlot(frame, 160n), inPlot(frame, 360n), inPlot(frame, 361n)]).toEqual([false, true, true, false]);
  });
});

describe("the run track's marks", () => {
  const periodic = finding({
    kind: "periodic_spikes", severity: "warn", layers: ["norm"], first_step: 35n, last_step: 105n, period: 35,
    covers: new Map([["norm", [[35n, 35n], [70n, 70n], [105n, 105n]]]]),
  });
  const nan = finding({ kind: "nonfinite", severity: "critical", first_step: 5n, last_step: 99n, covers: new Map([["loss", [[5n, 99n]]]]) });
  const layerOnly = finding({ kind: "vanishing_gradients", layers: ["dense"], covers: new Map([["dense", [[0n, 9n]]]]) });

  it("marks only the findings that cover a series shown, every occurrence of a periodic spike", () => {
    const marks = trackMarks([periodic, nan, layerOnly], ["loss", "norm"]);
    expect(marks.map((m) => [m.kind, m.tag, m.pointwise])).toEqual([["periodic_spikes", "norm", true], ["nonfinite", "loss", false]]);
    expect(marks[0].spans.map((s) => s[0])).toEqual([35n, 70n, 105n]);
    expect(marks[0].period).toBe(35);
    expect(trackMarks([periodic], ["loss"])).toEqual([]);
  });

  it("says what each mark is in words", () => {
    const [p, n] = trackMarks([periodic, nan], ["loss", "norm"]);
    expect(markText(p)).toBe("Periodic spikes: every 35 steps, 3 occurrences from step 35");
    expect(markText(n)).toBe("NaN / Inf values (critical) from step 5 to step 99");
    const unknown = trackMarks([finding({ ...periodic, period: null })], ["norm"])[0];
    expect(markText(unknown)).toContain("recurring, period unknown");
    const spike = trackMarks([finding({ covers: new Map([["loss", [[70n, 70n]]]]) })], ["loss"])[0];
    expect(markText(spike)).toBe("Spike at step 70");
    // An episode spiking over consecutive logged steps is said as the span it covers.
    const episode = trackMarks([finding({ covers: new Map([["loss", [[10n, 11n]]]]) })], ["loss"])[0];
    expect(episode.pointwise).toBe(true);
    expect(markText(episode)).toBe("Spike at steps 10 to 11");
    const two = trackMarks([finding({ covers: new Map([["loss", [[4n, 4n], [10n, 12n]]]]) })], ["loss"])[0];
    expect(markText(two)).toBe("Spike at steps 4, 10 to 12");
  });

  it("scales to the finite values, positive ones on a log scale", () => {
    expect(valueExtent([3, null, 1, Number.NaN, 2], false)).toEqual([1, 3]);
    expect(valueExtent([0, -1, 10, 100], true)).toEqual([10, 100]);
    expect(valueExtent([null], false)).toBeNull();
  });
});

describe("threshold lines in words", () => {
  it("say one sentence per meaning, never a limit's name", () => {
    const lines = thresholdSentences([
      { name: "dead_zero_fraction", value: 0.7, side: "above", meaning: "activation zero fraction in the danger zone" },
      { name: "dead_info_zero_fraction", value: 0.3, side: "above", meaning: "activation zero fraction above 'normal'; informational only" },
      { name: "weight_abs_mean", value: 1, side: "above", meaning: "|mean weight| above this is weight growth" },
      { name: "weight_abs_mean", value: -1, side: "below", meaning: "|mean weight| above this is weight growth" },
    ]);
    expect(lines).toEqual([
      "Dashed line at 0.7: activation zero fraction in the danger zone.",
      "Dashed line at 0.3: activation zero fraction above 'normal'; informational only.",
      "Dashed lines at 1 and -1: |mean weight| above this is weight growth.",
    ]);
    expect(lines.join(" ")).not.toMatch(/dead info|_/);
  });
});

describe("a press on the track", () => {
  it("is a click within a few pixels of where it began, a drag (which zooms) beyond", () => {
    expect(isClick({ clientX: 100, clientY: 50 }, { clientX: 103, clientY: 52 })).toBe(true);
    expect(isClick({ clientX: 100, clientY: 50 }, { clientX: 100 + DRAG_PX + 1, clientY: 50 })).toBe(false);
    expect(isClick({ clientX: 100, clientY: 50 }, { clientX: 300, clientY: 50 })).toBe(false);
    // A click the track saw no press of (the keyboard's) is a click.
    expect(isClick(null, { clientX: 0, clientY: 0 })).toBe(true);
  });
});

describe("the track's labels", () => {
  const overlap = (a: { x: number; width: number }, b: { x: number; width: number }): boolean =>
    a.x < b.x + b.width && b.x < a.x + a.width;

  it("never overlap in a lane: close marks stack, the lesser label moves", () => {
    // A selected finding's "begins" at 300 (top), two onsets at 302 and 310 (bottom), a period label at 305 (top).
    const wishes = [
      { x: 303, width: 90, rank: Infinity, prefer: 0 },
      { x: 305, width: 24, rank: 3, prefer: 1 },
      { x: 313, width: 24, rank: 2, prefer: 1 },
      { x: 308, width: 60, rank: 2, prefer: 0 },
    ];
    const lanes = placeLabels(wishes, 3);
    // Of two labels that matter as much, the earlier gets the last lane.
    expect(lanes).toEqual([0, 1, null, 2]);
    for (let i = 0; i < wishes.length; i++) {
      for (let j = i + 1; j < wishes.length; j++) {
        if (lanes[i] !== null && lanes[i] === lanes[j]) expect(overlap(wishes[i], wishes[j])).toBe(false);
      }
    }
  });

  it("keeps labels far apart in the lane they prefer", () => {
    const wishes = [
      { x: 10, width: 24, rank: 1, prefer: 1 },
      { x: 200, width: 24, rank: 3, prefer: 1 },
      { x: 100, width: 90, rank: Infinity, prefer: 0 },
    ];
    expect(placeLabels(wishes, 3)).toEqual([1, 1, 0]);
  });

  it("drops the lesser of two labels with one lane left", () => {
    expect(placeLabels([{ x: 0, width: 30, rank: 1, prefer: 0 }, { x: 20, width: 30, rank: 2, prefer: 0 }], 1)).toEqual([null, 0]);
  });
});

describe("a span mark's label", () => {
  it("names its finding's onset, never a bare \"onset\"", () => {
    expect(beginsText("no_progress")).toBe("No progress begins");
    expect(beginsText("nonfinite")).toBe("NaN / Inf begins");
    expect(beginsText("exploding_gradients")).toBe("Exploding gradients begin");
  });
});


describe("the findings a hover on the track lists", () => {
  // 3,000 steps across 700 pixels, about four steps a pixel.
  const xOf = (step: bigint): number => (Number(step) * 700) / 3000;
  const marks = trackMarks([
    finding({ kind: "spike", covers: new Map([["loss", [[1504n, 1504n]]]]) }),
    finding({ kind: "spike", covers: new Map([["loss", [[1507n, 1511n]]]]) }),
    finding({ kind: "no_progress", severity: "warn", covers: new Map([["loss", [[600n, 1511n]]]]) }),
    finding({ kind: "nonfinite", severity: "critical", covers: new Map([["loss", [[1512n, 2999n]]]]) }),
  ], ["loss"]);
  // Hovering at a point of the series (a point every step here), or `x` between points `reach` from the nearest.
  const near = (step: bigint, x = xOf(step), reach = 0): string[] =>
    marksNear(marks, "loss", step, x, reach, xOf).map((m) => m.kind);

  it("are those whose span holds the hovered step, never one a few steps away", () => {
    expect(near(1521n)).toEqual(["nonfinite"]);
    expect(near(1490n)).toEqual(["no_progress"]);
    // Six steps before the NaN is no NaN; both spikes are within a pixel, under the pointer.
    expect(near(1506n)).toEqual(["spike", "spike", "no_progress"]);
  });

  it("include a spike whose line is within a few pixels of the pointer and nearer it than the nearest point", () => {
    // A thinned series: its nearest point 5 px away, at step 1,490.
    expect(near(1490n, xOf(1504n) - HIT_PX, 5)).toEqual(["spike", "no_progress"]);
    expect(near(1490n, xOf(1504n) - HIT_PX - 1, 5)).toEqual(["no_progress"]);
    // The nearest point nearer than the spike's line: that point's step alone.
    expect(near(1490n, xOf(1504n) - 1.5, 1)).toEqual(["no_progress"]);
    // Within a pixel the line is under the pointer, though a point of the next step is nearer.
    expect(near(1502n, xOf(1504n) - 0.5, 0.1)).toEqual(["spike", "no_progress"]);
  });
});

describe("a series' zero start", () => {
  it("is a first value of exactly 0 that the series never returns to", () => {
    // TF's moving average of a loss, logged before its first update (the cifar10 tutorial's cross_entropy_1).
    expect(zeroStart([0, 4.376, 4.145, 4.03, 3.903])).toBe(0);
    // The first finite value counts: a NaN step before it changes nothing.
    expect(zeroStart([null, 0, 2, 1.5, 1.2])).toBe(1);
    expect(zeroStart([0, -2, -1.5, -1.2])).toBe(0);
  });

  it("is not a 0 the series comes back to, nor a start the data cannot tell", () => {
    expect(zeroStart([0, 1, 0, 2, 3])).toBe(-1);
    expect(zeroStart([0.219, 2.038, 1.884, 1.743])).toBe(-1);
    expect(zeroStart([0, 1, 2])).toBe(-1); // too few points after it
    expect(zeroStart([])).toBe(-1);
    expect(zeroStart([1, 0, 2, 3, 4])).toBe(-1);
  });
});
