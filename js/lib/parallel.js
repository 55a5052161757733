// Parallel coordinates of many runs: one vertical axis per config key that
// varies and one for a metric, each run a line across them coloured by its
// metric; brushes (ranges on an axis) drawn over the axes, and the arithmetic a
// drag needs (which axis is under the pointer, the range a drag covers). Axis
// and category names come from data: drawn as canvas text, never as HTML, each
// kept inside the canvas and clear of its neighbours (cut with "…", the whole
// text in the canvas' tooltip: cutTextAt).
import { formatNumber } from "./format.js";
import { rgbToCss, viridis } from "./color.js";

export const PC_HEIGHT = 250;
const M = { top: 34, bottom: 26, left: 46, right: 70 };
/** How near (CSS px) an axis a drag must start to brush it. */
export const GRAB = 14;

/**
 * @typedef {{key: string, label: string, kind: "number" | "category", lo: number, hi: number,
 *   categories?: string[], metric?: boolean}} Axis
 * @typedef {{left: number, right: number, top: number, bottom: number, text: string}} CutText
 *   a text drawn shortened: where it is, and all of it
 * @typedef {Axis & {x: number, cut?: CutText[]}} PlacedAxis
 * @typedef {Record<string, number | null>} Coords
 */

/**
 * The axes placed evenly across `width`, the first `left` px from the left edge.
 * @param {Axis[]} axes
 * @param {number} width
 * @param {number} [left]
 * @returns {PlacedAxis[]}
 */
export function placeAxes(axes, width, left = M.left) {
  const span = Math.max(1, width - left - M.right);
  const step = axes.length > 1 ? span / (axes.length - 1) : 0;
  return axes.map((a, i) => ({ ...a, x: Math.round(left + i * step) + 0.5 }));
}

/**
 * Room to leave left of the first axis: enough for its tick texts (as far as
 * AXIS_TEXT_MAX characters go), between the usual margin and a fifth of the width.
 * @param {Axis[]} axes
 * @param {number} width
 * @param {(t: string) => number} measure
 */
export function leftMargin(axes, width, measure) {
  const a = axes[0];
  if (!a) return M.left;
  const ticks = a.kind === "category" ? (a.categories ?? []).map((_, i) => i) : [a.lo, a.hi];
  const widest = Math.max(0, ...ticks.map((t) => measure(clipText(tickText(a, t)))));
  return Math.round(Math.min(Math.max(M.left, widest + 12), width / 5));
}

/**
 * An axis' coordinate <-> y pixel (low values at the bottom; a flat range padded).
 * @param {Axis} axis
 * @returns {{map: (v: number) => number, invert: (y: number) => number, top: number, bottom: number}}
 */
export function axisScale(axis) {
  let { lo, hi } = axis;
  if (!(hi > lo)) [lo, hi] = [lo - 0.5, hi + 0.5];
  const top = M.top;
  const bottom = PC_HEIGHT - M.bottom;
  return {
    top,
    bottom,
    map: (v) => bottom - ((v - lo) / (hi - lo)) * (bottom - top),
    invert: (y) => lo + ((bottom - y) / (bottom - top)) * (hi - lo),
  };
}

/**
 * The axis a pointer at x grabs (within GRAB px), or null.
 * @param {PlacedAxis[]} placed
 * @param {number} x
 * @returns {PlacedAxis | null}
 */
export function axisNear(placed, x) {
  let best = null;
  for (const a of placed) if (Math.abs(a.x - x) <= GRAB && (!best || Math.abs(a.x - x) < Math.abs(best.x - x))) best = a;
  return best;
}

/**
 * The brush a drag from y0 to y1 along `axis` makes: [lo, hi] in its coordinates;
 * on a category axis widened to whole categories.
 * @param {Axis} axis
 * @param {number} y0
 * @param {number} y1
 * @returns {[number, number]}
 */
export function brushOf(axis, y0, y1) {
  const s = axisScale(axis);
  let a = s.invert(Math.max(y0, y1));
  let b = s.invert(Math.min(y0, y1));
  if (axis.kind === "category") [a, b] = [Math.ceil(a - 0.5) - 0.5, Math.floor(b + 0.5) + 0.5];
  return [a, b];
}

/**
 * Whether coordinates pass every brush.
 * @param {Coords} coords
 * @param {Record<string, [number, number]>} brushes
 * @returns {boolean}
 */
