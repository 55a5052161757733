// Histograms: one layer's distribution over steps, as TensorBoard's offset
// "ridge" view and as a step x bin heatmap; the linked step is highlighted in
// both, hovering reads out a bin, clicking a heatmap row moves the step.
import { drawValueAxis } from "./lib/axis.js";
import { rgbToCss, viridis } from "./lib/color.js";
import { el, fillSelect, on, select } from "./lib/dom.js";
import { exportMenu, svgCanvas, svgDocument } from "./lib/export.js";
import { formatNumber, formatStep } from "./lib/format.js";
import { bindCells, drawHeatmap } from "./lib/heatmap.js";
import { makeScale, sizeCanvas, themeColors } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { NONFINITE_CSS, nonfiniteSummary } from "./lib/nonfinite.js";
import { guard, present, viewState } from "./lib/state.js";
import { snapIndex } from "./lib/steps.js";
import { histogramCsv } from "./lib/view_csv.js";
import { decodeArray } from "./lib/wire.js";

const WIDTH = 420;
const HEIGHT = 280;
const AXIS = 22; // px under each plot for the value axis
const LEFT = 56; // px left of the heatmap for step labels
const RIDGE_RIGHT = 46; // px right of the ridge curves for their step labels
/** Most curves drawn in the ridge view (more would be an unreadable smear). */
export const MAX_RIDGES = 48;

/**
 * Indices of at most `k` of `n` rows, evenly spaced, first and last included.
 * @param {number} n
 * @param {number} k
 * @returns {number[]}
 */
export function evenlySpaced(n, k) {
  if (n <= k) return Array.from({ length: n }, (_, i) => i);
  const out = new Set();
  for (let i = 0; i < k; i++) out.add(Math.round((i * (n - 1)) / (k - 1)));
  return [...out];
}

/**
 * Which ridge curves carry a step label: about `k` of the `shown` rows, evenly
 * spaced, and the linked step's row (marked `current`); a label too close to
 * the current one (within `gap` curves) is left out so the two do not overlap.
 * @param {number[]} shown  the rows drawn, top (earliest) first
 * @param {ArrayLike<number>} steps  the step of every row
 * @param {number} current  the linked step's row (-1: none)
 * @param {number} k
 * @param {number} gap
 * @returns {Array<{k: number, step: number, current: boolean}>}  k: the curve's place in `shown`
 */
export function ridgeLabels(shown, steps, current, k, gap) {
  const at = current >= 0 ? Math.max(shown.findIndex((r) => r >= current), 0) : -1;
  const out = [];
  for (const i of evenlySpaced(shown.length, k)) {
    if (at >= 0 && Math.abs(i - at) < gap) continue;
    out.push({ k: i, step: Number(steps[shown[i]]), current: false });
  }
  if (at >= 0) out.push({ k: at, step: Number(steps[current]), current: true });
  return out;
}

/**
 * Each row of a row-major [rows, cols] matrix divided by its own maximum, so the
 * heatmap shows every step's shape even when the counts of steps differ.
 * @param {ArrayLike<number>} counts
 * @param {number} rows
 * @param {number} cols
 * @returns {Float32Array}
 */
