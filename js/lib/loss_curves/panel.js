// One panel of a LossCurves view drawn on its canvas: the y axis fitted to the
// values in view (linear or log), the step axis, every series of the panel
// (EMA-smoothed over its faint raw line where it is dense and not step-shaped,
// the highlighted run on top), the window a drag selects, the
// NaN/Inf stretches as red bands with a mark where each began, the linked step
// and the pointer as vertical lines.
import { drawStepAxis, drawYAxis, niceTicks } from "../axis.js";
import { extentIn, makeScale, sizeCanvas, tracePath, ema } from "../linechart.js";
import { BREAK_NAMES, DASH } from "./series.js";

const HEIGHT = 210;
/** A panel's height in CSS px. */
export const PANEL_HEIGHT = HEIGHT;
const M = { left: 58, right: 14, top: 12, bottom: 24 };
const BREAK_COLOR = "#c62828";

/**
 * @typedef {import("./series.js").Series} Series
 * @typedef {import("../linechart.js").Scale} Scale
 */

/**
 * @typedef {object} PanelOptions
 * @property {Series[]} list  the panel's series
 * @property {import("./series.js").DataOf} dataOf
 * @property {number} width  CSS px
 * @property {[number, number]} domain  the steps in view
 * @property {boolean} log  log y axis
 * @property {number} smoothing  EMA weight in [0, 1)
 * @property {Set<string>} smoothed  ids of the series smoothing applies to (dense, not step-shaped)
 * @property {[number, number] | null} brush  the steps a drag is selecting to zoom into
 * @property {number} step  the linked step
 * @property {number | null} hover  the pointer's x in CSS px, null when it is elsewhere
 * @property {string} highlight  the emphasised run ("" for none)
 * @property {(s: Series) => string} colorOf
 * @property {{muted: string, grid: string, marker: string}} theme
 * @property {(x: number) => string} [xText]  tick labels of a time axis (absent: steps)
 * @property {(x0: number, x1: number, count: number) => number[]} [xTicks]  its tick values
 */

/**
 * The y range to show: the values in view, padded 5%, widened when flat;
 * a fallback range (and false) when nothing in view can be drawn.
 * @param {PanelOptions} o
 * @returns {{lo: number, hi: number, any: boolean}}
 */
export function yRange(o) {
  const [x0, x1] = o.domain;
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const s of o.list) {
    const d = o.dataOf(s);
    for (const values of s.lo && s.hi ? [s.lo, s.hi] : [d.values]) {
      const e = extentIn(d.steps, values, x0, x1, o.log);
      if (e) [lo, hi] = [Math.min(lo, e[0]), Math.max(hi, e[1])];
    }
  }
  const any = lo <= hi;
  if (!any) [lo, hi] = o.log ? [0.1, 10] : [0, 1];
  if (o.log) {
    if (hi === lo) [lo, hi] = [lo / 2, hi * 2];
    const pad = (hi / lo) ** 0.05;
    return { lo: lo / pad, hi: hi * pad, any };
  }
  if (hi === lo) [lo, hi] = [lo - (Math.abs(lo) || 1) * 0.5, hi + (Math.abs(hi) || 1) * 0.5];
  const pad = (hi - lo) * 0.05;
  return { lo: lo - pad, hi: hi + pad, any };
}

/**
 * A vertical line across the plot at x.
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} x
 */
function vertical(ctx, x) {
  ctx.beginPath();
  ctx.moveTo(x, M.top);
  ctx.lineTo(x, HEIGHT - M.bottom);
  ctx.stroke();
}

/**
 * One series: a dot for a single point; smoothed over its faint raw line; or raw.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Series} s
 * @param {PanelOptions} o
 * @param {Scale} sx
 * @param {Scale} sy
 * @returns {BreakMark[]} its break marks in view
 */
