// Pieces of a canvas line chart: scales and ticks (linear and log), EMA
// smoothing, binary search over sorted steps, number formatting, and tracing a
// series as a path that breaks at NaN/Inf (and at values a log axis cannot show).

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
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
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
 * First index i with arr[i] >= x in a sorted array (arr.length when none).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function lowerBound(arr, x) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Index of the element of sorted `arr` nearest to x (-1 for an empty array).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function nearestIndex(arr, x) {
  if (arr.length === 0) return -1;
  const i = lowerBound(arr, x);
  if (i === 0) return 0;
  if (i === arr.length) return arr.length - 1;
  return x - arr[i - 1] <= arr[i] - x ? i - 1 : i;
}

/**
 * Index of the last element <= x in sorted `arr` (-1 when x is before them all).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function floorIndex(arr, x) {
  const i = lowerBound(arr, x);
  if (i < arr.length && arr[i] === x) return i;
  return i - 1;
}

/**
 * A number for a read-out: 4 significant digits, exponents for very large or
 * small magnitudes, and NaN / +Inf / -Inf spelled out.
 * @param {number} v
 * @returns {string}
 */
export function formatNumber(v) {
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
 * A step number with thousands separators ("12,345").
 * @param {number} step
 * @returns {string}
 */
export function formatStep(step) {
  return Math.round(step).toLocaleString("en-US");
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
 * @returns {CanvasRenderingContext2D}
 */
export function sizeCanvas(canvas, width, height) {
  const dpr = globalThis.devicePixelRatio ?? 1;
  canvas.width = Math.max(1, Math.round(width * dpr));
  canvas.height = Math.max(1, Math.round(height * dpr));
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  if (!ctx) throw new Error("nbviz linechart: this browser gave no 2d canvas context");
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
