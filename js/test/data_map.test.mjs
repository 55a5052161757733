import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mapColours, mapTicks, SUSPECT_COLOR, toDevice, toFraction } from "../lib/data_map.js";

describe("data map", () => {
  it("puts variability across [0, 0.5] and confidence up [0, 1]", () => {
    assert.deepEqual(toDevice(0, 0), [-1, -1]);
    assert.deepEqual(toDevice(0.5, 1), [1, 1]);
    assert.deepEqual(toFraction(0.25, 0.75), [0.5, 0.25]); // from the top-left corner
  });

  it("colours by correctness in bins, or flags the suspects in red", () => {
    const correctness = Uint8Array.from([0, 127, 254]);
    const suspect = Uint8Array.from([1, 0, 0]);
    const byRight = mapColours("correctness", correctness, suspect);
    assert.deepEqual(Array.from(byRight.codes), [0, 3, 5]);
    assert.equal(byRight.colors.length, 6);
    assert.equal(byRight.labels[5], "right 100% of the time");
    const bySuspect = mapColours("suspect", correctness, suspect);
    assert.deepEqual(Array.from(bySuspect.codes), [1, 0, 0]);
    assert.equal(bySuspect.colors[1], SUSPECT_COLOR);
  });

  it("ticks cover both axes", () => {
    const t = mapTicks();
    assert.equal(t.x.at(-1), 0.5);
    assert.equal(t.y.at(-1), 1);
  });
});
