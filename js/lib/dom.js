// Small DOM helpers. Text always goes in through textContent: labels, class
// names and layer names come from data and must never be parsed as HTML.

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
 * Replace the contents of `root` with a readable message: an empty state
 * ("No predictions logged yet"), a note, or an error.
 * @param {HTMLElement} root
 * @param {string} text
 * @param {{kind?: "info" | "empty" | "warning" | "error"}} [options]
 * @returns {HTMLElement} the message element
 */
export function message(root, text, options = {}) {
  const kind = options.kind ?? "info";
  const box = el(
    "div",
    {
      class: ["nbviz-message", `nbviz-message-${kind}`],
      attrs: { role: kind === "error" ? "alert" : "status" },
    },
    [el("span", { class: "nbviz-message-text", text: text ?? "" })],
  );
  root.replaceChildren(box);
  return box;
}

/**
 * @template {(...args: any[]) => void} F
 * @typedef {((...args: Parameters<F>) => void) & {cancel: () => void, flush: () => void,
 *   pending: () => boolean}} Throttled
 */

/**
 * Throttle `fn` to at most one call every `ms` milliseconds: the first call
 * runs at once, later calls inside the window collapse into one trailing call
 * with the latest arguments. Make one per widget instance (never share one at
 * module level), and cancel it in the view's cleanup.
 * @template {(...args: any[]) => void} F
 * @param {F} fn
 * @param {number} ms
 * @returns {Throttled<F>}
 */
export function throttle(fn, ms) {
  let last = Number.NEGATIVE_INFINITY;
  /** @type {ReturnType<typeof setTimeout> | null} */
  let timer = null;
  /** @type {any[] | null} */
  let queued = null;

  const fire = () => {
    timer = null;
    const args = queued;
    queued = null;
    last = Date.now();
    if (args) fn(...args);
  };

  const throttled = /** @type {Throttled<F>} */ (
    (...args) => {
      queued = args;
      const wait = last + ms - Date.now();
      if (wait <= 0 && timer === null) {
        fire();
      } else if (timer === null) {
        timer = setTimeout(fire, Math.max(0, wait));
      }
    }
  );
  throttled.cancel = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    queued = null;
  };
  throttled.flush = () => {
    if (timer !== null) {
      clearTimeout(timer);
      fire();
    }
  };
  throttled.pending = () => timer !== null;
  return throttled;
}
