// Tiny DOM helpers. Text always goes through textContent: run, tag and layer names
// come from user logs and must never be parsed as markup.

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string,
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Replaces the options of a <select>; returns the value left selected. */
export function setOptions(
  select: HTMLSelectElement,
  items: readonly { value: string; text: string }[],
  preferred: readonly string[],
): string {
  select.replaceChildren(...items.map((item) => new Option(item.text, item.value)));
  const pick = preferred.find((p) => items.some((item) => item.value === p)) ?? items[0]?.value ?? "";
  select.value = pick;
  select.disabled = items.length === 0;
  return pick;
}

let measureCtx: CanvasRenderingContext2D | null = null;

/** Text width in CSS pixels for a canvas font string. */
export function measurer(font: string): (text: string) => number {
  measureCtx ??= document.createElement("canvas").getContext("2d");
  const ctx = measureCtx;
  if (!ctx) return (text) => text.length * 7;
  return (text) => {
    ctx.font = font;
    return ctx.measureText(text).width;
  };
}

export function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.body).getPropertyValue(name).trim();
  return v || fallback;
}
