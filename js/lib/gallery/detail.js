// The detail of one sample in a SampleGallery: the sample at full size, its
// true and predicted class, its top-k class probabilities, its recorded unit
// summary, and its captured activations layer by layer (unit means, and for
// convolutions the feature maps channel by channel); for a language model, every
// token coloured by its loss, and a click on one pins its loss and the model's top
// predictions there. Texts from data stay text.
import { el } from "../dom.js";
import { formatNumber } from "../format.js";
import { featureMaps } from "../images.js";
import { drawSignedBars } from "../sparkline.js";
import { sortableTable } from "../table.js";
import { decodeArray } from "../wire.js";
import { line, sampleContent, storedClass, storedOf, withOutputs } from "./sample.js";
import { describeToken, tokenLegend, tokenStrip } from "./tokens.js";

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
 * The info lines of a sample's detail, as [label, value] pairs.
 * @param {any} d  the `detail` trait
 * @returns {Array<[string, string]>}
 */
export function detailLines(d) {
  /** @type {Array<[string, string]>} */
  const out = [["id", `#${d.id}`]];
  if (d.label !== undefined) out.push(["true", d.label_name ?? String(d.label)]);
  if (d.evaluated && d.pred !== undefined) {
    out.push(["pred", d.pred_name ?? String(d.pred)]);
    out.push(["confidence", storedOf(d, "confidence")]);
  }
  if (d.evaluated) {
    out.push(["loss", storedOf(d, "loss")]);
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
 * Bars of per-unit values around a zero line.
 * @param {ArrayLike<number>} values
 * @param {number} height
 * @returns {HTMLCanvasElement}
 */
function unitBars(values, height) {
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-gallery-units" }));
  drawSignedBars(canvas, values, { width: Math.min(640, Math.max(160, values.length * 4)), height });
  return canvas;
}

/**
 * The top-k box: a table of class, probability and a bar (no header), or why there is none.
 * @param {any} d  the `detail` trait
 * @returns {HTMLElement}
 */
function topKBox(d) {
  const rows = topKRows(d.top_k);
  const box = el("div", { class: "nbviz-gallery-topk-box" }, [el("div", { class: "nbviz-lb-chart-title", text: "top classes" })]);
  if (!rows.length) {
    box.append(el("div", { class: "nbviz-muted", text: d.top_k_note || "no class probabilities" }));
    return box;
  }
  const columns = [
    { key: "name", label: "class", cell: (/** @type {any} */ r) => ({ text: r.name, title: r.name }) },
    { key: "text", label: "probability" },
    {
      key: "width",
      label: "",
      cell: (/** @type {any} */ r) => ({ style: { width: "120px" }, nodes: [el("div", { class: "nbviz-gallery-bar", style: { width: r.width } })] }),
    },
  ];
  box.append(sortableTable({ class: "nbviz-gallery-topk", head: false, columns, rows, rowAttrs: (r) => ({ "data-class": r.cls }) }));
  return box;
}

/**
 * One captured layer: its summary line, its unit means and its feature maps.
 * @param {any} layer  one entry of detail.activations.layers
 * @returns {HTMLElement}
 */
function layerBox(layer) {
  const box = el("div", { class: "nbviz-gallery-layer", attrs: { "data-layer": layer.layer } }, [
    el("div", { class: "nbviz-gallery-layer-line", text: layerLine(layer) }),
  ]);
  if (layer.units) box.append(unitBars(decodeArray(layer.units).data, 40));
  if (layer.maps) box.append(el("div", { class: "nbviz-gallery-maps" }, featureMaps(decodeArray(layer.maps), { class: "nbviz-gallery-map" })));
  return box;
}

/**
 * A language model's sample in the detail: the legend, every token coloured by its loss,
 * and the token clicked (its loss and the model's top predictions there).
 * @param {any} tokens  the detail's `tokens` payload
 * @returns {HTMLElement}
 */
export function tokenBox(tokens) {
  const strip = tokenStrip(tokens, { cls: "nbviz-gallery-detail-tokens" });
  const pinned = el("div", { class: "nbviz-token-info nbviz-muted", text: "click a token for its loss and the model's top predictions" });
  strip.addEventListener("click", (/** @type {any} */ e) => {
    const span = e.target && e.target.closest ? e.target.closest(".nbviz-token") : null;
    if (!span) return;
    for (const other of strip.querySelectorAll(".nbviz-token-pinned")) other.classList.remove("nbviz-token-pinned");
    span.classList.add("nbviz-token-pinned");
    pinned.classList.remove("nbviz-muted");
    describeToken(pinned, tokens, Number(span.getAttribute("data-position")));
  });
  return el("div", { class: "nbviz-gallery-token-box" }, [tokenLegend(tokens.scale || {}), strip, pinned]);
}

/**
 * The sections of a sample's detail panel.
 * @param {any} d  the `detail` trait (with an id)
 * @param {import("../images.js").ObjectUrls} urls  where the image's URL is kept
 * @param {() => void} onClose  the close button was clicked
 * @returns {HTMLElement[]}
 */
export function detailSections(d, urls, onClose) {
  const close = el("button", { class: "nbviz-gallery-detail-close", text: "\u00d7 close", attrs: { type: "button", title: "close the detail" } });
  close.addEventListener("click", onClose);
  const wrong = d.label !== undefined && d.pred !== undefined && d.pred !== d.label;
  const info = el(
    "div",
    { class: "nbviz-gallery-detail-info" },
    detailLines(d).map(([k, v]) => line(k, v, k === "pred" && wrong ? "nbviz-gallery-pred-wrong" : storedClass(d, k))),
  );
  if (d.missing) info.append(el("div", { class: "nbviz-muted", text: d.missing }));
  const sample = sampleContent(d, urls, { image: "nbviz-gallery-big", text: "nbviz-gallery-text nbviz-gallery-detail-text" });
  // a model that is not a classifier: what it gave beside the sample, no class probabilities
  const head = d.tokens
    ? [tokenBox(d.tokens), info]
    : d.outputs
      ? [...withOutputs(d, sample, urls, "nbviz-gallery-big"), info]
      : [sample, info, topKBox(d)];
  const sections = [
    el("div", { class: "nbviz-gallery-detail-bar" }, [el("span", { class: "nbviz-lb-chart-title", text: `sample #${d.id}` }), close]),
    el("div", { class: "nbviz-gallery-detail-head" }, head),
  ];
  if (d.units && d.units.values) {
    sections.push(
      el("div", { class: "nbviz-gallery-layer" }, [
        el("div", { class: "nbviz-lb-chart-title", text: `units of ${d.units.layer} (mean over positions, evaluation of step ${d.units.step})` }),
        unitBars(decodeArray(d.units.values).data, 60),
      ]),
    );
  }
  const acts = d.activations;
  if (acts && acts.layers) {
    const note = d.activations_note ? `; ${d.activations_note}` : "";
    sections.push(
      el("div", { class: "nbviz-lb-chart-title", text: `activations through the layers (captured at step ${acts.step})${note}` }),
      el("div", { class: "nbviz-gallery-layers" }, acts.layers.map(layerBox)),
    );
  } else {
    sections.push(el("div", { class: "nbviz-muted nbviz-gallery-acts-note", text: d.activations_note || "" }));
  }
  return sections;
}
