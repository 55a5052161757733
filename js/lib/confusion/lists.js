// The list mode of a ConfusionMatrix, for label sets too large for a matrix (a
// vocabulary, thousands of classes): the most confused (true, predicted) pairs
// with their counts, and the classes ranked by their errors. A click on a pair
// selects it as a cell of the matrix would ([true, predicted]); a click on a class
// selects [class, -1], its samples predicted as any other class.
// Class names come from data: they go in with textContent only.
import { sortableTable } from "../table.js";
import { percent } from "./matrix.js";

/**
 * @typedef {{true: number, pred: number, count: number, rate: number, true_name: string, pred_name: string}} PairRow
 * @typedef {{class: number, name: string, support: number, errors: number, error_rate: number,
 *   top_pred: number, top_pred_name: string, top_count: number}} ClassErrorRow
 * @typedef {{sortBy: string, descending: boolean}} Sort
 */

const named = (/** @type {string} */ name) => ({ text: name, title: name });
const count = (/** @type {number} */ v) => Number(v).toLocaleString();

/** Columns of the pairs table. */
export const PAIR_COLUMNS = [
  { key: "true_name", label: "true", sortValue: (/** @type {PairRow} */ r) => r.true, cell: (/** @type {PairRow} */ r) => named(r.true_name) },
  { key: "pred_name", label: "predicted", sortValue: (/** @type {PairRow} */ r) => r.pred, cell: (/** @type {PairRow} */ r) => named(r.pred_name) },
  { key: "count", label: "count", cell: (/** @type {PairRow} */ r) => count(r.count) },
  { key: "rate", label: "of true class", title: "the count as a share of the true class's samples", cell: (/** @type {PairRow} */ r) => percent(r.rate) },
];

/** Columns of the classes table. */
export const CLASS_COLUMNS = [
  { key: "name", label: "class", sortValue: (/** @type {ClassErrorRow} */ r) => r.class, cell: (/** @type {ClassErrorRow} */ r) => named(r.name) },
  { key: "support", label: "support", cell: (/** @type {ClassErrorRow} */ r) => count(r.support) },
  { key: "errors", label: "errors", cell: (/** @type {ClassErrorRow} */ r) => count(r.errors) },
  { key: "error_rate", label: "error rate", cell: (/** @type {ClassErrorRow} */ r) => percent(r.error_rate) },
  {
    key: "top_pred_name",
    label: "mostly predicted as",
    sortValue: (/** @type {ClassErrorRow} */ r) => r.top_count,
    cell: (/** @type {ClassErrorRow} */ r) => (r.top_pred >= 0 ? { text: `${r.top_pred_name} (${r.top_count})`, title: r.top_pred_name } : ""),
  },
];

/**
 * The header line of the list mode: how many classes, why there is no matrix, what is listed.
 * @param {Record<string, number>} scores
 * @param {number} pairs  rows in the pairs table
 * @param {number} classes  rows in the classes table
 * @returns {string}
 */
export function listsCaption(scores, pairs, classes) {
  const n = Number(scores.classes ?? 0);
  const errPairs = Number(scores.error_pairs ?? 0);
  const errClasses = Number(scores.classes_with_errors ?? 0);
  return (
    `${n.toLocaleString()} classes occur: too many for a matrix. ` +
    `The ${pairs.toLocaleString()} most frequent of ${errPairs.toLocaleString()} confused pairs, ` +
    `and the ${classes.toLocaleString()} classes with the most errors (of ${errClasses.toLocaleString()} with any); ` +
    "click a row for its samples."
  );
}

/**
 * @template R
 * @typedef {{kind: string, columns: object[], isSelected: (row: R, selected: number[]) => boolean,
 *   attrs: (row: R) => Record<string, string | number>}} ListSpec
 *   what sets one list apart: its class, columns, the row a selection marks, a row's attributes
 */

/** @type {ListSpec<PairRow>} */
const PAIRS = {
  kind: "nbviz-cm-pairs",
  columns: PAIR_COLUMNS,
  isSelected: (r, selected) => selected[0] === r.true && selected[1] === r.pred,
  attrs: (r) => ({ "data-true": r.true, "data-pred": r.pred, title: `show the ${r.count} samples of ${r.true_name} predicted as ${r.pred_name}` }),
};

/** @type {ListSpec<ClassErrorRow>} */
const CLASS_ERRORS = {
  kind: "nbviz-cm-class-errors",
  columns: CLASS_COLUMNS,
  isSelected: (r, selected) => selected[0] === r.class && selected[1] === -1,
  attrs: (r) => ({ "data-class": r.class, title: `show the ${r.errors} samples of ${r.name} predicted as another class` }),
};

/**
 * One list as a sortable table: a click on a row picks it, the selected row is marked.
 * @template R
 * @param {ListSpec<R>} spec
 * @param {R[]} rows
 * @param {number[]} selected
 * @param {Sort} sort
 * @param {(key: string) => void} onSort
 * @param {(row: R) => void} onPick
 */
function listTable(spec, rows, selected, sort, onSort, onPick) {
  return sortableTable({
    class: ["nbviz-cm-table", spec.kind],
    columns: spec.columns,
    rows,
    sortBy: sort.sortBy,
    descending: sort.descending,
    onSort,
    onRow: onPick,
    rowClass: (r) => (spec.isSelected(r, selected) ? "nbviz-active" : null),
    rowAttrs: spec.attrs,
  });
}

/**
 * The table of the most confused pairs.
 * @param {PairRow[]} rows
 * @param {number[]} selected
 * @param {Sort} sort
 * @param {(key: string) => void} onSort
 * @param {(row: PairRow) => void} onPick
 */
export function pairsTable(rows, selected, sort, onSort, onPick) {
  return listTable(PAIRS, rows, selected, sort, onSort, onPick);
}

/**
 * The table of the classes ranked by their errors.
 * @param {ClassErrorRow[]} rows
 * @param {number[]} selected
 * @param {Sort} sort
 * @param {(key: string) => void} onSort
 * @param {(row: ClassErrorRow) => void} onPick
 */
export function classErrorsTable(rows, selected, sort, onSort, onPick) {
  return listTable(CLASS_ERRORS, rows, selected, sort, onSort, onPick);
}
