// Downloads from a view's menu, the same in every view: CSV of its data, PNG of
// what it drew, SVG as vectors. A view hands `exportMenu` what it can give
// (functions called on click); the menu builds the file and the browser saves it.
// SVG comes from `svgCanvas`: a stand-in for a <canvas> whose 2d context records
// the drawing calls as SVG elements, so a view draws its vector file with the
// very code that draws its canvas. Text from data stays text: it is escaped into
// the files, never parsed.
import { el, on } from "./dom.js";

/**
 * @typedef {object} ExportSources
 * @property {string} name  the file name's stem ("loss_curves")
 * @property {() => CsvText | Promise<CsvText>} [csv]  the data as CSV text (or its promise,
 *   for a view that asks the kernel for its table)
 * @property {() => Picture[]} [png]  the canvases drawn, stacked into one PNG
 * @property {() => string} [svg]  the drawing as SVG text
 */

/** @typedef {HTMLCanvasElement | {canvas: HTMLCanvasElement, title?: string}} Picture  a canvas, or one with a title line */
/** @typedef {string | {text: string, note?: string}} CsvText  CSV text, or with a line the menu shows once it is saved (rows left out) */

/**
 * Quote one CSV field (RFC 4180): fields with a comma, quote or line break in
 * quotes, quotes doubled; numbers as JavaScript prints them, NaN/Inf spelled out.
 * @param {any} v
 * @returns {string}
 */
