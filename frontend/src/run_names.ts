// How run names sort: runs are named by hyperparameter values (lr_0.001_adam, lr_0.01_adam), so a
// `<digits>.<digits>` in a run name is one decimal number. Layer and tag names keep the natural order
// of rows.ts, where "layer4.10" comes after "layer4.9".

// Splitting on a capture group keeps the numbers: text at even indices, numbers at odd ones.
const NUMBER = /(\d+(?:\.\d+)?)/;
const text = new Intl.Collator(undefined, { sensitivity: "base" });

/** Compares two decimals written as digits, exactly (no float rounding of long digit runs). */
function compareDecimals(a: string, b: string): number {
  const [ai, af = ""] = a.split(".");
  const [bi, bf = ""] = b.split(".");
  const [x, y] = [ai.replace(/^0+(?=\d)/, ""), bi.replace(/^0+(?=\d)/, "")];
  if (x.length !== y.length) return x.length - y.length;
  if (x !== y) return x < y ? -1 : 1;
  // Fractions without trailing zeros compare as strings: "01" < "1" < "12".
  const [p, q] = [af.replace(/0+$/, ""), bf.replace(/0+$/, "")];
  return p === q ? 0 : p < q ? -1 : 1;
}

/** Orders run names as a person reads them: lr_0.001 < lr_0.01 < lr_0.3 < lr_1 < lr_10, text case-blind. */
export function compareRunNames(a: string, b: string): number {
  const [pa, pb] = [a.split(NUMBER), b.split(NUMBER)];
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const c = i % 2 === 1 ? compareDecimals(pa[i], pb[i]) : text.compare(pa[i], pb[i]);
    if (c !== 0) return c;
  }
  return pa.length - pb.length || (a < b ? -1 : a > b ? 1 : 0);
}

// A run name may break after these: the separators of a sweep's names (lr_0.01/seed_3, bs-64), and a dot
// unless a digit follows it (never inside the number 0.001). A run of separators ("__", "_/") is one: the
// break comes after its last, so no line starts with a separator. A hyphen before a digit is a number's
// sign, no separator, where it follows an exponent's "e" (1e-3) or opens the piece (lr_-1): never inside
// the number.
const SIGN = String.raw`(?:(?<=\d[eE])|(?<=^|[_/=,\-]))-(?=\d)`;
const SEPARATOR = String.raw`(?:[_/=,]|(?!${SIGN})-)`;
const BREAK_AFTER = new RegExp(String.raw`(?<=${SEPARATOR})(?!${SEPARATOR})|(?<=\.)(?![\d_/=,]|${SEPARATOR})`);

/**
 * A run name cut into the pieces a line may break between: after each separator, so a long name wraps
 * where its parts meet and runs that share a prefix still show where they differ. Joined, the pieces
 * are the name.
 */
export function nameBreaks(name: string): string[] {
  return name.split(BREAK_AFTER).filter((piece) => piece !== "");
}

/** The width a run name needs so that no piece of it breaks, in characters: its longest piece. */
export function widestPiece(name: string): number {
  return Math.max(0, ...nameBreaks(name).map((piece) => [...piece].length));
}
