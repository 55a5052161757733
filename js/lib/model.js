// Helpers around the anywidget model: subscribe with a matching cleanup, so a
// view's render() can return one function that removes everything it added.

/**
 * @typedef {object} AnyModel
 * @property {(name: string) => any} get
 * @property {(name: string, value: any) => void} set
 * @property {() => void} save_changes
 * @property {(event: string, fn: (...args: any[]) => void) => void} on
 * @property {(event: string, fn?: (...args: any[]) => void) => void} off
 */

/**
 * Call `fn` whenever any of the traits `names` changes. Several changes made
 * together (Python's `hold_sync`) call it once per trait; wrap `fn` in
 * `throttle` from dom.js when a redraw is costly.
 * @param {AnyModel} model
 * @param {string[]} names
 * @param {() => void} fn
 * @returns {() => void} removes the listeners
 */
export function listen(model, names, fn) {
  const handler = () => fn();
  for (const name of names) model.on(`change:${name}`, handler);
  return () => {
    for (const name of names) model.off(`change:${name}`, handler);
  };
}

/**
 * Set traits from the view and send them to Python in one message.
 * @param {AnyModel} model
 * @param {Record<string, any>} values
 */
export function save(model, values) {
  for (const [name, value] of Object.entries(values)) model.set(name, value);
  model.save_changes();
}
