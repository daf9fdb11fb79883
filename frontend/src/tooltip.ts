// One floating tooltip for the whole page, and what it says about a heatmap cell;
// its lines are set with textContent.

import { cellQuality, cellStep } from "./api";
import type { CellRole, Heatmap, Incomplete } from "./api";
import { NONFINITE_QUALITY, STATUS_LABELS, statusName } from "./colors";
import { el } from "./dom";
import { callText, formatStep, formatValue, humanize } from "./format";
import { metricCell, valueText } from "./quality";
import type { Step } from "./steps";
import { kindLabel, kindMetric, kindStepsNeeded } from "./vocabulary";

export class Tooltip {
  readonly root = el("div", "gh-tooltip");

  constructor() {
    this.root.hidden = true;
    this.root.setAttribute("role", "tooltip");
  }

  show(lines: readonly (readonly [string, string])[], clientX: number, clientY: number): void {
    const rows = lines.map(([key, value]) => {
      const line = el("div", "gh-tip-line");
      line.append(el("span", "gh-tip-key", key), el("span", "gh-tip-value", value));
      return line;
    });
    this.root.replaceChildren(...rows);
    this.root.hidden = false;
    const pad = 12;
    const w = this.root.offsetWidth;
    const h = this.root.offsetHeight;
    // Below-right of the pointer, flipped when it would leave the viewport.
    const left = clientX + pad + w > window.innerWidth ? Math.max(0, clientX - pad - w) : clientX + pad;
    const top = clientY + pad + h > window.innerHeight ? Math.max(0, clientY - pad - h) : clientY + pad;
    this.root.style.left = `${left}px`;
    this.root.style.top = `${top}px`;
  }

  hide(): void {
    this.root.hidden = true;
  }
}

/**
 * The tooltip over a stretch of the axis the rows did not log (the run track's loss goes on past them):
 * the step under the pointer, and that the rows have nothing there, after their last step or before their first.
 */
export function unloggedLines(h: Heatmap, step: Step, after: boolean, run: string): [string, string][] {
  const lines: [string, string][] = run ? [["run", run]] : [];
  const ends = h.loggedSteps;
  const edge = ends ? formatStep(after ? ends[1] : ends[0]) : null;
  const where = edge === null ? "" : after ? ` after step ${edge}` : ` before step ${edge}`;
  lines.push(["step", formatStep(step)],
    ["layers", `not logged: no ${h.role} data${where}; the run track above shows the steps logged here`]);
  return lines;
}

/** The tooltip of one heatmap cell: run (when two are compared), layer, step, value and status. */
export function cellTooltipLines(h: Heatmap, row: number, col: number, run: string): [string, string][] {
  const status = statusName(h.status[row][col], h.status_names);
  const rule = h.rules[row][col];
  const value = h.values[row][col];
  const lines: [string, string][] = [];
  if (run) lines.push(["run", run]);
  lines.push(
    ...layerLines(h.layers[row]),
    ["step", formatStep(cellStep(h, row, col))],
    [h.metric === "health" ? "score" : humanize(h.metric), value === null ? "no data" : cellValueText(h, row, col, value)],
    ["status", (STATUS_LABELS[status] ?? status) + (rule ? ` \u2014 ${kindLabel(rule)}` : "")],
  );
  const last = h.stepsLast?.[col];
  // An ok cell naming a rule: the rule held there, with no warning covering it.
  if (status === "ok" && rule) lines.push(["held", heldText(h, row, col, rule)]);
  if (last !== undefined && last !== h.steps[col]) {
    lines.push(["column", `worst of steps ${formatStep(h.steps[col])} to ${formatStep(last)}; zoom in for each step`]);
  }
  if (h.incomplete && col === h.steps.length - 1) lines.push(["incomplete", incompleteText(h.incomplete)]);
  return lines;
}

/** How a cell's value was had, for its hover; a health score at a NaN/Inf step is no statistic of finite values. */
function cellValueText(h: Heatmap, row: number, col: number, value: number): string {
  const quality = cellQuality(h, row, col);
  if (h.metric === "health" && quality === NONFINITE_QUALITY) return `${formatValue(value)} (this step held NaN/Inf)`;
  return valueText(value, quality, formatValue);
}

