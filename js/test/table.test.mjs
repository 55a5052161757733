import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compareCells, nextSort, sortableTable, sortRows } from "../lib/table.js";
import { find, rowsOf, withDocument } from "./fake_dom.mjs";

describe("sorting", () => {
  it("compareCells sorts numbers numerically and missing values last either way", () => {
    const values = [3, null, 10, Number.NaN, 2, ""];
    const up = [...values].sort((a, b) => compareCells(a, b, false));
    const down = [...values].sort((a, b) => compareCells(a, b, true));
    assert.deepEqual(up.slice(0, 3), [2, 3, 10]);
    assert.deepEqual(down.slice(0, 3), [10, 3, 2]);
    for (const sorted of [up, down]) assert.ok(sorted.slice(3).every((v) => v === null || v === "" || Number.isNaN(v)));
  });

  it("compareCells sorts text in natural order", () => {
    assert.deepEqual(["lr10", "lr9", "lr1"].sort((a, b) => compareCells(a, b, false)), ["lr1", "lr9", "lr10"]);
  });

  it("sortRows is stable: ties keep the given order in both directions", () => {
    const rows = [
      { id: "a", v: 1 },
      { id: "b", v: 2 },
      { id: "c", v: 1 },
      { id: "d", v: 2 },
    ];
    assert.deepEqual(sortRows(rows, (r) => r.v, false).map((r) => r.id), ["a", "c", "b", "d"]);
    assert.deepEqual(sortRows(rows, (r) => r.v, true).map((r) => r.id), ["b", "d", "a", "c"]);
    assert.deepEqual(rows.map((r) => r.id), ["a", "b", "c", "d"], "the input is left as it was");
  });

  it("nextSort turns the sorted column round and starts another in its own direction", () => {
    assert.deepEqual(nextSort("loss", { sortBy: "loss", descending: false }, false), { sortBy: "loss", descending: true });
    assert.deepEqual(nextSort("acc", { sortBy: "loss", descending: false }, true), { sortBy: "acc", descending: true });
    assert.deepEqual(nextSort("name", { sortBy: "loss", descending: true }, false), { sortBy: "name", descending: false });
  });
});

describe("sortableTable", () => {
  withDocument();

  const rows = [
    { name: "<b>beta</b>", score: 0.5, n: 3 },
    { name: "alpha", score: 0.9, n: 1 },
    { name: "gamma", score: null, n: 2 },
  ];
  const columns = [
    { key: "name", label: "name", class: "text" },
    { key: "score", label: "score", cell: (r) => (r.score === null ? "" : r.score.toFixed(2)) },
    { key: "n", label: "count", sortValue: (r) => -r.n, cell: (r) => ({ text: String(r.n), title: `${r.n} runs`, class: "num" }) },
  ];

  it("sorts the rows by the sorted column, missing values last, and marks that header", () => {
    const table = sortableTable({ class: "t", columns, rows, sortBy: "score", descending: true, onSort: () => {} });
    const body = rowsOf(table).slice(1);
    assert.deepEqual(body.map((tr) => tr.children[0].textContent), ["alpha", "<b>beta</b>", "gamma"]);
    const ths = find(table, (n) => n.tagName === "TH");
    assert.deepEqual(ths.map((th) => th.textContent), ["name", "score \u25bc", "count"]);
    assert.deepEqual(ths.map((th) => th.getAttribute("aria-sort")), [null, "descending", null]);
    assert.equal(ths[0].getAttribute("title"), "sort by name");
  });

  it("sorts by a column's sortValue when it has one", () => {
    const table = sortableTable({ columns, rows, sortBy: "n", descending: false, onSort: () => {} });
    assert.deepEqual(rowsOf(table).slice(1).map((tr) => tr.children[2].textContent), ["3", "2", "1"]);
  });

  it("puts text from data in as text, with the column's and the cell's classes", () => {
    const table = sortableTable({ columns, rows });
    const first = rowsOf(table)[1];
    assert.equal(first.children[0].textContent, "<b>beta</b>");
    assert.equal(first.children[0].children.length, 0, "no markup was parsed");
    assert.ok(first.children[0].classList.contains("text"));
    assert.ok(find(table, (n) => n.tagName === "TH")[0].classList.contains("text"));
    assert.ok(first.children[2].classList.contains("num"));
    assert.equal(first.children[2].getAttribute("title"), "3 runs");
  });

  it("a header click asks for that column; a row click reports its row", () => {
    const sorted = [];
    const clicked = [];
    const table = sortableTable({ columns, rows, onSort: (key) => sorted.push(key), onRow: (r) => clicked.push(r.name) });
    find(table, (n) => n.tagName === "TH")[1].fire("click");
    rowsOf(table)[2].children[1].fire("click");
    assert.deepEqual(sorted, ["score"]);
    assert.deepEqual(clicked, ["alpha"]);
  });

  it("without onSort the headers neither sort nor show arrows; rows keep their order", () => {
    const table = sortableTable({ columns, rows, sortBy: "score" });
    const ths = find(table, (n) => n.tagName === "TH");
    assert.deepEqual(ths.map((th) => th.textContent), ["name", "score", "count"]);
    assert.ok(ths.every((th) => th.getAttribute("aria-sort") === null && th.getAttribute("title") === null));
  });

  it("rows get their classes and attributes; head: false leaves the header out", () => {
    const table = sortableTable({
      columns,
      rows,
      head: false,
      rowClass: (r) => (r.n === 1 ? "nbviz-active" : null),
      rowAttrs: (r) => ({ "data-name": r.name }),
    });
    const trs = rowsOf(table);
    assert.equal(trs.length, 3);
    assert.deepEqual(trs.map((tr) => tr.getAttribute("data-name")), ["<b>beta</b>", "alpha", "gamma"]);
    assert.deepEqual(trs.map((tr) => tr.classList.contains("nbviz-active")), [false, true, false]);
  });
});
