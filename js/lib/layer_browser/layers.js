// The table of a LayerBrowser: one row per layer (indented by depth) with its
// type, output shape, parameter count and finding badges, and a sparkline
// with the value at the linked step for each health metric.
import { el } from "../dom.js";
import { formatNumber, formatStep } from "../format.js";
import { nonfiniteText } from "../nonfinite.js";
import { drawSparkline } from "../sparkline.js";
import { sortableTable } from "../table.js";
import { arr, BLUE, GREEN, PINK } from "./charts.js";

/** @type {Array<[string, string, boolean, string]>} metric, column title, log-scale sparkline, colour */
const METRICS = [
  ["zero_frac", "zero fraction", false, BLUE],
  ["grad_norm", "gradient norm", true, PINK],
  ["update_ratio", "update / weight", true, GREEN],
];

/** CSS pixels of a row's sparkline: three metrics beside the layer fit an 848 px output area. */
const SPARK_WIDTH = 64;

/**
 * Row i of a row-major [rows, cols] matrix.
 * @param {ArrayLike<number>} m
 * @param {number} i
 * @param {number} cols
 * @returns {ArrayLike<number>}
 */
const row = (m, i, cols) =>
  /** @type {any} */ (m).subarray ? /** @type {any} */ (m).subarray(i * cols, (i + 1) * cols) : Array.from(m).slice(i * cols, (i + 1) * cols);

/**
 * A metric's value at the step as text ("non-finite" when every value behind it was).
 * @param {string} metric
 * @param {number | undefined} v
 * @param {number} bad  non-finite values behind it
 */
const metricText = (metric, v, bad) =>
  v === undefined || !Number.isFinite(v)
    ? bad > 0
      ? `non-finite (${Math.round(bad).toLocaleString("en-US")})`
      : "\u2014"
    : metric === "zero_frac"
      ? `${(v * 100).toFixed(1)}%`
      : formatNumber(v);

/**
 * @typedef {Array<{canvas: HTMLCanvasElement, value: HTMLElement, bad: HTMLElement}>} Sparks  one per metric
 */

/**
 * The layers' table.
 * @param {any[]} layers  the `layers` trait
 * @param {Record<string, Array<[string, string]>>} badges  layer -> [severity, text]
 * @returns {{table: HTMLTableElement, sparks: Map<string, Sparks>}}
 */
export function layerTable(layers, badges) {
  /** @type {Map<string, Sparks>} */
  const sparks = new Map();
  for (const layer of layers) {
    sparks.set(
      layer.name,
      METRICS.map(() => ({
        canvas: /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-spark" })),
        value: el("span", { class: "nbviz-lb-value" }),
        bad: el("span", { class: "nbviz-lb-nonfinite nbviz-nonfinite" }),
      })),
    );
  }
  const sparkOf = (/** @type {any} */ layer, /** @type {number} */ k) => sparks.get(layer.name)?.[k];
  const table = sortableTable({
    class: "nbviz-lb-table",
    columns: [
      {
        key: "name",
        label: "layer",
        class: "nbviz-lb-name",
        // a long name shrinks to an ellipsis (the whole of it in the title); badges stay whole
        cell: (layer) => ({
          style: { paddingLeft: `${8 + 14 * Math.max(0, layer.depth - 1)}px` },
          title: layer.note ? `${layer.name}: ${layer.note}` : layer.name,
          nodes: [
            el("div", { class: "nbviz-lb-name-box" }, [
              // cut at its start: the end of a nested name ("blocks.0.fc2") tells rows apart
              el("span", { class: "nbviz-lb-layer-name" }, [el("bdi", { text: layer.name })]),
              ...(badges[layer.name] ?? []).map(([severity, text]) =>
                el("span", { class: ["nbviz-badge", `nbviz-badge-${severity}`], text, attrs: { title: `${severity}: ${text}` } }),
              ),
            ]),
          ],
        }),
      },
      { key: "type", label: "type", class: "nbviz-lb-type", cell: (layer) => ({ text: layer.type ?? "", title: layer.type || null }) },
      { key: "shape", label: "output", class: "nbviz-lb-shape", cell: (layer) => ({ text: layer.shape ?? "", title: layer.shape || null }) },
      { key: "params", label: "params", class: "nbviz-lb-num", cell: (layer) => (layer.params ? layer.params.toLocaleString("en-US") : "") },
      ...METRICS.map(([metric, title], k) => ({
        key: metric,
        label: title,
        class: "nbviz-lb-m",
        cell: (/** @type {any} */ layer) => {
          const s = sparkOf(layer, k);
          return el("span", { class: "nbviz-lb-metric" }, s ? [s.canvas, s.value, s.bad] : []);
        },
      })),
    ],
    rows: layers,
    rowClass: (layer) => ["nbviz-lb-row", layer.watched ? "" : "nbviz-unwatched"],
    rowAttrs: (layer) => ({ "data-layer": layer.name, title: layer.note || null, tabindex: 0 }),
  });
  return { table, sparks };
}

