import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { tokenBox } from "../lib/gallery/detail.js";
import { sampleCard } from "../lib/gallery/sample.js";
import { decodeTokens, lossScale, tokenInfo, tokenLegend, tokenStrip } from "../lib/gallery/tokens.js";
import { find, withDocument } from "./fake_dom.mjs";

const wire = (ctor, dtype, values, shape) => {
  const data = new ctor(values);
  return { data: new DataView(data.buffer), dtype, shape: shape ?? [values.length] };
};

// four positions: a token, a non-finite loss, a padding token, an ignored target
const payload = () => ({
  token_ids: wire(Int32Array, "<i4", [3, 1, 0, -1]),
  loss: wire(Float32Array, "<f4", [0.5, Number.POSITIVE_INFINITY, Number.NaN, Number.NaN]),
  padding: wire(Uint8Array, "|b1", [0, 0, 1, 1]),
  top_ids: wire(Int32Array, "<i4", [3, 2, 1, 3, 0, 1, 2, 2], [4, 2]),
  top_probs: wire(Float32Array, "<f4", [0.75, 0.125, 0.5, 0.25, 0.5, 0.5, 0.5, 0.5], [4, 2]),
  texts: { 0: "<pad>", 1: "<b>cat</b>", 2: " dog", 3: "the" },
  more: 2,
  nonfinite: 1,
  scale: { lo: 0, hi: 1, nonfinite: 1 },
});

describe("a language model's tokens in the gallery", () => {
  withDocument();

  it("decodes one entry per position with a token, an ignored target left out", () => {
    const tokens = decodeTokens(payload());
    assert.deepEqual(tokens.map((t) => t.position), [0, 1, 2]);
    assert.deepEqual(tokens.map((t) => t.text), ["the", "<b>cat</b>", "<pad>"]);
    assert.deepEqual(tokens[0].top, [
      { id: 3, text: "the", p: 0.75 },
      { id: 2, text: " dog", p: 0.125 },
    ]);
  });

  it("colours a token by its loss, a non-finite one in the non-finite colour, padding not at all", () => {
    const strip = tokenStrip(payload());
    const spans = find(strip, "nbviz-token");
    assert.equal(spans.length, 3);
    const scale = lossScale({ lo: 0, hi: 1 });
    assert.equal(spans[0].style.background, scale.css(0.5));
    assert.equal(spans[0].getAttribute("data-loss"), "0.5");
    assert.ok(spans[1].classList.contains("nbviz-token-nonfinite"));
    assert.equal(spans[1].style.background, "#e8114f");
    assert.equal(spans[1].getAttribute("data-loss"), "+Inf");
    assert.ok(spans[2].classList.contains("nbviz-token-pad"));
    assert.equal(spans[2].style.background, undefined);
    assert.equal(spans[2].getAttribute("data-loss"), "");
    assert.equal(spans[1].textContent, "<b>cat</b>"); // text from data stays text
    assert.match(strip.textContent, /\u2026 2 more/);
  });

  it("a low loss is light and a high loss dark", () => {
    const scale = lossScale({ lo: 0, hi: 4 });
    const light = (rgb) => rgb[0] + rgb[1] + rgb[2];
    assert.ok(light(scale(0)) > light(scale(2)) && light(scale(2)) > light(scale(4)));
  });

  it("describes a token by its loss and the model's top predictions, the target marked", () => {
    const info = tokenInfo(payload(), 0);
    assert.equal(info.head, '"the" at 0: loss 0.5');
    assert.deepEqual(info.top.map((t) => [t.text, t.hit]), [["the", true], [" dog", false]]);
    assert.match(tokenInfo(payload(), 2).head, /padding \(not counted\)/);
    assert.equal(tokenInfo(payload(), 3), null);
  });

  it("the legend spans the scale and counts the non-finite losses", () => {
    const legend = tokenLegend({ lo: 0, hi: 4.25, nonfinite: 3 });
    assert.match(legend.textContent, /token loss 0.*4\.25\+/);
    assert.match(legend.textContent, /3 non-finite/);
    assert.doesNotMatch(tokenLegend({ lo: 0, hi: 1, nonfinite: 0 }).textContent, /non-finite/);
  });

  it("a card shows the tokens in place of the sample and counts its non-finite losses", () => {
    const item = { id: 7, kind: "text", text: "the cat", evaluated: true, loss: 0.5, tokens: payload() };
    const card = sampleCard(item, false, /** @type {any} */ ({}));
    assert.equal(find(card, "nbviz-token").length, 3);
    assert.match(card.textContent, /1 non-finite token loss/);
    assert.match(card.textContent, /loss 0\.5/);
  });

  it("a click on a token in the detail pins its top predictions", () => {
    const box = tokenBox(payload());
    const spans = find(box, "nbviz-token").filter((s) => s.getAttribute("data-position") !== null);
    spans[1].fire("click");
    const info = find(box, "nbviz-token-info")[0];
    assert.equal(info.getAttribute("data-position"), "1");
    assert.match(info.textContent, /"<b>cat<\/b>" at 1: loss \+Inf/);
    assert.match(info.textContent, /top predictions<b>cat<\/b> 50\.0%the 25\.0%/);
    assert.ok(spans[1].classList.contains("nbviz-token-pinned"));
  });
});
