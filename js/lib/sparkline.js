// Tiny canvas charts for table cells: a sparkline over steps with the linked
// step marked, and a histogram's bars.
import { shortNumber } from "./format.js";
import { extentIn, makeScale, sizeCanvas, tracePath } from "./linechart.js";
import { drawNonfiniteTicks, NONFINITE_CSS } from "./nonfinite.js";
import { floorIndex } from "./steps.js";

/**
 * @typedef {object} SparklineOptions
 * @property {number} [width]  CSS pixels (default 90)
 * @property {number} [height]  CSS pixels (default 22)
 * @property {string} [color]
 * @property {number | null} [marker]  step to mark with a dot
 * @property {boolean} [log]  log scale when every finite value is positive
 * @property {ArrayLike<number>} [bad]  non-finite count per step: a red tick where > 0
 */

/**
 * Draw `values` over `steps` (both sorted by step) into `canvas`.
 * Returns the number of finite points drawn (0 draws a flat "no data" dash).
 * @param {HTMLCanvasElement} canvas
 * @param {ArrayLike<number>} steps
 * @param {ArrayLike<number>} values
 * @param {SparklineOptions} [options]
 * @returns {number}
 */
export function drawSparkline(canvas, steps, values, options = {}) {
  const width = options.width ?? 90;
  const height = options.height ?? 22;
  const ctx = sizeCanvas(canvas, width, height);
  const color = options.color ?? "#0072b2";
  const n = steps.length;
  const ext = n ? extentIn(steps, values, steps[0], steps[n - 1], false) : null;
  const tickX = makeScale(steps[0] ?? 0, n > 1 ? steps[n - 1] : (steps[0] ?? 0) + 1, 2, width - 2);
  const ticks = () => drawNonfiniteTicks(ctx, steps, options.bad, tickX.map, height, 6);
  if (!ext) {
    ctx.strokeStyle = "#bdbdbd";
    ctx.beginPath();
    ctx.moveTo(2, height / 2);
    ctx.lineTo(width - 2, height / 2);
    ctx.stroke();
    ticks();
    markNonfinite(ctx, steps, values, options, tickX.map, height);
    return 0;
  }
  let [lo, hi] = ext;
  const log = !!options.log && lo > 0;
  if (hi === lo) {
    lo = log ? lo / 2 : lo - 1;
    hi = log ? hi * 2 : hi + 1;
  }
  const x1 = n > 1 ? steps[n - 1] : steps[0] + 1;
  const sx = makeScale(steps[0], x1, 2, width - 2);
  const sy = makeScale(lo, hi, height - 3, 3, log);
  ctx.strokeStyle = color;
  ctx.lineWidth = 1.2;
  ctx.beginPath();
  const drawn = tracePath(ctx, steps, values, sx, sy);
  ctx.stroke();
  ticks();
  const marker = options.marker;
  if (marker !== null && marker !== undefined) {
    const i = floorIndex(steps, marker);
    if (i >= 0 && Number.isFinite(values[i]) && (!log || values[i] > 0)) {
      ctx.fillStyle = color;
      ctx.beginPath();
      ctx.arc(sx.map(steps[i]), sy.map(values[i]), 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
  }
  markNonfinite(ctx, steps, values, options, sx.map, height);
  return drawn;
}

/**
 * At the marked step, a value that is non-finite (with a count) is a red dot at mid height.
 * @param {CanvasRenderingContext2D} ctx
 * @param {ArrayLike<number>} steps
 * @param {ArrayLike<number>} values
 * @param {SparklineOptions} options
 * @param {(step: number) => number} x
 * @param {number} height
 */
function markNonfinite(ctx, steps, values, options, x, height) {
  const marker = options.marker;
  if (marker === null || marker === undefined || !options.bad) return;
  const i = floorIndex(steps, marker);
  if (i < 0 || Number.isFinite(values[i]) || !(options.bad[i] > 0)) return;
  ctx.fillStyle = NONFINITE_CSS;
  ctx.beginPath();
  ctx.arc(x(steps[i]), height / 2, 3, 0, 2 * Math.PI);
  ctx.fill();
}

/**
 * Draw a histogram: `counts` in equal bins over [lo, hi].
 * @param {HTMLCanvasElement} canvas
 * @param {ArrayLike<number>} counts
 * @param {number} lo
 * @param {number} hi
 * @param {{width?: number, height?: number, color?: string, text?: string}} [options]
 */
export function drawBars(canvas, counts, lo, hi, options = {}) {
  const width = options.width ?? 220;
  const height = options.height ?? 90;
  const ctx = sizeCanvas(canvas, width, height);
  const bottom = height - 14;
  let max = 0;
  for (let i = 0; i < counts.length; i++) if (counts[i] > max) max = counts[i];
  const w = (width - 4) / Math.max(counts.length, 1);
  ctx.fillStyle = options.color ?? "#0072b2";
  for (let i = 0; i < counts.length; i++) {
    const h = max > 0 ? (counts[i] / max) * (bottom - 4) : 0;
    ctx.fillRect(2 + i * w, bottom - h, Math.max(w - 0.5, 0.5), h);
  }
  ctx.strokeStyle = "#9e9e9e";
  ctx.beginPath();
  ctx.moveTo(2, bottom + 0.5);
  ctx.lineTo(width - 2, bottom + 0.5);
  ctx.stroke();
  ctx.fillStyle = options.text ?? "#616161";
  ctx.font = "10px sans-serif";
  ctx.textBaseline = "top";
  ctx.textAlign = "left";
  ctx.fillText(shortNumber(lo), 2, bottom + 2);
  ctx.textAlign = "right";
  ctx.fillText(shortNumber(hi), width - 2, bottom + 2);
}

/**
 * Draw one bar per value from a zero line: positive values up, negative down
 * (per-unit means of a layer that is not a ReLU have both signs).
 * @param {HTMLCanvasElement} canvas
 * @param {ArrayLike<number>} values
 * @param {{width?: number, height?: number, color?: string, negative?: string}} [options]
 * @returns {number} the y of the zero line, in CSS px
 */
export function drawSignedBars(canvas, values, options = {}) {
  const width = options.width ?? 220;
  const height = options.height ?? 70;
  const ctx = sizeCanvas(canvas, width, height);
  let hi = 0;
  let lo = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v)) {
      hi = Math.max(hi, v);
      lo = Math.min(lo, v);
    }
  }
  const span = hi - lo || 1;
  const top = 2;
  const usable = height - 4;
  const zero = top + (hi / span) * usable;
  const w = (width - 4) / Math.max(values.length, 1);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v) || v === 0) continue;
    const h = (Math.abs(v) / span) * usable;
    ctx.fillStyle = v > 0 ? (options.color ?? "#0072b2") : (options.negative ?? "#d55e00");
    ctx.fillRect(2 + i * w, v > 0 ? zero - h : zero, Math.max(w - 0.5, 0.5), h);
  }
  ctx.strokeStyle = "#9e9e9e";
  ctx.beginPath();
  ctx.moveTo(2, Math.round(zero) + 0.5);
  ctx.lineTo(width - 2, Math.round(zero) + 0.5);
  ctx.stroke();
  return zero;
}
