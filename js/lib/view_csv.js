// Each view's data as CSV, built in the browser from what the view holds: the
// same columns, in the same order, as the view's `data()` in Python (see
// nbviz.widgets.view_data), so a file saved from the menu reads like the frame
// a notebook gets. Every function takes the view's synced state through `get`
// (a model's `get`) and returns CSV text (lib/export.js `toCsv`). A view whose
// browser side holds less than its table (the projector, the data map) asks the
// kernel for it instead: `fetchTable` (answered by view_data.answer_table_requests).
import { axisLabels, layerExtent } from "./attention_extent.js";
import { toCsv } from "./export.js";
import { decodeArray } from "./wire.js";

/** @typedef {(name: string) => any} Get */

const METRICS = ["zero_frac", "grad_norm", "update_ratio"];

/**
 * LayerBrowser: the table at the step, one row per layer (`LayerBrowser.data()`).
 * @param {Get} get
 * @returns {string}
 */
export function layerTableCsv(get) {
  const rows = /** @type {Array<{name: string, type: string, shape: string, params: number}>} */ (get("layers") ?? []);
  const current = get("current") ?? {};
  const header = ["layer", "type", "shape", "params"];
  /** @type {Array<{values: ArrayLike<number> | null, bad: ArrayLike<number> | null, step: number}>} */
  const cols = METRICS.map((m) => {
    header.push(m, `${m}_step`, `${m}_nonfinite`);
    const entry = current[m];
    if (!entry) return { values: null, bad: null, step: -1 };
    return { values: decodeArray(entry.values).data, bad: decodeArray(entry.nonfinite).data, step: Number(entry.step) };
  });
  const body = rows.map((r, i) => [
    r.name,
    r.type,
    r.shape,
    r.params,
    ...cols.flatMap((c) => [c.values ? Number(c.values[i]) : NaN, c.step, c.bad ? Number(c.bad[i]) : 0]),
  ]);
  return toCsv(header, body);
}

/**
 * Histograms: the histogram at the step, one row per bin (`Histograms.histogram()`).
 * @param {Get} get
 * @returns {string}
 */
export function histogramCsv(get) {
  const header = ["layer", "signal", "step", "bin", "lo", "hi", "count"];
  const cur = get("current");
  if (!cur || !cur.counts) return toCsv(header, []);
  const counts = decodeArray(cur.counts).data;
  const n = counts.length;
  const width = (Number(cur.hi) - Number(cur.lo)) / Math.max(n, 1);
  const edge = (/** @type {number} */ i) => (i === n ? Number(cur.hi) : Number(cur.lo) + i * width);
  const body = [];
  for (let i = 0; i < n; i++) body.push([cur.layer, get("signal"), Number(cur.step), i, edge(i), edge(i + 1), Number(counts[i])]);
  return toCsv(header, body);
}

/**
 * ConfusionMatrix: every cell of the matrix, or in list mode the most-confused
 * pairs (`ConfusionMatrix.data()`); `rate` is the count over the true class's samples.
 * @param {Get} get
 * @returns {string}
 */
export function confusionCsv(get) {
  const header = ["step", "true", "predicted", "true_name", "predicted_name", "count", "rate"];
  const step = Number(get("eval_step"));
  const matrix = get("matrix");
  if (get("mode") !== "matrix" || !matrix || !matrix.counts) {
    const pairs = /** @type {Array<{true: number, pred: number, true_name: string, pred_name: string, count: number, rate: number}>} */ (
      get("confused") ?? []
    );
    return toCsv(header, pairs.map((p) => [step, p.true, p.pred, p.true_name, p.pred_name, p.count, p.rate]));
  }
  const arr = decodeArray(matrix.counts);
  const n = arr.shape[0] || 0;
  const names = /** @type {string[]} */ (get("class_names") ?? []);
  const name = (/** @type {number} */ c) => (c < names.length ? names[c] : String(c));
  const body = [];
  for (let t = 0; t < n; t++) {
    let support = 0;
    for (let p = 0; p < n; p++) support += Number(arr.data[t * n + p]);
    for (let p = 0; p < n; p++) {
      const count = Number(arr.data[t * n + p]);
      body.push([step, t, p, name(t), name(p), count, support > 0 ? count / support : NaN]);
    }
  }
  return toCsv(header, body);
}

const FINDING_COLUMNS = ["id", "check", "layer", "step", "severity", "message", "cause", "root", "advice", "evidence"];

/**
 * HealthReport: the findings, worst first (`HealthReport.data()`).
 * @param {Get} get
 * @returns {string}
 */
export function findingsCsv(get) {
  const rows = /** @type {Array<Record<string, any>>} */ (get("findings") ?? []);
  return toCsv(FINDING_COLUMNS, rows.map((f) => FINDING_COLUMNS.map((c) => f[c] ?? null)));
}

const MODULE_COLUMNS = [
  "name", "type", "parent", "depth", "calls", "self_ms", "total_ms", "pct", "forward_self_ms", "forward_ms",
  "backward_self_ms", "backward_ms", "device_ms", "memory_bytes", "device_memory_bytes", "input_shapes",
];

/**
 * Profiler: the module table of the profile shown, slowest self time first (`Profiler.data()`).
 * @param {Get} get
 * @returns {string}
 */
export function modulesCsv(get) {
  const profile = get("profile") ?? {};
  const rows = [.../** @type {Array<Record<string, any>>} */ (profile.modules ?? [])];
  rows.sort((a, b) => Number(b.self_ms) - Number(a.self_ms) || Number(b.total_ms) - Number(a.total_ms));
  const cell = (/** @type {any} */ v) => (Array.isArray(v) || (v && typeof v === "object") ? JSON.stringify(v) : v);
  return toCsv(MODULE_COLUMNS, rows.map((m) => MODULE_COLUMNS.map((c) => cell(m[c]))));
}

