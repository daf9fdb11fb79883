// Colour legend above the heatmap.

import type { Heatmap } from "./api";
import { denormalize, HEALTH_BANDS, rgbToCss, STATUS_LABELS, statusColor, viridis } from "./colors";
import type { Domain, Rgb } from "./colors";
import { el } from "./dom";
import { formatValue } from "./format";

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
  const parts = HEALTH_BANDS.flatMap((b) => [`${rgbToCss(b.from)} ${pct(b.lo)}`, `${rgbToCss(b.to)} ${pct(b.hi)}`]);
  return `linear-gradient(to right, ${parts.join(", ")})`;
}

function swatch(color: string, label: string): HTMLElement {
  const item = el("span", "gh-legend-item");
  const box = el("span", "gh-swatch");
  box.style.background = color;
  item.append(box, el("span", "", label));
  return item;
}

function bar(title: string, background: string, left: string, right: string, middle?: string): HTMLElement {
  const item = el("span", "gh-legend-item");
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

export function buildLegend(h: Heatmap, domain: Domain | null): HTMLElement {
  const legend = el("div", "gh-legend");
  if (h.metric === "health") {
    for (const name of ["ok", "warn", "critical", "no_data"]) {
      legend.append(swatch(statusColor(name), STATUS_LABELS[name]));
    }
    legend.append(bar("score", healthGradientCss(), "0", "1"));
    return legend;
  }
  const scale = domain?.scale ?? h.scale;
  const title = scale === "log" ? `${h.metric} (log scale)` : h.metric;
  if (domain) {
    const mid = domain.scale === "log" ? formatValue(denormalize(0.5, domain), 3) : undefined;
    legend.append(bar(title, gradientCss(viridis), formatValue(domain.min), formatValue(domain.max), mid));
  } else {
    legend.append(el("span", "gh-legend-title", title), el("span", "", "has no values here"));
  }
  legend.append(swatch(statusColor("no_data"), STATUS_LABELS.no_data));
  return legend;
}
