// Page styles, injected by render() because the plugin page only loads one module.
// Colours follow TensorBoard's light and dark themes. data-theme on <html> is set
// from TensorBoard's own dark-mode switch when the host page is reachable; without
// it, prefers-color-scheme decides.

import { SWEEP_CSS } from "./sweep";

const LIGHT = `
  --gh-bg: #ffffff;
  --gh-fg: #212121;
  --gh-muted: #616161;
  --gh-border: #d0d0d0;
  --gh-panel: #f5f5f5;
  --gh-hover: #eeeeee;
  --gh-selected: #fff3e0;
  --gh-accent: #f57c00;
  --gh-link: #1976d2;
  --gh-error-bg: #fdecea;
  --gh-error-fg: #b71c1c;
  --gh-tip-bg: rgba(33, 33, 33, 0.94);
  --gh-tip-fg: #ffffff;
  --gh-bar: #5c6bc0;
  color-scheme: light;
`;

const DARK = `
  --gh-bg: #202124;
  --gh-fg: #e8eaed;
  --gh-muted: #b0b3b8;
  --gh-border: #5f6368;
  --gh-panel: #2d2e31;
  --gh-hover: #35363a;
  --gh-selected: #4a3a24;
  --gh-accent: #ffa726;
  --gh-link: #8ab4f8;
  --gh-error-bg: #4a1c1c;
  --gh-error-fg: #ffb4ab;
  --gh-tip-bg: rgba(248, 249, 250, 0.96);
  --gh-tip-fg: #202124;
  --gh-bar: #9fa8da;
  color-scheme: dark;
`;

