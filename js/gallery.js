// SampleGallery: a page of cards, one per sample id: the sample as logged (PNG
// thumbnail, text, or the first values of an array row) with its true label,
// the prediction, the confidence and the loss. Sorting and paging are done by
// Python (only the page in view travels); every text goes in with textContent.
// Clicking a card sets `detail_id`; Python answers with `detail` and the panel
// above the cards shows the sample at full size, its top-k class probabilities,
// its recorded unit summary and its captured activations (unit means per layer
// and, for convolutions, the feature maps channel by channel).
import { sequentialScale } from "./lib/color.js";
import { el, message } from "./lib/dom.js";
import { formatNumber } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { decodeArray } from "./lib/wire.js";

/**
 * Bytes of a binary trait value (DataView from the widget manager, or a typed array).
 * @param {any} data
 * @returns {Uint8Array | null}
 */
export function bytesOf(data) {
  if (!data) return null;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

/**
 * One line of a card: "label value", the value in its own span.
 * @param {string} label
 * @param {string} value
 * @param {string} [cls]
 */
function line(label, value, cls) {
  return el("div", { class: "nbviz-gallery-line", attrs: { title: `${label} ${value}` } }, [
    el("span", { class: "nbviz-muted", text: `${label} ` }),
    el("span", { class: cls ?? "", text: value }),
  ]);
}

/**
 * The rows of the top-k table: class name, probability as text, bar width in %.
 * @param {Array<{class: number, name: string, p: number}>} topK
 * @returns {Array<{name: string, text: string, width: string, cls: number}>}
 */
export function topKRows(topK) {
  return (topK || []).map((t) => {
    const p = Number.isFinite(t.p) ? Math.min(Math.max(t.p, 0), 1) : 0;
    return { name: t.name ?? String(t.class), text: `${(100 * p).toFixed(p >= 0.1 || p === 0 ? 1 : 2)}%`, width: `${(100 * p).toFixed(1)}%`, cls: t.class };
  });
}

/**
 * Finite minimum and maximum of `data[offset .. offset + size)` ([0, 0] if none).
 * @param {ArrayLike<number>} data
 * @param {number} [offset]
 * @param {number} [size]
 * @returns {[number, number]}
 */
export function finiteRange(data, offset = 0, size = data.length - offset) {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = offset; i < offset + size; i++) {
    const v = data[i];
    if (Number.isFinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return lo <= hi ? [lo, hi] : [0, 0];
}

/**
 * The info lines of a sample's detail, as [label, value] pairs.
 * @param {any} d  the `detail` trait
 * @returns {Array<[string, string]>}
 */
export function detailLines(d) {
  /** @type {Array<[string, string]>} */
  const out = [["id", `#${d.id}`]];
  if (d.label !== undefined) out.push(["true", d.label_name ?? String(d.label)]);
  if (d.evaluated) {
    out.push(["pred", d.pred_name ?? String(d.pred)]);
    out.push(["confidence", formatNumber(d.confidence)]);
    out.push(["loss", formatNumber(d.loss)]);
    out.push(["step", String(d.step)]);
  }
  if (d.shape) out.push(["shape", `[${d.shape.join(", ")}]`]);
  return out;
}

/**
 * A layer's summary line: name, type, shape and its statistics for this sample.
 * @param {any} layer  one entry of detail.activations.layers
 * @returns {string}
 */
export function layerLine(layer) {
  const stat = (/** @type {string} */ k, /** @type {number | null} */ v) => (v === null || v === undefined ? "" : `${k} ${formatNumber(v)}`);
  const zero = layer.zero_frac === null || layer.zero_frac === undefined ? "" : `zero ${(100 * layer.zero_frac).toFixed(0)}%`;
  return [
    layer.layer,
    layer.type,
    `[${(layer.shape || []).join(", ")}]`,
    stat("mean", layer.mean),
    stat("std", layer.std),
    stat("min", layer.min),
    stat("max", layer.max),
    zero,
    layer.note,
  ]
    .filter(Boolean)
    .join(" \u00b7 ");
}

/**
 * Bars of per-unit values around a zero baseline (negative values hang below it).
 * @param {HTMLCanvasElement} canvas
 * @param {ArrayLike<number>} values
 * @param {{width?: number, height?: number}} [options]
 */
function drawUnitBars(canvas, values, options = {}) {
  const width = options.width ?? Math.min(640, Math.max(160, values.length * 4));
  const height = options.height ?? 60;
  canvas.width = width;
  canvas.height = height;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext && canvas.getContext("2d");
  if (!ctx) return;
  const [lo, hi] = finiteRange(values);
  const top = Math.max(hi, 0);
  const bottom = Math.min(lo, 0);
  const span = top - bottom || 1;
  const zeroY = (top / span) * (height - 2) + 1;
  const w = width / Math.max(values.length, 1);
  ctx.clearRect(0, 0, width, height);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) continue;
    const h = (Math.abs(v) / span) * (height - 2);
    ctx.fillStyle = v >= 0 ? "#0072b2" : "#d55e00";
    ctx.fillRect(i * w, v >= 0 ? zeroY - h : zeroY, Math.max(w - 0.5, 0.5), h);
  }
  ctx.fillStyle = "#9e9e9e";
  ctx.fillRect(0, zeroY, width, 0.5);
}

