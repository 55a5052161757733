// Show a child widget (a trait holding "IPY_MODEL_<id>", e.g. an embedded
// SampleGallery) inside a host element, following the trait as it changes.
import { message } from "./dom.js";

/**
 * @param {import("./model.js").AnyModel} model
 * @param {string} trait  name of the trait holding the child reference
 * @param {HTMLElement} host
 * @param {() => void} [placeholder]  fills the host while the trait holds no widget
 * @returns {{refresh: () => Promise<void>, remove: () => void}}
 */
export function childView(model, trait, host, placeholder) {
  /** @type {any} */
  let view = null;
  let closed = false;
  let generation = 0;
  const refresh = async () => {
    const mine = ++generation;
    const ref = model.get(trait);
    const manager = /** @type {any} */ (model).widget_manager;
    if (view) {
      view.remove();
      view = null;
    }
    host.replaceChildren();
    if (typeof ref !== "string" || !ref.startsWith("IPY_MODEL_") || !manager) {
      if (placeholder) placeholder();
      return;
    }
    try {
      const child = await manager.get_model(ref.slice("IPY_MODEL_".length));
      const created = await manager.create_view(child);
      if (closed || mine !== generation) {
        created.remove();
        return;
      }
      view = created;
      host.replaceChildren(created.el);
    } catch (err) {
      message(host, `could not show the samples: ${err}`, { kind: "warning" });
    }
  };
  const onChange = () => void refresh();
  model.on(`change:${trait}`, onChange);
  return {
    refresh,
    remove() {
      closed = true;
      model.off(`change:${trait}`, onChange);
      if (view) view.remove();
      view = null;
    },
  };
}
