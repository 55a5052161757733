// Non-finite values (NaN, +inf, -inf) drawn as what they are: their own colour,
// a tick at each step that had some, and words with the count. Never as 0, as
// "dead", as a class, or as a blank where a value should be.

/** The colour of non-finite values in every view (a red no palette or scale uses). */
export const NONFINITE_CSS = "#e8114f";
/** @type {[number, number, number]} */
export const NONFINITE_RGB = [232, 17, 79];

/**
 * "1,024 non-finite" (empty for 0 or no count).
 * @param {number} count
 */
export function nonfiniteText(count) {
  return count > 0 ? `${Math.round(count).toLocaleString("en-US")} non-finite` : "";
}

/**
 * Ticks at the bottom of a chart for the steps that had non-finite values.
 * @param {CanvasRenderingContext2D} ctx
 * @param {ArrayLike<number>} steps
 * @param {ArrayLike<number> | undefined} bad  non-finite count per step
 * @param {(step: number) => number} x  step -> canvas x
 * @param {number} bottom  canvas y of the ticks' base
 * @param {number} height  tick height
 * @returns {number} how many steps had non-finite values
 */
export function drawNonfiniteTicks(ctx, steps, bad, x, bottom, height) {
  if (!bad || !bad.length) return 0;
  let n = 0;
  ctx.save();
  ctx.fillStyle = NONFINITE_CSS;
  for (let i = 0; i < steps.length && i < bad.length; i++) {
    if (!(bad[i] > 0)) continue;
    n++;
    ctx.fillRect(Math.round(x(steps[i])) - 1, bottom - height, 2, height);
  }
  ctx.restore();
  return n;
}

/**
 * What a series of counts says in words: "non-finite values at 8 of 15 captures
 * (from step 7; up to 1,024 in one)", or "" when there are none.
 * @param {ArrayLike<number>} steps
 * @param {ArrayLike<number>} bad
 * @param {(step: number) => string} formatStep
 */
export function nonfiniteSummary(steps, bad, formatStep) {
  let n = 0;
  let first = -1;
  let most = 0;
  for (let i = 0; i < steps.length && i < bad.length; i++) {
    if (!(bad[i] > 0)) continue;
    if (first < 0) first = i;
    n++;
    most = Math.max(most, bad[i]);
  }
  if (!n) return "";
  return (
    `non-finite values (NaN/inf) at ${n.toLocaleString("en-US")} of ${steps.length.toLocaleString("en-US")} captures ` +
    `(from step ${formatStep(steps[first])}; up to ${Math.round(most).toLocaleString("en-US")} in one), ` +
    "left out of the statistics"
  );
}
