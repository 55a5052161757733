// Axes of the canvas charts: round tick values (linear and log), their labels,
// and drawing them: a y axis as grid lines with labels left of the plot, a
// step axis under it, a value axis with tick marks under a histogram.
import { formatNumber, formatStep } from "./format.js";

/**
 * @typedef {{map: (v: number) => number}} Mapping  value -> pixel
 * @typedef {{muted: string, grid: string}} AxisTheme
 */

/**
 * About `count` round tick values covering [lo, hi] (steps of 1, 2 or 5 x 10^k).
 * @param {number} lo
 * @param {number} hi
 * @param {number} [count]
 * @returns {number[]}
 */
export function niceTicks(lo, hi, count = 5) {
  if (!(Number.isFinite(lo) && Number.isFinite(hi))) return [];
  if (hi < lo) [lo, hi] = [hi, lo];
  if (hi === lo) return [lo];
  const raw = (hi - lo) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm >= 5 ? 10 : norm >= 2 ? 5 : norm >= 1 ? 2 : 1) * mag;
  // k * step rounded to the step's decimals: 0.3, not 0.30000000000000004; 0, not -0
  const decimals = Math.max(0, -Math.floor(Math.log10(step)));
  const ticks = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) {
    ticks.push(Number((k * step).toFixed(decimals)) + 0);
  }
  return ticks;
}

/**
 * Tick values for a log axis over [lo, hi] (lo > 0): powers of ten, with 2 and
 * 5 between them when the range spans less than three decades.
 * @param {number} lo
 * @param {number} hi
 * @returns {number[]}
 */
export function logTicks(lo, hi) {
  if (!(lo > 0 && hi > 0)) return [];
  if (hi < lo) [lo, hi] = [hi, lo];
  const e0 = Math.floor(Math.log10(lo));
  const e1 = Math.ceil(Math.log10(hi));
  const mults = e1 - e0 <= 2 ? [1, 2, 5] : [1];
  const ticks = [];
  for (let e = e0; e <= e1; e++) {
    for (const m of mults) {
      const t = m * 10 ** e;
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push(t);
    }
  }
  return ticks.length ? ticks : [lo, hi];
}

/**
 * Labels for axis ticks: as many decimals as the spacing of the ticks needs, so
 * close ticks (1.3855, 1.3860) never print the same text.
 * @param {number[]} ticks  sorted, evenly spaced (from niceTicks)
 * @returns {string[]}
 */
export function tickLabels(ticks) {
  if (ticks.length < 2) return ticks.map(formatNumber);
  const spacing = Math.abs(ticks[1] - ticks[0]);
  const magnitude = Math.max(...ticks.map(Math.abs));
  if (!(spacing > 0) || magnitude >= 1e5 || magnitude < 1e-3) return ticks.map(formatNumber);
  const decimals = Math.min(12, Math.max(0, -Math.floor(Math.log10(spacing) + 1e-9)));
  return ticks.map((t) => t.toFixed(decimals));
}

/**
 * Ticks of an axis over [lo, hi] with their labels.
 * @param {number} lo
 * @param {number} hi
 * @param {{log?: boolean, count?: number}} [options]  count: about how many (linear axes)
 * @returns {{values: number[], labels: string[]}}
 */
export function axisTicks(lo, hi, options = {}) {
  if (options.log) {
    const values = logTicks(lo, hi);
    return { values, labels: values.map(formatNumber) };
  }
  const values = niceTicks(lo, hi, options.count ?? 5);
  return { values, labels: tickLabels(values) };
}

/**
 * Round step numbers to label an x axis of steps over [x0, x1]: whole steps only.
 * @param {number} x0
 * @param {number} x1
 * @param {number} count
 * @returns {number[]}
 */
export function stepTicks(x0, x1, count) {
  return niceTicks(x0, x1, count).filter((t) => Number.isInteger(t));
}

/**
 * A y axis: a grid line across the plot at each tick, its label right-aligned
 * left of the plot. The caller sets the font.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Mapping} sy
 * @param {{lo: number, hi: number, log?: boolean, count?: number, left: number, right: number,
 *   gap: number, theme: AxisTheme}} o  left/right: the plot's x extent; gap: px between label and plot
 */
export function drawYAxis(ctx, sy, o) {
  const { values, labels } = axisTicks(o.lo, o.hi, { log: o.log, count: o.count });
  ctx.strokeStyle = o.theme.grid;
  ctx.fillStyle = o.theme.muted;
  ctx.lineWidth = 1;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const [k, t] of values.entries()) {
    const y = Math.round(sy.map(t)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(o.left, y);
    ctx.lineTo(o.right, y);
    ctx.stroke();
    ctx.fillText(labels[k], o.left - o.gap, y);
  }
}

/**
 * A step axis: step numbers centred under their x, their tops at `y`.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Mapping} sx
 * @param {{from: number, to: number, count: number, y: number, theme: AxisTheme}} o
 */
export function drawStepAxis(ctx, sx, o) {
  ctx.fillStyle = o.theme.muted;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (const t of stepTicks(o.from, o.to, o.count)) ctx.fillText(formatStep(t), sx.map(t), o.y);
}

/**
 * A value axis under a plot: a short tick mark down from `y` and its label
 * under it at each round value of [lo, hi].
 * @param {CanvasRenderingContext2D} ctx
 * @param {Mapping} sx
 * @param {{lo: number, hi: number, count?: number, y: number, theme: AxisTheme}} o
 */
export function drawValueAxis(ctx, sx, o) {
  const { values, labels } = axisTicks(o.lo, o.hi, { count: o.count ?? 5 });
  ctx.fillStyle = o.theme.muted;
  ctx.strokeStyle = o.theme.grid;
  ctx.font = "10px sans-serif";
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (const [k, t] of values.entries()) {
    const x = sx.map(t);
    ctx.beginPath();
    ctx.moveTo(x, o.y);
    ctx.lineTo(x, o.y + 4);
    ctx.stroke();
    ctx.fillText(labels[k], x, o.y + 6);
  }
}
