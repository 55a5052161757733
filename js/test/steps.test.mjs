import assert from "node:assert/strict";
import { test } from "node:test";
import { floorIndex, lowerBound, nearestIndex, snapIndex, stepRuns, upperBound } from "../lib/steps.js";

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

test("stepRuns indexes runs of steps as the steps themselves", () => {
  // 0..4, then every 10th to 50, then 51 alone
  const steps = [0, 1, 2, 3, 4, 10, 20, 30, 40, 50, 51];
  const runs = stepRuns(new Int32Array([0, 5, 1, 10, 5, 10, 51, 1, 1]));
  assert.equal(runs.length, steps.length);
  assert.deepEqual(
    steps.map((_, i) => runs.at(i)),
    steps,
  );
  assert.ok(Number.isNaN(runs.at(-1)) && Number.isNaN(runs.at(steps.length)));
  for (const x of [-5, 0, 3, 4, 5, 9, 10, 15, 49, 50, 51, 52, 1e9]) {
    assert.equal(runs.snap(x), snapIndex(steps, x), `step ${x}`);
  }
});

test("stepRuns holds a million steps as one run", () => {
  const runs = stepRuns([0, 1_000_000, 1]);
  assert.equal(runs.length, 1_000_000);
  assert.equal(runs.at(999_999), 999_999);
  assert.equal(runs.snap(123_456.5), 123_456);
  const empty = stepRuns([]);
  assert.equal(empty.length, 0);
  assert.equal(empty.snap(3), 0);
});
