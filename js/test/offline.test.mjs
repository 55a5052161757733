import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Runtime, UNANSWERED, reviveValue, sameValue, snapDown } from "../lib/offline.js";

// A page with a scrubber linked to a view; the view's answers to a change of step
// (and of a selected layer) are recorded for steps 0 and 10 only.
const page = () => ({
  version: 1,
  root: "s",
  buffers: [Buffer.from(new Float64Array([1.5, 2.5]).buffer).toString("base64")],
  values: [0, 10, "", "a", "at 0", "at 10", "a at 10", { data: { $buffer: 0 }, dtype: "<f8", shape: [2] }, "b"],
  models: [
    { id: "s", name: "AnyModel", esm: null, css: null, state: { step: 1 } },
    { id: "v", name: "AnyModel", esm: null, css: null, state: { step: 1, layer: 2, text: 5, arr: 7 } },
  ],
  links: [{ source: ["s", "step"], target: ["v", "step"], both: true }],
  groups: [
    {
      owner: "v",
      label: "View",
      inputs: ["layer", "step"],
      loose: [],
      steps: [0, 10],
      outputs: [["v", "text"]],
      entries: [
        { key: ['""', "0"], out: [4] },
        { key: ['""', "10"], out: [5] },
        { key: ['"a"', "10"], out: [6] },
      ],
    },
  ],
});

describe("offline runtime", () => {
  it("revives buffers as DataViews and compares values deeply", () => {
    const rt = new Runtime(page());
    const arr = rt.model("v").get("arr");
    assert.ok(arr.data instanceof DataView);
    assert.equal(arr.data.getFloat64(8, true), 2.5);
    assert.ok(sameValue({ a: [1, 2] }, { a: [1, 2] }));
    assert.ok(!sameValue({ a: [1, 2] }, { a: [1, 3] }));
    assert.deepEqual(reviveValue([{ $buffer: 0 }], () => "buf"), ["buf"]);
  });

  it("snaps a step down to the latest recorded one, else the first", () => {
    assert.equal(snapDown([0, 10, 20], 15), 1);
    assert.equal(snapDown([0, 10, 20], 20), 2);
    assert.equal(snapDown([5, 10], 1), 0);
  });

  it("moves a linked view with the scrubber and plays back its recorded answer", async () => {
    const rt = new Runtime(page());
    const s = rt.model("s");
    const v = rt.model("v");
    const seen = [];
    v.on("change:text", () => seen.push(v.get("text")));
    s.set("step", 0);
    assert.equal(v.get("step"), 0, "the link copies the step at once");
    s.save_changes();
    await Promise.resolve();
    assert.equal(v.get("text"), "at 0");
    s.set("step", 14); // not recorded: the answer of step 10
    await Promise.resolve();
    assert.equal(v.get("step"), 14);
    assert.equal(v.get("text"), "at 10");
    assert.deepEqual(seen, ["at 0", "at 10"]);
  });

  it("keys answers on every input and says when a change was not recorded", async () => {
    const notices = [];
    const rt = new Runtime(page(), { notice: (t) => notices.push(t) });
    const v = rt.model("v");
    v.set("step", 10);
    v.set("layer", "a");
    v.save_changes();
    await Promise.resolve();
    assert.equal(v.get("text"), "a at 10");
    v.set("step", 3); // ("a", 0) was not recorded
    v.save_changes();
    await Promise.resolve();
    assert.equal(v.get("text"), "a at 10", "the view keeps what it showed");
    assert.equal(notices.length, 1);
    assert.match(notices[0], /View: step = 3 was not recorded/);
  });

  it("matches a loose input when the exact one was not recorded, and rewrites it", async () => {
    const data = page();
    data.groups[0].loose = ["layer"];
    const rt = new Runtime(data);
    const v = rt.model("v");
    v.update("layer", "b"); // e.g. the layer of another signal; the step changes next
    v.set("step", 0);
    v.save_changes();
    await Promise.resolve();
    assert.equal(v.get("text"), "at 0");
    assert.equal(v.get("layer"), "", "what Python would have chosen instead");
  });

  it("answers no custom message and says a live kernel is needed", () => {
    const notices = [];
    const rt = new Runtime(page(), { notice: (t) => notices.push(t) });
    rt.model("v").send({ type: "window", lo: 0, hi: 5 });
    assert.match(notices[0], /\(window\).*live kernel/);
  });

  it("applies an answer's traits together: a view reacting to one reads the others' new values", async () => {
    const data = page();
    data.values.push("label 0", "label 10");
    data.models[1].state.label = 10;
    data.groups[0].outputs = [["v", "text"], ["v", "label"]];
    data.groups[0].entries = [
      { key: ['""', "0"], out: [4, 9] },
      { key: ['""', "10"], out: [5, 10] },
    ];
    const rt = new Runtime(data);
    const v = rt.model("v");
    const seen = [];
    // like a view that redraws on one trait and reads another (the projector's step label)
    v.on("change:text", () => seen.push([v.get("text"), v.get("label")]));
    rt.model("s").set("step", 0);
    rt.model("s").save_changes();
    await Promise.resolve();
    assert.deepEqual(seen, [["at 0", "label 0"]]);
  });

  it("tells the model when a change needs a live kernel, so the view can say so in place", async () => {
    const data = page();
    data.models[1].live_only = ["picked"];
    const rt = new Runtime(data);
    const v = rt.model("v");
    const told = [];
    v.on(UNANSWERED, (names) => told.push(names));
    v.set("picked", [1, 2]);
    v.save_changes();
    await Promise.resolve();
    assert.deepEqual(told, [["picked"]]);
  });

  it("refuses data of another version", () => {
    assert.throws(() => new Runtime({ ...page(), version: 2 }), /unsupported data version 2/);
  });
});
