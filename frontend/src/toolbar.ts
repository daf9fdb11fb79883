// The toolbar: role, metric, layer filter, row order, compared run, reset zoom, PNG
// export and reload. It shows the state it is given and reports what the user changed.

import { METRICS } from "./api";
import type { RunInfo } from "./api";
import { button, el, setOptions } from "./dom";
import { humanize } from "./format";
import type { ViewState } from "./hash";
import { foldButtonText } from "./fold";
import { SORT_KEYS } from "./rows";

export interface ToolbarEvents {
  role(role: string): void;
  metric(metric: string): void;
  compare(run: string): void;
  sort(sort: ViewState["sort"]): void;
  filter(text: string): void;
  resetZoom(): void;
  reload(): void;
  png(): void;
  /** The sweep button: shows the sweep, or back to the heatmap. */
  sweep(): void;
  /** The fold button: unfolds every block when any is folded, else folds them all. */
  foldAll(): void;
}

// Typing in the filter redraws once the user pauses.
const FILTER_DELAY_MS = 120;

function picker(text: string, control: HTMLElement): HTMLLabelElement {
  const label = el("label", "", text);
  label.append(control);
  return label;
}

export class Toolbar {
  readonly root = el("div", "gh-toolbar");
  readonly roleSelect = el("select");
  readonly filterInput = el("input");
  private readonly metricSelect = el("select");
  private readonly compareSelect = el("select");
  private readonly sortSelect = el("select");
  private readonly resetZoom: HTMLButtonElement;
  private readonly reloadButton: HTMLButtonElement;
  private readonly pngButton: HTMLButtonElement;
  private readonly sweepButton: HTMLButtonElement;
  private readonly foldButton: HTMLButtonElement;
  // Everything but Reload is about a run; hidden while there is none.
  private readonly controls = el("div", "gh-controls");

  constructor(events: ToolbarEvents) {
    this.filterInput.type = "search";
    this.filterInput.placeholder = "Filter layers";
    this.filterInput.setAttribute("aria-label", "Filter layers by name");
    setOptions(this.sortSelect, SORT_KEYS.map((k) => ({ value: k, text: k === "model" ? "model order" : k === "severity" ? "worst first" : "name" })), ["model"]);
    setOptions(this.metricSelect, METRICS.map((m) => ({ value: m, text: m === "health" ? "health (status + score)" : humanize(m) })), ["health"]);
    this.resetZoom = button("Reset zoom", () => events.resetZoom(), "gh-button", "Show every step (or double-click the heatmap)");
    this.reloadButton = button("\u21bb Reload", () => events.reload(), "gh-button", "Fetch new steps now");
    this.pngButton = button("PNG", () => events.png(), "gh-button", "Download the heatmap as a PNG image");
    this.sweepButton = button("Sweep", () => events.sweep(), "gh-button gh-sweep-button");
    this.sweepButton.hidden = true;
    this.foldButton = button("Unfold all", () => events.foldAll(), "gh-button gh-fold-all");
    this.foldButton.hidden = true;
    this.controls.append(
      picker("Role", this.roleSelect),
      picker("Metric", this.metricSelect),
      picker("Layers", this.filterInput),
      picker("Sort", this.sortSelect),
      picker("Compare", this.compareSelect),
      this.resetZoom,
      this.foldButton,
      el("span", "gh-spacer"),
      this.pngButton,
    );
    this.controls.hidden = true;
    this.root.append(this.controls, this.sweepButton, this.reloadButton);
    this.resetZoom.disabled = true;
    this.listen(events);
  }

  private listen(events: ToolbarEvents): void {
    this.roleSelect.addEventListener("change", () => events.role(this.roleSelect.value));
    this.metricSelect.addEventListener("change", () => events.metric(this.metricSelect.value));
    this.compareSelect.addEventListener("change", () => {
      this.compareSelect.title = this.compareSelect.value || "Put a second run beside this one";
      events.compare(this.compareSelect.value);
    });
    this.sortSelect.addEventListener("change", () => events.sort(this.sortSelect.value as ViewState["sort"]));
    let filterTimer = 0;
    this.filterInput.addEventListener("input", () => {
      clearTimeout(filterTimer);
      filterTimer = window.setTimeout(() => events.filter(this.filterInput.value), FILTER_DELAY_MS);
    });
  }

  /** Shows the controls about a run, or hides them while there is none. */
  showControls(visible: boolean): void {
    this.controls.hidden = !visible;
  }

  /** Fills the role picker with a run's roles; returns the role it selected. */
  setRoles(roles: string[], wanted: string): string {
    return setOptions(this.roleSelect, roles.map((r) => ({ value: r, text: r })), [wanted, "gradient"]);
  }

  /** Shows metric, sort and filter of the state. */
  showState(state: ViewState): void {
    this.metricSelect.value = state.metric;
    this.sortSelect.value = state.sort;
    this.filterInput.value = state.filter;
  }

  /** Lists the runs that can be compared with `run`; returns the one still selected ("" for none). */
  setCompareRuns(runs: readonly RunInfo[], run: string, compare: string): string {
    setOptions(
      this.compareSelect,
      [{ value: "", text: "no other run" }, ...runs.filter((r) => r.run !== run).map((r) => ({ value: r.run, text: r.run }))],
      [compare],
    );
    this.compareSelect.disabled = runs.length < 2;
    // The select is narrow: its tooltip names the compared run whole.
    this.compareSelect.title = this.compareSelect.value || "Put a second run beside this one";
    return this.compareSelect.value;
  }

  /** The sweep button: offered with two runs or more; pressed while the sweep shows. */
  setSweep(available: boolean, showing: boolean): void {
    this.sweepButton.hidden = !available;
    this.sweepButton.setAttribute("aria-pressed", String(showing));
    this.sweepButton.textContent = showing ? "\u2190 Heatmap" : "Sweep";
    this.sweepButton.title = showing ? "Back to the heatmap of the open run" : "Every run in one table: its hyperparameters and what it found";
  }

  /** The fold button for a run of `blocks` blocks, `folded` of them folded now (none: no button). */
  setFold(blocks: number, folded: number): void {
    const state = foldButtonText(blocks, folded);
    this.foldButton.hidden = !state.enabled;
    this.foldButton.disabled = !state.enabled;
    this.foldButton.textContent = state.text;
    this.foldButton.title = state.title;
  }


  setZoomed(zoomed: boolean): void {
    this.resetZoom.disabled = !zoomed;
  }

  setCanExport(can: boolean): void {
    this.pngButton.disabled = !can;
  }

  setReloading(busy: boolean): void {
    this.reloadButton.disabled = busy;
  }
}
