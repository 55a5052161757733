// Binary search over sorted steps: which recorded step a linked step shows,
// and which one lies nearest to the pointer.

/**
 * First index i with arr[i] >= x in a sorted array (arr.length when none).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function lowerBound(arr, x) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * First index i with arr[i] > x in a sorted array (arr.length when none).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function upperBound(arr, x) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Index of the element of sorted `arr` nearest to x (-1 for an empty array).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function nearestIndex(arr, x) {
  if (arr.length === 0) return -1;
  const i = lowerBound(arr, x);
  if (i === 0) return 0;
  if (i === arr.length) return arr.length - 1;
  return x - arr[i - 1] <= arr[i] - x ? i - 1 : i;
}

/**
 * Index of the last element <= x in sorted `arr` (-1 when x is before them all).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function floorIndex(arr, x) {
  return upperBound(arr, x) - 1;
}

/**
 * The position shown for a step: the last one at or before it, the first
 * when the step comes before them all (0 for an empty array).
 * @param {ArrayLike<number>} arr
 * @param {number} x
 * @returns {number}
 */
export function snapIndex(arr, x) {
  return Math.max(0, floorIndex(arr, x));
}

/**
 * @typedef {object} StepRuns
 * @property {number} length how many positions
 * @property {(i: number) => number} at the step at position i (NaN outside 0..length-1)
 * @property {(step: number) => number} snap the position shown for a step, as snapIndex
 */

/**
 * Sorted steps held as arithmetic runs, flattened rows `[first, count, stride]`
 * (what the kernel sends for a long run: one run for a run logged every step),
 * indexed and searched without expanding them.
 * @param {ArrayLike<number>} flat
 * @returns {StepRuns}
 */
export function stepRuns(flat) {
  const k = Math.floor(flat.length / 3);
  const firsts = new Float64Array(k);
  const counts = new Float64Array(k);
  const strides = new Float64Array(k);
  // starts[r]: the position of run r's first step
  const starts = new Float64Array(k);
  let length = 0;
  for (let r = 0; r < k; r++) {
    firsts[r] = Number(flat[3 * r]);
    counts[r] = Math.max(0, Number(flat[3 * r + 1]));
    strides[r] = Math.max(1, Number(flat[3 * r + 2]));
    starts[r] = length;
    length += counts[r];
  }
  return {
    length,
    at(i) {
      if (!(i >= 0 && i < length)) return NaN;
      const r = upperBound(starts, i) - 1;
      return firsts[r] + (i - starts[r]) * strides[r];
    },
    snap(step) {
      const r = upperBound(firsts, step) - 1;
      if (r < 0) return 0;
      const j = Math.min(counts[r] - 1, Math.floor((step - firsts[r]) / strides[r]));
      return starts[r] + Math.max(0, j);
    },
  };
}
