// DataMap: each training sample at (variability, confidence) of the model's
// probability for its label over the evaluations (Dataset Cartography). Easy
// samples sit top-left, ambiguous ones to the right, and samples the model
// confidently learns as another class bottom-left: often mislabelled. Points are
// drawn with WebGL (regl-scatterplot) on a fixed square; a click on a point, or
// on a row of the "most likely mislabelled" list, selects that sample and the
// embedded SampleGallery shows it. Text from data goes in as text.
import { childView } from "./lib/child.js";
import { REGIONS, mapColours, mapTicks, nearestPoint, toFraction } from "./lib/data_map.js";
import { el, on, select } from "./lib/dom.js";
import { exportMenu } from "./lib/export.js";
import { listen, save } from "./lib/model.js";
import { UNANSWERED } from "./lib/offline.js";
import { linearScale, pointSize } from "./lib/points.js";
import { serialDraws } from "./lib/projector/draws.js";
import { followStage, plotOnStage } from "./lib/projector/stage.js";
import { throttle } from "./lib/schedule.js";
import { guard, message, presentBeside, showFailure, viewState } from "./lib/state.js";
import { fetchTable } from "./lib/view_csv.js";
import { decodeArray, encodeArray } from "./lib/wire.js";

/** Pixels from a click within which the nearest point is picked. */
const PICK_RADIUS = 8;
const COLOR_BY = /** @type {const} */ ([
  ["correctness", "correctness"],
  ["suspect", "likely mislabelled"],
]);

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-datamap");
  const colourSelect = select("nbviz-dm-color", "colour by", COLOR_BY);
  const note = el("span", { class: "nbviz-dm-note nbviz-num" });
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas"));
  // the points travel without ids: the table comes from the kernel
  const menu = exportMenu({ name: "data_map", csv: () => fetchTable(model), png: () => [canvas] });
  const toolbar = el("div", { class: "nbviz-toolbar" }, [el("label", {}, ["colour", colourSelect]), menu.node, note]);
  const regions = REGIONS.map((r) =>
    el("span", { class: "nbviz-dm-region", text: r.name, style: { left: `${100 * r.x}%`, top: `${100 * r.y}%` } }),
  );
  const stage = el("div", { class: "nbviz-dm-stage" }, [canvas, ...regions]);
  const ticks = mapTicks();
  const xAxis = el(
    "div",
    { class: "nbviz-dm-xaxis" },
    ticks.x.map((v) => el("span", { text: String(v), style: { left: `${100 * toFraction(v, 0)[0]}%` } })),
  );
  const yAxis = el(
    "div",
    { class: "nbviz-dm-yaxis" },
    ticks.y.map((v) => el("span", { text: String(v), style: { top: `${100 * toFraction(0, v)[1]}%` } })),
  );
  const plotArea = el("div", { class: "nbviz-dm-plot" }, [
    el("div", { class: "nbviz-dm-ylabel", text: "confidence (mean p of the label)" }),
    yAxis,
    stage,
    el("div"),
    el("div"),
    xAxis,
    el("div"),
    el("div"),
    el("div", { class: "nbviz-dm-xlabel", text: "variability (std of p over the evaluations)" }),
  ]);
  const legend = el("div", { class: "nbviz-dm-legend" });
  const suspects = el("ol", { class: "nbviz-dm-suspects", attrs: { "aria-label": "most likely mislabelled" } });
  const side = el("div", { class: "nbviz-dm-side" }, [
    el("div", { class: "nbviz-dm-side-title", text: "most likely mislabelled" }),
    suspects,
  ]);
  const selectedText = el("div", { class: "nbviz-dm-selected" });
  // in a saved page, where a click's sample is not held: why, in place of the gallery
  const unanswered = el("div", { class: "nbviz-dm-unanswered nbviz-message", attrs: { role: "status" } });
  unanswered.style.display = "none";
  const galleryHost = el("div", { class: "nbviz-dm-gallery" });
  const body = el("div", { class: "nbviz-dm-body" }, [
    toolbar,
    el("div", { class: "nbviz-dm-row" }, [plotArea, side]),
    legend,
    selectedText,
    unanswered,
    galleryHost,
  ]);
  const messageHost = el("div");
  root.replaceChildren(messageHost, body);

  /** @type {any} */
  let plot = null;
  /** @type {any} */
  let points = null;
  let stale = true;
  // one draw at a time: the scatterplot rejects a draw made while one runs
  const draws = serialDraws((err) => showFailure(messageHost, "Drawing the data map", err));
  const xScale = linearScale([-1, 1], [0, 1]);
  const yScale = linearScale([-1, 1], [1, 0]);

  const ensurePlot = () => {
    if (plot) return plot;
    plot = plotOnStage(stage, canvas, {
      xScale,
      yScale,
      cameraIsFixed: true,
      pointSize: 4,
      pointSizeSelected: 3,
      pointOutlineWidth: 2,
      opacity: 0.8,
    });
    return plot;
  };

  // a click picks the nearest point within a few pixels (the square maps [-1, 1] onto
  // its sides: the camera is fixed), so what is picked does not hang on the renderer
  const pickAt = (/** @type {MouseEvent} */ event) => {
    if (!points || !plot) return;
    const rect = canvas.getBoundingClientRect();
    const i = nearestPoint(points.x, points.y, event.clientX - rect.left, event.clientY - rect.top, rect.width, rect.height, PICK_RADIUS);
    if (i < 0) return;
    plot.select([i], { preventEvent: true });
    sendPicked([i]);
  };

  const sendPicked = (/** @type {number[]} */ picked) => {
    showAnswered();
    save(model, { picked: { indices: encodeArray(Uint32Array.from(picked)) } });
  };

  const showAnswered = () => {
    unanswered.style.display = "none";
    galleryHost.style.display = "";
  };

  // a saved page has no kernel: a click whose sample it does not hold says so where the
  // sample would be, and which clicks it does answer
  const onUnanswered = (/** @type {string[]} */ names) => {
    if (!names.includes("picked")) return;
    const listed = (model.get("suspects") || []).length;
    unanswered.textContent =
      "This saved page does not hold the sample of this point" +
      (listed ? `: it holds those of the ${listed} most likely mislabelled (the list beside the map)` : "") +
      ". Open the run in a notebook to see any sample.";
    unanswered.style.display = "";
    galleryHost.style.display = "none";
  };
  model.on(UNANSWERED, onUnanswered);

  const decode = () => {
    const raw = model.get("points");
    if (!raw || !raw.n) return null;
    const xy = /** @type {Float32Array} */ (decodeArray(raw.xy).data);
    const x = new Float32Array(raw.n);
    const y = new Float32Array(raw.n);
    for (let i = 0; i < raw.n; i++) {
      x[i] = xy[2 * i];
      y[i] = xy[2 * i + 1];
    }
    return {
      n: raw.n,
      x,
      y,
      correctness: decodeArray(raw.correctness).data,
      suspect: decodeArray(raw.suspect).data,
      first: raw.first ?? -1,
    };
  };

  const draw = guard(messageHost, "Drawing the data map", () => {
    if (!presentBeside(messageHost, body, viewState(model))) return;
    if (stale || !points) points = decode();
    stale = false;
    note.textContent = model.get("note") || "";
    colourSelect.value = model.get("color_by");
    drawSuspects();
    if (!points) {
      message(messageHost, "No samples to map.", { kind: "empty" });
      return;
    }
    const scatter = ensurePlot();
    if (!scatter) return;
    const { codes, colors, labels } = mapColours(model.get("color_by"), points.correctness, points.suspect);
    scatter.set({ colorBy: "valueA", pointColor: colors, pointSize: Math.max(2, pointSize(points.n)) });
    const shown = points;
    draws.request(() =>
      scatter.draw({ x: shown.x, y: shown.y, z: codes }, { zDataType: "categorical" }).then(() => {
        root.dataset.drawn = String(shown.n);
        if (shown.first >= 0) {
          const at = scatter.getScreenPosition(shown.first);
          if (at) root.dataset.firstSuspect = `${Math.round(at[0])},${Math.round(at[1])}`;
        }
        applySelection();
      }),
    );
    legend.replaceChildren(
      ...colors.map((c, k) =>
        el("span", { class: "nbviz-dm-key" }, [el("span", { class: "nbviz-dm-swatch", style: { background: c } }), labels[k]]),
      ),
    );
  });

  const drawSuspects = () => {
    /** @type {{id: number, index: number, label: string, predicted: string, score: number}[]} */
    const rows = model.get("suspects") || [];
    const chosen = new Set(model.get("selected_ids") || []);
    suspects.replaceChildren(
      ...rows.map((r) => {
        const li = el(
          "li",
          { class: ["nbviz-dm-suspect", chosen.has(r.id) ? "nbviz-active" : ""], attrs: { tabindex: 0, "data-id": r.id } },
          [
            el("span", { class: "nbviz-num", text: `#${r.id}` }),
            ` labelled ${r.label}, learned as ${r.predicted} `,
            el("span", { class: "nbviz-num nbviz-dm-score", text: r.score.toFixed(2) }),
          ],
        );
        const choose = () => {
          if (plot) plot.select([r.index], { preventEvent: true });
          sendPicked([r.index]);
        };
        li.addEventListener("click", choose);
        li.addEventListener("keydown", (event) => {
          if (event.key === "Enter" || event.key === " ") {
            event.preventDefault();
            choose();
          }
        });
        return li;
      }),
    );
  };

  const applySelection = () => {
    const ids = model.get("selected_ids") || [];
    selectedText.textContent = ids.length ? `${ids.length.toLocaleString()} selected` : "";
    drawSuspects();
    const payload = model.get("selection");
    if (plot && payload && payload.indices) {
      plot.select(Array.from(decodeArray(payload.indices).data), { preventEvent: true });
    }
  };

  const stopFollowing = followStage(stage, canvas, () => plot, draw);

  const gallery = childView(model, "gallery", galleryHost, {
    what: "Showing the samples",
    placeholder: () => message(galleryHost, "Click a point (or a row of the list) to see its sample here.", { kind: "empty" }),
  });
  void gallery.refresh();
  draw();
  const schedule = throttle(draw, 50);
  const unbind = [
    on(colourSelect, "change", () => save(model, { color_by: colourSelect.value })),
    on(canvas, "click", pickAt),
  ];
  const stops = [
    listen(model, ["points"], () => {
      stale = true;
      schedule();
    }),
    listen(model, ["color_by", "suspects", "note", "empty", "error"], schedule),
    listen(model, ["selected_ids", "selection"], applySelection),
  ];
  return () => {
    model.off(UNANSWERED, onUnanswered);
    for (const stop of stops) stop();
    for (const off of unbind) off();
    menu.dispose();
    schedule.cancel();
    stopFollowing();
    draws.close();
    gallery.remove();
    if (plot) plot.destroy();
  };
}

export default { render };
