import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { svgCanvas } from "../lib/export.js";
import { breakLabels, drawPanel, yRange } from "../lib/loss_curves/panel.js";
import { breakText, isStepShaped, nearestStep, readoutText, smoothedIds, stepRange, styleText } from "../lib/loss_curves/series.js";
import { HINT, clampDomain, dragWindow, panZoom, zoomAt } from "../lib/loss_curves/zoom.js";
import { FakeNode } from "./fake_dom.mjs";

/** A series as decodeSeries makes it. */
const series = (name, steps, values, extra = {}) => ({
  id: name,
  run: "r",
  runIndex: 0,
  name,
  stem: "loss",
  split: name.startsWith("val") ? "val" : "train",
  steps: Float64Array.from(steps),
  values: Float64Array.from(values),
  stride: 1,
  total: steps.length,
  breaks: new Float64Array(0),
  nBreaks: 0,
  ...extra,
});
const raw = (s) => s;

describe("series", () => {
  const train = series("train_loss", [0, 10, 20, 30], [2, 1.5, 1.2, 1]);
  const val = series("val_loss", [10, 30], [1.8, 1.4]);

  it("readoutText gives each series' value at the step, and its own step when earlier", () => {
    assert.equal(readoutText([train, val], 20, { nearest: false, runs: 1, dataOf: raw }), "step 20: train_loss 1.2 \u00b7 val_loss 1.8 (step 10)");
    assert.equal(readoutText([val], 5, { nearest: false, runs: 1, dataOf: raw }), "step 5: val_loss from step 10");
    assert.equal(readoutText([], 5, { nearest: false, runs: 1, dataOf: raw }), "step 5: no values yet");
  });

  it("readoutText under the pointer moves to the nearest recorded step; runs are named with several", () => {
    assert.equal(readoutText([train], 13, { nearest: true, runs: 2, dataOf: raw }), "step 10: r train_loss 1.5");
  });

  it("nearestStep looks across the series, NaN when none has a point", () => {
    assert.equal(nearestStep([train, val], 27, raw), 30);
    assert.ok(Number.isNaN(nearestStep([], 27, raw)));
  });

  it("breakText names the first break and counts the stretches", () => {
    const broken = series("train_loss", [0, 1], [1, Number.NaN], { breaks: Float64Array.from([35, 40, 0, 50, 50, 1]), nBreaks: 2 });
    assert.equal(breakText(broken, false), "train_loss is NaN from step 35 (2 stretches of NaN/Inf)");
    assert.equal(breakText(broken, true), "r: train_loss is NaN from step 35 (2 stretches of NaN/Inf)");
    assert.equal(breakText(train, true), "");
  });

  it("stepRange spans every series, and never collapses to a point", () => {
    assert.deepEqual(stepRange([train, val]), [0, 30]);
    assert.deepEqual(stepRange([series("x", [7], [1])]), [7, 8]);
    assert.deepEqual(stepRange([]), [0, 1]);
  });

  it("styleText names a split's line style", () => {
    assert.equal(styleText("train"), "solid: train");
    assert.equal(styleText("val"), "dashed: val");
    assert.equal(styleText("test"), "dotted: test");
  });
});

describe("panel", () => {
  const base = { dataOf: raw, width: 400, smoothing: 0, step: 0, hover: null, highlight: "", colorOf: () => "#000", theme: {} };
  it("yRange pads the values in view by 5%", () => {
    const r = yRange({ ...base, list: [series("loss", [0, 10], [1, 3])], domain: [0, 10], log: false });
    assert.deepEqual([r.lo, r.hi, r.any], [0.9, 3.1, true]);
  });

  it("yRange ignores NaN/Inf and, on a log axis, values <= 0; with nothing left it says so", () => {
    const r = yRange({ ...base, list: [series("loss", [0, 1, 2], [Number.NaN, 0, -1])], domain: [0, 2], log: true });
    assert.equal(r.any, false);
    assert.ok(r.lo > 0 && r.hi > r.lo);
    const flat = yRange({ ...base, list: [series("loss", [0, 1], [2, 2])], domain: [0, 1], log: false });
    assert.ok(flat.lo < 2 && flat.hi > 2, "a flat line gets room around it");
  });
});

