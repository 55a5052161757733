import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { csvField, svgCanvas, svgDocument, toCsv } from "../lib/export.js";
import { drawPanel } from "../lib/loss_curves/panel.js";
import { axisNear, brushOf, inBrushes, placeAxes } from "../lib/parallel.js";

describe("csv", () => {
  it("quotes fields holding commas, quotes or line breaks, and spells out NaN/Inf", () => {
    assert.equal(csvField('say "hi", then\nleave'), '"say ""hi"", then\nleave"');
    assert.equal(csvField(Number.NaN), "NaN");
    assert.equal(csvField(-Infinity), "-inf");
    assert.equal(csvField(null), "");
    assert.equal(toCsv(["run", "value"], [["a,b", 1.5], ["c", 2]]), 'run,value\r\n"a,b",1.5\r\nc,2\r\n');
  });
});

describe("svgCanvas", () => {
  it("records a loss panel as SVG paths and escaped text", () => {
    const fake = svgCanvas(400, 210);
    const s = {
      id: "a", run: "r", runIndex: 0, name: "<loss>", stem: "loss", split: "train",
      steps: Float64Array.from([0, 1, 2]), at: Float64Array.from([0, 1, 2]), values: Float64Array.from([3, 2, 1]),
      lo: Float64Array.from([2, 1, 0]), hi: Float64Array.from([4, 3, 2]), members: 2,
      stride: 1, total: 3, breaks: new Float64Array(0), nBreaks: 0,
    };
    drawPanel(/** @type {any} */ (fake), {
      list: [s], dataOf: (x) => x, width: 400, domain: [0, 2], log: false, smoothing: 0, step: 1, hover: null,
      highlight: "", colorOf: () => "#0072b2", theme: { muted: "#666", grid: "#eee", marker: "#000" },
    });
    const body = fake.body();
    assert.match(body, /<path d="M[^"]+" fill="#0072b2" fill-opacity="0.18"/); // the band
    assert.match(body, /<path d="M[^"]+" fill="none" stroke="#0072b2"/); // the mean line
    assert.ok(!body.includes("<loss>"));
    const doc = svgDocument([{ title: "a & b", width: 400, height: 210, body }]);
    assert.match(doc, /^<\?xml/);
    assert.match(doc, /a &amp; b/);
  });
});

describe("parallel coordinates", () => {
  const axes = [
    { key: "config:lr", label: "lr", kind: "number", lo: 0, hi: 1 },
    { key: "config:opt", label: "opt", kind: "category", lo: 0, hi: 2, categories: ["adam", "sgd", "x"] },
  ];
  it("places axes across the width and finds the one under the pointer", () => {
    const placed = placeAxes(axes, 500);
    assert.equal(placed[0].x, 46.5);
    assert.equal(axisNear(placed, 50)?.key, "config:lr");
    assert.equal(axisNear(placed, 200), null);
  });
  it("a drag makes a range in the axis' values; on categories whole categories", () => {
    const [lo, hi] = brushOf(axes[0], 224, 34); // bottom to top: the whole axis
    assert.ok(Math.abs(lo - 0) < 1e-9 && Math.abs(hi - 1) < 1e-9);
    const [a, b] = brushOf(axes[1], 130, 120); // around the middle category
    assert.deepEqual([a, b], [0.5, 1.5]);
    assert.ok(inBrushes({ "config:opt": 1 }, { "config:opt": [a, b] }));
    assert.ok(!inBrushes({ "config:opt": 2 }, { "config:opt": [a, b] }));
    assert.ok(!inBrushes({ "config:opt": null }, { "config:opt": [a, b] }));
  });
});

describe("time axes", async () => {
  const { formatX, stepAt, stepX, timeTicks } = await import("../lib/loss_curves/series.js");
  const s = { steps: Float64Array.from([0, 30, 90]), at: Float64Array.from([0, 10, 20]) };
  it("ticks at round minutes and hours, and says times as durations", () => {
    assert.deepEqual(timeTicks(0, 6000, 4), [0, 1800, 3600, 5400]);
    assert.equal(formatX(125, "relative"), "2m05s");
    assert.equal(formatX(3725, "relative"), "1h02m");
    assert.equal(formatX(Number.NaN, "relative"), "\u2013");
  });
  it("maps a step to its time and a time to the step logged nearest to it", () => {
    assert.equal(stepX([/** @type {any} */ (s)], 10), 30);
    assert.equal(stepAt([/** @type {any} */ (s)], 80, (x) => x), 20);
  });
});
