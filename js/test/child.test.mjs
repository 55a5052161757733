import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import { childId, childView } from "../lib/child.js";
import { message } from "../lib/state.js";
import { FakeNode, fakeModel, settle, withDocument } from "./fake_dom.mjs";

/**
 * A widget manager whose views are divs naming their model; `fail` makes
 * create_view reject, `hold` keeps a creation waiting until released.
 */
function fakeManager() {
  const made = [];
  const waiting = [];
  const manager = {
    made,
    fail: false,
    hold: false,
    get_model: async (id) => ({ id }),
    create_view: (child) => {
      if (manager.fail) return Promise.reject(new Error(`no view for ${child.id}`));
      const view = { el: new FakeNode("div"), removed: false, remove() { this.removed = true; } };
      view.el.setAttribute("data-model", child.id);
      made.push(view);
      if (!manager.hold) return Promise.resolve(view);
      return new Promise((resolve) => waiting.push(() => resolve(view)));
    },
    release: () => waiting.splice(0).forEach((go) => go()),
  };
  return manager;
}

describe("child widgets", () => {
  withDocument();

  it("childId reads a widget reference and nothing else", () => {
    assert.equal(childId("IPY_MODEL_abc123"), "abc123");
    assert.equal(childId("IPY_MODEL_"), null);
    assert.equal(childId("abc"), null);
    assert.equal(childId(null), null);
  });

  it("mounts the child's view, and a new one when the trait changes", async () => {
    const model = fakeModel({ gallery: "IPY_MODEL_g1" });
    model.widget_manager = fakeManager();
    const host = new FakeNode("div");
    const child = childView(model, "gallery", host);
    await child.refresh();
    assert.equal(host.children[0].getAttribute("data-model"), "g1");
    model.change("gallery", "IPY_MODEL_g2");
    await settle();
    assert.equal(host.children.length, 1);
    assert.equal(host.children[0].getAttribute("data-model"), "g2");
    assert.ok(model.widget_manager.made[0].removed, "the old view was removed");
  });

  it("shows the placeholder while the trait holds no widget", async () => {
    const model = fakeModel({ gallery: "" });
    model.widget_manager = fakeManager();
    const host = new FakeNode("div");
    const child = childView(model, "gallery", host, {
      placeholder: () => message(host, "Select points to see their samples here.", { kind: "empty" }),
    });
    await child.refresh();
    assert.equal(host.textContent, "Select points to see their samples here.");
  });

  it("says in words when the child cannot be shown", async () => {
    const errors = mock.method(console, "error", () => {});
    try {
      const model = fakeModel({ gallery: "IPY_MODEL_g1" });
      model.widget_manager = Object.assign(fakeManager(), { fail: true });
      const host = new FakeNode("div");
      await childView(model, "gallery", host, { what: "Showing the samples" }).refresh();
      assert.equal(host.textContent, "Showing the samples failed: no view for g1");
      assert.ok(host.children[0].classList.contains("nbviz-message-warning"));
    } finally {
      errors.mock.restore();
    }
  });

  it("a creation overtaken by a newer one is dropped, not shown", async () => {
    const model = fakeModel({ gallery: "IPY_MODEL_slow" });
    const manager = Object.assign(fakeManager(), { hold: true });
    model.widget_manager = manager;
    const host = new FakeNode("div");
    const child = childView(model, "gallery", host);
    const first = child.refresh();
    await settle();
    manager.hold = false;
    model.change("gallery", "IPY_MODEL_fast");
    await settle();
    manager.release();
    await first;
    assert.deepEqual(host.children.map((c) => c.getAttribute("data-model")), ["fast"]);
    assert.ok(manager.made.find((v) => v.el.getAttribute("data-model") === "slow").removed);
  });

  it("remove() takes the view away and stops following the trait", async () => {
    const model = fakeModel({ gallery: "IPY_MODEL_g1" });
    model.widget_manager = fakeManager();
    const host = new FakeNode("div");
    const child = childView(model, "gallery", host);
    await child.refresh();
    child.remove();
    assert.ok(model.widget_manager.made[0].removed);
    assert.equal((model.handlers["change:gallery"] ?? []).length, 0);
    model.change("gallery", "IPY_MODEL_g2");
    await settle();
    assert.equal(model.widget_manager.made.length, 1, "no view is made after remove()");
  });
});