export function rowNormalised(counts, rows, cols) {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let max = 0;
    for (let c = 0; c < cols; c++) max = Math.max(max, counts[r * cols + c]);
    for (let c = 0; c < cols; c++) out[r * cols + c] = max > 0 ? counts[r * cols + c] / max : 0;
  }
  return out;
}

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-histograms");
  const signalSelect = select("nbviz-hist-signal", "signal", ["weights", "gradients", "activations"].map((s) => [s, s]));
  const layerSelect = select("nbviz-hist-layer", "layer");
  const notice = el("span", { class: "nbviz-notice nbviz-hist-notice" });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, ["signal", signalSelect]),
    el("label", {}, ["layer", layerSelect]),
    notice,
  ]);
  const ridge = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-hist-ridge" }));
  const heat = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-hist-heat" }));
  const menu = exportMenu({
    name: "histograms",
    csv: () => histogramCsv((k) => model.get(k)),
    png: () => [ridge, heat],
    // the ridge plot as vectors (the heatmap is an image: PNG)
    svg: () => {
      const fake = svgCanvas(WIDTH, HEIGHT + AXIS);
      drawRidge(/** @type {any} */ (fake), 1);
      const title = `${model.get("layer")} ${model.get("signal")} over steps`;
      return svgDocument([{ title, width: WIDTH, height: HEIGHT + AXIS, body: fake.body() }]);
    },
  });
  toolbar.insertBefore(menu.node, notice);
  const heatAxis = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-hist-heat-axis" }));
  const strip = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-hist-heat-values" }));
  const ridgeCaption = el("div", { class: "nbviz-hist-caption nbviz-hist-current" });
  const heatCaption = el("div", { class: "nbviz-hist-caption nbviz-hist-readout" });
  const missing = el("div", { class: "nbviz-notice nbviz-hist-missing" });
  const badNote = el("div", { class: "nbviz-hist-caption nbviz-nonfinite nbviz-hist-nonfinite-note" });
  const plots = el("div", { class: "nbviz-hist-plots" }, [
    el("div", { class: "nbviz-hist-plot" }, [
      el("div", { class: "nbviz-hist-title", text: "over steps (offset; later steps in front; steps at the right)" }),
      ridge,
      ridgeCaption,
    ]),
    el("div", { class: "nbviz-hist-plot" }, [
      el("div", { class: "nbviz-hist-title", text: "step \u00d7 value (each row scaled to its peak)" }),
      el("div", { class: "nbviz-hist-heatwrap" }, [heatAxis, heat]),
      el("div", { class: "nbviz-hist-heatwrap", style: { paddingLeft: `${LEFT}px` } }, [strip]),
      heatCaption,
    ]),
  ]);
  const legendNote = () => {
    const text = data ? nonfiniteSummary(data.steps, data.nonfinite, formatStep) : "";
    badNote.textContent = text ? `${text.replace("captures", "histograms")}: red marks left of the heatmap` : "";
    badNote.hidden = !text;
  };
  const body = el("div", { class: "nbviz-hist" }, [toolbar, missing, badNote, plots]);

  /** @type {{steps: ArrayLike<number>, counts: ArrayLike<number>, rows: number, bins: number, lo: number, hi: number, nonfinite: ArrayLike<number>} | null} */
  let data = null;
  /** @type {((e: {clientX: number, clientY: number}) => ({row: number, col: number} | null)) | null} */
  let cellFromEvent = null;

  const decodeData = () => {
    const d = model.get("data");
    if (!d || !d.counts) {
      data = null;
      return;
    }
    const counts = decodeArray(d.counts);
    const [rows, bins] = counts.shape.length === 2 ? counts.shape : [0, 0];
    data = {
      steps: decodeArray(d.steps).data,
      counts: counts.data,
      rows,
      bins,
      lo: Number(d.lo),
      hi: Number(d.hi),
      nonfinite: decodeArray(d.nonfinite).data,
    };
  };

  const fillChoices = () => {
    signalSelect.value = model.get("signal");
    const choices = /** @type {string[]} */ (model.get("layer_choices") || []);
    fillSelect(layerSelect, choices.map((name) => [name, name]));
    layerSelect.value = model.get("layer");
    layerSelect.disabled = choices.length === 0;
  };

  /** Index of the sampled row shown for the linked step (the last at or before it). */
  const rowOfStep = () => (data && data.rows ? snapIndex(data.steps, model.get("step")) : -1);

  /** The value axis under a plot: [lo, hi] across x0..x1, its top at y. */
  const valueAxis = (/** @type {CanvasRenderingContext2D} */ ctx, /** @type {number} */ x0, /** @type {number} */ x1, /** @type {number} */ y, /** @type {number} */ lo, /** @type {number} */ hi) =>
    drawValueAxis(ctx, makeScale(lo, hi, x0, x1), { lo, hi, y, theme: themeColors(root) });

  /** The ridge plot on `target` (the view's canvas, or an svgCanvas for the SVG file). */
  const drawRidge = (/** @type {HTMLCanvasElement} */ target = ridge, /** @type {number | undefined} */ dpr = undefined) => {
    const ctx = sizeCanvas(target, WIDTH, HEIGHT + AXIS, dpr);
    if (!data || !data.rows) return;
    const { rows, bins, counts, lo, hi } = data;
    const colors = themeColors(root);
    const shown = evenlySpaced(rows, MAX_RIDGES);
    const top = 8;
    const plotH = HEIGHT - top;
    const slot = plotH / (shown.length + 3); // vertical offset between curves
    const peakH = slot * 4; // a curve's full height overlaps about four others
    let max = 0;
    for (const r of shown) for (let c = 0; c < bins; c++) max = Math.max(max, counts[r * bins + c]);
    const sx = makeScale(0, bins, 4, WIDTH - RIDGE_RIGHT).map;
    const current = rowOfStep();
    /** @param {number} r @param {number} base @param {string} stroke @param {number} width */
    const curve = (r, base, stroke, width) => {
      ctx.beginPath();
      ctx.moveTo(sx(0), base);
      for (let c = 0; c < bins; c++) {
        const y = base - (max > 0 ? (counts[r * bins + c] / max) * peakH : 0);
        ctx.lineTo(sx(c), y);
        ctx.lineTo(sx(c + 1), y);
      }
      ctx.lineTo(sx(bins), base);
      ctx.closePath();
      ctx.fillStyle = colors.background;
      ctx.fill();
      ctx.strokeStyle = stroke;
      ctx.lineWidth = width;
      ctx.stroke();
    };
    // earliest step at the top and at the back; later steps are drawn over them
    shown.forEach((r, k) => {
      const base = top + peakH + k * slot - slot * 1;
      const t = shown.length > 1 ? k / (shown.length - 1) : 1;
      curve(r, Math.min(base, HEIGHT), rgbToCss(viridis(0.15 + 0.7 * t)), 1);
    });
    if (current >= 0) {
      const k = shown.findIndex((r) => r >= current);
      const base = top + peakH + Math.max(k, 0) * slot - slot;
      curve(current, Math.min(base, HEIGHT), "#d81b60", 2);
    }
    // each labelled curve's step at its baseline, right of the curves
    ctx.font = "10px sans-serif";
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    const gap = Math.ceil(12 / slot); // curves a 12 px label spans
    for (const label of ridgeLabels(shown, data.steps, current, 6, gap)) {
      const base = Math.min(top + peakH + label.k * slot - slot, HEIGHT);
      ctx.fillStyle = label.current ? "#d81b60" : colors.muted;
      ctx.fillText(formatStep(label.step), WIDTH - RIDGE_RIGHT + 4, base);
    }
    valueAxis(ctx, sx(0), sx(bins), HEIGHT + 2, lo, hi);
  };

  const drawHeat = () => {
    if (!data || !data.rows) {
      sizeCanvas(heat, WIDTH - LEFT, HEIGHT);
      sizeCanvas(heatAxis, LEFT, HEIGHT);
      sizeCanvas(strip, WIDTH - LEFT, AXIS);
      cellFromEvent = null;
      return;
    }
    const { rows, bins, counts, steps, lo, hi } = data;
    const current = rowOfStep();
    const drawn = drawHeatmap(heat, rowNormalised(counts, rows, bins), {
      rows,
      cols: bins,
      width: WIDTH - LEFT,
      height: HEIGHT,
      scale: (v) => (v > 0 ? viridis(Math.sqrt(v)) : [247, 247, 247]),
    });
    cellFromEvent = drawn.cellFromEvent;
    const ctx = /** @type {CanvasRenderingContext2D} */ (heat.getContext("2d"));
    if (current >= 0) {
      const h = HEIGHT / rows;
      ctx.strokeStyle = "#d81b60";
      ctx.lineWidth = 2;
      ctx.strokeRect(1, current * h, WIDTH - LEFT - 2, Math.max(h, 2));
    }
    // the step labels left of the heatmap and the value axis below it
    const actx = sizeCanvas(heatAxis, LEFT, HEIGHT);
    const colors = themeColors(root);
    // rows with NaN/inf: a red mark at the left; a row with nothing finite is red across
    actx.fillStyle = NONFINITE_CSS;
    ctx.save();
    ctx.fillStyle = NONFINITE_CSS;
    ctx.globalAlpha = 0.55;
    const h = HEIGHT / rows;
    for (let r = 0; r < rows; r++) {
      if (!(data.nonfinite[r] > 0)) continue;
      actx.fillRect(LEFT - 3, r * h, 3, Math.max(h, 1));
      let finite = 0;
      for (let c = 0; c < bins; c++) finite += counts[r * bins + c];
      if (!finite) ctx.fillRect(0, r * h, WIDTH - LEFT, Math.max(h, 1));
    }
    ctx.restore();
    actx.fillStyle = colors.muted;
    actx.font = "10px sans-serif";
    actx.textAlign = "right";
    actx.textBaseline = "middle";
    for (const r of evenlySpaced(rows, 6)) {
      actx.fillText(formatStep(steps[r]), LEFT - 4, ((r + 0.5) * HEIGHT) / rows);
    }
    valueAxis(sizeCanvas(strip, WIDTH - LEFT, AXIS), 0, WIDTH - LEFT, 0, lo, hi);
  };

  const caption = () => {
    const cur = model.get("current");
    if (!cur || !cur.counts) {
      ridgeCaption.textContent = data && data.rows ? "no histogram at or before this step" : "";
      return;
    }
    const counts = decodeArray(cur.counts).data;
    let inRange = 0;
    for (let i = 0; i < counts.length; i++) inRange += counts[i];
    const parts = [
      `step ${formatStep(cur.step)}: ${formatNumber(inRange)} values in [${formatNumber(cur.lo)}, ${formatNumber(cur.hi)}]`,
    ];
    if (cur.underflow) parts.push(`${formatNumber(cur.underflow)} below`);
    if (cur.overflow) parts.push(`${formatNumber(cur.overflow)} above`);
    ridgeCaption.replaceChildren(parts.join(", "));
    if (cur.nonfinite) {
      ridgeCaption.append(
        ", ",
        el("span", { class: "nbviz-hist-nonfinite", text: `${formatNumber(cur.nonfinite)} NaN/Inf` }),
      );
    }
  };

  const draw = guard(root, "Drawing the histograms", () => {
    if (!present(root, body, viewState(model))) return;
    fillChoices();
    notice.textContent = model.get("notice") || "";
    missing.textContent = model.get("missing") || "";
    plots.style.display = data && data.rows ? "" : "none";
    drawRidge();
    drawHeat();
    legendNote();
    caption();
  });

  const stops = [
    bindCells(heat, () => cellFromEvent, {
      hover: (cell) => {
        if (!cell || !data) {
          heatCaption.textContent = "";
          return;
        }
        const width = (data.hi - data.lo) / data.bins;
        const a = data.lo + cell.col * width;
        const count = data.counts[cell.row * data.bins + cell.col];
        heatCaption.textContent =
          `step ${formatStep(data.steps[cell.row])}: [${formatNumber(a)}, ${formatNumber(a + width)}) ` +
          `${formatNumber(count)} values; click to go to this step`;
      },
      leave: () => {
        heatCaption.textContent = "";
      },
      click: (cell) => {
        if (data) save(model, { step: data.steps[cell.row] });
      },
    }),
    on(signalSelect, "change", () => save(model, { signal: signalSelect.value })),
    on(layerSelect, "change", () => save(model, { layer: layerSelect.value })),
    listen(model, ["data"], () => {
      decodeData();
      draw();
    }),
    listen(model, ["step", "current", "layer_choices", "layer", "signal", "notice", "missing", "empty", "error"], draw),
  ];
  decodeData();
  draw();
  return () => {
    for (const stop of stops) stop();
    menu.dispose();
  };
}

export default { render };
