// Canvas heatmap: rows = layers, columns = logged steps at their true position.
//
// Cells are rasterised once into an offscreen canvas (one pixel row per layer, one
// pixel per device pixel of width) and copied to the screen scaled with
// nearest-neighbour sampling; scrolling and hovering never touch the cells again.
// The step axis and the visible rows are sticky inside a scroll box, so hundreds
// of layers scroll without one DOM node per row. Outlines (hover, selection, a
// finding's span, the zoom brush) live on a transparent overlay canvas. This view
// keeps the state; heatmap_paint.ts paints it and heatmap_pointer.ts handles input.

import type { Finding, Heatmap, Track } from "./api";
import { metricDomain, statusName } from "./colors";
import type { Domain } from "./colors";
import { el, measurer } from "./dom";
import { labelParts, rowMembers } from "./fold";
import { AXIS_HEIGHT, backingScale, binEdges, clampRange, columnEdges, fullRange, outsideRanges, revealTop, rowHeight, rowLabelWidth,
  spanRange, unionSpans, xOfStep } from "./layout";
import type { AxisSpan, OutsideRange, StepRange } from "./layout";
import { buildCells } from "./model";
import { provesNothing } from "./quality";
import { offset, offsets } from "./steps";
import type { Step } from "./steps";
import { axisLabels, highlightRects, paintAxis, paintBody, paintOverlay, raster, ROW_FONT, spanX } from "./heatmap_paint";
import type { Highlight, Hit, Scene, Selection } from "./heatmap_paint";
import { HeatmapPointer } from "./heatmap_pointer";
import type { HeatmapEvents } from "./heatmap_pointer";
import type { Tooltip } from "./tooltip";
import { RunTrack } from "./track";
import type { TrackFrame, TrackReach } from "./track";

export type { HeatmapEvents } from "./heatmap_pointer";
export type { Highlight, Selection } from "./heatmap_paint";

/** Domain for the colour map of a heatmap; null for health, which has a fixed one. */
export function heatmapDomain(h: Heatmap): Domain | null {
  if (h.metric === "health") return null;
  // Only some rows here: the server's ends over every row, so rows loaded later keep their colours.
  const r = h.valueRange;
  if (r) {
    const ends = h.scale === "log" ? (r.positive ?? r.finite) : r.finite;
    return ends ? metricDomain(h.metric, [ends], h.scale) : null;
  }
  // A finite_only cell is painted as NaN/Inf: what finite values its tensor kept is no end of the scale. Nor is
  // a value that proves nothing (painted as not judged, as the server marks it).
  const skip = (i: number, j: number): boolean => {
    if (statusName(h.status[i][j], h.status_names) === "no_data") return true;
    const quality = h.quality_names[h.quality_cells?.[i]?.[j] ?? -1];
    return quality === "finite_only" || (quality !== undefined && provesNothing(quality));
  };
  return metricDomain(h.metric, h.values, h.scale, skip);
}

/** The tallest the rows get before they scroll, in CSS pixels. */
export function maxViewHeight(): number {
  return Math.max(200, Math.floor(window.innerHeight * 0.62));
}

/** The scene of one view: what it shows and the marks on it. */
class ViewScene implements Scene {
  h: Heatmap | null = null;
  model: Scene["model"] = null;
  geo: Scene["geo"] = null;
  origin: Step = 0n;
  edges: Float64Array = new Float64Array(1);
  full: StepRange = { lo: 0, hi: 1 };
  unlogged: OutsideRange[] = [];
  labelled: StepRange = { lo: 0, hi: 0 };
  zoom: StepRange | null = null;
  order: number[] = [];
  position = new Map<string, number>();
  labels = new Map<string, string>();
  selection: Selection | null = null;
  highlight: Highlight | null = null;
  hover: Hit | null = null;
  brush: { x0: number; x1: number } | null = null;
  offscreen = document.createElement("canvas");

  constructor(private readonly scroller: HTMLElement) {}

  /** The step window in use: the zoom clamped to this heatmap's steps, or all of them. */
  get range(): StepRange {
    return (this.zoom && clampRange(this.zoom, this.full)) ?? this.full;
  }

  get scrollTop(): number {
    return this.scroller.scrollTop;
  }
}

