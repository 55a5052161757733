// ConfusionMatrix: a canvas heatmap of [true, predicted] counts (or row / column
// fractions) with class names on both axes, the overall scores, the most-confused
// pairs and a sortable per-class table. Clicking a cell or a pair sets `selected`;
// Python answers with `selected_ids` and fills the embedded SampleGallery.
// With a comparison step the cells show the change since that evaluation and two
// buttons list the samples that flipped (right -> wrong, wrong -> right) between
// them; a click sets `selected_flip` and the gallery shows those samples.
// Past 100 classes (mode "pairs") the matrix gives way to two ranked lists: the
// most confused pairs and the classes with the most errors; a row selects as a
// cell does. A menu switches between the run's splits.
// Class names come from data: they go in with textContent only.
import { childView } from "./lib/child.js";
import { classErrorsTable, listsCaption, pairsTable } from "./lib/confusion/lists.js";
import { cellText, decodeMatrix, matrixView, percent } from "./lib/confusion/matrix.js";
import { el, fillSelect, on, select } from "./lib/dom.js";
import { exportMenu } from "./lib/export.js";
import { formatNumber } from "./lib/format.js";
import { bindCells } from "./lib/heatmap.js";
import { listen, save } from "./lib/model.js";
import { batched } from "./lib/schedule.js";
import { splitMenu } from "./lib/splits.js";
import { guard, present, viewState } from "./lib/state.js";
import { nextSort, sortableTable } from "./lib/table.js";
import { confusionCsv } from "./lib/view_csv.js";

/**
 * @typedef {{class: number, name: string, precision: number | null, recall: number | null, f1: number | null, support: number}} ClassRow
 */

/** A score, or "—" where it is undefined (null: a class never predicted or never present). */
const score = (/** @type {number | null} */ v) => (v === null || v === undefined ? "—" : v.toFixed(3));