export const CSS = `
:root { ${LIGHT} }
:root[data-theme="dark"] { ${DARK} }
@media (prefers-color-scheme: dark) {
  :root:not([data-theme="light"]) { ${DARK} }
}
html, body {
  margin: 0;
  background: var(--gh-bg);
  color: var(--gh-fg);
  font: 13px Roboto, sans-serif;
}
button, select, input { font: inherit; color: var(--gh-fg); }
a { color: var(--gh-link); }
code { font-family: "Roboto Mono", monospace; font-size: 12px; }
pre { font-family: "Roboto Mono", monospace; font-size: 12px; background: var(--gh-bg); border: 1px solid var(--gh-border); border-radius: 4px; padding: 8px 10px; overflow-x: auto; margin: 6px 0 10px; }
.gh-app { padding: 12px 16px 24px; }
.gh-toolbar {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 8px 16px;
  margin-bottom: 10px;
}
.gh-controls { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 16px; flex: 1 1 auto; }
.gh-controls[hidden] { display: none; }
.gh-toolbar > .gh-button:last-child { margin-left: auto; }
.gh-toolbar label { display: inline-flex; align-items: center; gap: 6px; color: var(--gh-muted); }
.gh-toolbar select, .gh-toolbar input[type="search"], .gh-runs input[type="search"], .gh-detail select {
  background: var(--gh-bg);
  border: 1px solid var(--gh-border);
  border-radius: 4px;
  padding: 3px 6px;
  max-width: 200px;
}
.gh-toolbar input[type="search"] { width: 130px; }
select:focus, input:focus, button:focus-visible, .gh-hm-port:focus-visible { outline: 2px solid var(--gh-accent); outline-offset: 1px; }
.gh-button, .gh-icon-button {
  background: var(--gh-bg);
  border: 1px solid var(--gh-border);
  border-radius: 4px;
  padding: 3px 10px;
  cursor: pointer;
}
.gh-button:hover:not(:disabled), .gh-icon-button:hover { background: var(--gh-hover); }
.gh-button:disabled { opacity: 0.45; cursor: default; }
.gh-icon-button { font-size: 18px; line-height: 1; padding: 2px 8px; }
.gh-spacer { flex: 1 1 auto; }
.gh-summary { color: var(--gh-muted); }
.gh-message {
  padding: 12px 14px;
  border-radius: 4px;
  background: var(--gh-panel);
  line-height: 1.5;
  max-width: 900px;
  margin-bottom: 12px;
}
.gh-message[hidden] { display: none; }
.gh-message p { margin: 0 0 6px; }
.gh-message p:last-child { margin-bottom: 0; }
.gh-message.gh-error { background: var(--gh-error-bg); color: var(--gh-error-fg); }
.gh-message.gh-loading { background: none; color: var(--gh-muted); padding-left: 0; }
.gh-error-text { color: var(--gh-error-fg); }
.gh-main {
  display: grid;
  grid-template-columns: 210px minmax(0, 1fr) 320px;
  gap: 16px;
  align-items: start;
}
.gh-main[hidden] { display: none; }
@media (max-width: 1100px) {
  .gh-main { grid-template-columns: 180px minmax(0, 1fr); }
  .gh-findings { grid-column: 1 / -1; }
}
@media (max-width: 700px) {
  .gh-main { grid-template-columns: minmax(0, 1fr); }
}
.gh-side-title { font-size: 12px; font-weight: 500; text-transform: uppercase; letter-spacing: 0.04em; color: var(--gh-muted); margin: 0 0 6px; display: flex; align-items: center; gap: 6px; }
.gh-runs ul, .gh-findings ul { list-style: none; margin: 0; padding: 0; }
.gh-runs { max-height: 80vh; overflow-y: auto; }
.gh-runs input[type="search"] { width: 100%; box-sizing: border-box; margin-bottom: 6px; }
.gh-run {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 6px;
  padding: 4px 6px;
  border-radius: 4px;
  cursor: pointer;
  border-left: 3px solid transparent;
}
.gh-run:hover { background: var(--gh-hover); }
.gh-run[aria-selected="true"] { background: var(--gh-selected); border-left-color: var(--gh-accent); }
.gh-run.gh-compared { border-left-color: var(--gh-link); }
/* Whole, wrapped after its separators (and anywhere in a piece longer than the row); its flex-basis, set
 * per name, is its longest piece, so the badge wraps under a name rather than squeeze it. */
.gh-run-name { flex: 1 1 auto; min-width: 0; overflow-wrap: anywhere; }
.gh-ranks-button { flex: none; font-size: 11px; line-height: 14px; padding: 0 6px; }
.gh-run-group summary { cursor: pointer; padding: 4px 6px; font-size: 12px; }
.gh-run-group ul { margin: 0 0 0 8px; }
.gh-run-counts { color: var(--gh-muted); font-size: 11px; white-space: nowrap; }
.gh-dot { flex: none; width: 10px; height: 10px; border-radius: 50%; display: inline-block; }
.gh-badge {
  display: inline-block;
  font-size: 11px;
  line-height: 16px;
  padding: 0 6px;
  border-radius: 8px;
  border: 1px solid var(--gh-border);
  white-space: nowrap;
}
.gh-sev-critical, .gh-status-critical { background: #d7263d; border-color: #d7263d; color: #fff; }
.gh-sev-warn, .gh-status-warn { background: #f5a623; border-color: #f5a623; color: #212121; }
.gh-sev-info { background: transparent; border-color: #1e88e5; color: var(--gh-fg); }
.gh-status-ok { background: #1a9e77; border-color: #1a9e77; color: #fff; }
.gh-status-no_data { background: #9e9e9e; border-color: #9e9e9e; color: #fff; }
.gh-run-failed { background: var(--gh-error-bg); border-color: var(--gh-error-fg); color: var(--gh-error-fg); }
.gh-legend {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 6px 16px;
  margin-bottom: 12px;
  color: var(--gh-muted);
}
.gh-legend-item { display: inline-flex; align-items: center; gap: 6px; }
.gh-legend-title { color: var(--gh-fg); }
.gh-legend-value { font-variant-numeric: tabular-nums; }
.gh-swatch { width: 12px; height: 12px; border-radius: 2px; display: inline-block; }
.gh-gradient { position: relative; display: inline-block; width: 160px; height: 12px; border-radius: 2px; }
.gh-gradient-mid { position: absolute; left: 50%; top: 14px; transform: translateX(-50%); font-size: 11px; white-space: nowrap; }
.gh-hint { color: var(--gh-muted); font-size: 12px; margin: 4px 0 10px; }
.gh-sampling-note { font-size: 12px; margin: 4px 0; padding: 4px 8px; border-left: 3px solid var(--gh-warn, #f5a623); }
/* What was not judged is a fact about the logs, not a problem found: the no-data grey. */
.gh-coverage-note { border-left-color: #9e9e9e; }
.gh-config-notice { margin: 0 0 8px; }
.gh-config-problem { font-family: monospace; overflow-wrap: anywhere; }
.gh-role-guess { color: var(--gh-muted); font-size: 12px; margin-top: 4px; }
.gh-role-guess summary { cursor: pointer; }
.gh-rule { font-size: 11px; background: var(--gh-panel, #f5f5f5); padding: 4px 6px; margin: 4px 0; white-space: pre-wrap; }
.gh-sampled { color: var(--gh-muted); }
.gh-center-head { display: flex; flex-wrap: wrap; align-items: flex-start; justify-content: space-between; gap: 4px 16px; }
.gh-center-head .gh-summary { padding-top: 1px; }
.gh-heatmaps { display: flex; gap: 16px; align-items: flex-start; }
.gh-heatmaps[hidden] { display: none; }
.gh-heatmaps.gh-stale { opacity: 0.55; }
.gh-hm { flex: 1 1 0; min-width: 0; user-select: none; }
.gh-hm[hidden] { display: none; }
.gh-hm-caption { font-weight: 500; margin-bottom: 4px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.gh-track { margin-bottom: 2px; }
.gh-track[hidden] { display: none; }
.gh-track-svg { display: block; overflow: hidden; }
.gh-track-bg { fill: var(--gh-panel); }
.gh-track-line { fill: none; stroke: var(--gh-link); stroke-width: 1.2; }
.gh-track-zero-start { fill: var(--gh-bg); stroke: var(--gh-link); stroke-width: 1.2; }
.gh-track-label { fill: var(--gh-fg); font-size: 12px; }
.gh-track-sub { fill: var(--gh-muted); font-size: 10px; }
.gh-track-onset, .gh-track-finding-onset { stroke-width: 1.5; stroke-dasharray: 3 2; }
.gh-track-tick { stroke-width: 1; stroke-opacity: 0.55; }
.gh-track-period { stroke-width: 1.2; }
.gh-track-mark { cursor: pointer; }
.gh-track-mark:focus { outline: none; }
.gh-track-mark:focus-visible { outline: 2px solid var(--gh-accent); outline-offset: 1px; }
.gh-track-mark-text { font-size: 10px; }
.gh-track-cursor { stroke: var(--gh-fg); stroke-width: 1; stroke-dasharray: 2 2; }
.gh-track-note { color: var(--gh-muted); font-size: 12px; margin: 2px 0; }
.gh-track-note[hidden] { display: none; }
.gh-hm-scroll { position: relative; overflow-x: hidden; overflow-y: auto; overscroll-behavior: contain; scrollbar-gutter: stable; }
/* A scrollbar that shows while the rows do not fit, also where the system hides idle ones; its room is
   kept when they do fit, so the cells keep their width. */
.gh-hm-scroll::-webkit-scrollbar { width: 10px; }
.gh-hm-scroll::-webkit-scrollbar-track { background: var(--gh-panel); }
.gh-hm-scroll::-webkit-scrollbar-thumb { background: var(--gh-muted); border-radius: 5px; border: 2px solid transparent; background-clip: padding-box; }
@supports not selector(::-webkit-scrollbar) { .gh-hm-scroll { scrollbar-width: thin; scrollbar-color: var(--gh-muted) var(--gh-panel); } }
.gh-hm-axis { display: block; position: sticky; top: 0; z-index: 1; cursor: col-resize; }
.gh-hm-space { position: relative; }
.gh-hm-port { position: sticky; left: 0; cursor: crosshair; outline: none; }
.gh-hm-body, .gh-hm-overlay { position: absolute; left: 0; top: 0; display: block; }
.gh-hm-overlay { pointer-events: none; }
.gh-tooltip {
  position: fixed;
  z-index: 10;
  pointer-events: none;
  background: var(--gh-tip-bg);
  color: var(--gh-tip-fg);
  border-radius: 4px;
  padding: 6px 8px;
  font-size: 12px;
  line-height: 1.45;
  max-width: 420px;
  box-shadow: 0 2px 6px rgba(0, 0, 0, 0.3);
}
.gh-tooltip[hidden] { display: none; }
.gh-tip-line { display: flex; gap: 8px; }
.gh-tip-key { opacity: 0.7; min-width: 44px; }
.gh-tip-value { overflow-wrap: anywhere; }
.gh-findings { max-height: 85vh; overflow-y: auto; }
.gh-finding {
  padding: 8px 8px 8px 10px;
  border-radius: 4px;
  border-left: 3px solid var(--gh-border);
  margin-bottom: 6px;
  background: var(--gh-panel);
  cursor: pointer;
  line-height: 1.4;
}
.gh-finding:hover { background: var(--gh-hover); }
.gh-finding[aria-selected="true"] { background: var(--gh-selected); outline: 1px solid var(--gh-accent); }
.gh-finding.gh-sev-border-critical { border-left-color: #d7263d; }
.gh-finding.gh-sev-border-warn { border-left-color: #f5a623; }
.gh-finding.gh-sev-border-info { border-left-color: #1e88e5; }
.gh-finding-fold {
  padding: 6px 8px 6px 10px;
  border-radius: 4px;
  border-left: 3px solid var(--gh-border);
  margin-bottom: 6px;
  background: var(--gh-panel);
  line-height: 1.4;
}
.gh-finding-fold.gh-sev-border-info { border-left-color: #1e88e5; }
.gh-finding-fold summary { cursor: pointer; }
.gh-finding-fold summary > * { margin-right: 6px; }
.gh-finding-fold > details > p, .gh-finding-fold summary > p { margin: 3px 0; overflow-wrap: anywhere; color: var(--gh-muted); }
.gh-finding-fold > details > ul { margin-top: 6px; }
.gh-finding-head { display: flex; flex-wrap: wrap; align-items: center; gap: 6px; margin-bottom: 3px; }
.gh-finding p { margin: 3px 0; overflow-wrap: anywhere; }
.gh-finding .gh-advice, .gh-detail-finding .gh-advice { color: var(--gh-muted); }
.gh-finding:not([aria-selected="true"]) .gh-advice { display: none; }
.gh-muted { color: var(--gh-muted); }
.gh-cause { font-style: italic; }
.gh-layer-spans { color: var(--gh-muted); }
.gh-detail {
  margin-top: 16px;
  padding: 12px 14px;
  border: 1px solid var(--gh-border);
  border-radius: 6px;
}
.gh-detail[hidden] { display: none; }
.gh-detail-head { display: flex; justify-content: space-between; align-items: flex-start; gap: 12px; }
.gh-detail-title { font-size: 16px; font-weight: 500; margin: 0; overflow-wrap: anywhere; }
.gh-detail-sub { color: var(--gh-muted); margin: 2px 0 4px; overflow-wrap: anywhere; }
.gh-detail-status { overflow-wrap: anywhere; }
.gh-detail-cols { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1.3fr); gap: 20px; margin-top: 8px; }
@media (max-width: 900px) { .gh-detail-cols { grid-template-columns: minmax(0, 1fr); } }
.gh-detail h3 { font-size: 13px; font-weight: 500; margin: 10px 0 4px; }
.gh-section-head { display: flex; flex-wrap: wrap; align-items: center; gap: 8px; }
.gh-section-head h3 { margin-right: 4px; }
.gh-check { display: inline-flex; align-items: center; gap: 4px; color: var(--gh-muted); font-size: 12px; }
.gh-note { color: var(--gh-muted); font-size: 12px; min-height: 16px; }
.gh-chart-box { width: 100%; }
.gh-chart { display: block; overflow: visible; }
.gh-axis-line { stroke: var(--gh-border); }
.gh-grid-line { stroke: var(--gh-border); stroke-opacity: 0.35; }
.gh-axis-text { fill: var(--gh-muted); font-size: 10px; }
.gh-series { fill: none; stroke: var(--gh-link); stroke-width: 1.5; }
.gh-threshold { stroke: #d7263d; stroke-dasharray: 5 4; stroke-width: 1.2; }
.gh-threshold-text { fill: #d7263d; font-size: 10px; }
.gh-spike { fill: var(--gh-accent); }
.gh-selected-step { stroke: var(--gh-fg); stroke-width: 1.5; stroke-dasharray: 2 2; }
.gh-guide { stroke: var(--gh-muted); stroke-width: 1; }
.gh-readout { fill: var(--gh-fg); font-size: 11px; }
.gh-hit { cursor: pointer; }
.gh-bar { fill: var(--gh-bar); }
.gh-ghost { fill: none; stroke: var(--gh-accent); stroke-width: 1.2; }
.gh-zero-line { stroke: var(--gh-muted); stroke-dasharray: 3 3; }
.gh-metric-table { border-collapse: collapse; font-size: 12px; }
.gh-metric-table th { text-align: left; font-weight: normal; color: var(--gh-muted); padding: 1px 12px 1px 0; }
.gh-metric-table td { padding: 1px 10px 1px 0; }
.gh-num { font-variant-numeric: tabular-nums; text-align: right; }
.gh-quality { color: var(--gh-muted); font-size: 11px; }
.gh-detail-finding { border-left: 3px solid var(--gh-border); padding-left: 8px; margin-bottom: 8px; }
.gh-detail-finding p { margin: 3px 0; overflow-wrap: anywhere; }
.gh-empty h2 { font-size: 15px; margin: 0 0 8px; font-weight: 500; }
${SWEEP_CSS}`;

export function injectStyles(doc: Document): void {
  if (doc.getElementById("gradhealth-styles")) return;
  const style = doc.createElement("style");
  style.id = "gradhealth-styles";
  style.textContent = CSS;
  doc.head.append(style);
}
