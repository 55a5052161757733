import assert from "node:assert/strict";
import { describe, it } from "node:test";
import gallery from "../gallery.js";
import { detailLines, layerLine, topKRows } from "../lib/gallery/detail.js";
import { bytesOf } from "../lib/images.js";
import { FakeNode, fakeModel, find, rowsOf, withDocument } from "./fake_dom.mjs";

const f4 = (values, shape = [values.length]) => {
  const data = new Float32Array(values);
  return { data: new DataView(data.buffer), dtype: "<f4", shape };
};

describe("helpers", () => {
  it("bytesOf reads DataViews, typed arrays and ArrayBuffers, and nothing else", () => {
    const bytes = new Uint8Array([1, 2, 3, 4]);
    assert.deepEqual([...bytesOf(new DataView(bytes.buffer, 1, 2))], [2, 3]);
    assert.deepEqual([...bytesOf(bytes)], [1, 2, 3, 4]);
    assert.deepEqual([...bytesOf(bytes.buffer)], [1, 2, 3, 4]);
    assert.equal(bytesOf(null), null);
    assert.equal(bytesOf("png"), null);
  });

  it("topKRows gives percentages and bar widths, clamped to 0..100%", () => {
    const rows = topKRows([
      { class: 3, name: "three", p: 0.875 },
      { class: 1, name: "one", p: 0.0123 },
      { class: 2, name: "two", p: 1.2 },
      { class: 0, name: "zero", p: NaN },
    ]);
    assert.deepEqual(
      rows.map((r) => [r.name, r.text, r.width, r.cls]),
      [
        ["three", "87.5%", "87.5%", 3],
        ["one", "1.23%", "1.2%", 1],
        ["two", "100.0%", "100.0%", 2],
        ["zero", "0.0%", "0.0%", 0],
      ],
    );
    assert.deepEqual(topKRows(undefined), []);
  });

  it("detailLines list the label and, once evaluated, the prediction", () => {
    assert.deepEqual(detailLines({ id: 4, label: 1, label_name: "one", evaluated: false }), [
      ["id", "#4"],
      ["true", "one"],
    ]);
    const lines = detailLines({ id: 4, label: 1, evaluated: true, pred: 7, pred_name: "seven", confidence: 0.5, loss: 2, step: 30, shape: [8, 8] });
    assert.deepEqual(
      lines.map(([k]) => k),
      ["id", "true", "pred", "confidence", "loss", "step", "shape"],
    );
    assert.deepEqual(lines[2], ["pred", "seven"]);
    assert.deepEqual(lines.at(-1), ["shape", "[8, 8]"]);
  });

  it("detailLines say '-' for a prediction logged as a class, without confidence or loss", () => {
    const lines = detailLines({ id: 2, label: 3, evaluated: true, pred: 3, confidence: null, loss: null, step: 1 });
    assert.deepEqual(lines.slice(3, 5), [["confidence", "-"], ["loss", "-"]]);
  });

  it("detailLines say 'no tokens counted' for a language model's sample that is all padding", () => {
    const lines = detailLines({ id: 2, evaluated: true, loss: null, loss_note: "no tokens counted", step: 1 });
    assert.deepEqual(lines.slice(1, 2), [["loss", "no tokens counted"]]);
    const nan = detailLines({ id: 3, evaluated: true, loss: null, nonfinite: { loss: "NaN" }, step: 1 });
    assert.deepEqual(nan.slice(1, 2), [["loss", "NaN"]]);
  });

  it("layerLine leaves out statistics that are missing", () => {
    const text = layerLine({ layer: "conv1", type: "Conv2d", shape: [16, 8, 8], mean: 0.5, std: null, min: 0, max: 2, zero_frac: 0.25, note: "" });
    assert.equal(text, "conv1 \u00b7 Conv2d \u00b7 [16, 8, 8] \u00b7 mean 0.5 \u00b7 min 0 \u00b7 max 2 \u00b7 zero 25%");
  });
});

