import assert from "node:assert/strict";
import { test } from "node:test";
import { floorIndex, lowerBound, nearestIndex, snapIndex, upperBound } from "../lib/steps.js";

const steps = [0, 10, 20, 30];

test("lowerBound and upperBound bracket a value", () => {
  assert.deepEqual([lowerBound(steps, 10), upperBound(steps, 10)], [1, 2]);
  assert.deepEqual([lowerBound(steps, 15), upperBound(steps, 15)], [2, 2]);
  assert.deepEqual([lowerBound(steps, 99), upperBound(steps, -1)], [4, 0]);
});

test("floorIndex: the last step at or before, -1 before them all", () => {
  assert.equal(floorIndex(steps, 20), 2);
  assert.equal(floorIndex(steps, 29), 2);
  assert.equal(floorIndex(steps, 1e9), 3);
  assert.equal(floorIndex(steps, -5), -1);
  assert.equal(floorIndex([], 3), -1);
});

test("snapIndex shows the first step for a step before them all", () => {
  assert.equal(snapIndex(steps, 15), 1);
  assert.equal(snapIndex(steps, -5), 0);
  assert.equal(snapIndex(new Int32Array([5, 10]), 10), 1);
});

test("nearestIndex picks the nearer neighbour, the earlier one on a tie", () => {
  assert.equal(nearestIndex(steps, 14), 1);
  assert.equal(nearestIndex(steps, 16), 2);
  assert.equal(nearestIndex(steps, 15), 1);
  assert.equal(nearestIndex(steps, -3), 0);
  assert.equal(nearestIndex(steps, 99), 3);
  assert.equal(nearestIndex([], 1), -1);
});
