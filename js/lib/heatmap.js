// Draw a matrix onto a canvas with a colour scale, sharp on high-DPI screens,
// map pointer positions back to cells, and bind pointer events to cells.

import { rgbToCss } from "./color.js";
import { on } from "./dom.js";
import { sizeCanvas } from "./linechart.js";

/**
 * @typedef {object} HeatmapLayout
 * @property {number} rows
 * @property {number} cols
 * @property {number} width  CSS pixels
 * @property {number} height  CSS pixels
 * @property {number} cellWidth  CSS pixels
 * @property {number} cellHeight  CSS pixels
 * @property {number} gap  CSS pixels between cells
 */

/**
 * @typedef {object} HeatmapOptions
 * @property {number} rows
 * @property {number} cols
 * @property {number} width  CSS pixels
 * @property {number} height  CSS pixels
 * @property {(value: number) => ArrayLike<number>} scale  value -> [r, g, b]
 * @property {number} [gap]  CSS pixels between cells (ignored for large matrices)
 * @property {[number, number] | null} [selected]  [row, col] to outline
 * @property {string} [selectedColor]  outline colour
 * @property {number} [devicePixelRatio]  defaults to window.devicePixelRatio
 */

/** Above this many cells the matrix is painted pixel by pixel (ImageData). */
export const PIXEL_PATH_CELLS = 40_000;

/**
 * Geometry of a rows x cols heatmap filling width x height CSS pixels.
 * @param {{rows: number, cols: number, width: number, height: number, gap?: number}} o
 * @returns {HeatmapLayout}
 */
export function heatmapLayout({ rows, cols, width, height, gap = 0 }) {
  if (!(rows > 0 && cols > 0 && width > 0 && height > 0)) {
    throw new RangeError(
      `nbviz heatmap: rows, cols, width and height must be positive, got ${rows}x${cols} in ${width}x${height}px`,
    );
  }
  return { rows, cols, width, height, cellWidth: width / cols, cellHeight: height / rows, gap };
}

/**
 * The cell under a point given in CSS pixels relative to the canvas's top-left
 * corner, or null when the point is outside the matrix.
 * @param {HeatmapLayout} layout
 * @param {number} x
 * @param {number} y
 * @returns {{row: number, col: number} | null}
 */
export function cellFromPoint(layout, x, y) {
  if (!(x >= 0 && y >= 0 && x < layout.width && y < layout.height)) return null;
  const col = Math.min(layout.cols - 1, Math.floor(x / layout.cellWidth));
  const row = Math.min(layout.rows - 1, Math.floor(y / layout.cellHeight));
  return { row, col };
}

/**
 * Paint `values` (row-major, rows * cols numbers) onto `canvas`.
 *
 * The canvas's backing store is sized to width x height times the device pixel
 * ratio and its CSS size to width x height. Returns the layout and lookups
 * from a point or a pointer event to the cell under it.
 *
 * @param {HTMLCanvasElement} canvas
 * @param {ArrayLike<number>} values
 * @param {HeatmapOptions} options
 * @returns {{layout: HeatmapLayout, cellFromPoint: (x: number, y: number) => ({row: number, col: number} | null),
 *   cellFromEvent: (event: {clientX: number, clientY: number}) => ({row: number, col: number} | null)}}
 */
