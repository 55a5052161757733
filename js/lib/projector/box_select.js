// Box selection over the projector's plot: a drag on the overlay draws a
// rectangle; on release, a box of at least 3 px each way is handed on in
// stage pixels.
import { on } from "../dom.js";

/**
 * @typedef {{x0: number, y0: number, x1: number, y1: number}} Box  stage pixels
 */

/**
 * Listen for drags that start on `overlay`; `rect` shows the box while dragging.
 * @param {HTMLElement} overlay  takes the mousedown (only while box mode is on)
 * @param {HTMLElement} stage  the plot area, the frame of the box's pixels
 * @param {HTMLElement} rect  the rectangle drawn while dragging
 * @param {(box: Box) => void} onBox  a finished box
 * @returns {() => void} removes the listeners
 */
export function boxSelect(overlay, stage, rect, onBox) {
  /** @type {Box | null} */
  let box = null;
  const local = (/** @type {MouseEvent} */ e) => {
    const r = stage.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  const onDown = (/** @type {MouseEvent} */ e) => {
    const [x, y] = local(e);
    box = { x0: x, y0: y, x1: x, y1: y };
    e.preventDefault();
  };
  const onMove = (/** @type {MouseEvent} */ e) => {
    if (!box) return;
    [box.x1, box.y1] = local(e);
    Object.assign(rect.style, {
      display: "",
      left: `${Math.min(box.x0, box.x1)}px`,
      top: `${Math.min(box.y0, box.y1)}px`,
      width: `${Math.abs(box.x1 - box.x0)}px`,
      height: `${Math.abs(box.y1 - box.y0)}px`,
    });
  };
  const onUp = (/** @type {MouseEvent} */ e) => {
    if (!box) return;
    [box.x1, box.y1] = local(e);
    rect.style.display = "none";
    const done = box;
    box = null;
    if (Math.abs(done.x1 - done.x0) < 3 || Math.abs(done.y1 - done.y0) < 3) return;
    onBox(done);
  };
  const offs = [on(overlay, "mousedown", onDown), on(window, "mousemove", onMove), on(window, "mouseup", onUp)];
  return () => {
    for (const off of offs) off();
  };
}
