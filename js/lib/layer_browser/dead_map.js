// The dead map of a layer in the LayerBrowser: the fraction of the batch on
// which each unit was zero, units down and captures across, the linked step's
// column outlined, unit indices and steps on its axes, and a read-out of the
// cell under the pointer. A unit that saw NaN/inf at a capture has no zero
// fraction: its cell is red (non-finite), never the colour of a dead unit, and a
// legend under the map counts such cells. An attention layer's heads (`axis`
// "head") read the same way: the fraction of each head's output that is ~0, the
// heads dead at every capture (`dead`, named under the map), its output RMS and
// largest |value| in the read-out.
import { rgbToCss, sequentialScale, viridis } from "../color.js";
import { el } from "../dom.js";
import { formatNumber, formatStep } from "../format.js";
import { bindCells, drawHeatmap } from "../heatmap.js";
import { NONFINITE_CSS, NONFINITE_RGB } from "../nonfinite.js";
import { floorIndex } from "../steps.js";
import { arr } from "./charts.js";
import { AXIS_LEFT, deadAxes } from "./dead_axes.js";

/**
 * The dead map of the `dead_map` trait: `el` to show, draw(step, width) to
 * (re)draw it, remove() to stop its read-out.
 * @param {any} dm  the `dead_map` trait
 * @returns {{el: HTMLElement[], draw: (step: number, width: number) => void, remove: () => void}}
 */
export function deadMap(dm) {
  if (!(dm.units > 0)) {
    const text = dm.notice || "no per-unit statistics for this layer";
    return { el: [el("div", { class: "nbviz-muted nbviz-lb-dead-empty", text })], draw: () => {}, remove: () => {} };
  }
  const heads = dm.axis === "head";
  const row = heads ? "head" : "unit";
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-dead" }));
  const axes = deadAxes(canvas, row);
  const caption = el("div", { class: "nbviz-lb-caption nbviz-lb-dead-caption", text: dm.notice ? `showing ${dm.notice}` : "" });
  const steps = arr(dm.steps);
  const values = arr(dm.values); // [captures, units] row-major
  const units = dm.units;
  const cols = steps.length;
  // units down, captures across
  const t = new Float32Array(units * cols);
  for (let j = 0; j < cols; j++) for (let u = 0; u < units; u++) t[u * cols + j] = values[j * units + u];
  let badCells = 0;
  let badFrom = -1;
  for (let j = 0; j < cols; j++) {
    for (let u = 0; u < units; u++) {
      if (Number.isFinite(values[j * units + u])) continue;
      badCells++;
      if (badFrom < 0) badFrom = j;
    }
  }
  const base = sequentialScale(0, 1);
  const paint = (/** @type {number} */ v) => (Number.isFinite(v) ? base(v) : /** @type {import("../color.js").RGB} */ ([...NONFINITE_RGB]));
  /** @type {any} */
  const scale = Object.assign(paint, { domain: base.domain, css: (/** @type {number} */ v) => rgbToCss(paint(v)) });
  const swatch = (/** @type {string} */ color) => el("span", { class: "nbviz-lb-swatch", style: { background: color } });
  const legend = el("div", { class: "nbviz-lb-caption nbviz-lb-dead-legend" }, [
    swatch(rgbToCss(viridis(0))),
    heads ? " never ~0 \u2026 " : " never zero \u2026 ",
    swatch(rgbToCss(viridis(1))),
    heads ? " ~0 everywhere (dead)" : " zero on the whole batch (dead)",
    ...(badCells
      ? [
          "  ",
          swatch(NONFINITE_CSS),
          el("span", {
            class: "nbviz-nonfinite nbviz-lb-dead-nonfinite",
            text:
              ` non-finite (NaN/inf): ${badCells.toLocaleString("en-US")} of ${(units * cols).toLocaleString("en-US")} cells, ` +
              `from step ${formatStep(steps[badFrom])}; not dead, no zero fraction`,
          }),
        ]
      : []),
  ]);
  const rms = heads && dm.rms ? arr(dm.rms) : null;
  const peak = heads && dm.max_abs ? arr(dm.max_abs) : null;
  /** @type {HTMLElement[]} */
  const extra = [];
  if (heads) {
    // the heads dead at every capture shown, as the kernel decides (one rule with
    // AttentionMaps: output rms below 1e-3 of the layer's largest, or 0): in words
    const dead = Array.isArray(dm.dead) ? dm.dead.filter((u) => Number.isInteger(u)) : [];
    const text = dead.length
      ? `dead: ${dead.length === 1 ? "head" : "heads"} ${dead.join(", ")} (output ~0 at every capture shown)`
      : "no head is ~0 at every capture shown";
    extra.push(el("div", { class: "nbviz-lb-caption nbviz-lb-dead-heads", attrs: { "data-dead": dead.join(",") }, text }));
  }
  /** @type {import("../heatmap.js").CellLookup} */
  let lookup = null;
  const remove = bindCells(canvas, () => lookup, {
    hover: (cell) => {
      if (!cell) return;
      const k = cell.col * units + cell.row;
      const v = values[k];
      const at = `${row} ${cell.row} at step ${formatStep(steps[cell.col])}`;
      if (!Number.isFinite(v)) caption.textContent = `${at}: non-finite values (NaN/inf)`;
      else if (!heads) caption.textContent = `${at}: zero on ${(v * 100).toFixed(0)}% of the batch`;
      else {
        const sizes = rms && peak ? `output rms ${formatNumber(rms[k])}, max |x| ${formatNumber(peak[k])}, ` : "";
        caption.textContent = `${at}: ${sizes}~0 on ${(v * 100).toFixed(0)}% of its output`;
      }
    },
  });
  return {
    el: [axes.el, legend, ...extra, caption],
    draw(step, full) {
      const width = Math.max(120, full - AXIS_LEFT);
      const height = Math.max(60, Math.min(320, units * 4));
      axes.draw(units, steps, width, height);
      const drawn = drawHeatmap(canvas, t, { rows: units, cols, width, height, scale });
      lookup = drawn.cellFromEvent;
      const at = floorIndex(steps, step);
      if (at >= 0) {
        const ctx = canvas.getContext("2d");
        if (ctx) {
          ctx.strokeStyle = "#d55e00";
          ctx.lineWidth = 2;
          ctx.strokeRect(at * drawn.layout.cellWidth, 1, Math.max(drawn.layout.cellWidth, 2), height - 2);
        }
      }
      canvas.setAttribute("data-step-column", String(at));
      canvas.setAttribute("data-nonfinite-cells", String(badCells));
    },
    remove,
  };
}
