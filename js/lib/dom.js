// Small DOM helpers. Text always goes in through textContent: labels, class
// names and layer names come from data and must never be parsed as HTML.
// Messages in place of a view are in state.js, timing (throttle, once a frame)
// in schedule.js.

/**
 * @typedef {object} ElOptions
 * @property {string | string[]} [class]  class name(s)
 * @property {string | number} [text]  text content (set with textContent)
 * @property {Record<string, string | number | boolean | null | undefined>} [attrs]
 *   attributes; null/undefined/false leave one out, true sets it empty.
 *   Event-handler attributes (on*) are refused: use addEventListener.
 * @property {Partial<CSSStyleDeclaration>} [style]  inline style properties
 */

/**
 * Create an element.
 * @param {string} tag
 * @param {ElOptions} [options]
 * @param {Array<Node | string | number | null | undefined | false>} [children]
 *   nodes, or strings that become text nodes; null/undefined/false are skipped
 * @returns {HTMLElement}
 */
export function el(tag, options = {}, children = []) {
  const node = document.createElement(tag);
  const cls = options.class;
  if (cls) node.classList.add(...(Array.isArray(cls) ? cls : cls.split(/\s+/)).filter(Boolean));
  if (options.text !== undefined && options.text !== null) node.textContent = String(options.text);
  for (const [name, value] of Object.entries(options.attrs ?? {})) {
    if (/^on/i.test(name)) {
      throw new TypeError(`nbviz el: refusing event-handler attribute ${name}; use addEventListener`);
    }
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(name, value === true ? "" : String(value));
  }
  if (options.style) Object.assign(node.style, options.style);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

/**
 * Listen to `type` events on `target`; returns the function that stops it, for
 * the cleanup a view's render() returns.
 * @param {EventTarget} target
 * @param {string} type
 * @param {(event: any) => void} fn
 * @param {boolean | AddEventListenerOptions} [options]
 * @returns {() => void}
 */
export function on(target, type, fn, options) {
  target.addEventListener(type, fn, options);
  return () => target.removeEventListener(type, fn, options);
}

/**
 * Replace the options of a <select> with [value, text] pairs (texts from data
 * stay text).
 * @param {HTMLSelectElement} select
 * @param {ReadonlyArray<readonly [string, string]>} options
 */
export function fillSelect(select, options) {
  select.replaceChildren(...options.map(([value, text]) => el("option", { text, attrs: { value } })));
}

/**
 * A <select> with an accessible name and [value, text] options.
 * @param {string} cls
 * @param {string} label  its aria-label
 * @param {ReadonlyArray<readonly [string, string]>} [options]
 * @returns {HTMLSelectElement}
 */
export function select(cls, label, options = []) {
  const node = /** @type {HTMLSelectElement} */ (el("select", { class: cls, attrs: { "aria-label": label } }));
  fillSelect(node, options);
  return node;
}