export function csvField(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isNaN(v) ? "NaN" : v === Infinity ? "inf" : v === -Infinity ? "-inf" : String(v);
  const text = String(v);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * CSV text of a header and rows (CRLF line ends, as RFC 4180 says).
 * @param {string[]} header
 * @param {Iterable<any[]>} rows
 * @returns {string}
 */
export function toCsv(header, rows) {
  const lines = [header.map(csvField).join(",")];
  for (const row of rows) lines.push(row.map(csvField).join(","));
  return `${lines.join("\r\n")}\r\n`;
}

/**
 * Save `blob` as a file named `filename` (a click on a temporary link).
 * @param {string} filename
 * @param {Blob} blob
 */
export function download(filename, blob) {
  const url = URL.createObjectURL(blob);
  const a = /** @type {HTMLAnchorElement} */ (el("a", { attrs: { href: url, download: filename } }));
  a.style.display = "none";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * One canvas holding `pictures` stacked top to bottom on a plain background, each
 * under its title line where it has one (text from data drawn as text).
 * @param {Picture[]} pictures
 * @param {string} [background]
 * @returns {HTMLCanvasElement}
 */
export function stackCanvases(pictures, background = "#ffffff") {
  const items = pictures.map((p) => ("getContext" in p ? { canvas: p, title: "" } : { canvas: p.canvas, title: p.title ?? "" }));
  const scale = globalThis.devicePixelRatio ?? 1;
  const line = Math.round(18 * scale);
  const canvases = items.map((i) => i.canvas);
  const width = Math.max(1, ...canvases.map((c) => c.width));
  const height = Math.max(1, items.reduce((h, i) => h + i.canvas.height + (i.title ? line : 0), 0));
  const out = /** @type {HTMLCanvasElement} */ (document.createElement("canvas"));
  out.width = width;
  out.height = height;
  const ctx = out.getContext("2d");
  if (!ctx) throw new Error("nbviz: this browser gave no 2d canvas context");
  ctx.fillStyle = background;
  ctx.fillRect(0, 0, width, height);
  let y = 0;
  for (const { canvas, title } of items) {
    if (title) {
      ctx.fillStyle = "#1f1f1f";
      ctx.font = `600 ${Math.round(12 * scale)}px sans-serif`;
      ctx.textBaseline = "middle";
      ctx.fillText(title, Math.round(4 * scale), y + line / 2);
      y += line;
    }
    ctx.drawImage(canvas, 0, y);
    y += canvas.height;
  }
  return out;
}

/** @param {string} text */
const escapeXml = (text) =>
  String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);

/** @param {number} v */
const n = (v) => (Number.isFinite(v) ? String(Math.round(v * 100) / 100) : "0");

/**
 * A stand-in for a canvas whose 2d context writes SVG: hand it to a view's
 * drawing code in place of a <canvas>, then read `svg()` (one <g> per canvas
 * drawn, offset by `y`) or `body()` (the elements alone).
 * @param {number} width  CSS px
 * @param {number} height  CSS px
 */
export function svgCanvas(width, height) {
  /** @type {string[]} */
  const parts = [];
  let clips = 0;
  const fresh = () => ({
    strokeStyle: "#000",
    fillStyle: "#000",
    lineWidth: 1,
    globalAlpha: 1,
    font: "10px sans-serif",
    textAlign: "start",
    textBaseline: "alphabetic",
    dash: /** @type {number[]} */ ([]),
    clip: "",
  });
  let state = fresh();
  /** @type {Array<ReturnType<typeof fresh>>} */
  const stack = [];
  let d = "";
  const clipAttr = () => (state.clip ? ` clip-path="url(#${state.clip})"` : "");
  const anchor = { start: "start", left: "start", center: "middle", end: "end", right: "end" };
  const baseline = { top: "hanging", middle: "middle", bottom: "text-after-edge", alphabetic: "alphabetic", hanging: "hanging" };
  const ctx = {
    get strokeStyle() { return state.strokeStyle; },
    set strokeStyle(v) { state.strokeStyle = String(v); },
    get fillStyle() { return state.fillStyle; },
    set fillStyle(v) { state.fillStyle = String(v); },
    get lineWidth() { return state.lineWidth; },
    set lineWidth(v) { state.lineWidth = Number(v); },
    get globalAlpha() { return state.globalAlpha; },
    set globalAlpha(v) { state.globalAlpha = Number(v); },
    get font() { return state.font; },
    set font(v) { state.font = String(v); },
    get textAlign() { return state.textAlign; },
    set textAlign(v) { state.textAlign = String(v); },
    get textBaseline() { return state.textBaseline; },
    set textBaseline(v) { state.textBaseline = String(v); },
    lineCap: "butt",
    lineJoin: "miter",
    save() { stack.push({ ...state, dash: [...state.dash] }); },
    restore() { state = stack.pop() ?? fresh(); },
    setTransform() {},
    resetTransform() {},
    clearRect() {},
    setLineDash(/** @type {number[]} */ a) { state.dash = [...a]; },
    getLineDash() { return [...state.dash]; },
    measureText(/** @type {string} */ t) { return { width: String(t).length * (parseFloat(state.font) || 10) * 0.6 }; },
    beginPath() { d = ""; },
    moveTo(/** @type {number} */ x, /** @type {number} */ y) { d += `M${n(x)} ${n(y)}`; },
    lineTo(/** @type {number} */ x, /** @type {number} */ y) { d += `L${n(x)} ${n(y)}`; },
    closePath() { d += "Z"; },
    rect(/** @type {number} */ x, /** @type {number} */ y, /** @type {number} */ w, /** @type {number} */ h) {
      d += `M${n(x)} ${n(y)}h${n(w)}v${n(h)}h${n(-w)}Z`;
    },
    arc(/** @type {number} */ x, /** @type {number} */ y, /** @type {number} */ r) {
      // whole circles only (the views draw dots)
      d += `M${n(x + r)} ${n(y)}A${n(r)} ${n(r)} 0 1 0 ${n(x - r)} ${n(y)}A${n(r)} ${n(r)} 0 1 0 ${n(x + r)} ${n(y)}`;
    },
    stroke() {
      if (!d) return;
      const dash = state.dash.length ? ` stroke-dasharray="${state.dash.join(" ")}"` : "";
      parts.push(
        `<path d="${d}" fill="none" stroke="${escapeXml(state.strokeStyle)}" stroke-width="${n(state.lineWidth)}"` +
          ` stroke-opacity="${n(state.globalAlpha)}"${dash}${clipAttr()}/>`,
      );
    },
    fill() {
      if (!d) return;
      parts.push(`<path d="${d}" fill="${escapeXml(state.fillStyle)}" fill-opacity="${n(state.globalAlpha)}"${clipAttr()}/>`);
    },
    fillRect(/** @type {number} */ x, /** @type {number} */ y, /** @type {number} */ w, /** @type {number} */ h) {
      parts.push(
        `<rect x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}" fill="${escapeXml(state.fillStyle)}"` +
          ` fill-opacity="${n(state.globalAlpha)}"${clipAttr()}/>`,
      );
    },
    strokeRect(/** @type {number} */ x, /** @type {number} */ y, /** @type {number} */ w, /** @type {number} */ h) {
      parts.push(
        `<rect x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}" fill="none" stroke="${escapeXml(state.strokeStyle)}"${clipAttr()}/>`,
      );
    },
    clip() {
      clips += 1;
      const id = `nbviz-clip-${clips}-${Math.random().toString(36).slice(2, 8)}`;
      parts.push(`<clipPath id="${id}"><path d="${d}"/></clipPath>`);
      state.clip = id;
    },
    fillText(/** @type {string} */ text, /** @type {number} */ x, /** @type {number} */ y) {
      const size = parseFloat(state.font) || 10;
      const family = state.font.replace(/^.*?\d+(\.\d+)?px\s*/, "") || "sans-serif";
      parts.push(
        `<text x="${n(x)}" y="${n(y)}" font-size="${n(size)}" font-family="${escapeXml(family)}"` +
          ` text-anchor="${anchor[/** @type {keyof typeof anchor} */ (state.textAlign)] ?? "start"}"` +
          ` dominant-baseline="${baseline[/** @type {keyof typeof baseline} */ (state.textBaseline)] ?? "alphabetic"}"` +
          ` fill="${escapeXml(state.fillStyle)}" fill-opacity="${n(state.globalAlpha)}">${escapeXml(text)}</text>`,
      );
    },
    drawImage() {},
  };
  const canvas = {
    width,
    height,
    style: /** @type {Record<string, string>} */ ({}),
    getContext: () => ctx,
    /** The elements drawn so far. */
    body: () => parts.join(""),
  };
  return canvas;
}

/**
 * A whole SVG document of `groups` (each the body of an svgCanvas) stacked top
 * to bottom, with a title line over each.
 * @param {Array<{title?: string, width: number, height: number, body: string}>} groups
 * @param {string} [background]
 * @returns {string}
 */
export function svgDocument(groups, background = "#ffffff") {
  const titleHeight = 18;
  const width = Math.max(1, ...groups.map((g) => g.width));
  let y = 0;
  const inner = [];
  for (const g of groups) {
    if (g.title) {
      inner.push(`<text x="4" y="${y + 13}" font-size="12" font-weight="600" font-family="sans-serif">${escapeXml(g.title)}</text>`);
      y += titleHeight;
    }
    inner.push(`<g transform="translate(0 ${y})">${g.body}</g>`);
    y += g.height;
  }
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" viewBox="0 0 ${width} ${y}">` +
    `<rect width="100%" height="100%" fill="${background}"/>${inner.join("")}</svg>\n`
  );
}

