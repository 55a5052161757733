// A language model's unit in the LayerBrowser: the tokens it was most active on,
// each as a strip of text (the input tokens around it, the token itself highlighted
// with an intensity by its activation) beside the value. A click on a strip opens
// its sample as a click on a sample card does. Token texts come from data:
// textContent only, never markup. A non-finite activation arrives as its name
// ("+Inf"), never as a number, and is shown so; a unit whose activations were not
// all finite says how many positions were not.
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
  if (value === Number.POSITIVE_INFINITY || value === Number.NEGATIVE_INFINITY) return 1;
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
 * A top token's activation as a number (a non-finite one from its name).
 * @param {{value: number | null, nonfinite?: string}} t
 * @returns {number}
 */
export function tokenValue(t) {
  if (t.nonfinite === "+Inf") return Number.POSITIVE_INFINITY;
  if (t.nonfinite === "-Inf") return Number.NEGATIVE_INFINITY;
  return typeof t.value === "number" ? t.value : Number.NaN;
}

/**
 * One top token: the context tokens as spans, the activating one marked.
 * @param {{id: number, position: number, value: number | null, nonfinite?: string, token: string, context: string[], focus: number}} t
 * @param {number} scale
 * @param {number} rank
 * @param {boolean} open  whether its sample is the one opened
 * @param {(id: number) => void} onOpen
 * @returns {HTMLElement}
 */
function strip(t, scale, rank, open, onOpen) {
  const value = tokenValue(t);
  const shown = t.nonfinite ?? formatNumber(value);
  const spans = (t.context ?? []).map((text, i) => {
    const hit = i === t.focus;
    return el("span", {
      class: ["nbviz-lb-ctx", hit ? "nbviz-lb-ctx-hit" : ""],
      text,
      style: hit ? { background: highlight(value, scale) } : undefined,
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
        "data-value": t.nonfinite ?? String(t.value),
        "data-rank": rank,
        title: `sample ${t.id}, token ${t.position}: ${shown}; click for the sample's activations of this layer`,
      },
    },
    [
      el("span", { class: ["nbviz-lb-strip-value", t.nonfinite ? "nbviz-nonfinite" : ""], text: shown }),
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
  const bad = Number(us.nonfinite || 0);
  if (bad > 0) {
    const text = `\u26a0 ${bad.toLocaleString("en-US")} position${bad === 1 ? "" : "s"} non-finite (NaN/inf): +inf is ranked with the rest, NaN and -inf are not listed`;
    box.append(el("div", { class: "nbviz-nonfinite nbviz-lb-strips-nonfinite", text }));
  }
  if (!tokens.length) {
    box.append(el("div", { class: "nbviz-muted", text: `unit ${us.unit} has no tokens recorded at this evaluation` }));
    return box;
  }
  const scale = Math.max(...tokens.map((/** @type {any} */ t) => (Number.isFinite(tokenValue(t)) ? Math.abs(tokenValue(t)) : 0)));
  box.append(el("div", { class: "nbviz-lb-caption", text: `unit ${us.unit}: the ${tokens.length} tokens it was most active on, in their context` }));
  tokens.forEach((/** @type {any} */ t, /** @type {number} */ i) => box.append(strip(t, scale, i, openId === t.id, onOpen)));
  return box;
}