export function inBrushes(coords, brushes) {
  for (const [key, [lo, hi]] of Object.entries(brushes)) {
    const v = coords[key];
    if (v === null || v === undefined || v < lo || v > hi) return false;
  }
  return true;
}

/** Longest text drawn beside or above an axis: a long config value or key is cut with "…". */
export const AXIS_TEXT_MAX = 24;

/** @param {string} text @returns {string} */
export const clipText = (text) => (text.length > AXIS_TEXT_MAX ? `${text.slice(0, AXIS_TEXT_MAX - 1)}\u2026` : text);

/** @param {Axis} a @param {number} v */
const tickText = (a, v) => (a.kind === "category" ? String(a.categories?.[Math.round(v)] ?? "") : formatNumber(v));

/**
 * `text` cut with "…" to fit `room` px (as `measure` says; at most AXIS_TEXT_MAX
 * characters): what is drawn, and whether it was cut.
 * @param {string} text
 * @param {number} room
 * @param {(t: string) => number} measure
 * @returns {{text: string, cut: boolean}}
 */
export function fitText(text, room, measure) {
  let shown = clipText(text);
  if (measure(shown) <= room) return { text: shown, cut: shown !== text };
  // the longest prefix (plus "…") that fits: binary search over its length
  let lo = 0;
  let hi = Math.min(text.length, AXIS_TEXT_MAX - 1);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (measure(`${text.slice(0, mid)}\u2026`) <= room) lo = mid;
    else hi = mid - 1;
  }
  shown = lo > 0 ? `${text.slice(0, lo)}\u2026` : "\u2026";
  return { text: shown, cut: true };
}

/**
 * Where axis k's name goes: centred over the axis, kept between the midpoints to
 * its neighbours and inside the canvas (2 px from each edge), cut to that room.
 * @param {PlacedAxis[]} placed
 * @param {number} k
 * @param {number} width  the canvas width (CSS px)
 * @param {(t: string) => number} measure
 * @returns {{text: string, cut: boolean, left: number, right: number}}  left/right: the drawn text's extent
 */
export function axisLabel(placed, k, width, measure) {
  const a = placed[k];
  const left = k > 0 ? (placed[k - 1].x + a.x) / 2 + 2 : 2;
  const right = k < placed.length - 1 ? (a.x + placed[k + 1].x) / 2 - 2 : width - 2;
  const fit = fitText(a.label, Math.max(0, right - left), measure);
  const w = measure(fit.text);
  const x = Math.min(Math.max(a.x - w / 2, left), right - w);
  return { ...fit, left: x, right: x + w };
}

/**
 * The room (px) left of axis k for its tick texts: up to the previous axis, or the canvas' edge.
 * @param {PlacedAxis[]} placed
 * @param {number} k
 */
export function tickRoom(placed, k) {
  const a = placed[k];
  return Math.max(0, a.x - 6 - (k > 0 ? placed[k - 1].x + 4 : 2));
}

/**
 * The whole text of a name or tick that was cut where the pointer is (for a
 * tooltip), or "" when the pointer is over none.
 * @param {PlacedAxis[]} placed  as drawParallel returned them (with their cut texts)
 * @param {number} x
 * @param {number} y
 * @returns {string}
 */
export function cutTextAt(placed, x, y) {
  for (const a of placed) {
    for (const t of a.cut ?? []) if (x >= t.left - 2 && x <= t.right + 2 && y >= t.top && y <= t.bottom) return t.text;
  }
  return "";
}

/**
 * @typedef {object} ParallelOptions
 * @property {Axis[]} axes
 * @property {Coords[]} coords  one per run
 * @property {boolean[]} chosen  per run: in the selection (all true when there is none)
 * @property {Record<string, [number, number]>} brushes
 * @property {[string, number, number] | null} preview  a brush being dragged: axis key, y0, y1
 * @property {number} width  CSS px
 * @property {{muted: string, grid: string, text: string, background: string}} theme
 * @property {number} [highlight]  index of a run to draw on top, thicker
 */

/**
 * Draw the parallel coordinates; returns the placed axes.
 * @param {HTMLCanvasElement} canvas
 * @param {ParallelOptions} o
 * @param {(canvas: HTMLCanvasElement, w: number, h: number) => CanvasRenderingContext2D} size
 * @returns {PlacedAxis[]}
 */
