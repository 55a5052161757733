// The series of a LossCurves view: decoded from the wire, their colour and
// dash (by run, or by split for one run), where they broke (NaN/Inf), and the
// read-out of their values at a step.
import { categorical } from "../color.js";
import { formatNumber, formatStep } from "../format.js";
import { floorIndex, nearestIndex } from "../steps.js";
import { decodeArray } from "../wire.js";

/** Dash of a split's line (train solid). @type {Record<string, number[]>} */
export const DASH = { val: [6, 3], valid: [6, 3], validation: [6, 3], test: [2, 3], eval: [2, 3] };
/** Colour index of a split's line when one run is shown. @type {Record<string, number>} */
const SPLIT_COLOR = { train: 0, training: 0, "": 0, val: 1, valid: 1, validation: 1, test: 2, eval: 3 };
/** What a break's code means. */
export const BREAK_NAMES = new Map([
  [0, "NaN"],
  [1, "+Inf"],
  [-1, "-Inf"],
]);
/** Series shorter than this are drawn raw: smoothing a handful of evaluations hides them. */
export const MIN_SMOOTHED = 10;
/** A series whose points are this many times further apart than the densest one's is sparse. */
export const SPARSE = 4;

/**
 * @typedef {object} Series
 * @property {string} id
 * @property {string} run
 * @property {number} runIndex
 * @property {string} name
 * @property {string} stem
 * @property {string} split
 * @property {ArrayLike<number>} steps
 * @property {ArrayLike<number>} values
 * @property {number} stride
 * @property {number} total
 * @property {ArrayLike<number>} breaks  rows of [first_step, last_step, kind]
 * @property {number} nBreaks
 */

/**
 * What a series draws: its steps and values (the full-resolution window when
 * that covers the view) and the stride they were summarised with.
 * @typedef {{steps: ArrayLike<number>, values: ArrayLike<number>, stride: number}} SeriesData
 * @typedef {(s: Series) => SeriesData} DataOf
 */

/**
 * One entry of the `series` trait, decoded.
 * @param {any} e
 * @returns {Series}
 */
export function decodeSeries(e) {
  return {
    id: e.id,
    run: e.run,
    runIndex: e.run_index,
    name: e.name,
    stem: e.stem,
    split: e.split,
    steps: decodeArray(e.steps).data,
    values: decodeArray(e.values).data,
    stride: e.stride,
    total: e.total,
    breaks: decodeArray(e.breaks).data,
    nBreaks: e.n_breaks,
  };
}

/**
 * The steps every series spans together ([0, 1] when none has a point).
 * @param {Series[]} series
 * @returns {[number, number]}
 */
export function stepRange(series) {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const s of series) {
    if (s.steps.length) {
      lo = Math.min(lo, s.steps[0]);
      hi = Math.max(hi, s.steps[s.steps.length - 1]);
    }
  }
  return lo <= hi ? [lo, hi === lo ? lo + 1 : hi] : [0, 1];
}

/**
 * A series' colour: its run's with several runs, else its split's.
 * @param {Series} s
 * @param {number} runs  how many runs are shown
 * @returns {string}
 */
export function seriesColor(s, runs) {
  if (runs > 1) return categorical(s.runIndex, runs);
  return splitColor(s.split);
}

/**
 * The colour of a split's line with one run.
 * @param {string} split
 * @returns {string}
 */
export function splitColor(split) {
  return categorical(SPLIT_COLOR[split] ?? 4);
}

/**
 * The legend's word for a split's line style: "solid: train", "dashed: val".
 * @param {string} split
 * @returns {string}
 */
export function styleText(split) {
  const dash = DASH[split];
  return `${dash ? (dash[0] > 3 ? "dashed" : "dotted") : "solid"}: ${split}`;
}

/**
 * Where a series broke, in words ("val_loss is NaN from step 35 (2 stretches of NaN/Inf)"),
 * or "" when it never did.
 * @param {Series} s
 * @param {boolean} named  say the run too (several runs are shown)
 * @returns {string}
 */
