// LayerBrowser: a table of the model's layers with health sparklines and the
// values at the linked step; clicking a row opens the layer's detail (stats over
// steps, histograms at the step, the per-unit dead map, and for a layer with
// recorded per-sample unit values the samples that excite a chosen unit most
// and least: a click on a unit's bar sets `unit`, Python fills `unit_samples`).
import { drawBandChart } from "./lib/bandchart.js";
import { CATEGORICAL_10, sequentialScale } from "./lib/color.js";
import { el, message } from "./lib/dom.js";
import { drawHeatmap } from "./lib/heatmap.js";
import { floorIndex, formatNumber, formatStep } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { drawBars, drawSignedBars, drawSparkline } from "./lib/sparkline.js";
import { decodeArray } from "./lib/wire.js";

/** @type {Array<[string, string, boolean]>} metric, column title, log-scale sparkline */
const METRICS = [
  ["zero_frac", "zero fraction", false],
  ["grad_norm", "gradient norm", true],
  ["update_ratio", "update / weight", true],
];
const [BLUE, ORANGE, GREEN, PINK] = CATEGORICAL_10;

/**
 * @param {any} payload
 * @returns {ArrayLike<number>}
 */
const arr = (payload) => (payload && payload.data ? decodeArray(payload).data : new Float64Array(0));

/**
 * Row i of a row-major [rows, cols] matrix.
 * @param {ArrayLike<number> & {subarray?: (a: number, b: number) => ArrayLike<number>}} m
 * @param {number} i
 * @param {number} cols
 */
const row = (m, i, cols) =>
  /** @type {any} */ (m).subarray ? /** @type {any} */ (m).subarray(i * cols, (i + 1) * cols) : Array.from(m).slice(i * cols, (i + 1) * cols);

/**
 * The charts drawn for one detail series.
 * @param {any} s  a decoded detail series
 * @returns {Array<{title: string, chart: import("./lib/bandchart.js").BandChart}>}
 */
export function chartsFor(s) {
  const steps = s.steps;
  const title = `${s.label} (${s.layer})`;
  if (s.signal === "activation") {
    return [
      {
        title: `${title}: mean, \u00b1std, min..max`,
        chart: {
          steps,
          lines: [{ label: "mean", values: s.mean, color: BLUE }],
          bands: [
            { lo: s.min, hi: s.max, color: BLUE },
            { lo: sub(s.mean, s.std), hi: add(s.mean, s.std), color: BLUE },
          ],
        },
      },
      {
        title: `${title}: zero fraction`,
        chart: { steps, lines: [{ label: "zero fraction", values: s.zero_frac, color: ORANGE }] },
      },
    ];
  }
  if (s.signal === "gradient") {
    return [{ title: `${title}: norm`, chart: { steps, log: true, lines: [{ label: "norm", values: s.norm, color: PINK }] } }];
  }
  if (s.signal === "update") {
    return [{ title: `${title}: update / weight`, chart: { steps, log: true, lines: [{ label: "update/weight", values: s.rel, color: GREEN }] } }];
  }
  return [
    {
      title: `${s.layer}: mean, \u00b1std, min..max`,
      chart: {
        steps,
        lines: [{ label: "mean", values: s.mean, color: GREEN }],
        bands: [
          { lo: s.min, hi: s.max, color: GREEN },
          { lo: sub(s.mean, s.std), hi: add(s.mean, s.std), color: GREEN },
        ],
      },
    },
  ];
}

/**
 * The unit under a click on the per-unit bars: x in CSS px across `width`.
 * @param {number} x
 * @param {number} width
 * @param {number} units
 * @returns {number} the unit, or -1 outside the bars
 */
export function unitAt(x, width, units) {
  if (!(units > 0) || !(width > 0) || x < 0 || x >= width) return -1;
  return Math.min(units - 1, Math.floor((x / width) * units));
}

/**
 * Bytes of a binary trait value (DataView or typed array), or null.
 * @param {any} data
 * @returns {Uint8Array | null}
 */
