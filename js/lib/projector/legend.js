// The legend of the embedding projector: what each colour means for the
// chosen colouring (classes by name, correct / wrong, the ends of a
// confidence, loss or target ramp, and the grey of unknown values).
import { el } from "../dom.js";
import { formatNumber } from "../format.js";

/**
 * The legend's entries, each a swatch and its text (class names stay text).
 * @param {string} by  the colouring: label, prediction, correct, confidence, loss or none
 * @param {string[]} colors  the categories' colours, unknown last (from colourCodes)
 * @param {string[]} names  class names
 * @param {number} lossMax  the loss at the top of the loss ramp
 * @param {boolean} unknown  some points have no value
 * @param {number[]} [targetRange]  the target values at the ends of the target ramp
 * @param {number} [repeating]  classes that share the colours (a label set past the menu's
 *   size): said in words, since no colour then names one class
 * @returns {HTMLElement[]}
 */
export function legendItems(by, colors, names, lossMax, unknown, targetRange = [0, 1], repeating = 0) {
  const item = (/** @type {string} */ color, /** @type {string} */ text) =>
    el("span", {}, [el("span", { class: "nbviz-projector-swatch", style: { background: color } }), text]);
  const items = [];
  if ((by === "label" || by === "prediction") && repeating) {
    const text = `${repeating.toLocaleString("en-US")} classes share ${colors.length - 1} colours: "show" picks one class`;
    items.push(el("span", { class: "nbviz-projector-repeating" }, [text]));
  } else if (by === "label" || by === "prediction") {
    for (let i = 0; i < colors.length - 1; i++) items.push(item(colors[i], names[i] ?? `class ${i}`));
  } else if (by === "correct") {
    items.push(item(colors[0], "correct"), item(colors[1], "wrong"));
  } else if (by === "target") {
    items.push(item(colors[0], `target ${formatNumber(targetRange[0])}`));
    items.push(item(colors[colors.length - 2], `target ${formatNumber(targetRange[1])}`));
  } else if (by === "confidence" || by === "loss") {
    items.push(item(colors[0], by === "loss" ? "loss 0" : "confidence 0"));
    items.push(item(colors[colors.length - 2], by === "loss" ? `loss ${formatNumber(lossMax)}+` : "confidence 1"));
  }
  if (by !== "none" && unknown) items.push(item(colors[colors.length - 1], "unknown"));
  return items;
}
