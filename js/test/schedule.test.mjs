import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it, mock } from "node:test";
import { batched, perFrame, throttle } from "../lib/schedule.js";

describe("throttle", () => {
  beforeEach(() => mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  it("runs the first call at once and one trailing call with the latest arguments", () => {
    const calls = [];
    const t = throttle((x) => calls.push(x), 100);
    t(1);
    t(2);
    t(3);
    assert.deepEqual(calls, [1]);
    assert.ok(t.pending());
    mock.timers.tick(99);
    assert.deepEqual(calls, [1]);
    mock.timers.tick(1);
    assert.deepEqual(calls, [1, 3]);
    assert.ok(!t.pending());
  });

  it("calls at most once per window under a steady stream", () => {
    const calls = [];
    const t = throttle(() => calls.push(Date.now()), 100);
    for (let i = 0; i < 50; i++) {
      t();
      mock.timers.tick(10);
    }
    mock.timers.tick(200);
    assert.ok(calls.length >= 5 && calls.length <= 7, `got ${calls.length} calls`);
    for (let i = 1; i < calls.length; i++) assert.ok(calls[i] - calls[i - 1] >= 100);
  });

  it("keeps instances independent: two widgets never drop each other's updates", () => {
    const a = [];
    const b = [];
    const ta = throttle((x) => a.push(x), 100);
    const tb = throttle((x) => b.push(x), 100);
    ta("a1");
    tb("b1");
    ta("a2");
    tb("b2");
    mock.timers.tick(100);
    assert.deepEqual(a, ["a1", "a2"]);
    assert.deepEqual(b, ["b1", "b2"]);
  });

  it("cancel drops the pending call and flush runs it now", () => {
    const calls = [];
    const t = throttle((x) => calls.push(x), 100);
    t(1);
    t(2);
    t.cancel();
    mock.timers.tick(500);
    assert.deepEqual(calls, [1]);
    t(3);
    t(4);
    t.flush();
    assert.deepEqual(calls, [1, 3, 4]);
  });
});

describe("batched", () => {
  it("calls once after the task for every call made in it", async () => {
    let calls = 0;
    const draw = batched(() => calls++);
    draw();
    draw();
    draw();
    assert.equal(calls, 0, "not during the task");
    assert.ok(draw.pending());
    await Promise.resolve();
    assert.equal(calls, 1);
    draw();
    await Promise.resolve();
    assert.equal(calls, 2, "a later task draws again");
  });

  it("cancel() drops a call still waiting", async () => {
    let calls = 0;
    const draw = batched(() => calls++);
    draw();
    draw.cancel();
    assert.ok(!draw.pending());
    await Promise.resolve();
    assert.equal(calls, 0);
  });
});

describe("perFrame", () => {
  /** @type {Map<number, () => void>} */
  const frames = new Map();
  let next = 1;
  beforeEach(() => {
    frames.clear();
    globalThis.requestAnimationFrame = (fn) => {
      frames.set(next, fn);
      return next++;
    };
    globalThis.cancelAnimationFrame = (id) => frames.delete(id);
  });
  afterEach(() => {
    delete globalThis.requestAnimationFrame;
    delete globalThis.cancelAnimationFrame;
  });
  const paint = () => {
    const due = [...frames.values()];
    frames.clear();
    for (const fn of due) fn();
  };

  it("asks for one frame however often it is called, and draws in it", () => {
    let calls = 0;
    const draw = perFrame(() => calls++);
    draw();
    draw();
    assert.equal(frames.size, 1);
    paint();
    assert.equal(calls, 1);
    assert.ok(!draw.pending());
    draw();
    paint();
    assert.equal(calls, 2);
  });

  it("cancel() gives the frame back", () => {
    let calls = 0;
    const draw = perFrame(() => calls++);
    draw();
    draw.cancel();
    assert.equal(frames.size, 0);
    paint();
    assert.equal(calls, 0);
  });
});
