// What each unit of a layer responds to, in the LayerBrowser: the units' mean
// values as bars (a click picks a unit, as does the number box), the samples
// that excite the chosen unit most and least as cards, and for an opened card
// the layer's captured output for that sample, channel by channel. A language
// model's layer lists the unit's top tokens in their context instead (token_strips.js).
import { el } from "../dom.js";
import { formatNumber, formatStep } from "../format.js";
import { featureMaps, ObjectUrls } from "../images.js";
import { drawSignedBars } from "../sparkline.js";
import { decodeArray } from "../wire.js";
import { arr, BLUE, ORANGE } from "./charts.js";
import { tokenStrips } from "./token_strips.js";

/**
 * The unit under a click on the per-unit bars: x in CSS px across `width`.
 * @param {number} x
 * @param {number} width
 * @param {number} units
 * @returns {number} the unit, or -1 outside the bars
 */
export function unitAt(x, width, units) {
  if (!(units > 0) || !(width > 0) || x < 0 || x >= width) return -1;
  return Math.min(units - 1, Math.floor((x / width) * units));
}

/**
 * The captured output of the layer for the sample in `map_id`, channel by channel.
 * @param {any} sm  the `sample_maps` trait
 * @param {number} unit  the chosen unit (its channel is marked)
 * @returns {HTMLElement}
 */
function sampleMaps(sm, unit) {
  const box = el("div", { class: "nbviz-lb-sample-maps" });
  if (sm.id === undefined) return box;
  box.setAttribute("data-id", String(sm.id));
  const title = sm.step >= 0 ? `sample #${sm.id}: output of ${sm.layer} captured at step ${formatStep(sm.step)}` : `sample #${sm.id}`;
  box.append(el("div", { class: "nbviz-lb-chart-title", text: title }));
  if (sm.notice) box.append(el("div", { class: "nbviz-muted nbviz-lb-sample-notice", text: sm.notice }));
  if (sm.maps) {
    box.append(el("div", { class: "nbviz-lb-maps" }, featureMaps(decodeArray(sm.maps), { class: "nbviz-lb-map", active: unit })));
  } else if (sm.units) {
    const values = arr(sm.units);
    const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-sample-units" }));
    drawSignedBars(canvas, values, { width: Math.max(160, Math.min(720, values.length * 8)), height: 60, color: ORANGE });
    box.append(canvas);
  }
  return box;
}

/**
 * A row of sample cards ("most:" or "least:"); a click opens (or closes) a
 * sample's captured maps.
 * @param {any[]} list
 * @param {"most" | "least"} which
 * @param {number} openId  the sample whose maps are open
 * @param {(id: number) => void} onCard
 * @param {ObjectUrls} urls
 * @returns {HTMLElement}
 */
function cards(list, which, openId, onCard, urls) {
  return el("div", { class: "nbviz-lb-unit-row", attrs: { "data-which": which } }, [
    el("span", { class: "nbviz-lb-caption", text: `${which}:` }),
    ...list.map((c) => {
      const open = openId === c.id;
      const card = el("div", {
        class: ["nbviz-lb-unit-card", open ? "nbviz-active" : ""],
        attrs: { "data-id": c.id, title: `sample ${c.id}: ${formatNumber(c.value)}; click for its activations of this layer` },
      });
      card.addEventListener("click", () => onCard(open ? -1 : c.id));
      if (c.kind === "image") {
        const img = urls.png(c.png, { alt: `sample ${c.id}` });
        if (img) card.append(img);
      } else if (c.kind === "text" || c.kind === "damaged") {
        card.append(el("span", { text: c.text ?? "" }));
      }
      card.append(el("span", { text: `#${c.id} ${Number(c.value).toPrecision(3)}` }));
      if (c.label !== undefined) {
        const pred = c.pred !== undefined && c.pred !== c.label ? ` \u2192 ${c.pred_name ?? c.pred}` : "";
        card.append(el("span", { text: `${c.label_name ?? c.label}${pred}` }));
      }
      return card;
    }),
  ]);
}

/**
 * The units section: its elements for the `unit_samples` and `sample_maps` traits.
 * @param {any} us  the `unit_samples` trait
 * @param {any} sm  the `sample_maps` trait
 * @param {{pickUnit: (unit: number) => void, currentUnit: () => number, openSample: (id: number) => void}} on
 * @param {ObjectUrls} urls  where the cards' image URLs are kept
 * @returns {HTMLElement[]}
 */
export function unitSection(us, sm, on, urls) {
  if (!(us.n_units > 0)) {
    return [el("div", { class: "nbviz-muted nbviz-lb-units-empty", text: us.notice || "no per-sample unit values for this layer" })];
  }
  const width = Math.max(160, Math.min(720, us.n_units * 8));
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-unit-bars", attrs: { title: "click a unit to list its samples" } }));
  drawSignedBars(canvas, arr(us.means), { width, height: 70, color: BLUE });
  if (us.unit >= 0) {
    const ctx = canvas.getContext("2d");
    if (ctx) {
      const w = (width - 4) / us.n_units;
      ctx.strokeStyle = "#d55e00";
      ctx.lineWidth = 2;
      ctx.strokeRect(2 + us.unit * w, 1, Math.max(w, 2), 56);
    }
  }
  canvas.addEventListener("click", (e) => {
    const u = unitAt(e.clientX - canvas.getBoundingClientRect().left - 2, width - 4, us.n_units);
    if (u >= 0) on.pickUnit(u);
  });
  const input = /** @type {HTMLInputElement} */ (
    el("input", {
      class: "nbviz-lb-unit-input",
      attrs: { type: "number", min: 0, max: us.n_units - 1, value: us.unit >= 0 ? us.unit : "", "aria-label": "unit" },
    })
  );
  const commit = () => {
    const u = Number(input.value);
    if (input.value !== "" && Number.isInteger(u) && u >= 0 && u < us.n_units && u !== on.currentUnit()) on.pickUnit(u);
  };
  input.addEventListener("change", commit);
  input.addEventListener("keydown", (e) => {
    e.stopPropagation(); // typing here is not a notebook shortcut
    if (e.key === "Enter") commit();
  });
  const tokens = us.kind === "tokens";
  const counted = tokens ? `top ${us.k} tokens per unit; bars: each unit's highest activation` : `${us.n_samples} samples; bars: each unit's mean`;
  const caption = el("div", {
    class: "nbviz-lb-caption",
    text: `${us.what}; evaluation of step ${formatStep(us.step)}, ${counted}` + (us.notice ? `; ${us.notice}` : ""),
  });
  const parts = [el("div", {}, [canvas]), el("label", { class: "nbviz-lb-caption" }, ["unit ", input]), caption];
  if (tokens && us.unit >= 0) {
    parts.push(tokenStrips(us, sm.id, on.openSample));
  } else if (us.unit >= 0) {
    parts.push(cards(us.most ?? [], "most", sm.id, on.openSample, urls), cards(us.least ?? [], "least", sm.id, on.openSample, urls));
  } else {
    parts.push(el("div", { class: "nbviz-muted", text: `choose a unit (click its bar) to list its ${tokens ? "top tokens" : "samples"}` }));
  }
  parts.push(sampleMaps(sm, us.unit));
  return parts;
}
