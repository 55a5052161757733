import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import { el, message } from "../lib/dom.js";

/** Just enough of a DOM to check what el() and message() build. */
class FakeNode {
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    this.children = [];
    this.attributes = {};
    this.style = {};
    this._text = "";
    const classes = new Set();
    this.classList = {
      add: (...names) => names.forEach((n) => classes.add(n)),
      contains: (n) => classes.has(n),
      values: () => [...classes],
    };
    Object.defineProperty(this, "innerHTML", {
      set() {
        throw new Error("innerHTML must never be used");
      },
    });
  }
  set textContent(v) {
    this._text = v;
    this.children = [];
  }
  get textContent() {
    return this._text + this.children.map((c) => c.textContent).join("");
  }
  setAttribute(name, value) {
    this.attributes[name] = value;
  }
  append(...nodes) {
    this.children.push(...nodes);
  }
  replaceChildren(...nodes) {
    this._text = "";
    this.children = nodes;
  }
}

describe("el and message", () => {
  beforeEach(() => {
    globalThis.document = {
      createElement: (tag) => new FakeNode(tag),
      createTextNode: (text) => ({ textContent: text }),
    };
  });
  afterEach(() => {
    delete globalThis.document;
  });

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
});
