import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CATEGORICAL_10,
  CATEGORICAL_20,
  MISSING_RGB,
  blueWhiteRed,
  categorical,
  divergingScale,
  finiteExtent,
  hexToRgb,
  rgbToCss,
  rgbToHex,
  sequentialScale,
  viridis,
} from "../lib/color.js";

/** Relative luminance-ish brightness, enough to check a ramp is monotone. */
const brightness = ([r, g, b]) => 0.2126 * r + 0.7152 * g + 0.0722 * b;

describe("categorical palettes", () => {
  it("have 10 and 20 distinct colours", () => {
    assert.equal(new Set(CATEGORICAL_10).size, 10);
    assert.equal(new Set(CATEGORICAL_20).size, 20);
    for (const c of CATEGORICAL_20) assert.match(c, /^#[0-9a-f]{6}$/);
  });

  it("pick the 10-colour palette up to 10 classes and the 20 beyond", () => {
    assert.equal(categorical(3, 10), CATEGORICAL_10[3]);
    assert.equal(categorical(13, 20), CATEGORICAL_20[13]);
    assert.equal(categorical(21, 30), CATEGORICAL_20[1], "colours repeat past 20");
  });

  it("gives the missing colour to a bad index", () => {
    assert.equal(categorical(-1), rgbToHex(MISSING_RGB));
    assert.equal(categorical(Number.NaN), rgbToHex(MISSING_RGB));
  });
});

describe("conversions", () => {
  it("convert hex, rgb and css", () => {
    assert.deepEqual(hexToRgb("#0072b2"), [0, 114, 178]);
    assert.deepEqual(hexToRgb("#fff"), [255, 255, 255]);
    assert.equal(rgbToHex([0, 114, 178]), "#0072b2");
    assert.equal(rgbToCss([1, 2, 3]), "rgb(1, 2, 3)");
    assert.equal(rgbToCss([1, 2, 3], 0.5), "rgba(1, 2, 3, 0.5)");
    assert.throws(() => hexToRgb("blue"), /expected "#rrggbb"/);
  });
});

describe("sequential scale", () => {
  it("runs from dark purple to yellow and gets brighter", () => {
    assert.deepEqual(viridis(0), [68, 1, 84]);
    assert.deepEqual(viridis(1), [253, 231, 37]);
    let prev = -1;
    for (let t = 0; t <= 1.0001; t += 0.05) {
      const b = brightness(viridis(t));
      assert.ok(b > prev, `brightness rises at t=${t.toFixed(2)}`);
      prev = b;
    }
  });

  it("maps its domain, clamps outside it and greys out non-finite values", () => {
    const s = sequentialScale(10, 20);
    assert.deepEqual(s(10), viridis(0));
    assert.deepEqual(s(15), viridis(0.5));
    assert.deepEqual(s(99), viridis(1));
    assert.deepEqual(s(Number.NaN), [...MISSING_RGB]);
    assert.deepEqual(s(Number.POSITIVE_INFINITY), [...MISSING_RGB]);
    assert.match(s.css(12), /^rgb\(\d+, \d+, \d+\)$/);
  });

  it("maps a degenerate domain to the middle colour", () => {
    assert.deepEqual(sequentialScale(3, 3)(3), viridis(0.5));
  });
});

describe("diverging scale", () => {
  it("is white-ish at the centre, blue below and red above", () => {
    const s = divergingScale(-2, 1);
    const [r0, g0, b0] = s(0);
    assert.ok(r0 > 240 && g0 > 240 && b0 > 240);
    const [rl, , bl] = s(-2);
    assert.ok(bl > rl, "low end is blue");
    const [rh, , bh] = s(1);
    assert.ok(rh > bh, "high end is red");
  });

  it("gives equal distances from the centre equal strength", () => {
    const s = divergingScale(-4, 1);
    assert.deepEqual(s(1), blueWhiteRed(0.5 + 1 / 8));
    assert.deepEqual(s(-4), blueWhiteRed(0));
  });
});

describe("finiteExtent", () => {
  it("ignores NaN and Inf", () => {
    assert.deepEqual(finiteExtent([3, Number.NaN, -1, Number.POSITIVE_INFINITY, 2]), [-1, 3]);
    assert.deepEqual(finiteExtent([Number.NaN]), [0, 0]);
    assert.deepEqual(finiteExtent(new Float32Array([0.5, 0.25])), [0.25, 0.5]);
  });
});
