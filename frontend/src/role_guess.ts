// Rows whose role was guessed (from the words of the tag's name or from its data) or not found at all:
// the tab says so, and offers the gradhealth.json rule that sets the role for good.

import { button, el } from "./dom";

/** How a row's role was decided, as the server says it (runs and heatmap routes). */
export type DecidedBy = string;

/** A guess is a role read from name words or from the data, or no role at all (the row is "other"): nothing
 * told it, another tag names the same parameter ("shared_name") so which one is the weight goes unsaid, or
 * the name says an optimizer's state ("optimizer_state"). */
export function isGuessed(decidedBy: DecidedBy | undefined): boolean {
  return decidedBy === "name" || decidedBy === "data" || decidedBy === "fallback" || decidedBy === "shared_name"
    || decidedBy === "optimizer_state";
}

/** One sentence on how the role was found, for a guessed row; null otherwise. */
export function guessNote(decidedBy: DecidedBy | undefined, role: string): string | null {
  if (decidedBy === "name") return `Role "${role}" guessed from the words of the tag's name.`;
  if (decidedBy === "data") {
    const why = role === "activation" ? ": never negative, with a share at zero, as a ReLU's output" : "";
    return `Role "${role}" guessed from the data, not the name${why}.`;
  }
  if (decidedBy === "shared_name") {
    return "Role unknown: another tag names the same parameter under another prefix, and both cannot be its "
      + "weights (one may be its gradient), so only NaN/Inf values and spikes are judged here.";
  }
  if (decidedBy === "optimizer_state") {
    return "An optimizer's state, by its name (Adam's moments, a momentum buffer): it has a parameter's shape but "
      + "not its values, so it is no weight, and only NaN/Inf values and spikes are judged here.";
  }
  if (decidedBy === "fallback") {
    return "Role unknown: nothing in the tag's name tells it, so only NaN/Inf values and spikes are judged here.";
  }
  return null;
}

/** What follows a row's name when its role was guessed. */
export const GUESS_MARK = " ?";

/** The row label's hover line for a guessed row, saying what its "?" means; null for a row whose role is certain. */
export function guessLine(decidedBy: DecidedBy | undefined, role: string): [string, string] | null {
  const note = guessNote(decidedBy, role);
  return note === null ? null : ["?", `${note} Click a cell for the rule that sets it for good.`];
}

/** The legend's words for the "?" after row names, when some row of `decidedBy` has a guessed role; null otherwise. */
export function guessLegend(decidedBy: readonly (DecidedBy | undefined)[]): { label: string; title: string } | null {
  if (!decidedBy.some(isGuessed)) return null;
  return {
    label: "name ? = role guessed",
    title: "A \"?\" after a row's name: its role (gradient, weight, activation) was guessed from the words of the tag's "
      + "name or from its values, or not found, because the writer's naming says nothing of it or two tags name one "
      + "parameter; or its name says it is an optimizer's state, no weight. Hover the name for how.",
  };
}

/** The tag as a Python regular expression that matches it alone. */
export function exactPattern(tag: string): string {
  return `^${tag.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`;
}

/** The gradhealth.json that gives `tag` the role `role` (the row's current guess, to edit). */
export function fixRule(tag: string, role: string): string {
  const rule = { pattern: exactPattern(tag), role: role === "other" ? "weight" : role };
  return JSON.stringify({ tag_rules: [rule] }, null, 2);
}

/** The note and, a click away, the rule with a copy button; empty for a row whose role is certain. */
export function roleGuessBox(decidedBy: DecidedBy | undefined, role: string, tag: string | undefined): HTMLElement {
  const box = el("div", "gh-role-guess");
  const note = guessNote(decidedBy, role);
  box.hidden = note === null || tag === undefined;
  if (box.hidden) return box;
  box.append(el("span", "", note as string));
  const details = el("details");
  const text = fixRule(tag as string, role);
  const pre = el("pre", "gh-rule", text);
  const copy = button("Copy", () => {
    void navigator.clipboard?.writeText(text).catch(() => undefined);
    getSelection()?.selectAllChildren(pre);
  }, "gh-button", "Copy the rule (put it in gradhealth.json at the logdir's root)");
  details.append(el("summary", "", "Rule to set its role"), pre, copy);
  box.append(details);
  return box;
}
