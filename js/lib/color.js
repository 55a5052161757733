// Colour for nbviz views: categorical palettes for classes and sequential /
// diverging scales for values. Colours are [r, g, b] arrays (0-255) or CSS
// strings; non-finite values get MISSING_RGB so NaN/Inf stand out.

/** @typedef {[number, number, number]} RGB */

/**
 * Ten colours that stay distinct under the common colour-vision deficiencies:
 * the Okabe-Ito set (less black) followed by three of Paul Tol's "muted" colours.
 */
export const CATEGORICAL_10 = Object.freeze([
  "#0072b2",
  "#e69f00",
  "#009e73",
  "#cc79a7",
  "#56b4e9",
  "#d55e00",
  "#f0e442",
  "#332288",
  "#882255",
  "#999933",
]);

/**
 * Twenty colours: CATEGORICAL_10 followed by a lighter tint of each, so the
 * second ten differ from the first by lightness as well as hue.
 */
export const CATEGORICAL_20 = Object.freeze([
  ...CATEGORICAL_10,
  ...CATEGORICAL_10.map((hex) => rgbToHex(mix(hexToRgb(hex), [255, 255, 255], 0.45))),
]);

/** Colour for NaN / Inf / missing values: a neutral grey no palette uses. */
export const MISSING_RGB = Object.freeze(/** @type {RGB} */ ([170, 170, 170]));

/** Viridis (matplotlib) sampled at nine evenly spaced points. */
const VIRIDIS = [
  [68, 1, 84],
  [71, 44, 122],
  [59, 81, 139],
  [44, 113, 142],
  [33, 145, 140],
  [40, 174, 128],
  [94, 201, 98],
  [173, 220, 48],
  [253, 231, 37],
];

/** A blue-white-red diverging ramp (ColorBrewer RdBu, reversed: low is blue). */
const BLUE_WHITE_RED = [
  [33, 102, 172],
  [103, 169, 207],
  [209, 229, 240],
  [247, 247, 247],
  [253, 219, 199],
  [239, 138, 98],
  [178, 24, 43],
];

/**
 * "#rrggbb" (or "#rgb") -> [r, g, b].
 * @param {string} hex
 * @returns {RGB}
 */
