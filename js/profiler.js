// Profiler: where a training step spends its time. A stacked bar splits the step
// into data/forward/backward/optimizer/other; an icicle shows the model's modules
// (width = time) and zooms to a module on click; a sortable module table and the
// top operators follow; one line states what the profiler itself cost.
import { categoricalRgb, mix, rgbToCss } from "./lib/color.js";
import { el, select } from "./lib/dom.js";
import { exportMenu } from "./lib/export.js";
import { formatNumber, formatStep } from "./lib/format.js";
import { listen, save } from "./lib/model.js";
import { guard, message, viewState } from "./lib/state.js";
import { nextSort, sortableTable } from "./lib/table.js";
import { modulesCsv } from "./lib/view_csv.js";

export const PARTS = ["data", "forward", "backward", "optimizer", "other"];
const PART_COLORS = { data: "#8e24aa", forward: "#1e88e5", backward: "#e53935", optimizer: "#43a047", other: "#9e9e9e" };
const ROW_PX = 22;
const MIN_FRACTION = 0.002; // icicle nodes narrower than this share of the width are not drawn

/**
 * @typedef {{name: string, type: string, parent: string, depth: number, calls: number,
 *   self_ms: number, total_ms: number, pct: number, forward_self_ms: number, forward_ms: number,
 *   backward_self_ms: number, backward_ms: number, device_ms: number, memory_bytes: number,
 *   device_memory_bytes: number, input_shapes: number[][][]}} Module
 * @typedef {{name: string, calls: number, self_ms: number, total_ms: number, pct: number,
 *   self_device_ms: number, device_ms: number, memory_bytes: number}} Operator
 * @typedef {{x: number, w: number, depth: number, module: Module}} Placed
 */

/**
 * What the header's step time is: the mean of the profiled steps as the trace
 * timed them, with their range ("mean of 5 profiled steps (52.1–140 ms) on cpu").
 * @param {{schedule: {active: number}, device: string, step_ms_each?: number[]}} profile
 * @returns {string}
 */
export function stepNote(profile) {
  const each = (profile.step_ms_each || []).filter(Number.isFinite);
  const n = profile.schedule.active;
  const range = each.length > 1 ? ` (${formatMs(Math.min(...each))}\u2013${formatMs(Math.max(...each))})` : "";
  return `mean of ${n} profiled step${n === 1 ? "" : "s"}${range} on ${profile.device}`;
}

/** Milliseconds as short text ("12.3 ms", "450 µs"). @param {number} ms */
export function formatMs(ms) {
  if (!Number.isFinite(ms)) return "–";
  if (ms === 0) return "0";
  if (Math.abs(ms) < 1) return `${formatNumber(Number((ms * 1000).toPrecision(3)))} µs`;
  return `${formatNumber(Number(ms.toPrecision(3)))} ms`;
}

