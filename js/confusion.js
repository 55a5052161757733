// ConfusionMatrix: a canvas heatmap of [true, predicted] counts (or row / column
// fractions) with class names on both axes, the overall scores, the most-confused
// pairs and a sortable per-class table. Clicking a cell or a pair sets `selected`;
// Python answers with `selected_ids` and fills the embedded SampleGallery.
// With a comparison step the cells show the change since that evaluation and two
// buttons list the samples that flipped (right -> wrong, wrong -> right) between
// them; a click sets `selected_flip` and the gallery shows those samples.
// Class names come from data: they go in with textContent only.
import { mix, rgbToCss } from "./lib/color.js";
import { el, message } from "./lib/dom.js";
import { drawHeatmap } from "./lib/heatmap.js";
import { formatNumber } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { decodeArray } from "./lib/wire.js";

const LABEL_W = 110; // px for the row labels (longer names are cut, full text on hover)
const LABEL_H = 90; // px for the column labels
const TARGET = 440; // px the matrix aims to fill
const MIN_CELL = 14; // px: below this the matrix scrolls instead of shrinking (100 classes)
const MAX_CELL = 48;
const LOW = /** @type {[number, number, number]} */ ([247, 251, 255]);
const HIGH = /** @type {[number, number, number]} */ ([8, 48, 107]);

/**
 * Cell size in CSS px for `n` classes: fills about TARGET px, never under MIN_CELL.
 * @param {number} n
 * @returns {number}
 */
export function cellSize(n) {
  return Math.max(MIN_CELL, Math.min(MAX_CELL, Math.floor(TARGET / Math.max(n, 1))));
}

/**
 * The matrix as shown: counts, or each row / column divided by its total.
 * @param {ArrayLike<number>} counts  row-major n x n
 * @param {number} n
 * @param {"counts" | "row" | "column"} by
 * @returns {Float64Array}
 */
export function normalized(counts, n, by) {
  const out = new Float64Array(n * n);
  for (let i = 0; i < n * n; i++) out[i] = Number(counts[i]);
  if (by === "counts") return out;
  for (let a = 0; a < n; a++) {
    let total = 0;
    for (let b = 0; b < n; b++) total += by === "row" ? out[a * n + b] : out[b * n + a];
    for (let b = 0; b < n; b++) {
      const k = by === "row" ? a * n + b : b * n + a;
      out[k] = total > 0 ? out[k] / total : 0;
    }
  }
  return out;
}

const GAIN = /** @type {[number, number, number]} */ ([33, 102, 172]);
const LOSS = /** @type {[number, number, number]} */ ([214, 96, 77]);
const WHITE = /** @type {[number, number, number]} */ ([255, 255, 255]);

/**
 * Colour of a cell's change since the compared evaluation: blue where a diagonal
 * (correct) cell grew or an error cell shrank, red the other way; white for none.
 * @param {number} delta
 * @param {boolean} diagonal
 * @param {number} peak  largest |delta| of the matrix
 * @returns {number[]} rgb
 */
export function changeColor(delta, diagonal, peak) {
  if (!delta || !(peak > 0)) return [...WHITE];
  const good = diagonal ? delta > 0 : delta < 0;
  return mix(WHITE, good ? GAIN : LOSS, Math.sqrt(Math.min(1, Math.abs(delta) / peak)));
}

/**
 * A change as text: "+3", "−2", "0".
 * @param {number} v
 */
export const signed = (v) => (v > 0 ? `+${v}` : v < 0 ? `\u2212${-v}` : "0");

/** @param {number} v */
const percent = (v) => `${(100 * v).toFixed(v >= 0.1 || v === 0 ? 0 : 1)}%`;

