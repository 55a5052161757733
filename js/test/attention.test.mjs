import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { flagsText, mapOf, mapSize } from "../attention.js";
import { axisLabels, layerExtent } from "../lib/attention_extent.js";

describe("mapOf", () => {
  it("takes one head's map out of (layers, heads, queries, keys) and scales it to its peak", () => {
    // 2 layers x 2 heads x 2 queries x 2 keys
    const data = Float32Array.from({ length: 16 }, (_, i) => i / 16);
    const { raw, values, max } = mapOf(data, [2, 2, 2, 2], 1, 0);
    assert.deepEqual([...raw], [8 / 16, 9 / 16, 10 / 16, 11 / 16]);
    assert.equal(max, 11 / 16);
    assert.equal(values[3], 1);
  });

  it("leaves an all-zero map at zero", () => {
    const { values, max } = mapOf(new Float32Array(8), [1, 2, 2, 2], 0, 1);
    assert.equal(max, 0);
    assert.deepEqual([...values], [0, 0, 0, 0]);
  });

  it("stops at the layer's own extent, never reading the padding", () => {
    // 1 layer x 1 head, padded to 3 queries x 4 keys; the layer's maps are 2 x 3
    const data = Float32Array.from([1, 2, 3, 99, 4, 5, 6, 99, 99, 99, 99, 99]);
    const { raw, rows, cols, max } = mapOf(data, [1, 1, 3, 4], 0, 0, { queries: 2, keys: 3 });
    assert.deepEqual([rows, cols, max], [2, 3, 6]);
    assert.deepEqual([...raw], [1, 2, 3, 4, 5, 6]);
  });
});

describe("mapSize", () => {
  it("keeps cells square: a wide map is as wide as the side, a tall one as tall", () => {
    assert.deepEqual(mapSize(6, 12, 72), { width: 72, height: 36 });
    assert.deepEqual(mapSize(12, 6, 72), { width: 36, height: 72 });
    assert.deepEqual(mapSize(5, 5, 72), { width: 72, height: 72 });
    assert.deepEqual(mapSize(1, 256, 72).height, 8); // never thinner than 8 px
  });
});

describe("layerExtent and axisLabels", () => {
  const get = (/** @type {Record<string, any>} */ traits) => (/** @type {string} */ k) => traits[k];

  it("read each layer's own heads, queries and keys, within the padded shape", () => {
    const g = get({ extents: [[4, 6, 10], [2, 6, 6]] });
    assert.deepEqual(layerExtent(g, [2, 4, 6, 10], 1), { heads: 2, queries: 6, keys: 6 });
    assert.deepEqual(layerExtent(get({}), [2, 4, 6, 10], 1), { heads: 4, queries: 6, keys: 10 });
  });

  it("label a cross-attention's queries and keys with their own sequences", () => {
    const g = get({ axis_tokens: [[["a", "b"], ["x", "y", "z"]]] });
    const labels = axisLabels(g, 0, 2, 3);
    assert.deepEqual(labels, { queries: ["a", "b"], keys: ["x", "y", "z"], same: false });
  });

  it("fall back to the sample's tokens, then to positions, and know self-attention", () => {
    const labels = axisLabels(get({ tokens: ["p", "q"] }), 0, 3, 3);
    assert.deepEqual(labels, { queries: ["p", "q", "2"], keys: ["p", "q", "2"], same: true });
  });
});

describe("flagsText", () => {
  it("says every head once when all are marked, and lists a few by layer otherwise", () => {
    const names = ["enc.0", "dec.0"];
    assert.equal(flagsText(Array(8).fill("uniform"), names, 4), "At the last capture: uniform: every head (8)");
    const flags = ["", "", "collapsed", "", "uniform", "uniform", "uniform", "uniform"];
    assert.equal(
      flagsText(flags, names, 4),
      "At the last capture: collapsed: enc.0 head 2 | uniform: dec.0 every head",
    );
    assert.equal(flagsText(Array(8).fill(""), names, 4), "");
  });

  it("counts a layer of fewer heads by its own", () => {
    const flags = ["dead", "dead", "", "", "", "", "", ""];
    assert.equal(flagsText(flags, ["a", "b"], 4, [2, 4]), "At the last capture: dead: a every head");
  });
});
