import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { el, fillSelect, on } from "../lib/dom.js";
import { message } from "../lib/state.js";
import { FakeNode, withDocument } from "./fake_dom.mjs";

describe("el and message", () => {
  withDocument();

  it("sets classes, text, attributes and children", () => {
    const node = el("div", { class: "a b", text: "<b>x</b>", attrs: { title: "t", hidden: true } }, [
      el("span", { class: ["c"] }),
      "tail",
      null,
    ]);
    assert.deepEqual(node.classList.values(), ["a", "b"]);
    assert.equal(node.textContent, "<b>x</b>tail");
    assert.deepEqual(node.attributes, { title: "t", hidden: "" });
    assert.equal(node.children.length, 2);
  });

  it("refuses event-handler attributes", () => {
    assert.throws(() => el("img", { attrs: { onerror: "alert(1)" } }), /event-handler attribute/);
  });

  it("replaces the contents with a message of the given kind", () => {
    const root = new FakeNode("div");
    root.append(new FakeNode("p"));
    const box = message(root, "No predictions <i>yet</i>", { kind: "empty" });
    assert.deepEqual(root.children, [box]);
    assert.ok(box.classList.contains("nbviz-message-empty"));
    assert.equal(box.attributes.role, "status");
    assert.equal(box.textContent, "No predictions <i>yet</i>");
    assert.equal(message(root, "boom", { kind: "error" }).attributes.role, "alert");
  });

  it("fills a select with options whose texts stay text", () => {
    const select = new FakeNode("select");
    fillSelect(select, [["a", "<b>A</b>"], ["b", "B"]]);
    assert.deepEqual(select.children.map((o) => [o.getAttribute("value"), o.textContent]), [["a", "<b>A</b>"], ["b", "B"]]);
  });

  it("on() listens and returns the function that stops listening", () => {
    const button = new FakeNode("button");
    let clicks = 0;
    const off = on(button, "click", () => clicks++);
    button.fire("click");
    off();
    button.fire("click");
    assert.equal(clicks, 1);
  });
});
