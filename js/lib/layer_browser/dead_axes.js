// The axes of a LayerBrowser dead map: unit indices left of the rows ("unit", or
// "head" for an attention layer's heads), the steps of some columns under them ("step"). Canvases beside the heatmap's,
// so the heatmap keeps its own pixels and lookups.
import { niceTicks } from "../axis.js";
import { el } from "../dom.js";
import { formatStep } from "../format.js";
import { sizeCanvas, themeColors } from "../linechart.js";

export const AXIS_LEFT = 46; // px left of the map: unit indices and "unit"
export const AXIS_BOTTOM = 26; // px under the map: steps and "step"

/**
 * Whole unit indices to label down the rows, at the middle of their row.
 * @param {number} units
 * @param {number} height  px of the map
 * @returns {Array<{unit: number, y: number}>}
 */
export function unitTicks(units, height) {
  const per = height / Math.max(units, 1);
  return niceTicks(0, units - 1, Math.max(2, Math.min(6, Math.floor(height / 28))))
    .filter((u) => Number.isInteger(u) && u >= 0 && u < units)
    .map((unit) => ({ unit, y: (unit + 0.5) * per }));
}

/**
 * Columns whose step is written under them: about one per 90 px, first and last
 * included, at the middle of their column.
 * @param {ArrayLike<number>} steps  one per column
 * @param {number} width  px of the map
 * @returns {Array<{step: number, x: number}>}
 */
export function stepColumns(steps, width) {
  const cols = steps.length;
  if (!cols) return [];
  const per = width / cols;
  const k = Math.max(1, Math.min(cols, Math.floor(width / 90)));
  const picked = new Set();
  for (let i = 0; i < k; i++) picked.add(k === 1 ? cols - 1 : Math.round((i * (cols - 1)) / (k - 1)));
  return [...picked].map((j) => ({ step: Number(steps[j]), x: (j + 0.5) * per }));
}

/**
 * The two axis canvases and the grid that places them around `map`.
 * @param {HTMLCanvasElement} map
 * @param {string} [label]  what a row is ("unit" by default)
 * @returns {{el: HTMLElement, draw: (units: number, steps: ArrayLike<number>, width: number, height: number) => void}}
 */
export function deadAxes(map, label = "unit") {
  const left = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-dead-units" }));
  const bottom = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-dead-steps" }));
  const frame = el("div", { class: "nbviz-lb-dead-frame", attrs: { "data-axis": label } }, [left, map, el("div"), bottom]);
  Object.assign(frame.style, { display: "grid", gridTemplateColumns: `${AXIS_LEFT}px auto`, justifyContent: "start" });
  return {
    el: frame,
    draw(units, steps, width, height) {
      const theme = themeColors(frame);
      const lc = sizeCanvas(left, AXIS_LEFT, height);
      lc.fillStyle = theme.muted;
      lc.font = "10px sans-serif";
      lc.textAlign = "right";
      lc.textBaseline = "middle";
      for (const t of unitTicks(units, height)) {
        lc.fillText(String(t.unit), AXIS_LEFT - 4, Math.min(Math.max(t.y, 6), height - 6)); // whole at the edges
      }
      lc.save();
      lc.translate(8, height / 2);
      lc.rotate(-Math.PI / 2);
      lc.textAlign = "center";
      lc.fillText(label, 0, 0);
      lc.restore();
      const bc = sizeCanvas(bottom, width, AXIS_BOTTOM);
      bc.fillStyle = theme.muted;
      bc.font = "10px sans-serif";
      bc.textBaseline = "top";
      const ticks = stepColumns(steps, width);
      ticks.forEach((t, i) => {
        // the first label starts at its column, the last ends at it: none is cut off
        bc.textAlign = ticks.length > 1 && i === 0 ? "left" : i === ticks.length - 1 && ticks.length > 1 ? "right" : "center";
        const x = bc.textAlign === "left" ? Math.max(t.x - 4, 0) : bc.textAlign === "right" ? Math.min(t.x + 4, width) : t.x;
        bc.fillText(formatStep(t.step), x, 2);
      });
      bc.textAlign = "center";
      bc.fillText("step", width / 2, 14);
    },
  };
}