/**
 * Mark the selected layer's row.
 * @param {HTMLElement} table
 * @param {string} selected
 */
export function markSelected(table, selected) {
  for (const tr of table.querySelectorAll(".nbviz-lb-row")) {
    const on = tr.getAttribute("data-layer") === selected;
    tr.classList.toggle("nbviz-selected", on);
    tr.setAttribute("aria-selected", String(on));
  }
}

/**
 * Draw every row's sparklines and values at the linked step; returns what the
 * step line says about the captures shown ("zero fraction at 60, ...").
 * @param {Map<string, Sparks>} sparks
 * @param {any} spark  the `spark` trait
 * @param {any} current  the `current` trait
 * @param {number} step
 * @returns {{shown: string[], nonfinite: {layers: Set<string>, metrics: string[]}}}
 */
export function drawSparks(sparks, spark, current, step) {
  const names = [...sparks.keys()];
  const shownSteps = [];
  /** @type {Set<string>} */
  const badLayers = new Set();
  const badMetrics = [];
  for (const [k, [metric, title, log, color]] of METRICS.entries()) {
    const entry = spark[metric];
    const steps = entry ? arr(entry.steps) : new Float64Array(0);
    const values = entry ? arr(entry.values) : new Float64Array(0);
    const bad = entry ? arr(entry.nonfinite) : new Float64Array(0);
    const now = current[metric] ? arr(current[metric].values) : new Float64Array(0);
    const badNow = current[metric] ? arr(current[metric].nonfinite) : new Float64Array(0);
    const at = current[metric]?.step ?? -1;
    if (at >= 0) shownSteps.push(`${title} at ${formatStep(at)}`);
    let any = false;
    names.forEach((name, i) => {
      const s = sparks.get(name)?.[k];
      if (!s) return;
      const b = Number(badNow[i] ?? 0);
      drawSparkline(s.canvas, steps, row(values, i, steps.length), {
        width: SPARK_WIDTH,
        marker: step,
        log,
        color,
        bad: bad.length ? row(bad, i, steps.length) : undefined,
      });
      s.value.textContent = metricText(metric, now[i], b);
      s.value.classList.toggle("nbviz-nonfinite", b > 0 && !Number.isFinite(now[i]));
      // partly non-finite: the value is over the finite ones, the count beside it
      s.bad.textContent = b > 0 && Number.isFinite(now[i]) ? `\u26a0 ${nonfiniteText(b)}` : "";
      s.bad.title = b > 0 ? `${nonfiniteText(b)} values (NaN/inf) at step ${formatStep(at)}, left out of this value` : "";
      if (b > 0) {
        badLayers.add(name);
        any = true;
      }
    });
    if (any) badMetrics.push(title);
  }
  return { shown: shownSteps, nonfinite: { layers: badLayers, metrics: badMetrics } };
}