function bytesOf(data) {
  if (!data) return null;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

/** @param {ArrayLike<number>} a @param {ArrayLike<number>} b */
function add(a, b) {
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] + b[i];
  return out;
}
/** @param {ArrayLike<number>} a @param {ArrayLike<number>} b */
function sub(a, b) {
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] - b[i];
  return out;
}

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-layer-browser");
  const notice = el("span", { class: "nbviz-notice nbviz-lb-notice" });
  const stepText = el("span", { class: "nbviz-lb-step" });
  const table = el("table", { class: "nbviz-lb-table" });
  const detail = el("div", { class: "nbviz-lb-detail" });
  const body = el("div", { class: "nbviz-lb" }, [
    el("div", { class: "nbviz-toolbar" }, [stepText, notice]),
    el("div", { class: "nbviz-lb-scroll" }, [table]),
    detail,
  ]);

  /** @type {Map<string, {tr: HTMLElement, sparks: Array<{canvas: HTMLCanvasElement, value: HTMLElement}>}>} */
  let rows = new Map();
  /** @type {Array<{canvas: HTMLCanvasElement, chart: any, readout: HTMLElement, lookup: (x: number) => string}>} */
  let charts = [];
  /** @type {Array<() => void>} */
  let detailCleanup = [];
  /** @type {{canvas: HTMLCanvasElement, caption: HTMLElement, steps: ArrayLike<number>, values: ArrayLike<number>, units: number} | null} */
  let dead = null;
  const histBox = el("div", { class: "nbviz-lb-hists" });
  const deadBox = el("div", { class: "nbviz-lb-deadbox" });
  const unitBox = el("div", { class: "nbviz-lb-units" });
  /** @type {string[]} */
  let unitUrls = [];
  /** @type {Array<() => void>} */
  const deadCleanup = [];

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

  const buildTable = () => {
    const layers = model.get("layers") ?? [];
    const badges = model.get("badges") ?? {};
    const head = el("tr", {}, [
      el("th", { text: "layer" }),
      el("th", { text: "type" }),
      el("th", { text: "output" }),
      el("th", { text: "params", class: "nbviz-lb-num" }),
      ...METRICS.map(([, title]) => el("th", { text: title })),
    ]);
    rows = new Map();
    const trs = layers.map((/** @type {any} */ layer) => {
      const marks = (badges[layer.name] ?? []).map((/** @type {[string, string]} */ [severity, text]) =>
        el("span", { class: ["nbviz-badge", `nbviz-badge-${severity}`], text, attrs: { title: `${severity}: ${text}` } }),
      );
      const sparks = METRICS.map(() => ({
        canvas: /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-spark" })),
        value: el("span", { class: "nbviz-lb-value" }),
      }));
      const tr = el(
        "tr",
        {
          class: ["nbviz-lb-row", layer.watched ? "" : "nbviz-unwatched"],
          attrs: { "data-layer": layer.name, title: layer.note || null, tabindex: 0 },
        },
        [
          el("td", { class: "nbviz-lb-name", style: { paddingLeft: `${8 + 14 * Math.max(0, layer.depth - 1)}px` } }, [layer.name, ...marks]),
          el("td", { text: layer.type }),
          el("td", { text: layer.shape }),
          el("td", { class: "nbviz-lb-num", text: layer.params ? layer.params.toLocaleString("en-US") : "" }),
          ...sparks.map((s) => el("td", {}, [el("span", { class: "nbviz-lb-metric" }, [s.canvas, s.value])])),
        ],
      );
      rows.set(layer.name, { tr, sparks });
      return tr;
    });
    table.replaceChildren(el("thead", {}, [head]), el("tbody", {}, trs));
    markSelected();
    drawSparks();
  };

  const markSelected = () => {
    const selected = model.get("selected_layer");
    for (const [name, r] of rows) {
      r.tr.classList.toggle("nbviz-selected", name === selected);
      r.tr.setAttribute("aria-selected", String(name === selected));
    }
  };

  const drawSparks = () => {
    const spark = model.get("spark") ?? {};
    const current = model.get("current") ?? {};
    const step = Number(model.get("step"));
    const names = [...rows.keys()];
    const shownSteps = [];
    METRICS.forEach(([metric, , log], k) => {
      const entry = spark[metric];
      const steps = entry ? arr(entry.steps) : new Float64Array(0);
      const values = entry ? arr(entry.values) : new Float64Array(0);
      const now = current[metric] ? arr(current[metric].values) : new Float64Array(0);
      const at = current[metric]?.step ?? -1;
      if (at >= 0) shownSteps.push(`${METRICS[k][1]} at ${formatStep(at)}`);
      names.forEach((name, i) => {
        const r = rows.get(name);
        if (!r) return;
        const s = r.sparks[k];
        drawSparkline(s.canvas, steps, row(values, i, steps.length), { marker: step, log, color: [BLUE, PINK, GREEN][k] });
        const v = now[i];
        s.value.textContent = v === undefined || Number.isNaN(v) ? "\u2014" : metric === "zero_frac" ? `${(v * 100).toFixed(1)}%` : formatNumber(v);
      });
    });
    stepText.textContent = `step ${formatStep(step)}` + (shownSteps.length ? ` (captures: ${shownSteps.join(", ")})` : "");
    notice.textContent = model.get("notice") || "";
  };

  const buildDetail = () => {
    for (const c of detailCleanup.splice(0)) c();
    charts = [];
    const d = model.get("detail") ?? {};
    if (!d.layer) {
      detail.replaceChildren(el("div", { class: "nbviz-muted", text: "Click a layer to see its statistics over steps, its histograms and its dead-unit map." }));
      return;
    }
    const head = el("h4", {
      text: [d.layer, d.type, d.shape, d.params ? `${Number(d.params).toLocaleString("en-US")} params` : ""].filter(Boolean).join(" \u00b7 "),
    });
    const parts = [head];
    if (d.notice) parts.push(el("div", { class: "nbviz-notice", text: `summarised: ${d.notice}` }));
    if (d.empty) parts.push(el("div", { class: "nbviz-muted nbviz-lb-detail-empty", text: d.empty }));
    const grid = el("div", { class: "nbviz-lb-charts" });
    for (const raw of d.series ?? []) {
      const s = { ...raw, steps: arr(raw.steps) };
      for (const f of ["mean", "std", "min", "max", "norm", "zero_frac", "rel", "nonfinite"]) s[f] = arr(raw[f]);
      for (const { title, chart } of chartsFor(s)) {
        const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-chart" }));
        const readout = el("div", { class: "nbviz-lb-caption" });
        const box = el("div", { class: "nbviz-lb-chartbox", attrs: { "data-signal": s.signal, "data-layer": s.layer } }, [
          el("div", { class: "nbviz-lb-chart-title", text: title }),
          canvas,
          readout,
        ]);
        const entry = { canvas, chart, readout, lookup: (/** @type {number} */ _x) => "" };
        const onMove = (/** @type {PointerEvent} */ e) => {
          readout.textContent = entry.lookup(e.clientX - canvas.getBoundingClientRect().left);
        };
        const onLeave = () => {
          readout.textContent = "";
        };
        canvas.addEventListener("pointermove", onMove);
        canvas.addEventListener("pointerleave", onLeave);
        detailCleanup.push(() => {
          canvas.removeEventListener("pointermove", onMove);
          canvas.removeEventListener("pointerleave", onLeave);
        });
        charts.push(entry);
        grid.append(box);
      }
    }
    parts.push(grid);
    parts.push(el("div", { class: "nbviz-lb-chart-title", text: "histograms at this step" }), histBox);
    parts.push(
      el("div", { class: "nbviz-lb-chart-title", text: "dead map: fraction of the batch on which each unit was zero (units \u00d7 steps)" }),
      deadBox,
    );
    parts.push(el("div", { class: "nbviz-lb-chart-title", text: "what each unit responds to: the samples that excite it most and least" }), unitBox);
    detail.replaceChildren(...parts);
    buildUnits();
    buildDead();
    drawDetail();
    drawHists();
  };

  const buildDead = () => {
    for (const c of deadCleanup.splice(0)) c();
    dead = null;
    const dm = model.get("dead_map") ?? {};
    if (!(dm.units > 0)) {
      deadBox.replaceChildren(el("div", { class: "nbviz-muted nbviz-lb-dead-empty", text: dm.notice || "no per-unit statistics for this layer" }));
      return;
    }
    const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-dead" }));
    const caption = el("div", { class: "nbviz-lb-caption nbviz-lb-dead-caption", text: dm.notice ? `showing ${dm.notice}` : "" });
    dead = { canvas, caption, steps: arr(dm.steps), values: arr(dm.values), units: dm.units };
    const onMove = (/** @type {PointerEvent} */ e) => {
      if (!dead || !deadLookup) return;
      const cell = deadLookup(e);
      if (!cell) return;
      const v = dead.values[cell.col * dead.units + cell.row];
      caption.textContent = `unit ${cell.row} at step ${formatStep(dead.steps[cell.col])}: zero on ${(v * 100).toFixed(0)}% of the batch`;
    };
    canvas.addEventListener("pointermove", onMove);
    deadCleanup.push(() => canvas.removeEventListener("pointermove", onMove));
    deadBox.replaceChildren(canvas, caption);
  };

  /** @type {((e: {clientX: number, clientY: number}) => ({row: number, col: number} | null)) | null} */
  let deadLookup = null;

  /** The captured output of the layer for the sample in `map_id`, channel by channel. */
  const sampleMaps = (/** @type {number} */ unit) => {
    const sm = model.get("sample_maps") ?? {};
    const box = el("div", { class: "nbviz-lb-sample-maps" });
    if (sm.id === undefined) return box;
    box.setAttribute("data-id", String(sm.id));
    const title = sm.step >= 0 ? `sample #${sm.id}: output of ${sm.layer} captured at step ${formatStep(sm.step)}` : `sample #${sm.id}`;
    box.append(el("div", { class: "nbviz-lb-chart-title", text: title }));
    if (sm.notice) box.append(el("div", { class: "nbviz-muted nbviz-lb-sample-notice", text: sm.notice }));
    if (sm.maps) {
      const maps = decodeArray(sm.maps);
      const [channels, h, w] = maps.shape;
      let lo = Infinity;
      let hi = -Infinity;
      for (const v of maps.data) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      const scale = sequentialScale(lo <= hi ? lo : 0, lo <= hi ? hi : 1);
      const grid = el("div", { class: "nbviz-lb-maps" });
      const px = Math.max(2, Math.floor(48 / Math.max(h, w)));
      for (let c = 0; c < channels; c++) {
        const canvas = /** @type {HTMLCanvasElement} */ (
          el("canvas", { class: ["nbviz-lb-map", c === unit ? "nbviz-active" : ""], attrs: { title: `channel ${c}`, "data-channel": c } })
        );
        canvas.width = w;
        canvas.height = h;
        canvas.style.width = `${w * px}px`;
        canvas.style.height = `${h * px}px`;
        const ctx = canvas.getContext("2d");
        if (ctx) {
          const image = ctx.createImageData(w, h);
          for (let i = 0; i < h * w; i++) {
            const rgb = scale(maps.data[c * h * w + i]);
            image.data.set([rgb[0], rgb[1], rgb[2], 255], 4 * i);
          }
          ctx.putImageData(image, 0, 0);
        }
        grid.append(canvas);
      }
      box.append(grid);
    } else if (sm.units) {
      const values = arr(sm.units);
      const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-sample-units" }));
      drawSignedBars(canvas, values, { width: Math.max(160, Math.min(720, values.length * 8)), height: 60, color: ORANGE });
      box.append(canvas);
    }
    return box;
  };

  const buildUnits = () => {
    for (const u of unitUrls) URL.revokeObjectURL(u);
    unitUrls = [];
    const us = model.get("unit_samples") ?? {};
    if (!(us.n_units > 0)) {
      unitBox.replaceChildren(el("div", { class: "nbviz-muted nbviz-lb-units-empty", text: us.notice || "no per-sample unit values for this layer" }));
      return;
    }
    const means = arr(us.means);
    const width = Math.max(160, Math.min(720, us.n_units * 8));
    const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-unit-bars", attrs: { title: "click a unit to list its samples" } }));
    drawSignedBars(canvas, means, { width, height: 70, color: BLUE });
    if (us.unit >= 0) {
      const ctx = canvas.getContext("2d");
      if (ctx) {
        const w = (width - 4) / us.n_units;
        ctx.strokeStyle = "#d55e00";
        ctx.lineWidth = 2;
        ctx.strokeRect(2 + us.unit * w, 1, Math.max(w, 2), 56);
      }
    }
    canvas.addEventListener("click", (e) => {
      const u = unitAt(e.clientX - canvas.getBoundingClientRect().left - 2, width - 4, us.n_units);
      if (u >= 0) save(model, { unit: u });
    });
    const input = /** @type {HTMLInputElement} */ (
      el("input", { class: "nbviz-lb-unit-input", attrs: { type: "number", min: 0, max: us.n_units - 1, value: us.unit >= 0 ? us.unit : "", "aria-label": "unit" } })
    );
    const commit = () => {
      const u = Number(input.value);
      if (input.value !== "" && Number.isInteger(u) && u >= 0 && u < us.n_units && u !== model.get("unit")) save(model, { unit: u });
    };
    input.addEventListener("change", commit);
    input.addEventListener("keydown", (e) => {
      e.stopPropagation(); // typing here is not a notebook shortcut
      if (e.key === "Enter") commit();
    });
    const caption = el("div", {
      class: "nbviz-lb-caption",
      text: `${us.what}; evaluation of step ${formatStep(us.step)}, ${us.n_samples} samples; bars: each unit's mean` + (us.notice ? `; ${us.notice}` : ""),
    });
    const cards = (/** @type {any[]} */ list, /** @type {string} */ which) =>
      el(
        "div",
        { class: "nbviz-lb-unit-row", attrs: { "data-which": which } },
        [
          el("span", { class: "nbviz-lb-caption", text: which === "most" ? "most:" : "least:" }),
          ...list.map((c) => {
            const open = (model.get("sample_maps") ?? {}).id === c.id;
            const card = el("div", {
              class: ["nbviz-lb-unit-card", open ? "nbviz-active" : ""],
              attrs: { "data-id": c.id, title: `sample ${c.id}: ${formatNumber(c.value)}; click for its activations of this layer` },
            });
            card.addEventListener("click", () => save(model, { map_id: open ? -1 : c.id }));
            const bytes = c.kind === "image" ? bytesOf(c.png) : null;
            if (bytes) {
              const url = URL.createObjectURL(new Blob([bytes.slice()], { type: "image/png" }));
              unitUrls.push(url);
              card.append(el("img", { attrs: { src: url, alt: `sample ${c.id}` } }));
            } else if (c.kind === "text") {
              card.append(el("span", { text: c.text ?? "" }));
            }
            card.append(el("span", { text: `#${c.id} ${Number(c.value).toPrecision(3)}` }));
            if (c.label !== undefined) {
              card.append(el("span", { text: `${c.label_name ?? c.label}${c.pred !== undefined && c.pred !== c.label ? ` \u2192 ${c.pred_name ?? c.pred}` : ""}` }));
            }
            return card;
          }),
        ],
      );
    const parts = [el("div", {}, [canvas]), el("label", { class: "nbviz-lb-caption" }, ["unit ", input]), caption];
    if (us.unit >= 0) parts.push(cards(us.most ?? [], "most"), cards(us.least ?? [], "least"));
    else parts.push(el("div", { class: "nbviz-muted", text: "choose a unit (click its bar) to list its samples" }));
    parts.push(sampleMaps(us.unit));
    unitBox.replaceChildren(...parts);
  };

  const drawDetail = () => {
    const step = Number(model.get("step"));
    for (const c of charts) {
      const width = Math.max(240, c.canvas.parentElement?.clientWidth || 320);
      c.lookup = drawBandChart(c.canvas, { ...c.chart, marker: step, width, height: 130 });
    }
    if (dead) {
      const cols = dead.steps.length;
      const units = dead.units;
      const t = new Float32Array(units * cols);
      for (let j = 0; j < cols; j++) for (let u = 0; u < units; u++) t[u * cols + j] = dead.values[j * units + u];
      const width = Math.max(240, Math.min(900, (detail.clientWidth || 600) - 10));
      const height = Math.max(60, Math.min(320, units * 4));
      const at = floorIndex(dead.steps, step);
      const drawn = drawHeatmap(dead.canvas, t, { rows: units, cols, width, height, scale: sequentialScale(0, 1) });
      deadLookup = drawn.cellFromEvent;
      if (at >= 0) {
        const ctx = dead.canvas.getContext("2d");
        if (ctx) {
          const x = at * drawn.layout.cellWidth;
          ctx.strokeStyle = "#d55e00";
          ctx.lineWidth = 2;
          ctx.strokeRect(x, 1, Math.max(drawn.layout.cellWidth, 2), height - 2);
        }
      }
      dead.canvas.setAttribute("data-step-column", String(at));
    }
  };

  const drawHists = () => {
    const at = model.get("detail_at") ?? {};
    const hists = at.histograms ?? [];
    if (!hists.length) {
      histBox.replaceChildren(el("div", { class: "nbviz-muted", text: "no histograms recorded at or before this step" }));
      return;
    }
    histBox.replaceChildren(
      ...hists.map((/** @type {any} */ h) => {
        const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "nbviz-lb-hist" }));
        drawBars(canvas, arr(h.counts), h.lo, h.hi, { color: h.signal === "weight" ? GREEN : h.signal === "gradient" ? PINK : BLUE });
        return el("div", { class: "nbviz-lb-histbox", attrs: { "data-signal": h.signal, "data-layer": h.layer } }, [
          el("div", { class: "nbviz-lb-caption", text: `${h.label} (${h.layer}) at step ${formatStep(h.step)}` }),
          canvas,
        ]);
      }),
    );
  };

  const onClick = (/** @type {MouseEvent} */ e) => {
    const tr = /** @type {HTMLElement | null} */ (e.target instanceof Element ? e.target.closest(".nbviz-lb-row") : null);
    if (!tr) return;
    const name = tr.getAttribute("data-layer") ?? "";
    save(model, { selected_layer: name === model.get("selected_layer") ? "" : name });
  };
  const onKey = (/** @type {KeyboardEvent} */ e) => {
    if (e.key !== "Enter" && e.key !== " ") return;
    const tr = e.target instanceof Element ? e.target.closest(".nbviz-lb-row") : null;
    if (!tr) return;
    e.preventDefault();
    save(model, { selected_layer: tr.getAttribute("data-layer") ?? "" });
  };
  table.addEventListener("click", onClick);
  table.addEventListener("keydown", onKey);

  let frame = 0;
  const redraw = () => {
    frame = 0;
    if (!show()) return;
    drawSparks();
    drawDetail();
  };
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(redraw);
  };
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => schedule()) : null;
  resize?.observe(root);

  if (show()) {
    buildTable();
    buildDetail();
  }
  const stops = [
    listen(model, ["layers", "badges", "empty", "error"], () => {
      if (!show()) return;
      buildTable();
      buildDetail();
    }),
    listen(model, ["spark", "current", "step", "notice"], schedule),
    listen(model, ["selected_layer"], markSelected),
    listen(model, ["detail"], () => {
      if (show()) buildDetail();
    }),
    listen(model, ["detail_at"], drawHists),
    listen(model, ["unit_samples", "sample_maps"], buildUnits),
    listen(model, ["dead_map"], () => {
      buildDead();
      schedule();
    }),
  ];
  return () => {
    for (const stop of stops) stop();
    for (const c of detailCleanup.splice(0)) c();
    for (const c of deadCleanup.splice(0)) c();
    for (const u of unitUrls) URL.revokeObjectURL(u);
    table.removeEventListener("click", onClick);
    table.removeEventListener("keydown", onKey);
    resize?.disconnect();
    if (frame) cancelAnimationFrame(frame);
  };
}

export default { render };
