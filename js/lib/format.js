// Numbers and steps as text, the same in every view: read-outs, table cells,
// tick labels and captions.

/**
 * A number for a read-out: 4 significant digits, exponents for very large or
 * small magnitudes, and NaN / +Inf / -Inf spelled out; a dash for no value (null).
 * @param {number | null | undefined} v
 * @returns {string}
 */
export function formatNumber(v) {
  if (v === null || v === undefined) return "\u2014";
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(2).replace("e+", "e");
  if (Number.isInteger(v)) return String(v);
  return String(Number.parseFloat(v.toPrecision(4)));
}

/**
 * A number in little room (the ends of a histogram's axis): 3 significant
 * digits, one-digit exponents outside [0.01, 10000).
 * @param {number} v
 * @returns {string}
 */
export function shortNumber(v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e4 || a < 1e-2)) return v.toExponential(1).replace("e+", "e");
  return String(Number.parseFloat(v.toPrecision(3)));
}

/**
 * A step number with thousands separators ("12,345").
 * @param {number} step
 * @returns {string}
 */
export function formatStep(step) {
  return Math.round(step).toLocaleString("en-US");
}
