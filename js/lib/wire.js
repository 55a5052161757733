// The array wire format shared by every nbviz widget.
//
// Python sends an array as a dict trait {data, dtype, shape} (see
// nbviz.widgets.base.array_trait_payload): `data` is raw C-contiguous
// little-endian bytes, which ipywidgets delivers as a binary buffer and the
// widget manager hands to JS as a DataView; `dtype` is a NumPy type string
// ("<f4", "<i8", "|u1", "|b1", ...); `shape` is a list of dimensions.

/**
 * @typedef {Float32Array | Float64Array | Int8Array | Int16Array | Int32Array |
 *   Uint8Array | Uint16Array | Uint32Array | BigInt64Array | BigUint64Array} TypedArray
 */

/**
 * @typedef {object} ArrayPayload
 * @property {DataView | ArrayBuffer | ArrayBufferView} data  raw bytes
 * @property {string} dtype  NumPy type string, e.g. "<f4"
 * @property {number[]} shape  dimensions, row-major (C order)
 */

/**
 * @typedef {object} NdArray
 * @property {TypedArray} data  the values, flattened in C order
 * @property {string} dtype  the dtype string as sent
 * @property {number[]} shape  dimensions
 */

/** @type {Record<string, {size: number, ctor: any}>} */
const KINDS = {
  f4: { size: 4, ctor: Float32Array },
  f8: { size: 8, ctor: Float64Array },
  i1: { size: 1, ctor: Int8Array },
  i2: { size: 2, ctor: Int16Array },
  i4: { size: 4, ctor: Int32Array },
  i8: { size: 8, ctor: BigInt64Array },
  u1: { size: 1, ctor: Uint8Array },
  u2: { size: 2, ctor: Uint16Array },
  u4: { size: 4, ctor: Uint32Array },
  u8: { size: 8, ctor: BigUint64Array },
  b1: { size: 1, ctor: Uint8Array },
};

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Parse a NumPy dtype string into its element size and typed-array constructor.
 * @param {string} dtype
 * @returns {{size: number, ctor: any, kind: string}}
 */
export function parseDtype(dtype) {
  if (typeof dtype !== "string" || dtype.length < 2) {
    throw new TypeError(`nbviz wire: dtype must be a string like "<f4", got ${String(dtype)}`);
  }
  let order = dtype[0];
  let kind = dtype.slice(1);
  if (!"<>|=".includes(order)) {
    order = "=";
    kind = dtype;
  }
  const spec = KINDS[kind];
  if (!spec) {
    throw new TypeError(
      `nbviz wire: unsupported dtype ${JSON.stringify(dtype)}; expected one of ` +
        Object.keys(KINDS).join(", "),
    );
  }
  if (order === ">" && spec.size > 1) {
    throw new TypeError(`nbviz wire: big-endian dtype ${dtype} is not supported; send "<${kind}"`);
  }
  if (!LITTLE_ENDIAN) {
    throw new Error("nbviz wire: this platform is big-endian; the wire format is little-endian");
  }
  return { ...spec, kind };
}

/**
 * View any binary value (DataView, typed array, ArrayBuffer) as a byte range.
 * @param {DataView | ArrayBuffer | ArrayBufferView} data
 * @returns {{buffer: ArrayBufferLike, byteOffset: number, byteLength: number}}
 */
function asBytes(data) {
  if (data instanceof ArrayBuffer) {
    return { buffer: data, byteOffset: 0, byteLength: data.byteLength };
  }
  if (data && ArrayBuffer.isView(data)) {
    return { buffer: data.buffer, byteOffset: data.byteOffset, byteLength: data.byteLength };
  }
  throw new TypeError(
    `nbviz wire: data must be a DataView, typed array or ArrayBuffer, got ${Object.prototype.toString.call(data)}`,
  );
}

/**
 * Number of elements for a shape (1 for a 0-d array).
 * @param {number[]} shape
 * @returns {number}
 */
export function shapeSize(shape) {
  if (!Array.isArray(shape)) {
    throw new TypeError(`nbviz wire: shape must be an array of integers, got ${String(shape)}`);
  }
  let n = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) {
      throw new TypeError(`nbviz wire: shape ${JSON.stringify(shape)} has a bad dimension ${d}`);
    }
    n *= d;
  }
  return n;
}

