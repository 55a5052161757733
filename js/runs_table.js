// RunsTable: one row per run, its configuration beside the final and best value
// of every scalar; click a header to sort, click a row to highlight that run.
import { el, message } from "./lib/dom.js";
import { formatNumber, formatStep } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";

/**
 * @typedef {{key: string, label: string, kind: "run" | "config" | "final" | "best", better?: "min" | "max"}} Column
 * @typedef {{name: string, cells: Record<string, any>, steps: Record<string, number>, nonfinite: Record<string, number>}} Row
 */

/**
 * Compare two cell values for sorting: numbers numerically, then text; missing
 * values always last whatever the direction.
 * @param {any} a
 * @param {any} b
 * @param {boolean} descending
 * @returns {number}
 */
export function compareCells(a, b, descending) {
  const missing = (/** @type {any} */ v) => v === null || v === undefined || v === "";
  if (missing(a) || missing(b)) return missing(a) === missing(b) ? 0 : missing(a) ? 1 : -1;
  let order;
  if (typeof a === "number" && typeof b === "number") order = a - b;
  else order = String(a).localeCompare(String(b), undefined, { numeric: true });
  return descending ? -order : order;
}

/**
 * Index of the row holding the best value of a metric column (-1 when none).
 * @param {Row[]} rows
 * @param {Column} column
 * @returns {number}
 */
export function bestRow(rows, column) {
  let best = -1;
  for (let i = 0; i < rows.length; i++) {
    const v = rows[i].cells[column.key];
    if (typeof v !== "number") continue;
    const b = best < 0 ? null : rows[best].cells[column.key];
    if (b === null || (column.better === "max" ? v > b : v < b)) best = i;
  }
  return best;
}

/** @param {any} v */
const cellText = (v) =>
  v === null || v === undefined ? "" : typeof v === "number" ? formatNumber(v) : typeof v === "boolean" ? String(v) : String(v);

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-runs-table");
  const table = el("table", { class: "nbviz-rt-table" });
  const body = el("div", { class: "nbviz-rt" }, [
    el("div", { class: "nbviz-notice", text: "click a column to sort, a run to highlight it" }),
    el("div", { class: "nbviz-rt-scroll" }, [table]),
  ]);

  const draw = () => {
    const error = model.get("error");
    const empty = model.get("empty");
    if (error || empty) {
      message(root, error || empty, { kind: error ? "error" : "empty" });
      return;
    }
    if (!root.contains(body)) root.replaceChildren(body);
    /** @type {Column[]} */
    const columns = model.get("columns") || [];
    /** @type {Row[]} */
    const rows = [...(model.get("rows") || [])];
    const sortBy = model.get("sort_by");
    const descending = !!model.get("descending");
    if (sortBy) rows.sort((a, b) => compareCells(a.cells[sortBy], b.cells[sortBy], descending));
    const best = new Map(columns.filter((c) => c.kind === "final" || c.kind === "best").map((c) => [c.key, bestRow(rows, c)]));

    const head = el(
      "tr",
      {},
      columns.map((c) => {
        const arrow = c.key === sortBy ? (descending ? " \u25bc" : " \u25b2") : "";
        const th = el("th", {
          class: c.kind === "config" ? "nbviz-rt-config" : "",
          text: c.label + arrow,
          attrs: {
            "data-key": c.key,
            title: c.better ? `${c.label} (${c.better === "max" ? "higher" : "lower"} is better)` : c.label,
            "aria-sort": c.key === sortBy ? (descending ? "descending" : "ascending") : null,
          },
        });
        th.addEventListener("click", () => {
          const same = c.key === sortBy;
          // metrics sort best first on the first click
          const firstDescending = c.better === "max";
          save(model, { sort_by: c.key, descending: same ? !descending : firstDescending });
        });
        return th;
      }),
    );
    const selected = model.get("selected");
    const trs = rows.map((r, i) => {
      const tr = el(
        "tr",
        { class: r.name === selected ? "nbviz-active" : "", attrs: { "data-run": r.name } },
        columns.map((c) => {
          const v = r.cells[c.key];
          const classes = [];
          if (c.kind === "config") classes.push("nbviz-rt-config");
          if (best.get(c.key) === i && rows.length > 1) classes.push("nbviz-rt-best");
          const bad = r.nonfinite?.[c.key];
          if (bad) classes.push("nbviz-rt-bad");
          const step = r.steps?.[c.key];
          let title = step !== undefined ? `at step ${formatStep(step)}` : "";
          if (bad) title += `${title ? "; " : ""}${bad} NaN/Inf value(s) in this series`;
          let text = cellText(v);
          if (c.kind === "best" && step !== undefined) text += ` @${formatStep(step)}`;
          if (bad && v === null) text = "NaN";
          return el("td", { class: classes, text, attrs: { title: title || null } });
        }),
      );
      tr.addEventListener("click", () => save(model, { selected: r.name === selected ? "" : r.name }));
      return tr;
    });
    table.replaceChildren(el("thead", {}, [head]), el("tbody", {}, trs));
  };

  draw();
  return listen(model, ["columns", "rows", "selected", "sort_by", "descending", "empty", "error"], draw);
}

export default { render };
