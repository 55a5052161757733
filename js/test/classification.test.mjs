import assert from "node:assert/strict";
import { test } from "node:test";
import { cellSize, changeColor, labelHeight, labelWidth, signed } from "../lib/confusion/matrix.js";
import { unitAt } from "../lib/layer_browser/units.js";

test("changeColor: blue where the model improved, red where it got worse, white for none", () => {
  assert.deepEqual(changeColor(0, true, 5), [255, 255, 255]);
  assert.deepEqual(changeColor(3, true, 0), [255, 255, 255]);
  const [r1, , b1] = changeColor(5, true, 5); // more correct
  const [r2, , b2] = changeColor(-5, false, 5); // fewer errors in a cell
  const [r3, , b3] = changeColor(5, false, 5); // more errors
  assert.ok(b1 > r1 && b2 > r2 && r3 > b3);
  assert.deepEqual(changeColor(-5, true, 5), changeColor(5, false, 5));
  // stronger for a larger change, capped at the peak
  assert.ok(changeColor(1, true, 4)[0] > changeColor(4, true, 4)[0]);
  assert.deepEqual(changeColor(9, true, 4), changeColor(4, true, 4));
});

test("signed writes the change with its sign", () => {
  assert.equal(signed(3), "+3");
  assert.equal(signed(-2), "\u22122");
  assert.equal(signed(0), "0");
});

test("unitAt maps a click across the bars to a unit, and -1 outside them", () => {
  assert.equal(unitAt(0, 100, 10), 0);
  assert.equal(unitAt(99.9, 100, 10), 9);
  assert.equal(unitAt(55, 100, 10), 5);
  assert.equal(unitAt(-1, 100, 10), -1);
  assert.equal(unitAt(100, 100, 10), -1);
  assert.equal(unitAt(5, 100, 0), -1);
});

test("column labels are as tall as the longest class name needs, no empty band above digits", () => {
  const digits = Array.from({ length: 10 }, (_, i) => String(i));
  assert.equal(labelHeight(digits, 10), 34, "one character: just the corner's two lines");
  assert.equal(labelHeight([], 10), 34, "unnamed classes show their index");
  const words = ["airplane", "automobile", "bird"];
  assert.ok(labelHeight(words, 3) > 34 && labelHeight(words, 3) < 90);
  assert.ok(labelHeight(words, 3) >= "automobile".length * 6.6, "the longest name fits");
  assert.equal(labelHeight(["a class name far longer than any label could show"], 1), 90, "long names are cut");
});

test("the matrix fits the pane it is in: cells shrink to the room, down to a scrolling minimum", () => {
  assert.equal(cellSize(10), 44, "no pane measured: about 440 px");
  assert.equal(cellSize(10, 0), 44, "a closed tab (width 0) keeps the usual size");
  assert.equal(cellSize(10, 380), 38, "a 380 px pane: ten 38 px cells");
  assert.equal(cellSize(10, 2000), 44, "a wide pane: never above the usual size");
  assert.equal(cellSize(100, 380), 14, "100 classes: the minimum, and the box scrolls");
});

test("row labels are as wide as the longest class name needs", () => {
  const digits = Array.from({ length: 10 }, (_, i) => String(i));
  assert.equal(labelWidth(digits, 10), 84, "digits: as narrow as the corner's words allow");
  assert.ok(labelWidth(["airplane", "automobile"], 2) >= "automobile".length * 6.6);
  assert.equal(labelWidth(["a class name far longer than any label could show"], 1), 110, "long names are cut");
});
