// AttentionMaps: a layer x head grid of one probe sample's attention maps at the
// capture in view, a slider over the captures, each head's entropy over training
// (collapsed and uniform heads marked) and its output rms at the capture in view
// (in each map's title and over the large one), and a chosen map opened large with its
// tokens: a click on a row (a query) or on a token colours what that token attends to.
import { axisLabels, layerExtent } from "./lib/attention_extent.js";
import { rgbToCss, viridis } from "./lib/color.js";
import { el, fillSelect, on, select } from "./lib/dom.js";
import { exportMenu } from "./lib/export.js";
import { formatNumber, formatStep } from "./lib/format.js";
import { bindCells, drawHeatmap } from "./lib/heatmap.js";
import { makeScale, sizeCanvas, themeColors } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { guard, present, viewState } from "./lib/state.js";
import { snapIndex } from "./lib/steps.js";
import { attentionCsv, attentionCsvNote } from "./lib/view_csv.js";
import { decodeArray } from "./lib/wire.js";

const CELL = 72; // px per map in the grid
const BIG = 300; // px of the opened map
const CHART_W = 380;
const CHART_H = 170;

/**
 * One map of a (layers, heads, queries, keys) array, scaled to its own maximum: its
 * first `queries` rows and `keys` columns (the layer's own extent; default all).
 * @param {ArrayLike<number>} data
 * @param {number[]} shape
 * @param {number} layer
 * @param {number} head
 * @param {{queries: number, keys: number}} [extent]
 * @returns {{values: Float32Array, raw: Float32Array, max: number, rows: number, cols: number}}
 */
export function mapOf(data, shape, layer, head, extent) {
  const [, heads, q, k] = shape;
  const rows = Math.min(extent?.queries ?? q, q);
  const cols = Math.min(extent?.keys ?? k, k);
  const start = (layer * heads + head) * q * k;
  const raw = new Float32Array(rows * cols);
  let max = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = data[start + r * k + c];
      raw[r * cols + c] = v;
      if (v > max) max = v;
    }
  }
  const values = new Float32Array(rows * cols);
  for (let i = 0; i < values.length; i++) values[i] = max > 0 ? raw[i] / max : 0;
  return { values, raw, max, rows, cols };
}

/**
 * Canvas size of a `rows` x `cols` map whose longer side is `side` px (square cells).
 * @param {number} rows
 * @param {number} cols
 * @param {number} side
 */
export function mapSize(rows, cols, side) {
  if (rows <= 0 || cols <= 0) return { width: side, height: side };
  return rows >= cols
    ? { width: Math.max(Math.round((side * cols) / rows), 8), height: side }
    : { width: side, height: Math.max(Math.round((side * rows) / cols), 8) };
}

/**
 * The flags line: heads marked at the last capture, grouped by mark, every head of a
 * layer (or of the model) said once rather than one by one.
 * @param {string[]} flags per layer*heads
 * @param {string[]} names
 * @param {number} heads
 * @param {number[]} [ownHeads] per layer, its own number of heads
 * @returns {string}
 */