/** Rows at most in the AttentionMaps CSV: a grid of long maps would hang the tab. */
export const ATTENTION_CSV_ROWS = 500_000;

/**
 * The maps the AttentionMaps CSV holds: the one opened large where one is
 * (`selected`), else every map of the grid; and how many rows they make.
 * @param {Get} get
 */
function attentionShown(get) {
  const maps = get("maps");
  if (!maps || !maps.data) return null;
  const arr = decodeArray(maps);
  const [nl, nh] = arr.shape;
  const extents = Array.from({ length: nl }, (_, l) => layerExtent(get, arr.shape, l));
  const sel = /** @type {number[]} */ (get("selected") ?? []);
  const one = sel.length === 2 && sel[0] >= 0 && sel[0] < nl && sel[1] >= 0 && sel[1] < extents[sel[0]].heads;
  /** @type {Array<[number, number]>} */
  const pairs = [];
  if (one) pairs.push([sel[0], sel[1]]);
  else for (let l = 0; l < nl; l++) for (let h = 0; h < extents[l].heads; h++) pairs.push([l, h]);
  const total = pairs.reduce((n, [l]) => n + extents[l].queries * extents[l].keys, 0);
  return { arr, nh, extents, pairs, one, total };
}

/**
 * AttentionMaps: the shown sample's attention, one row per weight, as the view
 * draws it: the map opened large, else every map of the grid; at most `maxRows`
 * rows (see `attentionCsvNote`). `AttentionMaps.data()` in Python gives every
 * map, or one layer's or head's with its arguments.
 * @param {Get} get
 * @param {number} [maxRows]
 * @returns {string}
 */
export function attentionCsv(get, maxRows = ATTENTION_CSV_ROWS) {
  const header = ["step", "sample", "layer", "head", "query", "key", "query_token", "key_token", "weight"];
  const shown = attentionShown(get);
  if (!shown) return toCsv(header, []);
  const { arr, nh, extents, pairs } = shown;
  const [, , nq, nk] = arr.shape;
  const layers = /** @type {string[]} */ (get("layers") ?? []);
  const step = Number(get("shown_step"));
  const sample = Number(get("sample"));
  const body = [];
  for (const [l, h] of pairs) {
    const { queries, keys } = extents[l];
    const labels = axisLabels(get, l, queries, keys);
    const start = (l * nh + h) * nq * nk;
    for (let q = 0; q < queries; q++)
      for (let k = 0; k < keys; k++) {
        if (body.length >= maxRows) return toCsv(header, body);
        body.push([step, sample, layers[l] ?? String(l), h, q, k, labels.queries[q], labels.keys[k], Number(arr.data[start + q * nk + k])]);
      }
  }
  return toCsv(header, body);
}

/**
 * What the menu says of the AttentionMaps CSV: "" when it holds every row of what
 * the view draws, else that it stops at `maxRows` and where the rest is.
 * @param {Get} get
 * @param {number} [maxRows]
 * @returns {string}
 */
export function attentionCsvNote(get, maxRows = ATTENTION_CSV_ROWS) {
  const shown = attentionShown(get);
  if (!shown || shown.total <= maxRows) return "";
  const where = shown.one ? "" : "open one map for its own CSV, or ";
  return (
    `CSV holds the first ${maxRows.toLocaleString("en-US")} of ${shown.total.toLocaleString("en-US")} rows: ` +
    `${where}use AttentionMaps.data(layer=..., head=...) in Python for every weight`
  );
}

/**
 * CSV of a `{type: "table"}` reply: numeric columns in `buffers`, the others as lists.
 * @param {{rows: number, columns: Array<{name: string, values?: any[], buffer?: number, dtype?: string, shape?: number[]}>}} msg
 * @param {DataView[]} buffers
 * @returns {string}
 */
export function messageCsv(msg, buffers) {
  const cols = msg.columns.map((c) =>
    c.values ?? decodeArray({ data: buffers[/** @type {number} */ (c.buffer)], dtype: c.dtype, shape: c.shape }).data,
  );
  const body = [];
  for (let i = 0; i < msg.rows; i++) body.push(cols.map((c) => c[i]));
  return toCsv(msg.columns.map((c) => c.name), body);
}

let requests = 0;

/**
 * The view's `data()` table as CSV, asked of the kernel (a `{type: "table"}` message).
 * Rejects with the kernel's reason where `data()` raised (a reply with `error`), and
 * after `timeoutMs` without an answer (a saved page has no kernel).
 * @param {{send: (content: any) => void, on: Function, off: Function}} model
 * @param {number} [timeoutMs]
 * @returns {Promise<string>}
 */
export function fetchTable(model, timeoutMs = 30_000) {
  requests += 1;
  const request = `table-${requests}`;
  return new Promise((resolve, reject) => {
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    const onMessage = (/** @type {any} */ msg, /** @type {DataView[]} */ buffers) => {
      if (!msg || msg.type !== "table" || msg.request !== request) return;
      done();
      if (msg.error !== undefined) {
        reject(new Error(`the kernel could not give the table: ${String(msg.error)}`));
        return;
      }
      try {
        resolve(messageCsv(msg, buffers ?? []));
      } catch (err) {
        reject(err);
      }
    };
    const done = () => {
      clearTimeout(timer);
      model.off("msg:custom", onMessage);
    };
    timer = setTimeout(() => {
      done();
      reject(new Error("the kernel did not answer (the table needs a live kernel)"));
    }, timeoutMs);
    model.on("msg:custom", onMessage);
    model.send({ type: "table", request });
  });
}
