import { interpolateBrBG, interpolateViridis } from "d3-scale-chromatic";
import { describe, expect, it } from "vitest";
import { BRBG_HEX, VIRIDIS_HEX } from "../src/colormaps";

function hex(css: string): string {
  if (css.startsWith("#")) return css.slice(1).toLowerCase();
  const m = /rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(css);
  return m ? m.slice(1, 4).map((v) => Number(v).toString(16).padStart(2, "0")).join("") : "";
}

function sample(map: (t: number) => string): string {
  return Array.from({ length: 256 }, (_, k) => hex(map(k / 255))).join("");
}

describe("generated colour tables", () => {
  it("match d3-scale-chromatic (run `npm run colormaps` after upgrading it)", () => {
    expect(VIRIDIS_HEX).toBe(sample(interpolateViridis));
    expect(BRBG_HEX).toBe(sample(interpolateBrBG));
    expect(VIRIDIS_HEX.slice(0, 6)).toBe("440154");
    expect(VIRIDIS_HEX.slice(-6)).toBe("fde725");
  });
});
