// The runtime of a saved nbviz page (widget.save_html / `nbviz report`): shows the
// recorded widgets with no kernel, no server and no network.
//
// The page embeds one JSON document (see js/lib/offline.js for its shape) and a
// small bootstrap that imports this module from a blob: URL and calls start().
// Each anywidget view's bundle is imported the same way and rendered with the
// anywidget API over an OfflineModel; ipywidgets containers (VBox, HBox, Box) and
// HTML/Label are drawn here. Text from data goes in with textContent only.
import { el } from "./lib/dom.js";
import { Runtime } from "./lib/offline.js";
import { message, showFailure } from "./lib/state.js";

/** Tags an HTML widget may keep in a saved page; everything else becomes its text. */
const SAFE_TAGS = new Set(["B", "I", "EM", "STRONG", "SMALL", "CODE", "BR", "P", "SPAN", "DIV", "H1", "H2", "H3", "H4", "UL", "OL", "LI"]);

/**
 * Copy `html` into `root` keeping only SAFE_TAGS, without attributes (no scripts,
 * no handlers, no links out of the page).
 * @param {HTMLElement} root
 * @param {string} html
 */
export function safeHtml(root, html) {
  const doc = new DOMParser().parseFromString(String(html ?? ""), "text/html");
  /** @param {Node} src @param {Node} dst */
  const copy = (src, dst) => {
    for (const child of src.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) dst.appendChild(document.createTextNode(child.textContent ?? ""));
      else if (child.nodeType === Node.ELEMENT_NODE) {
        const tag = /** @type {Element} */ (child).tagName;
        if (tag === "SCRIPT" || tag === "STYLE") continue;
        if (SAFE_TAGS.has(tag)) {
          const node = document.createElement(tag);
          copy(child, node);
          dst.appendChild(node);
        } else copy(child, dst);
      }
    }
  };
  root.replaceChildren();
  copy(doc.body, root);
}

const LAYOUT_STYLES = ["width", "height", "min_width", "max_width", "min_height", "max_height", "margin", "padding", "border", "flex", "align_items", "justify_content", "overflow", "display", "flex_flow", "grid_gap"];

/** @param {HTMLElement} node @param {any} layout */
function applyLayout(node, layout) {
  if (!layout || !layout.attrs) return;
  for (const name of LAYOUT_STYLES) {
    const v = layout.get(name);
    if (v !== null && v !== undefined && v !== "") node.style.setProperty(name.replace(/_/g, "-"), String(v));
  }
}

/**
 * Start the page: models from `data`, the root view rendered into `host`.
 * @param {any} data  the page's JSON document
 * @param {HTMLElement} host
 * @param {{status?: HTMLElement}} [options]  status: where notices are written
 * @returns {Promise<Runtime>}
 */
export async function start(data, host, options = {}) {
  const status = options.status ?? null;
  /** @type {Set<string>} */
  const said = new Set();
  const notice = (/** @type {string} */ text) => {
    if (!status || said.has(text)) return;
    said.add(text);
    if (said.size > 6) return;
    status.append(el("div", { class: "nbviz-report-notice", text }));
    status.hidden = false;
  };
  const runtime = new Runtime(data, { notice });
  const assets = data.assets ?? {};
  /** @type {Map<string, Promise<any>>} */
  const modules = new Map();
  /** @type {Set<string>} */
  const styled = new Set();
  /** @type {Map<string, Promise<void>>} */
  const initialized = new Map();

  const loadModule = (/** @type {string} */ hash) => {
    let p = modules.get(hash);
    if (!p) {
      const code = assets[hash];
      if (typeof code !== "string") throw new Error(`nbviz offline page: bundle ${hash} is missing`);
      const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
      p = import(url).then(async (mod) => {
        let widget = mod.default ?? mod;
        if (typeof widget === "function") widget = await widget();
        return widget;
      });
      modules.set(hash, p);
    }
    return p;
  };

  const addCss = (/** @type {string | null} */ hash) => {
    if (!hash || styled.has(hash)) return;
    styled.add(hash);
    const style = document.createElement("style");
    style.textContent = String(assets[hash] ?? "");
    document.head.appendChild(style);
  };

  const experimental = {
    invoke: async () => {
      throw new Error("nbviz offline page: no kernel to invoke");
    },
  };

  /**
   * A view of `model`: {el, remove}, like the widget manager's create_view.
   * @param {import("./lib/offline.js").OfflineModel} model
   */
  const createView = async (model) => {
    const spec = data.models.find((/** @type {any} */ m) => m.id === model.model_id);
    const node = el("div", { attrs: { "data-nbviz-model": model.model_id, "data-nbviz-name": model.name } });
    for (const cls of model.get("_dom_classes") ?? []) node.classList.add(String(cls));
    /** @type {Array<() => void>} */
    const cleanups = [];
    /** @type {any[]} */
    const children = [];
    const layoutRef = model.get("layout");
    if (typeof layoutRef === "string" && layoutRef.startsWith("IPY_MODEL_")) {
      const layout = runtime.models.get(layoutRef.slice(10));
      if (layout) applyLayout(node, layout);
    }
    try {
      if (spec && spec.esm) {
        node.classList.add("nbviz-report-view");
        addCss(spec.css);
        const widget = await loadModule(spec.esm);
        if (!initialized.has(model.model_id)) {
          initialized.set(model.model_id, Promise.resolve(widget.initialize?.({ model, experimental })));
        }
        await initialized.get(model.model_id);
        const cleanup = await widget.render?.({ model, el: node, experimental });
        if (typeof cleanup === "function") cleanups.push(cleanup);
      } else if (/^(VBox|HBox|Box|GridBox)Model$/.test(model.name)) {
        node.style.display = model.name === "GridBoxModel" ? "grid" : "flex";
        node.style.flexDirection = model.name === "HBoxModel" ? "row" : "column";
        node.style.gap = "4px";
        for (const ref of model.get("children") ?? []) {
          if (typeof ref !== "string" || !ref.startsWith("IPY_MODEL_")) continue;
          const child = await createView(runtime.model(ref.slice(10)));
          children.push(child);
          node.appendChild(child.el);
        }
      } else if (model.name === "HTMLModel" || model.name === "HTMLMathModel") {
        safeHtml(node, model.get("value"));
        const redraw = () => safeHtml(node, model.get("value"));
        model.on("change:value", redraw);
        cleanups.push(() => model.off("change:value", redraw));
      } else if (model.name === "LabelModel") {
        node.textContent = String(model.get("value") ?? "");
      } else {
        message(node, `${model.name.replace(/Model$/, "")} widgets cannot be shown in a saved page.`, { kind: "warning" });
      }
    } catch (err) {
      showFailure(node, "Rendering this view", err);
    }
    return {
      el: node,
      remove() {
        for (const c of children) c.remove();
        for (const fn of cleanups) fn();
        node.remove();
      },
    };
  };

  runtime.manager.create_view = createView;
  const root = await createView(runtime.model(data.root));
  host.replaceChildren(root.el);
  host.setAttribute("data-nbviz-ready", "true");
  return runtime;
}

export default { start };