function drawSeries(ctx, s, o, sx, sy) {
  const d = o.dataOf(s);
  const color = o.colorOf(s);
  const dim = o.highlight && s.run !== o.highlight ? 0.25 : 1;
  const lineWidth = o.highlight && s.run === o.highlight ? 2.6 : 1.6;
  ctx.strokeStyle = color;
  ctx.fillStyle = color;
  if (s.lo && s.hi) drawBand(ctx, d.steps, s.lo, s.hi, sx, sy, 0.18 * dim);
  ctx.setLineDash(DASH[s.split] ?? []);
  if (d.steps.length === 1) {
    ctx.globalAlpha = dim;
    ctx.beginPath();
    ctx.arc(sx.map(d.steps[0]), sy.map(d.values[0]), 3, 0, 2 * Math.PI);
    ctx.fill();
  } else if (o.smoothing > 0 && o.smoothed.has(s.id)) {
    ctx.globalAlpha = 0.25 * dim;
    ctx.lineWidth = 1;
    ctx.beginPath();
    tracePath(ctx, d.steps, d.values, sx, sy);
    ctx.stroke();
    ctx.globalAlpha = dim;
    ctx.lineWidth = lineWidth;
    ctx.beginPath();
    tracePath(ctx, d.steps, ema(d.values, o.smoothing, d.stride), sx, sy);
    ctx.stroke();
  } else {
    ctx.globalAlpha = dim;
    ctx.lineWidth = lineWidth;
    ctx.beginPath();
    tracePath(ctx, d.steps, d.values, sx, sy);
    ctx.stroke();
  }
  ctx.setLineDash([]);
  if (d.steps.length > 1) dotIsolated(ctx, d.steps, d.values, sx, sy);
  return drawBreaks(ctx, s, o, sx, dim);
}

/**
 * A dot for each finite value between non-finite ones (or an end): a line has
 * nothing to join it to, so without the dot it would not be seen at all.
 * @param {CanvasRenderingContext2D} ctx
 * @param {ArrayLike<number>} steps
 * @param {ArrayLike<number>} values
 * @param {Scale} sx
 * @param {Scale} sy
 */
function dotIsolated(ctx, steps, values, sx, sy) {
  const ok = (/** @type {number} */ i) => i >= 0 && i < values.length && Number.isFinite(values[i]) && (!sy.log || values[i] > 0);
  for (let i = 0; i < values.length; i++) {
    if (!ok(i) || ok(i - 1) || ok(i + 1)) continue;
    ctx.beginPath();
    ctx.arc(sx.map(steps[i]), sy.map(values[i]), 3, 0, 2 * Math.PI);
    ctx.fill();
  }
}

/**
 * A group's min/max band: filled between its lows and highs, broken where either is not finite.
 * @param {CanvasRenderingContext2D} ctx
 * @param {ArrayLike<number>} xs
 * @param {ArrayLike<number>} lo
 * @param {ArrayLike<number>} hi
 * @param {Scale} sx
 * @param {Scale} sy
 * @param {number} alpha
 */
function drawBand(ctx, xs, lo, hi, sx, sy, alpha) {
  const ok = (/** @type {number} */ i) => Number.isFinite(lo[i]) && Number.isFinite(hi[i]) && (!sy.log || lo[i] > 0);
  ctx.globalAlpha = alpha;
  let i = 0;
  while (i < xs.length) {
    while (i < xs.length && !ok(i)) i++;
    const start = i;
    while (i < xs.length && ok(i)) i++;
    if (i - start < 2) continue;
    ctx.beginPath();
    ctx.moveTo(sx.map(xs[start]), sy.map(hi[start]));
    for (let k = start + 1; k < i; k++) ctx.lineTo(sx.map(xs[k]), sy.map(hi[k]));
    for (let k = i - 1; k >= start; k--) ctx.lineTo(sx.map(xs[k]), sy.map(lo[k]));
    ctx.closePath();
    ctx.fill();
  }
}

/** Space (px) kept between two break labels. */
const LABEL_GAP = 6;
/** A label starts this far left of its mark (over its triangle's left corner). */
const LABEL_LEAD = 4;

