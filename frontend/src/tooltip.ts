// One floating tooltip for the whole page; its lines are set with textContent.

import { el } from "./dom";

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