export function hexToRgb(hex) {
  let h = String(hex).replace(/^#/, "");
  if (h.length === 3) h = [...h].map((c) => c + c).join("");
  if (!/^[0-9a-fA-F]{6}$/.test(h)) {
    throw new TypeError(`nbviz color: expected "#rrggbb", got ${JSON.stringify(hex)}`);
  }
  const n = Number.parseInt(h, 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/**
 * [r, g, b] -> "#rrggbb".
 * @param {ArrayLike<number>} rgb
 * @returns {string}
 */
export function rgbToHex(rgb) {
  return `#${[0, 1, 2]
    .map((i) => Math.round(Math.min(255, Math.max(0, rgb[i]))).toString(16).padStart(2, "0"))
    .join("")}`;
}

/**
 * [r, g, b] -> "rgb(r, g, b)" or "rgba(r, g, b, a)".
 * @param {ArrayLike<number>} rgb
 * @param {number} [alpha]
 * @returns {string}
 */
export function rgbToCss(rgb, alpha) {
  const [r, g, b] = [0, 1, 2].map((i) => Math.round(rgb[i]));
  return alpha === undefined ? `rgb(${r}, ${g}, ${b})` : `rgba(${r}, ${g}, ${b}, ${alpha})`;
}

/**
 * Linear blend of two colours: t=0 gives a, t=1 gives b.
 * @param {ArrayLike<number>} a
 * @param {ArrayLike<number>} b
 * @param {number} t
 * @returns {RGB}
 */
export function mix(a, b, t) {
  return [0, 1, 2].map((i) => a[i] + (b[i] - a[i]) * t);
}

/**
 * The palette used for `count` categories: 10 colours up to 10 categories,
 * 20 up to 20; beyond that colours repeat (pair them with labels).
 * @param {number} count
 * @returns {readonly string[]}
 */
export function paletteFor(count) {
  return count <= 10 ? CATEGORICAL_10 : CATEGORICAL_20;
}

/**
 * CSS colour of category `index` out of `count` categories.
 * @param {number} index
 * @param {number} [count]
 * @returns {string}
 */
export function categorical(index, count = 10) {
  const palette = paletteFor(count);
  if (!Number.isInteger(index) || index < 0) return rgbToHex(MISSING_RGB);
  return palette[index % palette.length];
}

/**
 * [r, g, b] of category `index` out of `count` categories.
 * @param {number} index
 * @param {number} [count]
 * @returns {RGB}
 */
export function categoricalRgb(index, count = 10) {
  return hexToRgb(categorical(index, count));
}

/**
 * Piecewise-linear interpolation through evenly spaced colour stops.
 * @param {ArrayLike<number>[]} stops
 * @param {number} t  in [0, 1], clamped; non-finite gives MISSING_RGB
 * @returns {RGB}
 */
export function interpolateStops(stops, t) {
  if (!Number.isFinite(t)) return [...MISSING_RGB];
  const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  return mix(stops[i], stops[i + 1], x - i).map(Math.round);
}

/**
 * Viridis-like sequential colour for t in [0, 1].
 * @param {number} t
 * @returns {RGB}
 */
export function viridis(t) {
  return interpolateStops(VIRIDIS, t);
}

/**
 * Blue-white-red diverging colour for t in [0, 1] (0.5 is the neutral middle).
 * @param {number} t
 * @returns {RGB}
 */
export function blueWhiteRed(t) {
  return interpolateStops(BLUE_WHITE_RED, t);
}

/**
 * @typedef {((value: number) => RGB) & {css: (value: number) => string,
 *   domain: number[]}} Scale
 */

/**
 * @param {(value: number) => RGB} fn
 * @param {number[]} domain
 * @returns {Scale}
 */
function asScale(fn, domain) {
  const scale = /** @type {Scale} */ (fn);
  scale.css = (v) => rgbToCss(fn(v));
  scale.domain = domain;
  return scale;
}

/**
 * A sequential scale mapping [lo, hi] onto viridis (or another t -> RGB ramp).
 * A degenerate domain (lo == hi) maps every finite value to the middle colour.
 * @param {number} lo
 * @param {number} hi
 * @param {{interpolate?: (t: number) => RGB}} [options]
 * @returns {Scale}
 */
export function sequentialScale(lo, hi, options = {}) {
  const ramp = options.interpolate ?? viridis;
  const span = hi - lo;
  return asScale((v) => {
    if (!Number.isFinite(v)) return [...MISSING_RGB];
    return ramp(span > 0 ? (v - lo) / span : 0.5);
  }, [lo, hi]);
}

/**
 * A diverging scale: `center` is white, the larger of |lo - center| and
 * |hi - center| reaches full blue (below) or red (above), so equal distances
 * from the centre get equal strength.
 * @param {number} lo
 * @param {number} hi
 * @param {{center?: number, interpolate?: (t: number) => RGB}} [options]
 * @returns {Scale}
 */
export function divergingScale(lo, hi, options = {}) {
  const center = options.center ?? 0;
  const ramp = options.interpolate ?? blueWhiteRed;
  const reach = Math.max(Math.abs(lo - center), Math.abs(hi - center));
  return asScale((v) => {
    if (!Number.isFinite(v)) return [...MISSING_RGB];
    return ramp(reach > 0 ? 0.5 + (v - center) / (2 * reach) : 0.5);
  }, [lo, center, hi]);
}

/**
 * Finite minimum and maximum of a numeric array ([0, 0] when nothing is finite).
 * @param {ArrayLike<number>} values
 * @returns {[number, number]}
 */
export function finiteExtent(values) {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return lo <= hi ? [lo, hi] : [0, 0];
}
