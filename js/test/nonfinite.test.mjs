import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { NONFINITE_CSS, nonfiniteSummary, nonfiniteText } from "../lib/nonfinite.js";
import { drawSparkline } from "../lib/sparkline.js";
import { recordingCanvas } from "./fake_canvas.mjs";

describe("non-finite values in words", () => {
  it("counts them with thousands separators, and says nothing for none", () => {
    assert.equal(nonfiniteText(8192), "8,192 non-finite");
    assert.equal(nonfiniteText(0), "");
  });

  it("sums a series up: how many captures, from which step, the largest count", () => {
    const steps = [0, 5, 7, 8, 9];
    assert.equal(
      nonfiniteSummary(steps, [0, 0, 32, 1024, 1024], String),
      "non-finite values (NaN/inf) at 3 of 5 captures (from step 7; up to 1,024 in one), left out of the statistics",
    );
    assert.equal(nonfiniteSummary(steps, [0, 0, 0, 0, 0], String), "");
  });
});

describe("a sparkline with non-finite steps", () => {
  it("ticks each step that had some, even when nothing finite is left to draw", () => {
    const { marks, canvas } = recordingCanvas();
    const drawn = drawSparkline(canvas, [0, 1, 2, 3], [NaN, NaN, NaN, NaN], { bad: [0, 5, 5, 5], marker: 3 });
    assert.equal(drawn, 0);
    const ticks = marks.filter((m) => m.kind === "rect" && m.color === NONFINITE_CSS);
    assert.equal(ticks.length, 3);
    // the linked step's value is non-finite: a red dot, not a value of 0
    assert.deepEqual(
      marks.filter((m) => m.kind === "dot").map((m) => m.color),
      [NONFINITE_CSS],
    );
  });

  it("draws no tick for a finite series", () => {
    const { marks, canvas } = recordingCanvas();
    drawSparkline(canvas, [0, 1, 2], [1, 2, 3], { bad: [0, 0, 0], marker: 2 });
    assert.equal(marks.filter((m) => m.color === NONFINITE_CSS).length, 0);
  });
});
