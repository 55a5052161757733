// LossCurves: scalar series on canvas panels (one per name stem), with EMA
// smoothing over the faint raw line (dense series only: step-shaped and sparse
// ones are drawn as recorded), a log axis, drag zoom / wheel zoom / shift-drag
// pan shared by all panels, a read-out under the pointer, the linked step as a marker, and
// NaN/Inf stretches drawn as marks. Zooming into a summarised series asks
// Python for that window at full resolution (a custom message).
// The series are in lib/loss_curves/series.js, a panel's drawing in panel.js,
// zoom and pan in zoom.js, the legend in legend.js.
import { el, on } from "./lib/dom.js";
import { themeColors } from "./lib/linechart.js";
import { legendItems, markHighlight } from "./lib/loss_curves/legend.js";
import { drawPanel } from "./lib/loss_curves/panel.js";
import { breakText, decodeSeries, nearestStep, readoutText, seriesColor, smoothedIds, stepRange } from "./lib/loss_curves/series.js";
import { HINT, panZoom } from "./lib/loss_curves/zoom.js";
import { listen, save } from "./lib/model.js";
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
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, [logBox, " log scale"]),
    el("label", {}, ["smoothing ", slider]),
    smoothText,
    reset,
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
  /** @type {Map<string, {lo: number, hi: number, steps: ArrayLike<number>, values: ArrayLike<number>, stride: number}>} */
  const windows = new Map();
  /** @type {{stem: string, px: number} | null} */
  let hover = null;
  let request = 0;
  let draws = 0;
  /** @type {Array<() => void>} */
  let detach = [];

  const runs = () => /** @type {string[]} */ (model.get("runs") ?? []);

  /** The data to draw for a series: its full-resolution window when that covers the view. */
  const dataOf = (/** @type {Series} */ s) => {
    const w = windows.get(s.id);
    if (w && domain && w.lo <= domain[0] && w.hi >= domain[1]) return w;
    return s;
  };

  const requestWindow = throttle(() => {
    if (!domain || !series.some((s) => s.stride > 1)) return;
    request += 1;
    model.send({ type: "window", lo: Math.floor(domain[0]), hi: Math.ceil(domain[1]), request });
  }, 250);

  const setDomain = (/** @type {[number, number] | null} */ next) => {
    domain = next;
    requestWindow();
    schedule();
  };

  /** A panel per stem, each listening for zoom, pan, hover and clicks. */
  const rebuild = () => {
    for (const off of detach.splice(0)) off();
    series = (model.get("series") ?? []).map(decodeSeries);
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
            const best = nearestStep(byPanel.get(stem) ?? [], at, dataOf);
            save(model, { step: Math.round(Number.isFinite(best) ? best : at) });
          },
        }),
      );
      boxes.push(box);
    }
    grid.replaceChildren(...boxes);
    legend.replaceChildren(
      ...legendItems(runs(), series, (run) => save(model, { highlight: model.get("highlight") === run ? "" : run })),
    );
    markHighlight(legend, model.get("highlight"));
    if (domain) requestWindow();
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
    const highlight = model.get("highlight") || "";
    const n = runs().length;
    const theme = themeColors(root);
    for (const [stem, panel] of panels) {
      const list = byPanel.get(stem) ?? [];
      const px = hover && hover.stem === stem ? hover.px : null;
      const sx = drawPanel(panel.canvas, {
        list,
        dataOf,
        width: Math.max(240, panel.box.clientWidth || 480),
        domain: domain ?? full,
        log,
        smoothing,
        smoothed,
        brush: brush && brush.stem === stem ? brush.range : null,
        step,
        hover: px,
        highlight,
        colorOf: (s) => seriesColor(s, n),
        theme,
      });
      panel.sx = sx;
      panel.breaks.textContent = list.map((s) => breakText(s, n > 1)).filter(Boolean).join("; ");
      panel.box.setAttribute("data-breaks", String(list.reduce((k, s) => k + s.nBreaks, 0)));
      const at = px === null ? step : sx.invert(px);
      panel.readout.textContent = readoutText(list, at, { nearest: px !== null, runs: n, dataOf });
    }
    draws += 1;
    root.setAttribute("data-draws", String(draws));
    root.setAttribute("data-domain", domain ? domain.map((v) => v.toFixed(1)).join(",") : "");
  });
  const schedule = perFrame(draw);

  /** @type {(msg: any, buffers: any[]) => void} */
  const onMessage = (msg, buffers) => {
    if (!msg || msg.type !== "window" || msg.request !== request) return;
    for (const item of msg.series ?? []) {
      const part = (/** @type {any} */ p) => decodeArray({ data: buffers[p.buffer], dtype: p.dtype, shape: p.shape }).data;
      windows.set(item.id, { lo: msg.lo, hi: msg.hi, steps: part(item.steps), values: part(item.values), stride: item.stride });
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
    on(reset, "click", () => setDomain(null)),
    listen(model, ["series", "panels", "runs"], () => {
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
    resize?.disconnect();
    requestWindow.cancel();
    saveSmoothing.flush();
    schedule.cancel();
  };
}

export default { render };
