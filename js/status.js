// StatusMessage: a readable line of text (empty states, notes, errors) that
// other nbviz views embed. Text goes in via textContent only.
import { el } from "./lib/dom.js";
import { listen, save } from "./lib/model.js";
import { message } from "./lib/state.js";

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-status");

  const draw = () => {
    if (model.get("dismissed")) {
      root.replaceChildren();
      root.hidden = true;
      return;
    }
    root.hidden = false;
    const error = model.get("error");
    const box = message(root, error || model.get("message"), {
      kind: error ? "error" : model.get("kind"),
    });
    if (model.get("dismissible")) {
      const button = el("button", {
        class: "nbviz-dismiss",
        text: "\u00d7",
        attrs: { type: "button", title: "Dismiss", "aria-label": "Dismiss" },
      });
      button.addEventListener("click", () => save(model, { dismissed: true }));
      box.append(button);
    }
  };

  draw();
  return listen(model, ["message", "kind", "error", "dismissible", "dismissed"], draw);
}

export default { render };