export class HeatmapView {
  readonly root = el("div", "gh-hm");
  readonly caption = el("div", "gh-hm-caption");
  readonly port = el("div", "gh-hm-port");
  readonly axis = el("canvas", "gh-hm-axis");
  private readonly scroller = el("div", "gh-hm-scroll");
  private readonly space = el("div", "gh-hm-space");
  private readonly body = el("canvas", "gh-hm-body");
  private readonly overlay = el("canvas", "gh-hm-overlay");
  readonly scene = new ViewScene(this.scroller);
  /** The run's loss, gradient norm and learning rate, above the heatmap on its step axis. */
  readonly track: RunTrack;
  private domain: Domain | null = null;
  /** Every label the run's rows can have: the label column's width is sized for them all. */
  private runLabels: readonly string[] = [];
  private pending = 0;
  private rasterDirty = true;
  private heldRowH: { key: string; cellH: number } | null = null;
  private reach: { run: string; reach: TrackReach | null } | null = null;
  /** The axis this view spans by itself (its cells and its track), before another run's is joined to it. */
  private own: AxisSpan | null = null;
  /** The axis of the runs compared with this one: this view's spans it too (null: none). */
  private shared: AxisSpan | null = null;
  private readonly pointer: HeatmapPointer;

  constructor(
    readonly tooltip: Tooltip,
    readonly events: HeatmapEvents,
    readonly runLabel: () => string = () => "",
  ) {
    this.port.tabIndex = 0;
    this.port.setAttribute("role", "grid");
    this.port.setAttribute("aria-label", "Heatmap: layers by steps. Arrow keys move the selection; Enter folds or unfolds its block.");
    this.port.append(this.body, this.overlay);
    this.space.append(this.port);
    this.scroller.append(this.axis, this.space);
    this.track = new RunTrack(tooltip, { selectFinding: (id) => this.events.finding?.(id) }, measurer(ROW_FONT));
    this.root.append(this.caption, this.track.root, this.scroller);
    this.caption.hidden = true;
    this.scroller.addEventListener("scroll", () => {
      this.tooltip.hide();
      this.scene.hover = null;
      this.schedule();
      this.events.scrolled?.(this.scroller.scrollTop);
    });
    this.pointer = new HeatmapPointer(this, this.axis, this.track.root);
  }

  get data(): Heatmap | null {
    return this.scene.h;
  }

  get colorDomain(): Domain | null {
    return this.domain;
  }

  /** The labels the run's rows can have (`runRowLabels`), applied at the next layout. */
  setRunLabels(labels: readonly string[]): void {
    this.runLabels = labels;
  }

  /** New data, colour domain, row order and zoom window; keeps selection and highlight. */
  setData(h: Heatmap, domain: Domain | null, order: number[], zoom: [Step, Step] | null): void {
    const s = this.scene;
    s.h = h;
    this.domain = domain;
    s.model = buildCells(h, domain, s.model);
    // Positions from the first step: far from zero, neighbouring steps stay apart as doubles.
    s.origin = h.steps[0] ?? 0n;
    s.edges = h.stepsLast ? binEdges(h.steps, h.stepsLast, s.origin) : columnEdges(offsets(h.steps, s.origin));
    this.spanAxis();
    s.zoom = this.toRange(zoom);
    this.setOrder(order);
  }

  /**
   * The steps the run track's scalars reach in `run` (null: none drawn): the axis spans them too, so a loss
   * logged on past the layers' last step (NaN from there, say) is drawn, over columns marked not logged.
   */
  setTrackReach(run: string, reach: TrackReach | null): void {
    this.reach = { run, reach };
    if (!this.scene.h) return;
    this.spanAxis();
    this.rasterDirty = true;
    this.paintAll();
  }

  /** The axis this view spans by itself, on its own origin; null before it has data. */
  get ownSpan(): AxisSpan | null {
    return this.scene.h ? this.own : null;
  }

  /**
   * The axis of every run compared (`unionSpans` of their `ownSpan`), null for this view's own: compared
   * runs share one step axis, and past this run's steps its columns are drawn as not logged.
   */
  setSharedSpan(span: AxisSpan | null): void {
    const a = this.shared;
    if (a === span || (a && span && a.origin === span.origin && a.full.lo === span.full.lo && a.full.hi === span.full.hi &&
      a.labelled.lo === span.labelled.lo && a.labelled.hi === span.labelled.hi)) return;
    this.shared = span;
    if (!this.scene.h) return;
    this.spanAxis();
    this.rasterDirty = true;
    this.paintAll();
  }

