// The matrix of a ConfusionMatrix view: the [true, predicted] counts decoded and
// normalised, drawn as a canvas heatmap with class names on both axes (or, with
// a compared evaluation, the change of each cell), and the read-out of a cell.
// Class names come from data: they go in with textContent only.
import { mix } from "../color.js";
import { el } from "../dom.js";
import { drawHeatmap } from "../heatmap.js";
import { perFrame } from "../schedule.js";
import { decodeArray } from "../wire.js";

const LABEL_W = 110; // px at most for the row labels (longer names are cut, full text on hover)
const MIN_LABEL_W = 84; // px: the corner's "predicted →" on one line
const LABEL_H = 90; // px at most for the column labels (longer names are cut, full text on hover)
const MIN_LABEL_H = 34; // px: the corner's two lines ("predicted →", "true ↓")
const CHAR_W = 6.6; // px a character of the 11px labels takes, about
const TARGET = 440; // px the matrix aims to fill
const MIN_CELL = 14; // px: below this the matrix scrolls instead of shrinking (100 classes)
const MAX_CELL = 48;
const LOW = /** @type {[number, number, number]} */ ([247, 251, 255]);
const HIGH = /** @type {[number, number, number]} */ ([8, 48, 107]);

/**
 * Cell size in CSS px for `n` classes: fills about TARGET px, or the `room` there is
 * where that is less (a narrow pane), never under MIN_CELL (then the matrix scrolls).
 * @param {number} n
 * @param {number} [room]  px across available for the cells
 * @returns {number}
 */
export function cellSize(n, room = TARGET) {
  const across = Math.min(TARGET, room > 0 ? room : TARGET);
  return Math.max(MIN_CELL, Math.min(MAX_CELL, Math.floor(across / Math.max(n, 1))));
}

/**
 * Width in CSS px of the row labels: as wide as the longest name needs, within
 * MIN_LABEL_W..LABEL_W.
 * @param {string[]} names
 * @param {number} n
 * @returns {number}
 */
export function labelWidth(names, n) {
  let longest = 0;
  for (let i = 0; i < n; i++) longest = Math.max(longest, String(names[i] ?? i).length);
  return Math.max(MIN_LABEL_W, Math.min(LABEL_W, Math.ceil(longest * CHAR_W) + 12));
}

/**
 * Height in CSS px of the column labels: as tall as the longest name needs
 * (written upwards), between MIN_LABEL_H and LABEL_H, so short names such as
 * digits leave no empty band above them.
 * @param {string[]} names
 * @param {number} n  classes
 * @returns {number}
 */
export function labelHeight(names, n) {
  let longest = 0;
  for (let i = 0; i < n; i++) longest = Math.max(longest, String(names[i] ?? i).length);
  return Math.max(MIN_LABEL_H, Math.min(LABEL_H, Math.ceil(longest * CHAR_W) + 10));
}

/**
 * The matrix as shown: counts, or each row / column divided by its total.
 * @param {ArrayLike<number>} counts  row-major n x n
 * @param {number} n
 * @param {"counts" | "row" | "column"} by
 * @returns {Float64Array}
 */
export function normalized(counts, n, by) {
  const out = new Float64Array(n * n);
  for (let i = 0; i < n * n; i++) out[i] = Number(counts[i]);
  if (by === "counts") return out;
  for (let a = 0; a < n; a++) {
    let total = 0;
    for (let b = 0; b < n; b++) total += by === "row" ? out[a * n + b] : out[b * n + a];
    for (let b = 0; b < n; b++) {
      const k = by === "row" ? a * n + b : b * n + a;
      out[k] = total > 0 ? out[k] / total : 0;
    }
  }
  return out;
}

const GAIN = /** @type {[number, number, number]} */ ([33, 102, 172]);
const LOSS = /** @type {[number, number, number]} */ ([214, 96, 77]);
const WHITE = /** @type {[number, number, number]} */ ([255, 255, 255]);

/**
 * Colour of a cell's change since the compared evaluation: blue where a diagonal
 * (correct) cell grew or an error cell shrank, red the other way; white for none.
 * @param {number} delta
 * @param {boolean} diagonal
 * @param {number} peak  largest |delta| of the matrix
 * @returns {number[]} rgb
 */
export function changeColor(delta, diagonal, peak) {
  if (!delta || !(peak > 0)) return [...WHITE];
  const good = diagonal ? delta > 0 : delta < 0;
  return mix(WHITE, good ? GAIN : LOSS, Math.sqrt(Math.min(1, Math.abs(delta) / peak)));
}

/**
 * A change as text: "+3", "−2", "0".
 * @param {number} v
 */
export const signed = (v) => (v > 0 ? `+${v}` : v < 0 ? `\u2212${-v}` : "0");

