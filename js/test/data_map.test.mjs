import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mapColours, mapTicks, nearestPoint, SUSPECT_COLOR, toDevice, toFraction } from "../lib/data_map.js";

describe("data map", () => {
  it("puts variability across [0, 0.5] and confidence up [0, 1]", () => {
    assert.deepEqual(toDevice(0, 0), [-0.96, -0.96]); // inset: edge points show whole
    assert.deepEqual(toDevice(0.5, 1), [0.96, 0.96]);
    const [fx, fy] = toFraction(0.25, 0.75); // from the top-left corner
    assert.ok(Math.abs(fx - 0.5) < 1e-12 && Math.abs(fy - 0.26) < 1e-12);
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

  it("a click picks the nearest point within the radius, or none", () => {
    const x = Float32Array.from([-1, 0, 1]);
    const y = Float32Array.from([1, 0, -1]);
    assert.equal(nearestPoint(x, y, 0, 0, 100, 100, 5), 0); // top-left corner
    assert.equal(nearestPoint(x, y, 52, 49, 100, 100, 5), 1); // the centre
    assert.equal(nearestPoint(x, y, 99, 98, 100, 100, 5), 2); // bottom-right
    assert.equal(nearestPoint(x, y, 25, 25, 100, 100, 5), -1);
  });

  it("ticks cover both axes", () => {
    const t = mapTicks();
    assert.equal(t.x.at(-1), 0.5);
    assert.equal(t.y.at(-1), 1);
  });
});
