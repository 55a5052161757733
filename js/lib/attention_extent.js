// AttentionMaps sends every layer's maps in one (layers, heads, queries, keys) array,
// padded to the longest; each layer's own extent (an encoder-decoder's cross-attention
// is target x source) and the labels of its queries and keys come beside it.

/** @typedef {(key: string) => any} Get */

/**
 * A layer's own heads, queries and keys within the padded `shape`.
 * @param {Get} get
 * @param {number[]} shape
 * @param {number} layer
 * @returns {{heads: number, queries: number, keys: number}}
 */
export function layerExtent(get, shape, layer) {
  const [, nh, nq, nk] = shape;
  const e = (get("extents") ?? [])[layer];
  if (Array.isArray(e) && e.length === 3) {
    return { heads: Math.min(e[0], nh), queries: Math.min(e[1], nq), keys: Math.min(e[2], nk) };
  }
  return { heads: nh, queries: nq, keys: nk };
}

/**
 * The labels of a layer's queries and keys: the view's `axis_tokens`, else (a payload
 * without them) the shown sample's tokens, else the positions.
 * @param {Get} get
 * @param {number} layer
 * @param {number} queries
 * @param {number} keys
 * @returns {{queries: string[], keys: string[], same: boolean}}
 */
export function axisLabels(get, layer, queries, keys) {
  const pair = (get("axis_tokens") ?? [])[layer];
  let q, k;
  if (Array.isArray(pair) && pair.length === 2 && pair[0]?.length === queries && pair[1]?.length === keys) {
    q = pair[0].map(String);
    k = pair[1].map(String);
  } else {
    const tokens = /** @type {string[]} */ (get("tokens") ?? []);
    const pick = (/** @type {number} */ n) => Array.from({ length: n }, (_, i) => (i < tokens.length ? String(tokens[i]) : String(i)));
    q = pick(queries);
    k = pick(keys);
  }
  // one sequence attending to itself: one strip of tokens serves for both
  const same = queries === keys && q.every((t, i) => t === k[i]);
  return { queries: q, keys: k, same };
}
