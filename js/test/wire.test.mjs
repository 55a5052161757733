import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeArray, encodeArray, parseDtype, shapeSize } from "../lib/wire.js";

/** Bytes of `typed` placed `offset` bytes into a larger buffer, as a DataView. */
function viewAt(typed, offset) {
  const bytes = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
  const buffer = new ArrayBuffer(offset + bytes.length + 3);
  new Uint8Array(buffer).set(bytes, offset);
  return new DataView(buffer, offset, bytes.length);
}

describe("decodeArray", () => {
  it("decodes float32 from a DataView with a byteOffset", () => {
    const dv = viewAt(new Float32Array([1.5, -2, 3.25, 4, 5, 6]), 8);
    const a = decodeArray({ data: dv, dtype: "<f4", shape: [2, 3] });
    assert.ok(a.data instanceof Float32Array);
    assert.deepEqual([...a.data], [1.5, -2, 3.25, 4, 5, 6]);
    assert.deepEqual(a.shape, [2, 3]);
    assert.equal(a.data.buffer, dv.buffer, "aligned data is a view, not a copy");
  });

  it("copies when the offset is not aligned to the element size", () => {
    const dv = viewAt(new Float64Array([0.1, 1e300]), 3);
    const a = decodeArray({ data: dv, dtype: "<f8", shape: [2] });
    assert.ok(a.data instanceof Float64Array);
    assert.deepEqual([...a.data], [0.1, 1e300]);
  });

  it("decodes uint8 and bool with the | byte order", () => {
    const dv = viewAt(new Uint8Array([0, 1, 255]), 1);
    assert.deepEqual([...decodeArray({ data: dv, dtype: "|u1", shape: [3] }).data], [0, 1, 255]);
    assert.deepEqual([...decodeArray({ data: dv, dtype: "|b1", shape: [3] }).data], [0, 1, 255]);
  });

  it("turns int64 into exact numbers, or BigInt64Array on request", () => {
    const dv = viewAt(new BigInt64Array([-3n, 0n, 9007199254740991n]), 16);
    const a = decodeArray({ data: dv, dtype: "<i8", shape: [3] });
    assert.ok(a.data instanceof Float64Array);
    assert.deepEqual([...a.data], [-3, 0, 9007199254740991]);
    const b = decodeArray({ data: dv, dtype: "<i8", shape: [3] }, { int64: "bigint" });
    assert.ok(b.data instanceof BigInt64Array);
    assert.equal(b.data[2], 9007199254740991n);
  });

  it("refuses int64 values a number cannot hold exactly", () => {
    const dv = viewAt(new BigInt64Array([1n, 2n ** 60n]), 0);
    assert.throws(
      () => decodeArray({ data: dv, dtype: "<i8", shape: [2] }),
      /int64 value 1152921504606846976 at index 1/,
    );
  });

  it("accepts an ArrayBuffer or a typed array as data", () => {
    const f = new Int32Array([7, -8]);
    assert.deepEqual([...decodeArray({ data: f.buffer, dtype: "<i4", shape: [2] }).data], [7, -8]);
    assert.deepEqual([...decodeArray({ data: f, dtype: "<i4", shape: [2] }).data], [7, -8]);
  });

  it("decodes a 0-d array and an empty array", () => {
    const scalar = decodeArray({ data: new Float32Array([2]), dtype: "<f4", shape: [] });
    assert.deepEqual([...scalar.data], [2]);
    const empty = decodeArray({ data: new ArrayBuffer(0), dtype: "<f4", shape: [0, 5] });
    assert.equal(empty.data.length, 0);
  });

  it("names the size mismatch", () => {
    assert.throws(
      () => decodeArray({ data: new Float32Array(5), dtype: "<f4", shape: [2, 3] }),
      /shape \[2, 3\] needs 24 bytes, got 20/,
    );
  });

  it("refuses big-endian and unknown dtypes", () => {
    assert.throws(() => parseDtype(">f4"), /big-endian/);
    assert.throws(() => parseDtype("<c8"), /unsupported dtype "<c8"/);
    assert.throws(() => parseDtype(undefined), /dtype must be a string/);
  });

  it("refuses bad shapes", () => {
    assert.throws(() => shapeSize([2, -1]), /bad dimension -1/);
    assert.throws(() => shapeSize("3"), /shape must be an array/);
  });
});

describe("encodeArray", () => {
  it("round-trips through decodeArray", () => {
    const src = new Float32Array([1, 2, 3, 4, 5, 6]).subarray(2);
    const payload = encodeArray(src, [2, 2]);
    assert.equal(payload.dtype, "<f4");
    assert.ok(payload.data instanceof DataView);
    assert.equal(payload.data.byteOffset, 8);
    assert.deepEqual([...decodeArray(payload).data], [3, 4, 5, 6]);
  });

  it("uses NumPy's spelling of one-byte types", () => {
    assert.equal(encodeArray(new Uint8Array(2)).dtype, "|u1");
    assert.equal(encodeArray(new Int8Array(2)).dtype, "|i1");
  });

  it("refuses a shape that does not match", () => {
    assert.throws(() => encodeArray(new Int32Array(3), [2, 2]), /does not match 3 values/);
    assert.throws(() => encodeArray([1, 2, 3]), /can only encode typed arrays/);
  });
});
