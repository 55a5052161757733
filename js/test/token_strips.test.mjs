import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { highlight, intensity, tokenStrips } from "../lib/layer_browser/token_strips.js";
import { withDocument } from "./fake_dom.mjs";

const HOSTILE = "<img src=x onerror=alert(1)>";

describe("token strips", () => {
  withDocument();

  it("intensity grows with |activation| up to the largest listed", () => {
    assert.equal(intensity(2, 2), 1);
    assert.equal(intensity(-2, 2), 1);
    assert.ok(intensity(1, 2) < intensity(1.5, 2));
    assert.equal(intensity(0, 2), 0.2);
    assert.equal(intensity(Number.NaN, 2), 0.2);
    assert.equal(intensity(1, 0), 0.2);
    assert.match(highlight(1, 2), /^rgba\(230, 159, 0, 0\.6/);
    assert.match(highlight(-1, 2), /^rgba\(0, 114, 178, /);
  });

  it("lists the unit's tokens as text, the activating one highlighted, and opens a sample", () => {
    const opened = [];
    const us = {
      unit: 3,
      tokens: [
        { id: 7, position: 4, value: 2.5, token: HOSTILE, context: ["a", "b", HOSTILE, "c"], focus: 2 },
        { id: 2, position: 0, value: 1.25, token: "x", context: ["x", "y"], focus: 0 },
      ],
    };
    const box = tokenStrips(us, 2, (id) => opened.push(id));
    const strips = box.querySelectorAll(".nbviz-lb-strip");
    assert.equal(strips.length, 2);
    const hit = strips[0].querySelectorAll(".nbviz-lb-ctx-hit")[0];
    assert.equal(hit.textContent, HOSTILE);
    assert.equal(strips[0].querySelectorAll("img").length, 0);
    assert.match(hit.style.background, /rgba\(230, 159, 0, 1\)/);
    assert.equal(strips[0].querySelectorAll(".nbviz-lb-strip-value")[0].textContent, "2.5");
    const texts = strips[0].querySelectorAll(".nbviz-lb-ctx").map((n) => n.textContent);
    assert.deepEqual(texts, ["a", "b", HOSTILE, "c"], "the context in order, the token in its column");
    assert.equal(strips[0].querySelectorAll(".nbviz-lb-strip-before")[0].children.length, 2);
    assert.equal(strips[0].getAttribute("data-rank"), "0");
    assert.ok(strips[1].classList.contains("nbviz-active"), "the opened sample's strip is marked");
    strips[0].fire("click");
    strips[1].fire("click");
    assert.deepEqual(opened, [7, -1]);
  });

  it("shows a non-finite activation by its name and counts the unit's non-finite positions", () => {
    const us = {
      unit: 0,
      nonfinite: 2,
      tokens: [
        { id: 1, position: 2, value: null, nonfinite: "+Inf", token: "x", context: ["x"], focus: 0 },
        { id: 2, position: 1, value: 5, token: "y", context: ["y"], focus: 0 },
      ],
    };
    const box = tokenStrips(us, -1, () => {});
    const strips = box.querySelectorAll(".nbviz-lb-strip");
    const values = strips.map((s) => s.querySelectorAll(".nbviz-lb-strip-value")[0].textContent);
    assert.deepEqual(values, ["+Inf", "5"], "never a number for +inf, never 0 for a null");
    assert.equal(strips[0].getAttribute("data-value"), "+Inf");
    assert.match(strips[0].querySelectorAll(".nbviz-lb-ctx-hit")[0].style.background, /rgba\(230, 159, 0, 1\)/);
    assert.match(box.querySelectorAll(".nbviz-lb-strips-nonfinite")[0].textContent, /2 positions non-finite/);
    assert.equal(intensity(Number.POSITIVE_INFINITY, 0), 1);
    const clean = tokenStrips({ unit: 1, nonfinite: 0, tokens: us.tokens.slice(1) }, -1, () => {});
    assert.equal(clean.querySelectorAll(".nbviz-lb-strips-nonfinite").length, 0);
  });

  it("says so when the unit has no tokens", () => {
    const box = tokenStrips({ unit: 1, tokens: [] }, -1, () => {});
    assert.match(box.textContent, /no tokens recorded/);
    const blind = tokenStrips({ unit: 0, tokens: [{ id: 1, position: 2, value: 1, token: "", context: [], focus: -1 }] }, -1, () => {});
    assert.match(blind.textContent, /no input tokens recorded/);
  });
});
