// The legend of a LossCurves view: with several runs, one button per run (a
// click emphasises it) and the line style of each split; with one run, the
// colour of each split. Run and split names come from data: text only.
import { categorical } from "../color.js";
import { el } from "../dom.js";
import { splitColor, styleText } from "./series.js";

/**
 * @param {string} color
 * @returns {HTMLElement}
 */
const swatch = (color) => el("span", { class: "nbviz-swatch", style: { background: color } });

/**
 * The legend's entries.
 * @param {string[]} runs
 * @param {import("./series.js").Series[]} series
 * @param {(run: string) => void} onRun  a run's button was clicked
 * @returns {HTMLElement[]}
 */
export function legendItems(runs, series, onRun) {
  const splits = [...new Set(series.map((s) => s.split))].filter(Boolean);
  if (runs.length <= 1) {
    return splits.map((sp) => el("span", { class: "nbviz-lc-split" }, [swatch(splitColor(sp)), sp]));
  }
  const items = runs.map((run, i) => {
    const chip = el(
      "button",
      { class: "nbviz-lc-run", attrs: { type: "button", "data-run": run, title: "emphasise this run" } },
      [swatch(categorical(i, runs.length)), run],
    );
    chip.addEventListener("click", () => onRun(run));
    return chip;
  });
  if (splits.length > 1) items.push(el("span", { class: "nbviz-lc-styles", text: splits.map(styleText).join(" \u00b7 ") }));
  return items;
}

/**
 * Mark the emphasised run's button.
 * @param {HTMLElement} legend
 * @param {string} highlight
 */
export function markHighlight(legend, highlight) {
  for (const chip of legend.querySelectorAll(".nbviz-lc-run")) {
    chip.classList.toggle("nbviz-active", chip.getAttribute("data-run") === highlight);
  }
}
