import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { stepColumns, unitTicks } from "../lib/layer_browser/dead_axes.js";
import { deadMap } from "../lib/layer_browser/dead_map.js";
import { encodeArray } from "../lib/wire.js";
import { find, withDocument } from "./fake_dom.mjs";

describe("dead map axes", () => {
  withDocument();

  it("unitTicks labels whole unit indices at the middle of their rows", () => {
    const ticks = unitTicks(64, 256);
    assert.ok(ticks.length >= 3);
    assert.equal(ticks[0].unit, 0);
    assert.equal(ticks[0].y, 2, "row 0 of 4 px rows");
    assert.ok(ticks.every((t) => Number.isInteger(t.unit) && t.unit < 64));
    assert.deepEqual(unitTicks(1, 60).map((t) => t.unit), [0]);
  });

  it("stepColumns writes the first and last step and about one per 90 px", () => {
    const steps = Array.from({ length: 40 }, (_, i) => i * 50);
    const cols = stepColumns(steps, 400);
    assert.equal(cols.length, 4);
    assert.deepEqual([cols[0].step, cols.at(-1)?.step], [0, 1950]);
    assert.equal(cols[0].x, 5, "the middle of the first 10 px column");
    assert.deepEqual(stepColumns([7], 300).map((c) => c.step), [7]);
    assert.deepEqual(stepColumns([], 300), []);
  });

  it("the dead map is drawn between its unit axis and its step axis", () => {
    const map = deadMap({
      units: 3,
      steps: encodeArray(Float64Array.from([0, 10])),
      values: encodeArray(Float32Array.from([0, 0.5, 1, 0, 0.5, 1])),
    });
    map.draw(10, 400);
    const frame = map.el[0];
    assert.equal(find(frame, "nbviz-lb-dead-units").length, 1);
    assert.equal(find(frame, "nbviz-lb-dead-steps").length, 1);
    assert.equal(find(frame, "nbviz-lb-dead").length, 1);
    map.remove();
  });

  it("an attention layer's heads map labels its rows 'head' and names the dead head", () => {
    const map = deadMap({
      units: 3,
      axis: "head",
      steps: encodeArray(Float64Array.from([0, 10])),
      values: encodeArray(Float32Array.from([0, 1, 0.01, 0, 1, 0])),
      rms: encodeArray(Float32Array.from([0.5, 0, 0.4, 0.6, 0, 0.5])),
      max_abs: encodeArray(Float32Array.from([2, 0, 1, 2, 0, 1])),
      dead: [1], // the kernel's rule (nbviz.analysis.dead_heads): not recomputed here
    });
    map.draw(10, 400);
    assert.equal(map.el[0].getAttribute("data-axis"), "head");
    const dead = find(map.el[2], "nbviz-lb-dead-heads")[0] ?? map.el[2];
    assert.equal(dead.getAttribute("data-dead"), "1");
    assert.match(dead.textContent, /dead: head 1 \(output ~0 at every capture shown\)/);
    assert.match(map.el[1].textContent, /~0 everywhere \(dead\)/);
    map.remove();
  });

  it("a heads map names the heads the kernel says are dead, all of them if so", () => {
    const map = deadMap({
      units: 2,
      axis: "head",
      steps: encodeArray(Float64Array.from([0])),
      values: encodeArray(Float32Array.from([1, 1])),
      rms: encodeArray(Float32Array.from([0, 0])),
      dead: [0, 1, "<b>x</b>"],
    });
    const dead = find(map.el[2], "nbviz-lb-dead-heads")[0] ?? map.el[2];
    assert.equal(dead.getAttribute("data-dead"), "0,1");
    assert.match(dead.textContent, /dead: heads 0, 1 \(output ~0 at every capture shown\)/);
    map.remove();
  });

  it("a unit map keeps its 'unit' axis and names no dead head", () => {
    const map = deadMap({ units: 1, steps: encodeArray(Float64Array.from([0])), values: encodeArray(Float32Array.from([1])) });
    map.draw(0, 300);
    assert.equal(map.el[0].getAttribute("data-axis"), "unit");
    assert.equal(map.el.length, 3);
    map.remove();
  });
});