export function drawHeatmap(canvas, values, options) {
  const { rows, cols, width, height, scale } = options;
  const layout = heatmapLayout({ rows, cols, width, height, gap: options.gap ?? 0 });
  if (values.length !== rows * cols) {
    throw new RangeError(
      `nbviz heatmap: a ${rows}x${cols} matrix needs ${rows * cols} values, got ${values.length}`,
    );
  }
  const dpr = options.devicePixelRatio ?? globalThis.devicePixelRatio ?? 1;
  const ctx = sizeCanvas(canvas, width, height, dpr);

  if (rows * cols > PIXEL_PATH_CELLS) {
    paintPixels(ctx, values, layout, canvas.width, canvas.height, scale);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  } else {
    const gap = Math.min(layout.gap, layout.cellWidth / 2, layout.cellHeight / 2);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        ctx.fillStyle = rgbToCss(scale(values[r * cols + c]));
        ctx.fillRect(
          c * layout.cellWidth + gap / 2,
          r * layout.cellHeight + gap / 2,
          layout.cellWidth - gap,
          layout.cellHeight - gap,
        );
      }
    }
  }

  const selected = options.selected;
  if (selected && selected.length === 2) {
    const [r, c] = selected;
    if (r >= 0 && r < rows && c >= 0 && c < cols) {
      ctx.strokeStyle = options.selectedColor ?? "#000000";
      ctx.lineWidth = 2;
      ctx.strokeRect(
        c * layout.cellWidth + 1,
        r * layout.cellHeight + 1,
        layout.cellWidth - 2,
        layout.cellHeight - 2,
      );
    }
  }

  return {
    layout,
    cellFromPoint: (x, y) => cellFromPoint(layout, x, y),
    cellFromEvent: (event) => {
      const rect = canvas.getBoundingClientRect();
      const sx = rect.width > 0 ? width / rect.width : 1;
      const sy = rect.height > 0 ? height / rect.height : 1;
      return cellFromPoint(layout, (event.clientX - rect.left) * sx, (event.clientY - rect.top) * sy);
    },
  };
}

/**
 * Paint every device pixel from its cell's colour (fast for large matrices).
 * @param {CanvasRenderingContext2D} ctx
 * @param {ArrayLike<number>} values
 * @param {HeatmapLayout} layout
 * @param {number} pw  backing-store width in device pixels
 * @param {number} ph  backing-store height in device pixels
 * @param {(value: number) => ArrayLike<number>} scale
 */
function paintPixels(ctx, values, layout, pw, ph, scale) {
  const { rows, cols } = layout;
  const colours = new Uint8ClampedArray(rows * cols * 3);
  for (let i = 0; i < rows * cols; i++) {
    const rgb = scale(values[i]);
    colours[3 * i] = rgb[0];
    colours[3 * i + 1] = rgb[1];
    colours[3 * i + 2] = rgb[2];
  }
  const colOf = new Int32Array(pw);
  for (let x = 0; x < pw; x++) colOf[x] = Math.min(cols - 1, Math.floor((x * cols) / pw));
  const image = ctx.createImageData(pw, ph);
  const px = image.data;
  for (let y = 0; y < ph; y++) {
    const row = Math.min(rows - 1, Math.floor((y * rows) / ph));
    const base = row * cols;
    let o = y * pw * 4;
    for (let x = 0; x < pw; x++, o += 4) {
      const k = 3 * (base + colOf[x]);
      px[o] = colours[k];
      px[o + 1] = colours[k + 1];
      px[o + 2] = colours[k + 2];
      px[o + 3] = 255;
    }
  }
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.putImageData(image, 0, 0);
}

/**
 * @typedef {{row: number, col: number}} Cell
 * @typedef {((e: {clientX: number, clientY: number}) => (Cell | null)) | null} CellLookup
 */

/**
 * Pointer events on a heatmap canvas, as cells: `hover` with the cell under the
 * pointer (null off the matrix), `leave`, and `click` on a cell. `lookup`
 * returns the cellFromEvent of the latest drawing (null while none is drawn).
 * @param {HTMLCanvasElement} canvas
 * @param {() => CellLookup} lookup
 * @param {{hover?: (cell: Cell | null) => void, leave?: () => void, click?: (cell: Cell) => void}} handlers
 * @returns {() => void} removes the listeners
 */
export function bindCells(canvas, lookup, handlers) {
  const cellOf = (/** @type {MouseEvent} */ e) => {
    const find = lookup();
    return find ? find(e) : null;
  };
  const onMove = (/** @type {MouseEvent} */ e) => handlers.hover?.(cellOf(e));
  const onLeave = () => handlers.leave?.();
  const onClick = (/** @type {MouseEvent} */ e) => {
    const cell = cellOf(e);
    if (cell) handlers.click?.(cell);
  };
  const offs = [on(canvas, "pointermove", onMove), on(canvas, "pointerleave", onLeave), on(canvas, "click", onClick)];
  return () => {
    for (const off of offs) off();
  };
}
