// SampleGallery: a page of cards, one per sample id: the sample as logged (PNG
// thumbnail, text, or the first values of an array row) with its true label,
// the prediction, the confidence and the loss. Sorting and paging are done by
// Python (only the page in view travels); every text goes in with textContent.
import { el, message } from "./lib/dom.js";
import { formatNumber } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { decodeArray } from "./lib/wire.js";

/**
 * Bytes of a binary trait value (DataView from the widget manager, or a typed array).
 * @param {any} data
 * @returns {Uint8Array | null}
 */
function bytesOf(data) {
  if (!data) return null;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

/**
 * One line of a card: "label value", the value in its own span.
 * @param {string} label
 * @param {string} value
 * @param {string} [cls]
 */
function line(label, value, cls) {
  return el("div", { class: "nbviz-gallery-line", attrs: { title: `${label} ${value}` } }, [
    el("span", { class: "nbviz-muted", text: `${label} ` }),
    el("span", { class: cls ?? "", text: value }),
  ]);
}

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-gallery");
  const count = el("span", { class: "nbviz-gallery-count" });
  const sortSelect = /** @type {HTMLSelectElement} */ (
    el("select", { class: "nbviz-gallery-sort", attrs: { "aria-label": "sort by" } }, [
      el("option", { text: "given order", attrs: { value: "given" } }),
      el("option", { text: "loss", attrs: { value: "loss" } }),
      el("option", { text: "confidence", attrs: { value: "confidence" } }),
    ])
  );
  const direction = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-direction", attrs: { type: "button" } })
  );
  const prev = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-prev", text: "\u2039 prev", attrs: { type: "button" } })
  );
  const next = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-next", text: "next \u203a", attrs: { type: "button" } })
  );
  const pageText = el("span", { class: "nbviz-gallery-page" });
  const evalText = el("span", { class: "nbviz-notice nbviz-gallery-eval" });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    count,
    el("label", {}, ["sort by", sortSelect]),
    direction,
    el("span", {}, [prev, " ", pageText, " ", next]),
    evalText,
  ]);
  const note = el("div", { class: "nbviz-notice nbviz-gallery-note" });
  const grid = el("div", { class: "nbviz-gallery-grid" });
  const body = el("div", {}, [toolbar, note, grid]);

  /** @type {string[]} */
  let urls = [];
  const releaseUrls = () => {
    for (const u of urls) URL.revokeObjectURL(u);
    urls = [];
  };

  /** @param {any} item */
  const card = (item) => {
    const wrong = item.evaluated && item.label !== undefined && item.pred !== item.label;
    const node = el("div", {
      class: ["nbviz-gallery-card", wrong ? "nbviz-wrong" : ""],
      attrs: { "data-id": item.id },
    });
    if (item.kind === "image") {
      const bytes = bytesOf(item.png);
      if (bytes) {
        const url = URL.createObjectURL(new Blob([bytes.slice()], { type: "image/png" }));
        urls.push(url);
        node.append(el("img", { class: "nbviz-gallery-thumb", attrs: { src: url, alt: `sample ${item.id}` } }));
      }
    } else if (item.kind === "text") {
      node.append(el("pre", { class: "nbviz-gallery-text", text: item.text ?? "" }));
    } else if (item.kind === "array" && item.values) {
      const values = Array.from(decodeArray(item.values).data, (v) => formatNumber(Number(v)));
      const more = item.size > values.length ? ` \u2026 (${item.size} values)` : "";
      node.append(el("div", { class: "nbviz-gallery-values", text: `[${values.join(", ")}${more}]` }));
    }
    node.append(el("div", { class: "nbviz-gallery-line nbviz-gallery-id", text: `#${item.id}` }));
    if (item.label !== undefined) node.append(line("true", item.label_name ?? String(item.label)));
    if (item.evaluated) {
      node.append(
        line("pred", item.pred_name ?? String(item.pred), wrong ? "nbviz-gallery-pred-wrong" : ""),
        el("div", {
          class: "nbviz-gallery-num",
          text: `conf ${formatNumber(item.confidence)} \u00b7 loss ${formatNumber(item.loss)}`,
        }),
      );
    } else {
      node.append(el("div", { class: "nbviz-gallery-num", text: "not evaluated at this step" }));
    }
    return node;
  };

  const draw = () => {
    const error = model.get("error");
    const empty = model.get("empty");
    const ids = model.get("ids") || [];
    releaseUrls();
    if (error || empty) {
      message(root, error || empty, { kind: error ? "error" : "empty" });
      return;
    }
    if (ids.length === 0) {
      message(root, model.get("prompt") || "No samples to show.", { kind: "empty" });
      return;
    }
    if (!root.contains(body)) root.replaceChildren(body);
    const pages = model.get("n_pages") || 0;
    const page = model.get("page") || 0;
    count.textContent = `${ids.length.toLocaleString()} sample${ids.length === 1 ? "" : "s"}`;
    sortSelect.value = model.get("sort_by");
    const by = model.get("sort_by");
    direction.textContent = model.get("descending") ? "highest first" : "lowest first";
    direction.disabled = by === "given";
    pageText.textContent = `page ${Math.min(page + 1, Math.max(pages, 1))} of ${Math.max(pages, 1)}`;
    prev.disabled = page <= 0;
    next.disabled = page >= pages - 1;
    const at = model.get("eval_step");
    evalText.textContent = at >= 0 ? `predictions of step ${at}` : "no evaluation at or before this step";
    note.textContent = model.get("note") || "";
    note.style.display = note.textContent ? "" : "none";
    grid.replaceChildren(...(model.get("items") || []).map(card));
  };

  sortSelect.addEventListener("change", () => save(model, { sort_by: sortSelect.value }));
  direction.addEventListener("click", () => save(model, { descending: !model.get("descending") }));
  prev.addEventListener("click", () => save(model, { page: Math.max(0, (model.get("page") || 0) - 1) }));
  next.addEventListener("click", () => save(model, { page: (model.get("page") || 0) + 1 }));

  // several traits change together (one Python hold_sync): draw once for them all
  let queued = false;
  const schedule = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      draw();
    });
  };

  draw();
  const stop = listen(
    model,
    ["items", "ids", "page", "n_pages", "sort_by", "descending", "eval_step", "note", "prompt", "empty", "error"],
    schedule,
  );
  return () => {
    stop();
    releaseUrls();
  };
}

export default { render };