/**
 * The view's download menu: a button that opens a list of the formats it can give.
 * @param {ExportSources} sources
 * @returns {{node: HTMLElement, dispose: () => void}}
 */
export function exportMenu(sources) {
  const formats = /** @type {const} */ (["csv", "png", "svg"]).filter((f) => sources[f]);
  const button = el("button", {
    class: "nbviz-export-button",
    text: "download \u25be",
    attrs: { type: "button", "aria-haspopup": "menu", title: "download this view's data or picture" },
  });
  const items = formats.map((f) =>
    el("button", { class: "nbviz-export-item", text: f.toUpperCase(), attrs: { type: "button", role: "menuitem", "data-format": f } }),
  );
  const list = el("div", { class: "nbviz-export-list", attrs: { role: "menu" } }, items);
  list.hidden = true;
  const note = el("span", { class: "nbviz-export-note" });
  const node = el("span", { class: "nbviz-export" }, [button, list, note]);
  const save = (/** @type {string} */ format) => {
    const stem = sources.name;
    note.textContent = "";
    if (format === "csv" && sources.csv) {
      const csv = sources.csv;
      Promise.resolve()
        .then(() => csv())
        .then(
          (got) => {
            const text = typeof got === "string" ? got : got.text;
            download(`${stem}.csv`, new Blob([text], { type: "text/csv" }));
            if (typeof got !== "string" && got.note) note.textContent = got.note;
          },
          (/** @type {unknown} */ err) => {
            note.textContent = `CSV not saved: ${err instanceof Error ? err.message : String(err)}`;
          },
        );
    }
    if (format === "svg" && sources.svg) download(`${stem}.svg`, new Blob([sources.svg()], { type: "image/svg+xml" }));
    if (format === "png" && sources.png) {
      const drawn = sources.png();
      if (!drawn.length) {
        note.textContent = "PNG not saved: nothing is drawn";
        return;
      }
      const canvas = stackCanvases(drawn);
      canvas.toBlob((blob) => {
        if (blob) download(`${stem}.png`, blob);
      }, "image/png");
    }
  };
  const offs = [
    on(button, "click", () => {
      list.hidden = !list.hidden;
    }),
    ...items.map((item) =>
      on(item, "click", () => {
        list.hidden = true;
        save(item.getAttribute("data-format") ?? "");
      }),
    ),
  ];
  return {
    node,
    dispose: () => {
      for (const off of offs) off();
    },
  };
}
