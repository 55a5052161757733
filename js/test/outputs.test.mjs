import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { detailLines } from "../lib/gallery/detail.js";
import { sampleCard, valuesText } from "../lib/gallery/sample.js";
import { colourAvailable, colourCodes } from "../lib/points.js";
import { legendItems } from "../lib/projector/legend.js";
import { FakeNode, find, withDocument } from "./fake_dom.mjs";

const f8 = (values) => {
  const data = new Float64Array(values);
  return { data: new DataView(data.buffer), dtype: "<f8", shape: [values.length] };
};

// an ObjectUrls stand-in: an <img> per PNG, its bytes kept as text
const urls = {
  png: (/** @type {any} */ png, /** @type {any} */ options) => {
    const img = new FakeNode("img");
    img.className = options.class;
    img.setAttribute("alt", options.alt);
    return img;
  },
};

describe("the samples of a model that is not a classifier", () => {
  withDocument();

  it("valuesText gives one number as it is and more as a list with their count", () => {
    assert.equal(valuesText(f8([0.25]), 1), "0.25");
    assert.equal(valuesText(f8([1, 2]), 5), "[1, 2 \u2026 (5 values)]");
  });

  it("a card puts the reconstruction beside its input and shows the loss, no class", () => {
    const item = { id: 3, kind: "image", png: new Uint8Array([1]), evaluated: true, loss: 0.0123, outputs: [{ name: "output", kind: "image", png: new Uint8Array([2]) }] };
    const card = sampleCard(item, false, /** @type {any} */ (urls));
    const panels = find(card, "nbviz-gallery-panel");
    assert.deepEqual(panels.map((p) => p.getAttribute("data-panel")), ["input", "output"]);
    assert.match(card.textContent, /loss 0\.0123/);
    assert.doesNotMatch(card.textContent, /pred|conf/);
    assert.ok(!String(card.className).includes("nbviz-wrong"));
  });

  it("a regression's card shows the target and the predicted value as lines", () => {
    const item = { id: 1, kind: "array", evaluated: true, loss: 0.5, label: 2, label_name: "<b>two</b>", outputs: [
      { name: "target", kind: "values", values: f8([1.5]), size: 1 },
      { name: "output", kind: "values", values: f8([2.25]), size: 1 },
    ] };
    const card = sampleCard(item, false, /** @type {any} */ (urls));
    assert.match(card.textContent, /target 1\.5/);
    assert.match(card.textContent, /output 2\.25/);
    assert.match(card.textContent, /true <b>two<\/b>/); // text from data stays text
    assert.ok(!String(card.className).includes("nbviz-wrong")); // a label and no prediction
  });

  it("the detail lists the loss and step without a prediction", () => {
    const lines = detailLines({ id: 4, evaluated: true, loss: 0.1, step: 30 });
    assert.deepEqual(lines.map(([k]) => k), ["id", "loss", "step"]);
  });
});

describe("the projector without classes", () => {
  withDocument();
  const points = {
    n: 3,
    label: Uint8Array.from([255, 255, 255]),
    pred: Uint8Array.from([255, 255, 255]),
    confidence: Uint8Array.from([255, 255, 255]),
    loss: Uint8Array.from([0, 127, 254]),
    target: Uint8Array.from([254, 0, 255]),
    n_classes: 0,
    missing: 255,
    has_labels: false,
    has_predictions: false,
    has_loss: true,
    has_target: true,
  };

  it("offers loss, target and one colour, not the colourings of classes", () => {
    const offered = ["label", "prediction", "correct", "confidence", "loss", "target", "none"].filter((m) => colourAvailable(m, points));
    assert.deepEqual(offered, ["loss", "target", "none"]);
  });

  it("colours by target value over its range, unknown targets grey", () => {
    const { codes, colors } = colourCodes("target", points);
    assert.deepEqual([...codes], [31, 0, 32]);
    assert.equal(colors.length, 33);
  });

  it("the target legend names the ends of the range", () => {
    const { colors } = colourCodes("target", points);
    const items = legendItems("target", colors, [], 1, true, [2.5, 7]);
    assert.deepEqual(items.map((n) => n.textContent), ["target 2.5", "target 7", "unknown"]);
  });
});
