// Zoom and pan over steps, shared by every panel of a LossCurves view: a drag
// selects the steps to zoom into, a shift-drag pans a zoomed view, the wheel
// zooms around the pointer, a click (a press and release that did not move
// further than CLICK_SLOP, the release included) picks a step, a double click
// resets. A drag never picks a step. The
// pure parts (what a wheel or a drag does to the steps in view) are separate
// from the listeners.
import { on } from "../dom.js";

/** @typedef {[number, number]} Domain */

/**
 * Keep a span of steps inside the full range, shifting it back in; null when
 * it covers the full range (the view is not zoomed).
 * @param {number} a
 * @param {number} b
 * @param {Domain} full
 * @returns {Domain | null}
 */
export function clampDomain(a, b, full) {
  const span = b - a;
  if (span >= full[1] - full[0]) return null;
  if (a < full[0]) [a, b] = [full[0], full[0] + span];
  if (b > full[1]) [a, b] = [full[1] - span, full[1]];
  return [a, b];
}

/**
 * The steps in view after a wheel turn of `deltaY` at step `center`: the span
 * shrinks or grows by up to e times a turn, around the centre, never under 4 steps.
 * @param {Domain} current
 * @param {Domain} full
 * @param {number} center
 * @param {number} deltaY
 * @returns {Domain | null}
 */
export function zoomAt(current, full, center, deltaY) {
  const [a, b] = current;
  const c = Math.min(Math.max(center, a), b);
  const f = Math.exp(Math.max(-1, Math.min(1, deltaY * 0.002)));
  const span = Math.max((b - a) * f, 4);
  const t = (c - a) / (b - a || 1);
  return clampDomain(c - t * span, c + (1 - t) * span, full);
}

/** What the view's hint says the mouse does. */
export const HINT = "drag to zoom \u00b7 shift-drag to pan \u00b7 wheel zooms \u00b7 double-click resets \u00b7 click picks a step";
/** How far (CSS px) the pointer may move between press and release and still be a click. */
export const CLICK_SLOP = 3;
/** Fewest steps a dragged window zooms into. */
const MIN_SPAN = 4;

/**
 * The steps to zoom into after a drag from step `a` to step `b`: the window
 * between them, kept inside the full range and at least MIN_SPAN steps wide;
 * null when it covers the full range.
 * @param {number} a
 * @param {number} b
 * @param {Domain} full
 * @returns {Domain | null}
 */
export function dragWindow(a, b, full) {
  let [lo, hi] = a <= b ? [a, b] : [b, a];
  lo = Math.max(lo, full[0]);
  hi = Math.min(hi, full[1]);
  if (hi - lo < MIN_SPAN) {
    const mid = (lo + hi) / 2;
    [lo, hi] = [mid - MIN_SPAN / 2, mid + MIN_SPAN / 2];
  }
  return clampDomain(lo, hi, full);
}

/**
 * @typedef {object} PanZoomHandlers
 * @property {() => ({map: (v: number) => number, invert: (px: number) => number} | null | undefined)} scale
 *   the panel's step scale as last drawn
 * @property {() => Domain} current  the steps in view
 * @property {() => boolean} zoomed
 * @property {(domain: Domain | null) => void} setDomain  null: the full range
 * @property {(px: number) => void} hover  the pointer moved to x (CSS px)
 * @property {() => void} leave
 * @property {(step: number) => void} pick  a click (not a drag) at a step
 * @property {(range: Domain | null) => void} brush  the window a drag is selecting (null: none)
 */

/**
 * Listen on one panel's canvas.
 * @param {HTMLCanvasElement} canvas
 * @param {() => Domain} full  the full range of steps
 * @param {PanZoomHandlers} h
 * @returns {() => void} removes the listeners
 */
export function panZoom(canvas, full, h) {
  /** @type {{x: number, y: number, at: number, domain: Domain, moved: boolean, pan: boolean} | null} */
  let drag = null;
  /** Whether the pointer has gone further than a click's jitter from where it went down,
   * by this event or one before it (a release can come with no move reported before it). */
  const moved = (/** @type {PointerEvent} */ e) => {
    if (drag && !drag.moved) drag.moved = Math.hypot(e.clientX - drag.x, (e.clientY ?? drag.y) - drag.y) > CLICK_SLOP;
    return !!drag?.moved;
  };
  const local = (/** @type {MouseEvent} */ e) => e.clientX - canvas.getBoundingClientRect().left;
  const onWheel = (/** @type {WheelEvent} */ e) => {
    const sx = h.scale();
    if (!sx) return;
    e.preventDefault();
    h.setDomain(zoomAt(h.current(), full(), sx.invert(local(e)), e.deltaY));
  };
  const onDown = (/** @type {PointerEvent} */ e) => {
    const sx = h.scale();
    if (!sx || (e.button ?? 0) !== 0) return; // the main button only: no zoom or pick on a right click
    drag = { x: e.clientX, y: e.clientY ?? 0, at: sx.invert(local(e)), domain: h.current(), moved: false, pan: e.shiftKey };
    try {
      canvas.setPointerCapture?.(e.pointerId);
    } catch {
      // a pointer already released (or synthetic): the drag still works inside the canvas
    }
  };
  const onMove = (/** @type {PointerEvent} */ e) => {
    const sx = h.scale();
    if (drag && sx) {
      const dx = e.clientX - drag.x;
      if (moved(e) && drag.pan && h.zoomed()) {
        const [a, b] = drag.domain;
        const per = (b - a) / (sx.map(b) - sx.map(a) || 1);
        h.setDomain(clampDomain(a - dx * per, b - dx * per, full()));
      } else if (drag.moved && !drag.pan) {
        const at = sx.invert(local(e));
        h.brush(drag.at <= at ? [drag.at, at] : [at, drag.at]);
      }
    }
    h.hover(local(e));
  };
  const onUp = (/** @type {PointerEvent} */ e) => {
    const sx = h.scale();
    if (drag && sx) {
      const x = local(e);
      if (!moved(e)) h.pick(sx.invert(x));
      else if (!drag.pan) {
        h.brush(null);
        // a drag along the steps zooms; one (nearly) straight up or down does nothing
        if (Math.abs(e.clientX - drag.x) > CLICK_SLOP) h.setDomain(dragWindow(drag.at, sx.invert(x), full()));
      }
    }
    drag = null;
  };
  const onCancel = () => {
    if (drag && !drag.pan) h.brush(null);
    drag = null;
  };
  const offs = [
    on(canvas, "wheel", onWheel, { passive: false }),
    on(canvas, "pointerdown", onDown),
    on(canvas, "pointermove", onMove),
    on(canvas, "pointerup", onUp),
    on(canvas, "pointercancel", onCancel),
    on(canvas, "pointerleave", () => h.leave()),
    on(canvas, "dblclick", () => h.setDomain(null)),
  ];
  return () => {
    for (const off of offs) off();
  };
}
