import { after, before } from "node:test";

// Just enough of a DOM for the views' render() and the shared pieces in node:
// elements with text, classes, attributes, events that bubble, a 2d context that
// draws nothing, and innerHTML that throws (text from data must never be parsed).
// Also a widget model that records what the view saved.

export class FakeNode {
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    this.children = [];
    this.attributes = {};
    this.style = {};
    this.dataset = {};
    this.parentNode = null;
    this.listeners = {};
    this.disabled = false;
    this.hidden = false;
    this._text = "";
    const classes = new Set();
    this.classList = {
      add: (...names) => names.forEach((n) => classes.add(n)),
      remove: (...names) => names.forEach((n) => classes.delete(n)),
      toggle: (n, on) => ((on ?? !classes.has(n)) ? classes.add(n) : classes.delete(n)),
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
    this._text = String(v);
    this.children = [];
  }
  get textContent() {
    return this._text + this.children.map((c) => c.textContent).join("");
  }
  setAttribute(name, value) {
    this.attributes[name] = String(value);
  }
  getAttribute(name) {
    return this.attributes[name] ?? null;
  }
  removeAttribute(name) {
    delete this.attributes[name];
  }
  /** Like the DOM: a node that had a parent moves here. */
  append(...nodes) {
    for (const n of nodes) {
      const node = typeof n === "string" ? new FakeText(n) : n;
      if (node.parentNode && node.parentNode !== this) node.parentNode.children = node.parentNode.children.filter((c) => c !== node);
      node.parentNode = this;
      this.children.push(node);
    }
  }
  replaceChildren(...nodes) {
    for (const old of this.children) old.parentNode = null;
    this._text = "";
    this.children = [];
    this.append(...nodes);
  }
  remove() {
    if (this.parentNode) this.parentNode.children = this.parentNode.children.filter((c) => c !== this);
    this.parentNode = null;
  }
  contains(node) {
    return node === this || this.children.some((c) => c.contains && c.contains(node));
  }
  closest(selector) {
    const cls = selector.slice(1);
    for (let n = this; n; n = n.parentNode) if (n.classList && n.classList.contains(cls)) return n;
    return null;
  }
  /** ".cls" or "tag.cls" or "tag" selectors only. */
  querySelectorAll(selector) {
    const [tag, cls] = selector.includes(".") ? selector.split(".") : [selector, ""];
    return find(this, (n) => (!tag || n.tagName === tag.toUpperCase()) && (!cls || n.classList?.contains(cls))).filter((n) => n !== this);
  }
  addEventListener(type, fn) {
    (this.listeners[type] ??= []).push(fn);
  }
  removeEventListener(type, fn) {
    this.listeners[type] = (this.listeners[type] ?? []).filter((f) => f !== fn);
  }
  getContext() {
    return fakeContext();
  }
  getBoundingClientRect() {
    return { left: 0, top: 0, width: 100, height: 100 };
  }
  /** Fire an event here and let it bubble up, as a click does. */
  fire(type, extra = {}) {
    const event = { type, target: this, preventDefault() {}, stopPropagation() {}, ...extra };
    for (let n = this; n; n = n.parentNode) for (const fn of n.listeners?.[type] ?? []) fn(event);
  }
}

export class FakeText {
  constructor(text) {
    this.textContent = String(text);
    this.parentNode = null;
  }
}

/** A 2d context that draws nothing: every method is a no-op, image data is real. */
export function fakeContext() {
  return new Proxy(
    { createImageData: (w, h) => ({ data: new Uint8ClampedArray(4 * w * h) }) },
    { get: (target, name) => (name in target ? target[name] : () => {}) },
  );
}

/** Install the fake as globalThis.document; returns the function that removes it. */
export function installDocument() {
  globalThis.document = {
    createElement: (tag) => new FakeNode(tag),
    createTextNode: (text) => new FakeText(text),
  };
  return () => {
    delete globalThis.document;
  };
}

/** Install the fake document for the tests of the current suite (call inside describe). */
export function withDocument() {
  let uninstall = () => {};
  before(() => {
    uninstall = installDocument();
  });
  after(() => uninstall());
}

/**
 * All nodes under `root` (itself included) that match: a class name, or a predicate.
 * @param {FakeNode} root
 * @param {string | ((n: any) => boolean)} match
 */
export function find(root, match) {
  const ok = typeof match === "string" ? (n) => n.classList?.contains(match) : match;
  const out = [];
  const walk = (n) => {
    if (ok(n)) out.push(n);
    for (const c of n.children ?? []) walk(c);
  };
  walk(root);
  return out;
}

/** The rows (<tr>) of a table, in order. */
export const rowsOf = (table) => find(table, (n) => n.tagName === "TR");

/** A widget model: traits, change events, and what the view saved. */
export function fakeModel(traits) {
  const values = { ...traits };
  const handlers = {};
  const saved = [];
  return {
    saved,
    handlers,
    get: (name) => values[name],
    set: (name, value) => {
      values[name] = value;
    },
    save_changes: () => saved.push({ ...values }),
    on: (event, fn) => (handlers[event] ??= []).push(fn),
    off: (event, fn) => {
      handlers[event] = (handlers[event] ?? []).filter((f) => f !== fn);
    },
    send: () => {},
    /** Python changes a trait: listeners run. */
    change(name, value) {
      values[name] = value;
      for (const fn of handlers[`change:${name}`] ?? []) fn();
    },
  };
}

/** Let queued microtasks (batched redraws, awaited promises) run. */
export const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