/**
 * A health cell's line for the statistic its rule reads (`rule` a finding kind, `role` the heatmap's), from
 * the cell's answer: "max abs": "1.2e+03 (exact); rule: above 1000". The statistic is the one the rule that
 * fired there read, as the server says (a kind's two rules may read two statistics, or one against two
 * thresholds); where none of the kind's cell rules held (a finding's time rule decided), the kind's chart
 * metric. The heatmap of scores carries no such value. Null when the cell's answer has none of it.
 */
export function ruleValueLine(cell: CellRole | undefined, rule: string, role: string): [string, string] | null {
  const read = cell?.rule_read;
  if (read && read.kind === rule) {
    const [value, , meaning] = metricCell(read.value, read.quality, formatValue);
    const name = read.abs ? `|${humanize(read.metric)}|` : humanize(read.metric);
    const limit = read.limit === null ? "" : `; rule: ${read.side} ${formatValue(read.limit)}`;
    return [name, (meaning ? `${value} (${meaning})` : value) + limit];
  }
  const metric = kindMetric(rule, role);
  const m = cell?.metrics[metric];
  if (!m) return null;
  const [value, , meaning] = metricCell(m.value, m.quality, formatValue);
  return [humanize(metric), meaning ? `${value} (${meaning})` : value];
}

/**
 * A cell's tooltip once its answer came (`cell` its role's): the server's `held` line, counted over the whole
 * row, in place of the heatmap's (which sees only the steps sent), and on a health cell a rule decided, the
 * value its rule read (`ruleValueLine`) after them. The lines as they were where the answer adds nothing.
 */
export function withCellAnswer(lines: readonly [string, string][], cell: CellRole | undefined, h: Heatmap,
  rule: string | null): [string, string][] {
  const held = cell?.held ?? null;
  const out = lines.map(([key, value]): [string, string] => [key, key === "held" && held !== null ? held : value]);
  const ruleLine = h.metric === "health" && rule ? ruleValueLine(cell, rule, h.role) : null;
  return ruleLine ? [...out, ruleLine] : out;
}

/** Why an ok cell where `rule` held is no warning: for how many logged steps in a row it held, against
 * the steps its finding needs. A binned column stands for several steps: it says only that it held. In a
 * window of the run (a zoom's answer) a stretch reaching the window's edge may go on past it: counted in
 * view, and said so (the cell's answer, `held`, counts over the whole row and replaces this line). */
export function heldText(h: Heatmap, row: number, col: number, rule: string): string {
  const label = kindLabel(rule).toLowerCase();
  if (h.stepsLast !== null) return `${label} held in this column, with no warning; zoom in for each step`;
  const rules = h.rules[row];
  let [first, end] = [col, col + 1];
  while (first > 0 && rules[first - 1] === rule) first--;
  while (end < rules.length && rules[end] === rule) end++;
  const inARow = end - first;
  const needed = kindStepsNeeded(rule);
  const cut = h.windowSteps < h.stepsTotal && (first === 0 || end === rules.length);
  const held = cut
    ? inARow === 1 ? `${label} at this step, the only one in view` : `${label} at this step, one of ${inARow} logged steps in a row in view`
    : inARow === 1 ? `${label} at this step only` : `${label} at this step, one of ${inARow} logged steps in a row`;
  if (needed !== null && inARow < needed) return `${held}; a finding needs ${needed} logged steps in a row`;
  return `${held}; no warning covers it (see the layer's findings)`;
}

/** A layer's tooltip lines: its name and, for a module's later call in forward (relu[1]), what that is. */
export function layerLines(name: string): [string, string][] {
  const call = callText(name);
  return call === null ? [["layer", name]] : [["layer", name], ["call", call]];
}

/** Why the last column is hatched: the step is still being written. */
export function incompleteText(inc: Incomplete): string {
  return `${inc.layers} of ${inc.layers_before} layers so far; the writer may still be writing this step`;
}
