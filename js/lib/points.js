// Pure helpers of the embedding projector: the points decoded from the wire,
// point colours by mode, point size by count, a minimal linear scale (what
// regl-scatterplot keeps in step with its camera), and box <-> data-space
// conversions. No DOM, no WebGL: unit-tested in node.
import { MISSING_RGB, paletteFor, rgbToHex, viridis } from "./color.js";
import { decodeArray } from "./wire.js";

/** Bins of the continuous colour modes (confidence, loss, target). */
export const BINS = 32;

/**
 * @typedef {object} PointArrays
 * @property {number} n
 * @property {ArrayLike<number>} label  class codes; `missing` where unknown
 * @property {ArrayLike<number>} pred
 * @property {ArrayLike<number>} confidence  bytes 0..254, 255 unknown
 * @property {ArrayLike<number>} loss  bytes 0..254 (log scale), 255 unknown
 * @property {ArrayLike<number>} [target]  bytes 0..254 over target_range, 255 unknown
 * @property {number} n_classes
 * @property {number} missing
 */

/**
 * The `points` trait decoded: positions as x and y arrays (and interleaved as
 * xy), the per-point class, prediction, confidence and loss codes, and the
 * payload's other fields (n, n_classes, missing, method, ...). Null when empty.
 * @param {any} raw
 * @returns {any}
 */
export function decodePoints(raw) {
  if (!raw || !raw.n) return null;
  const xy = /** @type {Float32Array} */ (decodeArray(raw.xy).data);
  const n = raw.n;
  const x = new Float32Array(n);
  const y = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    x[i] = xy[2 * i];
    y[i] = xy[2 * i + 1];
  }
  return {
    ...raw,
    xy,
    x,
    y,
    label: decodeArray(raw.label).data,
    pred: decodeArray(raw.pred).data,
    confidence: decodeArray(raw.confidence).data,
    loss: decodeArray(raw.loss).data,
    target: raw.target ? decodeArray(raw.target).data : new Uint8Array(n).fill(255),
  };
}

/**
 * Category index of every point for a colour mode, and the colours of the categories.
 * The last colour is always the grey of "unknown".
 * @param {"label" | "prediction" | "correct" | "confidence" | "loss" | "target" | "none"} mode
 * @param {PointArrays} p
 * @returns {{codes: Float32Array, colors: string[], repeating?: number}}
 */
export function colourCodes(mode, p) {
  const n = p.n;
  const codes = new Float32Array(n);
  const grey = rgbToHex(MISSING_RGB);
  if (mode === "label" || mode === "prediction") {
    const src = mode === "label" ? p.label : p.pred;
    const k = Math.max(1, p.n_classes);
    const palette = paletteFor(k);
    if (k > MENU_CLASSES) {
      // class c is drawn in palette[c % palette.length] with one colour per palette
      // entry: a class index of 2**31 - 1 needs no 2**31 colours (`repeating`: the
      // number of classes that share them, for the legend)
      for (let i = 0; i < n; i++) {
        const v = src[i];
        codes[i] = v === p.missing || v >= k ? palette.length : v % palette.length;
      }
      return { codes, colors: [...palette, grey], repeating: k };
    }
    const colors = Array.from({ length: k }, (_, i) => palette[i % palette.length]);
    for (let i = 0; i < n; i++) {
      const v = src[i];
      codes[i] = v === p.missing || v >= k ? k : v;
    }
    return { codes, colors: [...colors, grey] };
  }
  if (mode === "correct") {
    for (let i = 0; i < n; i++) {
      const a = p.label[i];
      const b = p.pred[i];
      codes[i] = a === p.missing || b === p.missing ? 2 : a === b ? 0 : 1;
    }
    return { codes, colors: ["#2e7d32", "#d32f2f", grey] };
  }
  if (mode === "confidence" || mode === "loss" || mode === "target") {
    const src = mode === "confidence" ? p.confidence : mode === "loss" ? p.loss : p.target;
    const colors = Array.from({ length: BINS }, (_, i) => rgbToHex(viridis(i / (BINS - 1))));
    for (let i = 0; i < n; i++) {
      const v = src[i];
      codes[i] = v === 255 ? BINS : Math.min(BINS - 1, Math.floor((v / 254) * BINS));
    }
    return { codes, colors: [...colors, grey] };
  }
  return { codes, colors: ["#1565c0", grey] };
}

/** Most classes the class menu offers; past it, the classes with the most points. */
export const MENU_CLASSES = 1000;

/**
 * The class menu's entries `[value, text]` after "all classes": every class
 * `0..n_classes - 1` for a label set up to {@link MENU_CLASSES}; for a larger one
 * the classes among the points' labels, most points first (at most that many),
 * and the class shown now (`current`) wherever it is; before the points arrive, the
 * first names (at most that many) and the class shown now.
 * @param {PointArrays | null} p
 * @param {string[]} names
 * @param {number} current  the filter's class, -1 for all
 * @returns {Array<[string, string]>}
 */
