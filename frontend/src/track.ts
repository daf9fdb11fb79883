// The run track above the heatmap: the run's loss, global gradient norm and
// learning rate as small line charts on the heatmap's own step axis and zoom,
// with what the findings say about them marked: spikes, every occurrence of a
// periodic spike and its period, non-finite steps, and where a problem began.
// Clicking a mark selects its finding; dragging across the track zooms, as on
// the heatmap. Every label is set with textContent.

import type { Finding, StepSpan, Track, TrackSeries } from "./api";
import { severityColor } from "./charts";
import { el, svg } from "./dom";
import { findingId } from "./findings";
import { formatStep, formatValue } from "./format";
import { truncateMiddle } from "./layout";
import type { Step } from "./steps";
import type { Tooltip } from "./tooltip";
import { kindLabel, severityRank } from "./vocabulary";

export const TRACK_ROW_H = 42;
const TRACK_GAP = 3;
const PAD_Y = 4;
// Baselines of a row's label lanes (below its top): along the top, the middle and the bottom. A label whose
// lane is taken takes the first free one from the top, so a period's label falls to the middle, near its bracket.
const LABEL_LANES = [10, 23, TRACK_ROW_H - 5];
const BOTTOM_LANE = LABEL_LANES.length - 1;
// Mark labels are drawn at 10px, the track's measure at 12px.
const LABEL_SCALE = 10 / 12;
// A pointer this close to a spike's line (CSS pixels) points at it, though the point nearest it is not the
// spike's, when the line is nearer than that point: thousands of steps share a few hundred pixels, so a
// wider reach would list spikes steps away.
export const HIT_PX = 2;
// A press and release further apart than this (CSS pixels) is a drag, which zooms (the heatmap's
// brush), never a click on the mark under it.
export const DRAG_PX = 5;

/** Whether a press at `down` released at `up` (client coordinates) is a click rather than a drag. */
export function isClick(down: { clientX: number; clientY: number } | null, up: { clientX: number; clientY: number }): boolean {
  return down === null || Math.hypot(up.clientX - down.clientX, up.clientY - down.clientY) <= DRAG_PX;
}

/** What a finding marks on one series of the track. */
export interface TrackMark {
  finding: string;
  kind: string;
  severity: string;
  tag: string;
  /** Steps covered: single steps for spikes (each occurrence), spans otherwise. */
  spans: StepSpan[];
  /** Spikes, periodic or not, are marked at each occurrence (an episode of consecutive steps as a band);
   * other kinds as spans with their onset. */
  pointwise: boolean;
  /** A periodic spike's period in steps; null when the kept steps cannot tell it. */
  period: number | null;
}

/** The marks the findings put on the track's series: every finding that covers one of the tags. */
export function trackMarks(findings: readonly Finding[], tags: readonly string[]): TrackMark[] {
  const out: TrackMark[] = [];
  for (const f of findings) {
    for (const tag of tags) {
      const spans = f.covers?.get(tag);
      if (!spans || spans.length === 0) continue;
      const periodic = f.kind === "periodic_spikes";
      out.push({
        finding: findingId(f), kind: f.kind, severity: f.severity, tag, spans,
        pointwise: periodic || f.kind === "spike",
        period: periodic ? (typeof f.period === "number" ? f.period : null) : null,
      });
    }
  }
  return out;
}

/**
 * The marks of series `tag` under a pointer at plot x `x` whose nearest point is at `step`, `reach` pixels
 * away: a mark whose spans hold that step, or a spike whose line (or band) is within a pixel of the pointer, or
 * nearer it than that point and within `HIT_PX`: a thin line is easy to point at, a spike steps away not listed.
 * `xOf`: a step's x.
 */
export function marksNear(marks: readonly TrackMark[], tag: string, step: Step, x: number, reach: number,
  xOf: (step: Step) => number): TrackMark[] {
  // Within a pixel a line is under the pointer, whatever the rounding of either.
  const px = Math.min(HIT_PX, Math.max(1, reach));
  return marks.filter((m) => m.tag === tag && m.spans.some(([a, b]) => {
    if (a <= step && step <= b) return true;
    if (!m.pointwise) return false;
    const [xa, xb] = [xOf(a), xOf(b)];
    return x >= Math.min(xa, xb) - px && x <= Math.max(xa, xb) + px;
  }));
}