describe("zoom", () => {
  it("clampDomain shifts a span back inside the run, null when it covers it all", () => {
    assert.deepEqual(clampDomain(-5, 15, [0, 100]), [0, 20]);
    assert.deepEqual(clampDomain(90, 110, [0, 100]), [80, 100]);
    assert.equal(clampDomain(-10, 120, [0, 100]), null);
  });

  it("zoomAt keeps the step under the pointer in place", () => {
    const [a, b] = /** @type {[number, number]} */ (zoomAt([0, 100], [0, 100], 25, -200));
    assert.ok(b - a < 100, "a wheel turn up zooms in");
    assert.ok(Math.abs((25 - a) / (b - a) - 0.25) < 1e-9);
    assert.deepEqual(zoomAt([40, 60], [0, 100], 50, 5000)?.map(Math.round), [23, 77], "one turn grows the span e times at most");
    assert.equal(zoomAt([10, 90], [0, 100], 50, 5000), null, "zooming out past the run shows it all");
    const tight = zoomAt([50, 52], [0, 100], 51, -5000);
    assert.ok(tight && tight[1] - tight[0] >= 4, "never under 4 steps");
  });
});

describe("drag to zoom", () => {
  /** A panel 0..100 steps over 0..500 px, with what the handlers were told. */
  const panel = (zoomedTo = null) => {
    const canvas = new FakeNode("canvas");
    const told = { domains: [], brushes: [], picks: [] };
    let domain = zoomedTo;
    const sx = { map: (v) => v * 5, invert: (px) => px / 5 };
    panZoom(canvas, () => [0, 100], {
      scale: () => sx,
      current: () => domain ?? [0, 100],
      zoomed: () => domain !== null,
      setDomain: (d) => {
        domain = d;
        told.domains.push(d);
      },
      hover: () => {},
      leave: () => {},
      pick: (at) => told.picks.push(at),
      brush: (r) => told.brushes.push(r),
    });
    return { canvas, told };
  };

  it("a drag selects the steps dragged over, shown while dragging, and zooms into them", () => {
    const { canvas, told } = panel();
    canvas.fire("pointerdown", { clientX: 100, pointerId: 1 });
    canvas.fire("pointermove", { clientX: 200, pointerId: 1 });
    canvas.fire("pointermove", { clientX: 300, pointerId: 1 });
    assert.deepEqual(told.brushes.at(-1), [20, 60]);
    canvas.fire("pointerup", { clientX: 300, pointerId: 1 });
    assert.deepEqual(told.domains, [[20, 60]]);
    assert.equal(told.brushes.at(-1), null, "the selection band goes away");
    assert.deepEqual(told.picks, [], "a drag is not a click");
  });

  it("a drag from right to left zooms the same way; a click picks a step", () => {
    const { canvas, told } = panel();
    canvas.fire("pointerdown", { clientX: 300 });
    canvas.fire("pointermove", { clientX: 100 });
    canvas.fire("pointerup", { clientX: 100 });
    assert.deepEqual(told.domains, [[20, 60]]);
    canvas.fire("pointerdown", { clientX: 250 });
    canvas.fire("pointerup", { clientX: 251 });
    assert.deepEqual(told.picks, [50.2]);
  });

  it("a release far from the press, with no move reported between, is a drag: it zooms, it picks no step", () => {
    const { canvas, told } = panel();
    canvas.fire("pointerdown", { clientX: 100, clientY: 50, pointerId: 1, button: 0 });
    canvas.fire("pointerup", { clientX: 300, clientY: 50, pointerId: 1, button: 0 });
    assert.deepEqual(told.domains, [[20, 60]]);
    assert.deepEqual(told.picks, []);
  });

  it("a drag straight down, or one that comes back to where it began, neither picks a step nor zooms", () => {
    const { canvas, told } = panel();
    canvas.fire("pointerdown", { clientX: 200, clientY: 20 });
    canvas.fire("pointermove", { clientX: 201, clientY: 120 });
    canvas.fire("pointerup", { clientX: 201, clientY: 160 });
    canvas.fire("pointerdown", { clientX: 200, clientY: 50 });
    canvas.fire("pointermove", { clientX: 260, clientY: 50 });
    canvas.fire("pointerup", { clientX: 201, clientY: 50 });
    assert.deepEqual(told.picks, []);
    assert.deepEqual(told.domains, []);
    assert.equal(told.brushes.at(-1), null, "no selection band is left behind");
  });

  it("a press of another button than the main one neither picks nor zooms", () => {
    const { canvas, told } = panel();
    canvas.fire("pointerdown", { clientX: 200, button: 2 });
    canvas.fire("pointerup", { clientX: 200, button: 2 });
    canvas.fire("pointerdown", { clientX: 100, button: 1 });
    canvas.fire("pointermove", { clientX: 300, button: 1 });
    canvas.fire("pointerup", { clientX: 300, button: 1 });
    assert.deepEqual([told.picks, told.domains], [[], []]);
  });

  it("a click picks a step even with a pixel or two of jitter", () => {
    const { canvas, told } = panel();
    canvas.fire("pointerdown", { clientX: 250, clientY: 40 });
    canvas.fire("pointermove", { clientX: 252, clientY: 41 });
    canvas.fire("pointerup", { clientX: 252, clientY: 42 });
    assert.deepEqual(told.picks, [50.4]);
    assert.deepEqual(told.domains, []);
  });

  it("a shift-drag pans a zoomed view and selects nothing", () => {
    const { canvas, told } = panel([20, 60]);
    canvas.fire("pointerdown", { clientX: 300, shiftKey: true });
    canvas.fire("pointermove", { clientX: 250, shiftKey: true });
    canvas.fire("pointerup", { clientX: 250, shiftKey: true });
    assert.deepEqual(told.domains.at(-1), [30, 70]);
    assert.deepEqual(told.brushes, []);
  });

  it("dragWindow keeps at least 4 steps inside the run; the whole run is no zoom", () => {
    assert.deepEqual(dragWindow(50, 51, [0, 100]), [48.5, 52.5]);
    assert.deepEqual(dragWindow(-20, 10, [0, 100]), [0, 10]);
    assert.equal(dragWindow(-5, 120, [0, 100]), null);
  });

  it("the hint says how to zoom and how to pan", () => {
    assert.match(HINT, /drag to zoom/);
    assert.match(HINT, /shift-drag to pan/);
  });
});

