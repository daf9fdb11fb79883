// Pointer and keyboard on the heatmap: hover with its tooltip, click to select,
// drag across steps to zoom (the brush), double-click to zoom out, arrow keys to
// move the selection.

import { cellStep, columnOfStep, fetchCell, rowLoaded } from "./api";
import type { CellRole, Heatmap } from "./api";
import { blockOfRow, foldedTooltipLines, isFoldedRow, labelParts, rowMembers } from "./fold";
import { clampRange, columnAt, stepOfX } from "./layout";
import { ceilStep, floorStep, roundStep } from "./steps";
import type { Step } from "./steps";
import type { Hit, Scene } from "./heatmap_paint";
import { guessLine } from "./role_guess";
import { cellTooltipLines, layerLines, unloggedLines, withCellAnswer } from "./tooltip";
import type { Tooltip } from "./tooltip";

// A drag shorter than this is a click.
const BRUSH_MIN_PX = 5;
// A click selects its cell this long after the button is released, unless a second
// press makes it a double-click (zoom out), which must not open a cell on the way.
const CLICK_DELAY_MS = 300;
const ARROWS = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"];
// A health cell's rule value is asked for once the pointer rests on it this long, not for every cell crossed.
const RULE_VALUE_DELAY_MS = 150;
// Rule values kept before the cache starts over: hovering a long session's cells never grows it without end.
const RULE_VALUES_KEPT = 1000;

export interface HeatmapEvents {
  select(layer: string, step: Step): void;
  /** A zoom window in whole steps (exact); null for every step. */
  zoom(steps: [Step, Step] | null): void;
  scrolled?(top: number): void;
  /** A mark of a finding on the run track was clicked. */
  finding?(id: string): void;
  /**
   * The label of a row of a block was clicked: fold or unfold that block. `offset` is where the clicked
   * row sat (CSS pixels from the rows' top in sight), where the block's row goes after, under the pointer.
   */
  toggleBlock?(block: string, offset: number | null): void;
}

/** What the pointer needs from its view besides the scene. */
export interface PointerHost {
  readonly scene: Scene;
  readonly port: HTMLElement;
  readonly tooltip: Tooltip;
  readonly events: HeatmapEvents;
  runLabel(): string;
  paintOverlay(): void;
  scrollToLayer(layer: string, center: boolean): void;
  rowOffset(layer: string): number | null;
}

export class HeatmapPointer {
  private dragStart: { x: number; clientX: number; clientY: number } | null = null;
  /** Where the pointer last moved over the rows; null once it left them. */
  private pointer: { clientX: number; clientY: number } | null = null;
  private ruleTimer = 0;
  // Per cell hovered (run, role, layer, step): its role's cell answer (its rule's value, its held line).
  private cellAnswers = new Map<string, CellRole | undefined>();
  /** A click's selection, waiting to see whether a second click follows. */
  private pendingClick = 0;

  /** `brushed`: the elements besides the rows where a drag zooms too (the step axis, the run track),
   * all sharing the rows' x. */
  constructor(private readonly view: PointerHost, ...brushed: HTMLElement[]) {
    const port = view.port;
    for (const target of [port, ...brushed]) {
      target.addEventListener("mousedown", (e) => this.onDown(e));
      target.addEventListener("dblclick", () => {
        this.cancelClick();
        view.events.zoom(null);
      });
    }
    port.addEventListener("mousemove", (e) => this.onMove(e));
    port.addEventListener("mouseleave", () => {
      this.pointer = null;
      view.scene.hover = null;
      view.tooltip.hide();
      view.paintOverlay();
    });
    port.addEventListener("keydown", (e) => this.onKey(e));
    port.addEventListener("click", (e) => this.onLabelClick(e));
    window.addEventListener("mousemove", (e) => this.onDrag(e));
    window.addEventListener("mouseup", (e) => this.onUp(e));
  }

  /** The row position and the axis position under a point in client coordinates, inside the rows' plot. */
  private plotAt(clientX: number, clientY: number): { pos: number; at: number } | null {
    const s = this.view.scene;
    const g = s.geo;
    if (!g || !s.h) return null;
    const rect = this.view.port.getBoundingClientRect();
    const x = clientX - rect.left - g.labelW;
    const y = clientY - rect.top;
    if (x < 0 || x >= g.plotW || y < 0 || y >= g.viewH) return null;
    const pos = Math.floor((y + s.scrollTop) / g.cellH);
    return pos >= 0 && pos < s.order.length ? { pos, at: stepOfX(x, s.range, g.plotW) } : null;
  }

  /** The cell under a point in client coordinates. */
  private hitAt(clientX: number, clientY: number): Hit | null {
    const p = this.plotAt(clientX, clientY);
    const col = p ? columnAt(this.view.scene.edges, p.at) : -1;
    return p && col >= 0 ? { pos: p.pos, row: this.view.scene.order[p.pos], col } : null;
  }

