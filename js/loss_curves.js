// LossCurves: scalar series on canvas panels (one per name stem), with EMA
// smoothing over the faint raw line (dense series only: step-shaped and sparse
// ones are drawn as recorded), a log axis, drag zoom / wheel zoom / shift-drag
// pan shared by all panels, a read-out under the pointer, the linked step as a marker, and
// NaN/Inf stretches drawn as marks. Zooming into a summarised series asks
// Python for that window at full resolution (a custom message).
// The x axis is the step, the wall clock or the time since each run started (a
// menu); runs grouped by a config key are drawn as a mean line over a min/max
// band; `selected_runs` (set by a RunsTable, or anyone) picks the runs drawn.
// The download menu gives the drawn data as CSV, the panels as PNG or SVG.
// The series are in lib/loss_curves/series.js, a panel's drawing in panel.js,
// zoom and pan in zoom.js, the legend in legend.js, downloads in lib/export.js.
import { el, on, select } from "./lib/dom.js";
import { exportMenu, svgCanvas, svgDocument, toCsv } from "./lib/export.js";
import { themeColors } from "./lib/linechart.js";
import { legendItems, markHighlight } from "./lib/loss_curves/legend.js";
import { drawPanel, PANEL_HEIGHT } from "./lib/loss_curves/panel.js";
import {
  breakText,
  decodeSeries,
  formatX,
  readoutText,
  seriesColor,
  smoothedIds,
  stepAt,
  stepRange,
  stepX,
  timeTicks,
} from "./lib/loss_curves/series.js";
import { HINT, panZoom } from "./lib/loss_curves/zoom.js";
import { listen, save } from "./lib/model.js";
import { floorIndex, lowerBound } from "./lib/steps.js";
import { perFrame, throttle } from "./lib/schedule.js";
import { guard, present, viewState } from "./lib/state.js";
import { decodeArray } from "./lib/wire.js";

