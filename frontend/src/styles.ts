// Page styles, injected by render() because the plugin page only loads one module.
// Colours follow TensorBoard's light theme; prefers-color-scheme switches variables.

export const CSS = `
:root {
  --gh-bg: #ffffff;
  --gh-fg: #212121;
  --gh-muted: #616161;
  --gh-border: #d0d0d0;
  --gh-panel: #f5f5f5;
  --gh-accent: #f57c00;
  --gh-error-bg: #fdecea;
  --gh-error-fg: #b71c1c;
  --gh-tip-bg: rgba(33, 33, 33, 0.94);
  --gh-tip-fg: #ffffff;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root {
    --gh-bg: #202124;
    --gh-fg: #e8eaed;
    --gh-muted: #b0b3b8;
    --gh-border: #5f6368;
    --gh-panel: #2d2e31;
    --gh-accent: #ffa726;
    --gh-error-bg: #4a1c1c;
    --gh-error-fg: #ffb4ab;
    --gh-tip-bg: rgba(248, 249, 250, 0.96);
    --gh-tip-fg: #202124;
  }
}
html, body {
  margin: 0;
  background: var(--gh-bg);
  color: var(--gh-fg);
  font: 13px Roboto, sans-serif;
}
.gh-app { padding: 12px 16px 24px; }
.gh-toolbar {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 8px 20px;
  margin-bottom: 12px;
}
.gh-toolbar label { display: inline-flex; align-items: center; gap: 6px; color: var(--gh-muted); }
.gh-toolbar select {
  font: inherit;
  color: var(--gh-fg);
  background: var(--gh-bg);
  border: 1px solid var(--gh-border);
  border-radius: 4px;
  padding: 3px 6px;
  max-width: 320px;
}
.gh-toolbar select:focus { outline: 2px solid var(--gh-accent); outline-offset: 1px; }
.gh-summary { color: var(--gh-muted); margin-left: auto; }
.gh-message {
  padding: 12px 14px;
  border-radius: 4px;
  background: var(--gh-panel);
  line-height: 1.5;
  max-width: 820px;
  margin-bottom: 12px;
}
.gh-message p { margin: 0 0 6px; }
.gh-message p:last-child { margin-bottom: 0; }
.gh-message code { font-family: "Roboto Mono", monospace; font-size: 12px; }
.gh-message.gh-error { background: var(--gh-error-bg); color: var(--gh-error-fg); }
.gh-message.gh-loading { background: none; color: var(--gh-muted); padding-left: 0; }
.gh-legend {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 6px 16px;
  margin-bottom: 10px;
  color: var(--gh-muted);
}
.gh-legend-item { display: inline-flex; align-items: center; gap: 6px; }
.gh-legend-title { color: var(--gh-fg); }
.gh-legend-value { font-variant-numeric: tabular-nums; }
.gh-swatch { width: 12px; height: 12px; border-radius: 2px; display: inline-block; }
.gh-gradient {
  position: relative;
  display: inline-block;
  width: 160px;
  height: 12px;
  border-radius: 2px;
}
.gh-gradient-mid {
  position: absolute;
  left: 50%;
  top: 14px;
  transform: translateX(-50%);
  font-size: 11px;
  white-space: nowrap;
}
.gh-heatmap { display: flex; align-items: flex-start; }
.gh-heatmap[hidden] { display: none; }
.gh-heatmap.gh-stale { opacity: 0.5; }
.gh-rowlabels { flex: none; font-size: 12px; }
.gh-rowlabel {
  white-space: nowrap;
  overflow: hidden;
  text-align: right;
  padding-right: 8px;
  box-sizing: border-box;
}
.gh-axis-title {
  text-align: right;
  padding-right: 8px;
  font-size: 11px;
  color: var(--gh-muted);
  box-sizing: border-box;
}
.gh-scroller { position: relative; flex: 1 1 auto; min-width: 0; overflow-x: auto; overflow-y: hidden; }
.gh-canvas { display: block; }
.gh-highlight {
  position: absolute;
  box-sizing: border-box;
  border: 2px solid var(--gh-fg);
  pointer-events: none;
}
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
.gh-tip-key { opacity: 0.7; min-width: 52px; }
.gh-tip-value { overflow-wrap: anywhere; }
`;

export function injectStyles(doc: Document): void {
  if (doc.getElementById("gradhealth-styles")) return;
  const style = doc.createElement("style");
  style.id = "gradhealth-styles";
  style.textContent = CSS;
  doc.head.append(style);
}
