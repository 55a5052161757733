import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PIXEL_PATH_CELLS, cellFromPoint, drawHeatmap, heatmapLayout } from "../lib/heatmap.js";

/** A canvas stand-in that records what is drawn. */
function fakeCanvas(rect = null) {
  const ops = [];
  const ctx = {
    ops,
    fillStyle: "",
    strokeStyle: "",
    lineWidth: 1,
    setTransform: (...a) => ops.push(["setTransform", ...a]),
    clearRect: (...a) => ops.push(["clearRect", ...a]),
    fillRect: (...a) => ops.push(["fillRect", ctx.fillStyle, ...a]),
    strokeRect: (...a) => ops.push(["strokeRect", ctx.strokeStyle, ...a]),
    createImageData: (w, h) => ({ width: w, height: h, data: new Uint8ClampedArray(w * h * 4) }),
    putImageData: (img, x, y) => ops.push(["putImageData", img, x, y]),
  };
  return {
    ctx,
    width: 300,
    height: 150,
    style: {},
    getContext: (kind) => (kind === "2d" ? ctx : null),
    getBoundingClientRect: () => rect ?? { left: 0, top: 0, width: 0, height: 0 },
  };
}

const grey = (v) => [v, v, v];

describe("cellFromPoint", () => {
  const layout = heatmapLayout({ rows: 3, cols: 4, width: 200, height: 90 });

  it("finds the cell under a point", () => {
    assert.deepEqual(cellFromPoint(layout, 0, 0), { row: 0, col: 0 });
    assert.deepEqual(cellFromPoint(layout, 49.9, 29.9), { row: 0, col: 0 });
    assert.deepEqual(cellFromPoint(layout, 50, 30), { row: 1, col: 1 });
    assert.deepEqual(cellFromPoint(layout, 199.99, 89.99), { row: 2, col: 3 });
  });

  it("returns null outside the matrix", () => {
    assert.equal(cellFromPoint(layout, -1, 10), null);
    assert.equal(cellFromPoint(layout, 200, 10), null);
    assert.equal(cellFromPoint(layout, 10, 90), null);
    assert.equal(cellFromPoint(layout, Number.NaN, 10), null);
  });

  it("refuses an empty layout", () => {
    assert.throws(() => heatmapLayout({ rows: 0, cols: 2, width: 10, height: 10 }), /positive/);
  });
});

describe("drawHeatmap", () => {
  it("sizes the backing store by the device pixel ratio and paints every cell", () => {
    const canvas = fakeCanvas();
    drawHeatmap(canvas, [0, 50, 100, 150, 200, 250], {
      rows: 2,
      cols: 3,
      width: 120,
      height: 80,
      scale: grey,
      devicePixelRatio: 2,
    });
    assert.equal(canvas.width, 240);
    assert.equal(canvas.height, 160);
    assert.equal(canvas.style.width, "120px");
    assert.equal(canvas.style.height, "80px");
    assert.deepEqual(canvas.ctx.ops[0], ["setTransform", 2, 0, 0, 2, 0, 0]);
    const fills = canvas.ctx.ops.filter((op) => op[0] === "fillRect");
    assert.equal(fills.length, 6);
    assert.deepEqual(fills[4], ["fillRect", "rgb(200, 200, 200)", 40, 40, 40, 40]);
  });

  it("outlines the selected cell", () => {
    const canvas = fakeCanvas();
    drawHeatmap(canvas, [1, 2, 3, 4], {
      rows: 2,
      cols: 2,
      width: 100,
      height: 100,
      scale: grey,
      selected: [1, 0],
      selectedColor: "#ff0000",
      devicePixelRatio: 1,
    });
    const strokes = canvas.ctx.ops.filter((op) => op[0] === "strokeRect");
    assert.deepEqual(strokes, [["strokeRect", "#ff0000", 1, 51, 48, 48]]);
  });

  it("maps pointer events through the canvas's on-screen box", () => {
    const canvas = fakeCanvas({ left: 10, top: 20, width: 50, height: 50 });
    const drawn = drawHeatmap(canvas, [0, 0, 0, 0], {
      rows: 2,
      cols: 2,
      width: 100,
      height: 100,
      scale: grey,
      devicePixelRatio: 1,
    });
    // the canvas is shown at half size: (35, 30) on screen is (50, 20) in the layout
    assert.deepEqual(drawn.cellFromEvent({ clientX: 35, clientY: 30 }), { row: 0, col: 1 });
    assert.deepEqual(drawn.cellFromPoint(10, 60), { row: 1, col: 0 });
    assert.equal(drawn.cellFromEvent({ clientX: 5, clientY: 30 }), null);
  });

  it("paints large matrices pixel by pixel with the right colours", () => {
    const rows = 250;
    const cols = 200;
    assert.ok(rows * cols > PIXEL_PATH_CELLS);
    const values = new Float32Array(rows * cols);
    values[rows * cols - 1] = 255; // bottom-right cell
    const canvas = fakeCanvas();
    drawHeatmap(canvas, values, { rows, cols, width: 400, height: 500, scale: grey, devicePixelRatio: 1 });
    const put = canvas.ctx.ops.find((op) => op[0] === "putImageData");
    const img = put[1];
    assert.equal(img.width, 400);
    assert.equal(img.height, 500);
    const px = (x, y) => [...img.data.slice((y * 400 + x) * 4, (y * 400 + x) * 4 + 4)];
    assert.deepEqual(px(399, 499), [255, 255, 255, 255]);
    assert.deepEqual(px(398, 498), [255, 255, 255, 255], "a cell is 2x2 device pixels");
    assert.deepEqual(px(397, 499), [0, 0, 0, 255]);
    assert.deepEqual(px(399, 497), [0, 0, 0, 255]);
    assert.deepEqual(px(0, 0), [0, 0, 0, 255]);
  });

  it("names a values/shape mismatch", () => {
    assert.throws(
      () => drawHeatmap(fakeCanvas(), [1, 2, 3], { rows: 2, cols: 2, width: 10, height: 10, scale: grey }),
      /2x2 matrix needs 4 values, got 3/,
    );
  });
});
