// Show a child widget (a trait holding "IPY_MODEL_<id>", e.g. an embedded
// SampleGallery) inside a host element, following the trait as it changes.
// Every view that embeds another widget mounts it through here.
import { showFailure } from "./state.js";

const PREFIX = "IPY_MODEL_";

/**
 * The model id in a widget reference ("IPY_MODEL_<id>"), or null when the value
 * is not one.
 * @param {unknown} ref
 * @returns {string | null}
 */
export function childId(ref) {
  return typeof ref === "string" && ref.startsWith(PREFIX) && ref.length > PREFIX.length
    ? ref.slice(PREFIX.length)
    : null;
}

/**
 * @typedef {object} ChildOptions
 * @property {() => void} [placeholder]  fills the host while the trait holds no widget
 * @property {string} [what]  what the child shows, for a failure ("Showing the samples")
 */

/**
 * Mount the view of the widget in `model`'s `trait` into `host`, and again each
 * time the trait changes (the old view is removed first; a slow creation that a
 * newer one overtook is dropped). Call refresh() once to show the first one.
 * @param {import("./model.js").AnyModel} model
 * @param {string} trait  name of the trait holding the child reference
 * @param {HTMLElement} host
 * @param {ChildOptions} [options]
 * @returns {{refresh: () => Promise<void>, remove: () => void}}
 */
export function childView(model, trait, host, options = {}) {
  /** @type {any} */
  let view = null;
  let closed = false;
  let generation = 0;
  const refresh = async () => {
    const mine = ++generation;
    const id = childId(model.get(trait));
    const manager = /** @type {any} */ (model).widget_manager;
    if (view) {
      view.remove();
      view = null;
    }
    host.replaceChildren();
    if (closed) return;
    if (id === null || !manager) {
      options.placeholder?.();
      return;
    }
    try {
      const child = await manager.get_model(id);
      const created = await manager.create_view(child);
      if (closed || mine !== generation) {
        created.remove();
        return;
      }
      view = created;
      host.replaceChildren(created.el);
    } catch (err) {
      if (closed || mine !== generation) return;
      showFailure(host, options.what ?? "Showing the embedded view", err, { kind: "warning" });
    }
  };
  const onChange = () => void refresh();
  model.on(`change:${trait}`, onChange);
  return {
    refresh,
    remove() {
      closed = true;
      generation += 1;
      model.off(`change:${trait}`, onChange);
      if (view) view.remove();
      view = null;
    },
  };
}
