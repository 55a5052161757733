// RunsTable: one row per run, its configuration beside the final and best value
// of every scalar; click a header to sort, click a row to highlight that run.
// Over it, for many runs, parallel coordinates (lib/parallel.js): drag along an
// axis to brush a range, pick config values in the filter menus; the runs
// passing both are `selected_runs` (Python works them out), which a linked
// LossCurves draws. The download menu (lib/export.js) gives the table as CSV
// and the parallel coordinates as PNG or SVG.
import { el, on, select } from "./lib/dom.js";
import { exportMenu, svgCanvas, svgDocument, toCsv } from "./lib/export.js";
import { formatNumber, formatStep } from "./lib/format.js";
import { sizeCanvas, themeColors } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { axisNear, brushOf, cutTextAt, drawParallel, PC_HEIGHT } from "./lib/parallel.js";
import { perFrame } from "./lib/schedule.js";
import { guard, present, viewState } from "./lib/state.js";
import { nextSort, sortableTable, sortRows } from "./lib/table.js";

/**
 * @typedef {{key: string, label: string, kind: "run" | "config" | "final" | "best", better?: "min" | "max"}} Column
 * @typedef {{name: string, cells: Record<string, any>, steps: Record<string, number>, nonfinite: Record<string, number>, ends?: Record<string, {value: string, step: number}>}} Row
 * @typedef {import("./lib/parallel.js").Axis & {filter?: boolean, options?: string[]}} Axis
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
 * NaN/Inf in the series flagged and counted; a final value whose series ended
 * non-finite reads as that ("ends NaN @19 (12 NaN/Inf; last finite 1.1 @7)").
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
  if (column.kind === "config" && text.length > 40) title = text.slice(0, 2000);
  const end = row.ends?.[column.key];
  if (end) {
    // the series ended non-finite: said first, the last finite value after it
    const last = v === null || v === undefined ? "" : `; last finite ${text} @${formatStep(step ?? 0)}`;
    text = `ends ${end.value} @${formatStep(end.step)} (${bad} NaN/Inf${last})`;
  } else if (bad && v === null) {
    text = "NaN";
  } else if (bad) {
    text += ` (${bad} NaN/Inf)`;
  }
  return { text, class: classes, title: title || null };
}

/**
 * The table as CSV: every run, its cells as numbers or text, and whether it is selected.
 * @param {Column[]} columns
 * @param {Row[]} rows
 * @param {Set<string>} chosen
 * @returns {string}
 */
