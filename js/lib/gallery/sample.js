// One sample of a SampleGallery as it was logged (PNG thumbnail, text, or the
// first values of an array row), its card with the true label, the prediction,
// the confidence and the loss, and a "label value" line. Every text from data
// goes in with textContent.
import { el } from "../dom.js";
import { formatNumber } from "../format.js";
import { decodeArray } from "../wire.js";

/**
 * One line of a card: "label value", the value in its own span.
 * @param {string} label
 * @param {string} value
 * @param {string} [cls]
 * @returns {HTMLElement}
 */
export function line(label, value, cls) {
  return el("div", { class: "nbviz-gallery-line", attrs: { title: `${label} ${value}` } }, [
    el("span", { class: "nbviz-muted", text: `${label} ` }),
    el("span", { class: cls ?? "", text: value }),
  ]);
}

/**
 * The sample itself: an image, its text, or its first values ("[1, 2, … (64 values)]").
 * @param {any} item  a gallery item or the detail: {id, kind, png?, text?, values?, size?}
 * @param {import("../images.js").ObjectUrls} urls  where the image's URL is kept
 * @param {{image: string, text: string}} classes  the img's and the text's classes
 * @returns {HTMLElement | null}
 */
export function sampleContent(item, urls, classes) {
  if (item.kind === "image") return urls.png(item.png, { class: classes.image, alt: `sample ${item.id}` });
  if (item.kind === "text") return el("pre", { class: classes.text, text: item.text ?? "" });
  if (item.kind === "array" && item.values) {
    const values = Array.from(decodeArray(item.values).data, (v) => formatNumber(Number(v)));
    const more = item.size > values.length ? ` \u2026 (${item.size} values)` : "";
    return el("div", { class: "nbviz-gallery-values", text: `[${values.join(", ")}${more}]` });
  }
  return null;
}

/**
 * The card of one sample in the grid (wrong predictions marked, the open one active).
 * @param {any} item
 * @param {boolean} open  its detail is shown
 * @param {import("../images.js").ObjectUrls} urls
 * @returns {HTMLElement}
 */
export function sampleCard(item, open, urls) {
  const wrong = item.evaluated && item.label !== undefined && item.pred !== item.label;
  const node = el(
    "div",
    {
      class: ["nbviz-gallery-card", wrong ? "nbviz-wrong" : "", open ? "nbviz-active" : ""],
      attrs: { "data-id": item.id, tabindex: 0, title: `sample ${item.id}: click for its detail` },
    },
    [
      sampleContent(item, urls, { image: "nbviz-gallery-thumb", text: "nbviz-gallery-text" }),
      el("div", { class: "nbviz-gallery-line nbviz-gallery-id", text: `#${item.id}` }),
    ],
  );
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
}
