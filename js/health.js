// HealthReport: the verdict first (the likely causes, most likely first, with what
// to try), then each root finding with the findings that follow from it folded
// under it. Clicking a finding moves the linked step to it and names its layer
// (the Dashboard opens it in the LayerBrowser) and, for a finding about samples,
// selects them (Python fills `selected_ids`). Text from data goes in as text.
import { el, on } from "./lib/dom.js";
import { exportMenu } from "./lib/export.js";
import { formatStep } from "./lib/format.js";
import { causeText, followersText, groupFindings, groupShown, scoreText, whereText } from "./lib/health/tree.js";
import { listen, save } from "./lib/model.js";
import { guard, present, viewState } from "./lib/state.js";
import { findingsCsv } from "./lib/view_csv.js";

/** @typedef {import("./lib/health/tree.js").Finding} Finding */
/** @typedef {import("./lib/health/tree.js").Verdict} Verdict */

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

/**
 * One row of the verdict as a card: the cause, how likely, the sentence, what to try.
 * @param {Verdict} v
 * @param {number} rank
 */
function verdictCard(v, rank) {
  return el(
    "div",
    {
      class: ["nbviz-hr-verdict", `nbviz-hr-cause-${v.cause}`, rank === 0 ? "nbviz-hr-first" : ""],
      attrs: { "data-cause": v.cause, role: "group", "aria-label": `cause: ${causeText(v.cause)}` },
    },
    [
      el("div", { class: "nbviz-hr-verdict-head" }, [
        el("span", { class: "nbviz-hr-cause", text: v.cause === "healthy" ? "healthy" : causeText(v.cause) }),
        v.cause === "healthy" ? null : el("span", { class: "nbviz-hr-score", text: scoreText(v.score), attrs: { title: "how likely this is the cause (0-100%)" } }),
      ]),
      el("div", { class: "nbviz-hr-sentence", text: v.summary }),
      v.advice ? el("div", { class: "nbviz-hr-advice" }, [el("span", { class: "nbviz-hr-try", text: "Try: " }), v.advice]) : null,
    ],
  );
}

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-health");
  const verdict = el("div", { class: "nbviz-hr-verdicts", attrs: { role: "region", "aria-label": "verdict" } });
  const summary = el("span", { class: "nbviz-hr-summary" });
  const info = /** @type {HTMLInputElement} */ (el("input", { attrs: { type: "checkbox" } }));
  const list = el("ul", { class: "nbviz-hr-list", attrs: { role: "list" } });
  const menu = exportMenu({ name: "health_report", csv: () => findingsCsv((k) => model.get(k)) });
  const body = el("div", { class: "nbviz-hr" }, [
    verdict,
    el("div", { class: "nbviz-toolbar" }, [summary, el("label", {}, [info, "show info"]), menu.node]),
    list,
  ]);

  /**
   * A finding as a list item; a click goes to it.
   * @param {Finding} f
   * @param {number} i  its index in `findings`
   * @param {number} selected
   * @param {HTMLElement[]} extra  what goes under it (its consequences)
   */
  const item = (f, i, selected, extra) => {
    const evidence = el("pre", { class: "nbviz-hr-evidence", text: f.evidence });
    evidence.hidden = i !== selected;
    const li = el(
      "li",
      {
        class: ["nbviz-hr-item", `nbviz-hr-${f.root ? "consequence" : "root"}`, i === selected ? "nbviz-active" : ""],
        attrs: { "data-check": f.check, "data-layer": f.layer, "data-id": f.id, tabindex: 0 },
      },
      [
        el("div", { class: "nbviz-hr-head" }, [
          el("span", { class: ["nbviz-badge", `nbviz-badge-${f.severity}`], text: f.severity }),
          el("span", { class: "nbviz-hr-check", text: f.check.replace(/_/g, " ") }),
          el("span", { class: "nbviz-hr-where", text: whereText(f, formatStep) }),
        ]),
        el("div", { class: "nbviz-hr-message", text: f.message }),
        evidence,
        ...extra,
      ],
    );
    const choose = (/** @type {Event} */ event) => {
      event.stopPropagation(); // a consequence's click is not its root's
      if (i === selected) save(model, { selected: -1 });
      else if (f.step !== null) save(model, { selected: i, layer: f.layer, step: f.step });
      else save(model, { selected: i, layer: f.layer });
    };
    li.addEventListener("click", choose);
    li.addEventListener("keydown", (event) => {
      if (event.target !== li) return;
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        choose(event);
      }
    });
    return li;
  };

  const draw = guard(root, "Drawing the health report", () => {
    if (!present(root, body, viewState(model))) return;
    /** @type {Finding[]} */
    const findings = model.get("findings") || [];
    /** @type {Verdict[]} */
    const verdicts = model.get("verdict") || [];
    /** @type {string[]} */
    const expanded = model.get("expanded") || [];
    const showInfo = !!model.get("show_info");
    const selected = model.get("selected");
    info.checked = showInfo;
    verdict.replaceChildren(...verdicts.map((v, k) => verdictCard(v, k)));
    summary.textContent = countText(findings);
    summary.className = findings.some((f) => f.severity !== "info") ? "nbviz-hr-summary" : "nbviz-hr-summary nbviz-hr-healthy";
    const items = [];
    for (const group of groupFindings(findings)) {
      if (!groupShown(group, showInfo)) continue;
      const extra = [];
      if (group.children.length) {
        const open = expanded.includes(group.finding.id);
        const toggle = el("button", {
          class: "nbviz-hr-toggle",
          text: `${open ? "\u25be" : "\u25b8"} ${followersText(group.children.length)}`,
          attrs: { type: "button", "aria-expanded": String(open) },
        });
        toggle.addEventListener("click", (event) => {
          event.stopPropagation();
          const next = open ? expanded.filter((id) => id !== group.finding.id) : [...expanded, group.finding.id];
          save(model, { expanded: next });
        });
        const children = el(
          "ul",
          { class: "nbviz-hr-children", attrs: { role: "list" } },
          group.children.map(({ finding, index }) => item(finding, index, selected, [])),
        );
        children.hidden = !open;
        extra.push(toggle, children);
      }
      items.push(item(group.finding, group.index, selected, extra));
    }
    if (!items.length) {
      items.push(el("li", { class: "nbviz-hr-item nbviz-hr-healthy", text: findings.length ? "only info findings (tick 'show info')" : "no warnings or errors" }));
    }
    list.replaceChildren(...items);
  });

  const stops = [
    on(info, "change", () => save(model, { show_info: info.checked })),
    listen(model, ["findings", "verdict", "expanded", "selected", "show_info", "empty", "error"], draw),
  ];
  draw();
  return () => {
    for (const stop of stops) stop();
    menu.dispose();
  };
}

export default { render };
