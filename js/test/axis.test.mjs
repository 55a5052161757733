import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { axisTicks, drawStepAxis, drawValueAxis, drawYAxis, logTicks, niceTicks, stepTicks, tickLabels } from "../lib/axis.js";
import { makeScale } from "../lib/linechart.js";

/** A 2d context that records the text it is asked to draw, and where. */
function recordingContext() {
  const texts = [];
  const lines = [];
  return {
    texts,
    lines,
    fillText(text, x, y) {
      texts.push({ text, x, y, align: this.textAlign });
    },
    moveTo(x, y) {
      lines.push([x, y]);
    },
    beginPath() {},
    lineTo() {},
    stroke() {},
  };
}

const theme = { muted: "#666", grid: "#eee" };

describe("tick values", () => {
  it("niceTicks steps by 1, 2 or 5 times a power of ten and covers the range", () => {
    assert.deepEqual(niceTicks(0, 100, 4), [0, 50, 100]);
    assert.deepEqual(niceTicks(0, 1, 5), [0, 0.5, 1]);
    assert.deepEqual(niceTicks(2, 9, 7), [2, 4, 6, 8], "a step of 1 would give 8 ticks: the next round step");
    assert.deepEqual(niceTicks(2, 9, 10), [2, 3, 4, 5, 6, 7, 8, 9]);
    assert.deepEqual(niceTicks(10, 0, 5), [0, 5, 10], "a reversed range gives the same ticks");
  });

  it("niceTicks gives exact decimals and a plain zero, ends included", () => {
    assert.deepEqual(niceTicks(-0.3, 0.3, 6), [-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3]);
    assert.deepEqual(niceTicks(0.3, 0.9, 6), [0.4, 0.6, 0.8]);
    assert.ok(Object.is(niceTicks(-1, 1, 2)[0], 0), "zero, not -0");
    assert.deepEqual(niceTicks(1e-9, 5e-9, 4), [2e-9, 4e-9]);
  });

  it("niceTicks of a point or a non-finite range", () => {
    assert.deepEqual(niceTicks(5, 5), [5]);
    assert.deepEqual(niceTicks(0, Number.NaN), []);
    assert.deepEqual(niceTicks(0, Number.POSITIVE_INFINITY), []);
  });

  it("logTicks: powers of ten, with 2 and 5 between them over a short range", () => {
    assert.deepEqual(logTicks(1, 1000), [1, 10, 100, 1000]);
    assert.deepEqual(logTicks(2, 30), [2, 5, 10, 20]);
    assert.deepEqual(logTicks(0.5, 20), [1, 10]);
    assert.deepEqual(logTicks(3, 4), [3, 4], "no round value inside: the ends");
    assert.deepEqual(logTicks(-1, 5), []);
  });

  it("tickLabels give close ticks distinct labels", () => {
    assert.deepEqual(tickLabels([1.3855, 1.386, 1.3865]), ["1.3855", "1.3860", "1.3865"]);
    assert.deepEqual(tickLabels([0, 50, 100]), ["0", "50", "100"]);
    assert.deepEqual(tickLabels([0, 0.5, 1]), ["0.0", "0.5", "1.0"]);
    assert.deepEqual(tickLabels([0, 2e5]), ["0", "2.00e5"]);
  });

  it("axisTicks pairs values and labels, for a log axis too", () => {
    assert.deepEqual(axisTicks(0, 1, { count: 4 }), { values: [0, 0.5, 1], labels: ["0.0", "0.5", "1.0"] });
    assert.deepEqual(axisTicks(1, 1000, { log: true }), { values: [1, 10, 100, 1000], labels: ["1", "10", "100", "1000"] });
  });

  it("stepTicks keeps whole steps only", () => {
    assert.deepEqual(stepTicks(0, 3, 10), [0, 1, 2, 3]);
    assert.deepEqual(stepTicks(0, 20000, 4), [0, 10000, 20000]);
  });
});

describe("drawing axes", () => {
  it("drawYAxis labels each tick left of the plot at its height, with a grid line across", () => {
    const ctx = recordingContext();
    const sy = makeScale(0, 1, 100, 0);
    drawYAxis(/** @type {any} */ (ctx), sy, { lo: 0, hi: 1, count: 4, left: 50, right: 300, gap: 6, theme });
    assert.deepEqual(ctx.texts.map((t) => t.text), ["0.0", "0.5", "1.0"]);
    assert.deepEqual(ctx.texts.map((t) => [t.x, t.y]), [[44, 100.5], [44, 50.5], [44, 0.5]]);
    assert.ok(ctx.texts.every((t) => t.align === "right"));
    assert.deepEqual(ctx.lines, [[50, 100.5], [50, 50.5], [50, 0.5]]);
  });

  it("drawYAxis on a log axis labels the powers of ten", () => {
    const ctx = recordingContext();
    drawYAxis(/** @type {any} */ (ctx), makeScale(1, 1000, 100, 0, true), { lo: 1, hi: 1000, log: true, left: 40, right: 200, gap: 4, theme });
    assert.deepEqual(ctx.texts.map((t) => t.text), ["1", "10", "100", "1000"]);
  });

  it("drawStepAxis writes step numbers with separators under their x", () => {
    const ctx = recordingContext();
    drawStepAxis(/** @type {any} */ (ctx), makeScale(0, 20000, 0, 200), { from: 0, to: 20000, count: 4, y: 90, theme });
    assert.deepEqual(ctx.texts.map((t) => [t.text, t.x, t.y]), [["0", 0, 90], ["10,000", 100, 90], ["20,000", 200, 90]]);
  });

  it("drawValueAxis marks and labels round values under a histogram", () => {
    const ctx = recordingContext();
    drawValueAxis(/** @type {any} */ (ctx), makeScale(-1, 1, 0, 200), { lo: -1, hi: 1, y: 10, theme });
    assert.deepEqual(ctx.texts.map((t) => t.text), ["-1.0", "-0.5", "0.0", "0.5", "1.0"]);
    assert.deepEqual(ctx.lines.map(([x, y]) => [x, y]), [[0, 10], [50, 10], [100, 10], [150, 10], [200, 10]]);
  });
});
