import assert from "node:assert/strict";
import { describe, it, test } from "node:test";
import { AXIS_TEXT_MAX, axisLabel, axisScale, clipText, cutTextAt, drawParallel, fitText, leftMargin, placeAxes } from "../lib/parallel.js";
import runsTable, { bestRow, runCell } from "../runs_table.js";
import { fakeModel, find, rowsOf, withDocument } from "./fake_dom.mjs";

test("bestRow follows the column's direction and skips non-numbers", () => {
  const rows = [{ cells: { m: 0.5 } }, { cells: { m: null } }, { cells: { m: 0.9 } }];
  assert.equal(bestRow(/** @type {any} */ (rows), /** @type {any} */ ({ key: "m", better: "min" })), 0);
  assert.equal(bestRow(/** @type {any} */ (rows), /** @type {any} */ ({ key: "m", better: "max" })), 2);
  assert.equal(bestRow([], /** @type {any} */ ({ key: "m", better: "max" })), -1);
});

test("runCell gives the best value's step and flags NaN/Inf in the series", () => {
  const row = /** @type {any} */ ({ name: "a", cells: { "best:loss": 0.25, "final:loss": null }, steps: { "best:loss": 1200 }, nonfinite: { "final:loss": 3 } });
  assert.deepEqual(runCell(row, /** @type {any} */ ({ key: "best:loss", kind: "best" }), true), {
    text: "0.25 @1,200",
    class: ["nbviz-rt-best"],
    title: "at step 1,200",
  });
  assert.deepEqual(runCell(row, /** @type {any} */ ({ key: "final:loss", kind: "final" }), false), {
    text: "NaN",
    class: ["nbviz-rt-bad"],
    title: "3 NaN/Inf value(s) in this series",
  });
});

test("runCell says a series that ended non-finite, counted, before its last finite value", () => {
  const row = /** @type {any} */ ({
    name: "a",
    cells: { "final:loss": 1.25, "final:acc": 0.5 },
    steps: { "final:loss": 7, "final:acc": 9 },
    nonfinite: { "final:loss": 12, "final:acc": 2 },
    ends: { "final:loss": { value: "NaN", step: 19 } },
  });
  assert.equal(runCell(row, /** @type {any} */ ({ key: "final:loss", kind: "final" }), false).text, "ends NaN @19 (12 NaN/Inf; last finite 1.25 @7)");
  // NaN/Inf inside a series that ends finite: the value, with the count beside it
  assert.equal(runCell(row, /** @type {any} */ ({ key: "final:acc", kind: "final" }), false).text, "0.5 (2 NaN/Inf)");
  const never = /** @type {any} */ ({ name: "b", cells: { "final:loss": null }, steps: {}, nonfinite: { "final:loss": 3 }, ends: { "final:loss": { value: "+Inf", step: 2 } } });
  assert.equal(runCell(never, /** @type {any} */ ({ key: "final:loss", kind: "final" }), false).text, "ends +Inf @2 (3 NaN/Inf)");
});

test("a long config value is cut by the table's style and kept whole in the cell's title", () => {
  const row = /** @type {any} */ ({ name: "a", cells: { "config:x": "x".repeat(5000) }, steps: {}, nonfinite: {} });
  const cell = runCell(row, /** @type {any} */ ({ key: "config:x", kind: "config" }), false);
  assert.equal(cell.title?.length, 2000);
});

test("axis texts of the parallel coordinates are cut to a bound with an ellipsis", () => {
  assert.equal(clipText("lr"), "lr");
  const cut = clipText("<img src=x onerror=alert(1)>".repeat(10));
  assert.equal(cut.length, AXIS_TEXT_MAX);
  assert.ok(cut.endsWith("\u2026"));
});

describe("render", () => {
  withDocument();

  const traits = () => ({
    columns: [
      { key: "run", label: "run", kind: "run" },
      { key: "config:lr", label: "lr", kind: "config" },
      { key: "best:loss", label: "best loss", kind: "best", better: "min" },
    ],
    rows: [
      { name: "lr0.3", cells: { run: "lr0.3", "config:lr": 0.3, "best:loss": 0.5 }, steps: {}, nonfinite: {} },
      { name: "lr0.1", cells: { run: "lr0.1", "config:lr": 0.1, "best:loss": 0.2 }, steps: {}, nonfinite: {} },
      { name: "<b>x</b>", cells: { run: "<b>x</b>", "config:lr": 1, "best:loss": null }, steps: {}, nonfinite: {} },
    ],
    sort_by: "",
    descending: false,
    selected: "",
    empty: "",
    error: "",
  });

  it("a header click sorts a metric best first, then turns it round; the best cell is marked", () => {
    const model = fakeModel(traits());
    const root = /** @type {any} */ (document.createElement("div"));
    runsTable.render({ model, el: root });
    const header = () => find(root, (n) => n.tagName === "TH");
    header()[2].fire("click");
    assert.deepEqual(model.saved.at(-1), { ...model.saved.at(-1), sort_by: "best:loss", descending: false });
    model.change("sort_by", "best:loss");
    assert.deepEqual(rowsOf(root).slice(1).map((tr) => tr.getAttribute("data-run")), ["lr0.1", "lr0.3", "<b>x</b>"]);
    assert.equal(find(root, "nbviz-rt-best")[0].textContent, "0.2");
    header()[2].fire("click");
    assert.equal(model.saved.at(-1).descending, true);
  });

  it("run names stay text; an empty run list says why instead of a blank table", () => {
    const model = fakeModel(traits());
    const root = /** @type {any} */ (document.createElement("div"));
    runsTable.render({ model, el: root });
    assert.equal(rowsOf(root)[3].children[0].textContent, "<b>x</b>");
    model.change("empty", "No runs given.");
    assert.equal(root.textContent, "No runs given.");
    assert.ok(find(root, "nbviz-message-empty").length === 1);
  });
});

