import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mapOf } from "../attention.js";

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
});
