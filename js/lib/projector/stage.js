// A scatterplot canvas that keeps the size of its stage (the projector's and the
// data map's). It is resized in the next frame, not inside the observer's callback:
// a size set there is a layout change the observer would have to report in the
// same frame (a resize loop).
import { perFrame } from "../schedule.js";

/**
 * Follow `stage`'s size: the canvas and the plot take it; before there is a plot,
 * a size worth drawing at calls `draw` (which makes one).
 * @param {HTMLElement} stage
 * @param {HTMLCanvasElement} canvas
 * @param {() => any} plot  the regl-scatterplot, or null before the first draw
 * @param {() => void} draw
 * @returns {() => void}  stops following
 */
export function followStage(stage, canvas, plot, draw) {
  const fit = perFrame(() => {
    const [width, height] = [stage.clientWidth, stage.clientHeight];
    if (width < 10 || height < 10) return;
    const current = plot();
    if (!current) {
      draw();
      return;
    }
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    current.set({ width, height });
  });
  const resize = new ResizeObserver(() => fit());
  resize.observe(stage);
  return () => {
    resize.disconnect();
    fit.cancel();
  };
}