export function drawParallel(canvas, o, size) {
  const ctx = size(canvas, o.width, PC_HEIGHT);
  ctx.font = "11px sans-serif";
  const measure = (/** @type {string} */ t) => ctx.measureText(t).width;
  const placed = placeAxes(o.axes, o.width, leftMargin(o.axes, o.width, measure));
  const scales = placed.map(axisScale);
  const metric = placed.find((a) => a.metric);
  const span = metric ? [metric.lo, metric.hi] : [0, 1];
  const colorOf = (/** @type {Coords} */ c) => {
    const v = metric ? c[metric.key] : null;
    if (v === null || v === undefined) return "#9e9e9e";
    return rgbToCss(viridis(span[1] > span[0] ? (v - span[0]) / (span[1] - span[0]) : 0.5));
  };
  const line = (/** @type {Coords} */ c) => {
    ctx.beginPath();
    let pen = false;
    placed.forEach((a, k) => {
      const v = c[a.key];
      if (v === null || v === undefined) {
        pen = false;
        return;
      }
      const y = scales[k].map(v);
      if (pen) ctx.lineTo(a.x, y);
      else ctx.moveTo(a.x, y);
      pen = true;
    });
    ctx.stroke();
  };
  // the runs left out first, faint; then the chosen, coloured by the metric
  ctx.lineWidth = 1;
  ctx.strokeStyle = "#bdbdbd";
  ctx.globalAlpha = 0.35;
  o.coords.forEach((c, i) => {
    if (!o.chosen[i]) line(c);
  });
  ctx.globalAlpha = 0.85;
  o.coords.forEach((c, i) => {
    if (o.chosen[i] && i !== o.highlight) {
      ctx.strokeStyle = colorOf(c);
      line(c);
    }
  });
  if (o.highlight !== undefined && o.highlight >= 0 && o.coords[o.highlight]) {
    ctx.globalAlpha = 1;
    ctx.lineWidth = 3;
    ctx.strokeStyle = "#d62728";
    line(o.coords[o.highlight]);
  }
  ctx.globalAlpha = 1;
  // axes, their names and ends, the brushes
  ctx.font = "11px sans-serif";
  placed.forEach((a, k) => {
    const s = scales[k];
    ctx.strokeStyle = o.theme.muted;
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(a.x, s.top);
    ctx.lineTo(a.x, s.bottom);
    ctx.stroke();
    // the name inside the canvas and clear of its neighbours' names; cut, the whole in a tooltip
    a.cut = [];
    const label = axisLabel(placed, k, o.width, measure);
    ctx.fillStyle = o.theme.text;
    ctx.textAlign = "left";
    ctx.textBaseline = "bottom";
    ctx.fillText(label.text, label.left, s.top - 14);
    if (label.cut) a.cut.push({ left: label.left, right: label.right, top: s.top - 28, bottom: s.top - 12, text: a.label });
    ctx.fillStyle = o.theme.muted;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const ticks = a.kind === "category" ? (a.categories ?? []).map((_, i) => i) : [a.lo, a.hi];
    const room = tickRoom(placed, k);
    for (const t of ticks) {
      // on a backing of the page's colour, so the lines do not hide it
      const whole = tickText(a, t);
      const { text, cut } = fitText(whole, room, measure);
      const w = measure(text);
      const y = s.map(t);
      ctx.globalAlpha = 0.85;
      ctx.fillStyle = o.theme.background;
      ctx.fillRect(a.x - 6 - w, y - 7, w + 4, 14);
      ctx.globalAlpha = 1;
      ctx.fillStyle = o.theme.muted;
      ctx.fillText(text, a.x - 4, y);
      if (cut) a.cut.push({ left: a.x - 4 - w, right: a.x - 4, top: y - 7, bottom: y + 7, text: whole });
    }
    const brush = o.preview && o.preview[0] === a.key ? brushOf(a, o.preview[1], o.preview[2]) : o.brushes[a.key];
    if (brush) {
      const clamp = (/** @type {number} */ y) => Math.min(Math.max(y, s.top - 4), s.bottom + 4);
      const y0 = clamp(s.map(brush[1]));
      const y1 = clamp(s.map(brush[0]));
      ctx.globalAlpha = 0.25;
      ctx.fillStyle = "#1976d2";
      ctx.fillRect(a.x - 8, Math.min(y0, y1), 16, Math.abs(y1 - y0));
      ctx.globalAlpha = 1;
      ctx.strokeStyle = "#1976d2";
      ctx.strokeRect(a.x - 8, Math.min(y0, y1), 16, Math.abs(y1 - y0));
    }
  });
  return placed;
}