/** A finding's onset in a few words: "No progress begins", "NaN / Inf begins", "Exploding gradients begin". */
export function beginsText(kind: string): string {
  // "NaN / Inf values" names what the finding counts: its onset reads shorter without the noun.
  const label = kindLabel(kind).replace(/ values$/, "");
  return /[^s]s$/.test(label) ? `${label} begin` : `${label} begins`;
}

/** One line of a mark for a person: "Periodic spikes: every 35 steps, 8 occurrences from step 35". */
export function markText(m: TrackMark): string {
  const label = kindLabel(m.kind);
  if (m.kind === "periodic_spikes") {
    const every = m.period !== null ? `every ${m.period} steps` : "recurring, period unknown";
    return `${label}: ${every}, ${m.spans.length} occurrences from step ${formatStep(m.spans[0][0])}`;
  }
  if (m.pointwise) {
    const at = m.spans.map(([a, b]) => (a === b ? formatStep(a) : `${formatStep(a)} to ${formatStep(b)}`));
    return `${label} at ${m.spans.length === 1 && m.spans[0][0] === m.spans[0][1] ? "step" : "steps"} ${at.join(", ")}`;
  }
  const [a] = m.spans[0];
  const b = m.spans[m.spans.length - 1][1];
  return `${label} (${m.severity}) from step ${formatStep(a)}${a === b ? "" : ` to step ${formatStep(b)}`}`;
}

/** A label a mark would write beside its line: where it starts, how wide it is, how much it matters. */
export interface LabelWish {
  x: number;
  width: number;
  /** Higher is placed first; a label that finds no room is dropped. */
  rank: number;
  /** The lane it reads best in (the top one for a label about the whole chart). */
  prefer: number;
}

/**
 * Lanes for the labels of one track row so that no two overlap: each label, most important first, takes
 * its preferred lane if free there, else the first free one; a label with no room anywhere gets null and is
 * not drawn (its mark's tooltip still says it). `gap`: the least room between two labels in a lane.
 */
export function placeLabels(wishes: readonly LabelWish[], lanes: number, gap = 4): (number | null)[] {
  const order = wishes.map((_, i) => i).sort((a, b) => wishes[b].rank - wishes[a].rank || wishes[a].x - wishes[b].x || a - b);
  const taken: [number, number][][] = Array.from({ length: lanes }, () => []);
  const out: (number | null)[] = wishes.map(() => null);
  for (const i of order) {
    const { x, width, prefer } = wishes[i];
    const free = (lane: number): boolean => taken[lane].every(([a, b]) => x + width + gap <= a || x >= b + gap);
    const tries = [prefer, ...taken.keys()].filter((lane) => lane >= 0 && lane < lanes);
    const lane = tries.find(free);
    if (lane === undefined) continue;
    taken[lane].push([x, x + width]);
    out[i] = lane;
  }
  return out;
}

/** The value range of the points drawn, for a row's y scale; log keeps positive values only. */
export function valueExtent(values: readonly (number | null)[], log: boolean): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v === null || !Number.isFinite(v) || (log && v <= 0)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo <= hi ? [lo, hi] : null;
}

// A zero start is told from a true 0 by the points after it: at least this many, none of them 0.
const ZERO_START_AFTER = 3;

/**
 * The index of a series' zero start, or -1: its first finite value is exactly 0 and none of the (at least
 * ZERO_START_AFTER) finite values after it is. A running average (TF's ExponentialMovingAverage, logged as
 * `<name>_1`) reads 0 before its first update; drawn to scale, that 0 squeezes the series to the top of its row
 * and its first segment reads as a jump. The track scales the series on its other points and draws the 0 apart.
 */
export function zeroStart(values: readonly (number | null)[]): number {
  const finite = values.flatMap((v, i) => (v !== null && Number.isFinite(v) ? [i] : []));
  if (finite.length <= ZERO_START_AFTER || values[finite[0]] !== 0) return -1;
  return finite.slice(1).every((i) => values[i] !== 0) ? finite[0] : -1;
}

