// The compact heatmap layout's packed numbers (docs/http_api.md, "Compact cells"): base64 of fixed-width
// binary, read through a DataView, so a million cells cost no parsing of number strings.

/** The one value encoding this reader knows: per cell a double's top 3 bytes (sign, exponent, 12 mantissa bits). */
export const VALUE_ENCODING = "f64top24";
/** The f64top24 code of a cell without a value (a NaN pattern the server never sends for a value). */
export const TOP24_NULL = 0xffffff;

/** The bytes of standard, padded base64; throws on anything else (the caller says which field). */
export function base64Bytes(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let k = 0; k < binary.length; k++) out[k] = binary.charCodeAt(k);
  return out;
}

/**
 * f64top24 values, rows x cols of them row after row, as one array per row: each code the top 24 bits
 * of a double whose other 40 bits are zero, most significant byte first; null for `TOP24_NULL`.
 * With `finiteOnly`, NaN and infinities are null too (what the rows layout sends for them).
 */
export function top24Rows(bytes: Uint8Array, rows: number, cols: number, finiteOnly = false): (number | null)[][] {
  if (bytes.length !== rows * cols * 3) throw new RangeError(`expected ${rows * cols} values, got ${bytes.length / 3}`);
  // One double's bytes, the lower five always zero: its top three are set per cell and read back.
  const word = new DataView(new ArrayBuffer(8));
  const out = new Array<(number | null)[]>(rows);
  let at = 0;
  for (let i = 0; i < rows; i++) {
    const row = new Array<number | null>(cols);
    for (let j = 0; j < cols; j++, at += 3) {
      const b0 = bytes[at];
      const b1 = bytes[at + 1];
      const b2 = bytes[at + 2];
      if (b0 === 0xff && b1 === 0xff && b2 === 0xff) {
        row[j] = null;
        continue;
      }
      word.setUint8(0, b0);
      word.setUint8(1, b1);
      word.setUint8(2, b2);
      const v = word.getFloat64(0);
      row[j] = finiteOnly && !Number.isFinite(v) ? null : v;
    }
    out[i] = row;
  }
  return out;
}

/**
 * Unsigned little-endian integers of `width` bytes (1, 2, 4 or 8), rows x cols of them, as one array per
 * row; an 8-byte one past 2**53 as its decimal digits (a number would not hold it exactly).
 */
export function uintRows(bytes: Uint8Array, width: number, rows: number, cols: number): (number | string)[][] {
  if (![1, 2, 4, 8].includes(width)) throw new RangeError(`unsigned integers of ${width} bytes`);
  if (bytes.length !== rows * cols * width) throw new RangeError(`expected ${rows * cols} integers`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const read = (at: number): number | string => {
    if (width === 1) return view.getUint8(at);
    if (width === 2) return view.getUint16(at, true);
    if (width === 4) return view.getUint32(at, true);
    const big = view.getBigUint64(at, true);
    return big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big.toString();
  };
  const out = new Array<(number | string)[]>(rows);
  let at = 0;
  for (let i = 0; i < rows; i++) {
    const row = new Array<number | string>(cols);
    for (let j = 0; j < cols; j++, at += width) row[j] = read(at);
    out[i] = row;
  }
  return out;
}