describe("smoothing", () => {
  const noisy = (name, every, n) =>
    series(name, Array.from({ length: n }, (_, i) => i * every), Array.from({ length: n }, (_, i) => 2 / (1 + i) + 0.1 * Math.sin(i * 7)));
  const steps = (name, n, per) => series(name, Array.from({ length: n }, (_, i) => i), Array.from({ length: n }, (_, i) => Math.floor(i / per)));

  it("step-shaped series (an epoch counter, a stepped lr) are told from noisy ones", () => {
    assert.equal(isStepShaped(steps("epoch", 100, 20).values), true);
    assert.equal(isStepShaped(Float64Array.from([0.1, 0.1, 0.1, 0.01, 0.01, 0.01])), true);
    assert.equal(isStepShaped(noisy("train_loss", 1, 100).values), false);
  });

  it("only dense series that are not step-shaped are smoothed", () => {
    const train = noisy("train_loss", 1, 400);
    const epoch = steps("epoch", 400, 40);
    const val = noisy("val_loss", 40, 10); // once per epoch: 40 times sparser
    const few = noisy("grad_norm", 1, 6);
    assert.deepEqual([...smoothedIds([train, epoch, val, few])], ["train_loss"]);
  });

  it("a summarised series counts its recorded points, not its buckets", () => {
    const train = noisy("train_loss", 1, 400);
    const long = noisy("big_loss", 100, 400);
    long.total = 40_000; // 40,000 steps sent as 400 buckets: as dense as train_loss
    assert.deepEqual([...smoothedIds([train, long])].sort(), ["big_loss", "train_loss"]);
  });
});