export function flagsText(flags, names, heads, ownHeads = []) {
  /** @type {Map<string, Array<{layer: number, head: number}>>} */
  const byFlag = new Map();
  flags.forEach((f, i) => {
    if (!f) return;
    const entry = { layer: Math.floor(i / heads), head: i % heads };
    byFlag.set(f, [...(byFlag.get(f) ?? []), entry]);
  });
  const layers = names.length;
  const total = Array.from({ length: layers }, (_, l) => ownHeads[l] ?? heads).reduce((a, b) => a + b, 0);
  const parts = [];
  for (const [flag, marked] of byFlag) {
    if (marked.length === total && total > 1) {
      parts.push(`${flag}: every head (${total})`);
      continue;
    }
    const said = [];
    for (let l = 0; l < layers; l++) {
      const own = marked.filter((m) => m.layer === l).map((m) => m.head);
      if (!own.length) continue;
      const all = own.length === (ownHeads[l] ?? heads) && own.length > 1;
      said.push(all ? `${names[l]} every head` : `${names[l]} head${own.length > 1 ? "s" : ""} ${own.join(", ")}`);
    }
    const shown = said.slice(0, 8).join("; ");
    parts.push(`${flag}: ${shown}${said.length > 8 ? `; and ${said.length - 8} more layers` : ""}`);
  }
  return parts.length ? `At the last capture: ${parts.join(" | ")}` : "";
}

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-attention");
  const slider = /** @type {HTMLInputElement} */ (
    el("input", { class: "nbviz-attn-slider", attrs: { type: "range", min: 0, max: 0, step: 1, "aria-label": "capture step" } })
  );
  const stepLabel = el("span", { class: "nbviz-attn-step" });
  const sampleSelect = select("nbviz-attn-sample", "sample");
  const flagsLine = el("div", { class: "nbviz-attn-flags" });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, ["capture ", slider]),
    stepLabel,
    el("label", {}, ["sample ", sampleSelect]),
  ]);
  const grid = el("div", { class: "nbviz-attn-grid" });
  const chart = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-attn-entropy" }));
  const chartCaption = el("div", { class: "nbviz-attn-caption" });
  const bigTitle = el("div", { class: "nbviz-hist-title nbviz-attn-bigtitle" });
  const big = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-attn-big" }));
  const menu = exportMenu({
    name: "attention_maps",
    csv: () => {
      const get = (/** @type {string} */ k) => model.get(k);
      return { text: attentionCsv(get), note: attentionCsvNote(get) };
    },
    png: () => [
      ...[...grid.querySelectorAll("canvas")].map((canvas) => ({ canvas, title: canvas.getAttribute("title") ?? "" })),
      ...(model.get("selected")?.length ? [{ canvas: big, title: bigTitle.textContent ?? "" }] : []),
      { canvas: chart, title: "entropy per head over training (0: one token, 1: uniform)" },
    ],
  });
  toolbar.append(menu.node);
  const bigCaption = el("div", { class: "nbviz-attn-caption nbviz-attn-readout" });
  const tokenStrip = el("div", { class: "nbviz-attn-tokens" });
  const tokenCaption = el("div", { class: "nbviz-attn-caption nbviz-attn-token-caption" });
  const detail = el("div", { class: "nbviz-attn-detail" }, [bigTitle, big, bigCaption, tokenStrip, tokenCaption]);
  const body = el("div", { class: "nbviz-attn" }, [
    toolbar,
    flagsLine,
    el("div", { class: "nbviz-attn-main" }, [
      grid,
      el("div", {}, [el("div", { class: "nbviz-hist-title", text: "entropy per head over training (0: one token, 1: uniform)" }), chart, chartCaption]),
      detail,
    ]),
  ]);

  const get = (/** @type {string} */ k) => model.get(k);
  /** @type {{data: ArrayLike<number>, shape: number[]} | null} */
  let maps = null;
  /** @type {{data: ArrayLike<number>, shape: number[]} | null} */
  let entropy = null;
  /** @type {any} */
  let outputRms = null;
  /** @type {ArrayLike<number>} */
  let steps = [];
  /** @type {((e: {clientX: number, clientY: number}) => ({row: number, col: number} | null)) | null} */
  let bigCells = null;

  const decode = () => {
    const m = model.get("maps");
    maps = m && m.data ? decodeArray(m) : null;
    const e = model.get("entropy");
    entropy = e && e.data ? decodeArray(e) : null;
    const r = model.get("output_rms");
    outputRms = r && r.data ? decodeArray(r) : null;
    const s = model.get("capture_steps");
    steps = s && s.data ? decodeArray(s).data : [];
  };

  const selected = () => {
    const sel = model.get("selected") || [];
    if (!maps || sel.length !== 2) return null;
    const [layer, head] = sel;
    if (layer < 0 || layer >= maps.shape[0] || head < 0) return null;
    const extent = layerExtent(get, maps.shape, layer);
    if (head >= extent.heads) return null;
    return { layer, head, extent, labels: axisLabels(get, layer, extent.queries, extent.keys) };
  };

  // a head's entropy and output rms at the capture in view, as text ("" when neither is known)
  const headText = (/** @type {number} */ l, /** @type {number} */ h) => {
    const i = Array.prototype.indexOf.call(steps, model.get("shown_step"));
    if (i < 0 || !entropy) return "";
    const [, heads, n] = entropy.shape;
    const at = (/** @type {any} */ a) => (a ? a.data[(l * heads + h) * n + i] : NaN);
    const parts = [];
    if (Number.isFinite(at(entropy))) parts.push(`entropy ${formatNumber(at(entropy))}`);
    if (Number.isFinite(at(outputRms))) parts.push(`output rms ${formatNumber(at(outputRms))}`);
    return parts.join(", ");
  };

  const drawGrid = () => {
    grid.replaceChildren();
    if (!maps) return;
    const [layers, heads] = maps.shape;
    const names = /** @type {string[]} */ (model.get("layers") || []);
    const flags = /** @type {string[]} */ (model.get("flags") || []);
    const sel = selected();
    grid.style.gridTemplateColumns = `auto repeat(${heads}, ${CELL + 4}px)`;
    grid.append(el("span"));
    for (let h = 0; h < heads; h++) grid.append(el("span", { class: "nbviz-attn-colname", text: `head ${h}` }));
    for (let l = 0; l < layers; l++) {
      grid.append(el("span", { class: "nbviz-attn-rowname", text: names[l] ?? `layer ${l}`, attrs: { title: names[l] ?? "" } }));
      const extent = layerExtent(get, maps.shape, l);
      for (let h = 0; h < heads; h++) {
        if (h >= extent.heads) {
          grid.append(el("span", { class: "nbviz-attn-nohead", attrs: { title: `${names[l] ?? ""} has ${extent.heads} heads` } }));
          continue;
        }
        const flag = flags[l * heads + h];
        const canvas = /** @type {HTMLCanvasElement} */ (
          el("canvas", {
            class: ["nbviz-attn-cell", flag ? `nbviz-${flag}` : ""],
            attrs: {
              "data-layer": l,
              "data-head": h,
              "data-queries": extent.queries,
              "data-keys": extent.keys,
              title: [`${names[l] ?? ""} head ${h}${flag ? ` (${flag})` : ""}`, headText(l, h)].filter(Boolean).join(": "),
            },
          })
        );
        if (sel && sel.layer === l && sel.head === h) canvas.classList.add("nbviz-selected");
        const { values, rows, cols } = mapOf(maps.data, maps.shape, l, h, extent);
        drawHeatmap(canvas, values, { rows, cols, ...mapSize(rows, cols, CELL), scale: (v) => viridis(Math.sqrt(v)) });
        canvas.addEventListener("click", () => save(model, { selected: [l, h], query: -1 }));
        grid.append(canvas);
      }
    }
  };

  const drawChart = () => {
    const ctx = sizeCanvas(chart, CHART_W, CHART_H);
    const colors = themeColors(root);
    if (!entropy || !steps.length) return;
    const [layers, heads, n] = entropy.shape;
    const left = 30;
    const sx = makeScale(steps[0], steps[n - 1] > steps[0] ? steps[n - 1] : steps[0] + 1, left, CHART_W - 6).map;
    const sy = makeScale(0, 1, CHART_H - 16, 6).map;
    ctx.strokeStyle = colors.muted;
    ctx.fillStyle = colors.muted;
    ctx.font = "10px sans-serif";
    for (const v of [0, 0.5, 1]) {
      ctx.fillText(String(v), 4, sy(v) + 3);
      ctx.globalAlpha = 0.25;
      ctx.beginPath();
      ctx.moveTo(left, sy(v));
      ctx.lineTo(CHART_W - 6, sy(v));
      ctx.stroke();
      ctx.globalAlpha = 1;
    }
    const flags = /** @type {string[]} */ (model.get("flags") || []);
    const sel = selected();
    /** @param {number} l @param {number} h @param {string} stroke @param {number} width */
    const line = (l, h, stroke, width) => {
      ctx.strokeStyle = stroke;
      ctx.lineWidth = width;
      ctx.beginPath();
      let started = false;
      for (let i = 0; i < n; i++) {
        const v = entropy.data[(l * heads + h) * n + i];
        if (!Number.isFinite(v)) continue;
        const x = sx(steps[i]);
        const y = sy(v);
        if (started) ctx.lineTo(x, y);
        else ctx.moveTo(x, y);
        started = true;
        if (n === 1) ctx.arc(x, y, 2, 0, 2 * Math.PI);
      }
      ctx.stroke();
    };
    for (let l = 0; l < layers; l++) {
      for (let h = 0; h < heads; h++) {
        const flag = flags[l * heads + h];
        line(l, h, flag === "collapsed" ? "#c62828" : flag === "uniform" ? "#1565c0" : "rgba(120,120,120,0.5)", 1);
      }
    }
    if (sel) line(sel.layer, sel.head, "#d81b60", 2.5);
    const shown = model.get("shown_step");
    if (shown >= 0) {
      ctx.strokeStyle = "#d81b60";
      ctx.lineWidth = 1;
      ctx.setLineDash([3, 3]);
      ctx.beginPath();
      ctx.moveTo(sx(shown), 4);
      ctx.lineTo(sx(shown), CHART_H - 14);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    ctx.fillStyle = colors.muted;
    ctx.fillText(`step ${formatStep(steps[0])}`, left, CHART_H - 2);
    const lastText = `step ${formatStep(steps[n - 1])}`;
    ctx.fillText(lastText, CHART_W - 6 - ctx.measureText(lastText).width, CHART_H - 2);
    chartCaption.textContent = sel
      ? `pink: ${(model.get("layers") || [])[sel.layer] ?? ""} head ${sel.head}; red dashed: collapsed, blue dashed: uniform`
      : "red: collapsed heads, blue: uniform heads; click a map to follow one head";
  };

  /**
   * A strip of token spans; `weights` colours them (a query's attention), `pick` is what
   * a click on position j does.
   * @param {string[]} labels
   * @param {{weights?: Float32Array | null, query?: number, pick: (j: number) => void, title: (j: number) => string}} opts
   */
  const strip = (labels, opts) => {
    let rowMax = 0;
    if (opts.weights) for (const w of opts.weights) rowMax = Math.max(rowMax, w);
    return labels.map((text, j) => {
      const span = el("span", {
        class: ["nbviz-attn-token", j === opts.query ? "nbviz-query" : ""],
        text,
        attrs: { "data-pos": j, title: opts.title(j) },
      });
      if (opts.weights && rowMax > 0) span.style.background = rgbToCss([216, 27, 96], 0.08 + 0.8 * (opts.weights[j] / rowMax));
      span.addEventListener("click", () => opts.pick(j));
      return span;
    });
  };

  const drawDetail = () => {
    const sel = selected();
    detail.style.display = sel ? "" : "none";
    bigCells = null;
    if (!sel || !maps) return;
    const names = /** @type {string[]} */ (model.get("layers") || []);
    const { values, raw, rows: q, cols: k } = mapOf(maps.data, maps.shape, sel.layer, sel.head, sel.extent);
    const { queries: qLabels, keys: kLabels, same } = sel.labels;
    const query = model.get("query");
    const stats = headText(sel.layer, sel.head);
    bigTitle.textContent = `${names[sel.layer] ?? ""}, head ${sel.head} (step ${formatStep(model.get("shown_step"))}${stats ? `; ${stats}` : ""}): rows are ${q} queries, columns ${k} keys`;
    const size = mapSize(q, k, BIG);
    const drawn = drawHeatmap(big, values, { rows: q, cols: k, ...size, scale: (v) => viridis(Math.sqrt(v)) });
    bigCells = drawn.cellFromEvent;
    const chosen = query >= 0 && query < q;
    if (chosen) {
      const ctx = /** @type {CanvasRenderingContext2D} */ (big.getContext("2d"));
      ctx.strokeStyle = "#d81b60";
      ctx.lineWidth = 2;
      ctx.strokeRect(1, (query * size.height) / q, size.width - 2, Math.max(size.height / q, 2));
    }
    // the keys, coloured by the chosen query's attention
    const weights = chosen ? raw.subarray(query * k, query * k + k) : null;
    const pickQuery = (/** @type {number} */ j) => save(model, { query: j });
    if (same) {
      tokenStrip.replaceChildren(
        ...strip(kLabels, {
          weights,
          query,
          pick: pickQuery,
          title: (j) => (weights ? `weight ${formatNumber(weights[j])}` : "click: what this token attends to"),
        }),
      );
    } else {
      // queries and keys are two sequences (a decoder attending to its source)
      tokenStrip.replaceChildren(
        el("div", { class: "nbviz-attn-strip nbviz-attn-queries" }, [
          el("span", { class: "nbviz-attn-striplabel", text: "queries: " }),
          ...strip(qLabels, { query, pick: pickQuery, title: () => "click: what this query attends to" }),
        ]),
        el("div", { class: "nbviz-attn-strip nbviz-attn-keys" }, [
          el("span", { class: "nbviz-attn-striplabel", text: "keys: " }),
          ...strip(kLabels, {
            weights,
            pick: () => {},
            title: (j) => (weights ? `weight ${formatNumber(weights[j])}` : "a key: pick a query above"),
          }),
        ]),
      );
      for (const span of tokenStrip.querySelectorAll(".nbviz-attn-keys .nbviz-attn-token")) span.classList.add("nbviz-attn-key");
    }
    tokenCaption.textContent = chosen
      ? `what "${qLabels[query] ?? query}" (position ${query}) attends to: darker is more`
      : same
        ? "click a row of the map or a token to see what it attends to"
        : "click a row of the map or a query to see which keys it attends to";
  };

  const draw = guard(root, "Drawing the attention maps", () => {
    if (!present(root, body, viewState(model))) return;
    const n = steps.length;
    slider.max = String(Math.max(n - 1, 0));
    slider.disabled = n <= 1;
    const shown = model.get("shown_step");
    if (n) slider.value = String(Math.max(snapIndex(steps, model.get("step")), 0));
    stepLabel.textContent = shown >= 0 ? `step ${formatStep(shown)} (capture ${Number(slider.value) + 1} of ${n})` : "no capture at or before this step";
    const samples = model.get("samples") || 0;
    fillSelect(sampleSelect, Array.from({ length: samples }, (_, i) => [String(i), String(i)]));
    sampleSelect.value = String(model.get("sample"));
    const flags = /** @type {string[]} */ (model.get("flags") || []);
    const names = /** @type {string[]} */ (model.get("layers") || []);
    const heads = maps ? maps.shape[1] : 1;
    const own = maps ? names.map((_, l) => layerExtent(get, /** @type {number[]} */ (maps?.shape), l).heads) : [];
    flagsLine.textContent = flagsText(flags, names, heads, own);
    drawGrid();
    drawChart();
    drawDetail();
  });

  const stops = [
    on(slider, "input", () => {
      const i = Number(slider.value);
      if (i >= 0 && i < steps.length) save(model, { step: steps[i] });
    }),
    on(sampleSelect, "change", () => save(model, { sample: Number(sampleSelect.value), query: -1 })),
    bindCells(big, () => bigCells, {
      hover: (cell) => {
        const sel = selected();
        if (!cell || !sel || !maps) {
          bigCaption.textContent = "";
          return;
        }
        const { raw, cols } = mapOf(maps.data, maps.shape, sel.layer, sel.head, sel.extent);
        const w = raw[cell.row * cols + cell.col];
        const { queries, keys } = sel.labels;
        bigCaption.textContent = `"${queries[cell.row] ?? cell.row}" \u2192 "${keys[cell.col] ?? cell.col}": ${formatNumber(w)}; click to pick this query`;
      },
      leave: () => {
        bigCaption.textContent = "";
      },
      click: (cell) => save(model, { query: cell.row }),
    }),
    listen(model, ["maps", "entropy", "output_rms", "capture_steps"], () => {
      decode();
      draw();
    }),
    listen(model, ["step", "shown_step", "sample", "selected", "query", "tokens", "extents", "axis_tokens", "layers", "flags", "samples", "empty", "error"], draw),
  ];
  decode();
  draw();
  return () => {
    for (const stop of stops) stop();
    menu.dispose();
  };
}

export default { render };