  private plotX(clientX: number): number {
    const g = this.view.scene.geo;
    return g ? clientX - this.view.port.getBoundingClientRect().left - g.labelW : 0;
  }

  private onMove(e: MouseEvent): void {
    this.pointer = { clientX: e.clientX, clientY: e.clientY };
    this.hoverAt(e.clientX, e.clientY);
  }

  /**
   * The rows changed under a still pointer (a block folded or unfolded, new data,
   * another order): the hover and tooltip follow the row now under it.
   */
  refresh(): void {
    if (this.pointer && !this.dragStart) this.hoverAt(this.pointer.clientX, this.pointer.clientY);
  }

  private hoverAt(clientX: number, clientY: number): void {
    const s = this.view.scene;
    if (s.brush) return;
    const hit = this.hitAt(clientX, clientY);
    s.hover = hit && s.h ? hit : null;
    this.view.paintOverlay();
    if (!hit || !s.h) {
      if (!this.unloggedTooltip(clientX, clientY)) this.labelTooltip(clientX, clientY);
      return;
    }
    this.view.port.style.cursor = "";
    if (!rowLoaded(s.h, hit.row)) {
      const [, after] = labelParts(s.h, hit.row);
      this.view.tooltip.show([[isFoldedRow(s.h, hit.row) ? "block" : "layer", s.h.layers[hit.row] + after], ["cells", "loading\u2026"]], clientX, clientY);
      return;
    }
    const lines = foldedTooltipLines(s.h, hit.row, hit.col, cellTooltipLines(s.h, hit.row, hit.col, this.view.runLabel()));
    this.view.tooltip.show(lines, clientX, clientY);
    this.addRuleValue(s.h, hit, lines);
  }

  /**
   * On a health cell a rule decided, adds the value of the statistic that rule reads: the answer of scores
   * has none. On an ok cell where a rule held, puts the cell answer's count of the steps in a row, over
   * the whole row, for the heatmap's (a zoom's answer holds only the window's steps). Both are asked of
   * the cell route once the pointer rests, and kept per cell.
   */
  private addRuleValue(h: Heatmap, hit: Hit, lines: [string, string][]): void {
    window.clearTimeout(this.ruleTimer);
    const rule = h.rules[hit.row][hit.col];
    const held = lines.some(([key]) => key === "held");
    if (!((h.metric === "health" && rule) || held) || isFoldedRow(h, hit.row)) return;
    const layer = h.layers[hit.row];
    const step = cellStep(h, hit.row, hit.col);
    const key = [h.run, h.role, layer, step.toString()].join("\u0000");
    const show = (cell: CellRole | undefined): void => {
      const s = this.view.scene;
      const at = this.pointer;
      if (cell && at && s.h === h && s.hover?.row === hit.row && s.hover.col === hit.col) {
        this.view.tooltip.show(withCellAnswer(lines, cell, h, rule), at.clientX, at.clientY);
      }
    };
    if (this.cellAnswers.has(key)) {
      show(this.cellAnswers.get(key));
      return;
    }
    this.ruleTimer = window.setTimeout(() => {
      fetchCell(h.run, layer, step, h.role).then((cell) => {
        if (this.cellAnswers.size >= RULE_VALUES_KEPT) this.cellAnswers.clear();
        this.cellAnswers.set(key, cell.roles[h.role]);
        show(cell.roles[h.role]);
      }, () => undefined);
    }, RULE_VALUE_DELAY_MS);
  }

  /** The row whose label is under a point in client coordinates; -1 for none. */
  private labelRowAt(clientX: number, clientY: number): number {
    const s = this.view.scene;
    const g = s.geo;
    if (!g || !s.h) return -1;
    const rect = this.view.port.getBoundingClientRect();
    const x = clientX - rect.left;
    const pos = Math.floor((clientY - rect.top + s.scrollTop) / g.cellH);
    return x >= 0 && x < g.labelW && pos >= 0 && pos < s.order.length ? s.order[pos] : -1;
  }

  /** A click on the label of a row of a block folds or unfolds the block. */
  private onLabelClick(e: MouseEvent): void {
    const h = this.view.scene.h;
    const row = this.labelRowAt(e.clientX, e.clientY);
    const block = h && row >= 0 ? blockOfRow(h, row) : null;
    if (h && block) this.view.events.toggleBlock?.(block, this.view.rowOffset(h.layers[row]));
  }

  /** Over the rows where they logged nothing (the track goes on past them): says so; false elsewhere. */
  private unloggedTooltip(clientX: number, clientY: number): boolean {
    const s = this.view.scene;
    const p = this.plotAt(clientX, clientY);
    const u = p && s.h ? s.unlogged.find((r) => p.at >= r.lo && p.at < r.hi) : undefined;
    if (!p || !u || !s.h) return false;
    const at = p.at;
    this.view.port.style.cursor = "";
    this.view.tooltip.show(unloggedLines(s.h, roundStep(s.origin, at), u.after, this.view.runLabel()), clientX, clientY);
    return true;
  }

