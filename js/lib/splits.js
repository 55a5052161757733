// The split menu of a view (ConfusionMatrix, EmbeddingProjector, SampleGallery):
// the splits the run holds ("val", "test", "train", ...), from the view's synced
// `splits`; choosing one sets `split` and Python answers with that split's data.
// Hidden while there is nothing to switch to. Split names come from data: text only.
import { el, fillSelect, on, select } from "./dom.js";
import { save } from "./model.js";

/**
 * The menu's options: the splits offered, and the current one if it is not among them.
 * @param {string[]} splits
 * @param {string} current
 * @returns {Array<[string, string]>}
 */
export function splitOptions(splits, current) {
  const names = [...splits];
  if (current && !names.includes(current)) names.push(current);
  return names.map((s) => [s, s]);
}

/**
 * A labelled <select> bound to the model's `split` and `splits`.
 * @param {import("./model.js").AnyModel} model
 * @returns {{el: HTMLElement, draw: () => void, stop: () => void}}
 */
export function splitMenu(model) {
  const menu = select("nbviz-split", "split");
  const label = el("label", { class: "nbviz-split-menu" }, ["split", menu]);
  const draw = () => {
    const current = String(model.get("split") ?? "");
    const options = splitOptions(/** @type {string[]} */ (model.get("splits") || []), current);
    fillSelect(menu, options);
    menu.value = current;
    label.style.display = options.length < 2 ? "none" : ""; // beats the toolbar's inline-flex
  };
  const stop = on(menu, "change", () => save(model, { split: menu.value }));
  draw();
  return { el: label, draw, stop };
}