const COLUMNS = /** @type {const} */ ([
  ["name", "class"],
  ["precision", "precision"],
  ["recall", "recall"],
  ["f1", "F1"],
  ["support", "support"],
]);

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-confusion");
  const modeSelect = /** @type {HTMLSelectElement} */ (
    el("select", { class: "nbviz-cm-normalize", attrs: { "aria-label": "values" } }, [
      el("option", { text: "counts", attrs: { value: "counts" } }),
      el("option", { text: "row-normalised (recall)", attrs: { value: "row" } }),
      el("option", { text: "column-normalised (precision)", attrs: { value: "column" } }),
    ])
  );
  const stepText = el("span", { class: "nbviz-cm-step" });
  const compareSelect = /** @type {HTMLSelectElement} */ (
    el("select", { class: "nbviz-cm-compare", attrs: { "aria-label": "compare with" } })
  );
  const flipBox = el("div", { class: "nbviz-cm-flips" });
  const clearButton = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-cm-clear", text: "clear selection", attrs: { type: "button" } })
  );
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, ["show", modeSelect]),
    el("label", {}, ["compare with", compareSelect]),
    stepText,
    clearButton,
  ]);
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-cm-canvas" }));
  const colLabels = el("div", { class: "nbviz-cm-collabels", style: { display: "flex" } });
  const rowLabels = el("div", { class: "nbviz-cm-rowlabels", style: { display: "flex", flexDirection: "column" } });
  const corner = el("div", { class: "nbviz-cm-axis-title nbviz-cm-corner" }, [
    el("div", { text: "predicted \u2192", style: { textAlign: "right" } }),
    el("div", { text: "true \u2193" }),
  ]);
  Object.assign(corner.style, {
    display: "flex",
    flexDirection: "column",
    justifyContent: "flex-end",
    padding: "2px 4px",
    boxSizing: "border-box",
  });
  const grid = el("div", { class: "nbviz-cm-grid" }, [corner, colLabels, rowLabels, canvas]);
  const scroll = el("div", { class: "nbviz-cm-scroll" }, [grid]);
  const readout = el("div", { class: "nbviz-cm-readout" });
  const scores = el("div", { class: "nbviz-cm-scores" });
  const confused = el("ul", { class: "nbviz-cm-confused" });
  const tableHead = el("thead");
  const tableBody = el("tbody");
  const table = el("table", { class: "nbviz-cm-table" }, [tableHead, tableBody]);
  const side = el("div", { class: "nbviz-cm-side" }, [
    scores,
    flipBox,
    el("div", { class: "nbviz-cm-title", text: "most confused (true \u2192 predicted)" }),
    confused,
    el("div", { class: "nbviz-cm-title", text: "per class" }),
    el("div", { class: "nbviz-cm-tablewrap" }, [table]),
  ]);
  const main = el("div", { class: "nbviz-cm-main" }, [el("div", {}, [scroll, readout]), side]);
  const galleryHost = el("div", { class: "nbviz-cm-gallery" });
  const body = el("div", {}, [toolbar, main, galleryHost]);

  /** @type {{n: number, counts: ArrayLike<number>, shown: Float64Array, max: number, delta: ArrayLike<number> | null, peak: number} | null} */
  let data = null;
  /** @type {((e: {clientX: number, clientY: number}) => ({row: number, col: number} | null)) | null} */
  let cellFromEvent = null;
  let sortKey = "name";
  let sortDesc = false;

  const names = () => /** @type {string[]} */ (model.get("class_names") || []);
  const nameOf = (/** @type {number} */ c) => names()[c] ?? String(c);

  const decode = () => {
    const m = model.get("matrix");
    if (!m || !m.counts) {
      data = null;
      return;
    }
    const arr = decodeArray(m.counts);
    const n = arr.shape[0] || 0;
    const shown = normalized(arr.data, n, model.get("normalize"));
    let max = 0;
    for (let i = 0; i < shown.length; i++) max = Math.max(max, shown[i]);
    const cmp = model.get("compare") || {};
    const delta = cmp.delta ? decodeArray(cmp.delta).data : null;
    let peak = 0;
    if (delta) for (let i = 0; i < delta.length; i++) peak = Math.max(peak, Math.abs(Number(delta[i])));
    data = { n, counts: arr.data, shown, max, delta: delta && delta.length === n * n ? delta : null, peak };
  };

  const drawMatrix = () => {
    if (!data || !data.n) {
      scroll.style.display = "none";
      cellFromEvent = null;
      return;
    }
    scroll.style.display = "";
    const { n, shown, max, delta, peak } = data;
    const cell = cellSize(n);
    const size = cell * n;
    grid.style.gridTemplateColumns = `${LABEL_W}px ${size}px`;
    grid.style.gridTemplateRows = `${LABEL_H}px ${size}px`;
    const sel = /** @type {number[]} */ (model.get("selected") || []);
    const by = model.get("normalize");
    const scale = by === "counts" ? max : 1;
    const cellIndex = Float64Array.from({ length: n * n }, (_, i) => i);
    const drawn = drawHeatmap(canvas, delta ? cellIndex : shown, {
      rows: n,
      cols: n,
      width: size,
      height: size,
      gap: n <= 30 ? 1 : 0,
      scale: delta
        ? (i) => changeColor(Number(delta[i]), Math.floor(i / n) === i % n, peak)
        : (v) => mix(LOW, HIGH, scale > 0 ? Math.sqrt(v / scale) : 0),
      selected: sel.length === 2 ? [sel[0], sel[1]] : null,
      selectedColor: "#d81b60",
    });
    cellFromEvent = drawn.cellFromEvent;
    if (cell >= 22) {
      const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
      ctx.font = `${Math.min(12, Math.floor(cell / 2.4))}px sans-serif`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      for (let r = 0; r < n; r++) {
        for (let c = 0; c < n; c++) {
          if (delta) {
            const d = Number(delta[r * n + c]);
            if (d === 0) continue;
            ctx.fillStyle = peak > 0 && Math.abs(d) / peak > 0.55 ? "#ffffff" : "#1f1f1f";
            ctx.fillText(signed(d), (c + 0.5) * cell, (r + 0.5) * cell);
            continue;
          }
          const v = shown[r * n + c];
          if (v === 0) continue;
          const dark = scale > 0 && Math.sqrt(v / scale) > 0.55;
          ctx.fillStyle = dark ? "#ffffff" : "#1f1f1f";
          ctx.fillText(by === "counts" ? String(v) : percent(v), (c + 0.5) * cell, (r + 0.5) * cell);
        }
      }
    }
    const list = names();
    const label = (/** @type {number} */ i, /** @type {string} */ cls, /** @type {boolean} */ active) =>
      el("div", {
        class: [cls, active ? "nbviz-active" : ""],
        text: list[i] ?? String(i),
        attrs: { title: `${i}: ${list[i] ?? i}` },
        style: cls === "nbviz-cm-rowlabel"
          ? { height: `${cell}px`, lineHeight: `${cell}px`, width: `${LABEL_W}px` }
          : { width: `${cell}px`, height: `${LABEL_H}px`, lineHeight: `${cell}px` },
      });
    rowLabels.replaceChildren(
      ...Array.from({ length: n }, (_, i) => label(i, "nbviz-cm-rowlabel", sel[0] === i)),
    );
    colLabels.replaceChildren(
      ...Array.from({ length: n }, (_, i) => label(i, "nbviz-cm-collabel", sel[1] === i)),
    );
  };

  const drawScores = () => {
    const s = model.get("scores") || {};
    const at = model.get("eval_step");
    const steps = /** @type {number[]} */ (model.get("eval_steps") || []);
    stepText.textContent =
      at >= 0
        ? `evaluation of step ${at} (${steps.indexOf(at) + 1} of ${steps.length})`
        : `no evaluation at or before step ${model.get("step")}; the first is at step ${steps[0]}`;
    if (s.n === undefined) {
      scores.replaceChildren();
      return;
    }
    const item = (/** @type {string} */ k, /** @type {number} */ v) =>
      el("span", {}, [el("b", { text: `${k} ` }), formatNumber(Number(v.toFixed(4))), "  "]);
    scores.replaceChildren(
      el("span", { text: `${s.n.toLocaleString()} samples  ` }),
      item("accuracy", s.accuracy),
      item("macro F1", s.macro_f1),
      item("weighted F1", s.weighted_f1),
    );
  };

  const drawCompare = () => {
    const steps = /** @type {number[]} */ (model.get("eval_steps") || []);
    const at = Number(model.get("compare_step"));
    const options = [el("option", { text: "nothing", attrs: { value: "-1" } })];
    for (const s of steps) options.push(el("option", { text: `step ${s}`, attrs: { value: String(s) } }));
    if (at >= 0 && !steps.includes(at)) options.push(el("option", { text: `step ${at}`, attrs: { value: String(at) } }));
    compareSelect.replaceChildren(...options);
    compareSelect.value = String(at >= 0 ? at : -1);
    const cmp = model.get("compare") || {};
    if (!(at >= 0)) {
      flipBox.replaceChildren();
      return;
    }
    if (!(cmp.step >= 0)) {
      flipBox.replaceChildren(el("span", { class: "nbviz-muted", text: cmp.notice || "nothing to compare with" }));
      return;
    }
    const chosen = model.get("selected_flip");
    const button = (/** @type {string} */ which, /** @type {string} */ text, /** @type {number} */ count) => {
      const b = el("button", {
        class: ["nbviz-cm-flip", chosen === which ? "nbviz-active" : ""],
        text: `${text}: ${count}`,
        attrs: { type: "button", "data-flip": which, title: `show the ${count} samples that went ${text}` },
      });
      b.addEventListener("click", () => save(model, { selected_flip: chosen === which ? "" : which }));
      return b;
    };
    flipBox.replaceChildren(
      el("span", { class: "nbviz-cm-title", text: `since step ${cmp.step} (${cmp.common} samples in both; cells show the change):` }),
      button("to_wrong", "right \u2192 wrong", cmp.to_wrong),
      button("to_right", "wrong \u2192 right", cmp.to_right),
    );
  };

  const drawConfused = () => {
    const sel = /** @type {number[]} */ (model.get("selected") || []);
    const pairs = /** @type {{true: number, pred: number, count: number, rate: number}[]} */ (
      model.get("confused") || []
    );
    if (!pairs.length) {
      confused.replaceChildren(el("li", { class: "nbviz-muted", text: data ? "no errors" : "" }));
      return;
    }
    confused.replaceChildren(
      ...pairs.map((p) => {
        const button = el("button", {
          class: sel[0] === p.true && sel[1] === p.pred ? "nbviz-active" : "",
          text: `${nameOf(p.true)} \u2192 ${nameOf(p.pred)}: ${p.count} (${percent(p.rate)} of class ${nameOf(p.true)})`,
          attrs: { type: "button", "data-true": p.true, "data-pred": p.pred },
        });
        button.addEventListener("click", () => save(model, { selected: [p.true, p.pred] }));
        return el("li", {}, [button]);
      }),
    );
  };

  const drawTable = () => {
    const rows = /** @type {Record<string, any>[]} */ ([...(model.get("class_table") || [])]);
    rows.sort((a, b) => {
      const x = sortKey === "name" ? a.class : a[sortKey];
      const y = sortKey === "name" ? b.class : b[sortKey];
      return (x < y ? -1 : x > y ? 1 : a.class - b.class) * (sortDesc ? -1 : 1);
    });
    tableHead.replaceChildren(
      el(
        "tr",
        {},
        COLUMNS.map(([key, title]) => {
          const arrow = sortKey === key ? (sortDesc ? " \u25be" : " \u25b4") : "";
          const th = el("th", { text: title + arrow, attrs: { "data-key": key, title: `sort by ${title}` } });
          th.addEventListener("click", () => {
            sortDesc = sortKey === key ? !sortDesc : key !== "name";
            sortKey = key;
            drawTable();
          });
          return th;
        }),
      ),
    );
    tableBody.replaceChildren(
      ...rows.map((r) => {
        const tr = el("tr", { attrs: { "data-class": r.class, title: `select ${r.name} \u2192 ${r.name}` } }, [
          el("td", { text: r.name, attrs: { title: r.name } }),
          el("td", { text: r.precision.toFixed(3) }),
          el("td", { text: r.recall.toFixed(3) }),
          el("td", { text: r.f1.toFixed(3) }),
          el("td", { text: String(r.support) }),
        ]);
        tr.addEventListener("click", () => save(model, { selected: [r.class, r.class] }));
        return tr;
      }),
    );
  };

  const draw = () => {
    const error = model.get("error");
    const empty = model.get("empty");
    if (error || empty) {
      message(root, error || empty, { kind: error ? "error" : "empty" });
      return;
    }
    if (!root.contains(body)) root.replaceChildren(body);
    modeSelect.value = model.get("normalize");
    clearButton.disabled = !(model.get("selected") || []).length && !model.get("selected_flip");
    drawMatrix();
    drawScores();
    drawCompare();
    drawConfused();
    drawTable();
  };

  let queued = false;
  const schedule = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      decode();
      draw();
    });
  };

  canvas.addEventListener("pointermove", (event) => {
    const cell = cellFromEvent ? cellFromEvent(event) : null;
    if (!cell || !data) {
      readout.textContent = "";
      return;
    }
    const { n, counts, delta } = data;
    const count = Number(counts[cell.row * n + cell.col]);
    const change = delta ? ` (${signed(Number(delta[cell.row * n + cell.col]))} since step ${model.get("compare").step})` : "";
    let support = 0;
    let predicted = 0;
    for (let k = 0; k < n; k++) {
      support += Number(counts[cell.row * n + k]);
      predicted += Number(counts[k * n + cell.col]);
    }
    readout.textContent =
      `true ${nameOf(cell.row)} \u2192 predicted ${nameOf(cell.col)}: ${count} sample${count === 1 ? "" : "s"}${change}` +
      ` (${support ? percent(count / support) : "-"} of true ${nameOf(cell.row)}, ` +
      `${predicted ? percent(count / predicted) : "-"} of predicted ${nameOf(cell.col)}); click to see them`;
  });
  canvas.addEventListener("pointerleave", () => {
    readout.textContent = "";
  });
  canvas.addEventListener("click", (event) => {
    const cell = cellFromEvent ? cellFromEvent(event) : null;
    if (cell) save(model, { selected: [cell.row, cell.col] });
  });
  modeSelect.addEventListener("change", () => save(model, { normalize: modeSelect.value }));
  clearButton.addEventListener("click", () => save(model, { selected: [], selected_flip: "" }));
  compareSelect.addEventListener("change", () => save(model, { compare_step: Number(compareSelect.value) }));

  // the SampleGallery of the selected cell, a widget of its own, embedded below
  /** @type {any} */
  let galleryView = null;
  let closed = false;
  const showGallery = async () => {
    const ref = model.get("gallery");
    const manager = /** @type {any} */ (model).widget_manager;
    if (galleryView) {
      galleryView.remove();
      galleryView = null;
    }
    galleryHost.replaceChildren();
    if (typeof ref !== "string" || !ref.startsWith("IPY_MODEL_") || !manager) return;
    try {
      const child = await manager.get_model(ref.slice("IPY_MODEL_".length));
      const view = await manager.create_view(child);
      if (closed) {
        view.remove();
        return;
      }
      galleryView = view;
      galleryHost.replaceChildren(view.el);
    } catch (err) {
      message(galleryHost, `could not show the samples: ${err}`, { kind: "warning" });
    }
  };

  decode();
  draw();
  showGallery();
  const stop = listen(
    model,
    ["matrix", "normalize", "selected", "selected_flip", "compare", "compare_step", "class_names", "class_table", "scores", "confused", "eval_step", "eval_steps", "empty", "error"],
    schedule,
  );
  const stopGallery = listen(model, ["gallery"], showGallery);
  return () => {
    closed = true;
    stop();
    stopGallery();
    if (galleryView) galleryView.remove();
  };
}

export default { render };