/**
 * A fraction as a percentage: whole percent, one decimal under 10%.
 * @param {number} v
 */
export const percent = (v) => `${(100 * v).toFixed(v >= 0.1 || v === 0 ? 0 : 1)}%`;

/**
 * @typedef {object} MatrixData
 * @property {number} n  classes
 * @property {ArrayLike<number>} counts  row-major n x n
 * @property {Float64Array} shown  the values drawn (counts or fractions)
 * @property {number} max  largest shown value
 * @property {ArrayLike<number> | null} delta  change since the compared evaluation
 * @property {number} peak  largest |delta|
 * @property {number} compareStep  the compared evaluation's step (-1 without one)
 */

/**
 * The matrix to draw from the view's traits, or null when there is none.
 * @param {any} matrix  the `matrix` trait
 * @param {"counts" | "row" | "column"} by  the `normalize` trait
 * @param {any} compare  the `compare` trait
 * @returns {MatrixData | null}
 */
export function decodeMatrix(matrix, by, compare) {
  if (!matrix || !matrix.counts) return null;
  const arr = decodeArray(matrix.counts);
  const n = arr.shape[0] || 0;
  const shown = normalized(arr.data, n, by);
  let max = 0;
  for (let i = 0; i < shown.length; i++) max = Math.max(max, shown[i]);
  const cmp = compare || {};
  const delta = cmp.delta ? decodeArray(cmp.delta).data : null;
  let peak = 0;
  if (delta) for (let i = 0; i < delta.length; i++) peak = Math.max(peak, Math.abs(Number(delta[i])));
  return {
    n,
    counts: arr.data,
    shown,
    max,
    delta: delta && delta.length === n * n ? delta : null,
    peak,
    compareStep: cmp.step ?? -1,
  };
}

/**
 * What a cell holds, in words: the count, the change, and its share of the
 * true and of the predicted class.
 * @param {MatrixData} data
 * @param {{row: number, col: number}} cell
 * @param {(c: number) => string} nameOf
 * @returns {string}
 */
export function cellText(data, cell, nameOf) {
  const { n, counts, delta } = data;
  const count = Number(counts[cell.row * n + cell.col]);
  const change = delta ? ` (${signed(Number(delta[cell.row * n + cell.col]))} since step ${data.compareStep})` : "";
  let support = 0;
  let predicted = 0;
  for (let k = 0; k < n; k++) {
    support += Number(counts[cell.row * n + k]);
    predicted += Number(counts[k * n + cell.col]);
  }
  return (
    `true ${nameOf(cell.row)} \u2192 predicted ${nameOf(cell.col)}: ${count} sample${count === 1 ? "" : "s"}${change}` +
    ` (${support ? percent(count / support) : "-"} of true ${nameOf(cell.row)}, ` +
    `${predicted ? percent(count / predicted) : "-"} of predicted ${nameOf(cell.col)}); click to see them`
  );
}

/**
 * Write each cell's value (or change) on it when the cells are large enough.
 * @param {CanvasRenderingContext2D} ctx
 * @param {MatrixData} data
 * @param {number} cell  px
 * @param {"counts" | "row" | "column"} by
 */
function writeCells(ctx, data, cell, by) {
  const { n, shown, max, delta, peak } = data;
  const scale = by === "counts" ? max : 1;
  ctx.font = `${Math.min(12, Math.floor(cell / 2.4))}px sans-serif`;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      if (delta) {
        const d = Number(delta[r * n + c]);
        if (d === 0) continue;
        ctx.fillStyle = peak > 0 && Math.abs(d) / peak > 0.55 ? "#ffffff" : "#1f1f1f";
        ctx.fillText(signed(d), (c + 0.5) * cell, (r + 0.5) * cell);
        continue;
      }
      const v = shown[r * n + c];
      if (v === 0) continue;
      const dark = scale > 0 && Math.sqrt(v / scale) > 0.55;
      ctx.fillStyle = dark ? "#ffffff" : "#1f1f1f";
      ctx.fillText(by === "counts" ? String(v) : percent(v), (c + 0.5) * cell, (r + 0.5) * cell);
    }
  }
}

/**
 * The matrix with its axis labels, in a scrolling box (`el`). draw() paints it, its
 * cells sized to the width of `pane()` (the element whose width is the room the
 * matrix has, whatever the matrix's own size), and again when that width changes;
 * lookup() gives the cell under a pointer event of the latest drawing; stop() ends
 * the following.
 * @param {() => HTMLElement | null} pane
 * @returns {{el: HTMLElement, canvas: HTMLCanvasElement,
 *   draw: (data: MatrixData | null, o: {by: "counts" | "row" | "column", selected: number[], names: string[]}) => void,
 *   lookup: () => (((e: {clientX: number, clientY: number}) => ({row: number, col: number} | null)) | null),
 *   stop: () => void}}
 */