/** The series of a track drawn on the heatmap's step axis: those with points, on its axis or perhaps on it. */
export function drawnSeries(track: Track | null): TrackSeries[] {
  return (track?.series ?? []).filter((s) => s.axis !== "other" && s.steps.length > 0);
}

/** The steps the drawn series reach (the heatmap's axis spans them too), and the tags reaching the last. */
export interface TrackReach {
  first: Step;
  last: Step;
  lastTags: string[];
}

export function trackReach(track: Track | null): TrackReach | null {
  const series = drawnSeries(track);
  if (series.length === 0) return null;
  const ends = series.map((s) => [s.steps[0], s.steps[s.steps.length - 1]] as const);
  const first = ends.reduce((m, [a]) => (a < m ? a : m), ends[0][0]);
  const last = ends.reduce((m, [, b]) => (b > m ? b : m), ends[0][1]);
  return { first, last, lastTags: series.filter((_, i) => ends[i][1] === last).map((s) => s.tag) };
}

/** Where the track's steps go: the heatmap's mapping of a step to a CSS x inside the plot. */
export interface TrackFrame {
  labelW: number;
  plotW: number;
  /** x of a step relative to the plot's left edge. */
  x(step: Step): number;
}

/** Whether a step lies in the window a frame shows. */
export function inPlot(frame: TrackFrame, step: Step): boolean {
  const x = frame.x(step);
  return x >= 0 && x <= frame.plotW;
}

export interface TrackEvents {
  selectFinding(id: string): void;
}

interface Row {
  series: TrackSeries;
  top: number;
  xs: Float64Array;
  y: (v: number) => number;
}

export class RunTrack {
  readonly root = el("div", "gh-track");
  private readonly note = el("div", "gh-track-note");
  // A group, not an image: its marks are buttons a keyboard or a screen reader reaches.
  private readonly chart = svg("svg", { class: "gh-track-svg", role: "group" });
  private track: Track | null = null;
  private findings: readonly Finding[] = [];
  private selected = "";
  private cursor: Step | null = null;
  private frame: TrackFrame | null = null;
  private rows: Row[] = [];
  private marks: TrackMark[] = [];
  /** The labels the marks of this paint want, laid out together once every mark is drawn. */
  private labelsWanted: { top: number; at: number; text: string; color: string; cls: string; parent: SVGGElement;
    rank: number; prefer: number }[] = [];
  /** Where the last press on the chart was, to tell a click on a mark from a drag across it. */
  private down: { clientX: number; clientY: number } | null = null;

  constructor(
    private readonly tooltip: Tooltip,
    private readonly events: TrackEvents,
    private readonly measure: (text: string) => number,
  ) {
    this.root.hidden = true;
    this.root.append(this.chart, this.note);
    this.chart.setAttribute("aria-label", "Run-level scalars over steps, with the findings about them");
    this.chart.addEventListener("mousemove", (e) => this.onMove(e));
    this.chart.addEventListener("mouseleave", () => this.tooltip.hide());
    this.chart.addEventListener("mousedown", (e) => (this.down = { clientX: e.clientX, clientY: e.clientY }));
    this.chart.addEventListener("click", (e) => this.onClick(e));
  }

  /** New data: the run's scalars (null: none) and its findings, with the one selected. */
  set(track: Track | null, findings: readonly Finding[], selected: string): void {
    this.track = track;
    this.findings = findings;
    this.selected = selected;
  }

  setSelected(id: string): void {
    this.selected = id;
  }

  setCursor(step: Step | null): void {
    this.cursor = step;
  }

  /** The names the track writes in the label column, which the heatmap makes room for. */
  labels(): string[] {
    const tags = this.shown().map((s) => s.tag);
    // Room for the value range under each name too ("1.2e-05 to 3.4e+14, log", in a smaller font).
    return tags.length ? [...tags, "1.2e-05 to 3.4e+14"] : [];
  }

