// A scatterplot on a stage (the projector's and the data map's): made at the
// stage's size inside its border (the canvas never widens it), with the options
// both views share, and kept at that size as the stage changes. It is resized in
// the next frame, not inside the observer's callback: a size set there is a layout
// change the observer would have to report in the same frame (a resize loop).
import createScatterplot from "regl-scatterplot";
import { perFrame } from "../schedule.js";

/** Below this many pixels a side, a stage is not drawn in (hidden, or not laid out yet). */
const MIN_SIDE = 10;

/**
 * The stage's size inside its border; null while it is too small to draw in.
 * @param {HTMLElement} stage
 * @returns {{width: number, height: number} | null}
 */
function drawableSize(stage) {
  const [width, height] = [stage.clientWidth, stage.clientHeight];
  return width < MIN_SIDE || height < MIN_SIDE ? null : { width, height };
}

/**
 * @param {HTMLCanvasElement} canvas
 * @param {{width: number, height: number}} size
 */
function sizeCanvas(canvas, { width, height }) {
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
}

/**
 * A regl-scatterplot on `canvas` at the stage's size, or null while the stage is too
 * small. `options` are the view's own (scales, point sizes, opacity, ...).
 * @param {HTMLElement} stage
 * @param {HTMLCanvasElement} canvas
 * @param {object} options
 * @returns {any}
 */
export function plotOnStage(stage, canvas, options) {
  const size = drawableSize(stage);
  if (!size) return null;
  sizeCanvas(canvas, size);
  return createScatterplot({
    canvas,
    ...size,
    lassoOnLongPress: false,
    deselectOnDblClick: true,
    deselectOnEscape: true,
    backgroundColor: [1, 1, 1, 0],
    ...options,
  });
}

/**
 * Follow `stage`'s size: the canvas and the plot take it; before there is a plot,
 * a size worth drawing at calls `draw` (which makes one).
 * @param {HTMLElement} stage
 * @param {HTMLCanvasElement} canvas
 * @param {() => any} plot  the scatterplot, or null before the first draw
 * @param {() => void} draw
 * @returns {() => void}  stops following
 */
export function followStage(stage, canvas, plot, draw) {
  const fit = perFrame(() => {
    const size = drawableSize(stage);
    if (!size) return;
    const current = plot();
    if (!current) {
      draw();
      return;
    }
    sizeCanvas(canvas, size);
    current.set(size);
  });
  const resize = new ResizeObserver(() => fit());
  resize.observe(stage);
  return () => {
    resize.disconnect();
    fit.cancel();
  };
}
