// A language model's sample in a SampleGallery: its tokens, each coloured by the
// model's loss there on one sequential scale for the whole evaluation (light: low,
// dark: high; non-finite losses in the non-finite colour, padding unstyled), a
// legend for the scale, and what a token shows on hover or click: its loss and
// the model's top predictions there. Token texts come from data: textContent only.
import { interpolateStops, rgbToCss, sequentialScale } from "../color.js";
import { el } from "../dom.js";
import { formatNumber } from "../format.js";
import { NONFINITE_CSS, nonfiniteText } from "../nonfinite.js";
import { decodeArray } from "../wire.js";

/** ColorBrewer YlOrBr: light yellow (low loss) to dark brown (high loss). */
const YL_OR_BR = [
  [255, 255, 229],
  [255, 247, 188],
  [254, 227, 145],
  [254, 196, 79],
  [254, 153, 41],
  [236, 112, 20],
  [204, 76, 2],
  [153, 52, 4],
  [102, 37, 6],
];

/**
 * The ramp of token losses for t in [0, 1].
 * @param {number} t
 */
export const lossRamp = (t) => interpolateStops(YL_OR_BR, t);

/**
 * The scale of an evaluation's token losses.
 * @param {{lo?: number, hi?: number} | undefined} scale  the `token_scale` / payload scale
 */
export function lossScale(scale) {
  const lo = Number.isFinite(scale?.lo) ? Number(scale?.lo) : 0;
  const hi = Number.isFinite(scale?.hi) ? Number(scale?.hi) : 1;
  return sequentialScale(lo, hi > lo ? hi : lo + 1, { interpolate: lossRamp });
}

/**
 * The tokens of a payload, decoded: one entry per position that has a token.
 * @param {any} tokens  an item's (or the detail's) `tokens`
 * @returns {Array<{position: number, id: number, text: string, loss: number, padding: boolean,
 *   top: Array<{id: number, text: string, p: number}>}>}
 */
export function decodeTokens(tokens) {
  const ids = decodeArray(tokens.token_ids).data;
  const loss = decodeArray(tokens.loss).data;
  const padding = decodeArray(tokens.padding).data;
  const topIds = decodeArray(tokens.top_ids);
  const topProbs = decodeArray(tokens.top_probs).data;
  const k = topIds.shape[1] ?? 0;
  const texts = tokens.texts || {};
  /** @param {number} id */
  const text = (id) => texts[String(id)] ?? String(id);
  const out = [];
  for (let i = 0; i < ids.length; i++) {
    const id = Number(ids[i]);
    if (id < 0 && padding[i]) continue; // an ignored target names no token
    const top = [];
    for (let j = 0; j < k; j++) {
      const t = Number(topIds.data[i * k + j]);
      top.push({ id: t, text: text(t), p: Number(topProbs[i * k + j]) });
    }
    out.push({ position: i, id, text: id >= 0 ? text(id) : "", loss: Number(loss[i]), padding: !!padding[i], top });
  }
  return out;
}

/**
 * Black or white text, whichever reads on `rgb`.
 * @param {number[]} rgb
 */
const inkOn = (rgb) => (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 140 ? "#000" : "#fff");

/**
 * A token's loss as the DOM keeps it (data-loss): the number, "NaN"/"+Inf", or "" at padding.
 * @param {{loss: number, padding: boolean}} t
 */
const lossAttr = (t) => (t.padding ? "" : Number.isFinite(t.loss) ? String(t.loss) : formatNumber(t.loss));

/**
 * The tokens as a strip of spans coloured by their loss.
 * @param {any} tokens  the payload (`token_ids`, `loss`, `padding`, `top_ids`, ..., `scale`)
 * @param {{scale?: any, cls?: string}} [options]  the scale (default: the payload's)
 * @returns {HTMLElement}
 */
