// EmbeddingProjector: a WebGL scatter (regl-scatterplot) of a 2-d layout of the
// recorded embeddings. Positions arrive as float32, colours as one byte per point
// per attribute. Pan/zoom with the mouse; "box" drags a rectangle, "lasso" draws a
// free shape; either selection goes to Python as point indices (`picked`) and
// comes back as `selected_ids` + the SampleGallery below. `highlight` (a confusion
// cell in the Dashboard) fades every other point. Class names are data: textContent only.
import createScatterplot from "regl-scatterplot";
import { childView } from "./lib/child.js";
import { el, message, throttle } from "./lib/dom.js";
import { formatNumber } from "./lib/linechart.js";
import { listen, save } from "./lib/model.js";
import { boxToData, colourCodes, linearScale, pointSize, pointsInBox } from "./lib/points.js";
import { decodeArray, encodeArray } from "./lib/wire.js";

const METHODS = /** @type {const} */ ([
  ["pca", "PCA"],
  ["tsne", "t-SNE"],
  ["umap", "UMAP"],
]);
const COLOR_BY = /** @type {const} */ ([
  ["label", "true class"],
  ["prediction", "predicted class"],
  ["correct", "correct / wrong"],
  ["confidence", "confidence"],
  ["loss", "loss"],
  ["none", "one colour"],
]);
const LABEL = { pca: "PCA", tsne: "t-SNE", umap: "UMAP" };

/**
 * @param {HTMLSelectElement} select
 * @param {ReadonlyArray<readonly [string, string]>} options
 */
