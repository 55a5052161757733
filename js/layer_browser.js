// LayerBrowser: a table of the model's layers with health sparklines and the
// values at the linked step; clicking a row opens the layer's detail (stats over
// steps, histograms at the step, the per-unit dead map, and for a layer with
// recorded per-sample unit values the samples that excite a chosen unit most
// and least: a click on a unit's bar sets `unit`, Python fills `unit_samples`).
// The pieces are in lib/layer_browser/: the table (layers.js), the charts and
// histograms (charts.js), the dead map (dead_map.js) and the units (units.js).
import { el, on } from "./lib/dom.js";
import { exportMenu } from "./lib/export.js";
import { formatStep } from "./lib/format.js";
import { ObjectUrls } from "./lib/images.js";
import { histogramBoxes, layerCharts } from "./lib/layer_browser/charts.js";
import { deadMap } from "./lib/layer_browser/dead_map.js";
import { drawSparks, layerTable, markSelected } from "./lib/layer_browser/layers.js";
import { unitSection } from "./lib/layer_browser/units.js";
import { listen, save } from "./lib/model.js";
import { perFrame } from "./lib/schedule.js";
import { guard, present, viewState } from "./lib/state.js";
import { layerTableCsv } from "./lib/view_csv.js";

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-layer-browser");
  const notice = el("span", { class: "nbviz-notice nbviz-lb-notice" });
  const stepText = el("span", { class: "nbviz-lb-step" });
  const badText = el("div", { class: "nbviz-nonfinite nbviz-lb-nonfinite-note" });
  const scroll = el("div", { class: "nbviz-lb-scroll" });
  const detail = el("div", { class: "nbviz-lb-detail" });
  const menu = exportMenu({
    name: "layer_browser",
    csv: () => layerTableCsv((k) => model.get(k)),
    // the selected layer's charts, histograms and dead map
    png: () =>
      /** @type {HTMLCanvasElement[]} */ ([...detail.querySelectorAll("canvas")]).map((canvas) => ({
        canvas,
        title: canvas.parentElement?.querySelector(".nbviz-lb-chart-title, .nbviz-lb-caption")?.textContent ?? "",
      })),
  });
  const body = el("div", { class: "nbviz-lb" }, [el("div", { class: "nbviz-toolbar" }, [stepText, menu.node, notice]), badText, scroll, detail]);
  const histBox = el("div", { class: "nbviz-lb-hists" });
  const deadBox = el("div", { class: "nbviz-lb-deadbox" });
  const unitBox = el("div", { class: "nbviz-lb-units" });
  const unitUrls = new ObjectUrls();

  /** @type {ReturnType<typeof layerTable> | null} */
  let table = null;
  /** @type {ReturnType<typeof layerCharts> | null} */
  let charts = null;
  /** @type {ReturnType<typeof deadMap> | null} */
  let dead = null;

  const show = () => present(root, body, viewState(model));

  const buildTable = () => {
    table = layerTable(model.get("layers") ?? [], model.get("badges") ?? {});
    scroll.replaceChildren(table.table);
    markSelected(table.table, model.get("selected_layer"));
    drawRows();
  };

  const drawRows = () => {
    if (!table) return;
    const step = Number(model.get("step"));
    const { shown, nonfinite } = drawSparks(table.sparks, model.get("spark") ?? {}, model.get("current") ?? {}, step);
    stepText.textContent = `step ${formatStep(step)}` + (shown.length ? ` (captures: ${shown.join(", ")})` : "");
    const nBad = nonfinite.layers.size;
    badText.textContent = nBad
      ? `\u26a0 non-finite values (NaN/inf) at this step in ${nBad} of ${table.sparks.size} layers ` +
        `(${nonfinite.metrics.join(", ")}): counted beside each value, left out of it, marked in red`
      : "";
    badText.hidden = !nBad;
    notice.textContent = model.get("notice") || "";
  };

  const buildDetail = () => {
    charts?.remove();
    charts = null;
    const d = model.get("detail") ?? {};
    if (!d.layer) {
      detail.replaceChildren(
        el("div", { class: "nbviz-muted", text: "Click a layer to see its statistics over steps, its histograms and its dead-unit map." }),
      );
      return;
    }
    const params = d.params ? `${Number(d.params).toLocaleString("en-US")} params` : "";
    const parts = [el("h4", { text: [d.layer, d.type, d.shape, params].filter(Boolean).join(" \u00b7 ") })];
    if (d.note) parts.push(el("div", { class: "nbviz-muted nbviz-lb-note", text: d.note }));
    if (d.notice) parts.push(el("div", { class: "nbviz-notice", text: `summarised: ${d.notice}` }));
    if (d.empty) parts.push(el("div", { class: "nbviz-muted nbviz-lb-detail-empty", text: d.empty }));
    charts = layerCharts(d.series ?? []);
    const title = (/** @type {string} */ text) => el("div", { class: "nbviz-lb-chart-title", text });
    parts.push(
      el("div", { class: "nbviz-lb-charts" }, charts.boxes),
      title("histograms at this step"),
      histBox,
      deadTitle,
      deadBox,
      unitTitle,
      unitBox,
    );
    detail.replaceChildren(...parts);
    buildUnits();
    buildDead();
    drawDetail();
    drawHists();
  };

  const deadTitle = el("div", { class: "nbviz-lb-chart-title nbviz-lb-dead-title" });
  const buildDead = () => {
    dead?.remove();
    const dm = model.get("dead_map") ?? {};
    // an attention layer's heads map says what it shows (dead_map.title)
    deadTitle.textContent = dm.title || "dead map: fraction of the batch on which each unit was zero (units \u00d7 steps)";
    dead = deadMap(dm);
    deadBox.replaceChildren(...dead.el);
  };

  const unitTitle = el("div", { class: "nbviz-lb-chart-title nbviz-lb-units-title" });
  const buildUnits = () => {
    unitUrls.revoke();
    const us = model.get("unit_samples") ?? {};
    // says what the section below shows: a unit's top tokens, its samples, or why neither
    unitTitle.textContent =
      us.kind === "tokens"
        ? "what each unit responds to: the tokens it was most active on, in their context"
        : us.n_units > 0
          ? "what each unit responds to: the samples that excite it most and least"
          : "what each unit responds to";
    const handlers = {
      pickUnit: (/** @type {number} */ unit) => save(model, { unit }),
      currentUnit: () => model.get("unit"),
      openSample: (/** @type {number} */ id) => save(model, { map_id: id }),
    };
    unitBox.replaceChildren(...unitSection(model.get("unit_samples") ?? {}, model.get("sample_maps") ?? {}, handlers, unitUrls));
  };

  const drawDetail = () => {
    const step = Number(model.get("step"));
    charts?.draw(step);
    dead?.draw(step, Math.max(240, Math.min(900, (detail.clientWidth || 600) - 10)));
  };

  const drawHists = () => histBox.replaceChildren(...histogramBoxes((model.get("detail_at") ?? {}).histograms ?? []));

  const rowOf = (/** @type {Event} */ e) => (e.target instanceof Element ? e.target.closest(".nbviz-lb-row") : null);
  const onClick = (/** @type {MouseEvent} */ e) => {
    const tr = rowOf(e);
    if (!tr) return;
    const name = tr.getAttribute("data-layer") ?? "";
    save(model, { selected_layer: name === model.get("selected_layer") ? "" : name });
  };
  const onKey = (/** @type {KeyboardEvent} */ e) => {
    if (e.key !== "Enter" && e.key !== " ") return;
    const tr = rowOf(e);
    if (!tr) return;
    e.preventDefault();
    save(model, { selected_layer: tr.getAttribute("data-layer") ?? "" });
  };

  const schedule = perFrame(
    guard(root, "Drawing the layers", () => {
      if (!show()) return;
      drawRows();
      drawDetail();
    }),
  );
  const rebuild = guard(root, "Drawing the layers", () => {
    if (!show()) return;
    buildTable();
    buildDetail();
  });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => schedule()) : null;
  resize?.observe(root);

  rebuild();
  const stops = [
    on(scroll, "click", onClick),
    on(scroll, "keydown", onKey),
    listen(model, ["layers", "badges", "empty", "error"], rebuild),
    listen(model, ["spark", "current", "step", "notice"], schedule),
    listen(model, ["selected_layer"], () => table && markSelected(table.table, model.get("selected_layer"))),
    listen(model, ["detail"], guard(root, "Drawing the layer's detail", () => show() && buildDetail())),
    listen(model, ["detail_at"], drawHists),
    listen(model, ["unit_samples", "sample_maps"], buildUnits),
    listen(model, ["dead_map"], () => {
      buildDead();
      schedule();
    }),
  ];
  return () => {
    for (const stop of stops) stop();
    menu.dispose();
    charts?.remove();
    dead?.remove();
    unitUrls.revoke();
    resize?.disconnect();
    schedule.cancel();
  };
}

export default { render };
