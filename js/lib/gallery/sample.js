// One sample of a SampleGallery as it was logged (PNG thumbnail, text, or the
// first values of an array row), its card with the true label, the prediction,
// the confidence and the loss, and a "label value" line. For a model that is not
// a classifier, what it gave beside the sample (`outputs` panels: a reconstruction
// beside its input, a predicted mask beside the true one, a regression's values
// beside the target) and the loss; for a language model, its tokens coloured by
// their loss (lib/gallery/tokens.js). Every text from data goes in with textContent.
import { el } from "../dom.js";
import { formatNumber } from "../format.js";
import { nonfiniteText } from "../nonfinite.js";
import { tokenStrip } from "./tokens.js";

/**
 * A recorded number as text; "-" where none was recorded (predicted classes logged
 * without logits have no confidence or loss: JSON null).
 * @param {number | null | undefined} v
 */
export const stored = (v) => (typeof v === "number" ? formatNumber(v) : "-");

/**
 * A card's or a detail's recorded `key` ("loss", "confidence") as text: "NaN", "+Inf" or
 * "-Inf" where it was non-finite (JSON has no such numbers: Python names them in
 * `nonfinite`), the loss's `loss_note` where there is no loss to show (a language
 * model's sample with no token counted), else the number, "-" where none was recorded.
 * @param {any} item
 * @param {string} key
 */
export const storedOf = (item, key) =>
  (item.nonfinite && item.nonfinite[key]) || (key === "loss" && item.loss_note) || stored(item[key]);

/**
 * The class of a recorded value's text: the non-finite colour where it was non-finite.
 * @param {any} item
 * @param {string} key
 */
export const storedClass = (item, key) => (item.nonfinite && item.nonfinite[key] ? "nbviz-nonfinite" : "");

/**
 * "label value" pieces of a line of numbers, each value in its own span (coloured where non-finite).
 * @param {any} item
 * @param {Array<[string, string]>} parts  (label, key)
 */
function numbers(item, parts) {
  return parts.flatMap(([label, key], k) => [
    `${k ? " \u00b7 " : ""}${label} `,
    el("span", { class: ["nbviz-gallery-value", storedClass(item, key)], attrs: { "data-key": key }, text: storedOf(item, key) }),
  ]);
}
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
 * The sample itself: an image, its text, or its first values ("[1, 2, … (64 values)]");
 * a payload that did not decode says so (kind "damaged").
 * @param {any} item  a gallery item or the detail: {id, kind, png?, text?, values?, size?}
 * @param {import("../images.js").ObjectUrls} urls  where the image's URL is kept
 * @param {{image: string, text: string}} classes  the img's and the text's classes
 * @returns {HTMLElement | null}
 */
export function sampleContent(item, urls, classes) {
  if (item.kind === "image") return urls.png(item.png, { class: classes.image, alt: `sample ${item.id}` });
  if (item.kind === "text") return el("pre", { class: classes.text, text: item.text ?? "" });
  if (item.kind === "damaged") return el("div", { class: "nbviz-sample-damaged", text: item.text ?? "" });
  if (item.kind === "array" && item.values) {
    const values = Array.from(decodeArray(item.values).data, (v) => formatNumber(Number(v)));
    const more = item.size > values.length ? ` \u2026 (${item.size} values)` : "";
    return el("div", { class: "nbviz-gallery-values", text: `[${values.join(", ")}${more}]` });
  }
  return null;
}

/**
 * An array's values as text: one number, or "[1, 2, … (64 values)]".
 * @param {any} payload  the wire array
 * @param {number} size  how many values there are in all
 * @returns {string}
 */
export function valuesText(payload, size) {
  const values = Array.from(decodeArray(payload).data, (v) => formatNumber(Number(v)));
  if (size === 1 && values.length === 1) return values[0];
  const more = size > values.length ? ` \u2026 (${size} values)` : "";
  return `[${values.join(", ")}${more}]`;
}

