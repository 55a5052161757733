import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  BINS,
  MENU_CLASSES,
  classOptions,
  boxToData,
  colourCodes,
  linearScale,
  pointSize,
  pointsInBox,
} from "../lib/points.js";
import { legendItems } from "../lib/projector/legend.js";
import { withDocument } from "./fake_dom.mjs";

const arrays = {
  n: 4,
  label: Uint8Array.from([0, 1, 2, 255]),
  pred: Uint8Array.from([0, 2, 2, 1]),
  confidence: Uint8Array.from([0, 127, 254, 255]),
  loss: Uint8Array.from([254, 0, 10, 255]),
  n_classes: 3,
  missing: 255,
};

describe("colourCodes", () => {
  it("gives each class its colour and unknown labels the last (grey) one", () => {
    const { codes, colors } = colourCodes("label", arrays);
    assert.deepEqual([...codes], [0, 1, 2, 3]);
    assert.equal(colors.length, 4);
    assert.equal(new Set(colors).size, 4);
  });

  it("marks correct, wrong and unknown predictions", () => {
    const { codes, colors } = colourCodes("correct", arrays);
    assert.deepEqual([...codes], [0, 1, 0, 2]);
    assert.equal(colors.length, 3);
  });

  it("bins confidence from 0 to 1 and keeps unknown apart", () => {
    const { codes, colors } = colourCodes("confidence", arrays);
    assert.deepEqual([...codes], [0, Math.floor((127 / 254) * BINS), BINS - 1, BINS]);
    assert.equal(colors.length, BINS + 1);
  });

  it("uses one colour when asked", () => {
    const { codes, colors } = colourCodes("none", arrays);
    assert.deepEqual([...codes], [0, 0, 0, 0]);
    assert.equal(colors.length, 2);
  });
});

describe("pointSize", () => {
  it("shrinks with the number of points, never under one pixel", () => {
    assert.ok(pointSize(100) > pointSize(100_000));
    assert.equal(pointSize(10_000_000), 1);
    assert.ok(pointSize(1_000_000) < 1.1);
    assert.ok(pointSize(1_000) <= 6);
  });
});

describe("box selection", () => {
  it("turns a dragged box into a data-space rectangle, whatever the drag direction", () => {
    const x = linearScale([-1, 1], [0, 200]);
    const y = linearScale([-1, 1], [100, 0]); // screen y grows downwards
    const poly = boxToData({ x0: 150, y0: 75, x1: 50, y1: 25 }, x, y);
    assert.deepEqual(poly, [
      [-0.5, -0.5],
      [0.5, -0.5],
      [0.5, 0.5],
      [-0.5, 0.5],
    ]);
  });

  it("follows the scale's domain as the view pans and zooms", () => {
    const x = linearScale([-1, 1], [0, 200]);
    x.domain([0, 0.5]);
    assert.equal(x.invert(100), 0.25);
    assert.equal(x.apply(0.5), 200);
    const copy = x.copy();
    copy.domain([0, 1]);
    assert.deepEqual(x.domain(), [0, 0.5]);
  });

  it("selects exactly the points inside the rectangle", () => {
    const xy = Float32Array.from([0, 0, 0.4, 0.4, 0.6, 0, -0.5, -0.5, 0.2, 0.9]);
    const poly = boxToData({ x0: 50, y0: 75, x1: 150, y1: 25 }, linearScale([-1, 1], [0, 200]),
      linearScale([-1, 1], [100, 0]));
    assert.deepEqual(pointsInBox(xy, poly), [0, 1, 3]);
  });
});

describe("classes past the palette", () => {
  withDocument();
  const big = {
    ...arrays,
    label: Uint32Array.from([0, 100000, 2 ** 31 - 1, 2 ** 32 - 1]),
    pred: Uint32Array.from([0, 0, 2 ** 31 - 1, 1]),
    n_classes: 2 ** 31,
    missing: 2 ** 32 - 1,
  };

  it("colour a class index of 2**31 - 1 from the palette, with no colour per class", () => {
    const { codes, colors, repeating } = colourCodes("label", big);
    const palette = colors.length - 1;
    assert.equal(palette, 20);
    assert.equal(repeating, 2 ** 31);
    assert.deepEqual([...codes], [0, 100000 % 20, (2 ** 31 - 1) % 20, palette]);
    const items = legendItems("label", colors, [], 1, true, [0, 1], repeating);
    assert.deepEqual(
      items.map((i) => i.textContent),
      ['2,147,483,648 classes share 20 colours: "show" picks one class', "unknown"],
    );
  });

  it("offer every class of a small label set in the class menu", () => {
    assert.deepEqual(classOptions(arrays, ["a", "b"], -1), [
      ["0", "a"],
      ["1", "b"],
      ["2", "class 2"],
    ]);
  });

  it("offer the classes the points have, most points first, for a huge label set", () => {
    const many = { ...big, label: Uint32Array.from([7, 2 ** 31 - 1, 2 ** 31 - 1, 2 ** 32 - 1]) };
    assert.deepEqual(classOptions(many, [], -1), [
      [String(2 ** 31 - 1), `class ${2 ** 31 - 1}`],
      ["7", "class 7"],
    ]);
    assert.deepEqual(classOptions(many, [], 5).at(-1), ["5", "class 5"]);
    const spread = { ...big, label: Uint32Array.from({ length: MENU_CLASSES + 50 }, (_, i) => 5000 + i) };
    assert.equal(classOptions(spread, [], -1).length, MENU_CLASSES);
    // before the points arrive: the first names, and the class shown now
    const names = Array.from({ length: MENU_CLASSES + 5 }, (_, c) => `n${c}`);
    assert.equal(classOptions(null, names, -1).length, MENU_CLASSES);
    assert.deepEqual(classOptions(null, names, MENU_CLASSES + 3).at(-1), [String(MENU_CLASSES + 3), `n${MENU_CLASSES + 3}`]);
  });
});