/**
 * @typedef {{x: number, name: string}} BreakMark  a break's mark: its x (px) and its name
 * @typedef {{text: string, left: number, right: number, marks: BreakMark[]}} BreakLabel
 */

/**
 * The labels of a panel's break marks, none overlapping another: each mark's
 * name above it (over the row of marks, so a label never hides one); marks whose labels would touch share one label that
 * counts them ("+Inf \u00d72, NaN"), and a label is kept left of `right`.
 * @param {BreakMark[]} marks
 * @param {(text: string) => number} measure  text width in px
 * @param {number} right  the plot's right edge (px)
 * @param {number} [leftEdge]  the plot's left edge (px): no label starts left of it
 * @returns {BreakLabel[]} left to right
 */
export function breakLabels(marks, measure, right, leftEdge = Number.NEGATIVE_INFINITY) {
  /** @type {BreakLabel[]} */
  const out = [];
  const place = (/** @type {BreakMark[]} */ group) => {
    const counts = new Map();
    for (const m of group) counts.set(m.name, (counts.get(m.name) ?? 0) + 1);
    const text = [...counts].map(([name, n]) => (n > 1 ? `${name} \u00d7${n}` : name)).join(", ");
    const w = measure(text);
    const left = Math.max(leftEdge, Math.min(group[0].x - LABEL_LEAD, right - w));
    return { text, left, right: left + w, marks: group };
  };
  for (const m of [...marks].sort((a, b) => a.x - b.x)) {
    const last = out.at(-1);
    const mine = place([m]);
    if (last && mine.left < last.right + LABEL_GAP) out[out.length - 1] = place([...last.marks, m]);
    else out.push(mine);
    // a label grown (or pushed left at the edge) may now reach the one before it
    while (out.length > 1 && out[out.length - 1].left < out[out.length - 2].right + LABEL_GAP) {
      const b = /** @type {BreakLabel} */ (out.pop());
      const a = /** @type {BreakLabel} */ (out.pop());
      out.push(place([...a.marks, ...b.marks]));
    }
  }
  return out;
}

/**
 * Where a series broke: a band over each non-finite stretch in view and a mark
 * at its start; returns the marks in view with their names (NaN, +Inf, -Inf),
 * labelled once for the panel by drawBreakLabels.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Series} s
 * @param {PanelOptions} o
 * @param {Scale} sx
 * @param {number} dim
 * @returns {BreakMark[]}
 */
function drawBreaks(ctx, s, o, sx, dim) {
  /** @type {BreakMark[]} */
  const marks = [];
  const [x0, x1] = o.domain;
  const bottom = HEIGHT - M.bottom;
  const b = s.breaks;
  for (let i = 0; i + 2 < b.length; i += 3) {
    const [s0, s1, kind] = [b[i], b[i + 1], b[i + 2]];
    if (s1 < x0 || s0 > x1) continue;
    const xa = sx.map(s0);
    const xb = Math.max(sx.map(s1), xa + 1);
    ctx.globalAlpha = 0.12 * dim;
    ctx.fillStyle = BREAK_COLOR;
    ctx.fillRect(xa, M.top, xb - xa, bottom - M.top);
    ctx.globalAlpha = dim;
    ctx.beginPath();
    ctx.moveTo(xa, bottom);
    ctx.lineTo(xa - 5, bottom - 9);
    ctx.lineTo(xa + 5, bottom - 9);
    ctx.closePath();
    ctx.fill();
    if (s0 >= x0) marks.push({ x: xa, name: BREAK_NAMES.get(kind) ?? "NaN" });
  }
  return marks;
}

/**
 * The break marks' names, laid out by breakLabels so that none overlaps another.
 * @param {CanvasRenderingContext2D} ctx
 * @param {BreakMark[]} marks
 * @param {number} right  the plot's right edge
 * @returns {BreakLabel[]}
 */