/**
 * The sample beside what the model gave for it: the images side by side, each
 * captioned (input, target, output), and the values as "target …" / "output …" lines.
 * @param {any} item  a gallery item or the detail, with `outputs` panels
 * @param {HTMLElement | null} sample  the sample as logged (sampleContent)
 * @param {import("../images.js").ObjectUrls} urls
 * @param {string} imageClass  the images' class (card thumbnail or detail size)
 * @returns {HTMLElement[]}
 */
export function withOutputs(item, sample, urls, imageClass) {
  const panels = item.outputs || [];
  const images = panels.filter((/** @type {any} */ p) => p.kind === "image");
  const figure = (/** @type {HTMLElement} */ node, /** @type {string} */ name) =>
    el("div", { class: "nbviz-gallery-panel", attrs: { "data-panel": name } }, [node, el("div", { class: "nbviz-muted", text: name })]);
  /** @type {HTMLElement[]} */
  const out = [];
  if (images.length) {
    const shown = images.map((/** @type {any} */ p) => figure(urls.png(p.png, { class: imageClass, alt: `${p.name} of sample ${item.id}` }), p.name));
    out.push(el("div", { class: "nbviz-gallery-pair" }, [...(sample ? [figure(sample, "input")] : []), ...shown]));
  } else if (sample) {
    out.push(sample);
  }
  for (const p of panels) {
    if (p.kind === "values") out.push(line(p.name, valuesText(p.values, p.size), "nbviz-gallery-values"));
  }
  return out;
}

/**
 * The card of one sample in the grid (wrong predictions marked, the open one active).
 * @param {any} item
 * @param {boolean} open  its detail is shown
 * @param {import("../images.js").ObjectUrls} urls
 * @returns {HTMLElement}
 */
export function sampleCard(item, open, urls) {
  const classes = item.pred !== undefined;
  const wrong = item.evaluated && classes && item.label !== undefined && item.pred !== item.label;
  const sample = item.tokens
    ? tokenStrip(item.tokens, { cls: "nbviz-gallery-text" })
    : sampleContent(item, urls, { image: "nbviz-gallery-thumb", text: "nbviz-gallery-text" });
  const node = el(
    "div",
    {
      class: ["nbviz-gallery-card", wrong ? "nbviz-wrong" : "", open ? "nbviz-active" : ""],
      attrs: { "data-id": item.id, tabindex: 0, title: `sample ${item.id}: click for its detail` },
    },
    [
      ...withOutputs(item, sample, urls, "nbviz-gallery-thumb"),
      el("div", { class: "nbviz-gallery-line nbviz-gallery-id", text: `#${item.id}` }),
    ],
  );
  if (item.label !== undefined) node.append(line("true", item.label_name ?? String(item.label)));
  if (item.evaluated && !classes) {
    const loss = (item.nonfinite && item.nonfinite.loss) || item.loss_note ? storedOf(item, "loss") : formatNumber(item.loss);
    node.append(
      el("div", { class: "nbviz-gallery-num nbviz-gallery-loss" }, [
        "loss ",
        el("span", { class: ["nbviz-gallery-value", storedClass(item, "loss")], attrs: { "data-key": "loss" }, text: loss }),
      ]),
    );
    const n = item.tokens ? Number(item.tokens.nonfinite) || 0 : 0;
    if (n > 0) node.append(el("div", { class: "nbviz-nonfinite nbviz-gallery-token-nonfinite", text: `${nonfiniteText(n)} token loss${n === 1 ? "" : "es"}` }));
  } else if (item.evaluated) {
    node.append(
      line("pred", item.pred_name ?? String(item.pred), item.pred === -1 ? "nbviz-nonfinite" : wrong ? "nbviz-gallery-pred-wrong" : ""),
      el("div", { class: "nbviz-gallery-num" }, numbers(item, [["conf", "confidence"], ["loss", "loss"]])),
    );
  } else {
    node.append(el("div", { class: "nbviz-gallery-num", text: "not evaluated at this step" }));
  }
  return node;
}
