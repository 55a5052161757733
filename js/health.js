// HealthReport: the diagnosis worst first; clicking a finding moves the linked
// step to it and names its layer (the Dashboard opens it in the LayerBrowser).
import { el, on } from "./lib/dom.js";
import { formatStep } from "./lib/format.js";
import { listen, save } from "./lib/model.js";
import { guard, present, viewState } from "./lib/state.js";

/**
 * @typedef {{check: string, layer: string, step: number | null, severity: "error" | "warning" | "info",
 *   message: string, evidence: string}} Finding
 */

/**
 * "3 warnings, 2 info" (or that nothing was found).
 * @param {Finding[]} findings
 * @returns {string}
 */
export function countText(findings) {
  /** @type {Record<string, number>} */
  const n = { error: 0, warning: 0, info: 0 };
  for (const f of findings) n[f.severity] = (n[f.severity] ?? 0) + 1;
  const parts = [];
  if (n.error) parts.push(`${n.error} error${n.error === 1 ? "" : "s"}`);
  if (n.warning) parts.push(`${n.warning} warning${n.warning === 1 ? "" : "s"}`);
  if (n.info) parts.push(`${n.info} info`);
  return parts.length ? parts.join(", ") : "no findings: every check passed";
}

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-health");
  const summary = el("span", { class: "nbviz-hr-summary" });
  const info = /** @type {HTMLInputElement} */ (el("input", { attrs: { type: "checkbox" } }));
  const list = el("ul", { class: "nbviz-hr-list", attrs: { role: "list" } });
  const body = el("div", { class: "nbviz-hr" }, [
    el("div", { class: "nbviz-toolbar" }, [summary, el("label", {}, [info, "show info"])]),
    list,
  ]);
  const draw = guard(root, "Drawing the health report", () => {
    if (!present(root, body, viewState(model))) return;
    /** @type {Finding[]} */
    const findings = model.get("findings") || [];
    const showInfo = !!model.get("show_info");
    const selected = model.get("selected");
    info.checked = showInfo;
    summary.textContent = countText(findings);
    summary.className = findings.some((f) => f.severity !== "info") ? "nbviz-hr-summary" : "nbviz-hr-summary nbviz-hr-healthy";
    const items = [];
    findings.forEach((f, i) => {
      if (f.severity === "info" && !showInfo) return;
      const where = [f.layer ? `layer ${f.layer}` : "whole run", f.step !== null ? `step ${formatStep(f.step)}` : ""]
        .filter(Boolean)
        .join(" \u00b7 ");
      const evidence = el("pre", { class: "nbviz-hr-evidence", text: f.evidence });
      evidence.hidden = i !== selected;
      const item = el(
        "li",
        {
          class: ["nbviz-hr-item", i === selected ? "nbviz-active" : ""],
          attrs: { "data-check": f.check, "data-layer": f.layer, tabindex: 0 },
        },
        [
          el("div", { class: "nbviz-hr-head" }, [
            el("span", { class: ["nbviz-badge", `nbviz-badge-${f.severity}`], text: f.severity }),
            el("span", { class: "nbviz-hr-check", text: f.check.replace(/_/g, " ") }),
            el("span", { class: "nbviz-hr-where", text: where }),
          ]),
          el("div", { class: "nbviz-hr-message", text: f.message }),
          evidence,
        ],
      );
      const choose = () => {
        if (i === selected) save(model, { selected: -1 });
        else if (f.step !== null) save(model, { selected: i, layer: f.layer, step: f.step });
        else save(model, { selected: i, layer: f.layer });
      };
      item.addEventListener("click", choose);
      item.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          choose();
        }
      });
      items.push(item);
    });
    if (!items.length) {
      items.push(el("li", { class: "nbviz-hr-item nbviz-hr-healthy", text: findings.length ? "only info findings (tick 'show info')" : "no warnings or errors" }));
    }
    list.replaceChildren(...items);
  });

  const stops = [
    on(info, "change", () => save(model, { show_info: info.checked })),
    listen(model, ["findings", "selected", "show_info", "empty", "error"], draw),
  ];
  draw();
  return () => {
    for (const stop of stops) stop();
  };
}

export default { render };
