// RunsTable: one row per run, its configuration beside the final and best value
// of every scalar; click a header to sort, click a row to highlight that run.
import { el } from "./lib/dom.js";
import { formatNumber, formatStep } from "./lib/format.js";
import { listen, save } from "./lib/model.js";
import { guard, present, viewState } from "./lib/state.js";
import { nextSort, sortableTable, sortRows } from "./lib/table.js";

/**
 * @typedef {{key: string, label: string, kind: "run" | "config" | "final" | "best", better?: "min" | "max"}} Column
 * @typedef {{name: string, cells: Record<string, any>, steps: Record<string, number>, nonfinite: Record<string, number>}} Row
 */

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
const cellText = (v) => (v === null || v === undefined ? "" : typeof v === "number" ? formatNumber(v) : String(v));

/**
 * The cell of `row` in `column`: the value, the step it was reached at, and
 * NaN/Inf in the series flagged.
 * @param {Row} row
 * @param {Column} column
 * @param {boolean} best  whether this row holds the column's best value
 * @returns {{text: string, class: string[], title: string | null}}
 */
export function runCell(row, column, best) {
  const v = row.cells[column.key];
  const classes = [];
  if (best) classes.push("nbviz-rt-best");
  const bad = row.nonfinite?.[column.key];
  if (bad) classes.push("nbviz-rt-bad");
  const step = row.steps?.[column.key];
  let title = step !== undefined ? `at step ${formatStep(step)}` : "";
  if (bad) title += `${title ? "; " : ""}${bad} NaN/Inf value(s) in this series`;
  let text = cellText(v);
  if (column.kind === "best" && step !== undefined) text += ` @${formatStep(step)}`;
  if (bad && v === null) text = "NaN";
  return { text, class: classes, title: title || null };
}

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-runs-table");
  const scroll = el("div", { class: "nbviz-rt-scroll" });
  const body = el("div", { class: "nbviz-rt" }, [
    el("div", { class: "nbviz-notice", text: "click a column to sort, a run to highlight it" }),
    scroll,
  ]);

  const draw = guard(root, "Drawing the runs table", () => {
    if (!present(root, body, viewState(model))) return;
    /** @type {Column[]} */
    const columns = model.get("columns") || [];
    /** @type {Row[]} */
    const rows = model.get("rows") || [];
    const sortBy = model.get("sort_by") || "";
    const descending = !!model.get("descending");
    const selected = model.get("selected");
    // the best of each metric, among the rows in the order shown (the first of a tie)
    const shown = sortBy ? sortRows(rows, (r) => r.cells[sortBy], descending) : rows;
    const best = new Map(
      columns
        .filter((c) => (c.kind === "final" || c.kind === "best") && rows.length > 1)
        .map((c) => [c.key, shown[bestRow(shown, c)]]),
    );
    const table = sortableTable({
      class: "nbviz-rt-table",
      columns: columns.map((c) => ({
        key: c.key,
        label: c.label,
        title: c.better ? `${c.label} (${c.better === "max" ? "higher" : "lower"} is better)` : c.label,
        class: c.kind === "config" ? "nbviz-rt-config" : undefined,
        sortValue: (/** @type {Row} */ r) => r.cells[c.key],
        cell: (/** @type {Row} */ r) => runCell(r, c, best.get(c.key) === r),
      })),
      rows,
      sortBy,
      descending,
      // metrics sort best first on the first click
      onSort: (key) => {
        const column = columns.find((c) => c.key === key);
        const next = nextSort(key, { sortBy, descending }, column?.better === "max");
        save(model, { sort_by: next.sortBy, descending: next.descending });
      },
      onRow: (r) => save(model, { selected: r.name === selected ? "" : r.name }),
      rowClass: (r) => (r.name === selected ? "nbviz-active" : null),
      rowAttrs: (r) => ({ "data-run": r.name }),
    });
    scroll.replaceChildren(table);
  });

  draw();
  return listen(model, ["columns", "rows", "selected", "sort_by", "descending", "empty", "error"], draw);
}

export default { render };
