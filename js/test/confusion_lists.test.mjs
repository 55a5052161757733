import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { classErrorsTable, listsCaption, pairsTable } from "../lib/confusion/lists.js";
import { splitMenu, splitOptions } from "../lib/splits.js";
import { fakeModel, find, rowsOf, withDocument } from "./fake_dom.mjs";

const pairs = [
  { true: 17, pred: 42, count: 40, rate: 0.5, true_name: "<b>seventeen</b>", pred_name: "42" },
  { true: 3, pred: 90001, count: 2, rate: 0.04, true_name: "3", pred_name: "90001" },
];
const classes = [
  { class: 17, name: "<b>seventeen</b>", support: 80, errors: 60, error_rate: 0.75, top_pred: 42, top_pred_name: "42", top_count: 40 },
  { class: 9, name: "9", support: 12, errors: 0, error_rate: 0, top_pred: -1, top_pred_name: "", top_count: 0 },
];
const noSort = { sortBy: "", descending: true };

describe("the list mode of a large label set", () => {
  withDocument();

  it("a pair row shows its names as text and selects [true, predicted]", () => {
    const picked = [];
    const table = pairsTable(pairs, [], noSort, () => {}, (r) => picked.push([r.true, r.pred]));
    const body = rowsOf(table).slice(1);
    assert.deepEqual(body[0].children.map((td) => td.textContent), ["<b>seventeen</b>", "42", "40", "50%"]);
    assert.equal(body[0].children[0].children.length, 0, "no markup was parsed");
    body[1].fire("click");
    assert.deepEqual(picked, [[3, 90001]]);
  });

  it("a class row shows its errors and selects [class, -1]; the selected row is marked", () => {
    const picked = [];
    const table = classErrorsTable(classes, [17, -1], noSort, () => {}, (r) => picked.push([r.class, -1]));
    const body = rowsOf(table).slice(1);
    assert.deepEqual(body[0].children.map((td) => td.textContent), ["<b>seventeen</b>", "80", "60", "75%", "42 (40)"]);
    assert.equal(body[1].children[4].textContent, "", "a class never wrong names no other class");
    assert.ok(body[0].classList.contains("nbviz-active") && !body[1].classList.contains("nbviz-active"));
    body[0].fire("click");
    assert.deepEqual(picked, [[17, -1]]);
  });

  it("the caption says how many classes and what is listed", () => {
    const text = listsCaption({ classes: 20000, error_pairs: 947, classes_with_errors: 924 }, 50, 50);
    assert.match(text, /20,000 classes occur: too many for a matrix/);
    assert.match(text, /50 most frequent of 947 confused pairs/);
  });
});

describe("the split menu", () => {
  withDocument();

  it("offers the run's splits, and the current one if it is not among them", () => {
    assert.deepEqual(splitOptions(["test", "val"], "val"), [["test", "test"], ["val", "val"]]);
    assert.deepEqual(splitOptions([], "val"), [["val", "val"]]);
    assert.deepEqual(splitOptions(["test"], "holdout"), [["test", "test"], ["holdout", "holdout"]]);
  });

  it("is hidden with one split, and a choice saves the split", () => {
    const model = fakeModel({ split: "test", splits: ["test"] });
    const menu = splitMenu(model);
    assert.equal(menu.el.style.display, "none");
    model.set("splits", ["test", "train"]);
    menu.draw();
    assert.equal(menu.el.style.display, "");
    const select = find(menu.el, (n) => n.tagName === "SELECT")[0];
    assert.deepEqual(find(select, (n) => n.tagName === "OPTION").map((o) => o.textContent), ["test", "train"]);
    select.value = "train";
    select.fire("change");
    assert.equal(model.saved.at(-1).split, "train");
    menu.stop();
  });
});
