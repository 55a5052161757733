// Dashboard: the views of a run on one screen. A sticky header holds the step
// scrubber, one tab per group of views and the banner of a replaced run; below it
// the lines on what is not shown (they scroll away with the views, so that the
// header covers little of a tall tab), then the open tab's views side by side
// where the width allows.
//
// A tab's views are created the first time it opens (a view drawn in a hidden
// box would measure zero width) and kept afterwards; when the Python side adds a
// view (its data arrived) or a tab, the views already shown stay as they are.
import { childId } from "./lib/child.js";
import { el, on } from "./lib/dom.js";
import { listen, save } from "./lib/model.js";
import { showFailure } from "./lib/state.js";

/**
 * @typedef {{title: string, view: string, min_width?: number | null}} Panel
 *   min_width: the narrowest the view reads well at (px); none: the whole width
 * @typedef {{key: string, title: string, panels: Panel[]}} Section
 */

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-dashboard");
  const manager = /** @type {any} */ (model).widget_manager;

  const scrubberHost = el("div", { class: "nbviz-dash-scrubber" });
  const tabs = el("div", { class: "nbviz-dash-tabs", attrs: { role: "tablist", "aria-label": "views" } });
  const banner = el("div", { class: "nbviz-dash-banner", attrs: { role: "status" } });
  const pending = el("div", { class: ["nbviz-dash-pending", "nbviz-dashboard-notes"] });
  const header = el("div", { class: "nbviz-dash-header" }, [scrubberHost, tabs, banner]);
  const body = el("div", { class: "nbviz-dash-body" });
  root.replaceChildren(header, pending, body);

  let closed = false;
  /** The mounted child views by model id: {view, host} (host is moved, never rebuilt). */
  /** @type {Map<string, {view: any, host: HTMLElement}>} */
  const mounted = new Map();
  /** @type {Map<string, HTMLElement>} */
  const sectionEls = new Map();

  /** Mount the view of model `id` into a new host (once). */
  const mount = (/** @type {string} */ id, /** @type {string} */ what) => {
    const known = mounted.get(id);
    if (known) return known.host;
    const host = el("div", { class: "nbviz-dash-view", attrs: { "data-model": id } });
    const entry = { view: /** @type {any} */ (null), host };
    mounted.set(id, entry);
    if (!manager) {
      host.textContent = `${what}: no widget manager to show it`;
      return host;
    }
    (async () => {
      try {
        const child = await manager.get_model(id);
        const view = await manager.create_view(child);
        if (closed || mounted.get(id) !== entry) {
          view.remove();
          return;
        }
        entry.view = view;
        host.replaceChildren(view.el);
      } catch (err) {
        if (!closed) showFailure(host, `Showing ${what}`, err, { kind: "warning" });
      }
    })();
    return host;
  };

  const unmount = (/** @type {string} */ id) => {
    const entry = mounted.get(id);
    if (!entry) return;
    mounted.delete(id);
    entry.view?.remove();
    entry.host.remove();
  };

  // the scrubber: always shown, in the sticky header
  let scrubberId = /** @type {string | null} */ (null);
  const drawScrubber = () => {
    const id = childId(model.get("scrubber"));
    if (id === scrubberId) return;
    if (scrubberId) unmount(scrubberId);
    scrubberId = id;
    scrubberHost.replaceChildren(id ? mount(id, "the step scrubber") : "");
  };

  /** @returns {Section[]} */
  const sections = () => (Array.isArray(model.get("sections")) ? model.get("sections") : []);

  const openKey = () => {
    const all = sections();
    const want = String(model.get("tab") ?? "");
    return all.some((s) => s.key === want) ? want : all.length ? all[0].key : "";
  };

  const drawTabs = () => {
    const open = openKey();
    tabs.replaceChildren(
      ...sections().map((s) => {
        const b = el("button", {
          class: ["nbviz-dash-tab", s.key === open ? "nbviz-dash-tab-open" : ""],
          text: s.title,
          attrs: { type: "button", role: "tab", "aria-selected": s.key === open, "data-key": s.key },
        });
        b.addEventListener("click", () => {
          if (String(model.get("tab")) !== s.key) save(model, { tab: s.key });
          drawBody();
          drawTabs();
        });
        return b;
      }),
    );
    root.setAttribute("data-tab", open);
  };

  /** Lay out every section; create the open one's views (the others stay unmade). */
  const drawBody = () => {
    const open = openKey();
    for (const s of sections()) {
      let section = sectionEls.get(s.key);
      if (!section) {
        section = el("div", { class: "nbviz-dash-section", attrs: { "data-key": s.key, role: "tabpanel" } });
        sectionEls.set(s.key, section);
      }
      const isOpen = s.key === open;
      section.hidden = !isOpen;
      if (isOpen) {
        const panels = (s.panels ?? []).map((p) => {
          const id = childId(p.view);
          // views share a row where their narrowest widths fit, else each takes the row
          const min = Number(p.min_width) > 0 ? Math.round(Number(p.min_width)) : 0;
          const style = min ? { flex: `1 1 ${min}px` } : {};
          return el("section", { class: "nbviz-dash-panel", style }, [
            el("h3", { class: "nbviz-dash-title", text: p.title }),
            id ? mount(id, p.title) : el("div", { text: "(no view)" }),
          ]);
        });
        section.replaceChildren(el("div", { class: "nbviz-dash-grid" }, panels));
      }
      body.append(section);
    }
    // views that left every section (a rebuild on a new run) are removed
    const listed = new Set(sections().flatMap((s) => (s.panels ?? []).map((p) => childId(p.view))));
    for (const id of [...mounted.keys()]) if (id !== scrubberId && !listed.has(id)) unmount(id);
    for (const [key, section] of sectionEls) {
      if (!sections().some((s) => s.key === key)) {
        section.remove();
        sectionEls.delete(key);
      }
    }
  };

  const drawText = () => {
    const text = String(model.get("banner") ?? "");
    banner.textContent = text;
    banner.hidden = !text;
    const wait = String(model.get("pending") ?? "");
    pending.textContent = wait;
    pending.hidden = !wait;
  };

  // The header sticks to the top of the visible area while the dashboard scrolls past
  // it. CSS position: sticky cannot do it inside a notebook: the output area around
  // the view sets overflow, which makes it the (non-scrolling) box sticky refers to.
  // So the header is moved down by the distance the dashboard's top has scrolled out
  // of the nearest box that really scrolls (the notebook, a scrolled output, the page).
  let frame = 0;
  const stick = () => {
    frame = 0;
    if (closed || !root.isConnected) return;
    let top = 0;
    for (let n = root.parentElement; n; n = n.parentElement) {
      const overflow = getComputedStyle(n).overflowY;
      if ((overflow === "auto" || overflow === "scroll") && n.scrollHeight > n.clientHeight + 1) {
        top = Math.max(top, n.getBoundingClientRect().top);
      }
    }
    const box = root.getBoundingClientRect();
    const room = box.height - header.offsetHeight;
    const shift = Math.min(Math.max(top - box.top, 0), Math.max(room, 0));
    header.style.transform = shift > 0 ? `translateY(${shift}px)` : "";
    header.classList.toggle("nbviz-dash-stuck", shift > 0);
  };
  const scheduleStick = () => {
    if (!frame) frame = requestAnimationFrame(stick);
  };

  const drawAll = () => {
    drawScrubber();
    drawTabs();
    drawBody();
    drawText();
  };
  drawAll();

  const stops = [
    listen(model, ["scrubber"], drawScrubber),
    listen(model, ["sections", "tab"], () => {
      drawTabs();
      drawBody();
      scheduleStick();
    }),
    listen(model, ["banner", "pending"], drawText),
    on(document, "scroll", scheduleStick, { capture: true, passive: true }),
    on(window, "resize", scheduleStick),
    // arrow keys on a tab move between tabs
    on(tabs, "keydown", (/** @type {KeyboardEvent} */ e) => {
      if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
      const all = sections();
      const i = all.findIndex((s) => s.key === openKey());
      const next = all[(i + (e.key === "ArrowRight" ? 1 : all.length - 1)) % all.length];
      if (!next) return;
      e.preventDefault();
      save(model, { tab: next.key });
      drawTabs();
      drawBody();
      /** @type {HTMLElement | null} */ (tabs.querySelector(`[data-key="${CSS.escape(next.key)}"]`))?.focus();
    }),
  ];
  return () => {
    closed = true;
    if (frame) cancelAnimationFrame(frame);
    for (const stop of stops) stop();
    for (const id of [...mounted.keys()]) unmount(id);
  };
}

export default { render };
