// Tables of the views (runs, classes, modules, operators, layers): a header
// that sorts on click with an arrow and aria-sort on the sorted column, a
// stable order (rows that tie keep the order they came in, whichever the
// direction), missing values last, and every cell's text set as text.
import { el } from "./dom.js";

/**
 * What a cell holds: text, a node, or text/nodes with a class, title or style.
 * @typedef {string | number | Node | {text?: string, nodes?: Array<Node | string>, class?: string | string[],
 *   title?: string | null, style?: Partial<CSSStyleDeclaration>}} Cell
 */

/**
 * @template R
 * @typedef {object} Column
 * @property {string} key
 * @property {string} label  the header's text
 * @property {string} [title]  the header's tooltip
 * @property {string | string[]} [class]  on the header and on every cell of the column
 * @property {(row: R, index: number) => Cell} [cell]  the cell (default: row[key] as text)
 * @property {(row: R) => any} [sortValue]  what sorting compares (default: row[key])
 */

/**
 * @template R
 * @typedef {object} TableOptions
 * @property {Column<R>[]} columns
 * @property {R[]} rows
 * @property {string | string[]} [class]  the table's class
 * @property {boolean} [head]  draw the header row (default true)
 * @property {string} [sortBy]  key of the sorted column ("" or absent: rows as given)
 * @property {boolean} [descending]
 * @property {(key: string) => void} [onSort]  a header was clicked (headers sort only with it)
 * @property {(row: R, index: number) => void} [onRow]  a row was clicked
 *   (here and in cell, rowClass, rowAttrs: index is the row's place as shown)
 * @property {(row: R, index: number) => string | string[] | null | undefined} [rowClass]
 * @property {(row: R, index: number) => Record<string, string | number | boolean | null | undefined>} [rowAttrs]
 */

const missing = (/** @type {any} */ v) => v === null || v === undefined || v === "" || Number.isNaN(v);

/**
 * Compare two cell values for sorting: numbers numerically, then text in
 * natural order ("lr9" before "lr10"); missing values (null, "", NaN) always
 * last whatever the direction.
 * @param {any} a
 * @param {any} b
 * @param {boolean} descending
 * @returns {number}
 */
export function compareCells(a, b, descending) {
  if (missing(a) || missing(b)) return missing(a) === missing(b) ? 0 : missing(a) ? 1 : -1;
  let order;
  if (typeof a === "number" && typeof b === "number") order = a - b;
  else order = String(a).localeCompare(String(b), undefined, { numeric: true });
  return descending ? -order : order;
}

/**
 * `rows` sorted by `valueOf`, a new array; ties keep their given order.
 * @template R
 * @param {R[]} rows
 * @param {(row: R) => any} valueOf
 * @param {boolean} descending
 * @returns {R[]}
 */
export function sortRows(rows, valueOf, descending) {
  return rows
    .map((row, index) => ({ row, index, value: valueOf(row) }))
    .sort((a, b) => compareCells(a.value, b.value, descending) || a.index - b.index)
    .map((x) => x.row);
}

/**
 * The sort after a click on column `key`: the sorted column turns round, another
 * column starts in its own first direction (best first for a metric).
 * @param {string} key
 * @param {{sortBy: string, descending: boolean}} now
 * @param {boolean} firstDescending
 * @returns {{sortBy: string, descending: boolean}}
 */
export function nextSort(key, now, firstDescending) {
  return { sortBy: key, descending: key === now.sortBy ? !now.descending : firstDescending };
}

/**
 * A <td> for `cell`, with the column's class.
 * @param {Cell} cell
 * @param {string | string[] | undefined} cls
 */
function td(cell, cls) {
  const classes = [cls ?? []].flat();
  if (cell === null || typeof cell !== "object") return el("td", { class: classes, text: cell ?? "" });
  if (Object.getPrototypeOf(cell) !== Object.prototype) return el("td", { class: classes }, [/** @type {Node} */ (cell)]);
  const c = /** @type {Exclude<Cell, string | number | Node>} */ (cell);
  return el(
    "td",
    { class: [...classes, ...[c.class ?? []].flat()], text: c.text, attrs: { title: c.title ?? null }, style: c.style },
    c.nodes ?? [],
  );
}

/**
 * Build a table: a header (sorting when `onSort` is given) over one row per
 * item of `rows`, sorted by `sortBy` when set.
 * @template R
 * @param {TableOptions<R>} o
 * @returns {HTMLTableElement}
 */
export function sortableTable(o) {
  const byKey = new Map(o.columns.map((c) => [c.key, c]));
  const sorted = o.sortBy && byKey.has(o.sortBy)
    ? sortRows(o.rows, byKey.get(o.sortBy)?.sortValue ?? ((/** @type {any} */ r) => r[o.sortBy ?? ""]), !!o.descending)
    : [...o.rows];
  const parts = [];
  if (o.head !== false) {
    const head = el(
      "tr",
      {},
      o.columns.map((c) => {
        const isSorted = !!o.onSort && c.key === o.sortBy;
        const arrow = isSorted ? (o.descending ? " \u25bc" : " \u25b2") : "";
        const th = el("th", {
          class: c.class,
          text: c.label + arrow,
          attrs: {
            "data-key": c.key,
            title: c.title ?? (o.onSort ? `sort by ${c.label}` : null),
            "aria-sort": isSorted ? (o.descending ? "descending" : "ascending") : null,
          },
        });
        const onSort = o.onSort;
        if (onSort) th.addEventListener("click", () => onSort(c.key));
        return th;
      }),
    );
    parts.push(el("thead", {}, [head]));
  }
  const trs = sorted.map((row, i) => {
    const tr = el(
      "tr",
      { class: o.rowClass?.(row, i) ?? undefined, attrs: o.rowAttrs?.(row, i) ?? {} },
      o.columns.map((c) => td(c.cell ? c.cell(row, i) : /** @type {any} */ (row)[c.key] ?? "", c.class)),
    );
    const onRow = o.onRow;
    if (onRow) tr.addEventListener("click", () => onRow(row, i));
    return tr;
  });
  parts.push(el("tbody", {}, trs));
  return /** @type {HTMLTableElement} */ (el("table", { class: o.class }, parts));
}