function fill(select, options) {
  select.replaceChildren(
    ...options.map(([value, text]) => el("option", { text, attrs: { value } })),
  );
}

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-projector");
  const methodSelect = /** @type {HTMLSelectElement} */ (
    el("select", { class: "nbviz-pj-method", attrs: { "aria-label": "method" } })
  );
  fill(methodSelect, METHODS);
  const colourSelect = /** @type {HTMLSelectElement} */ (
    el("select", { class: "nbviz-pj-color", attrs: { "aria-label": "colour by" } })
  );
  fill(colourSelect, COLOR_BY);
  const classSelect = /** @type {HTMLSelectElement} */ (
    el("select", { class: "nbviz-pj-class", attrs: { "aria-label": "class" } })
  );
  const modeButtons = /** @type {Record<string, HTMLButtonElement>} */ ({});
  for (const [mode, text] of [
    ["pan", "pan / zoom"],
    ["box", "box select"],
    ["lasso", "lasso"],
  ]) {
    modeButtons[mode] = /** @type {HTMLButtonElement} */ (
      el("button", { class: `nbviz-pj-mode-${mode}`, text, attrs: { type: "button" } })
    );
  }
  const clearButton = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-pj-clear", text: "clear selection", attrs: { type: "button" } })
  );
  const resetButton = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-pj-reset", text: "reset view", attrs: { type: "button" } })
  );
  const stepText = el("span", { class: "nbviz-pj-step" });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    el("label", {}, ["layout", methodSelect]),
    el("label", {}, ["colour", colourSelect]),
    el("label", {}, ["show", classSelect]),
    modeButtons.pan,
    modeButtons.box,
    modeButtons.lasso,
    clearButton,
    resetButton,
    stepText,
  ]);
  const barFill = el("div", { style: { width: "0%" } });
  const bar = el("div", { class: "nbviz-projector-bar" }, [barFill]);
  const statusText = el("span", { class: "nbviz-pj-status" });
  const stopButton = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-pj-stop", text: "stop", attrs: { type: "button" } })
  );
  const statusLine = el("div", { class: "nbviz-projector-status" }, [bar, statusText, stopButton]);
  const noteText = el("div", { class: "nbviz-pj-note nbviz-num" });
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas"));
  const rect = el("div", { class: "nbviz-projector-rect", style: { display: "none" } });
  const boxLayer = el("div", { class: "nbviz-projector-box" }, [rect]);
  const tip = el("div", { class: "nbviz-projector-tip", style: { display: "none" } });
  const stage = el("div", { class: "nbviz-projector-stage" }, [canvas, boxLayer, tip]);
  const legend = el("div", { class: "nbviz-projector-legend" });
  const selectedText = el("div", { class: "nbviz-pj-selected" });
  const galleryHost = el("div", { class: "nbviz-pj-gallery" });
  const body = el("div", { class: "nbviz-pj-body" }, [
    toolbar,
    statusLine,
    noteText,
    stage,
    legend,
    selectedText,
    galleryHost,
  ]);
  const messageHost = el("div");
  root.replaceChildren(messageHost, body);

  /** @type {any} */
  let plot = null;
  /** @type {any} */
  let points = null; // decoded arrays of the layout on screen
  let mode = "pan";
  let drawn = false;
  let stale = true; // `points` changed since it was decoded
  const xScale = linearScale([-1, 1], [0, 1]);
  const yScale = linearScale([-1, 1], [1, 0]);

  const decodePoints = () => {
    const raw = model.get("points");
    if (!raw || !raw.n) return null;
    const xy = /** @type {Float32Array} */ (decodeArray(raw.xy).data);
    const n = raw.n;
    const x = new Float32Array(n);
    const y = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      x[i] = xy[2 * i];
      y[i] = xy[2 * i + 1];
    }
    return {
      ...raw,
      xy,
      x,
      y,
      label: decodeArray(raw.label).data,
      pred: decodeArray(raw.pred).data,
      confidence: decodeArray(raw.confidence).data,
      loss: decodeArray(raw.loss).data,
    };
  };

  const indicesOf = (/** @type {string} */ trait) => {
    const payload = model.get(trait);
    if (!payload || !payload.indices) return [];
    return Array.from(decodeArray(payload.indices).data);
  };

  const ensurePlot = () => {
    if (plot) return plot;
    const { width, height } = stage.getBoundingClientRect();
    if (width < 10 || height < 10) return null;
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    plot = createScatterplot({
      canvas,
      width,
      height,
      xScale,
      yScale,
      pointSize: 3,
      pointSizeSelected: 2,
      pointOutlineWidth: 1,
      lassoOnLongPress: false,
      deselectOnDblClick: true,
      deselectOnEscape: true,
      opacity: 0.85,
      backgroundColor: [1, 1, 1, 0],
      keyMap: { shift: "lasso", alt: "rotate", ctrl: "merge", cmd: "merge", meta: "merge" },
    });
    plot.subscribe("select", (/** @type {{points: number[]}} */ { points: picked }) => {
      sendPicked(picked);
    });
    plot.subscribe("deselect", () => sendPicked([]));
    plot.subscribe("pointOver", (/** @type {number} */ i) => showTip(i));
    plot.subscribe("pointOut", () => {
      tip.style.display = "none";
    });
    setMode(mode);
    return plot;
  };

  const sendPicked = (/** @type {number[]} */ picked) => {
    selectedText.textContent = picked.length ? `${picked.length.toLocaleString()} selected` : "";
    save(model, { picked: { indices: encodeArray(Uint32Array.from(picked)) } });
  };

  const setMode = (/** @type {string} */ next) => {
    mode = next;
    for (const [name, button] of Object.entries(modeButtons)) {
      button.classList.toggle("nbviz-on", name === mode);
    }
    boxLayer.classList.toggle("nbviz-on", mode === "box");
    if (plot) plot.set({ mouseMode: mode === "lasso" ? "lasso" : "panZoom" });
  };

  const classFilter = () => {
    const c = model.get("filter_class");
    if (!points || c < 0) return null;
    const keep = [];
    for (let i = 0; i < points.n; i++) if (points.label[i] === c) keep.push(i);
    return keep;
  };

  const draw = () => {
    const raw = model.get("points");
    if (model.get("error")) {
      message(messageHost, model.get("error"), { kind: "error" });
      body.style.display = "none";
      return;
    }
    if (model.get("empty")) {
      message(messageHost, model.get("empty"), { kind: "empty" });
      body.style.display = "none";
      return;
    }
    messageHost.replaceChildren();
    body.style.display = "";
    if (!raw || !raw.n) {
      message(messageHost, "No points to show at this step.", { kind: "empty" });
      return;
    }
    const scatter = ensurePlot();
    if (!scatter) return;
    const started = performance.now();
    const fresh = stale || !points;
    if (fresh) points = decodePoints();
    stale = false;
    const { codes, colors } = colourCodes(model.get("color_by"), points);
    const highlight = indicesOf("highlight");
    const w = new Float32Array(points.n);
    if (highlight.length) for (const i of highlight) w[i] = 1;
    else w.fill(1);
    scatter.set({
      colorBy: "valueA",
      pointColor: colors,
      opacityBy: "valueB",
      opacity: highlight.length ? [0.06, 1] : [0.85, 0.85],
      pointSize: pointSize(points.n),
    });
    const transition = Boolean(raw.transition) && fresh && drawn;
    const filter = classFilter();
    scatter
      .draw(
        { x: points.x, y: points.y, z: codes, w },
        {
          zDataType: "categorical",
          wDataType: "continuous",
          transition,
          transitionDuration: 700,
          select: indicesOf("selection"),
          preventFilterReset: false,
          ...(filter ? { filter } : {}),
        },
      )
      .then(() => {
        root.dataset.drawMs = String(Math.round(performance.now() - started));
        root.dataset.drawn = String(points.n);
        root.dataset.method = String(raw.method);
      });
    drawn = true;
    drawLegend(colors, codes.includes(colors.length - 1));
    updateText();
  };

  const drawLegend = (/** @type {string[]} */ colors, /** @type {boolean} */ unknown) => {
    const by = model.get("color_by");
    const names = model.get("class_names") || [];
    const items = [];
    const swatch = (/** @type {string} */ c) =>
      el("span", { class: "nbviz-projector-swatch", style: { background: c } });
    if (by === "label" || by === "prediction") {
      for (let i = 0; i < colors.length - 1; i++) {
        items.push(el("span", {}, [swatch(colors[i]), names[i] ?? `class ${i}`]));
      }
    } else if (by === "correct") {
      items.push(el("span", {}, [swatch(colors[0]), "correct"]));
      items.push(el("span", {}, [swatch(colors[1]), "wrong"]));
    } else if (by === "confidence" || by === "loss") {
      const hi = by === "loss" ? `loss ${formatNumber(points.loss_max)}+` : "confidence 1";
      items.push(el("span", {}, [swatch(colors[0]), by === "loss" ? "loss 0" : "confidence 0"]));
      items.push(el("span", {}, [swatch(colors[colors.length - 2]), hi]));
    }
    if (by !== "none" && unknown) items.push(el("span", {}, [swatch(colors[colors.length - 1]), "unknown"]));
    legend.replaceChildren(...items);
  };

  const updateText = () => {
    const shown = model.get("shown_method");
    const wanted = model.get("method");
    const step = model.get("shown_step");
    stepText.textContent = step >= 0 ? `step ${step}` : "";
    const progress = model.get("progress");
    const status = model.get("status");
    bar.style.display = progress < 1 ? "" : "none";
    stopButton.style.display = progress < 1 && shown && shown !== wanted ? "" : "none";
    barFill.style.width = `${Math.round(100 * progress)}%`;
    const waiting =
      shown && shown !== wanted && progress < 1
        ? `showing ${LABEL[shown] ?? shown} until ${LABEL[wanted] ?? wanted} is ready: `
        : "";
    statusText.textContent = status ? waiting + status : "";
    noteText.textContent = model.get("note") || "";
    methodSelect.value = wanted;
    colourSelect.value = model.get("color_by");
    const names = model.get("class_names") || [];
    const k = points ? points.n_classes : names.length;
    const current = String(model.get("filter_class"));
    const options = [["-1", "all classes"]];
    for (let i = 0; i < k; i++) options.push([String(i), names[i] ?? `class ${i}`]);
    if (classSelect.options.length !== options.length) fill(classSelect, options);
    classSelect.value = current;
  };

  const showTip = (/** @type {number} */ i) => {
    if (!points || !plot) return;
    const [sx, sy] = plot.getScreenPosition(i) ?? [0, 0];
    const names = model.get("class_names") || [];
    const name = (/** @type {number} */ c) => (c === points.missing ? "?" : (names[c] ?? String(c)));
    const lines = [`label ${name(points.label[i])}`];
    if (points.has_predictions) {
      lines.push(`predicted ${name(points.pred[i])}`);
      if (points.confidence[i] !== 255) {
        lines.push(`confidence ${(points.confidence[i] / 254).toFixed(2)}`);
      }
    }
    tip.replaceChildren(
      el("div", { class: "nbviz-pj-tip-sample" }),
      ...lines.map((t) => el("div", { text: t })),
    );
    tip.style.left = `${Math.min(sx + 12, stage.clientWidth - 230)}px`;
    tip.style.top = `${Math.max(0, sy - 10)}px`;
    tip.style.display = "";
    tip.dataset.index = String(i);
    requestSample(i);
  };
  const requestSample = throttle((/** @type {number} */ i) => save(model, { hover_index: i }), 80);

  const showSample = () => {
    const s = model.get("hover_sample");
    if (!s || String(s.index) !== tip.dataset.index) return;
    const host = tip.querySelector(".nbviz-pj-tip-sample");
    if (!host) return;
    const parts = [el("div", { text: `id ${s.id}` })];
    if (s.kind === "image" && s.png) {
      const url = URL.createObjectURL(new Blob([s.png], { type: "image/png" }));
      const img = /** @type {HTMLImageElement} */ (el("img", { attrs: { alt: `sample ${s.id}` } }));
      img.onload = () => URL.revokeObjectURL(url);
      img.src = url;
      parts.unshift(img);
    } else if (s.kind === "text") {
      parts.push(el("div", { text: String(s.text).slice(0, 200) }));
    }
    host.replaceChildren(...parts);
  };

  // box selection: drag on the overlay, select the points inside
  /** @type {{x0: number, y0: number, x1: number, y1: number} | null} */
  let box = null;
  const local = (/** @type {MouseEvent} */ e) => {
    const r = stage.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  const onDown = (/** @type {MouseEvent} */ e) => {
    const [x, y] = local(e);
    box = { x0: x, y0: y, x1: x, y1: y };
    e.preventDefault();
  };
  const onMove = (/** @type {MouseEvent} */ e) => {
    if (!box) return;
    [box.x1, box.y1] = local(e);
    Object.assign(rect.style, {
      display: "",
      left: `${Math.min(box.x0, box.x1)}px`,
      top: `${Math.min(box.y0, box.y1)}px`,
      width: `${Math.abs(box.x1 - box.x0)}px`,
      height: `${Math.abs(box.y1 - box.y0)}px`,
    });
  };
  const onUp = (/** @type {MouseEvent} */ e) => {
    if (!box) return;
    [box.x1, box.y1] = local(e);
    rect.style.display = "none";
    const done = box;
    box = null;
    if (!points || !plot || Math.abs(done.x1 - done.x0) < 3 || Math.abs(done.y1 - done.y0) < 3) {
      return;
    }
    const polygon = boxToData(done, xScale, yScale);
    root.dataset.lastBox = JSON.stringify(polygon);
    let inside = pointsInBox(points.xy, polygon);
    const filter = classFilter();
    if (filter) {
      const keep = new Set(filter);
      inside = inside.filter((i) => keep.has(i));
    }
    plot.select(inside); // publishes "select", which sends the indices to Python
    if (!inside.length) sendPicked([]);
  };
  boxLayer.addEventListener("mousedown", onDown);
  window.addEventListener("mousemove", onMove);
  window.addEventListener("mouseup", onUp);

  for (const [name, button] of Object.entries(modeButtons)) {
    button.addEventListener("click", () => setMode(name));
  }
  clearButton.addEventListener("click", () => {
    if (plot) plot.deselect();
    sendPicked([]);
  });
  resetButton.addEventListener("click", () => plot && plot.reset());
  // stopping keeps the layout on screen: choosing its method cancels the background job
  stopButton.addEventListener("click", () => save(model, { method: model.get("shown_method") }));
  methodSelect.addEventListener("change", () => save(model, { method: methodSelect.value }));
  colourSelect.addEventListener("change", () => save(model, { color_by: colourSelect.value }));
  classSelect.addEventListener("change", () =>
    save(model, { filter_class: Number(classSelect.value) }),
  );

  const resize = new ResizeObserver(() => {
    const { width, height } = stage.getBoundingClientRect();
    if (width < 10 || height < 10) return;
    if (!plot) {
      draw();
      return;
    }
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    plot.set({ width, height });
  });
  resize.observe(stage);

  const applySelection = () => {
    if (!plot || !points) return;
    plot.select(indicesOf("selection"), { preventEvent: true });
    const n = (model.get("selected_ids") || []).length;
    selectedText.textContent = n ? `${n.toLocaleString()} selected` : "";
  };

  const gallery = childView(model, "gallery", galleryHost, () =>
    message(galleryHost, "Select points (box or lasso) to see their samples here.", {
      kind: "empty",
    }),
  );
  void gallery.refresh();
  draw();
  const schedule = throttle(draw, 50);
  const stops = [
    listen(model, ["points"], () => {
      stale = true;
      schedule();
    }),
    listen(model, ["color_by", "highlight", "filter_class", "empty", "error"], schedule),
    listen(model, ["progress", "status", "note", "method", "shown_method", "class_names"], updateText),
    listen(model, ["selection"], applySelection),
    listen(model, ["hover_sample"], showSample),
  ];
  return () => {
    for (const stop of stops) stop();
    schedule.cancel();
    requestSample.cancel();
    resize.disconnect();
    window.removeEventListener("mousemove", onMove);
    window.removeEventListener("mouseup", onUp);
    gallery.remove();
    if (plot) plot.destroy();
  };
}

export default { render };
