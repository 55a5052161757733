import assert from "node:assert/strict";
import { test } from "node:test";
import { evenlySpaced, ridgeLabels, rowNormalised } from "../histograms.js";

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

test("ridgeLabels label about k curves by step, and the linked step's curve apart from them", () => {
  const steps = Array.from({ length: 100 }, (_, i) => i * 10);
  const shown = evenlySpaced(100, 48);
  const none = ridgeLabels(shown, steps, -1, 6, 2);
  assert.equal(none.length, 6);
  assert.equal(none[0].step, 0, "the earliest curve");
  assert.equal(none.at(-1)?.step, 990, "the latest curve");
  assert.ok(none.every((l) => !l.current));
  const linked = ridgeLabels(shown, steps, 40, 6, 2);
  const current = linked.filter((l) => l.current);
  assert.deepEqual(current.map((l) => l.step), [400]);
  const near = linked.filter((l) => !l.current && Math.abs(l.k - current[0].k) < 2);
  assert.deepEqual(near, [], "no label overlaps the linked step's");
});
