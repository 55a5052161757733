import assert from "node:assert/strict";
import { describe, it, test } from "node:test";
import profiler, { formatBytes, formatMs, icicleLayout, isUnder, pathTo, stepNote } from "../profiler.js";
import { FakeNode, fakeModel, find, rowsOf, withDocument } from "./fake_dom.mjs";

/** @param {string} name @param {string} parent @param {number} total @param {number} [fwd] */
const mod = (name, parent, total, fwd = total / 2) =>
  /** @type {any} */ ({ name, parent, type: "T", total_ms: total, forward_ms: fwd, backward_ms: total - fwd });

const modules = [mod("", "", 10), mod("a", "", 6, 1), mod("a.x", "a", 4, 1), mod("b", "", 2, 2), mod("c", "", 0)];

test("icicleLayout splits a parent's span by its children's time, left to right", () => {
  const placed = icicleLayout(modules, "", "total");
  const at = Object.fromEntries(placed.map((p) => [p.module.name, p]));
  assert.deepEqual(Object.keys(at), ["", "a", "a.x", "b"]); // c took no time
  assert.deepEqual([at[""].x, at[""].w, at[""].depth], [0, 1, 0]);
  assert.deepEqual([at.a.x, at.a.w, at.a.depth], [0, 0.6, 1]);
  assert.ok(Math.abs(at["a.x"].w - 0.4) < 1e-12 && at["a.x"].depth === 2);
  assert.ok(Math.abs(at.b.x - 0.6) < 1e-12 && Math.abs(at.b.w - 0.2) < 1e-12);
});

test("icicleLayout zooms: the zoomed module spans the width", () => {
  const placed = icicleLayout(modules, "a", "total");
  assert.deepEqual(placed.map((p) => [p.module.name, p.x, p.depth]), [["a", 0, 0], ["a.x", 0, 1]]);
  assert.equal(placed[0].w, 1);
  assert.deepEqual(icicleLayout(modules, "missing", "total"), []);
});

test("icicleLayout widths follow the phase, scaled down when children exceed the parent", () => {
  const fwd = icicleLayout(modules, "", "forward");
  const b = fwd.find((p) => p.module.name === "b");
  assert.ok(b && Math.abs(b.w - 2 / 5) < 1e-12);
  const over = [mod("", "", 1), mod("k", "", 3), mod("l", "", 1)];
  const widths = icicleLayout(over, "", "total").slice(1).map((p) => p.w);
  assert.deepEqual(widths, [0.75, 0.25]);
});

test("pathTo and isUnder walk the module tree", () => {
  assert.deepEqual(pathTo(modules, "a.x").map((m) => m.name), ["", "a", "a.x"]);
  const byName = new Map(modules.map((m) => [m.name, m]));
  assert.ok(isUnder(byName, "a.x", "a") && isUnder(byName, "b", ""));
  assert.ok(!isUnder(byName, "b", "a"));
});

test("formatMs and formatBytes", () => {
  assert.equal(formatMs(12.345), "12.3 ms");
  assert.equal(formatMs(0.45), "450 µs");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(-2 * 1024 * 1024), "-2 MiB");
  assert.equal(formatBytes(0), "");
});

describe("render", () => {
  withDocument();

  /** @param {string} name @param {string} parent @param {number} self */
  const module = (name, parent, self) => ({ ...mod(name, parent, 2 * self), type: name ? "Linear" : "Sequential", depth: name ? 1 : 0, calls: 1, self_ms: self, pct: 10, memory_bytes: 0, input_shapes: [] });
  const traits = (sortBy, descending) => ({
    profile: {
      model: "Sequential",
      step: 12,
      step_ms: 5,
      device: "cpu",
      schedule: { active: 3 },
      breakdown: { forward: 2, backward: 2, optimizer: 1 },
      modules: [module("", "", 1), module("b", "", 3), module("a", "", 2)],
      operators: [],
    },
    zoom: "",
    phase: "total",
    sort_by: sortBy,
    descending,
    overhead: "",
    notice: "",
    empty: "",
    error: "",
  });
  const moduleRows = (root) => rowsOf(find(root, "nbviz-prof-modules")[0]).slice(1).map((tr) => tr.getAttribute("data-name"));

  it("sorts the module table by a number, and by the name shown: the model itself first", () => {
    const root = new FakeNode("div");
    profiler.render({ model: fakeModel(traits("self_ms", true)), el: root });
    assert.deepEqual(moduleRows(root), ["b", "a", ""]);
    const byName = new FakeNode("div");
    profiler.render({ model: fakeModel(traits("name", false)), el: byName });
    assert.deepEqual(moduleRows(byName), ["", "a", "b"]);
  });

  it("says why there is nothing to show", () => {
    const root = new FakeNode("div");
    profiler.render({ model: fakeModel({ ...traits("name", false), profile: {} }), el: root });
    assert.equal(root.textContent, "Nothing profiled yet.");
  });
});

test("the header's step time says it is the mean of the profiled steps, and their range", () => {
  const profile = { schedule: { active: 3 }, device: "cpu", step_ms_each: [56, 52.5, 110] };
  assert.equal(stepNote(profile), "mean of 3 profiled steps (52.5 ms\u2013110 ms) on cpu");
  assert.equal(stepNote({ schedule: { active: 1 }, device: "cuda:0" }), "mean of 1 profiled step on cuda:0");
});
