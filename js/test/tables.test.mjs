import assert from "node:assert/strict";
import { test } from "node:test";
import { evenlySpaced, rowNormalised } from "../histograms.js";
import { bestRow, compareCells } from "../runs_table.js";

test("compareCells sorts numbers numerically and missing values last either way", () => {
  const values = [3, null, 10, 2];
  assert.deepEqual([...values].sort((a, b) => compareCells(a, b, false)), [2, 3, 10, null]);
  assert.deepEqual([...values].sort((a, b) => compareCells(a, b, true)), [10, 3, 2, null]);
  assert.deepEqual(["lr10", "lr9"].sort((a, b) => compareCells(a, b, false)), ["lr9", "lr10"]);
});

test("bestRow follows the column's direction and skips non-numbers", () => {
  const rows = [{ cells: { m: 0.5 } }, { cells: { m: null } }, { cells: { m: 0.9 } }];
  assert.equal(bestRow(/** @type {any} */ (rows), /** @type {any} */ ({ key: "m", better: "min" })), 0);
  assert.equal(bestRow(/** @type {any} */ (rows), /** @type {any} */ ({ key: "m", better: "max" })), 2);
  assert.equal(bestRow([], /** @type {any} */ ({ key: "m", better: "max" })), -1);
});

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

test("tickLabels give close ticks distinct labels", async () => {
  const { tickLabels } = await import("../lib/linechart.js");
  assert.deepEqual(tickLabels([1.3855, 1.386, 1.3865]), ["1.3855", "1.3860", "1.3865"]);
  assert.deepEqual(tickLabels([0, 50, 100]), ["0", "50", "100"]);
  assert.deepEqual(tickLabels([0, 0.5, 1]), ["0.0", "0.5", "1.0"]);
});
