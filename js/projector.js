// EmbeddingProjector: a WebGL scatter (regl-scatterplot) of a 2-d layout of the
// recorded embeddings. Positions arrive as float32, colours as one byte per point
// per attribute. Pan/zoom with the mouse; "box" drags a rectangle, "lasso" draws a
// free shape; either selection goes to Python as point indices (`picked`) and
// comes back as `selected_ids` + the SampleGallery below. `highlight` (a confusion
// cell in the Dashboard) fades every other point. Class names are data: textContent only.
import { childView } from "./lib/child.js";
import { el, fillSelect, on, select } from "./lib/dom.js";
import { exportMenu } from "./lib/export.js";
import { formatNumber } from "./lib/format.js";
import { ObjectUrls } from "./lib/images.js";
import { listen, save } from "./lib/model.js";
import { UNANSWERED } from "./lib/offline.js";
import {
  boxToData,
  classOptions,
  colourAvailable,
  colourCodes,
  decodePoints,
  linearScale,
  pointSize,
  pointsInBox,
} from "./lib/points.js";
import { boxSelect } from "./lib/projector/box_select.js";
import { serialDraws } from "./lib/projector/draws.js";
import { followStage, plotOnStage } from "./lib/projector/stage.js";
import { legendItems } from "./lib/projector/legend.js";
import { throttle } from "./lib/schedule.js";
import { splitMenu } from "./lib/splits.js";
import { guard, message, presentBeside, showFailure, viewState } from "./lib/state.js";
import { fetchTable } from "./lib/view_csv.js";
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
  ["target", "target value"],
  ["none", "one colour"],
]);
const LABEL = { pca: "PCA", tsne: "t-SNE", umap: "UMAP" };

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-projector");
  const methodSelect = select("nbviz-pj-method", "method", METHODS);
  const colourSelect = select("nbviz-pj-color", "colour by", COLOR_BY);
  const classSelect = select("nbviz-pj-class", "class");
  const classLabel = el("label", {}, ["show", classSelect]);
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
  const splits = splitMenu(model);
  // the points travel without ids and with one byte per value: the table comes from the kernel
  const menu = exportMenu({ name: "embedding_projector", csv: () => fetchTable(model), png: () => [canvas] });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    splits.el,
    el("label", {}, ["layout", methodSelect]),
    el("label", {}, ["colour", colourSelect]),
    classLabel,
    modeButtons.pan,
    modeButtons.box,
    modeButtons.lasso,
    clearButton,
    resetButton,
    menu.node,
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
  const messageHost = el("div", { class: "nbviz-pj-message" });
  root.replaceChildren(messageHost, body);

  /** @type {any} */
  let plot = null;
  // one draw at a time: the scatterplot rejects a draw made while one runs
  const draws = serialDraws((err) => showFailure(messageHost, "Drawing the projection", err));
  /** @type {any} */
  let points = null; // decoded arrays of the layout on screen
  let mode = "pan";
  let drawn = false;
  let stale = true; // `points` changed since it was decoded
  const xScale = linearScale([-1, 1], [0, 1]);
  const yScale = linearScale([-1, 1], [1, 0]);

  const indicesOf = (/** @type {string} */ trait) => {
    const payload = model.get(trait);
    if (!payload || !payload.indices) return [];
    return Array.from(decodeArray(payload.indices).data);
  };

  const ensurePlot = () => {
    if (plot) return plot;
    plot = plotOnStage(stage, canvas, {
      xScale,
      yScale,
      pointSize: 3,
      pointSizeSelected: 2,
      pointOutlineWidth: 1,
      opacity: 0.85,
      actionKeyMap: { lasso: "shift", rotate: "alt", merge: "meta" },
    });
    if (!plot) return null;
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

  // the message goes above the body, which stays in the page: the plot keeps its WebGL canvas
  const draw = guard(messageHost, "Drawing the projection", () => {
    const raw = model.get("points");
    if (!presentBeside(messageHost, body, viewState(model))) return;
    if (!raw || !raw.n) {
      const bad = Number(raw?.nonfinite || 0);
      const text = bad
        ? `All ${bad.toLocaleString("en-US")} embeddings at step ${raw.step} are non-finite (NaN or inf): nothing to project. ` +
          "Move to an earlier step to see the last finite ones."
        : "No points to show at this step.";
      message(messageHost, text, { kind: "empty" });
      messageHost.classList.toggle("nbviz-nonfinite", bad > 0);
      // nothing to colour, select or stop: only the words
      if (bad) body.style.display = "none";
      root.dataset.drawn = "0";
      return;
    }
    messageHost.classList.remove("nbviz-nonfinite");
    const scatter = ensurePlot();
    if (!scatter) return;
    const started = performance.now();
    const fresh = stale || !points;
    if (fresh) points = decodePoints(model.get("points"));
    stale = false;
    const { codes, colors, repeating } = colourCodes(model.get("color_by"), points);
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
    const shown = points;
    const select = indicesOf("selection");
    draws.request(() =>
      scatter
        .draw(
          { x: shown.x, y: shown.y, z: codes, w },
          {
            zDataType: "categorical",
            wDataType: "continuous",
            transition,
            transitionDuration: 700,
            select,
            preventFilterReset: false,
            ...(filter ? { filter } : {}),
          },
        )
        .then(() => {
          root.dataset.drawMs = String(Math.round(performance.now() - started));
          root.dataset.drawn = String(shown.n);
          root.dataset.method = String(raw.method);
        }),
    );
    drawn = true;
    const unknown = codes.includes(colors.length - 1);
    const names = model.get("class_names") || [];
    legend.replaceChildren(...legendItems(model.get("color_by"), colors, names, points.loss_max, unknown, points.target_range, repeating));
    updateText();
  });

  const updateText = () => {
    const shown = model.get("shown_method");
    const wanted = model.get("method");
    const step = model.get("shown_step");
    const at = Number(model.get("step"));
    // before the first embedding the first one is shown: say so, as the other views do
    stepText.textContent =
      step < 0 ? "" : step > at ? `step ${step}: the first embedding (none at or before step ${at})` : `step ${step}`;
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
    // colourings that mean nothing for these points (classes of a regression) are not offered
    for (const option of Array.from(colourSelect.children)) option.hidden = !colourAvailable(option.value, points);
    const names = model.get("class_names") || [];
    const k = points ? points.n_classes : names.length;
    classLabel.style.display = k > 0 ? "" : "none";
    const current = model.get("filter_class");
    /** @type {Array<[string, string]>} */
    const options = [["-1", "all classes"], ...classOptions(points, names, current)];
    const listed = Array.from(classSelect.options, (o) => o.value).join(",");
    if (listed !== options.map(([v]) => v).join(",")) fillSelect(classSelect, options);
    classSelect.value = String(current);
  };

  const showTip = (/** @type {number} */ i) => {
    if (!points || !plot) return;
    const [sx, sy] = plot.getScreenPosition(i) ?? [0, 0];
    const names = model.get("class_names") || [];
    const name = (/** @type {number} */ c) => (c === points.missing ? "?" : (names[c] ?? String(c)));
    const lines = points.n_classes > 0 ? [`label ${name(points.label[i])}`] : [];
    if (!points.has_predictions && points.loss[i] !== 255) {
      // a model that is not a classifier: its loss (and target) say how it did
      lines.push(`loss \u2248 ${formatNumber(Math.expm1((points.loss[i] / 254) * Math.log1p(points.loss_max)))}`);
    }
    if (points.has_target && points.target[i] !== 255) {
      const [lo, hi] = points.target_range;
      lines.push(`target \u2248 ${formatNumber(lo + (points.target[i] / 254) * (hi - lo))}`);
    }
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

  const tipUrls = new ObjectUrls();
  const showSample = () => {
    const s = model.get("hover_sample");
    if (!s || String(s.index) !== tip.dataset.index) return;
    const host = tip.querySelector(".nbviz-pj-tip-sample");
    if (!host) return;
    const parts = [el("div", { text: `id ${s.id}` })];
    tipUrls.revoke();
    const img = s.kind === "image" ? tipUrls.png(s.png, { alt: `sample ${s.id}` }) : null;
    if (img) {
      parts.unshift(img);
    } else if (s.kind === "text" || s.kind === "damaged") {
      parts.push(el("div", { text: String(s.text).slice(0, 200) }));
    }
    host.replaceChildren(...parts);
  };

  // box selection: drag on the overlay, select the points inside
  const onBox = (/** @type {import("./lib/projector/box_select.js").Box} */ done) => {
    if (!points || !plot) return;
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

  const unbind = [
    boxSelect(boxLayer, stage, rect, onBox),
    ...Object.entries(modeButtons).map(([name, button]) => on(button, "click", () => setMode(name))),
    on(clearButton, "click", () => {
      if (plot) plot.deselect();
      sendPicked([]);
    }),
    on(resetButton, "click", () => plot && plot.reset()),
    // stopping keeps the layout on screen: choosing its method cancels the background job
    on(stopButton, "click", () => save(model, { method: model.get("shown_method") })),
    on(methodSelect, "change", () => save(model, { method: methodSelect.value })),
    on(colourSelect, "change", () => save(model, { color_by: colourSelect.value })),
    on(classSelect, "change", () => save(model, { filter_class: Number(classSelect.value) })),
  ];

  const stopFollowing = followStage(stage, canvas, () => plot, draw);

  const applySelection = () => {
    if (!plot || !points) return;
    plot.select(indicesOf("selection"), { preventEvent: true });
    const n = (model.get("selected_ids") || []).length;
    selectedText.textContent = n ? `${n.toLocaleString()} selected` : "";
  };

  const gallery = childView(model, "gallery", galleryHost, {
    what: "Showing the samples",
    placeholder: () =>
      message(galleryHost, "Select points (box or lasso) to see their samples here.", { kind: "empty" }),
  });
  void gallery.refresh();
  draw();
  const schedule = throttle(draw, 50);
  const stops = [
    listen(model, ["points"], () => {
      stale = true;
      schedule();
    }),
    listen(model, ["color_by", "highlight", "filter_class", "empty", "error"], schedule),
    listen(model, ["progress", "status", "note", "method", "shown_method", "shown_step", "step", "class_names"], updateText),
    listen(model, ["selection"], applySelection),
    listen(model, ["hover_sample"], showSample),
    listen(model, ["split", "splits"], splits.draw),
    splits.stop,
  ];
  // a saved page has no kernel to list the samples of a box or lasso selection: say so
  // where they would appear
  const unanswered = (/** @type {string[]} */ names) => {
    if (!names.includes("picked")) return;
    const n = indicesOf("picked").length;
    if (!n) {
      void gallery.refresh();
      return;
    }
    message(
      galleryHost,
      `The samples of the ${n.toLocaleString()} selected points need a live kernel: this saved page ` +
        "holds the samples of each confusion-matrix cell (click one), not those of a box or lasso selection.",
      { kind: "warning" },
    );
  };
  model.on(UNANSWERED, unanswered);
  return () => {
    model.off(UNANSWERED, unanswered);
    menu.dispose();
    for (const stop of stops) stop();
    schedule.cancel();
    requestSample.cancel();
    stopFollowing();
    for (const off of unbind) off();
    gallery.remove();
    tipUrls.revoke();
    draws.close();
    if (plot) plot.destroy();
  };
}

export default { render };
