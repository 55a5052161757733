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
 * @property {ArrayLike<number>} steps  each point's x: its step, or its time on a time axis
 * @property {ArrayLike<number>} at  each point's step
 * @property {ArrayLike<number>} values
 * @property {ArrayLike<number> | null} lo  a group's band: the least member value per point
 * @property {ArrayLike<number> | null} hi  ... and the greatest
 * @property {number} members  runs in a group (0: a single run's series)
 * @property {number} stride
 * @property {number} total
 * @property {ArrayLike<number>} breaks  rows of [first_step, last_step, kind]
 * @property {number} nBreaks
 */

/**
 * What a series draws: its x, steps and values (the full-resolution window when
 * that covers the view) and the stride they were summarised with.
 * @typedef {{steps: ArrayLike<number>, at?: ArrayLike<number>, values: ArrayLike<number>, stride: number}} SeriesData
 * @typedef {(s: Series) => SeriesData} DataOf
 */

/**
 * One entry of the `series` trait, decoded.
 * @param {any} e
 * @returns {Series}
 */
export function decodeSeries(e) {
  const steps = decodeArray(e.steps).data;
  return {
    id: e.id,
    run: e.run,
    runIndex: e.run_index,
    name: e.name,
    stem: e.stem,
    split: e.split,
    steps: e.x ? decodeArray(e.x).data : steps,
    at: steps,
    values: decodeArray(e.values).data,
    lo: e.lo ? decodeArray(e.lo).data : null,
    hi: e.hi ? decodeArray(e.hi).data : null,
    members: e.members ?? 0,
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
 * Over all series, the point whose `steps` entry is nearest to `x`: its entry in
 * `values(d)` (NaN when no series has a point).
 * @param {Series[]} list
 * @param {number} x
 * @param {DataOf} dataOf
 * @param {(d: any) => ArrayLike<number>} values
 * @returns {number}
 */
function nearestOf(list, x, dataOf, values) {
  let best = Number.NaN;
  let dist = Number.POSITIVE_INFINITY;
  for (const s of list) {
    const d = dataOf(s);
    const i = nearestIndex(d.steps, x);
    if (i >= 0 && Math.abs(d.steps[i] - x) < dist) [best, dist] = [values(d)[i], Math.abs(d.steps[i] - x)];
  }
  return best;
}

/**
 * The recorded step nearest to `at` over all series (NaN when none has a point).
 * @param {Series[]} list
 * @param {number} at
 * @param {DataOf} dataOf
 * @returns {number}
 */
export function nearestStep(list, at, dataOf) {
  return nearestOf(list, at, dataOf, (d) => d.steps);
}

/**
 * The step of the point nearest to x over all series (NaN when none has a point):
 * x itself on a step axis, the step logged at that time on a time axis.
 * @param {Series[]} list
 * @param {number} x
 * @param {DataOf} dataOf
 * @returns {number}
 */
export function stepAt(list, x, dataOf) {
  return nearestOf(list, x, dataOf, (d) => d.at ?? d.steps);
}

/**
 * Where a step lies on the x axis: the step itself, or on a time axis the time
 * the first series logged it (the last point at or before it); NaN when none did.
 * @param {Series[]} list
 * @param {number} step
 * @returns {number}
 */
export function stepX(list, step) {
  for (const s of list) {
    if (s.at === s.steps) return step;
    const i = floorIndex(s.at, step);
    if (i >= 0) return s.steps[i];
  }
  return list.length && list[0].at !== list[0].steps ? Number.NaN : step;
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/**
 * About `count` round times (seconds) covering [x0, x1]: whole seconds, minutes or hours.
 * @param {number} x0
 * @param {number} x1
 * @param {number} count
 * @returns {number[]}
 */
export function timeTicks(x0, x1, count) {
  if (!(x1 > x0)) return [x0];
  const raw = (x1 - x0) / Math.max(1, count);
  const step = TIME_STEPS.find((s) => s >= raw) ?? Math.ceil(raw / 86400) * 86400;
  if (raw < 1) return [];
  const out = [];
  for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) out.push(t);
  return out;
}

/**
 * A time on the x axis as text: seconds since start ("2m05s"), or a time of day.
 * @param {number} x
 * @param {"step" | "wall" | "relative"} axis
 * @returns {string}
 */
export function formatX(x, axis) {
  if (!Number.isFinite(x)) return "\u2013";
  if (axis === "step") return formatStep(x);
  if (axis === "wall") {
    const t = new Date(x * 1000);
    const pad = (/** @type {number} */ v) => String(v).padStart(2, "0");
    return `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
  }
  const sign = x < 0 ? "-" : "";
  let s = Math.abs(x);
  if (s < 60) return `${sign}${Number.parseFloat(s.toPrecision(3))}s`;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  const sec = Math.round(s - m * 60);
  return h ? `${sign}${h}h${String(m).padStart(2, "0")}m` : `${sign}${m}m${String(sec).padStart(2, "0")}s`;
}

/**
 * The read-out line: each series' value at a step (the last recorded at or
 * before it), or, under the pointer, at the recorded step nearest to it. On a
 * time axis (`axis`), `at` is a time and the line says it.
 * @param {Series[]} list
 * @param {number} at
 * @param {{nearest: boolean, runs: number, dataOf: DataOf, axis?: "step" | "wall" | "relative"}} o
 * @returns {string}
 */
export function readoutText(list, at, o) {
  const axis = o.axis ?? "step";
  if (axis !== "step") return timeReadout(list, at, o, axis);
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

/**
 * The read-out on a time axis: at the point nearest to the time, each series'
 * value and the step it was logged at.
 * @param {Series[]} list
 * @param {number} x
 * @param {{runs: number, dataOf: DataOf}} o
 * @param {"wall" | "relative"} axis
 * @returns {string}
 */
function timeReadout(list, x, o, axis) {
  const parts = [];
  for (const s of list) {
    const d = o.dataOf(s);
    const i = floorIndex(d.steps, x);
    if (i < 0) continue;
    const label = o.runs > 1 ? `${s.run} ${s.name}` : s.name;
    parts.push(`${label} ${formatNumber(d.values[i])} (step ${formatStep((d.at ?? d.steps)[i])})`);
  }
  const when = axis === "wall" ? formatX(x, axis) : `${formatX(x, axis)} since start`;
  return `${when}: ${parts.join(" \u00b7 ") || "no values yet"}`;
}