/** Bytes as short text ("1.5 MiB"); negative means freed. @param {number} b */
export function formatBytes(b) {
  if (!Number.isFinite(b) || b === 0) return "";
  const units = ["B", "KiB", "MiB", "GiB"];
  let v = Math.abs(b);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${b < 0 ? "-" : ""}${formatNumber(Number(v.toPrecision(3)))} ${units[u]}`;
}

/**
 * The time of a module the icicle's widths use.
 * @param {Module} m
 * @param {"total" | "forward" | "backward"} phase
 */
export function valueOf(m, phase) {
  return phase === "forward" ? m.forward_ms : phase === "backward" ? m.backward_ms : m.total_ms;
}

/**
 * Icicle layout: `root` spans [0, 1] on row 0; children share their parent's span in
 * proportion to their time, left to right in model order (scaled down together if
 * their sum exceeds the parent's time). Nodes narrower than `minFraction` are dropped.
 * @param {Module[]} modules
 * @param {string} root  the module at the top (the zoom)
 * @param {"total" | "forward" | "backward"} phase
 * @param {number} [minFraction]
 * @returns {Placed[]}
 */
export function icicleLayout(modules, root, phase, minFraction = MIN_FRACTION) {
  const byName = new Map(modules.map((m) => [m.name, m]));
  /** @type {Map<string, Module[]>} */
  const kids = new Map();
  for (const m of modules) {
    if (m.name === "") continue;
    const list = kids.get(m.parent) ?? [];
    list.push(m);
    kids.set(m.parent, list);
  }
  const top = byName.get(root);
  if (!top) return [];
  /** @type {Placed[]} */
  const out = [];
  /** @param {Module} m @param {number} x @param {number} w @param {number} depth */
  const place = (m, x, w, depth) => {
    out.push({ x, w, depth, module: m });
    const children = (kids.get(m.name) ?? []).filter((c) => valueOf(c, phase) > 0);
    const own = valueOf(m, phase);
    const sum = children.reduce((s, c) => s + valueOf(c, phase), 0);
    const scale = Math.max(own, sum);
    if (!(scale > 0)) return;
    let cx = x;
    for (const c of children) {
      const cw = (w * valueOf(c, phase)) / scale;
      if (cw >= minFraction) place(c, cx, cw, depth + 1);
      cx += cw;
    }
  };
  place(top, 0, 1, 0);
  return out;
}

/**
 * The modules from the model down to `name` (for the breadcrumbs).
 * @param {Module[]} modules
 * @param {string} name
 * @returns {Module[]}
 */
export function pathTo(modules, name) {
  const byName = new Map(modules.map((m) => [m.name, m]));
  const path = [];
  let m = byName.get(name);
  while (m) {
    path.unshift(m);
    if (m.name === "") break;
    m = byName.get(m.parent);
  }
  return path;
}

/**
 * Whether `name` is `root` or lies under it.
 * @param {Map<string, Module>} byName
 * @param {string} name
 * @param {string} root
 */
export function isUnder(byName, name, root) {
  if (root === "") return true;
  let m = byName.get(name);
  while (m) {
    if (m.name === root) return true;
    if (m.name === "") return false;
    m = byName.get(m.parent);
  }
  return false;
}

/** @param {Module} m */
const label = (m) => (m.name === "" ? `(${m.type})` : m.name);

/** @param {number[][][]} shapes */
const shapesText = (shapes) =>
  (shapes || []).map((sig) => sig.map((s) => `[${s.join(", ")}]`).join(" ")).join(" | ");

/** Colour of an icicle node: one hue per module type. @param {string} type */
function typeColor(type) {
  let h = 0;
  for (let i = 0; i < type.length; i++) h = (h * 31 + type.charCodeAt(i)) >>> 0;
  return rgbToCss(mix(categoricalRgb(h % 20, 20), [255, 255, 255], 0.45));
}

/**
 * A column of a profiler table: text columns are left-aligned, `format` turns
 * the value into its text.
 * @typedef {{key: string, label: string, text?: boolean, format?: (v: any, row: any) => string, title?: string}} ProfColumn
 */

/**
 * A sortable profiler table (class nbviz-prof-table). Numbers sort by value,
 * text columns by their text as shown.
 * @param {ProfColumn[]} columns
 * @param {any[]} rows
 * @param {{sortBy: string, descending: boolean, onSort: (key: string) => void,
 *   onRow?: (row: any) => void, active?: (row: any) => boolean, rowAttrs?: (row: any) => Record<string, string>}} options
 */
function table(columns, rows, options) {
  return sortableTable({
    class: "nbviz-prof-table",
    columns: columns.map((c) => ({
      key: c.key,
      label: c.label,
      title: c.title,
      class: c.text ? "nbviz-prof-text" : undefined,
      // a text column sorts by the text shown: the model itself, "(Sequential)", before its modules
      sortValue: c.text && c.format ? (/** @type {any} */ r) => c.format?.(r[c.key], r) : undefined,
      cell: (r) => ({
        text: c.format ? c.format(r[c.key], r) : String(r[c.key] ?? ""),
        class: c.key === "input_shapes" ? "nbviz-prof-shapes" : [],
      }),
    })),
    rows,
    sortBy: options.sortBy,
    descending: options.descending,
    onSort: options.onSort,
    onRow: options.onRow,
    rowClass: (r) => (options.active?.(r) ? "nbviz-active" : null),
    rowAttrs: options.rowAttrs,
  });
}

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-profiler");
  // operator table order is local to this view
  let opSort = "self_ms";
  let opDescending = true;
  const menu = exportMenu({ name: "profiler_modules", csv: () => modulesCsv((k) => model.get(k)) });

  const draw = guard(root, "Drawing the profile", () => {
    const profile = model.get("profile") || {};
    const state = viewState(model, !Array.isArray(profile.modules) && "Nothing profiled yet.");
    if (state) {
      message(root, state.text, { kind: state.kind });
      return;
    }
    /** @type {Module[]} */
    const modules = profile.modules;
    /** @type {Operator[]} */
    const operators = profile.operators || [];
    const byName = new Map(modules.map((m) => [m.name, m]));
    const zoom = byName.has(model.get("zoom")) ? model.get("zoom") : "";
    const phase = model.get("phase") || "total";
    const device = profile.device !== "cpu";
    const stepMs = profile.step_ms;

    // header and overhead
    const notice = model.get("notice");
    const head = el("div", { class: "nbviz-prof-head" }, [
      el("span", { class: "nbviz-prof-title", text: `${profile.model} at step ${formatStep(profile.step)}` }),
      el("span", { class: "nbviz-prof-steptime", text: `${formatMs(stepMs)} per step` }),
      el("span", { class: "nbviz-muted nbviz-prof-stepnote", text: stepNote(profile) }),
      notice ? el("span", { class: "nbviz-notice", text: notice }) : null,
    ]);
    const overhead = el("div", { class: "nbviz-prof-overhead", text: model.get("overhead") });
    const notes = (profile.notes || []).length ? el("div", { class: "nbviz-prof-notes", text: profile.notes.join("; ") }) : null;

    // step breakdown
    const parts = profile.breakdown || {};
    const sum = PARTS.reduce((s, k) => s + (parts[k] || 0), 0) || 1;
    const bar = el(
      "div",
      { class: "nbviz-prof-bar", attrs: { role: "img", "aria-label": "step breakdown" } },
      PARTS.filter((k) => parts[k] > 0).map((k) =>
        el("div", {
          class: "nbviz-prof-seg",
          text: parts[k] / sum > 0.08 ? k : "",
          attrs: { "data-part": k, title: `${k}: ${formatMs(parts[k])} (${((100 * parts[k]) / sum).toFixed(1)}%)` },
          style: { width: `${(100 * parts[k]) / sum}%`, background: PART_COLORS[/** @type {keyof PART_COLORS} */ (k)] },
        }),
      ),
    );
    const legend = el(
      "div",
      { class: "nbviz-prof-legend" },
      PARTS.map((k) =>
        el("span", { class: "nbviz-prof-part", attrs: { "data-part": k } }, [
          el("span", { class: "nbviz-swatch", style: { background: PART_COLORS[/** @type {keyof PART_COLORS} */ (k)] } }),
          `${k} ${formatMs(parts[k] || 0)} (${((100 * (parts[k] || 0)) / sum).toFixed(1)}%)`,
        ]),
      ),
    );

    // icicle with breadcrumbs and a phase choice
    const crumbs = el(
      "div",
      { class: "nbviz-prof-crumbs" },
      pathTo(modules, zoom).flatMap((m, i, all) => {
        const crumb = el("span", { class: "nbviz-prof-crumb", text: label(m), attrs: { "data-name": m.name } });
        if (i < all.length - 1) crumb.addEventListener("click", () => save(model, { zoom: m.name }));
        return i ? [el("span", { class: "nbviz-muted", text: "\u203a" }), crumb] : [crumb];
      }),
    );
    const phaseSelect = select("nbviz-prof-phase", "width", ["total", "forward", "backward"].map((p) => [p, p === "total" ? "forward + backward" : p]));
    phaseSelect.value = phase;
    phaseSelect.addEventListener("change", () => save(model, { phase: phaseSelect.value }));
    const placed = icicleLayout(modules, zoom, phase);
    const depth = placed.reduce((d, p) => Math.max(d, p.depth), 0);
    const icicle = el("div", { class: "nbviz-prof-icicle", attrs: { "data-zoom": zoom }, style: { height: `${(depth + 1) * ROW_PX + 2}px` } });
    for (const p of placed) {
      const m = p.module;
      const v = valueOf(m, phase);
      const node = el("div", {
        class: ["nbviz-prof-node", p.depth === 0 ? "nbviz-prof-root" : ""],
        text: p.w > 0.04 ? `${label(m)} ${formatMs(v)}` : "",
        attrs: {
          "data-name": m.name,
          title: `${label(m)} (${m.type}): ${formatMs(v)} ${phase === "total" ? "forward + backward" : phase}, self ${formatMs(m.self_ms)}, ${m.pct.toFixed(1)}% of the step`,
        },
        style: { left: `${100 * p.x}%`, width: `${100 * p.w}%`, top: `${p.depth * ROW_PX}px`, background: typeColor(m.type) },
      });
      node.addEventListener("click", () => {
        // the top bar zooms out one level, any other node zooms in to it
        if (p.depth === 0) {
          if (m.name !== "") save(model, { zoom: m.parent });
        } else save(model, { zoom: m.name });
      });
      icicle.append(node);
    }
    const icicleBlock = el("div", {}, [
      el("div", { class: "nbviz-toolbar" }, [crumbs, el("label", {}, ["width:", phaseSelect]), menu.node, el("span", { class: "nbviz-notice", text: "click a module to zoom in, the top bar to zoom out" })]),
      icicle,
    ]);

    // module table: the zoomed subtree
    const sortBy = model.get("sort_by");
    const descending = !!model.get("descending");
    const msCol = (/** @type {string} */ key, /** @type {string} */ text, /** @type {string} */ title) => ({ key, label: text, title, format: formatMs });
    const moduleColumns = [
      { key: "name", label: "module", text: true, format: (/** @type {string} */ v, /** @type {Module} */ r) => label(r) },
      { key: "type", label: "type", text: true },
      { key: "calls", label: "calls", format: formatNumber, title: "calls per step" },
      msCol("self_ms", "self", "forward + backward time in the module itself, children excluded"),
      msCol("total_ms", "total", "forward + backward time, children included"),
      { key: "pct", label: "% of step", format: (/** @type {number} */ v) => `${v.toFixed(1)}%` },
      msCol("forward_self_ms", "fwd self", "forward time in the module itself"),
      msCol("forward_ms", "fwd total", "forward time, children included"),
      msCol("backward_self_ms", "bwd self", "backward time of the autograd nodes its forward created"),
      msCol("backward_ms", "bwd total", "backward time, children included"),
      ...(device ? [msCol("device_ms", "device", "kernel time on the device, children included")] : []),
      { key: "memory_bytes", label: "memory", format: formatBytes, title: "net host memory allocated in its forward, children included" },
      { key: "input_shapes", label: "input shapes", text: true, format: shapesText },
    ];
    const moduleTable = table(
      moduleColumns,
      modules.filter((m) => isUnder(byName, m.name, zoom)),
      {
        sortBy,
        descending,
        onSort: (key) => {
          const next = nextSort(key, { sortBy, descending }, key !== "name" && key !== "type");
          save(model, { sort_by: next.sortBy, descending: next.descending });
        },
        onRow: (r) => save(model, { zoom: r.name }),
        active: (r) => r.name === zoom,
        rowAttrs: (r) => ({ "data-name": r.name }),
      },
    );

    // top operators
    const opColumns = [
      { key: "name", label: "operator", text: true },
      { key: "calls", label: "calls", format: formatNumber },
      msCol("self_ms", "self CPU", "host time in the operator itself"),
      msCol("total_ms", "total CPU", "host time, nested operators included"),
      { key: "pct", label: "% of step", format: (/** @type {number} */ v) => `${v.toFixed(1)}%` },
      ...(device ? [msCol("self_device_ms", "self device", "kernel time of the operator itself")] : []),
      { key: "memory_bytes", label: "memory", format: formatBytes },
    ];
    const opTable = table(opColumns, operators.slice(0, 100), {
      sortBy: opSort,
      descending: opDescending,
      onSort: (key) => {
        ({ sortBy: opSort, descending: opDescending } = nextSort(key, { sortBy: opSort, descending: opDescending }, key !== "name"));
        draw();
      },
    });

    root.replaceChildren(
      el("div", { class: "nbviz-prof" }, [
        head,
        el("div", { class: "nbviz-prof-breakdown" }, [bar, legend]),
        overhead,
        notes,
        icicleBlock,
        el("div", { class: "nbviz-prof-modules" }, [el("div", { class: "nbviz-prof-scroll" }, [moduleTable])]),
        el("div", { class: "nbviz-prof-ops" }, [el("b", { text: "Top operators" }), el("div", { class: "nbviz-prof-scroll" }, [opTable])]),
      ]),
    );
    root.dataset.rendered = "1";
  });

  draw();
  const stop = listen(model, ["profile", "zoom", "phase", "sort_by", "descending", "overhead", "notice", "empty", "error"], draw);
  return () => {
    stop();
    menu.dispose();
  };
}

export default { render };
