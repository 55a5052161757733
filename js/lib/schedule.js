// When a view redraws: at most once per window (throttle), once for every
// change made in the same task (batched: Python's hold_sync sends several
// traits together), or once per animation frame (perFrame). Make one per view
// instance, never one shared at module level, and cancel it in the cleanup.

/**
 * @template {(...args: any[]) => void} F
 * @typedef {((...args: Parameters<F>) => void) & {cancel: () => void, flush: () => void,
 *   pending: () => boolean}} Throttled
 */

/**
 * Throttle `fn` to at most one call every `ms` milliseconds: the first call
 * runs at once, later calls inside the window collapse into one trailing call
 * with the latest arguments.
 * @template {(...args: any[]) => void} F
 * @param {F} fn
 * @param {number} ms
 * @returns {Throttled<F>}
 */
export function throttle(fn, ms) {
  let last = Number.NEGATIVE_INFINITY;
  /** @type {ReturnType<typeof setTimeout> | null} */
  let timer = null;
  /** @type {any[] | null} */
  let queued = null;

  const fire = () => {
    timer = null;
    const args = queued;
    queued = null;
    last = Date.now();
    if (args) fn(...args);
  };

  const throttled = /** @type {Throttled<F>} */ (
    (...args) => {
      queued = args;
      const wait = last + ms - Date.now();
      if (wait <= 0 && timer === null) {
        fire();
      } else if (timer === null) {
        timer = setTimeout(fire, Math.max(0, wait));
      }
    }
  );
  throttled.cancel = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    queued = null;
  };
  throttled.flush = () => {
    if (timer !== null) {
      clearTimeout(timer);
      fire();
    }
  };
  throttled.pending = () => timer !== null;
  return throttled;
}

/**
 * @typedef {(() => void) & {cancel: () => void, pending: () => boolean}} Scheduled
 */

/**
 * Collapse the calls made in one task into one call of `fn` right after it
 * (a microtask): several traits changed together draw once.
 * @param {() => void} fn
 * @returns {Scheduled}
 */
export function batched(fn) {
  let queued = false;
  let cancelled = false;
  const run = /** @type {Scheduled} */ (
    () => {
      cancelled = false;
      if (queued) return;
      queued = true;
      queueMicrotask(() => {
        queued = false;
        if (!cancelled) fn();
      });
    }
  );
  run.cancel = () => {
    cancelled = true;
  };
  run.pending = () => queued && !cancelled;
  return run;
}

/**
 * Collapse calls into one call of `fn` at the next animation frame.
 * @param {() => void} fn
 * @returns {Scheduled}
 */
export function perFrame(fn) {
  let frame = 0;
  const run = /** @type {Scheduled} */ (
    () => {
      if (!frame) {
        frame = requestAnimationFrame(() => {
          frame = 0;
          fn();
        });
      }
    }
  );
  run.cancel = () => {
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
  };
  run.pending = () => frame !== 0;
  return run;
}