export function breakText(s, named) {
  if (!(s.nBreaks > 0)) return "";
  const b = s.breaks;
  const first = BREAK_NAMES.get(b[2]) ?? "NaN";
  const more = s.nBreaks > 1 ? ` (${s.nBreaks} stretches of NaN/Inf)` : "";
  return `${named && s.run ? `${s.run}: ` : ""}${s.name} is ${first} from step ${formatStep(b[0])}${more}`;
}

/**
 * The recorded step nearest to `at` over all series (NaN when none has a point).
 * @param {Series[]} list
 * @param {number} at
 * @param {DataOf} dataOf
 * @returns {number}
 */
export function nearestStep(list, at, dataOf) {
  let best = Number.NaN;
  let dist = Number.POSITIVE_INFINITY;
  for (const s of list) {
    const d = dataOf(s);
    const i = nearestIndex(d.steps, at);
    if (i >= 0 && Math.abs(d.steps[i] - at) < dist) [best, dist] = [d.steps[i], Math.abs(d.steps[i] - at)];
  }
  return best;
}

/**
 * The read-out line: each series' value at a step (the last recorded at or
 * before it), or, under the pointer, at the recorded step nearest to it.
 * @param {Series[]} list
 * @param {number} at
 * @param {{nearest: boolean, runs: number, dataOf: DataOf}} o
 * @returns {string}
 */
export function readoutText(list, at, o) {
  let shownStep = Math.round(at);
  if (o.nearest) {
    const best = nearestStep(list, at, o.dataOf);
    if (Number.isFinite(best)) shownStep = best;
  }
  const parts = [];
  for (const s of list) {
    const d = o.dataOf(s);
    const i = floorIndex(d.steps, shownStep);
    if (i < 0) {
      if (d.steps.length) parts.push(`${s.name} from step ${formatStep(d.steps[0])}`);
      continue;
    }
    const label = o.runs > 1 ? `${s.run} ${s.name}` : s.name;
    const own = d.steps[i] !== shownStep ? ` (step ${formatStep(d.steps[i])})` : "";
    parts.push(`${label} ${formatNumber(d.values[i])}${own}`);
  }
  return `step ${formatStep(shownStep)}: ${parts.join(" \u00b7 ") || "no values yet"}`;
}

/**
 * Whether most neighbouring values are equal: an epoch counter, a stepped
 * learning-rate schedule, a metric logged once per epoch and repeated.
 * @param {ArrayLike<number>} values
 * @returns {boolean}
 */
export function isStepShaped(values) {
  let pairs = 0;
  let same = 0;
  for (let i = 1; i < values.length; i++) {
    if (!Number.isFinite(values[i]) || !Number.isFinite(values[i - 1])) continue;
    pairs += 1;
    if (values[i] === values[i - 1]) same += 1;
  }
  return pairs > 0 && same >= pairs / 2;
}

/**
 * Steps between a series' recorded points, on average (Infinity with one point).
 * @param {Series} s
 * @returns {number}
 */
export function meanGap(s) {
  const n = s.steps.length;
  if (n < 2 || s.total < 2) return Number.POSITIVE_INFINITY;
  return (s.steps[n - 1] - s.steps[0]) / (s.total - 1);
}

/**
 * The ids of the series that smoothing applies to: dense ones (at least
 * MIN_SMOOTHED points, as dense as the densest series within SPARSE times) that
 * are not step-shaped. An EMA over sparse or step-shaped points draws ramps
 * through values that were never there; those series are drawn as recorded.
 * @param {Series[]} series
 * @returns {Set<string>}
 */
export function smoothedIds(series) {
  let densest = Number.POSITIVE_INFINITY;
  for (const s of series) densest = Math.min(densest, meanGap(s));
  const out = new Set();
  for (const s of series) {
    if (s.total < MIN_SMOOTHED || meanGap(s) > SPARSE * densest || isStepShaped(s.values)) continue;
    out.add(s.id);
  }
  return out;
}
