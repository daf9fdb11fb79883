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

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes; attribute values are set, never parsed as markup. */
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number> = {},
  text?: string,
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function button(text: string, onClick: (e: MouseEvent) => void, className = "gh-button", title?: string): HTMLButtonElement {
  const b = el("button", className, text);
  b.type = "button";
  if (title) b.title = title;
  b.addEventListener("click", onClick);
  return b;
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

/** Text width in CSS pixels for a canvas font string, memoised per font. */
export function measurer(font: string): (text: string) => number {
  measureCtx ??= document.createElement("canvas").getContext("2d");
  const ctx = measureCtx;
  if (!ctx) return (text) => text.length * 7;
  const cache = new Map<string, number>();
  return (text) => {
    let w = cache.get(text);
    if (w === undefined) {
      ctx.font = font;
      w = ctx.measureText(text).width;
      cache.set(text, w);
    }
    return w;
  };
}

export function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

/** Saves a Blob as a file through a temporary object URL. */
export function download(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = el("a");
  a.href = url;
  a.download = filename;
  a.rel = "noopener";
  a.style.display = "none";
  document.body.append(a);
  a.click();
  a.remove();
  // Revoked later: some browsers read the URL after click() returns.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