/**
 * One feature map as a small pixelated canvas, coloured over the layer's range.
 * @param {ArrayLike<number>} data  (channels, h, w) row-major
 * @param {number} c
 * @param {number} h
 * @param {number} w
 * @param {(v: number) => number[]} scale
 */
function mapCanvas(data, c, h, w, scale) {
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-gallery-map", attrs: { title: `channel ${c}` } }));
  canvas.width = w;
  canvas.height = h;
  const px = Math.max(2, Math.floor(48 / Math.max(h, w)));
  canvas.style.width = `${w * px}px`;
  canvas.style.height = `${h * px}px`;
  const ctx = canvas.getContext && canvas.getContext("2d");
  if (!ctx) return canvas;
  const image = ctx.createImageData(w, h);
  for (let i = 0; i < h * w; i++) {
    const rgb = scale(data[c * h * w + i]);
    image.data[4 * i] = rgb[0];
    image.data[4 * i + 1] = rgb[1];
    image.data[4 * i + 2] = rgb[2];
    image.data[4 * i + 3] = 255;
  }
  ctx.putImageData(image, 0, 0);
  return canvas;
}

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-gallery");
  const count = el("span", { class: "nbviz-gallery-count" });
  const sortSelect = /** @type {HTMLSelectElement} */ (
    el("select", { class: "nbviz-gallery-sort", attrs: { "aria-label": "sort by" } }, [
      el("option", { text: "given order", attrs: { value: "given" } }),
      el("option", { text: "loss", attrs: { value: "loss" } }),
      el("option", { text: "confidence", attrs: { value: "confidence" } }),
    ])
  );
  const direction = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-direction", attrs: { type: "button" } })
  );
  const prev = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-prev", text: "\u2039 prev", attrs: { type: "button" } })
  );
  const next = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-next", text: "next \u203a", attrs: { type: "button" } })
  );
  const pageText = el("span", { class: "nbviz-gallery-page" });
  const evalText = el("span", { class: "nbviz-notice nbviz-gallery-eval" });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    count,
    el("label", {}, ["sort by", sortSelect]),
    direction,
    el("span", {}, [prev, " ", pageText, " ", next]),
    evalText,
  ]);
  const note = el("div", { class: "nbviz-notice nbviz-gallery-note" });
  const detailBox = el("div", { class: "nbviz-gallery-detail", style: { display: "none" } });
  const grid = el("div", { class: "nbviz-gallery-grid" });
  const body = el("div", {}, [toolbar, note, detailBox, grid]);

  /** @type {string[]} */
  let urls = [];
  const releaseUrls = () => {
    for (const u of urls) URL.revokeObjectURL(u);
    urls = [];
  };

  /** @type {string[]} */
  let detailUrls = [];

  const drawDetail = () => {
    for (const u of detailUrls) URL.revokeObjectURL(u);
    detailUrls = [];
    const d = model.get("detail") || {};
    if (d.id === undefined || d.id === null || d.id < 0) {
      detailBox.style.display = "none";
      detailBox.replaceChildren();
      return;
    }
    detailBox.style.display = "";
    detailBox.setAttribute("data-id", String(d.id));
    const close = el("button", { class: "nbviz-gallery-detail-close", text: "\u00d7 close", attrs: { type: "button", title: "close the detail" } });
    close.addEventListener("click", () => save(model, { detail_id: -1 }));
    const parts = [];
    if (d.kind === "image") {
      const bytes = bytesOf(d.png);
      if (bytes) {
        const url = URL.createObjectURL(new Blob([bytes.slice()], { type: "image/png" }));
        detailUrls.push(url);
        parts.push(el("img", { class: "nbviz-gallery-big", attrs: { src: url, alt: `sample ${d.id}` } }));
      }
    } else if (d.kind === "text") {
      parts.push(el("pre", { class: "nbviz-gallery-text nbviz-gallery-detail-text", text: d.text ?? "" }));
    } else if (d.kind === "array" && d.values) {
      const values = Array.from(decodeArray(d.values).data, (v) => formatNumber(Number(v)));
      const more = d.size > values.length ? ` \u2026 (${d.size} values)` : "";
      parts.push(el("div", { class: "nbviz-gallery-values", text: `[${values.join(", ")}${more}]` }));
    }
    const info = el(
      "div",
      { class: "nbviz-gallery-detail-info" },
      detailLines(d).map(([k, v]) => line(k, v, k === "pred" && d.label !== undefined && d.pred !== d.label ? "nbviz-gallery-pred-wrong" : "")),
    );
    if (d.missing) info.append(el("div", { class: "nbviz-muted", text: d.missing }));
    const rows = topKRows(d.top_k);
    const topBox = el("div", { class: "nbviz-gallery-topk-box" }, [el("div", { class: "nbviz-lb-chart-title", text: "top classes" })]);
    if (rows.length) {
      topBox.append(
        el(
          "table",
          { class: "nbviz-gallery-topk" },
          rows.map((r) =>
            el("tr", { attrs: { "data-class": r.cls } }, [
              el("td", { text: r.name, attrs: { title: r.name } }),
              el("td", { text: r.text }),
              el("td", { style: { width: "120px" } }, [el("div", { class: "nbviz-gallery-bar", style: { width: r.width } })]),
            ]),
          ),
        ),
      );
    } else {
      topBox.append(el("div", { class: "nbviz-muted", text: d.top_k_note || "no class probabilities" }));
    }
    const bar = el("div", { class: "nbviz-gallery-detail-bar" }, [
      el("span", { class: "nbviz-lb-chart-title", text: `sample #${d.id}` }),
      close,
    ]);
    const head = el("div", { class: "nbviz-gallery-detail-head" }, [...parts, info, topBox]);
    const sections = [bar, head];
    if (d.units && d.units.values) {
      const values = decodeArray(d.units.values).data;
      const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-gallery-units" }));
      drawUnitBars(canvas, values);
      sections.push(
        el("div", { class: "nbviz-gallery-layer" }, [
          el("div", { class: "nbviz-lb-chart-title", text: `units of ${d.units.layer} (mean over positions, evaluation of step ${d.units.step})` }),
          canvas,
        ]),
      );
    }
    const acts = d.activations;
    if (acts && acts.layers) {
      const layers = el("div", { class: "nbviz-gallery-layers" });
      for (const layer of acts.layers) {
        const box = el("div", { class: "nbviz-gallery-layer", attrs: { "data-layer": layer.layer } }, [
          el("div", { class: "nbviz-gallery-layer-line", text: layerLine(layer) }),
        ]);
        if (layer.units) {
          const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-gallery-units" }));
          drawUnitBars(canvas, decodeArray(layer.units).data, { height: 40 });
          box.append(canvas);
        }
        if (layer.maps) {
          const maps = decodeArray(layer.maps);
          const [channels, h, w] = maps.shape;
          const [lo, hi] = finiteRange(maps.data);
          const scale = sequentialScale(lo, hi);
          const grid = el("div", { class: "nbviz-gallery-maps" });
          for (let c = 0; c < channels; c++) grid.append(mapCanvas(maps.data, c, h, w, scale));
          box.append(grid);
        }
        layers.append(box);
      }
      sections.push(el("div", { class: "nbviz-lb-chart-title", text: `activations through the layers (captured at step ${acts.step})${d.activations_note ? `; ${d.activations_note}` : ""}` }), layers);
    } else {
      sections.push(el("div", { class: "nbviz-muted nbviz-gallery-acts-note", text: d.activations_note || "" }));
    }
    detailBox.replaceChildren(...sections);
  };

  /** @param {any} item */
  const card = (item) => {
    const wrong = item.evaluated && item.label !== undefined && item.pred !== item.label;
    const open = (model.get("detail") || {}).id === item.id;
    const node = el("div", {
      class: ["nbviz-gallery-card", wrong ? "nbviz-wrong" : "", open ? "nbviz-active" : ""],
      attrs: { "data-id": item.id, tabindex: 0, title: `sample ${item.id}: click for its detail` },
    });
    if (item.kind === "image") {
      const bytes = bytesOf(item.png);
      if (bytes) {
        const url = URL.createObjectURL(new Blob([bytes.slice()], { type: "image/png" }));
        urls.push(url);
        node.append(el("img", { class: "nbviz-gallery-thumb", attrs: { src: url, alt: `sample ${item.id}` } }));
      }
    } else if (item.kind === "text") {
      node.append(el("pre", { class: "nbviz-gallery-text", text: item.text ?? "" }));
    } else if (item.kind === "array" && item.values) {
      const values = Array.from(decodeArray(item.values).data, (v) => formatNumber(Number(v)));
      const more = item.size > values.length ? ` \u2026 (${item.size} values)` : "";
      node.append(el("div", { class: "nbviz-gallery-values", text: `[${values.join(", ")}${more}]` }));
    }
    node.append(el("div", { class: "nbviz-gallery-line nbviz-gallery-id", text: `#${item.id}` }));
    if (item.label !== undefined) node.append(line("true", item.label_name ?? String(item.label)));
    if (item.evaluated) {
      node.append(
        line("pred", item.pred_name ?? String(item.pred), wrong ? "nbviz-gallery-pred-wrong" : ""),
        el("div", {
          class: "nbviz-gallery-num",
          text: `conf ${formatNumber(item.confidence)} \u00b7 loss ${formatNumber(item.loss)}`,
        }),
      );
    } else {
      node.append(el("div", { class: "nbviz-gallery-num", text: "not evaluated at this step" }));
    }
    return node;
  };

  const draw = () => {
    const error = model.get("error");
    const empty = model.get("empty");
    const ids = model.get("ids") || [];
    releaseUrls();
    if (error || empty) {
      message(root, error || empty, { kind: error ? "error" : "empty" });
      return;
    }
    if (ids.length === 0) {
      message(root, model.get("prompt") || "No samples to show.", { kind: "empty" });
      return;
    }
    if (!root.contains(body)) root.replaceChildren(body);
    const pages = model.get("n_pages") || 0;
    const page = model.get("page") || 0;
    count.textContent = `${ids.length.toLocaleString()} sample${ids.length === 1 ? "" : "s"}`;
    sortSelect.value = model.get("sort_by");
    const by = model.get("sort_by");
    direction.textContent = model.get("descending") ? "highest first" : "lowest first";
    direction.disabled = by === "given";
    pageText.textContent = `page ${Math.min(page + 1, Math.max(pages, 1))} of ${Math.max(pages, 1)}`;
    prev.disabled = page <= 0;
    next.disabled = page >= pages - 1;
    const at = model.get("eval_step");
    evalText.textContent = at >= 0 ? `predictions of step ${at}` : "no evaluation at or before this step";
    note.textContent = model.get("note") || "";
    note.style.display = note.textContent ? "" : "none";
    grid.replaceChildren(...(model.get("items") || []).map(card));
    drawDetail();
  };

  /** @param {any} e */
  const cardOf = (e) => (e.target && e.target.closest ? e.target.closest(".nbviz-gallery-card") : null);
  const openCard = (/** @type {any} */ node) => {
    const id = Number(node.getAttribute("data-id"));
    save(model, { detail_id: id === (model.get("detail") || {}).id ? -1 : id });
  };
  grid.addEventListener("click", (e) => {
    const node = cardOf(e);
    if (node) openCard(node);
  });
  grid.addEventListener("keydown", (/** @type {any} */ e) => {
    if (e.key !== "Enter" && e.key !== " ") return;
    const node = cardOf(e);
    if (!node) return;
    e.preventDefault();
    openCard(node);
  });

  sortSelect.addEventListener("change", () => save(model, { sort_by: sortSelect.value }));
  direction.addEventListener("click", () => save(model, { descending: !model.get("descending") }));
  prev.addEventListener("click", () => save(model, { page: Math.max(0, (model.get("page") || 0) - 1) }));
  next.addEventListener("click", () => save(model, { page: (model.get("page") || 0) + 1 }));

  // several traits change together (one Python hold_sync): draw once for them all
  let queued = false;
  const schedule = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      draw();
    });
  };

  draw();
  const stop = listen(
    model,
    ["items", "ids", "page", "n_pages", "sort_by", "descending", "eval_step", "note", "prompt", "detail", "empty", "error"],
    schedule,
  );
  return () => {
    stop();
    releaseUrls();
    for (const u of detailUrls) URL.revokeObjectURL(u);
  };
}

export default { render };