describe("render", () => {
  withDocument();

  const traits = () => ({
    ids: [5, 6],
    items: [
      { id: 5, kind: "text", text: "<img src=x onerror=alert(1)>", evaluated: true, label: 0, label_name: "<b>ham</b>", pred: 1, pred_name: "spam", confidence: 0.9, loss: 2.3 },
      { id: 6, kind: "", evaluated: false },
    ],
    page: 0,
    n_pages: 1,
    sort_by: "given",
    descending: true,
    eval_step: 10,
    note: "",
    prompt: "",
    detail: {},
    empty: "",
    error: "",
  });

  it("a card without a counted token says so in the normal colour, a NaN loss in the non-finite one", () => {
    const model = fakeModel({
      ...traits(),
      ids: [7, 8],
      items: [
        { id: 7, kind: "", evaluated: true, loss: null, loss_note: "no tokens counted" },
        { id: 8, kind: "", evaluated: true, loss: null, nonfinite: { loss: "NaN" } },
      ],
    });
    const root = new FakeNode("div");
    gallery.render({ model, el: root });
    const [empty, nan] = find(root, "nbviz-gallery-card").map((c) => find(c, "nbviz-gallery-value")[0]);
    assert.equal(empty.textContent, "no tokens counted");
    assert.ok(!empty.classList.contains("nbviz-nonfinite"));
    assert.equal(nan.textContent, "NaN");
    assert.ok(nan.classList.contains("nbviz-nonfinite"));
  });

  it("a click on a card asks for its detail, a second click closes it", () => {
    const model = fakeModel(traits());
    const root = new FakeNode("div");
    gallery.render({ model, el: root });
    const cards = find(root, "nbviz-gallery-card");
    assert.deepEqual(cards.map((c) => c.getAttribute("data-id")), ["5", "6"]);
    assert.ok(cards[0].classList.contains("nbviz-wrong"));
    // a click on something inside the card bubbles to the grid
    find(cards[0], "nbviz-gallery-text")[0].fire("click");
    assert.equal(model.saved.at(-1).detail_id, 5);
    model.change("detail", { id: 5 });
    return new Promise((resolve) => queueMicrotask(resolve)).then(() => {
      const again = find(root, "nbviz-gallery-card")[0];
      assert.ok(again.classList.contains("nbviz-active"));
      again.fire("click");
      assert.equal(model.saved.at(-1).detail_id, -1);
      find(root, "nbviz-gallery-card")[1].fire("keydown", { key: "Enter" });
      assert.equal(model.saved.at(-1).detail_id, 6);
    });
  });

  it("the detail shows top-k, the layers and their maps, all as text from data", async () => {
    const model = fakeModel(traits());
    const root = new FakeNode("div");
    gallery.render({ model, el: root });
    model.change("detail", {
      id: 5,
      kind: "text",
      text: "<img src=x onerror=alert(1)>",
      evaluated: true,
      step: 10,
      label: 0,
      label_name: "<b>ham</b>",
      pred: 1,
      pred_name: "spam",
      confidence: 0.9,
      loss: 2.3,
      top_k: [
        { class: 1, name: "spam", p: 0.9 },
        { class: 0, name: "<b>ham</b>", p: 0.1 },
      ],
      top_k_note: "",
      units: { layer: "fc", step: 10, values: f4([1, -1, 2]) },
      activations: {
        step: 10,
        steps: [10],
        layers: [
          { layer: "conv", type: "Conv2d", shape: [2, 2, 2], mean: 1, std: 0, min: 0, max: 2, zero_frac: 0, n_units: 2, note: "", units: f4([1, 2]), maps: f4([0, 1, 2, 3, 4, 5, 6, 7], [2, 2, 2]) },
          { layer: "fc", type: "Linear", shape: [3], mean: 0, std: 1, min: -1, max: 2, zero_frac: 0, n_units: 3, note: "", units: f4([1, -1, 2]) },
        ],
      },
      activations_note: "",
    });
    await new Promise((resolve) => queueMicrotask(resolve));
    const box = find(root, "nbviz-gallery-detail")[0];
    assert.notEqual(box.style.display, "none");
    assert.equal(box.getAttribute("data-id"), "5");
    const top = find(box, "nbviz-gallery-topk")[0];
    assert.deepEqual(rowsOf(top).map((tr) => tr.getAttribute("data-class")), ["1", "0"]);
    assert.match(top.textContent, /<b>ham<\/b>10\.0%/);
    assert.equal(find(box, "nbviz-gallery-detail-text")[0].textContent, "<img src=x onerror=alert(1)>");
    const layers = find(box, "nbviz-gallery-layer").filter((n) => n.getAttribute("data-layer"));
    assert.deepEqual(layers.map((n) => n.getAttribute("data-layer")), ["conv", "fc"]);
    assert.equal(find(layers[0], "nbviz-gallery-map").length, 2);
    assert.equal(find(layers[1], "nbviz-gallery-map").length, 0);
    assert.equal(find(box, "nbviz-gallery-pred-wrong")[0].textContent, "spam");
    find(box, "nbviz-gallery-detail-close")[0].fire("click");
    assert.equal(model.saved.at(-1).detail_id, -1);
    model.change("detail", {});
    await new Promise((resolve) => queueMicrotask(resolve));
    assert.equal(box.style.display, "none");
  });

  it("without a capture the detail says how to record one", async () => {
    const model = fakeModel(traits());
    const root = new FakeNode("div");
    gallery.render({ model, el: root });
    model.change("detail", { id: 6, kind: "", evaluated: false, top_k: [], top_k_note: "Sample 6 was not evaluated at step 10.", activations: null, activations_note: "No activations recorded for sample 6: run.capture(...)" });
    await new Promise((resolve) => queueMicrotask(resolve));
    const box = find(root, "nbviz-gallery-detail")[0];
    assert.match(box.textContent, /not evaluated at step 10/);
    assert.equal(find(box, "nbviz-gallery-acts-note")[0].textContent, "No activations recorded for sample 6: run.capture(...)");
  });
});
