// Colour legend above the heatmap.

import {
  denormalize, diverging, healthBands, NONFINITE_LABEL, nonfiniteColor, NOT_JUDGED_COLOR, rgbToCss, STATUS_LABELS,
  statusColor, viridis,
} from "./colors";
import type { Heatmap } from "./api";
import type { Domain, Rgb } from "./colors";
import { el } from "./dom";
import { formatValue, humanize } from "./format";
import { NOT_JUDGED_QUALITY, qualitiesValues, qualityText } from "./quality";
import { guessLegend } from "./role_guess";
import { vocabulary } from "./vocabulary";

// What each legend item means, for its hover, in the words the docs use for each status (docs/http_api.md's
// codes, the tutorial's "Reading the tab"); a value's quality in quality.ts' words. The one place the
// legend's items are explained.
const MEANINGS: Readonly<Record<string, string>> = {
  ok: "ok: no warn or critical finding covers this layer at this step",
  warn: "warn: a warn finding covers this layer at this step",
  critical: "critical: a critical finding covers this layer at this step",
  no_data: "no data: nothing logged for this layer at this step",
  nonfinite: "NaN / Inf: this step's tensor held NaN or Inf; painted apart from the colour scale, whatever its "
    + "finite values say",
  score: "health score: 0 (worst) to 1 (best), continuous, so a layer drifting toward a threshold shows before it "
    + "crosses it",
  scale: "the colour scale, from the lowest to the highest value shown; cells painted apart from it are not on it",
};

/** What the heatmaps shown hold besides their colours: their values' qualities, and whether some prove nothing. */
export interface LegendMarks {
  /** The quality names of the values (`Heatmap.qualities`). */
  qualities: readonly string[];
  /** Whether some cell proves nothing (`Heatmap.notJudgedCells`): the grey swatch then names it too. */
  notJudged: boolean;
}

const NO_MARKS: LegendMarks = { qualities: [], notJudged: false };

/** The marks of the heatmaps shown side by side (`b` null without a second run). */
export function legendMarks(a: Heatmap, b: Heatmap | null): LegendMarks {
  return {
    qualities: [...new Set([...a.qualities, ...(b?.qualities ?? [])])],
    notJudged: a.notJudgedCells || b?.notJudgedCells === true,
  };
}

/**
 * The hover of a metric's colour scale: what it spans, and what its values are ("Lower bound: the true value
 * is at least this").
 */
export function scaleMeaning(qualities: readonly string[]): string {
  const shown = qualities.filter((q) => q !== NOT_JUDGED_QUALITY);
  if (shown.length === 0) return MEANINGS.scale;
  const values = shown.length === 1 ? qualityText(shown[0]) : `values: ${qualitiesValues(shown)}`;
  return `${MEANINGS.scale}. ${values[0].toUpperCase()}${values.slice(1)}`;
}

/** Statuses in the legend: the healthiest first, no data (code 0) last. */
function legendStatuses(): string[] {
  const byCode = [...vocabulary().statuses].sort((a, b) => a.code - b.code);
  return [...byCode.filter((s) => s.code > 0), ...byCode.filter((s) => s.code <= 0)].map((s) => s.status);
}

/**
 * The legend's swatches beside its colour scale, [colour, label, meaning]: health's statuses, and in every view a
 * step whose tensor held NaN or Inf, with its own paint apart from the scale (and from the critical scores),
 * then no data, which names not judged too where some cell proves nothing (`notJudged`: painted alike).
 */
export function legendSwatches(metric: string, notJudged = false): [string, string, string][] {
  const nan: [string, string, string] = [nonfiniteColor(metric), NONFINITE_LABEL, MEANINGS.nonfinite];
  const noData: [string, string, string] = notJudged
    ? [NOT_JUDGED_COLOR, `${STATUS_LABELS.no_data} / not judged`,
      `${MEANINGS.no_data}; ${qualityText(NOT_JUDGED_QUALITY)}`]
    : [statusColor("no_data"), STATUS_LABELS.no_data, MEANINGS.no_data];
  if (metric !== "health") return [nan, noData];
  const statuses = legendStatuses().map((name): [string, string, string] => [
    statusColor(name), STATUS_LABELS[name], MEANINGS[name] ?? STATUS_LABELS[name]]);
  // No data, the last status, stays last.
  return [...statuses.slice(0, -1), nan, ...statuses.slice(-1)];
}

/** CSS linear-gradient sampling a colour map; `stops` samples keep it smooth. */
export function gradientCss(map: (t: number) => Rgb, stops = 11): string {
  const parts: string[] = [];
  for (let k = 0; k < stops; k++) {
    const t = k / (stops - 1);
    parts.push(`${rgbToCss(map(t))} ${Math.round(t * 100)}%`);
  }
  return `linear-gradient(to right, ${parts.join(", ")})`;
}