function drawBreakLabels(ctx, marks, right) {
  const labels = breakLabels(marks, (t) => ctx.measureText(t).width, right, M.left + 1);
  ctx.globalAlpha = 1;
  ctx.fillStyle = BREAK_COLOR;
  ctx.textAlign = "left";
  ctx.textBaseline = "bottom";
  for (const l of labels) ctx.fillText(l.text, l.left, HEIGHT - M.bottom - 11);
  return labels;
}

/**
 * Draw a panel; returns its step scale (pixel <-> step, for the pointer) with
 * the break labels drawn.
 * @param {HTMLCanvasElement} canvas
 * @param {PanelOptions} o
 * @returns {Scale & {labels: BreakLabel[]}}
 */
export function drawPanel(canvas, o) {
  const { width, theme } = o;
  const ctx = sizeCanvas(canvas, width, HEIGHT);
  const [x0, x1] = o.domain;
  const sx = makeScale(x0, x1, M.left, width - M.right);
  const bottom = HEIGHT - M.bottom;
  const { lo, hi, any } = yRange(o);
  ctx.font = "11px sans-serif";
  ctx.fillStyle = theme.muted;
  if (!any) {
    ctx.fillText(o.log ? "no positive values to show on a log axis" : "no finite values in view", M.left + 8, HEIGHT / 2);
  }
  const sy = makeScale(lo, hi, bottom, M.top, o.log);

  // axes and grid
  drawYAxis(ctx, sy, { lo, hi, log: o.log, count: 4, left: M.left, right: width - M.right, gap: 6, theme });
  const count = Math.max(2, Math.floor(width / 110));
  if (o.xText) {
    const xText = o.xText;
    ctx.fillStyle = theme.muted;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const ticks = o.xTicks?.(x0, x1, count) ?? [];
    for (const t of ticks.length ? ticks : niceTicks(x0, x1, count)) ctx.fillText(xText(t), sx.map(t), bottom + 6);
  } else {
    drawStepAxis(ctx, sx, { from: x0, to: x1, count, y: bottom + 6, theme });
  }
  ctx.strokeStyle = theme.muted;
  ctx.beginPath();
  ctx.moveTo(M.left + 0.5, M.top);
  ctx.lineTo(M.left + 0.5, bottom + 0.5);
  ctx.lineTo(width - M.right, bottom + 0.5);
  ctx.stroke();

  ctx.save();
  ctx.beginPath();
  ctx.rect(M.left, M.top - 2, width - M.left - M.right, bottom - M.top + 4);
  ctx.clip();
  // the highlighted run last, on top
  const ordered = [...o.list].sort((a, b) => Number(a.run === o.highlight) - Number(b.run === o.highlight));
  const marks = ordered.flatMap((s) => drawSeries(ctx, s, o, sx, sy));
  ctx.globalAlpha = 1;
  const labels = drawBreakLabels(ctx, marks, width - M.right);
  // the window a drag is selecting
  if (o.brush) {
    const xa = sx.map(Math.max(o.brush[0], x0));
    const xb = sx.map(Math.min(o.brush[1], x1));
    ctx.globalAlpha = 0.15;
    ctx.fillStyle = theme.marker;
    ctx.fillRect(Math.min(xa, xb), M.top, Math.abs(xb - xa), bottom - M.top);
    ctx.globalAlpha = 1;
  }
  // the linked step, and the pointer
  if (o.step >= x0 && o.step <= x1) {
    ctx.strokeStyle = theme.marker;
    ctx.setLineDash([3, 3]);
    ctx.lineWidth = 1;
    vertical(ctx, Math.round(sx.map(o.step)) + 0.5);
    ctx.setLineDash([]);
  }
  if (o.hover !== null) {
    ctx.strokeStyle = theme.muted;
    ctx.globalAlpha = 0.6;
    vertical(ctx, o.hover + 0.5);
    ctx.globalAlpha = 1;
  }
  ctx.restore();
  return Object.assign(sx, { labels });
}
