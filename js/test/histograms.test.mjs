import assert from "node:assert/strict";
import { test } from "node:test";
import { evenlySpaced, rowNormalised } from "../histograms.js";

test("evenlySpaced keeps the first and last row", () => {
  assert.deepEqual(evenlySpaced(3, 10), [0, 1, 2]);
  const picked = evenlySpaced(100, 5);
  assert.equal(picked[0], 0);
  assert.equal(picked.at(-1), 99);
  assert.equal(picked.length, 5);
});

test("rowNormalised scales each row to its own peak, empty rows stay zero", () => {
  assert.deepEqual([...rowNormalised([1, 2, 0, 0, 5, 10], 3, 2)], [0.5, 1, 0, 0, 0.5, 1]);
});