/** The health score bands as a CSS gradient with hard edges between bands. */
export function healthGradientCss(): string {
  const pct = (t: number): string => `${+(t * 100).toFixed(2)}%`;
  const parts = healthBands().flatMap((b) => [`${rgbToCss(b.from)} ${pct(b.lo)}`, `${rgbToCss(b.to)} ${pct(b.hi)}`]);
  return `linear-gradient(to right, ${parts.join(", ")})`;
}

function swatch(color: string, label: string, meaning: string): HTMLElement {
  const item = el("span", "gh-legend-item");
  item.title = meaning;
  const box = el("span", "gh-swatch");
  box.style.background = color;
  item.append(box, el("span", "", label));
  return item;
}

function bar(
  title: string, meaning: string, background: string, left: string, right: string, middle?: string,
): HTMLElement {
  const item = el("span", "gh-legend-item");
  item.title = meaning;
  const gradient = el("span", "gh-gradient");
  gradient.style.background = background;
  if (middle !== undefined) gradient.append(el("span", "gh-gradient-mid", middle));
  item.append(
    el("span", "gh-legend-title", title),
    el("span", "gh-legend-value", left),
    gradient,
    el("span", "gh-legend-value", right),
  );
  return item;
}

/** The "?" after guessed rows' names, in words (none when no row here is guessed). */
function guessItem(decidedBy: readonly string[]): HTMLElement[] {
  const guess = guessLegend(decidedBy);
  if (!guess) return [];
  const item = el("span", "gh-legend-item gh-legend-guess", guess.label);
  item.title = guess.title;
  return [item];
}

/**
 * Legend for a metric (or health) and its colour domain; `shared` notes a scale shared by two runs.
 * `decidedBy` (per row, how its role was decided) adds what the "?" after a guessed row's name means.
 */
export function buildLegend(
  metric: string, scale: "linear" | "log", domain: Domain | null, shared = false, decidedBy: readonly string[] = [],
  marks: LegendMarks = NO_MARKS,
): HTMLElement {
  const legend = el("div", "gh-legend");
  if (metric === "health") {
    for (const [color, label, meaning] of legendSwatches(metric)) legend.append(swatch(color, label, meaning));
    legend.append(bar("score", MEANINGS.score, healthGradientCss(), "0", "1"), ...guessItem(decidedBy));
    return legend;
  }
  const used = domain?.scale ?? scale;
  const title = humanize(metric) + (used === "log" ? " (log scale)" : "") + (shared ? ", shared scale" : "");
  if (domain) {
    const map = domain.diverging ? diverging : viridis;
    const mid = domain.scale === "log" || domain.diverging ? formatValue(denormalize(0.5, domain), 3) : undefined;
    legend.append(bar(title, scaleMeaning(marks.qualities), gradientCss(map), formatValue(domain.min),
      formatValue(domain.max), mid));
  } else {
    legend.append(el("span", "gh-legend-title", title), el("span", "", "has no values here"));
  }
  for (const [color, label, meaning] of legendSwatches(metric, marks.notJudged)) {
    legend.append(swatch(color, label, meaning));
  }
  legend.append(...guessItem(decidedBy));
  return legend;
}

/** The same legend drawn on a canvas, for the PNG export; `y` is the top of a 16 px strip. */
export function drawLegend(
  ctx: CanvasRenderingContext2D, x: number, y: number, metric: string, domain: Domain | null, fg: string,
  notJudged = false,
): void {
  ctx.save();
  ctx.font = "12px Roboto, sans-serif";
  ctx.textBaseline = "middle";
  ctx.fillStyle = fg;
  const text = (s: string): void => {
    ctx.fillStyle = fg;
    ctx.fillText(s, x, y + 8);
    x += ctx.measureText(s).width + 8;
  };
  const box = (color: string): void => {
    ctx.fillStyle = color;
    ctx.fillRect(x, y + 2, 12, 12);
    x += 16;
  };
  if (metric === "health") {
    for (const [color, label] of legendSwatches(metric)) {
      box(color);
      text(label);
    }
  } else if (domain) {
    text(humanize(metric) + (domain.scale === "log" ? " (log scale)" : ""));
    text(formatValue(domain.min));
    const map = domain.diverging ? diverging : viridis;
    for (let k = 0; k < 160; k++) {
      ctx.fillStyle = rgbToCss(map(k / 159));
      ctx.fillRect(x + k, y + 2, 1, 12);
    }
    x += 168;
    text(formatValue(domain.max));
    for (const [color, label] of legendSwatches(metric, notJudged)) {
      box(color);
      text(label);
    }
  }
  ctx.restore();
}
