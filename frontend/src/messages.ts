// What the page says when there is nothing to draw: how to log data, a run without
// layers, and the message boxes that carry those texts and errors.

import type { RunInfo, UnreadableSteps } from "./api";
import { button, el } from "./dom";
import { callText } from "./format";

export type MessageKind = "info" | "error" | "loading";

/** Shows `content` in a message box, or hides it (kind null). */
export function setMessage(target: HTMLElement, kind: MessageKind | null, content: (string | Node)[] = []): void {
  target.hidden = kind === null;
  target.className = `gh-message gh-${kind ?? "none"}`;
  target.replaceChildren(...content);
}

export function code(text: string): HTMLElement {
  return el("code", "", text);
}

/**
 * A finding's text in pieces: the names the server quotes in backticks (layer `3`, scalar `loss`)
 * apart from the words around them. An odd number of backticks quotes nothing for sure: the text is
 * then one piece, as it is.
 */
export function quotedPieces(text: string): { text: string; quoted: boolean }[] {
  const parts = text.split("`");
  if (parts.length % 2 === 0) return [{ text, quoted: false }];
  return parts.map((part, i) => ({ text: part, quoted: i % 2 === 1 })).filter((p) => p.quoted || p.text !== "");
}

/** A finding's text as nodes: its quoted names as code. */
export function quotedText(text: string): (string | Node)[] {
  return quotedPieces(text).map((p) => (p.quoted ? layerCode(p.text) : p.text));
}

/** A layer's name as code; a module's later call in forward (`relu[1]`) says what it is on hover. */
export function layerCode(name: string): HTMLElement {
  const c = code(name);
  const call = callText(name);
  if (call !== null) c.title = call;
  return c;
}

export function paragraph(...parts: (string | Node)[]): HTMLParagraphElement {
  const p = el("p");
  p.append(...parts);
  return p;
}

function snippet(text: string): HTMLPreElement {
  return el("pre", "", text);
}

export function howToLog(): HTMLElement[] {
  return [
    paragraph(
      "Gradient Health reads per-layer gradient, weight and activation statistics. ",
      "Log them with one of the integrations (exact statistics, cheap; see ",
      code("docs/integrations_torch.md"),
      " and ",
      code("docs/integrations_keras_tf.md"),
      " in the gradhealth sources):",
    ),
    paragraph("PyTorch: ", code("gradhealth_plugin.torch.watch")),
    snippet('from gradhealth_plugin.torch import watch\nwatch(model, "runs/exp1", optimizer=optimizer, every_n_steps=50)'),
    paragraph("Keras: ", code("gradhealth_plugin.keras.GradientHealthCallback")),
    snippet('from gradhealth_plugin.keras import GradientHealthCallback\nmodel.fit(x, y, callbacks=[GradientHealthCallback("runs/exp1", probe_data=(x[:64], y[:64]))])'),
    paragraph("TensorFlow custom loop: ", code("gradhealth_plugin.tf")),
    snippet('from gradhealth_plugin.tf import GradientHealthLogger\ngh = GradientHealthLogger("runs/exp1", every_n_steps=50)\nwith gh.step(optimizer.iterations, grads, model.trainable_variables):\n    optimizer.apply_gradients(zip(grads, model.trainable_variables))'),
    paragraph(
      "Plain histograms work too: ",
      code("tf.summary.histogram(\"gradients/dense/kernel\", g, step=step)"),
      ", Keras' ",
      code("TensorBoard(histogram_freq=1)"),
      " (weights only), or PyTorch's ",
      code("SummaryWriter.add_histogram(name + \".grad\", p.grad, step)"),
      ".",
    ),
  ];
}

/**
 * What the centre says of a run without layer data. An evaluation half whose layers another run
 * holds (`RunInfo.layers_in`) is pointed there, with a button that opens it (`open`): how to log
 * layers is no help for a run that could never hold them.
 */
export function noRolesMessage(run: RunInfo, open: (run: string) => void = () => undefined): HTMLElement[] {
  if (run.layers_in !== null && run.unclassified.length === 0) {
    return [
      paragraph("Run ", code(run.run), " holds scalars only: its layers are in ", code(run.layers_in),
        ". Its loss and other scalars are judged here, in its findings."),
      paragraph(button(`Open ${run.layers_in}`, () => open(run.layers_in as string))),
    ];
  }
  const out: HTMLElement[] = [
    paragraph("Run ", code(run.run), " has no gradient, weight or activation data that matches a layer."),
  ];
  if (run.unclassified.length > 0) {
    const shown = run.unclassified.slice(0, 10).join(", ");
    const more = run.unclassified.length > 10 ? ` and ${run.unclassified.length - 10} more` : "";
    out.push(paragraph(`Histogram tags that could not be assigned a role: ${shown}${more}.`));
  }
  out.push(...howToLog());
  return out;
}

/** One sentence on the tags read but for some steps, which are no data, naming a few; null when none. */
export function unreadableStepsNote(tags: readonly UnreadableSteps[], named = 3): string | null {
  if (tags.length === 0) return null;
  const shown = tags.slice(0, named).map((u) => `${u.tag} (${u.steps} of ${u.of} steps; the first: ${u.why})`);
  const more = tags.length - shown.length;
  const n = tags.length;
  return `No data at some steps of ${n} tag${n === 1 ? "" : "s"}, whose tensors there cannot be read: ${shown.join("; ")}${more > 0 ? `; and ${more} more` : ""}.`;
}

/** One sentence on the tags the server could not read, naming a few; null when it read them all. */
export function unreadableNote(unreadable: readonly { tag: string; why: string }[], named = 3): string | null {
  if (unreadable.length === 0) return null;
  const shown = unreadable.slice(0, named).map((u) => `${u.tag} (${u.why})`);
  const more = unreadable.length - shown.length;
  const n = unreadable.length;
  return `Not read: ${n} tag${n === 1 ? "" : "s"} whose data cannot be read: ${shown.join("; ")}${more > 0 ? `; and ${more} more` : ""}.`;
}
