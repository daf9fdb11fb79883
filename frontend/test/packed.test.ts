import { describe, expect, it } from "vitest";
import { base64Bytes, TOP24_NULL, top24Rows, uintRows } from "../src/packed";

// f64top24 as the server writes it (responses.top24): a double's top 24 bits rounded to the nearest,
// ties to even; NaN one code, a finite value never rounded to an infinity; null its own code.
function encode(values: readonly (number | null)[]): Uint8Array {
  const word = new DataView(new ArrayBuffer(8));
  const out = new Uint8Array(values.length * 3);
  values.forEach((v, k) => {
    let code: bigint;
    if (v === null) {
      code = BigInt(TOP24_NULL);
    } else if (Number.isNaN(v)) {
      code = 0x7ff800n;
    } else {
      word.setFloat64(0, v);
      const bits = word.getBigUint64(0);
      const low = bits & ((1n << 40n) - 1n);
      code = bits >> 40n;
      if (low > 1n << 39n || (low === 1n << 39n && (code & 1n) === 1n)) code += 1n;
      if (Number.isFinite(v) && (code & 0x7fffffn) > 0x7fefffn) code = (code & 0x800000n) | 0x7fefffn;
    }
    out.set([Number(code >> 16n), Number((code >> 8n) & 0xffn), Number(code & 0xffn)], k * 3);
  });
  return out;
}

const hex = (bytes: Uint8Array): string[] =>
  Array.from({ length: bytes.length / 3 }, (_, k) =>
    Array.from(bytes.subarray(k * 3, k * 3 + 3), (b) => b.toString(16).padStart(2, "0")).join(""));

const SUBNORMAL = 3 * 2 ** -1034; // three steps of the encoding below the smallest normal double
const SMALLEST_NORMAL = 2 ** -1022;
const BELOW_TWO = 2 - 2 ** -20; // rounds up across a power of two, to 2 exactly

describe("f64top24 values", () => {
  it("round trips awkward values", () => {
    const values = [0, -0, 1e-300, 1e300, NaN, Infinity, -Infinity, null, SUBNORMAL, SMALLEST_NORMAL, BELOW_TWO,
      -BELOW_TWO, Number.MAX_VALUE, 1e-50, 0.1];
    const bytes = encode(values);
    // The codes, written out: what the server sends for each.
    expect(hex(bytes)).toEqual(["000000", "800000", "01a56e", "7e37e4", "7ff800", "7ff000", "fff000", "ffffff",
      "000003", "001000", "400000", "c00000", "7fefff", "358dee", "3fb99a"]);
    const [back] = top24Rows(bytes, 1, values.length);
    expect(Object.is(back[0], 0)).toBe(true);
    expect(Object.is(back[1], -0)).toBe(true);
    expect(back[4]).toBeNaN();
    expect(back.slice(5, 8)).toEqual([Infinity, -Infinity, null]);
    expect(back.slice(8, 12)).toEqual([SUBNORMAL, SMALLEST_NORMAL, 2, -2]);
    // Far magnitudes keep 13 significant bits; the largest double stays finite.
    for (const k of [2, 3, 12, 13, 14]) {
      const want = values[k] as number;
      expect(Math.abs((back[k] as number) - want)).toBeLessThanOrEqual(2 ** -13 * Math.abs(want));
    }
    expect(Number.isFinite(back[12])).toBe(true);
  });

  it("keeps 13 significant bits at every magnitude", () => {
    let seed = 7;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const values = Array.from({ length: 5000 }, () => (random() < 0.5 ? -1 : 1) * (1 + random()) * 2 ** Math.floor(random() * 2046 - 1022));
    const [back] = top24Rows(encode(values), 1, values.length);
    values.forEach((v, k) => expect(Math.abs((back[k] as number) - v)).toBeLessThanOrEqual(2 ** -13 * Math.abs(v)));
  });

  it("lays the cells out in rows and reads NaN and infinities as none when asked", () => {
    const bytes = encode([1, NaN, null, Infinity, -2, 0.5]);
    expect(top24Rows(bytes, 2, 3, true)).toEqual([[1, null, null], [null, -2, 0.5]]);
    const exact = top24Rows(bytes, 3, 2);
    expect(exact[0][1]).toBeNaN();
    expect(exact[1]).toEqual([null, Infinity]);
    expect(() => top24Rows(bytes, 2, 2)).toThrow(RangeError);
  });
});

describe("packed unsigned integers", () => {
  it("reads each width little-endian, past 2**53 as digits", () => {
    expect(uintRows(Uint8Array.of(7, 0, 255, 1), 1, 2, 2)).toEqual([[7, 0], [255, 1]]);
    expect(uintRows(Uint8Array.of(1, 1, 0, 0), 2, 1, 2)).toEqual([[257, 0]]);
    expect(uintRows(Uint8Array.of(0, 0, 0, 1), 4, 1, 1)).toEqual([[2 ** 24]]);
    const big = new Uint8Array(16);
    new DataView(big.buffer).setBigUint64(0, 2n ** 53n - 1n, true);
    new DataView(big.buffer).setBigUint64(8, 2n ** 63n + 5n, true);
    expect(uintRows(big, 8, 1, 2)).toEqual([[2 ** 53 - 1, "9223372036854775813"]]);
    expect(() => uintRows(Uint8Array.of(1, 2, 3), 3, 1, 1)).toThrow(RangeError);
    expect(() => uintRows(Uint8Array.of(1, 2, 3), 2, 1, 1)).toThrow(RangeError);
  });

  it("decodes base64", () => {
    expect(Array.from(base64Bytes(btoa(String.fromCharCode(0, 255, 128))))).toEqual([0, 255, 128]);
    expect(() => base64Bytes("!!")).toThrow();
  });
});
