// The charts of a layer's detail in the LayerBrowser: its statistics over
// steps as band charts (mean over ±std and min..max, the zero fraction, the
// gradient norm, the update/weight ratio) with a read-out under the pointer,
// and its histograms at the linked step.
import { drawBandChart } from "../bandchart.js";
import { CATEGORICAL_10 } from "../color.js";
import { el, on } from "../dom.js";
import { formatStep } from "../format.js";
import { NONFINITE_CSS, nonfiniteSummary, nonfiniteText } from "../nonfinite.js";
import { drawBars } from "../sparkline.js";
import { decodeArray } from "../wire.js";

export const [BLUE, ORANGE, GREEN, PINK] = CATEGORICAL_10;

/**
 * A numeric array from a wire payload (empty when there is none).
 * @param {any} payload
 * @returns {ArrayLike<number>}
 */
export const arr = (payload) => (payload && payload.data ? decodeArray(payload).data : new Float64Array(0));

/**
 * a[i] + sign * b[i], elementwise.
 * @param {ArrayLike<number>} a
 * @param {ArrayLike<number>} b
 * @param {1 | -1} sign
 */
function offset(a, b, sign) {
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] + sign * b[i];
  return out;
}

/**
 * The chart of a mean with its ±std and min..max bands.
 * @param {any} s
 * @param {string} color
 * @returns {import("../bandchart.js").BandChart}
 */
function spread(s, color) {
  return {
    steps: s.steps,
    lines: [{ label: "mean", values: s.mean, color }],
    bands: [
      { lo: s.min, hi: s.max, color },
      { lo: offset(s.mean, s.std, -1), hi: offset(s.mean, s.std, 1), color },
    ],
  };
}

/**
 * The zero fraction at the captures that measured it: the probe takes it with the
 * distributions, so the captures between hold NaN for "not measured" (a capture
 * with non-finite values stays, for its mark).
 * @param {any} s  a decoded detail series
 * @returns {import("../bandchart.js").BandChart}
 */
export function zeroChart(s) {
  const keep = [];
  for (let i = 0; i < s.steps.length; i++) {
    if (!Number.isNaN(s.zero_frac[i]) || s.nonfinite[i] > 0) keep.push(i);
  }
  const pick = (/** @type {ArrayLike<number>} */ a) => Float64Array.from(keep, (i) => a[i]);
  const all = keep.length === s.steps.length;
  const n = s.steps.length;
  return {
    steps: all ? s.steps : pick(s.steps),
    lines: [{ label: "zero fraction", values: all ? s.zero_frac : pick(s.zero_frac), color: ORANGE }],
    bad: all ? s.nonfinite : pick(s.nonfinite),
    span: n ? [s.steps[0], s.steps[n - 1]] : undefined,
  };
}

/**
 * The charts drawn for one detail series.
 * @param {any} s  a decoded detail series
 * @returns {Array<{title: string, chart: import("../bandchart.js").BandChart}>}
 */
export function chartsFor(s) {
  return chartsOf(s).map(({ title, chart }) => ({ title, chart: { bad: s.nonfinite, ...chart } }));
}

/**
 * @param {any} s  a decoded detail series
 * @returns {Array<{title: string, chart: import("../bandchart.js").BandChart}>}
 */
function chartsOf(s) {
  const steps = s.steps;
  const title = `${s.label} (${s.layer})`;
  if (s.signal === "activation") {
    return [
      { title: `${title}: mean, \u00b1std, min..max`, chart: spread(s, BLUE) },
      { title: `${title}: zero fraction`, chart: zeroChart(s) },
    ];
  }
  if (s.signal === "gradient") {
    return [{ title: `${title}: norm`, chart: { steps, log: true, lines: [{ label: "norm", values: s.norm, color: PINK }] } }];
  }
  if (s.signal === "update") {
    return [{ title: `${title}: update / weight`, chart: { steps, log: true, lines: [{ label: "update/weight", values: s.rel, color: GREEN }] } }];
  }
  return [{ title: `${s.layer}: mean, \u00b1std, min..max`, chart: spread(s, GREEN) }];
}