  /** The series drawn on the heatmap's axis; per-epoch ones are named in a note instead. */
  private shown(): TrackSeries[] {
    return drawnSeries(this.track);
  }

  /** Draws the track on the heatmap's current axis (`frame`); hidden without a series to draw. */
  paint(frame: TrackFrame | null): void {
    this.frame = frame;
    const series = this.shown();
    const other = (this.track?.series ?? []).filter((s) => s.axis === "other");
    this.root.hidden = !frame || (series.length === 0 && other.length === 0);
    this.note.hidden = other.length === 0;
    this.note.textContent = other.length
      ? `${other.map((s) => s.tag).join(", ")}: logged on another step axis (per epoch), so not drawn here; the Scalars tab shows ${other.length === 1 ? "it" : "them"}.`
      : "";
    // A repaint (the mark's own Enter selected its finding) keeps the keyboard on the same mark.
    const focused = this.chart.querySelector<SVGGElement>(".gh-track-mark:focus");
    const refocus = focused ? [focused.dataset.finding, focused.dataset.tag] : null;
    this.chart.replaceChildren();
    this.rows = [];
    if (!frame || series.length === 0) {
      this.chart.setAttribute("height", "0");
      return;
    }
    const width = frame.labelW + frame.plotW;
    const height = series.length * (TRACK_ROW_H + TRACK_GAP);
    this.chart.setAttribute("width", String(width));
    this.chart.setAttribute("height", String(height));
    // Marks stay inside the plot: a zoomed-in track clips what lies outside the window.
    const id = `gh-track-clip-${clipId++}`;
    const defs = svg("defs");
    const clip = svg("clipPath", { id });
    clip.append(svg("rect", { x: frame.labelW, y: 0, width: frame.plotW, height }));
    defs.append(clip);
    const back = svg("g");
    const plot = svg("g", { "clip-path": `url(#${id})` });
    this.chart.append(defs, back, plot);
    this.marks = trackMarks(this.findings, series.map((s) => s.tag));
    this.labelsWanted = [];
    series.forEach((s, i) => this.paintRow(back, plot, s, i * (TRACK_ROW_H + TRACK_GAP), frame));
    this.paintSelection(plot, height, frame);
    this.paintLabels(frame);
    if (refocus) {
      const again = [...this.chart.querySelectorAll<SVGGElement>(".gh-track-mark")]
        .find((g) => g.dataset.finding === refocus[0] && g.dataset.tag === refocus[1]);
      again?.focus({ preventScroll: true });
    }
  }