  /** Hovering a (possibly shortened) row label shows the full layer name. */
  private labelTooltip(clientX: number, clientY: number): void {
    const h = this.view.scene.h;
    const row = this.labelRowAt(clientX, clientY);
    const block = h && row >= 0 ? blockOfRow(h, row) : null;
    this.view.port.style.cursor = block ? "pointer" : "";
    if (!h || row < 0) {
      this.view.tooltip.hide();
    } else if (block && isFoldedRow(h, row)) {
      const n = rowMembers(h, row).length;
      this.view.tooltip.show([["block", block], ["layers", `${n}, the worst shown per step; click to unfold`]], clientX, clientY);
    } else {
      const lines = layerLines(h.layers[row]);
      // The "?" after a guessed row's name, in words where the name is hovered.
      const guess = guessLine(h.decided_by[row], h.role);
      if (guess) lines.push(guess);
      if (block) lines.push(["block", `${block}; click to fold`]);
      this.view.tooltip.show(lines, clientX, clientY);
    }
  }

  private cancelClick(): void {
    window.clearTimeout(this.pendingClick);
    this.pendingClick = 0;
  }

  private onDown(e: MouseEvent): void {
    const g = this.view.scene.geo;
    // The second press of a double-click: the first click's selection is dropped.
    if (e.detail >= 2) this.cancelClick();
    if (e.button !== 0 || !g) return;
    const x = this.plotX(e.clientX);
    if (x < 0 || x > g.plotW) return;
    this.dragStart = { x, clientX: e.clientX, clientY: e.clientY };
  }

  private onDrag(e: MouseEvent): void {
    const d = this.dragStart;
    const s = this.view.scene;
    if (!d || !s.geo) return;
    const x = this.plotX(e.clientX);
    if (!s.brush && Math.abs(x - d.x) < BRUSH_MIN_PX) return;
    s.brush = { x0: d.x, x1: Math.max(0, Math.min(s.geo.plotW, x)) };
    s.hover = null;
    this.view.tooltip.hide();
    this.view.paintOverlay();
  }

  private onUp(e: MouseEvent): void {
    const d = this.dragStart;
    const s = this.view.scene;
    this.dragStart = null;
    if (!d || !s.geo || !s.h) return;
    const brush = s.brush;
    s.brush = null;
    if (brush) {
      const r = s.range;
      const a = stepOfX(Math.min(brush.x0, brush.x1), r, s.geo.plotW);
      const b = stepOfX(Math.max(brush.x0, brush.x1), r, s.geo.plotW);
      this.view.paintOverlay();
      const range = clampRange({ lo: a, hi: b }, s.full);
      // Outward to whole steps, so the window is exact in the URL at any step.
      this.view.events.zoom(range ? [floorStep(s.origin, range.lo), ceilStep(s.origin, range.hi)] : null);
      return;
    }
    const hit = this.hitAt(d.clientX, d.clientY) ?? this.hitAt(e.clientX, e.clientY);
    // A row still loading has no cell to open yet.
    if (!hit || e.detail >= 2 || !rowLoaded(s.h, hit.row)) return;
    // A binned column opens the step its cell came from; read now, as the data may change meanwhile.
    const layer = s.h.layers[hit.row];
    const step = cellStep(s.h, hit.row, hit.col);
    this.cancelClick();
    this.pendingClick = window.setTimeout(() => {
      this.pendingClick = 0;
      this.view.events.select(layer, step);
    }, CLICK_DELAY_MS);
  }

  private onKey(e: KeyboardEvent): void {
    const s = this.view.scene;
    const h = s.h;
    const sel = s.selection;
    if (h && sel && e.key === "Enter") {
      // The keyboard's way to fold or unfold the selected row's block.
      const pos = s.position.get(sel.layer);
      const block = pos === undefined ? null : blockOfRow(h, s.order[pos]);
      if (block) {
        e.preventDefault();
        this.view.events.toggleBlock?.(block, this.view.rowOffset(sel.layer));
      }
      return;
    }
    if (!h || !sel || !ARROWS.includes(e.key)) return;
    const pos = s.position.get(sel.layer);
    const col = columnOfStep(h, sel.step);
    if (pos === undefined || col < 0) return;
    e.preventDefault();
    const [p, c] = arrowMove(e.key, pos, col, s.order.length, h);
    this.view.events.select(h.layers[s.order[p]], cellStep(h, s.order[p], c));
    this.view.scrollToLayer(h.layers[s.order[p]], false);
  }
}

/** Row position and column after an arrow key, kept inside the heatmap. */
function arrowMove(key: string, pos: number, col: number, rows: number, h: Heatmap): [number, number] {
  if (key === "ArrowLeft") return [pos, Math.max(0, col - 1)];
  if (key === "ArrowRight") return [pos, Math.min(h.steps.length - 1, col + 1)];
  if (key === "ArrowUp") return [Math.max(0, pos - 1), col];
  return [Math.min(rows - 1, pos + 1), col];
}