/**
 * @typedef {import("./lib/loss_curves/series.js").Series} Series
 * @typedef {{box: HTMLElement, canvas: HTMLCanvasElement, readout: HTMLElement, breaks: HTMLElement,
 *   sx: import("./lib/linechart.js").Scale | null}} Panel
 */

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-loss-curves");
  const logBox = /** @type {HTMLInputElement} */ (el("input", { attrs: { type: "checkbox", class: "nbviz-lc-log" } }));
  const slider = /** @type {HTMLInputElement} */ (
    el("input", {
      class: "nbviz-lc-smoothing",
      attrs: { type: "range", min: 0, max: 0.99, step: 0.01, "aria-label": "smoothing" },
    })
  );
  const smoothText = el("span", { class: "nbviz-lc-smoothing-value" });
  const reset = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-lc-reset", text: "reset zoom", attrs: { type: "button" } })
  );
  const notice = el("span", { class: "nbviz-lc-notice" });
  const hint = el("div", { class: "nbviz-lc-hint", text: HINT });
  const axisSelect = select("nbviz-lc-axis", "x axis", [
    ["step", "by step"],
    ["wall", "by wall-clock time"],
    ["relative", "by time since start"],
  ]);
  const groupSelect = select("nbviz-lc-group", "group runs by");
  const groupLabel = el("label", {}, ["group ", groupSelect]);
  const menu = exportMenu({
    name: "loss_curves",
    csv: () => csvText(),
    png: () => [...panels.values()].map((p) => p.canvas),
    svg: () => svgText(),
  });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, [logBox, " log scale"]),
    el("label", {}, ["smoothing ", slider]),
    smoothText,
    axisSelect,
    groupLabel,
    reset,
    menu.node,
    notice,
  ]);
  const legend = el("div", { class: "nbviz-lc-legend" });
  const grid = el("div", { class: "nbviz-lc-grid" });
  const body = el("div", { class: "nbviz-lc-body" }, [toolbar, legend, hint, grid]);

  /** @type {Series[]} */
  let series = [];
  /** @type {Map<string, Series[]>} */
  let byPanel = new Map();
  /** @type {Map<string, Panel>} */
  let panels = new Map();
  /** @type {Set<string>} ids of the series smoothing applies to */
  let smoothed = new Set();
  /** @type {{stem: string, range: [number, number]} | null} the window a drag is selecting */
  let brush = null;
  /** @type {[number, number]} */
  let full = [0, 1];
  /** @type {[number, number] | null} the steps in view; null: all of them */
  let domain = null;
  /** @type {Map<string, {lo: number, hi: number, steps: ArrayLike<number>, at: ArrayLike<number>, values: ArrayLike<number>, stride: number}>} */
  const windows = new Map();
  /** @type {{stem: string, px: number} | null} */
  let hover = null;
  let request = 0;
  let draws = 0;
  /** @type {Array<() => void>} */
  let detach = [];

  const runs = () => /** @type {string[]} */ (model.get("runs") ?? []);
  const grouped = () => !!model.get("group_by");
  const axis = () => /** @type {"step" | "wall" | "relative"} */ (model.get("x_axis") || "step");
  /** The legend's names: the groups, or the runs drawn. */
  const shownNames = () => {
    if (grouped()) return /** @type {string[]} */ (model.get("groups") ?? []);
    const chosen = new Set(model.get("selected_runs") ?? []);
    return runs().filter((r) => !chosen.size || chosen.has(r));
  };

  /** The data to draw for a series: its full-resolution window when that covers the view. */
  const dataOf = (/** @type {Series} */ s) => {
    const w = windows.get(s.id);
    if (w && domain && w.lo <= domain[0] && w.hi >= domain[1]) return w;
    return s;
  };

  /** The steps a span of the x axis covers (on a time axis, over every series drawn). */
  const stepsIn = (/** @type {[number, number]} */ [x0, x1]) => {
    if (axis() === "step") return [x0, x1];
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (const s of series) {
      const n = s.steps.length;
      if (!n) continue;
      lo = Math.min(lo, s.at[Math.max(0, floorIndex(s.steps, x0))]);
      hi = Math.max(hi, s.at[Math.min(n - 1, lowerBound(s.steps, x1))]);
    }
    return lo <= hi ? [lo, hi] : [x0, x1];
  };
  /** @type {[number, number] | null} the x span the last window request covers */
  let asked = null;

  const requestWindow = throttle(() => {
    if (!domain || !series.some((s) => s.stride > 1)) return;
    request += 1;
    asked = [domain[0], domain[1]];
    const [lo, hi] = stepsIn(domain);
    model.send({ type: "window", lo: Math.floor(lo), hi: Math.ceil(hi), request });
  }, 250);

  const setDomain = (/** @type {[number, number] | null} */ next) => {
    domain = next;
    requestWindow();
    schedule();
  };

  /** A panel per stem, each listening for zoom, pan, hover and clicks. */
  const rebuild = () => {
    for (const off of detach.splice(0)) off();
    const chosen = new Set(grouped() ? [] : model.get("selected_runs") ?? []);
    series = (model.get("series") ?? []).map(decodeSeries).filter((s) => !chosen.size || chosen.has(s.run));
    smoothed = smoothedIds(series);
    windows.clear();
    byPanel = new Map();
    for (const stem of model.get("panels") ?? []) byPanel.set(stem, []);
    for (const s of series) {
      if (!byPanel.has(s.stem)) byPanel.set(s.stem, []);
      byPanel.get(s.stem)?.push(s);
    }
    full = stepRange(series);
    if (domain && (domain[0] < full[0] || domain[1] > full[1])) domain = null;
    panels = new Map();
    const boxes = [];
    for (const [stem, list] of byPanel) {
      const names = list.map((s) => s.name).filter((n, i, a) => a.indexOf(n) === i);
      const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lc-canvas" }));
      const readout = el("div", { class: "nbviz-lc-readout" });
      const breaks = el("div", { class: "nbviz-lc-breaks" });
      const title = names.length > 1 ? `${stem} (${names.join(", ")})` : names[0] ?? stem;
      const box = el("div", { class: "nbviz-lc-panel", attrs: { "data-stem": stem } }, [
        el("div", { class: "nbviz-lc-title", text: title }),
        canvas,
        readout,
        breaks,
      ]);
      const panel = { box, canvas, readout, breaks, sx: null };
      panels.set(stem, panel);
      detach.push(
        panZoom(canvas, () => full, {
          scale: () => panel.sx,
          current: () => domain ?? full,
          zoomed: () => domain !== null,
          setDomain,
          hover: (px) => {
            hover = { stem, px };
            schedule();
          },
          leave: () => {
            hover = null;
            schedule();
          },
          brush: (range) => {
            brush = range ? { stem, range } : null;
            schedule();
          },
          pick: (at) => {
            const best = stepAt(byPanel.get(stem) ?? [], at, dataOf);
            if (Number.isFinite(best)) save(model, { step: Math.round(best) });
            else if (axis() === "step") save(model, { step: Math.round(at) });
          },
        }),
      );
      boxes.push(box);
    }
    grid.replaceChildren(...boxes);
    legend.replaceChildren(
      ...legendItems(shownNames(), series, (run) => save(model, { highlight: model.get("highlight") === run ? "" : run })),
    );
    axisSelect.value = axis();
    const keys = /** @type {string[]} */ (model.get("group_keys") ?? []);
    groupSelect.replaceChildren(
      el("option", { text: "no grouping", attrs: { value: "" } }),
      ...keys.map((k) => el("option", { text: k, attrs: { value: k } })),
    );
    groupSelect.value = model.get("group_by") || "";
    groupLabel.hidden = keys.length === 0 || runs().length < 2;
    markHighlight(legend, model.get("highlight"));
    if (domain) requestWindow();
  };

  /**
   * What a panel draws with.
   * @param {Series[]} list
   * @param {number} clientWidth
   * @param {number | null} px
   * @param {ReturnType<typeof themeColors>} theme
   */
  const panelOptions = (list, clientWidth, px, theme) => {
    const n = grouped() ? (model.get("groups") ?? []).length : runs().length;
    const ax = axis();
    return {
      list,
      dataOf,
      width: Math.max(240, clientWidth || 480),
      domain: domain ?? full,
      log: !!model.get("log_y"),
      smoothing: Number(model.get("smoothing")) || 0,
      step: stepX(list, Number(model.get("step"))),
      hover: px,
      highlight: model.get("highlight") || "",
      colorOf: (/** @type {Series} */ s) => seriesColor(s, n),
      theme,
      xText: ax === "step" ? undefined : (/** @type {number} */ x) => formatX(x, ax),
      xTicks: ax === "step" ? undefined : timeTicks,
    };
  };

  /** The data drawn, as CSV: every point of the series shown, in the steps in view. */
  const csvText = () => {
    const ax = axis();
    const time = ax === "step" ? [] : [ax === "wall" ? "wall_time" : "relative_time"];
    const rows = [];
    const [x0, x1] = domain ?? [Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY];
    for (const s of series) {
      const d = dataOf(s);
      const at = d.at ?? s.at;
      for (let i = 0; i < d.steps.length; i++) {
        if (d.steps[i] < x0 || d.steps[i] > x1) continue;
        const t = ax === "step" ? [] : [d.steps[i]];
        const band = s.lo && s.hi ? [s.lo[i], s.hi[i], s.members] : [];
        rows.push([s.run, s.name, at[i], ...t, d.values[i], ...band]);
      }
    }
    const head = grouped() ? ["group", "name", "step", ...time, "mean", "min", "max", "runs"] : ["run", "name", "step", ...time, "value"];
    return toCsv(head, rows);
  };

  /** The panels as one SVG, drawn by the same code as the canvases. */
  const svgText = () => {
    const theme = themeColors(root);
    const groups = [];
    for (const [stem, panel] of panels) {
      const list = byPanel.get(stem) ?? [];
      const o = { ...panelOptions(list, panel.box.clientWidth, null, theme), smoothed, brush: null };
      const fake = svgCanvas(o.width, PANEL_HEIGHT);
      drawPanel(/** @type {any} */ (fake), o);
      const title = panel.box.querySelector(".nbviz-lc-title")?.textContent ?? stem;
      groups.push({ title, width: o.width, height: PANEL_HEIGHT, body: fake.body() });
    }
    return svgDocument(groups);
  };

  const draw = guard(root, "Drawing the loss curves", () => {
    if (!present(root, body, viewState(model))) return;
    const smoothing = Number(model.get("smoothing")) || 0;
    const log = !!model.get("log_y");
    slider.value = String(smoothing);
    smoothText.textContent = smoothing.toFixed(2);
    logBox.checked = log;
    reset.disabled = domain === null;
    notice.textContent = model.get("notice") || "";
    const step = Number(model.get("step"));
    const theme = themeColors(root);
    const n = grouped() ? (model.get("groups") ?? []).length : runs().length;
    for (const [stem, panel] of panels) {
      const list = byPanel.get(stem) ?? [];
      const px = hover && hover.stem === stem ? hover.px : null;
      const o = {
        ...panelOptions(list, panel.box.clientWidth, px, theme),
        smoothed,
        brush: brush && brush.stem === stem ? brush.range : null,
      };
      const sx = drawPanel(panel.canvas, o);
      panel.sx = sx;
      panel.breaks.textContent = list.map((s) => breakText(s, n > 1)).filter(Boolean).join("; ");
      panel.box.setAttribute("data-breaks", String(list.reduce((k, s) => k + s.nBreaks, 0)));
      panel.box.setAttribute("data-break-labels", sx.labels.map((l) => l.text).join(" | "));
      // on a time axis the linked step may have no time in this panel: read out its end
      const at = px !== null ? sx.invert(px) : Number.isFinite(o.step) ? o.step : (domain ?? full)[1];
      panel.readout.textContent = readoutText(list, at, { nearest: px !== null, runs: n, dataOf, axis: axis() });
    }
    root.setAttribute("data-series", String(series.length));
    root.setAttribute("data-x-axis", axis());
    draws += 1;
    root.setAttribute("data-draws", String(draws));
    root.setAttribute("data-domain", domain ? domain.map((v) => v.toFixed(1)).join(",") : "");
  });
  const schedule = perFrame(draw);

  /** @type {(msg: any, buffers: any[]) => void} */
  const onMessage = (msg, buffers) => {
    if (!msg || msg.type !== "window" || msg.request !== request || !asked) return;
    const [lo, hi] = asked;
    for (const item of msg.series ?? []) {
      const part = (/** @type {any} */ p) => decodeArray({ data: buffers[p.buffer], dtype: p.dtype, shape: p.shape }).data;
      const at = part(item.steps);
      const steps = item.x ? part(item.x) : at;
      windows.set(item.id, { lo, hi, steps, at, values: part(item.values), stride: item.stride });
    }
    schedule();
  };
  model.on("msg:custom", onMessage);

  const saveSmoothing = throttle(() => model.save_changes(), 120);
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => schedule()) : null;
  resize?.observe(root);

  rebuild();
  draw();
  const stops = [
    on(slider, "input", () => {
      model.set("smoothing", Number(slider.value));
      saveSmoothing();
    }),
    on(logBox, "change", () => save(model, { log_y: logBox.checked })),
    on(axisSelect, "change", () => {
      domain = null;
      save(model, { x_axis: axisSelect.value });
    }),
    on(groupSelect, "change", () => save(model, { group_by: groupSelect.value, highlight: "" })),
    on(reset, "click", () => setDomain(null)),
    listen(model, ["series", "panels", "runs", "selected_runs", "groups", "group_keys", "group_by", "x_axis"], () => {
      rebuild();
      schedule();
    }),
    listen(model, ["step", "highlight", "log_y", "smoothing", "notice", "empty", "error"], () => {
      markHighlight(legend, model.get("highlight"));
      schedule();
    }),
  ];
  return () => {
    for (const stop of stops) stop();
    for (const off of detach.splice(0)) off();
    model.off("msg:custom", onMessage);
    menu.dispose();
    resize?.disconnect();
    requestWindow.cancel();
    saveSmoothing.flush();
    schedule.cancel();
  };
}

export default { render };
