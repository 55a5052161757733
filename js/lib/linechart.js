// Pieces of a canvas line chart: scales (linear and log), EMA smoothing, the
// extent of a series in view, tracing a series as a path that breaks at NaN/Inf
// (and at values a log axis cannot show), a crisp canvas and the theme's colours.
// Axes are in axis.js, the search over sorted steps in steps.js.
import { lowerBound } from "./steps.js";

/**
 * @typedef {object} Scale
 * @property {(v: number) => number} map  value -> pixel
 * @property {(px: number) => number} invert  pixel -> value
 * @property {[number, number]} domain
 * @property {boolean} log
 */

/**
 * A linear or log10 scale from [d0, d1] onto [r0, r1] pixels.
 * @param {number} d0
 * @param {number} d1
 * @param {number} r0
 * @param {number} r1
 * @param {boolean} [log]
 * @returns {Scale}
 */
export function makeScale(d0, d1, r0, r1, log = false) {
  if (log && !(d0 > 0 && d1 > 0)) {
    throw new RangeError(`nbviz linechart: a log scale needs a positive domain, got [${d0}, ${d1}]`);
  }
  const f = log ? Math.log10 : (/** @type {number} */ v) => v;
  const g = log ? (/** @type {number} */ v) => 10 ** v : (/** @type {number} */ v) => v;
  const a = f(d0);
  const b = f(d1);
  const span = b - a || 1;
  return {
    map: (v) => r0 + ((f(v) - a) / span) * (r1 - r0),
    invert: (px) => g(a + ((px - r0) / (r1 - r0)) * span),
    domain: [d0, d1],
    log,
  };
}

/**
 * Exponential moving average, debiased like TensorBoard's smoothing.
 *
 * `weight` is the smoothing per raw point; a point that stands for `stride`
 * raw points (a summarised series) uses weight^stride, so the curve looks the
 * same at every zoom level. Non-finite values give NaN and leave the average as
 * it was (the line breaks there, then carries on).
 * @param {ArrayLike<number>} values
 * @param {number} weight  in [0, 1)
 * @param {number} [stride]
 * @returns {Float64Array}
 */
export function ema(values, weight, stride = 1) {
  const out = new Float64Array(values.length);
  const w = Math.min(Math.max(weight, 0), 0.9999) ** Math.max(stride, 1);
  let acc = 0;
  let norm = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) {
      out[i] = Number.NaN;
      continue;
    }
    acc = acc * w + (1 - w) * v;
    norm = norm * w + (1 - w);
    out[i] = acc / norm;
  }
  return out;
}

/**
 * [min, max] of the values whose steps lie in [x0, x1] (positive values only
 * for a log axis), or null when none.
 * @param {ArrayLike<number>} steps
 * @param {ArrayLike<number>} values
 * @param {number} x0
 * @param {number} x1
 * @param {boolean} [log]
 * @returns {[number, number] | null}
 */
export function extentIn(steps, values, x0, x1, log = false) {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  const a = Math.max(0, lowerBound(steps, x0) - 1);
  const b = Math.min(steps.length, lowerBound(steps, x1) + 1);
  for (let i = a; i < b; i++) {
    const v = values[i];
    if (!Number.isFinite(v) || (log && v <= 0)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo <= hi ? [lo, hi] : null;
}

/**
 * Add a series to the current canvas path, from just before x0 to just after
 * x1, lifting the pen at non-finite values (and at values <= 0 on a log axis).
 * Returns the number of points drawn.
 * @param {{moveTo: (x: number, y: number) => void, lineTo: (x: number, y: number) => void}} ctx
 * @param {ArrayLike<number>} steps
 * @param {ArrayLike<number>} values
 * @param {Scale} sx
 * @param {Scale} sy
 * @returns {number}
 */
export function tracePath(ctx, steps, values, sx, sy) {
  const [x0, x1] = sx.domain;
  const a = Math.max(0, lowerBound(steps, x0) - 1);
  const b = Math.min(steps.length, lowerBound(steps, x1) + 1);
  let pen = false;
  let drawn = 0;
  for (let i = a; i < b; i++) {
    const v = values[i];
    if (!Number.isFinite(v) || (sy.log && v <= 0)) {
      pen = false;
      continue;
    }
    const x = sx.map(steps[i]);
    const y = sy.map(v);
    if (pen) ctx.lineTo(x, y);
    else ctx.moveTo(x, y);
    pen = true;
    drawn++;
  }
  return drawn;
}

/**
 * Size a canvas for crisp drawing at the device pixel ratio; returns its 2d
 * context scaled so that drawing uses CSS pixels.
 * @param {HTMLCanvasElement} canvas
 * @param {number} width  CSS pixels
 * @param {number} height  CSS pixels
 * @param {number} [dpr]  device pixels per CSS pixel (default: the window's)
 * @returns {CanvasRenderingContext2D}
 */
export function sizeCanvas(canvas, width, height, dpr = globalThis.devicePixelRatio ?? 1) {
  canvas.width = Math.max(1, Math.round(width * dpr));
  canvas.height = Math.max(1, Math.round(height * dpr));
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  if (!ctx) throw new Error("nbviz: this browser gave no 2d canvas context");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  return ctx;
}

/**
 * Theme colours read from JupyterLab's CSS variables (with light fallbacks).
 * @param {Element} node
 * @returns {{text: string, muted: string, grid: string, background: string, marker: string}}
 */
export function themeColors(node) {
  const css = globalThis.getComputedStyle ? globalThis.getComputedStyle(node) : null;
  const v = (/** @type {string} */ name, /** @type {string} */ fallback) =>
    (css?.getPropertyValue(name) || "").trim() || fallback;
  return {
    text: v("--jp-ui-font-color1", "#1f1f1f"),
    muted: v("--jp-ui-font-color2", "#616161"),
    grid: v("--jp-border-color2", "#e0e0e0"),
    background: v("--jp-layout-color0", "#ffffff"),
    marker: v("--jp-ui-font-color1", "#1f1f1f"),
  };
}
