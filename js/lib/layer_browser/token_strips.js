// A language model's unit in the LayerBrowser: the tokens it was most active on,
// each as a strip of text (the input tokens around it, the token itself highlighted
// with an intensity by its activation) beside the value. A click on a strip opens
// its sample as a click on a sample card does. Token texts come from data:
// textContent only, never markup.
import { rgbToCss } from "../color.js";
import { el } from "../dom.js";
import { formatNumber } from "../format.js";

/** Orange for a positive activation, blue for a negative one (Okabe-Ito). */
const POSITIVE = [230, 159, 0];
const NEGATIVE = [0, 114, 178];

/**
 * How strongly a token is highlighted: its |activation| against the largest listed,
 * from 0.2 (weakest) to 1 (the largest).
 * @param {number} value
 * @param {number} scale  the largest |activation| listed (> 0)
 * @returns {number}
 */
export function intensity(value, scale) {
  if (!Number.isFinite(value) || !(scale > 0)) return 0.2;
  return 0.2 + 0.8 * Math.min(1, Math.abs(value) / scale);
}

/**
 * The highlight of a token with activation `value` (an rgba background).
 * @param {number} value
 * @param {number} scale
 * @returns {string}
 */
export function highlight(value, scale) {
  return rgbToCss(value < 0 ? NEGATIVE : POSITIVE, intensity(value, scale));
}

/**
 * One top token: the context tokens as spans, the activating one marked.
 * @param {{id: number, position: number, value: number, token: string, context: string[], focus: number}} t
 * @param {number} scale
 * @param {number} rank
 * @param {boolean} open  whether its sample is the one opened
 * @param {(id: number) => void} onOpen
 * @returns {HTMLElement}
 */
function strip(t, scale, rank, open, onOpen) {
  const spans = (t.context ?? []).map((text, i) => {
    const hit = i === t.focus;
    return el("span", {
      class: ["nbviz-lb-ctx", hit ? "nbviz-lb-ctx-hit" : ""],
      text,
      style: hit ? { background: highlight(t.value, scale) } : undefined,
    });
  });
  // the token in a column of its own: its context ahead right-aligned (clipped on the left)
  const focus = t.focus >= 0 && t.focus < spans.length ? t.focus : -1;
  const tokens =
    focus < 0
      ? [el("span", { class: "nbviz-muted", text: "no input tokens recorded" })]
      : [
          el("span", { class: "nbviz-lb-strip-before" }, spans.slice(0, focus)),
          spans[focus],
          el("span", { class: "nbviz-lb-strip-after" }, spans.slice(focus + 1)),
        ];
  const row = el(
    "div",
    {
      class: ["nbviz-lb-strip", open ? "nbviz-active" : ""],
      attrs: {
        "data-id": t.id,
        "data-position": t.position,
        "data-value": String(t.value),
        "data-rank": rank,
        title: `sample ${t.id}, token ${t.position}: ${formatNumber(t.value)}; click for the sample's activations of this layer`,
      },
    },
    [
      el("span", { class: "nbviz-lb-strip-value", text: formatNumber(t.value) }),
      el("span", { class: "nbviz-lb-strip-tokens" }, tokens),
      el("span", { class: "nbviz-lb-strip-where nbviz-muted", text: `#${t.id} @${t.position}` }),
    ],
  );
  row.addEventListener("click", () => onOpen(open ? -1 : t.id));
  return row;
}

/**
 * The chosen unit's top tokens as strips, most active first.
 * @param {any} us  the `unit_samples` trait of a token layer (`kind` "tokens")
 * @param {number} openId  the sample opened (its strips are marked)
 * @param {(id: number) => void} onOpen
 * @returns {HTMLElement}
 */
export function tokenStrips(us, openId, onOpen) {
  const tokens = us.tokens ?? [];
  const box = el("div", { class: "nbviz-lb-strips", attrs: { "data-unit": us.unit } });
  if (!tokens.length) {
    box.append(el("div", { class: "nbviz-muted", text: `unit ${us.unit} has no tokens recorded at this evaluation` }));
    return box;
  }
  const scale = Math.max(...tokens.map((/** @type {any} */ t) => (Number.isFinite(t.value) ? Math.abs(t.value) : 0)));
  box.append(el("div", { class: "nbviz-lb-caption", text: `unit ${us.unit}: the ${tokens.length} tokens it was most active on, in their context` }));
  tokens.forEach((/** @type {any} */ t, /** @type {number} */ i) => box.append(strip(t, scale, i, openId === t.id, onOpen)));
  return box;
}
