import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { drawSignedBars } from "../lib/sparkline.js";
import { recordingCanvas } from "./fake_canvas.mjs";

describe("drawSignedBars", () => {
  it("draws positive values up and negative values down from the zero line", () => {
    const { rects, canvas } = recordingCanvas();
    const zero = drawSignedBars(canvas, [2, -1, 0, 1], {
      width: 44,
      height: 34,
      color: "up",
      negative: "down",
    });
    // span 3 over 30 px: zero sits 2/3 of the way down
    assert.equal(zero, 2 + 20);
    assert.equal(rects.length, 3); // the zero value draws nothing
    const [a, b, c] = rects;
    assert.deepEqual([a.color, a.y, a.h], ["up", 2, 20]);
    assert.deepEqual([b.color, b.y, b.h], ["down", 22, 10]);
    assert.deepEqual([c.color, c.y + c.h], ["up", 22]);
  });

  it("skips NaN and keeps all-positive values on a bottom zero line", () => {
    const { rects, canvas } = recordingCanvas();
    const zero = drawSignedBars(canvas, [Number.NaN, 1, 3], { width: 34, height: 34 });
    assert.equal(zero, 32);
    assert.equal(rects.length, 2);
  });
});
