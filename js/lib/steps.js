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