/**
 * One detail series from the wire, its arrays decoded.
 * @param {any} raw
 */
export function decodeDetailSeries(raw) {
  const s = { ...raw, steps: arr(raw.steps) };
  for (const f of ["mean", "std", "min", "max", "norm", "zero_frac", "rel", "nonfinite"]) s[f] = arr(raw[f]);
  return s;
}

/**
 * The band charts of a layer's series: boxes to show, draw(step) to (re)draw
 * them with the step marked, remove() to stop their read-outs.
 * @param {any[]} series  the detail's `series`
 * @returns {{boxes: HTMLElement[], draw: (step: number) => void, remove: () => void}}
 */
export function layerCharts(series) {
  /** @type {Array<{canvas: HTMLCanvasElement, chart: any, lookup: (x: number) => string}>} */
  const charts = [];
  /** @type {Array<() => void>} */
  const offs = [];
  const boxes = [];
  for (const s of series.map(decodeDetailSeries)) {
    for (const { title, chart } of chartsFor(s)) {
      const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-chart" }));
      const readout = el("div", { class: "nbviz-lb-caption" });
      const bad = nonfiniteSummary(s.steps, s.nonfinite, formatStep);
      boxes.push(
        el("div", { class: "nbviz-lb-chartbox", attrs: { "data-signal": s.signal, "data-layer": s.layer } }, [
          el("div", { class: "nbviz-lb-chart-title", text: title }),
          canvas,
          ...(bad ? [el("div", { class: "nbviz-lb-caption nbviz-nonfinite nbviz-lb-chart-nonfinite", text: bad })] : []),
          readout,
        ]),
      );
      const entry = { canvas, chart, lookup: (/** @type {number} */ _x) => "" };
      offs.push(
        on(canvas, "pointermove", (/** @type {PointerEvent} */ e) => {
          readout.textContent = entry.lookup(e.clientX - canvas.getBoundingClientRect().left);
        }),
        on(canvas, "pointerleave", () => {
          readout.textContent = "";
        }),
      );
      charts.push(entry);
    }
  }
  return {
    boxes,
    draw(step) {
      for (const c of charts) {
        const width = Math.max(240, c.canvas.parentElement?.clientWidth || 320);
        c.lookup = drawBandChart(c.canvas, { ...c.chart, marker: step, width, height: 130 });
      }
    },
    remove() {
      for (const off of offs.splice(0)) off();
    },
  };
}

/**
 * The layer's histograms at (or before) the linked step, one box each.
 * @param {any[]} hists  detail_at.histograms
 * @returns {HTMLElement[]}
 */
export function histogramBoxes(hists) {
  if (!hists.length) return [el("div", { class: "nbviz-muted", text: "no histograms recorded at or before this step" })];
  return hists.map((h) => {
    const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-hist" }));
    const counts = arr(h.counts);
    let inBars = 0;
    for (let i = 0; i < counts.length; i++) inBars += counts[i];
    const bad = Number(h.nonfinite || 0);
    drawBars(canvas, counts, h.lo, h.hi, { color: h.signal === "weight" ? GREEN : h.signal === "gradient" ? PINK : BLUE });
    const ctx = bad && !inBars ? canvas.getContext("2d") : null;
    if (ctx) {
      ctx.fillStyle = NONFINITE_CSS;
      ctx.font = "11px sans-serif";
      ctx.textAlign = "center";
      ctx.fillText("every value non-finite", 110, 36); // the middle of drawBars' 220 x 90
    }
    return el("div", { class: "nbviz-lb-histbox", attrs: { "data-signal": h.signal, "data-layer": h.layer } }, [
      el("div", { class: "nbviz-lb-caption", text: `${h.label} (${h.layer}) at step ${formatStep(h.step)}` }),
      canvas,
      ...(bad ? [el("div", { class: "nbviz-lb-caption nbviz-nonfinite nbviz-lb-hist-nonfinite", text: `${nonfiniteText(bad)} (NaN/inf), not in the bars` })] : []),
    ]);
  });
}
