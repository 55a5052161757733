// A small chart of statistics over steps: lines (mean, norm, ...) over shaded
// bands (min..max, mean +- std), with the linked step marked and a read-out
// lookup. Used by the layer detail.
import { drawStepAxis, drawYAxis } from "./axis.js";
import { formatNumber, formatStep } from "./format.js";
import { extentIn, makeScale, sizeCanvas, themeColors, tracePath } from "./linechart.js";
import { drawNonfiniteTicks, NONFINITE_CSS, nonfiniteText } from "./nonfinite.js";
import { floorIndex } from "./steps.js";

/**
 * @typedef {object} BandLine
 * @property {string} label
 * @property {ArrayLike<number>} values
 * @property {string} color
 * @property {number[]} [dash]
 */

/**
 * @typedef {object} Band
 * @property {ArrayLike<number>} lo
 * @property {ArrayLike<number>} hi
 * @property {string} color  CSS colour (drawn translucent)
 */

/**
 * @typedef {object} BandChart
 * @property {ArrayLike<number>} steps
 * @property {BandLine[]} lines
 * @property {Band[]} [bands]
 * @property {boolean} [log]  log axis (only positive values are drawn)
 * @property {number | null} [marker]  step marked with a vertical line
 * @property {number} [width]
 * @property {number} [height]
 * @property {ArrayLike<number>} [bad]  non-finite count per step: red ticks, and words
 * @property {[number, number]} [span]  the step axis' extent, when wider than `steps`'
 *   (a series measured at some of the steps its neighbours have)
 */

const M = { left: 52, right: 8, top: 6, bottom: 18 };

/**
 * Draw a band chart; returns a function that turns a canvas x (CSS px) into a
 * read-out line for the nearest step at or before it.
 * @param {HTMLCanvasElement} canvas
 * @param {BandChart} chart
 * @returns {(x: number) => string}
 */
export function drawBandChart(canvas, chart) {
  const width = chart.width ?? 320;
  const height = chart.height ?? 130;
  const ctx = sizeCanvas(canvas, width, height);
  const theme = themeColors(canvas.parentElement ?? canvas);
  const steps = chart.steps;
  const n = steps.length;
  const log = !!chart.log;
  ctx.font = "10px sans-serif";
  if (n === 0) {
    ctx.fillStyle = theme.muted;
    ctx.fillText("nothing recorded yet", M.left, height / 2);
    return () => "";
  }
  const span = chart.span;
  const x0 = span ? Math.min(span[0], steps[0]) : steps[0];
  const last = Math.max(steps[n - 1], span ? span[1] : steps[n - 1]);
  const x1 = last > x0 ? last : x0 + 1;
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  const grow = (/** @type {ArrayLike<number>} */ v) => {
    const e = extentIn(steps, v, x0, x1, log);
    if (e) [lo, hi] = [Math.min(lo, e[0]), Math.max(hi, e[1])];
  };
  for (const line of chart.lines) grow(line.values);
  for (const band of chart.bands ?? []) {
    grow(band.lo);
    grow(band.hi);
  }
  const x0s = makeScale(x0, x1, M.left, width - M.right);
  const badAt = (/** @type {number} */ i) => (chart.bad && chart.bad[i] > 0 ? ` \u00b7 ${nonfiniteText(chart.bad[i])}` : "");
  if (!(lo <= hi)) {
    const ticks = drawNonfiniteTicks(ctx, steps, chart.bad, x0s.map, height - M.bottom, height - M.top - M.bottom);
    ctx.fillStyle = ticks ? NONFINITE_CSS : theme.muted;
    const what = ticks ? "no finite values: non-finite (NaN/inf) where red" : log ? "no positive values" : "no finite values";
    ctx.fillText(what, M.left, height / 2);
    drawStepAxis(ctx, x0s, { from: x0, to: x1, count: 3, y: height - M.bottom + 4, theme });
    return (x) => {
      const i = floorIndex(steps, x0s.invert(x));
      return i < 0 ? "" : `step ${formatStep(steps[i])}: no finite value${badAt(i)}`;
    };
  }
  if (hi === lo) {
    lo = log ? lo / 2 : lo - (Math.abs(lo) || 1) * 0.5;
    hi = log ? hi * 2 : hi + (Math.abs(hi) || 1) * 0.5;
  }
  const sx = makeScale(x0, x1, M.left, width - M.right);
  const sy = makeScale(lo, hi, height - M.bottom, M.top, log);
  drawYAxis(ctx, sy, { lo, hi, log, count: 3, left: M.left, right: width - M.right, gap: 4, theme });
  drawStepAxis(ctx, sx, { from: x0, to: x1, count: 3, y: height - M.bottom + 4, theme });
  ctx.save();
  ctx.beginPath();
  ctx.rect(M.left, M.top, width - M.left - M.right, height - M.top - M.bottom);
  ctx.clip();
  for (const band of chart.bands ?? []) {
    ctx.fillStyle = band.color;
    ctx.globalAlpha = 0.18;
    let open = false;
    /** @type {Array<[number, number]>} */
    let upper = [];
    /** @type {Array<[number, number]>} */
    let lower = [];
    const flush = () => {
      if (upper.length > 1) {
        ctx.beginPath();
        upper.forEach(([x, y], k) => (k ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
        for (let k = lower.length - 1; k >= 0; k--) ctx.lineTo(lower[k][0], lower[k][1]);
        ctx.closePath();
        ctx.fill();
      }
      upper = [];
      lower = [];
      open = false;
    };
    for (let i = 0; i < n; i++) {
      const a = band.lo[i];
      const b = band.hi[i];
      if (!Number.isFinite(a) || !Number.isFinite(b) || (log && (a <= 0 || b <= 0))) {
        if (open) flush();
        continue;
      }
      open = true;
      const x = sx.map(steps[i]);
      upper.push([x, sy.map(b)]);
      lower.push([x, sy.map(a)]);
    }
    flush();
    ctx.globalAlpha = 1;
  }
  for (const line of chart.lines) {
    ctx.strokeStyle = line.color;
    ctx.setLineDash(line.dash ?? []);
    ctx.lineWidth = 1.4;
    ctx.beginPath();
    tracePath(ctx, steps, line.values, sx, sy);
    ctx.stroke();
    if (n === 1 && Number.isFinite(line.values[0])) {
      ctx.fillStyle = line.color;
      ctx.beginPath();
      ctx.arc(sx.map(steps[0]), sy.map(line.values[0]), 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
  }
  ctx.setLineDash([]);
  drawNonfiniteTicks(ctx, steps, chart.bad, sx.map, height - M.bottom, 8);
  const marker = chart.marker;
  if (marker !== null && marker !== undefined && marker >= x0 && marker <= x1) {
    const x = Math.round(sx.map(marker)) + 0.5;
    ctx.strokeStyle = theme.marker;
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(x, M.top);
    ctx.lineTo(x, height - M.bottom);
    ctx.stroke();
    ctx.setLineDash([]);
  }
  ctx.restore();
  return (x) => {
    const i = floorIndex(steps, sx.invert(x));
    if (i < 0) return "";
    const parts = chart.lines.map((line) => `${line.label} ${formatNumber(line.values[i])}`);
    return `step ${formatStep(steps[i])}: ${parts.join(" \u00b7 ")}${badAt(i)}`;
  };
}