export function classOptions(p, names, current) {
  const k = p ? p.n_classes : names.length;
  const text = (/** @type {number} */ c) => names[c] ?? `class ${c}`;
  if (k <= MENU_CLASSES) return Array.from({ length: k }, (_, c) => [String(c), text(c)]);
  if (!p) {
    const first = Array.from({ length: MENU_CLASSES }, (_, c) => c);
    if (current >= MENU_CLASSES) first.push(current);
    return first.map((c) => [String(c), text(c)]);
  }
  const counts = new Map();
  const label = /** @type {PointArrays} */ (p).label;
  for (let i = 0; i < label.length; i++) {
    const c = label[i];
    if (c !== /** @type {PointArrays} */ (p).missing) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  const classes = [...counts.keys()].sort((a, b) => counts.get(b) - counts.get(a) || a - b);
  const shown = classes.slice(0, MENU_CLASSES);
  if (current >= 0 && !shown.includes(current)) shown.push(current);
  return shown.map((c) => [String(c), text(c)]);
}

/**
 * Whether a colouring means something for these points: classes need labels (or
 * predictions), correct / confidence need predicted classes, loss and target values.
 * @param {string} mode
 * @param {any} p  decoded points (has_labels, has_predictions, has_loss, has_target)
 * @returns {boolean}
 */
export function colourAvailable(mode, p) {
  if (!p) return true;
  if (mode === "label") return Boolean(p.has_labels ?? p.n_classes > 0);
  if (mode === "prediction" || mode === "correct" || mode === "confidence") return Boolean(p.has_predictions);
  if (mode === "loss") return p.has_loss ?? true;
  if (mode === "target") return Boolean(p.has_target);
  return true;
}

/**
 * Point size in CSS px: big for a few hundred points, 1 px for a million.
 * @param {number} n
 * @returns {number}
 */
export function pointSize(n) {
  if (n <= 1) return 6;
  return Math.max(1, Math.min(6, 6 - 1.65 * Math.log10(n / 1000)));
}

/**
 * @typedef {object} LinearScale
 * @property {(d?: number[]) => any} domain  get, or set and return the scale
 * @property {(r?: number[]) => any} range
 * @property {(v: number) => number} invert  range value -> domain value
 * @property {(v: number) => number} apply   domain value -> range value
 * @property {() => LinearScale} copy
 */

/**
 * A linear scale with the d3 surface regl-scatterplot uses (domain, range, copy).
 * @param {number[]} [domain]
 * @param {number[]} [range]
 * @returns {LinearScale}
 */
export function linearScale(domain = [-1, 1], range = [0, 1]) {
  let d = [...domain];
  let r = [...range];
  /** @type {LinearScale} */
  const scale = {
    domain(v) {
      if (v === undefined) return [...d];
      d = [...v];
      return scale;
    },
    range(v) {
      if (v === undefined) return [...r];
      r = [...v];
      return scale;
    },
    invert(v) {
      return d[0] + ((v - r[0]) / (r[1] - r[0] || 1)) * (d[1] - d[0]);
    },
    apply(v) {
      return r[0] + ((v - d[0]) / (d[1] - d[0] || 1)) * (r[1] - r[0]);
    },
    copy() {
      return linearScale(d, r);
    },
  };
  return scale;
}

/**
 * A dragged box (CSS px inside the plot) as a polygon in data space.
 * @param {{x0: number, y0: number, x1: number, y1: number}} box
 * @param {LinearScale} xScale
 * @param {LinearScale} yScale
 * @returns {[number, number][]}
 */
export function boxToData(box, xScale, yScale) {
  const xa = xScale.invert(Math.min(box.x0, box.x1));
  const xb = xScale.invert(Math.max(box.x0, box.x1));
  const ya = yScale.invert(Math.max(box.y0, box.y1));
  const yb = yScale.invert(Math.min(box.y0, box.y1));
  return [
    [xa, ya],
    [xb, ya],
    [xb, yb],
    [xa, yb],
  ];
}

/**
 * Indices of the points inside an axis-aligned data-space rectangle.
 * @param {Float32Array} xy  interleaved x, y
 * @param {[number, number][]} polygon  from boxToData
 * @returns {number[]}
 */
export function pointsInBox(xy, polygon) {
  const xs = polygon.map((p) => p[0]);
  const ys = polygon.map((p) => p[1]);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const out = [];
  for (let i = 0; i < xy.length / 2; i++) {
    const x = xy[2 * i];
    const y = xy[2 * i + 1];
    if (x >= x0 && x <= x1 && y >= y0 && y <= y1) out.push(i);
  }
  return out;
}