export function matrixView(pane) {
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-cm-canvas" }));
  const colLabels = el("div", { class: "nbviz-cm-collabels", style: { display: "flex" } });
  const rowLabels = el("div", { class: "nbviz-cm-rowlabels", style: { display: "flex", flexDirection: "column" } });
  const corner = el("div", { class: "nbviz-cm-axis-title nbviz-cm-corner" }, [
    el("div", { text: "predicted \u2192", style: { textAlign: "right" } }),
    el("div", { text: "true \u2193" }),
  ]);
  Object.assign(corner.style, {
    display: "flex",
    flexDirection: "column",
    justifyContent: "flex-end",
    padding: "2px 4px",
    boxSizing: "border-box",
    whiteSpace: "nowrap",
  });
  const grid = el("div", { class: "nbviz-cm-grid" }, [corner, colLabels, rowLabels, canvas]);
  const scroll = el("div", { class: "nbviz-cm-scroll" }, [grid]);
  /** @type {((e: {clientX: number, clientY: number}) => ({row: number, col: number} | null)) | null} */
  let cellFromEvent = null;
  /** @type {[MatrixData | null, any] | null} */
  let last = null;
  let drawnWidth = 0;

  /**
   * @param {MatrixData | null} data
   * @param {{by: "counts" | "row" | "column", selected: number[], names: string[]}} o
   */
  const draw = (data, o) => {
    if (!data || !data.n) {
      scroll.style.display = "none";
      cellFromEvent = null;
      return;
    }
    scroll.style.display = "";
    follow();
    last = [data, o];
    drawnWidth = pane()?.clientWidth ?? 0;
    const { n, shown, max, delta, peak } = data;
    const labelW = labelWidth(o.names, n);
    // the pane's width (0 while a closed tab hides it: then the usual size)
    const cell = cellSize(n, drawnWidth - labelW - 2);
    const size = cell * n;
    grid.style.gridTemplateColumns = `${labelW}px ${size}px`;
    const labelH = labelHeight(o.names, n);
    grid.style.gridTemplateRows = `${labelH}px ${size}px`;
    const sel = o.selected;
    const scale = o.by === "counts" ? max : 1;
    const cellIndex = Float64Array.from({ length: n * n }, (_, i) => i);
    const drawn = drawHeatmap(canvas, delta ? cellIndex : shown, {
      rows: n,
      cols: n,
      width: size,
      height: size,
      gap: n <= 30 ? 1 : 0,
      scale: delta
        ? (i) => changeColor(Number(delta[i]), Math.floor(i / n) === i % n, peak)
        : (v) => mix(LOW, HIGH, scale > 0 ? Math.sqrt(v / scale) : 0),
      selected: sel.length === 2 ? [sel[0], sel[1]] : null,
      selectedColor: "#d81b60",
    });
    cellFromEvent = drawn.cellFromEvent;
    if (cell >= 22) writeCells(/** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d")), data, cell, o.by);
    const label = (/** @type {number} */ i, /** @type {string} */ cls, /** @type {boolean} */ active) =>
      el("div", {
        class: [cls, active ? "nbviz-active" : ""],
        text: o.names[i] ?? String(i),
        attrs: { title: `${i}: ${o.names[i] ?? i}` },
        style: cls === "nbviz-cm-rowlabel"
          ? { height: `${cell}px`, lineHeight: `${cell}px`, width: `${labelW}px` }
          : { width: `${cell}px`, height: `${labelH}px`, lineHeight: `${cell}px` },
      });
    rowLabels.replaceChildren(...Array.from({ length: n }, (_, i) => label(i, "nbviz-cm-rowlabel", sel[0] === i)));
    colLabels.replaceChildren(...Array.from({ length: n }, (_, i) => label(i, "nbviz-cm-collabel", sel[1] === i)));
  };

  // drawn again at the pane's new width (a tab opened, the window resized), in the
  // next frame: a size set inside the observer's callback would be a layout change
  // it has to report in the same frame
  const refit = perFrame(() => {
    if (last && Math.abs((pane()?.clientWidth ?? 0) - drawnWidth) > 1) draw(...last);
  });
  const resize = new ResizeObserver(() => refit());
  let observed = /** @type {HTMLElement | null} */ (null);
  const follow = () => {
    const now = pane();
    if (now && now !== observed) {
      if (observed) resize.unobserve(observed);
      resize.observe(now);
      observed = now;
    }
  };
  const stop = () => {
    resize.disconnect();
    refit.cancel();
  };

  return { el: scroll, canvas, draw, lookup: () => cellFromEvent, stop };
}
