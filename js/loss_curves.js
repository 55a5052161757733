// LossCurves: scalar series on canvas panels (one per name stem), with EMA
// smoothing over the faint raw line, a log axis, wheel zoom / drag pan shared
// by all panels, a read-out under the pointer, the linked step as a marker, and
// NaN/Inf stretches drawn as marks. Zooming into a summarised series asks
// Python for that window at full resolution (a custom message).
import { categorical } from "./lib/color.js";
import { el, message, throttle } from "./lib/dom.js";
import {
  ema,
  extentIn,
  floorIndex,
  formatNumber,
  formatStep,
  logTicks,
  makeScale,
  nearestIndex,
  niceTicks,
  tickLabels,
  sizeCanvas,
  themeColors,
  tracePath,
} from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { decodeArray } from "./lib/wire.js";

const HEIGHT = 210;
const M = { left: 58, right: 14, top: 12, bottom: 24 };
/** @type {Record<string, number[]>} */
const DASH = { val: [6, 3], valid: [6, 3], validation: [6, 3], test: [2, 3], eval: [2, 3] };
/** @type {Record<string, number>} */
const SPLIT_COLOR = { train: 0, training: 0, "": 0, val: 1, valid: 1, validation: 1, test: 2, eval: 3 };
const BREAK_NAMES = new Map([
  [0, "NaN"],
  [1, "+Inf"],
  [-1, "-Inf"],
]);
const BREAK_COLOR = "#c62828";
/** Series shorter than this are drawn raw: smoothing a handful of evaluations hides them. */
const MIN_SMOOTHED = 10;

/**
 * @typedef {object} Series
 * @property {string} id
 * @property {string} run
 * @property {number} runIndex
 * @property {string} name
 * @property {string} stem
 * @property {string} split
 * @property {ArrayLike<number>} steps
 * @property {ArrayLike<number>} values
 * @property {number} stride
 * @property {number} total
 * @property {ArrayLike<number>} breaks  rows of [first_step, last_step, kind]
 * @property {number} nBreaks
 */

/**
 * @param {any} e
 * @returns {Series}
 */
