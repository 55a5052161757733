import assert from "node:assert/strict";
import { describe, it } from "node:test";
import scrubber from "../scrubber.js";
import { fakeModel, find, withDocument } from "./fake_dom.mjs";

/** The positions trait: flattened runs [first, count, stride], as the kernel sends them. */
const positions = (/** @type {number[]} */ runs, every = 1, total = 0) => ({
  runs: { data: new Int32Array(runs), dtype: "<i4", shape: [runs.length] },
  every,
  total,
});

const noScalars = { names: [], steps: { data: new Int32Array(0), dtype: "<i4", shape: [0] } };

describe("the step label", () => {
  withDocument();

  /** Render a scrubber over `pos` at `step`; returns the label's text and the cleanup. */
  const labelAt = (/** @type {any} */ pos, /** @type {number} */ step) => {
    const model = fakeModel({ positions: pos, step, scalars_at: noScalars, playing: false, fps: 4, stride: 1, empty: "", error: "" });
    const root = /** @type {any} */ (document.createElement("div"));
    const cleanup = scrubber.render({ model: /** @type {any} */ (model), el: root });
    const text = find(root, "nbviz-scrub-step")[0].textContent;
    cleanup();
    return text;
  };

  it("a step between positions sent in full is not recorded: shown as after the one before", () => {
    // every 10th step, 0..90: all of them sent
    assert.equal(labelAt(positions([0, 10, 10], 1, 10), 45), "step 45 (after 40) \u00b7 5 of 10");
    assert.equal(labelAt(positions([0, 10, 10], 1, 10), 40), "step 40 \u00b7 5 of 10");
  });

  it("a step a linked view set between thinned positions is shown at one, not said to be unrecorded", () => {
    // 1 step in 3 of 30 recorded steps sent: step 4 may be recorded, the slider shows 3
    const text = labelAt(positions([0, 10, 3], 3, 30), 4);
    assert.equal(text, "step 4 (shown at 3) \u00b7 2 of 10 (1 in 3 of 30 steps)");
    assert.ok(!text.includes("after"), text);
    assert.equal(labelAt(positions([0, 10, 3], 3, 30), 27), "step 27 \u00b7 10 of 10 (1 in 3 of 30 steps)");
  });

  it("a step before every position is shown at the first, never as after it", () => {
    assert.equal(labelAt(positions([5, 3, 1], 1, 3), 2), "step 2 (shown at 5) \u00b7 1 of 3");
  });
});

describe("moving with the keys", () => {
  withDocument();
  // the fake DOM's elements are no <input>: the key handler's instanceof check needs the name
  globalThis.HTMLInputElement ??= /** @type {any} */ (class {});

  it("the kernel's echo of an earlier move neither undoes the latest nor becomes the next one's base", async () => {
    const model = fakeModel({ positions: positions([0, 1000, 1], 1, 1000), step: 999, scalars_at: noScalars, playing: false, fps: 4, stride: 1, empty: "", error: "" });
    const root = /** @type {any} */ (document.createElement("div"));
    const cleanup = scrubber.render({ model: /** @type {any} */ (model), el: root });
    root.fire("keydown", { key: "Home" }); // sent at once: step 0
    root.fire("keydown", { key: "ArrowRight" }); // held back by the throttle: step 1
    model.change("step", 0); // the kernel echoes the first send
    root.fire("keydown", { key: "PageUp" });
    assert.equal(find(root, "nbviz-scrub-step")[0].textContent, "step 11 \u00b7 12 of 1,000");
    await new Promise((resolve) => setTimeout(resolve, 120));
    assert.equal(model.saved.at(-1).step, 11);
    cleanup();
  });
});
