import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import { failureText, guard, message, present, presentBeside, showFailure, viewState } from "../lib/state.js";
import { FakeNode, fakeModel, withDocument } from "./fake_dom.mjs";

describe("empty and error states", () => {
  withDocument();

  it("viewState: the error first, then the empty state, then the view's own reason", () => {
    assert.deepEqual(viewState(fakeModel({ error: "boom", empty: "nothing" })), { kind: "error", text: "boom" });
    assert.deepEqual(viewState(fakeModel({ error: "", empty: "No scalars logged yet." })), { kind: "empty", text: "No scalars logged yet." });
    assert.deepEqual(viewState(fakeModel({ error: "", empty: "" }), false, "No steps recorded yet."), {
      kind: "empty",
      text: "No steps recorded yet.",
    });
    assert.equal(viewState(fakeModel({ error: "", empty: "" }), false, null), null);
  });

  it("present shows the body, or the state's message in its place, and the body again after", () => {
    const root = new FakeNode("div");
    const body = new FakeNode("div");
    assert.equal(present(root, body, null), true);
    assert.deepEqual(root.children, [body]);
    assert.equal(present(root, body, { kind: "empty", text: "No predictions logged yet: call run.log_predictions." }), false);
    const box = root.children[0];
    assert.ok(box.classList.contains("nbviz-message") && box.classList.contains("nbviz-message-empty"));
    assert.equal(box.getAttribute("role"), "status");
    assert.equal(box.textContent, "No predictions logged yet: call run.log_predictions.");
    assert.equal(present(root, body, null), true);
    assert.deepEqual(root.children, [body]);
  });

  it("presentBeside hides the body under the state's message, and clears it to show the body again", () => {
    const messages = new FakeNode("div");
    const body = new FakeNode("div");
    assert.equal(presentBeside(messages, body, { kind: "error", text: "no embeddings" }), false);
    assert.equal(body.style.display, "none");
    assert.equal(messages.textContent, "no embeddings");
    assert.equal(presentBeside(messages, body, null), true);
    assert.equal(body.style.display, "");
    assert.deepEqual(messages.children, []);
  });

  it("an error message is an alert, and markup in it stays text", () => {
    const root = new FakeNode("div");
    const box = message(root, "could not read <b>run.sqlite</b>", { kind: "error" });
    assert.equal(box.getAttribute("role"), "alert");
    assert.ok(box.classList.contains("nbviz-message-error"));
    assert.equal(box.textContent, "could not read <b>run.sqlite</b>");
  });

  it("failureText says what failed and why", () => {
    assert.equal(failureText("Drawing the histograms", new TypeError("counts is undefined")), "Drawing the histograms failed: counts is undefined");
    assert.equal(failureText("Showing the samples", "no widget manager"), "Showing the samples failed: no widget manager");
    assert.equal(failureText("Drawing", new Error("")), "Drawing failed: no reason given");
  });

  it("guard shows a throw as an error in the view, logs it, and passes results through", () => {
    const errors = mock.method(console, "error", () => {});
    try {
      const root = new FakeNode("div");
      const draw = guard(root, "Drawing the loss curves", (/** @type {number} */ x) => {
        if (x < 0) throw new RangeError("a log axis needs positive values");
        return x * 2;
      });
      assert.equal(draw(2), 4);
      assert.equal(errors.mock.callCount(), 0);
      assert.equal(draw(-1), undefined);
      assert.equal(root.textContent, "Drawing the loss curves failed: a log axis needs positive values");
      assert.ok(root.children[0].classList.contains("nbviz-message-error"));
      assert.equal(errors.mock.callCount(), 1);
    } finally {
      errors.mock.restore();
    }
  });

  it("showFailure can be a warning", () => {
    const errors = mock.method(console, "error", () => {});
    try {
      const box = showFailure(new FakeNode("div"), "Showing the samples", new Error("gone"), { kind: "warning" });
      assert.ok(box.classList.contains("nbviz-message-warning"));
      assert.equal(box.getAttribute("role"), "status");
    } finally {
      errors.mock.restore();
    }
  });
});