function decodeSeries(e) {
  return {
    id: e.id,
    run: e.run,
    runIndex: e.run_index,
    name: e.name,
    stem: e.stem,
    split: e.split,
    steps: decodeArray(e.steps).data,
    values: decodeArray(e.values).data,
    stride: e.stride,
    total: e.total,
    breaks: decodeArray(e.breaks).data,
    nBreaks: e.n_breaks,
  };
}

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-loss-curves");
  const body = el("div", { class: "nbviz-lc-body" });
  const logBox = el("input", { attrs: { type: "checkbox", class: "nbviz-lc-log" } });
  const slider = el("input", {
    class: "nbviz-lc-smoothing",
    attrs: { type: "range", min: 0, max: 0.99, step: 0.01, "aria-label": "smoothing" },
  });
  const smoothText = el("span", { class: "nbviz-lc-smoothing-value" });
  const reset = el("button", { class: "nbviz-lc-reset", text: "reset zoom", attrs: { type: "button" } });
  const notice = el("span", { class: "nbviz-lc-notice" });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, [logBox, " log scale"]),
    el("label", {}, ["smoothing ", slider]),
    smoothText,
    reset,
    notice,
  ]);
  const legend = el("div", { class: "nbviz-lc-legend" });
  const grid = el("div", { class: "nbviz-lc-grid" });
  body.append(toolbar, legend, grid);

  /** @type {Series[]} */
  let series = [];
  /** @type {Map<string, Series[]>} */
  let byPanel = new Map();
  /** @type {Map<string, {box: HTMLElement, canvas: HTMLCanvasElement, readout: HTMLElement, breaks: HTMLElement, sx: any}>} */
  let panels = new Map();
  /** @type {[number, number]} */
  let full = [0, 1];
  /** @type {[number, number] | null} */
  let domain = null;
  /** @type {Map<string, {lo: number, hi: number, steps: ArrayLike<number>, values: ArrayLike<number>, stride: number}>} */
  const windows = new Map();
  /** @type {{stem: string, px: number} | null} */
  let hover = null;
  let request = 0;
  let frame = 0;
  let draws = 0;

  const show = () => {
    const error = model.get("error");
    const empty = model.get("empty");
    if (error || empty) {
      message(root, error || empty, { kind: error ? "error" : "empty" });
      return false;
    }
    if (body.parentNode !== root) root.replaceChildren(body);
    return true;
  };

  const colorOf = (/** @type {Series} */ s) => {
    const runs = model.get("runs") ?? [];
    if (runs.length > 1) return categorical(s.runIndex, runs.length);
    return categorical(SPLIT_COLOR[s.split] ?? 4);
  };

  /** The data to draw for a series: its full-resolution window when that covers the view. */
  const dataOf = (/** @type {Series} */ s) => {
    const w = windows.get(s.id);
    if (w && domain && w.lo <= domain[0] && w.hi >= domain[1]) return w;
    return s;
  };

  const rebuild = () => {
    series = (model.get("series") ?? []).map(decodeSeries);
    windows.clear();
    byPanel = new Map();
    for (const stem of model.get("panels") ?? []) byPanel.set(stem, []);
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (const s of series) {
      if (!byPanel.has(s.stem)) byPanel.set(s.stem, []);
      byPanel.get(s.stem)?.push(s);
      if (s.steps.length) {
        lo = Math.min(lo, s.steps[0]);
        hi = Math.max(hi, s.steps[s.steps.length - 1]);
      }
    }
    full = lo <= hi ? [lo, hi === lo ? lo + 1 : hi] : [0, 1];
    if (domain && (domain[0] < full[0] || domain[1] > full[1])) domain = null;
    panels = new Map();
    const boxes = [];
    for (const [stem, list] of byPanel) {
      const names = list.map((s) => s.name).filter((n, i, a) => a.indexOf(n) === i);
      const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lc-canvas" }));
      const readout = el("div", { class: "nbviz-lc-readout" });
      const breaks = el("div", { class: "nbviz-lc-breaks" });
      const box = el("div", { class: "nbviz-lc-panel", attrs: { "data-stem": stem } }, [
        el("div", { class: "nbviz-lc-title", text: names.length > 1 ? `${stem} (${names.join(", ")})` : names[0] ?? stem }),
        canvas,
        readout,
        breaks,
      ]);
      panels.set(stem, { box, canvas, readout, breaks, sx: null });
      attach(stem, canvas);
      boxes.push(box);
    }
    grid.replaceChildren(...boxes);
    buildLegend();
    if (domain) requestWindow();
  };

  const buildLegend = () => {
    const runs = model.get("runs") ?? [];
    const items = [];
    if (runs.length > 1) {
      runs.forEach((/** @type {string} */ run, /** @type {number} */ i) => {
        const chip = el("button", {
          class: "nbviz-lc-run",
          attrs: { type: "button", "data-run": run, title: "emphasise this run" },
        }, [el("span", { class: "nbviz-swatch", style: { background: categorical(i, runs.length) } }), run]);
        chip.addEventListener("click", () =>
          save(model, { highlight: model.get("highlight") === run ? "" : run }),
        );
        items.push(chip);
      });
      const splits = [...new Set(series.map((s) => s.split).filter(Boolean))];
      if (splits.length > 1) {
        const styles = splits.map((sp) => `${DASH[sp] ? (DASH[sp][0] > 3 ? "dashed" : "dotted") : "solid"}: ${sp}`);
        items.push(el("span", { class: "nbviz-lc-styles", text: styles.join(" \u00b7 ") }));
      }
    } else {
      const splits = [...new Set(series.map((s) => s.split))].filter(Boolean);
      for (const sp of splits) {
        items.push(
          el("span", { class: "nbviz-lc-split" }, [
            el("span", { class: "nbviz-swatch", style: { background: categorical(SPLIT_COLOR[sp] ?? 4) } }),
            sp,
          ]),
        );
      }
    }
    legend.replaceChildren(...items);
    markHighlight();
  };

  const markHighlight = () => {
    const h = model.get("highlight");
    for (const chip of legend.querySelectorAll(".nbviz-lc-run")) {
      chip.classList.toggle("nbviz-active", chip.getAttribute("data-run") === h);
    }
  };

  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(draw);
  };

  const draw = () => {
    frame = 0;
    if (!show()) return;
    const smoothing = Number(model.get("smoothing")) || 0;
    slider.value = String(smoothing);
    smoothText.textContent = smoothing.toFixed(2);
    logBox.checked = !!model.get("log_y");
    reset.disabled = domain === null;
    notice.textContent = model.get("notice") || "";
    for (const [stem, panel] of panels) drawPanel(stem, panel, smoothing);
    draws += 1;
    root.setAttribute("data-draws", String(draws));
  };

  /**
   * @param {string} stem
   * @param {{box: HTMLElement, canvas: HTMLCanvasElement, readout: HTMLElement, breaks: HTMLElement, sx: any}} panel
   * @param {number} smoothing
   */
  const drawPanel = (stem, panel, smoothing) => {
    const list = byPanel.get(stem) ?? [];
    const log = !!model.get("log_y");
    const width = Math.max(240, panel.box.clientWidth || 480);
    const ctx = sizeCanvas(panel.canvas, width, HEIGHT);
    const theme = themeColors(root);
    const [x0, x1] = domain ?? full;
    const sx = makeScale(x0, x1, M.left, width - M.right);
    panel.sx = sx;
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (const s of list) {
      const d = dataOf(s);
      const e = extentIn(d.steps, d.values, x0, x1, log);
      if (e) [lo, hi] = [Math.min(lo, e[0]), Math.max(hi, e[1])];
    }
    ctx.font = "11px sans-serif";
    ctx.fillStyle = theme.muted;
    const plotBottom = HEIGHT - M.bottom;
    if (!(lo <= hi)) {
      ctx.fillText(log ? "no positive values to show on a log axis" : "no finite values in view", M.left + 8, HEIGHT / 2);
      lo = log ? 0.1 : 0;
      hi = log ? 10 : 1;
    }
    if (log) {
      if (hi === lo) [lo, hi] = [lo / 2, hi * 2];
      const pad = (hi / lo) ** 0.05;
      [lo, hi] = [lo / pad, hi * pad];
    } else {
      if (hi === lo) [lo, hi] = [lo - (Math.abs(lo) || 1) * 0.5, hi + (Math.abs(hi) || 1) * 0.5];
      const pad = (hi - lo) * 0.05;
      [lo, hi] = [lo - pad, hi + pad];
    }
    const sy = makeScale(lo, hi, plotBottom, M.top, log);

    // axes and grid
    ctx.strokeStyle = theme.grid;
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const yTicks = log ? logTicks(lo, hi) : niceTicks(lo, hi, 4);
    const yLabels = log ? yTicks.map(formatNumber) : tickLabels(yTicks);
    for (const [k, t] of yTicks.entries()) {
      const y = Math.round(sy.map(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(M.left, y);
      ctx.lineTo(width - M.right, y);
      ctx.stroke();
      ctx.fillText(yLabels[k], M.left - 6, y);
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const t of niceTicks(x0, x1, Math.max(2, Math.floor(width / 110)))) {
      if (!Number.isInteger(t)) continue;
      ctx.fillText(formatStep(t), sx.map(t), plotBottom + 6);
    }
    ctx.strokeStyle = theme.muted;
    ctx.beginPath();
    ctx.moveTo(M.left + 0.5, M.top);
    ctx.lineTo(M.left + 0.5, plotBottom + 0.5);
    ctx.lineTo(width - M.right, plotBottom + 0.5);
    ctx.stroke();

    ctx.save();
    ctx.beginPath();
    ctx.rect(M.left, M.top - 2, width - M.left - M.right, plotBottom - M.top + 4);
    ctx.clip();
    const highlight = model.get("highlight");
    const ordered = [...list].sort((a, b) => Number(a.run === highlight) - Number(b.run === highlight));
    const breakLines = [];
    for (const s of ordered) {
      const d = dataOf(s);
      const color = colorOf(s);
      const dim = highlight && s.run !== highlight ? 0.25 : 1;
      const width1 = highlight && s.run === highlight ? 2.6 : 1.6;
      ctx.setLineDash(DASH[s.split] ?? []);
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      if (d.steps.length === 1) {
        ctx.globalAlpha = dim;
        ctx.beginPath();
        ctx.arc(sx.map(d.steps[0]), sy.map(d.values[0]), 3, 0, 2 * Math.PI);
        ctx.fill();
      } else if (smoothing > 0 && s.total >= MIN_SMOOTHED) {
        ctx.globalAlpha = 0.25 * dim;
        ctx.lineWidth = 1;
        ctx.beginPath();
        tracePath(ctx, d.steps, d.values, sx, sy);
        ctx.stroke();
        ctx.globalAlpha = dim;
        ctx.lineWidth = width1;
        ctx.beginPath();
        tracePath(ctx, d.steps, ema(d.values, smoothing, d.stride), sx, sy);
        ctx.stroke();
      } else {
        ctx.globalAlpha = dim;
        ctx.lineWidth = width1;
        ctx.beginPath();
        tracePath(ctx, d.steps, d.values, sx, sy);
        ctx.stroke();
      }
      ctx.setLineDash([]);
      // where the series broke: a band over each non-finite stretch, a mark at its start
      const b = s.breaks;
      for (let i = 0; i + 2 < b.length; i += 3) {
        const [s0, s1, kind] = [b[i], b[i + 1], b[i + 2]];
        if (s1 < x0 || s0 > x1) continue;
        const xa = sx.map(s0);
        const xb = Math.max(sx.map(s1), xa + 1);
        ctx.globalAlpha = 0.12 * dim;
        ctx.fillStyle = BREAK_COLOR;
        ctx.fillRect(xa, M.top, xb - xa, plotBottom - M.top);
        ctx.globalAlpha = dim;
        ctx.beginPath();
        ctx.moveTo(xa, plotBottom);
        ctx.lineTo(xa - 5, plotBottom - 9);
        ctx.lineTo(xa + 5, plotBottom - 9);
        ctx.closePath();
        ctx.fill();
        ctx.fillStyle = BREAK_COLOR;
        ctx.textAlign = "left";
        ctx.textBaseline = "bottom";
        ctx.fillText(BREAK_NAMES.get(kind) ?? "NaN", xa + 6, plotBottom - 2);
      }
      if (s.nBreaks > 0) {
        const first = BREAK_NAMES.get(b[2]) ?? "NaN";
        const more = s.nBreaks > 1 ? ` (${s.nBreaks} stretches of NaN/Inf)` : "";
        breakLines.push(`${s.run && (model.get("runs") ?? []).length > 1 ? `${s.run}: ` : ""}${s.name} is ${first} from step ${formatStep(b[0])}${more}`);
      }
    }
    ctx.globalAlpha = 1;
    // the linked step, and the pointer
    const step = Number(model.get("step"));
    if (step >= x0 && step <= x1) {
      const x = Math.round(sx.map(step)) + 0.5;
      ctx.strokeStyle = theme.marker;
      ctx.setLineDash([3, 3]);
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, M.top);
      ctx.lineTo(x, plotBottom);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    if (hover && hover.stem === stem) {
      ctx.strokeStyle = theme.muted;
      ctx.globalAlpha = 0.6;
      ctx.beginPath();
      ctx.moveTo(hover.px + 0.5, M.top);
      ctx.lineTo(hover.px + 0.5, plotBottom);
      ctx.stroke();
      ctx.globalAlpha = 1;
    }
    ctx.restore();
    panel.breaks.textContent = breakLines.join("; ");
    panel.box.setAttribute("data-breaks", String(list.reduce((n, s) => n + s.nBreaks, 0)));
    panel.readout.textContent = readout(list, hover && hover.stem === stem ? sx.invert(hover.px) : step, !!(hover && hover.stem === stem));
  };

  /**
   * The read-out line: the values at (or nearest to, under the pointer) a step.
   * @param {Series[]} list
   * @param {number} at
   * @param {boolean} nearest
   */
  const readout = (list, at, nearest) => {
    const runs = model.get("runs") ?? [];
    const parts = [];
    let shownStep = Math.round(at);
    if (nearest) {
      let best = Number.POSITIVE_INFINITY;
      for (const s of list) {
        const d = dataOf(s);
        const i = nearestIndex(d.steps, at);
        if (i >= 0 && Math.abs(d.steps[i] - at) < Math.abs(best - at)) best = d.steps[i];
      }
      if (Number.isFinite(best)) shownStep = best;
    }
    for (const s of list) {
      const d = dataOf(s);
      const i = floorIndex(d.steps, shownStep);
      if (i < 0) {
        if (d.steps.length) parts.push(`${s.name} from step ${formatStep(d.steps[0])}`);
        continue;
      }
      const label = runs.length > 1 ? `${s.run} ${s.name}` : s.name;
      const own = d.steps[i] !== shownStep ? ` (step ${formatStep(d.steps[i])})` : "";
      parts.push(`${label} ${formatNumber(d.values[i])}${own}`);
    }
    return `step ${formatStep(shownStep)}: ${parts.join(" \u00b7 ") || "no values yet"}`;
  };

  // -- interaction -----------------------------------------------------------------

  const current = () => domain ?? full;
  const clampDomain = (/** @type {number} */ a, /** @type {number} */ b) => {
    const span = b - a;
    if (span >= full[1] - full[0]) return null;
    if (a < full[0]) [a, b] = [full[0], full[0] + span];
    if (b > full[1]) [a, b] = [full[1] - span, full[1]];
    return /** @type {[number, number]} */ ([a, b]);
  };

  const requestWindow = throttle(() => {
    if (!domain || !series.some((s) => s.stride > 1)) return;
    request += 1;
    model.send({ type: "window", lo: Math.floor(domain[0]), hi: Math.ceil(domain[1]), request });
  }, 250);

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

  /** @type {Array<() => void>} */
  const detach = [];
  /**
   * @param {string} stem
   * @param {HTMLCanvasElement} canvas
   */
  const attach = (stem, canvas) => {
    /** @type {{x: number, domain: [number, number], moved: boolean} | null} */
    let drag = null;
    const local = (/** @type {MouseEvent} */ e) => e.clientX - canvas.getBoundingClientRect().left;
    const sxOf = () => panels.get(stem)?.sx;
    const onWheel = (/** @type {WheelEvent} */ e) => {
      const sx = sxOf();
      if (!sx) return;
      e.preventDefault();
      const [a, b] = current();
      const c = Math.min(Math.max(sx.invert(local(e)), a), b);
      const f = Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.002)));
      const span = Math.max((b - a) * f, 4);
      const t = (c - a) / (b - a || 1);
      domain = clampDomain(c - t * span, c + (1 - t) * span);
      requestWindow();
      schedule();
    };
    const onDown = (/** @type {PointerEvent} */ e) => {
      drag = { x: e.clientX, domain: current(), moved: false };
      canvas.setPointerCapture?.(e.pointerId);
    };
    const onMove = (/** @type {PointerEvent} */ e) => {
      const sx = sxOf();
      if (drag && sx) {
        const dx = e.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.moved && domain !== null) {
          const [a, b] = drag.domain;
          const per = (b - a) / (sx.map(b) - sx.map(a) || 1);
          domain = clampDomain(a - dx * per, b - dx * per);
          requestWindow();
        }
      }
      hover = { stem, px: local(e) };
      schedule();
    };
    const onUp = (/** @type {PointerEvent} */ e) => {
      const sx = sxOf();
      if (drag && !drag.moved && sx) {
        const list = byPanel.get(stem) ?? [];
        const at = sx.invert(local(e));
        let best = Math.round(at);
        let dist = Number.POSITIVE_INFINITY;
        for (const s of list) {
          const d = dataOf(s);
          const i = nearestIndex(d.steps, at);
          if (i >= 0 && Math.abs(d.steps[i] - at) < dist) [best, dist] = [d.steps[i], Math.abs(d.steps[i] - at)];
        }
        save(model, { step: Math.round(best) });
      }
      drag = null;
    };
    const onLeave = () => {
      hover = null;
      schedule();
    };
    const onDouble = () => {
      domain = null;
      schedule();
    };
    canvas.addEventListener("wheel", onWheel, { passive: false });
    canvas.addEventListener("pointerdown", onDown);
    canvas.addEventListener("pointermove", onMove);
    canvas.addEventListener("pointerup", onUp);
    canvas.addEventListener("pointerleave", onLeave);
    canvas.addEventListener("dblclick", onDouble);
    detach.push(() => {
      canvas.removeEventListener("wheel", onWheel);
      canvas.removeEventListener("pointerdown", onDown);
      canvas.removeEventListener("pointermove", onMove);
      canvas.removeEventListener("pointerup", onUp);
      canvas.removeEventListener("pointerleave", onLeave);
      canvas.removeEventListener("dblclick", onDouble);
    });
  };

  const saveSmoothing = throttle(() => model.save_changes(), 120);
  const onSlide = () => {
    model.set("smoothing", Number(slider.value));
    saveSmoothing();
  };
  const onLog = () => save(model, { log_y: logBox.checked });
  const onReset = () => {
    domain = null;
    schedule();
  };
  slider.addEventListener("input", onSlide);
  logBox.addEventListener("change", onLog);
  reset.addEventListener("click", onReset);

  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => schedule()) : null;
  resize?.observe(root);

  rebuild();
  draw();
  const stopData = listen(model, ["series", "panels", "runs"], () => {
    for (const d of detach.splice(0)) d();
    rebuild();
    schedule();
  });
  const stopView = listen(model, ["step", "highlight", "log_y", "smoothing", "notice", "empty", "error"], () => {
    markHighlight();
    schedule();
  });
  return () => {
    stopData();
    stopView();
    for (const d of detach.splice(0)) d();
    model.off("msg:custom", onMessage);
    slider.removeEventListener("input", onSlide);
    logBox.removeEventListener("change", onLog);
    reset.removeEventListener("click", onReset);
    resize?.disconnect();
    requestWindow.cancel();
    saveSmoothing.flush();
    if (frame) cancelAnimationFrame(frame);
  };
}

export default { render };
