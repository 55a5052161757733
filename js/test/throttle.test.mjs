import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it, mock } from "node:test";
import { throttle } from "../lib/dom.js";

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