describe("parallel coordinates' texts stay inside the canvas", () => {
  const measure = (/** @type {string} */ t) => t.length * 6;
  /** A context that keeps each text drawn with its extent (6 px a character). */
  const textCanvas = () => {
    const texts = [];
    const ctx = new Proxy(
      {
        textAlign: "start",
        measureText: (/** @type {string} */ t) => ({ width: measure(t) }),
        fillText(/** @type {string} */ text, /** @type {number} */ x) {
          const w = measure(text);
          const left = ctx.textAlign === "center" ? x - w / 2 : ctx.textAlign === "right" || ctx.textAlign === "end" ? x - w : x;
          texts.push({ text, left, right: left + w });
        },
      },
      { get: (o, k) => (k in o ? o[k] : () => {}), set: (o, k, v) => ((o[k] = v), true) },
    );
    return { texts, size: () => ctx };
  };
  const long = "optimizer_weight_decay_schedule";
  const axes = [
    { key: "config:a", label: long, kind: "category", lo: 0, hi: 1, categories: ["cosine_with_restarts_warmup", "linear"] },
    { key: "config:b", label: "lr", kind: "number", lo: 0, hi: 1 },
    { key: "final:loss", label: `final ${long}`, kind: "number", lo: 0, hi: 1, metric: true },
  ];

  it("fitText cuts with an ellipsis to the room, and says it cut", () => {
    assert.deepEqual(fitText("lr", 100, measure), { text: "lr", cut: false });
    const got = fitText(long, 60, measure);
    assert.equal(got.text, "optimizer\u2026");
    assert.ok(measure(got.text) <= 60 && got.cut);
    assert.equal(fitText(long, 1, measure).text, "\u2026");
  });

  it("the first axis' name starts inside the canvas; the last ends inside it; none reaches a neighbour's", () => {
    const placed = placeAxes(axes, 400);
    const labels = placed.map((_, k) => axisLabel(placed, k, 400, measure));
    assert.ok(labels[0].left >= 0, JSON.stringify(labels[0]));
    assert.ok(labels[2].right <= 400, JSON.stringify(labels[2]));
    for (let k = 1; k < labels.length; k++) assert.ok(labels[k - 1].right < labels[k].left, `${k}: ${JSON.stringify(labels)}`);
    assert.ok(labels[0].cut && labels[0].text.endsWith("\u2026"));
    assert.deepEqual([labels[1].text, labels[1].cut], ["lr", false]);
  });

  it("the first axis gets room for its tick texts, up to a fifth of the width", () => {
    assert.equal(leftMargin(axes.slice(1), 400, measure), 46, "short numbers: the usual margin");
    assert.equal(leftMargin(axes, 1000, measure), 24 * 6 + 12, "a long category: room for it, cut at 24 characters");
    assert.equal(leftMargin(axes, 400, measure), 80, "a narrow plot: a fifth of it");
  });

  it("drawn, every text is inside the canvas, and the cut ones are whole in the tooltip", () => {
    const { texts, size } = textCanvas();
    const placed = drawParallel(
      /** @type {any} */ ({}),
      {
        axes: /** @type {any} */ (axes),
        coords: [],
        chosen: [],
        brushes: {},
        preview: null,
        width: 400,
        theme: { muted: "#666", grid: "#eee", text: "#000", background: "#fff" },
      },
      /** @type {any} */ (size),
    );
    assert.ok(texts.length >= 5);
    for (const t of texts) assert.ok(t.left >= 0 && t.right <= 400, JSON.stringify(t));
    const name = texts.find((t) => t.text.startsWith("optimiz"));
    assert.ok(name);
    assert.equal(cutTextAt(placed, (name.left + name.right) / 2, 34 - 20), long);
    const tick = texts.find((t) => t.text.startsWith("cos"));
    assert.ok(tick && tick.text.endsWith("\u2026"));
    assert.equal(cutTextAt(placed, tick.right - 2, axisScale(axes[0]).map(0)), "cosine_with_restarts_warmup");
    assert.equal(cutTextAt(placed, 200, 150), "", "nothing cut under the pointer: no tooltip");
  });
});
