import assert from "node:assert/strict";
import { test } from "node:test";
import { serialDraws } from "../lib/projector/draws.js";
import { settle } from "./fake_dom.mjs";

/** A plot whose draw, like regl-scatterplot's, rejects while another draw runs. */
function fakePlot() {
  const finish = [];
  const drawn = [];
  let drawing = false;
  return {
    drawn,
    finish,
    draw(what) {
      if (drawing) return Promise.reject(new Error("Ignoring draw call as the previous draw call has not yet finished"));
      drawing = true;
      return new Promise((resolve) => {
        finish.push(() => {
          drawing = false;
          drawn.push(what);
          resolve();
        });
      });
    },
  };
}

test("a draw requested while one runs waits for it, and only the newest waiting draw runs", async () => {
  const plot = fakePlot();
  const errors = [];
  const draws = serialDraws((err) => errors.push(err));
  draws.request(() => plot.draw("first"));
  draws.request(() => plot.draw("second"));
  draws.request(() => plot.draw("third"));
  assert.equal(plot.finish.length, 1, "one draw at a time");
  plot.finish.shift()();
  await settle();
  assert.equal(plot.finish.length, 1);
  plot.finish.shift()();
  await settle();
  assert.deepEqual(plot.drawn, ["first", "third"]);
  assert.deepEqual(errors, []);
  assert.equal(draws.busy(), false);
});

test("a failed draw is reported once and the next one still runs; none after close", async () => {
  const errors = [];
  const draws = serialDraws((err) => errors.push(String(err)));
  draws.request(() => Promise.reject(new Error("context lost")));
  await settle();
  assert.deepEqual(errors, ["Error: context lost"]);
  let ran = false;
  draws.request(() => {
    ran = true;
    return Promise.resolve();
  });
  await settle();
  assert.equal(ran, true);
  draws.close();
  draws.request(() => Promise.reject(new Error("destroyed")));
  await settle();
  assert.equal(errors.length, 1);
});