/**
 * Convert a 64-bit integer array to a Float64Array, refusing values that a
 * JS number cannot hold exactly.
 * @param {BigInt64Array | BigUint64Array} big
 * @returns {Float64Array}
 */
export function int64ToNumbers(big) {
  const out = new Float64Array(big.length);
  const max = BigInt(Number.MAX_SAFE_INTEGER);
  for (let i = 0; i < big.length; i++) {
    const v = big[i];
    if (v > max || v < -max) {
      throw new RangeError(
        `nbviz wire: int64 value ${v} at index ${i} is outside +-2^53; decode with {int64: "bigint"}`,
      );
    }
    out[i] = Number(v);
  }
  return out;
}

/**
 * Decode an array payload into a typed array over the same memory when it is
 * aligned (the usual case), or over an aligned copy when it is not.
 *
 * 64-bit integers come back as a Float64Array of exact integer values (a
 * RangeError names the first value beyond +-2^53), or as a BigInt64Array /
 * BigUint64Array with `{int64: "bigint"}`.
 *
 * @param {ArrayPayload} payload
 * @param {{int64?: "number" | "bigint"}} [options]
 * @returns {NdArray}
 */
export function decodeArray(payload, options = {}) {
  if (!payload || typeof payload !== "object") {
    throw new TypeError(`nbviz wire: expected {data, dtype, shape}, got ${String(payload)}`);
  }
  const { dtype, shape } = payload;
  const spec = parseDtype(dtype);
  const count = shapeSize(shape);
  const bytes = asBytes(payload.data);
  if (bytes.byteLength !== count * spec.size) {
    throw new RangeError(
      `nbviz wire: ${dtype} array of shape [${shape.join(", ")}] needs ` +
        `${count * spec.size} bytes, got ${bytes.byteLength}`,
    );
  }
  let data;
  if (bytes.byteOffset % spec.size === 0) {
    data = new spec.ctor(bytes.buffer, bytes.byteOffset, count);
  } else {
    const copy = new Uint8Array(bytes.byteLength);
    copy.set(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    data = new spec.ctor(copy.buffer, 0, count);
  }
  if (spec.size === 8 && spec.kind !== "f8" && options.int64 !== "bigint") {
    data = int64ToNumbers(data);
  }
  return { data, dtype, shape: [...shape] };
}

/** @type {Array<[any, string]>} */
const DTYPE_OF = [
  [Float32Array, "<f4"],
  [Float64Array, "<f8"],
  [Int8Array, "|i1"],
  [Int16Array, "<i2"],
  [Int32Array, "<i4"],
  [BigInt64Array, "<i8"],
  [Uint8Array, "|u1"],
  [Uint16Array, "<u2"],
  [Uint32Array, "<u4"],
  [BigUint64Array, "<u8"],
];

/**
 * Encode a typed array as a payload to send to Python (model.set + save_changes);
 * nbviz.widgets.base.array_from_payload turns it back into an ndarray.
 * @param {TypedArray} values
 * @param {number[]} [shape]  defaults to [values.length]
 * @returns {{data: DataView, dtype: string, shape: number[]}}
 */
export function encodeArray(values, shape = [values.length]) {
  const entry = DTYPE_OF.find(([ctor]) => values instanceof ctor);
  if (!entry) {
    throw new TypeError(
      `nbviz wire: can only encode typed arrays, got ${Object.prototype.toString.call(values)}`,
    );
  }
  if (shapeSize(shape) !== values.length) {
    throw new RangeError(
      `nbviz wire: shape [${shape.join(", ")}] does not match ${values.length} values`,
    );
  }
  const data = new DataView(values.buffer, values.byteOffset, values.byteLength);
  return { data, dtype: entry[1], shape: [...shape] };
}

/**
 * Index of element (i, j) of a 2-d array in C order.
 * @param {NdArray} array
 * @param {number} i
 * @param {number} j
 * @returns {number}
 */
export function index2d(array, i, j) {
  return i * array.shape[1] + j;
}