/** The per-class table's columns; "class" sorts by the class index. */
const COLUMNS = [
  { key: "name", label: "class", sortValue: (/** @type {ClassRow} */ r) => r.class, cell: (/** @type {ClassRow} */ r) => ({ text: r.name, title: r.name }) },
  { key: "precision", label: "precision", cell: (/** @type {ClassRow} */ r) => score(r.precision) },
  { key: "recall", label: "recall", cell: (/** @type {ClassRow} */ r) => score(r.recall) },
  { key: "f1", label: "F1", cell: (/** @type {ClassRow} */ r) => score(r.f1) },
  { key: "support", label: "support", cell: (/** @type {ClassRow} */ r) => String(r.support) },
];

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-confusion");
  const modeSelect = select("nbviz-cm-normalize", "values", [
    ["counts", "counts"],
    ["row", "row-normalised (recall)"],
    ["column", "column-normalised (precision)"],
  ]);
  const stepText = el("span", { class: "nbviz-cm-step" });
  const compareSelect = select("nbviz-cm-compare", "compare with");
  const flipBox = el("div", { class: "nbviz-cm-flips" });
  const clearButton = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-cm-clear", text: "clear selection", attrs: { type: "button" } })
  );
  const splits = splitMenu(model);
  const menu = exportMenu({
    name: "confusion_matrix",
    csv: () => confusionCsv((k) => model.get(k)),
    png: () => (model.get("mode") === "matrix" ? [matrix.canvas] : []),
  });
  const modeLabel = el("label", {}, ["show", modeSelect]);
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    splits.el,
    modeLabel,
    el("label", {}, ["compare with", compareSelect]),
    stepText,
    clearButton,
    menu.node,
  ]);
  // the matrix fits the width of the view's main row (its own width follows the matrix)
  const matrix = matrixView(() => main);
  const readout = el("div", { class: "nbviz-cm-readout" });
  const scores = el("div", { class: "nbviz-cm-scores" });
  const confused = el("ul", { class: "nbviz-cm-confused" });
  const tableWrap = el("div", { class: "nbviz-cm-tablewrap" });
  const matrixSide = el("div", { class: "nbviz-cm-side-lists" }, [
    el("div", { class: "nbviz-cm-title", text: "most confused (true \u2192 predicted)" }),
    confused,
    el("div", { class: "nbviz-cm-title", text: "per class" }),
    tableWrap,
  ]);
  const side = el("div", { class: "nbviz-cm-side" }, [scores, flipBox, matrixSide]);
  const matrixBox = el("div", {}, [matrix.el, readout]);
  const listsCaptionEl = el("div", { class: "nbviz-cm-caption nbviz-muted" });
  const pairsWrap = el("div", { class: "nbviz-cm-tablewrap nbviz-cm-list" });
  const classesWrap = el("div", { class: "nbviz-cm-tablewrap nbviz-cm-list" });
  const listsBox = el("div", { class: "nbviz-cm-lists" }, [
    listsCaptionEl,
    el("div", { class: "nbviz-cm-lists-row" }, [
      el("div", {}, [el("div", { class: "nbviz-cm-title", text: "most confused pairs" }), pairsWrap]),
      el("div", {}, [el("div", { class: "nbviz-cm-title", text: "classes by errors" }), classesWrap]),
    ]),
  ]);
  const main = el("div", { class: "nbviz-cm-main" }, [matrixBox, listsBox, side]);
  const galleryHost = el("div", { class: "nbviz-cm-gallery" });
  const body = el("div", {}, [toolbar, main, galleryHost]);

  /** @type {import("./lib/confusion/matrix.js").MatrixData | null} */
  let data = null;
  let sortKey = "name";
  let sortDesc = false;
  let pairSort = { sortBy: "", descending: true }; // "": as ranked by Python
  let classSort = { sortBy: "", descending: true };

  const names = () => /** @type {string[]} */ (model.get("class_names") || []);
  const nameOf = (/** @type {number} */ c) => names()[c] ?? String(c);

  const decode = () => {
    data = decodeMatrix(model.get("matrix"), model.get("normalize"), model.get("compare"));
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
      el("span", {}, [el("b", { text: `${k} ` }), Number.isFinite(v) ? formatNumber(Number(v.toFixed(4))) : "\u2014", "  "]);
    const bad = Number(s.nonfinite || 0);
    const total = (s.n + bad).toLocaleString();
    const warning = bad
      ? [
          el("div", {
            class: "nbviz-cm-nonfinite nbviz-nonfinite",
            text:
              `${bad.toLocaleString()} of ${total} samples had non-finite logits (NaN or inf) at step ${at}: ` +
              "no predicted class, so they are not in the matrix or the scores.",
          }),
        ]
      : [];
    scores.replaceChildren(
      ...warning,
      el("span", { text: bad ? `over the ${s.n.toLocaleString()} samples with finite logits: ` : `${s.n.toLocaleString()} samples  ` }),
      item("accuracy", s.accuracy),
      item("macro F1", s.macro_f1),
      item("weighted F1", s.weighted_f1),
    );
  };

  const drawCompare = () => {
    const steps = /** @type {number[]} */ (model.get("eval_steps") || []);
    const at = Number(model.get("compare_step"));
    /** @type {Array<[string, string]>} */
    const options = [["-1", "nothing"]];
    for (const s of steps) options.push([String(s), `step ${s}`]);
    if (at >= 0 && !steps.includes(at)) options.push([String(at), `step ${at}`]);
    fillSelect(compareSelect, options);
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
      el("span", {
        class: "nbviz-cm-title",
        text: `since step ${cmp.step} (${cmp.common} samples in both${model.get("mode") === "pairs" ? "" : "; cells show the change"}):`,
      }),
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
      const bad = Number((model.get("scores") || {}).nonfinite || 0);
      const none = bad ? "no errors among the samples with finite logits" : "no errors";
      confused.replaceChildren(el("li", { class: "nbviz-muted", text: data ? none : "" }));
      return;
    }
    confused.replaceChildren(
      ...pairs.map((p) => {
        // one line each, cut with an ellipsis (a class name may be any length); whole in the title
        const text = `${nameOf(p.true)} \u2192 ${nameOf(p.pred)}: ${p.count} (${percent(p.rate)} of class ${nameOf(p.true)})`;
        const button = el("button", {
          class: sel[0] === p.true && sel[1] === p.pred ? "nbviz-active" : "",
          text,
          attrs: { type: "button", "data-true": p.true, "data-pred": p.pred, title: text.slice(0, 2000) },
        });
        button.addEventListener("click", () => save(model, { selected: [p.true, p.pred] }));
        return el("li", {}, [button]);
      }),
    );
  };

  const drawTable = () => {
    tableWrap.replaceChildren(
      sortableTable({
        class: "nbviz-cm-table",
        columns: COLUMNS,
        rows: /** @type {ClassRow[]} */ (model.get("class_table") || []),
        sortBy: sortKey,
        descending: sortDesc,
        onSort: (key) => {
          ({ sortBy: sortKey, descending: sortDesc } = nextSort(key, { sortBy: sortKey, descending: sortDesc }, key !== "name"));
          drawTable();
        },
        onRow: (r) => save(model, { selected: [r.class, r.class] }),
        rowAttrs: (r) => ({ "data-class": r.class, title: `select ${r.name} \u2192 ${r.name}` }),
      }),
    );
  };

  const drawLists = () => {
    const sel = /** @type {number[]} */ (model.get("selected") || []);
    const pairs = model.get("confused") || [];
    const classes = model.get("class_errors") || [];
    listsCaptionEl.textContent = data || model.get("eval_step") < 0 ? "" : listsCaption(model.get("scores") || {}, pairs.length, classes.length);
    const pick = (/** @type {number[]} */ cell) => save(model, { selected: cell });
    pairsWrap.replaceChildren(
      pairsTable(pairs, sel, pairSort, (key) => {
        pairSort = nextSort(key, pairSort, key === "count" || key === "rate");
        drawLists();
      }, (r) => pick([r.true, r.pred])),
    );
    classesWrap.replaceChildren(
      classErrorsTable(classes, sel, classSort, (key) => {
        classSort = nextSort(key, classSort, key !== "name");
        drawLists();
      }, (r) => pick([r.class, -1])),
    );
  };

  const draw = guard(root, "Drawing the confusion matrix", () => {
    if (!present(root, body, viewState(model))) return;
    const lists = model.get("mode") === "pairs";
    splits.draw();
    modeSelect.value = model.get("normalize");
    modeLabel.hidden = lists;
    matrixBox.hidden = lists;
    matrixSide.hidden = lists;
    listsBox.hidden = !lists;
    clearButton.disabled = !(model.get("selected") || []).length && !model.get("selected_flip");
    drawScores();
    drawCompare();
    if (lists) {
      drawLists();
      return;
    }
    matrix.draw(data, { by: model.get("normalize"), selected: model.get("selected") || [], names: names() });
    drawConfused();
    drawTable();
  });

  // several traits change together (one Python hold_sync): draw once for them all
  const schedule = batched(() => {
    decode();
    draw();
  });

  const hover = (/** @type {{row: number, col: number} | null} */ cell) => {
    readout.textContent = cell && data ? cellText(data, cell, nameOf) : "";
  };

  // the SampleGallery of the selected cell, a widget of its own, embedded below
  const gallery = childView(model, "gallery", galleryHost, { what: "Showing the samples" });
  const stops = [
    bindCells(matrix.canvas, matrix.lookup, {
      hover,
      leave: () => hover(null),
      click: (cell) => save(model, { selected: [cell.row, cell.col] }),
    }),
    on(modeSelect, "change", () => save(model, { normalize: modeSelect.value })),
    splits.stop,
    matrix.stop,
    on(clearButton, "click", () => save(model, { selected: [], selected_flip: "" })),
    on(compareSelect, "change", () => save(model, { compare_step: Number(compareSelect.value) })),
    // "no evaluation at or before step N" names the linked step: redraw when it moves
    listen(model, ["step"], drawScores),
    listen(
      model,
      ["matrix", "mode", "split", "splits", "normalize", "selected", "selected_flip", "compare", "compare_step", "class_names", "class_table", "class_errors", "scores", "confused", "eval_step", "eval_steps", "empty", "error"],
      schedule,
    ),
  ];
  decode();
  draw();
  void gallery.refresh();
  return () => {
    for (const stop of stops) stop();
    schedule.cancel();
    gallery.remove();
    menu.dispose();
  };
}

export default { render };