  private paintRow(back: SVGGElement, plot: SVGGElement, s: TrackSeries, top: number, frame: TrackFrame): void {
    const xs = Float64Array.from(s.steps, (step) => frame.x(step));
    const log = s.scale === "log";
    // A zero start (see zeroStart) stays out of the scale and the line; a log scale leaves out every 0 already.
    const start = log ? -1 : zeroStart(s.values);
    const values = start < 0 ? s.values : s.values.map((v, i) => (i === start ? null : v));
    // The y scale fits the points in view, so zooming in on a quiet stretch shows its shape.
    const inView = values.filter((_, i) => xs[i] >= -1 && xs[i] <= frame.plotW + 1);
    const ext = valueExtent(inView, log) ?? valueExtent(values, log) ?? [0, 1];
    let [lo, hi] = log ? [Math.log10(ext[0]), Math.log10(ext[1])] : ext;
    if (hi === lo) [lo, hi] = [lo - 1, hi + 1];
    const y0 = top + PAD_Y;
    const y1 = top + TRACK_ROW_H - PAD_Y;
    const y = (v: number): number => y1 - (((log ? Math.log10(v) : v) - lo) / (hi - lo)) * (y1 - y0);
    this.rows.push({ series: s, top, xs, y });
    const L = frame.labelW;
    back.append(svg("rect", { x: L, y: top, width: frame.plotW, height: TRACK_ROW_H, class: "gh-track-bg" }));
    this.paintLabel(back, s, top, frame, ext, start >= 0);
    for (const [a, b] of s.nonfinite) this.band(plot, a, b, top, "gh-track-nonfinite", "#d7263d", 0.28, frame);
    const marks = this.marks.filter((m) => m.tag === s.tag);
    for (const m of marks.filter((m) => !m.pointwise)) this.paintSpanMark(plot, m, top, frame);
    let d = "";
    let pen = false;
    values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v) || (log && v <= 0)) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${(L + xs[i]).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    plot.append(svg("path", { d, class: "gh-track-line", "data-tag": s.tag }));
    if (start >= 0) {
      // The 0, hollow on the edge of the row that faces it, with what it is in words.
      const edge = (ext[0] > 0 ? y1 : y0);
      const dot = svg("circle", { cx: L + xs[start], cy: edge, r: 3, class: "gh-track-zero-start", "data-tag": s.tag });
      const title = svg("title");
      title.textContent = `step ${formatStep(s.steps[start])}: 0, outside this row's scale: the series starts at 0 and `
        + "never returns to it, as a running average does before its first update";
      dot.append(title);
      plot.append(dot);
    }
    for (const m of marks.filter((m) => m.pointwise)) this.paintPointMark(plot, m, top, frame);
  }

  private paintLabel(back: SVGGElement, s: TrackSeries, top: number, frame: TrackFrame, range: [number, number],
    fromZero: boolean): void {
    const textW = Math.max(20, frame.labelW - 12);
    const name = svg("text", { x: frame.labelW - 8, y: top + 15, "text-anchor": "end", class: "gh-track-label" },
      truncateMiddle(s.tag, textW, this.measure));
    const sub = `${formatValue(range[0], 2)} to ${formatValue(range[1], 2)}${s.scale === "log" ? ", log" : ""}`
      + (fromZero ? ", 0 first" : "");
    const detail = svg("text", { x: frame.labelW - 8, y: top + 30, "text-anchor": "end", class: "gh-track-sub" },
      truncateMiddle(sub, textW, (t) => this.measure(t) * 0.85));
    back.append(name, detail);
  }

  private band(g: SVGGElement, a: Step, b: Step, top: number, cls: string, color: string, opacity: number,
    frame: TrackFrame, finding?: string): SVGRectElement {
    const [xa, xb] = [frame.x(a), frame.x(b)];
    const x = Math.min(xa, xb);
    const rect = svg("rect", {
      x: frame.labelW + x - 1, y: top, width: Math.max(2, Math.abs(xb - xa) + 2), height: TRACK_ROW_H,
      fill: color, "fill-opacity": opacity, class: cls, "data-first": a.toString(), "data-last": b.toString(),
    });
    if (finding) rect.dataset.finding = finding;
    g.append(rect);
    return rect;
  }

  private dimmed(m: TrackMark): boolean {
    return this.selected !== "" && this.selected !== m.finding;
  }

  /** The group holding one mark: dimmed when another finding is selected, and reachable from the keyboard
   * (Tab focuses it, Enter or Space selects its finding), as the findings list and the heatmap are. */
  private markGroup(m: TrackMark): SVGGElement {
    const group = svg("g", { class: "gh-track-mark", "data-finding": m.finding, "data-kind": m.kind, "data-tag": m.tag,
      tabindex: "0", role: "button", "aria-label": `${m.tag}: ${markText(m)}` });
    if (this.dimmed(m)) group.setAttribute("opacity", "0.3");
    if (this.selected === m.finding) group.setAttribute("aria-pressed", "true");
    group.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        this.events.selectFinding(m.finding);
      }
    });
    group.addEventListener("focus", () => {
      const box = group.getBoundingClientRect();
      this.tooltip.show([[m.tag, markText(m)]], box.right, box.bottom);
    });
    group.addEventListener("blur", () => this.tooltip.hide());
    return group;
  }

  /** A finding over spans of steps (an explosion of the global norm, a NaN loss): bands and its onset. */
  private paintSpanMark(g: SVGGElement, m: TrackMark, top: number, frame: TrackFrame): void {
    const color = severityColor(m.severity);
    const group = this.markGroup(m);
    for (const [a, b] of m.spans) this.band(group, a, b, top, "gh-track-span", color, 0.13, frame, m.finding);
    const onset = m.spans[0][0];
    const x = Math.round(frame.labelW + frame.x(onset)) + 0.5;
    group.append(svg("line", { x1: x, x2: x, y1: top, y2: top + TRACK_ROW_H, stroke: color, class: "gh-track-onset",
      "data-step": onset.toString() }));
    // Named, as the selected finding's line is: two bare "onset"s (a loss's no progress and its NaN) say neither.
    // An onset zoomed out of view has no line to name: its label would stand clipped at the plot's edge.
    if (inPlot(frame, onset)) {
      this.wantLabel(group, top, x, beginsText(m.kind), color, "gh-track-mark-text", this.labelRank(m), BOTTOM_LANE);
    }
    g.append(group);
  }

  /** Spikes, periodic or not: a triangle at every occurrence, a band over an episode of several steps,
   * and a periodic spike's period bracketed. */
  private paintPointMark(g: SVGGElement, m: TrackMark, top: number, frame: TrackFrame): void {
    const color = severityColor(m.severity);
    const group = this.markGroup(m);
    const steps = m.spans.map((s) => s[0]);
    for (const [a, b] of m.spans) {
      // An episode spiking over consecutive logged steps is one occurrence spanning them all.
      if (a !== b) this.band(group, a, b, top, "gh-track-episode", color, 0.18, frame, m.finding);
    }
    for (const step of steps) {
      const x = frame.labelW + frame.x(step);
      if (m.kind === "periodic_spikes") {
        group.append(svg("line", { x1: x, x2: x, y1: top + 8, y2: top + TRACK_ROW_H, stroke: color, class: "gh-track-tick" }));
      }
      group.append(svg("path", { d: `M${x - 4},${top}L${x + 4},${top}L${x},${top + 7}Z`, fill: color,
        class: "gh-track-occurrence", "data-step": step.toString() }));
    }
    // A series the pattern reached only once (a loss spiking on its grid) shows the occurrence, no period.
    if (m.kind === "periodic_spikes" && steps.length > 1) {
      const a = frame.labelW + frame.x(steps[0]);
      const b = steps.length > 1 ? frame.labelW + frame.x(steps[1]) : a;
      const yb = top + 12;
      const text = m.period !== null ? `every ${m.period} steps` : "period unknown";
      group.append(svg("path", { d: `M${a},${yb - 3}V${yb}H${b}V${yb - 3}`, stroke: color, fill: "none", class: "gh-track-period" }));
      this.wantLabel(group, top, b + 1, text, color, "gh-track-mark-text gh-track-period-text", this.labelRank(m), 0);
    }
    g.append(group);
  }

  /** How much a mark's label matters: the selected finding's first, then by severity. */
  private labelRank(m: TrackMark): number {
    return (m.finding === this.selected ? 10 : 0) + severityRank(m.severity);
  }

  /** A label for a line at plot x `at` (CSS, with the label column) in the row at `top`, drawn by `paintLabels`. */
  private wantLabel(parent: SVGGElement, top: number, at: number, text: string, color: string, cls: string,
    rank: number, prefer: number): void {
    this.labelsWanted.push({ top, at, text, color, cls, parent, rank, prefer });
  }

  /**
   * Draws the labels the marks want, row by row, in lanes where none overlaps another (`placeLabels`): beside
   * their line, to its left where the plot ends first. A label with no room is left out; the mark's tooltip and
   * its name for a screen reader still say it.
   */
  private paintLabels(frame: TrackFrame): void {
    const right = frame.labelW + frame.plotW;
    const rows = new Map<number, typeof this.labelsWanted>();
    for (const w of this.labelsWanted) rows.set(w.top, [...(rows.get(w.top) ?? []), w]);
    for (const [top, wanted] of rows) {
      const boxes = wanted.map((w) => {
        const width = this.measure(w.text) * LABEL_SCALE;
        const x = w.at + 3 + width <= right ? w.at + 3 : w.at - 3 - width;
        return { x, width, rank: w.rank, prefer: w.prefer };
      });
      placeLabels(boxes, LABEL_LANES.length).forEach((lane, i) => {
        if (lane === null) return;
        const w = wanted[i];
        w.parent.append(svg("text", { x: boxes[i].x, y: top + LABEL_LANES[lane], fill: w.color, class: w.cls }, w.text));
      });
    }
  }

  /** The selected finding's onset across every row, when it is about layers, and the selected cell's step. */
  private paintSelection(g: SVGGElement, height: number, frame: TrackFrame): void {
    const f = this.findings.find((x) => findingId(x) === this.selected);
    if (f && !this.marks.some((m) => m.finding === this.selected) && inPlot(frame, f.first_step)) {
      const x = Math.round(frame.labelW + frame.x(f.first_step)) + 0.5;
      const color = severityColor(f.severity);
      g.append(svg("line", { x1: x, x2: x, y1: 0, y2: height, stroke: color, class: "gh-track-finding-onset",
        "data-step": f.first_step.toString() }));
      // The finding selected outranks every mark's label: it is what the user asked to see.
      this.wantLabel(g, 0, x, beginsText(f.kind), color, "gh-track-mark-text gh-track-begins", Infinity, 0);
    }
    if (this.cursor !== null) {
      const x = Math.round(frame.labelW + frame.x(this.cursor)) + 0.5;
      g.append(svg("line", { x1: x, x2: x, y1: 0, y2: height, class: "gh-track-cursor" }));
    }
  }

  /** The row and plot x under a pointer, or null outside the plots. */
  private at(e: MouseEvent): { row: Row; x: number } | null {
    const frame = this.frame;
    if (!frame) return null;
    const rect = this.chart.getBoundingClientRect();
    const x = e.clientX - rect.left - frame.labelW;
    const y = e.clientY - rect.top;
    const row = this.rows.find((r) => y >= r.top && y < r.top + TRACK_ROW_H);
    return row && x >= 0 && x <= frame.plotW ? { row, x } : null;
  }

  /** The index of the point of a row nearest plot x, or -1 when the row has none. */
  private nearest(row: Row, x: number): number {
    let best = -1;
    for (let i = 0; i < row.xs.length; i++) {
      if (best < 0 || Math.abs(row.xs[i] - x) < Math.abs(row.xs[best] - x)) best = i;
    }
    return best;
  }

  /** The marks of a row at plot x: those covering the step of the point nearest it, and spikes within reach. */
  private marksAt(row: Row, x: number): TrackMark[] {
    const best = this.nearest(row, x);
    if (best < 0) return [];
    const frame = this.frame as TrackFrame;
    const reach = Math.abs(row.xs[best] - x);
    return marksNear(this.marks, row.series.tag, row.series.steps[best], x, reach, (step) => frame.x(step));
  }

  private onMove(e: MouseEvent): void {
    const hit = this.at(e);
    if (!hit) {
      this.tooltip.hide();
      return;
    }
    const { row, x } = hit;
    const s = row.series;
    const best = this.nearest(row, x);
    if (best < 0) return;
    const lines: [string, string][] = [[s.label, s.tag], ["step", formatStep(s.steps[best])],
      ["value", s.values[best] === null ? "NaN or Inf" : formatValue(s.values[best])]];
    if (s.binned) lines.push(["note", `${s.logged.toLocaleString("en-US")} points thinned to each bin's first, lowest and highest`]);
    const marks = this.marksAt(row, x);
    for (const m of marks) lines.push(["finding", markText(m)]);
    this.chart.style.cursor = marks.length ? "pointer" : "default";
    this.tooltip.show(lines, e.clientX, e.clientY);
  }

  private onClick(e: MouseEvent): void {
    // A drag across a band zooms (the heatmap's pointer brushes it); only a click selects.
    const click = isClick(this.down, e);
    this.down = null;
    if (!click) return;
    const hit = this.at(e);
    const m = hit ? this.marksAt(hit.row, hit.x)[0] : undefined;
    if (m) this.events.selectFinding(m.finding);
  }
}

// Ids of the clip paths: one document may hold two tracks (compared runs).
let clipId = 0;