export function tokenStrip(tokens, options = {}) {
  const scale = lossScale(options.scale ?? tokens.scale);
  const spans = decodeTokens(tokens).map((t) => {
    const attrs = { "data-position": t.position, "data-loss": lossAttr(t), "data-token-id": t.id };
    if (t.padding) return el("span", { class: "nbviz-token nbviz-token-pad", text: t.text, attrs });
    if (!Number.isFinite(t.loss)) {
      return el("span", { class: "nbviz-token nbviz-token-nonfinite", text: t.text, attrs, style: { background: NONFINITE_CSS, color: "#fff" } });
    }
    const rgb = scale(t.loss);
    return el("span", { class: "nbviz-token", text: t.text, attrs, style: { background: rgbToCss(rgb), color: inkOn(rgb) } });
  });
  const strip = el("div", { class: ["nbviz-tokens", options.cls ?? ""] }, spans);
  if (tokens.more > 0) strip.append(el("span", { class: "nbviz-muted nbviz-tokens-more", text: ` \u2026 ${tokens.more.toLocaleString("en-US")} more` }));
  return strip;
}

/**
 * The lines that describe one token: its text, position and loss, then its top predictions.
 * @param {any} tokens  the payload
 * @param {number} position
 * @returns {{head: string, top: Array<{text: string, p: number, hit: boolean}>} | null}
 */
export function tokenInfo(tokens, position) {
  const t = decodeTokens(tokens).find((x) => x.position === position);
  if (!t) return null;
  const loss = t.padding ? "padding (not counted)" : `loss ${formatNumber(t.loss)}`;
  return {
    head: `${JSON.stringify(t.text)} at ${position}: ${loss}`,
    top: t.top.map((x) => ({ text: x.text, p: x.p, hit: x.id === t.id })),
  };
}

/**
 * A probability as a percentage.
 * @param {number} p
 */
const percent = (p) => (Number.isFinite(p) ? `${(100 * p).toFixed(p >= 0.1 || p === 0 ? 1 : 2)}%` : formatNumber(p));

/**
 * Fill `box` with one token's description (the hover tip and the detail's pinned token).
 * @param {HTMLElement} box
 * @param {any} tokens
 * @param {number} position
 * @returns {boolean} whether there was such a token
 */
export function describeToken(box, tokens, position) {
  const info = tokenInfo(tokens, position);
  if (!info) {
    box.replaceChildren();
    return false;
  }
  const rows = info.top.map((x) =>
    el("div", { class: ["nbviz-token-top", x.hit ? "nbviz-token-hit" : ""] }, [
      el("span", { class: "nbviz-token-top-text", text: x.text }),
      el("span", { class: "nbviz-gallery-num", text: ` ${percent(x.p)}` }),
      el("span", { class: "nbviz-token-top-bar", style: { width: `${Math.round(60 * Math.min(Math.max(x.p, 0), 1))}px` } }),
    ]),
  );
  box.replaceChildren(
    el("div", { class: "nbviz-token-head", text: info.head }),
    el("div", { class: "nbviz-muted", text: rows.length ? "top predictions" : "no top predictions recorded" }),
    ...rows,
  );
  box.setAttribute("data-position", String(position));
  return true;
}

/**
 * The legend of the scale: "token loss 0 [ramp] 4.2", the non-finite colour with its
 * count when there are some, and padding as it is shown.
 * @param {{lo?: number, hi?: number, nonfinite?: number}} scale
 * @returns {HTMLElement}
 */
export function tokenLegend(scale) {
  const s = lossScale(scale);
  const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => rgbToCss(lossRamp(t))).join(", ");
  const parts = [
    el("span", { class: "nbviz-muted", text: "token loss " }),
    el("span", { class: "nbviz-token-legend-lo", text: formatNumber(s.domain[0]) }),
    el("span", { class: "nbviz-token-legend-ramp", style: { background: `linear-gradient(to right, ${stops})` } }),
    el("span", { class: "nbviz-token-legend-hi", text: `${formatNumber(s.domain[1])}+` }),
  ];
  const bad = Number(scale?.nonfinite) || 0;
  if (bad > 0) {
    parts.push(
      el("span", { class: "nbviz-token nbviz-token-nonfinite", text: "NaN", style: { background: NONFINITE_CSS, color: "#fff" } }),
      el("span", { class: "nbviz-token-legend-nonfinite", text: nonfiniteText(bad) }),
    );
  }
  parts.push(el("span", { class: "nbviz-token nbviz-token-pad", text: "pad" }), el("span", { class: "nbviz-muted", text: "padding" }));
  return el("div", { class: "nbviz-token-legend" }, parts);
}
