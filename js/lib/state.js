// What a view shows when it has nothing to draw, or could not draw: one
// readable message in its place. Every view says it the same way:
//   empty  "nothing here yet, because ..." (the `empty` trait, or the view's own reason)
//   error  "this failed: ..." (the `error` trait Python sets, or a drawing that threw)
// The message carries the classes nbviz-message and nbviz-message-<kind>.
import { el } from "./dom.js";

/**
 * @typedef {"info" | "empty" | "warning" | "error"} MessageKind
 * @typedef {{kind: "empty" | "error", text: string}} ViewState
 */

/**
 * Replace the contents of `root` with a readable message: an empty state
 * ("No predictions logged yet"), a note, or an error. The text stays text.
 * @param {HTMLElement} root
 * @param {string} text
 * @param {{kind?: MessageKind}} [options]
 * @returns {HTMLElement} the message element
 */
export function message(root, text, options = {}) {
  const kind = options.kind ?? "info";
  const box = el(
    "div",
    { class: ["nbviz-message", `nbviz-message-${kind}`], attrs: { role: kind === "error" ? "alert" : "status" } },
    [el("span", { class: "nbviz-message-text", text: text ?? "" })],
  );
  root.replaceChildren(box);
  return box;
}

/**
 * The state of a view: its error, else its empty state, else the first of the
 * view's own `reasons` that is set (say why, e.g. "No steps recorded yet."),
 * else null when it has something to draw.
 * @param {{get: (name: string) => any}} model
 * @param {...(string | null | undefined | false)} reasons
 * @returns {ViewState | null}
 */
export function viewState(model, ...reasons) {
  const error = model.get("error");
  if (error) return { kind: "error", text: String(error) };
  const empty = model.get("empty");
  if (empty) return { kind: "empty", text: String(empty) };
  for (const reason of reasons) if (reason) return { kind: "empty", text: String(reason) };
  return null;
}

/**
 * Show `body` in `root`, or the message of `state` in its place. Returns
 * whether the body is shown (the view then draws into it).
 * @param {HTMLElement} root
 * @param {HTMLElement} body
 * @param {ViewState | null} state
 * @returns {boolean}
 */
export function present(root, body, state) {
  if (state) {
    message(root, state.text, { kind: state.kind });
    return false;
  }
  if (body.parentNode !== root) root.replaceChildren(body);
  return true;
}

/**
 * As `present`, for a body that stays in the page (a WebGL canvas is kept, not
 * made again): the state's message goes in `messages`, beside the body, and the
 * body is hidden; with no state the messages are cleared and the body shown.
 * Returns whether the body is shown.
 * @param {HTMLElement} messages
 * @param {HTMLElement} body
 * @param {ViewState | null} state
 * @returns {boolean}
 */
export function presentBeside(messages, body, state) {
  if (state) {
    message(messages, state.text, { kind: state.kind });
    body.style.display = "none";
    return false;
  }
  messages.replaceChildren();
  body.style.display = "";
  return true;
}

/**
 * The words for a failure: "<what> failed: <reason>".
 * @param {string} what  e.g. "Drawing the loss curves"
 * @param {unknown} err
 * @returns {string}
 */
export function failureText(what, err) {
  const reason = err instanceof Error ? err.message : String(err);
  return `${what} failed: ${reason || "no reason given"}`;
}

/**
 * Say in `root` that something failed, and log the error for a developer.
 * @param {HTMLElement} root
 * @param {string} what
 * @param {unknown} err
 * @param {{kind?: "warning" | "error"}} [options]
 * @returns {HTMLElement}
 */
export function showFailure(root, what, err, options = {}) {
  console.error(`nbviz: ${what} failed`, err);
  return message(root, failureText(what, err), { kind: options.kind ?? "error" });
}

/**
 * `fn`, but a throw shows the failure in `root` instead of leaving a blank or
 * half-drawn view (the next successful draw puts the view back).
 * @template {(...args: any[]) => any} F
 * @param {HTMLElement} root
 * @param {string} what
 * @param {F} fn
 * @returns {(...args: Parameters<F>) => ReturnType<F> | undefined}
 */
export function guard(root, what, fn) {
  return (...args) => {
    try {
      return fn(...args);
    } catch (err) {
      showFailure(root, what, err);
      return undefined;
    }
  };
}