describe("break labels", () => {
  const measure = (/** @type {string} */ t) => t.length * 6;
  const overlaps = (labels) => labels.some((l, i) => i > 0 && l.left < labels[i - 1].right);

  it("far apart marks each get their own name, over the mark", () => {
    const got = breakLabels([{ x: 300, name: "NaN" }, { x: 100, name: "+Inf" }], measure, 480);
    assert.deepEqual(got.map((l) => [l.text, l.left]), [["+Inf", 96], ["NaN", 296]]);
  });

  it("close marks share one label that counts them; no two labels overlap", () => {
    // the diverging run: train +Inf at 8, val +Inf at 8, val -Inf at 10, both NaN from 12 (20 px a step)
    const marks = [
      { x: 160, name: "+Inf" }, { x: 160, name: "+Inf" }, { x: 200, name: "-Inf" },
      { x: 220, name: "+Inf" }, { x: 240, name: "NaN" }, { x: 240, name: "NaN" },
    ];
    const got = breakLabels(marks, measure, 480);
    assert.ok(!overlaps(got), JSON.stringify(got));
    assert.deepEqual(got.map((l) => l.text), ["+Inf \u00d73, -Inf, NaN \u00d72"]);
    assert.equal(got[0].marks.length, 6, "every mark is in a label");
  });

  it("a mark at the left edge of the plot has its label start inside the plot", () => {
    assert.equal(breakLabels([{ x: 58, name: "NaN" }], measure, 480, 59)[0].left, 59);
  });

  it("a label near the right edge ends at the edge, merging with one it would then reach", () => {
    const got = breakLabels([{ x: 440, name: "NaN" }, { x: 470, name: "+Inf" }], measure, 480);
    assert.ok(got.every((l) => l.right <= 480));
    assert.ok(!overlaps(got));
    assert.deepEqual(got.map((l) => l.text), ["NaN, +Inf"]);
  });

  it("a drawn panel labels the marks of every series once, without overlaps", () => {
    const b = (...t) => Float64Array.from(t);
    const train = series("train_loss", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [1, 1, 1, 1, 1, 1, 1, 1, Infinity, Infinity, Infinity, Infinity, Number.NaN, Number.NaN], { breaks: b(8, 11, 1, 12, 13, 0), nBreaks: 2 });
    const val = series("val_loss", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [1, 1, 1, 1, 1, 1, 1, 1, Infinity, Infinity, -Infinity, Infinity, Number.NaN, Number.NaN], { breaks: b(8, 9, 1, 10, 10, -1, 11, 11, 1, 12, 13, 0), nBreaks: 4 });
    const fake = svgCanvas(400, 210);
    const sx = drawPanel(/** @type {any} */ (fake), {
      list: [train, val], dataOf: raw, width: 400, domain: [0, 19], log: false, smoothing: 0, smoothed: new Set(), brush: null,
      step: 0, hover: null, highlight: "", colorOf: () => "#000", theme: { muted: "#666", grid: "#eee", marker: "#000" },
    });
    assert.ok(!overlaps(sx.labels), JSON.stringify(sx.labels));
    assert.equal(sx.labels.reduce((k, l) => k + l.marks.length, 0), 6);
    const texts = [...fake.body().matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
    for (const l of sx.labels) assert.ok(texts.includes(l.text), `${l.text} drawn`);
  });

  it("a stretch that began before the steps in view gets no label cut at the left edge", () => {
    const s = series("train_loss", [0, 10, 20], [1, Infinity, Infinity], { breaks: Float64Array.from([10, 20, 1]), nBreaks: 1 });
    const fake = svgCanvas(400, 210);
    const sx = drawPanel(/** @type {any} */ (fake), {
      list: [s], dataOf: raw, width: 400, domain: [12, 20], log: false, smoothing: 0, smoothed: new Set(), brush: null,
      step: 0, hover: null, highlight: "", colorOf: () => "#000", theme: { muted: "#666", grid: "#eee", marker: "#000" },
    });
    assert.deepEqual(sx.labels, []);
  });
});