export function tableCsv(columns, rows, chosen) {
  const body = rows.map((r) => [...columns.map((c) => r.cells[c.key] ?? null), chosen.has(r.name)]);
  return toCsv([...columns.map((c) => c.label), "selected"], body);
}

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-runs-table");
  const scroll = el("div", { class: "nbviz-rt-scroll" });
  const metricSelect = select("nbviz-rt-metric", "metric axis");
  const filterBox = el("span", { class: "nbviz-rt-filters" });
  const clear = el("button", { class: "nbviz-rt-clear", text: "clear selection", attrs: { type: "button" } });
  const onlyBox = /** @type {HTMLInputElement} */ (el("input", { attrs: { type: "checkbox", class: "nbviz-rt-only" } }));
  onlyBox.checked = true;
  const status = el("span", { class: "nbviz-notice nbviz-rt-status" });
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-rt-parallel" }));
  const menu = exportMenu({
    name: "runs_table",
    csv: () => tableCsv(model.get("columns") || [], model.get("rows") || [], new Set(model.get("selected_runs") || [])),
    png: () => [canvas],
    svg: () => {
      const fake = svgCanvas(width(), PC_HEIGHT);
      drawParallel(/** @type {any} */ (fake), options(), (c, w, h) => sizeCanvas(c, w, h, 1));
      return svgDocument([{ title: "runs", width: width(), height: PC_HEIGHT, body: fake.body() }]);
    },
  });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, ["metric ", metricSelect]),
    filterBox,
    clear,
    el("label", {}, [onlyBox, " only selected rows"]),
    menu.node,
    status,
  ]);
  const pcBox = el("div", { class: "nbviz-rt-pc" }, [canvas]);
  const body = el("div", { class: "nbviz-rt" }, [
    toolbar,
    pcBox,
    el("div", { class: "nbviz-notice", text: "drag along an axis to select runs; click a column to sort, a run to highlight it" }),
    scroll,
  ]);

  /** @type {[string, number, number] | null} a brush being dragged */
  let preview = null;
  /** @type {import("./lib/parallel.js").PlacedAxis[]} */
  let placed = [];
  const width = () => Math.max(360, root.clientWidth || 800);

  const options = () => {
    const rows = /** @type {Row[]} */ (model.get("rows") || []);
    const chosen = new Set(model.get("selected_runs") || []);
    const selected = model.get("selected") || "";
    return {
      axes: /** @type {Axis[]} */ (model.get("axes") || []),
      coords: model.get("coords") || [],
      chosen: rows.map((r) => !chosen.size || chosen.has(r.name)),
      brushes: model.get("brushes") || {},
      preview,
      width: width(),
      theme: themeColors(root),
      highlight: rows.findIndex((r) => r.name === selected),
    };
  };

  const drawPc = () => {
    const axes = model.get("axes") || [];
    pcBox.hidden = axes.length < 2;
    if (pcBox.hidden) return;
    placed = drawParallel(canvas, options(), sizeCanvas);
    canvas.setAttribute(
      "data-axes",
      JSON.stringify(placed.map((a) => ({ key: a.key, x: a.x, top: 34, bottom: PC_HEIGHT - 26 }))),
    );
  };

  const draw = guard(root, "Drawing the runs table", () => {
    if (!present(root, body, viewState(model))) return;
    /** @type {Column[]} */
    const columns = model.get("columns") || [];
    /** @type {Row[]} */
    const allRows = model.get("rows") || [];
    const chosen = new Set(model.get("selected_runs") || []);
    const rows = chosen.size && onlyBox.checked ? allRows.filter((r) => chosen.has(r.name)) : allRows;
    const sortBy = model.get("sort_by") || "";
    const descending = !!model.get("descending");
    const selected = model.get("selected");
    status.textContent = chosen.size ? `${chosen.size} of ${allRows.length} runs selected` : `${allRows.length} runs`;
    root.setAttribute("data-selected", String(chosen.size));
    /** @type {HTMLButtonElement} */ (clear).disabled = !chosen.size && !Object.keys(model.get("filters") || {}).length;
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
      rowClass: (r) => [r.name === selected ? "nbviz-active" : "", chosen.has(r.name) ? "nbviz-rt-picked" : ""].filter(Boolean),
      rowAttrs: (r) => ({ "data-run": r.name }),
    });
    scroll.replaceChildren(table);
    drawPc();
  });

  /** The metric menu and one filter menu per config key with few values. */
  const controls = () => {
    const metrics = /** @type {Column[]} */ (model.get("columns") || []).filter((c) => c.kind === "final" || c.kind === "best");
    metricSelect.replaceChildren(...metrics.map((c) => el("option", { text: c.label, attrs: { value: c.key } })));
    metricSelect.value = model.get("metric") || "";
    const filters = model.get("filters") || {};
    const menus = /** @type {Axis[]} */ (model.get("axes") || [])
      .filter((a) => a.filter)
      .map((a) => {
        const menu = select("nbviz-rt-filter", `filter ${a.label}`, [["", "all"], ...(a.options ?? []).map((t) => /** @type {[string, string]} */ ([t, t]))]);
        menu.setAttribute("data-key", a.key);
        menu.value = filters[a.key]?.[0] ?? "";
        menu.addEventListener("change", () => {
          const next = { ...(model.get("filters") || {}) };
          if (menu.value === "") delete next[a.key];
          else next[a.key] = [menu.value];
          save(model, { filters: next });
        });
        return el("label", {}, [`${a.label} `, menu]);
      });
    filterBox.replaceChildren(...menus);
  };

  const schedule = perFrame(drawPc);
  const local = (/** @type {PointerEvent} */ e) => {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  const stops = [
    on(canvas, "pointerdown", (/** @type {PointerEvent} */ e) => {
      const [x, y] = local(e);
      const axis = axisNear(placed, x);
      if (!axis) return;
      preview = [axis.key, y, y];
      canvas.setPointerCapture?.(e.pointerId);
    }),
    on(canvas, "pointermove", (/** @type {PointerEvent} */ e) => {
      if (!preview) {
        // a name or tick cut to fit: the whole of it as the tooltip
        const [x, y] = local(e);
        const whole = cutTextAt(placed, x, y);
        if (whole) canvas.title = whole;
        else canvas.removeAttribute("title");
        return;
      }
      preview = [preview[0], preview[1], local(e)[1]];
      schedule();
    }),
    on(canvas, "pointerup", () => {
      if (!preview) return;
      const [key, y0, y1] = preview;
      preview = null;
      const axis = placed.find((a) => a.key === key);
      const next = { ...(model.get("brushes") || {}) };
      if (!axis || Math.abs(y1 - y0) < 3) delete next[key];
      else next[key] = brushOf(axis, y0, y1);
      save(model, { brushes: next });
      schedule();
    }),
    on(metricSelect, "change", () => save(model, { metric: metricSelect.value, brushes: {} })),
    on(clear, "click", () => save(model, { brushes: {}, filters: {}, selected_runs: [] })),
    on(onlyBox, "change", () => draw()),
    listen(model, ["columns", "axes", "metric", "filters"], controls),
    listen(model, ["columns", "rows", "coords", "axes", "selected", "selected_runs", "brushes", "sort_by", "descending", "empty", "error"], draw),
  ];
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => schedule()) : null;
  resize?.observe(root);
  controls();
  draw();
  return () => {
    for (const stop of stops) stop();
    resize?.disconnect();
    schedule.cancel();
    menu.dispose();
  };
}

export default { render };
