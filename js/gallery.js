// SampleGallery: a page of cards, one per sample id: the sample as logged (PNG
// thumbnail, text, or the first values of an array row) with its true label,
// the prediction, the confidence and the loss. Sorting and paging are done by
// Python (only the page in view travels); every text goes in with textContent.
// Clicking a card sets `detail_id`; Python answers with `detail` and the panel
// above the cards shows the sample at full size, its top-k class probabilities,
// its recorded unit summary and its captured activations (lib/gallery/detail.js).
// A language model's samples are their tokens coloured by their loss, with the
// scale's legend above the cards; hovering a token shows its loss and the model's
// top predictions there (lib/gallery/tokens.js).
import { el, on, select } from "./lib/dom.js";
import { detailSections } from "./lib/gallery/detail.js";
import { sampleCard } from "./lib/gallery/sample.js";
import { describeToken, tokenLegend } from "./lib/gallery/tokens.js";
import { ObjectUrls } from "./lib/images.js";
import { listen, save } from "./lib/model.js";
import { splitMenu } from "./lib/splits.js";
import { batched } from "./lib/schedule.js";
import { guard, present, viewState } from "./lib/state.js";

/**
 * @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx
 */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-gallery");
  const count = el("span", { class: "nbviz-gallery-count" });
  const sortSelect = select("nbviz-gallery-sort", "sort by", [
    ["given", "given order"],
    ["loss", "loss"],
    ["confidence", "confidence"],
  ]);
  const direction = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-direction", attrs: { type: "button" } })
  );
  const prev = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-prev", text: "\u2039 prev", attrs: { type: "button" } })
  );
  const next = /** @type {HTMLButtonElement} */ (
    el("button", { class: "nbviz-gallery-next", text: "next \u203a", attrs: { type: "button" } })
  );
  const pageText = el("span", { class: "nbviz-gallery-page" });
  const evalText = el("span", { class: "nbviz-notice nbviz-gallery-eval" });
  const splits = splitMenu(model);
  const toolbar = el("div", { class: "nbviz-toolbar" }, [
    splits.el,
    count,
    el("label", {}, ["sort by", sortSelect]),
    direction,
    el("span", {}, [prev, " ", pageText, " ", next]),
    evalText,
  ]);
  const note = el("div", { class: "nbviz-notice nbviz-gallery-note" });
  const detailBox = el("div", { class: "nbviz-gallery-detail", style: { display: "none" } });
  const grid = el("div", { class: "nbviz-gallery-grid" });
  const legend = el("div", { class: "nbviz-gallery-token-legend", style: { display: "none" } });
  const tip = el("div", { class: "nbviz-token-tip", attrs: { role: "tooltip" }, style: { display: "none" } });
  const body = el("div", { class: "nbviz-gallery-body" }, [toolbar, note, legend, detailBox, grid, tip]);
  const cardUrls = new ObjectUrls();
  const detailUrls = new ObjectUrls();

  const drawDetail = () => {
    detailUrls.revoke();
    const d = model.get("detail") || {};
    if (d.id === undefined || d.id === null || d.id < 0) {
      detailBox.style.display = "none";
      detailBox.replaceChildren();
      return;
    }
    detailBox.style.display = "";
    detailBox.setAttribute("data-id", String(d.id));
    detailBox.replaceChildren(...detailSections(d, detailUrls, () => save(model, { detail_id: -1 })));
  };

  const draw = guard(root, "Drawing the samples", () => {
    const ids = model.get("ids") || [];
    cardUrls.revoke();
    const state = viewState(model, ids.length === 0 && (model.get("prompt") || "No samples to show."));
    if (!present(root, body, state)) return;
    const pages = model.get("n_pages") || 0;
    const page = model.get("page") || 0;
    count.textContent = `${ids.length.toLocaleString()} sample${ids.length === 1 ? "" : "s"}`;
    const choices = model.get("sort_choices") || [];
    for (const option of Array.from(sortSelect.children)) option.hidden = choices.length > 0 && !choices.includes(option.value);
    sortSelect.value = model.get("sort_by");
    const by = model.get("sort_by");
    direction.textContent = model.get("descending") ? "highest first" : "lowest first";
    direction.disabled = by === "given";
    pageText.textContent = `page ${Math.min(page + 1, Math.max(pages, 1))} of ${Math.max(pages, 1)}`;
    prev.disabled = page <= 0;
    next.disabled = page >= pages - 1;
    const at = model.get("eval_step");
    // what the evaluation recorded: classes ("predictions"), or per-sample losses alone
    const what = model.get("eval_what") || "evaluation";
    evalText.textContent = at >= 0 ? `${what} of step ${at}` : "no evaluation at or before this step";
    note.textContent = model.get("note") || "";
    note.style.display = note.textContent ? "" : "none";
    const open = (model.get("detail") || {}).id;
    const scale = model.get("token_scale") || {};
    const tokens = (model.get("items") || []).some((/** @type {any} */ item) => item.tokens);
    legend.style.display = tokens && scale.hi !== undefined ? "" : "none";
    legend.replaceChildren(...(tokens && scale.hi !== undefined ? [tokenLegend(scale)] : []));
    tip.style.display = "none";
    grid.replaceChildren(...(model.get("items") || []).map((/** @type {any} */ item) => sampleCard(item, open === item.id, cardUrls)));
    drawDetail();
  });

  // a token's loss and top predictions, on hover (cards and detail alike)
  /** @param {any} e */
  const showTip = (e) => {
    const span = e.target && e.target.closest ? e.target.closest(".nbviz-token") : null;
    if (!span || !span.hasAttribute("data-position")) return;
    const card = span.closest(".nbviz-gallery-card");
    const id = card ? Number(card.getAttribute("data-id")) : null;
    const payload = card
      ? ((model.get("items") || []).find((/** @type {any} */ item) => item.id === id) || {}).tokens
      : (model.get("detail") || {}).tokens;
    if (!payload || !describeToken(tip, payload, Number(span.getAttribute("data-position")))) return;
    const box = body.getBoundingClientRect();
    const at = span.getBoundingClientRect();
    tip.style.display = "";
    // below the token, kept inside the view (a narrow gallery would clip it)
    const room = box.width - tip.getBoundingClientRect().width;
    tip.style.left = `${Math.max(0, Math.min(at.left - box.left, room))}px`;
    tip.style.top = `${at.bottom - box.top + 4}px`;
  };
  /** @param {any} e */
  const hideTip = (e) => {
    const span = e.target && e.target.closest ? e.target.closest(".nbviz-token") : null;
    if (span) tip.style.display = "none";
  };

  /** @param {any} e */
  const cardOf = (e) => (e.target && e.target.closest ? e.target.closest(".nbviz-gallery-card") : null);
  const openCard = (/** @type {any} */ node) => {
    const id = Number(node.getAttribute("data-id"));
    save(model, { detail_id: id === (model.get("detail") || {}).id ? -1 : id });
  };

  // several traits change together (one Python hold_sync): draw once for them all
  const schedule = batched(draw);
  const stops = [
    on(grid, "click", (e) => {
      const node = cardOf(e);
      if (node) openCard(node);
    }),
    on(grid, "keydown", (/** @type {KeyboardEvent} */ e) => {
      if (e.key !== "Enter" && e.key !== " ") return;
      const node = cardOf(e);
      if (!node) return;
      e.preventDefault();
      openCard(node);
    }),
    on(grid, "mouseover", showTip),
    on(grid, "mouseout", hideTip),
    on(detailBox, "mouseover", showTip),
    on(detailBox, "mouseout", hideTip),
    on(sortSelect, "change", () => save(model, { sort_by: sortSelect.value })),
    on(direction, "click", () => save(model, { descending: !model.get("descending") })),
    on(prev, "click", () => save(model, { page: Math.max(0, (model.get("page") || 0) - 1) })),
    on(next, "click", () => save(model, { page: (model.get("page") || 0) + 1 })),
    splits.stop,
    listen(model, ["split", "splits"], splits.draw),
    listen(
      model,
      ["items", "ids", "page", "n_pages", "sort_by", "sort_choices", "descending", "eval_step", "token_scale", "note", "prompt", "detail", "empty", "error"],
      schedule,
    ),
  ];
  draw();
  return () => {
    for (const stop of stops) stop();
    schedule.cancel();
    cardUrls.revoke();
    detailUrls.revoke();
  };
}

export default { render };
