import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { drawBandChart } from "../lib/bandchart.js";
import { chartsFor, zeroChart } from "../lib/layer_browser/charts.js";
import { recordingCanvas } from "./fake_canvas.mjs";

/** A decoded activation series: `n` captures, every `dist`-th with its zero fraction. */
function series(n, dist, bad = new Set()) {
  const steps = Float64Array.from({ length: n }, (_, i) => i);
  const zero = Float64Array.from(steps, (s) => (s % dist === 0 ? 0.25 + s / 100 : Number.NaN));
  const nonfinite = Float64Array.from(steps, (s) => (bad.has(s) ? 3 : 0));
  const mean = new Float64Array(n).fill(1);
  return { signal: "activation", layer: "fc", label: "activations", steps, zero_frac: zero, nonfinite, mean, std: mean, min: mean, max: mean };
}

describe("layer detail charts", () => {
  it("the zero fraction is drawn at the captures that measured it, joined across the rest", () => {
    const chart = zeroChart(series(21, 10));
    assert.deepEqual(Array.from(chart.steps), [0, 10, 20]);
    assert.deepEqual(Array.from(chart.lines[0].values), [0.25, 0.35, 0.45]);
    assert.deepEqual(Array.from(chart.bad ?? []), [0, 0, 0]);
    assert.deepEqual(chart.span, [0, 20], "the step axis of the other charts");
  });

  it("a capture with non-finite values keeps its mark on the zero fraction's chart", () => {
    const chart = zeroChart(series(21, 10, new Set([13])));
    assert.deepEqual(Array.from(chart.steps), [0, 10, 13, 20]);
    assert.ok(Number.isNaN(chart.lines[0].values[2]));
    assert.deepEqual(Array.from(chart.bad ?? []), [0, 0, 3, 0]);
  });

  it("every capture measured: the series' own arrays; the other charts keep every capture", () => {
    const s = series(5, 1);
    const [spread, zero] = chartsFor(s);
    assert.equal(zero.chart.steps, s.steps);
    assert.equal(zero.chart.bad, s.nonfinite);
    const sparse = chartsFor(series(21, 10));
    assert.equal(sparse[0].chart.steps.length, 21, "mean, std, min..max at each capture");
    assert.equal(sparse[0].chart.bad?.length, 21);
    assert.equal(sparse[1].chart.steps.length, 3);
    assert.ok(spread.title.includes("mean"));
  });

  it("a chart's span widens its step axis to its neighbours' captures", () => {
    const chart = { steps: [0, 50], lines: [{ label: "z", values: [0.1, 0.2], color: "#000" }], width: 320 };
    // x = 250 px: three quarters along the plot (52..312 px)
    const own = drawBandChart(/** @type {any} */ (recordingCanvas().canvas), chart);
    assert.match(own(250), /^step 0\b/, "steps 0..50 across the plot: 250 px is step 38");
    const wide = drawBandChart(/** @type {any} */ (recordingCanvas().canvas), { ...chart, span: [0, 100] });
    assert.match(wide(250), /^step 50\b/, "steps 0..100: 250 px is step 76, after the capture at 50");
  });
});