  /** The axis' whole range, the stretches of it without the rows' steps, and where it names steps. */
  private spanAxis(): void {
    const s = this.scene;
    const h = s.h;
    if (!h) return;
    // Another run's reach (the track of the run shown before is still loading) is not this one's.
    const reach = this.reach?.run === h.run ? this.reach.reach : null;
    const n = h.steps.length;
    const track = reach ? { lo: offset(reach.first, s.origin), hi: offset(reach.last, s.origin) } : null;
    const full = spanRange(n > 0 ? fullRange(s.edges) : null, track);
    // Steps are named from the first logged step to the last, of the rows or the track.
    const rows = n > 0 ? { lo: 0, hi: offset((h.stepsLast ?? h.steps)[n - 1], s.origin) } : { lo: 0, hi: 0 };
    const labelled = track ? { lo: Math.min(rows.lo, track.lo), hi: Math.max(rows.hi, track.hi) } : rows;
    this.own = { origin: s.origin, full, labelled };
    const axis = unionSpans([this.own, this.shared], s.origin) ?? this.own;
    s.full = axis.full;
    s.labelled = axis.labelled;
    const ends = h.loggedSteps;
    // The rows' cells reach their first and last step's edges; a window's answer short of them, half a step.
    const cells = ends && n > 0 ? {
      lo: h.steps[0] <= ends[0] ? s.edges[0] : offset(ends[0], s.origin) - 0.5,
      hi: (h.stepsLast ?? h.steps)[n - 1] >= ends[1] ? s.edges[n] : offset(ends[1], s.origin) + 0.5,
    } : null;
    s.unlogged = cells ? outsideRanges(s.full, cells) : [];
  }

  /** A zoom window of exact steps as positions on this view's axis. */
  private toRange(zoom: [Step, Step] | null): StepRange | null {
    return zoom ? { lo: offset(zoom[0], this.scene.origin), hi: offset(zoom[1], this.scene.origin) } : null;
  }

  setOrder(order: number[]): void {
    this.scene.order = order;
    const h = this.scene.h;
    // A folded block's members are found at its row: the selection, a finding's outlines and scrolling land there.
    this.scene.position = new Map(order.flatMap((row, pos) => (h ? rowMembers(h, row) : []).map((name) => [name, pos] as const)));
    for (const [pos, row] of order.entries()) if (h) this.scene.position.set(h.layers[row], pos);
    this.scene.labels.clear();
    this.rasterDirty = true;
    this.layout();
    // Other rows may stand where the pointer rests: its tooltip must not describe the one they replaced.
    this.pointer.refresh();
  }

  setZoom(zoom: [Step, Step] | null): void {
    this.scene.zoom = this.toRange(zoom);
    this.rasterDirty = true;
    this.paintAll();
  }

  /** The step window in use: the zoom clamped to this heatmap's steps, or all of them. */
  get range(): StepRange {
    return this.scene.range;
  }

  get fullSteps(): StepRange {
    return this.scene.full;
  }

  setSelection(sel: Selection | null): void {
    this.scene.selection = sel;
    this.track.setCursor(sel ? sel.step : null);
    this.paintTrack();
    this.paintOverlay();
  }

  /** The run-level scalars over this view's steps, with the run's findings and the one selected. */
  setTrack(track: Track | null, findings: readonly Finding[], selected: string): void {
    const before = this.track.labels().join("\u0000");
    this.track.set(track, findings, selected);
    if (this.track.labels().join("\u0000") !== before) this.layout();
    else this.paintTrack();
  }

  /** The selected finding, marked on the track as its cells are outlined in the heatmap. */
  setSelectedFinding(id: string): void {
    this.track.setSelected(id);
    this.paintTrack();
  }

  /** Where the track puts a step: the heatmap's own mapping, so both share the axis and the zoom. */
  private trackFrame(): TrackFrame | null {
    const s = this.scene;
    const g = s.geo;
    if (!g || !s.h) return null;
    return { labelW: g.labelW, plotW: g.plotW, x: (step) => xOfStep(offset(step, s.origin), s.range, g.plotW) };
  }

  paintTrack(): void {
    this.track.paint(this.trackFrame());
  }

  setHighlight(hl: Highlight | null): void {
    this.scene.highlight = hl;
    this.paintOverlay();
  }

  setCaption(text: string): void {
    this.caption.hidden = !text;
    this.caption.textContent = text;
    this.caption.title = text;
  }

  get scrollTop(): number {
    return this.scroller.scrollTop;
  }

  set scrollTop(v: number) {
    if (Math.abs(this.scroller.scrollTop - v) >= 1) this.scroller.scrollTop = v;
  }

  clear(): void {
    // The tooltip is the page's: a view that showed nothing cannot have put it up (one run
    // shown, the empty second view is cleared on every redraw of the first).
    if (this.scene.h) this.tooltip.hide();
    this.scene.h = null;
    this.track.paint(null);
    this.scene.model = null;
    this.scene.geo = null;
    for (const c of [this.axis, this.body, this.overlay]) {
      c.width = 0;
      c.height = 0;
    }
  }

  /** Recomputes sizes for the current container and repaints everything. */
  layout(): void {
    const s = this.scene;
    const h = s.h;
    if (!h) return;
    // The track's names share the label column, so its plot and the heatmap's line up. Sized for
    // every label the run's rows can have, the column keeps its width as blocks fold and roles switch.
    const names = [...this.runLabels, ...s.order.map((i) => labelParts(h, i).join(h.layers[i])), ...this.track.labels()];
    // Names never take more than a third of the width from the cells (two runs side by side).
    const labelW = Math.min(rowLabelWidth(names, measurer(ROW_FONT)), Math.max(80, Math.floor(this.root.clientWidth / 3)));
    // The scroll box's inner width: its scrollbar's room (kept whether the rows scroll or not) is not the cells'.
    const inner = this.scroller.clientWidth || this.root.clientWidth;
    const plotW = Math.max(120, Math.floor(inner - labelW - 4));
    const maxViewH = maxViewHeight();
    const held = this.heldRowH !== null && this.heldRowH.key === this.rowHeightKey() ? this.heldRowH.cellH : null;
    if (held === null) this.heldRowH = null;
    const cellH = held ?? rowHeight(s.order.length, maxViewH);
    const totalH = Math.max(cellH, s.order.length * cellH);
    const viewH = Math.min(totalH, maxViewH);
    const width = labelW + plotW;
    const scale = backingScale(width, viewH, window.devicePixelRatio || 1);
    const old = s.geo;
    s.geo = { labelW, plotW, cellH, viewH, totalH, scale };
    if (!old || old.labelW !== labelW || old.plotW !== plotW || old.scale !== scale || old.cellH !== cellH) {
      s.labels.clear();
      this.rasterDirty = true;
    }
    this.scroller.style.height = `${AXIS_HEIGHT + viewH}px`;
    this.space.style.height = `${totalH}px`;
    this.port.style.height = `${viewH}px`;
    this.port.style.top = `${AXIS_HEIGHT}px`;
    size(this.axis, width, AXIS_HEIGHT, scale);
    size(this.body, width, viewH, scale);
    size(this.overlay, width, viewH, scale);
    this.paintAll();
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      paintBody(this.scene, this.body);
      this.paintOverlay();
    });
  }

  /** Rasterises the cells again when data, order, zoom or size changed since the last time. */
  ensureRaster(): void {
    if (!this.rasterDirty) return;
    this.rasterDirty = false;
    raster(this.scene);
  }

  /** Paints synchronously: callers (and the benchmark) see the pixels on return. */
  paintAll(): void {
    if (this.pending) {
      cancelAnimationFrame(this.pending);
      this.pending = 0;
    }
    this.ensureRaster();
    this.paintTrack();
    paintAxis(this.scene, this.axis);
    paintBody(this.scene, this.body);
    this.paintOverlay();
  }

  paintOverlay(): void {
    paintOverlay(this.scene, this.overlay);
  }

  /** Where the row `layer` sits in sight: CSS pixels from the top of the rows shown, or null. */
  rowOffset(layer: string): number | null {
    const g = this.scene.geo;
    const pos = this.scene.position.get(layer);
    return g && pos !== undefined ? pos * g.cellH - this.scroller.scrollTop : null;
  }

  /**
   * The next layouts keep this row height until the run, role or window height changes: a fold
   * or an unfold neither shrinks nor grows the rows, so the rows around the clicked one stay put.
   */
  holdRowHeight(): void {
    const g = this.scene.geo;
    if (g) this.heldRowH = { key: this.rowHeightKey(), cellH: g.cellH };
  }

  private rowHeightKey(): string {
    const h = this.scene.h;
    return h ? [h.run, h.role, maxViewHeight()].join("\u0000") : "";
  }

  /** Scrolls so the first row of `block` (its folded row or its first member) sits `offset` px down the rows in sight. */
  placeBlock(block: string, offset: number): void {
    const s = this.scene;
    const h = s.h;
    const g = s.geo;
    if (!h || !g) return;
    const pos = s.order.findIndex((row) => h.blocks[row] === block);
    if (pos < 0) return;
    this.scroller.scrollTop = Math.max(0, pos * g.cellH - offset);
    paintBody(s, this.body);
    this.paintOverlay();
  }

  /** Scrolls the rows so `layer` is visible; centred unless `center` is false and it already shows. */
  scrollToLayer(layer: string, center = true): void {
    const g = this.scene.geo;
    const pos = this.scene.position.get(layer);
    if (!g || pos === undefined) return;
    const y = pos * g.cellH;
    const top = this.scroller.scrollTop;
    if (!center && y >= top && y + g.cellH <= top + g.viewH) return;
    this.scroller.scrollTop = Math.max(0, y - (center ? g.viewH / 2 - g.cellH / 2 : 0));
    paintBody(this.scene, this.body);
    this.paintOverlay();
  }

  /** Scrolls the rows so all of `layer`'s row shows, centred when it did not (`revealTop`). */
  revealLayer(layer: string): void {
    const g = this.scene.geo;
    const pos = this.scene.position.get(layer);
    if (!g || pos === undefined) return;
    const top = revealTop(pos, g.cellH, g.viewH, this.scroller.scrollTop);
    if (top !== this.scroller.scrollTop) {
      this.scroller.scrollTop = top;
      paintBody(this.scene, this.body);
      this.paintOverlay();
    }
  }

  /** The steps the axis names, exact (for the browser tests). */
  axisSteps(): string[] {
    return axisLabels(this.scene).map((l) => l.step.toString());
  }

  /**
   * The cells whose centre lies inside the selected finding's outlines, every
   * row (also those scrolled away), with their status: what the browser tests
   * compare with the heatmap's colours.
   */
  highlightCells(): { layer: string; step: string; status: string }[] {
    const s = this.scene;
    const g = s.geo;
    const h = s.h;
    if (!g || !h || !s.highlight) return [];
    const out: { layer: string; step: string; status: string }[] = [];
    for (const [x, y, w, hh] of highlightRects(s, s.highlight.spans)) {
      const top = y + s.scrollTop;
      for (let pos = Math.round(top / g.cellH); pos < Math.round((top + hh) / g.cellH); pos++) {
        const row = s.order[pos];
        h.steps.forEach((step, j) => {
          const cx = g.labelW + xOfStep((s.edges[j] + s.edges[j + 1]) / 2, s.range, g.plotW);
          if (cx > x && cx < x + w) out.push({ layer: h.layers[row], step: step.toString(), status: statusName(h.status[row][j], h.status_names) });
        });
      }
    }
    return out;
  }

  /** The row under a client y, and the rows' height, without scrolling (for the browser tests). */
  rowAtY(clientY: number): { layer: string; cellH: number } | null {
    const s = this.scene;
    const g = s.geo;
    if (!s.h || !g) return null;
    const pos = Math.floor((clientY - this.port.getBoundingClientRect().top + this.scroller.scrollTop) / g.cellH);
    return pos >= 0 && pos < s.order.length ? { layer: s.h.layers[s.order[pos]], cellH: g.cellH } : null;
  }

  /**
   * Client coordinates of the centre of a cell, scrolling it into view first;
   * null when the layer or step is not shown. Used by the browser tests and the
   * benchmark to point at cells.
   */
  cellCenter(layer: string, step: Step): { x: number; y: number } | null {
    const g = this.scene.geo;
    const pos = this.scene.position.get(layer);
    const span = spanX(this.scene, step, step);
    if (!g || pos === undefined || !span) return null;
    this.scrollToLayer(layer, false);
    const rect = this.port.getBoundingClientRect();
    return {
      x: rect.left + g.labelW + (span[0] + span[1]) / 2,
      y: rect.top + pos * g.cellH - this.scroller.scrollTop + g.cellH / 2,
    };
  }
}

function size(c: HTMLCanvasElement, w: number, h: number, scale: number): void {
  const dw = Math.max(1, Math.round(w * scale));
  const dh = Math.max(1, Math.round(h * scale));
  if (c.width !== dw) c.width = dw;
  if (c.height !== dh) c.height = dh;
  c.style.width = `${w}px`;
  c.style.height = `${h}px`;
}
