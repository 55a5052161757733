// The data map's pure parts: where a sample goes (variability across, confidence
// up, as in Swayamdipta et al. 2020), its colour, and the map's axes and regions.
// No DOM, no WebGL: unit-tested in node.
import { viridis, rgbToHex } from "./color.js";

/** Variability's axis ends at 0.5: the standard deviation of values in [0, 1] never exceeds it. */
export const VARIABILITY_MAX = 0.5;
/** The axes' ends sit this far inside the plot's sides (device units), so edge points show whole. */
export const INSET = 0.96;
/** Correctness bins coloured by the map (0, 0.2, ..., 1). */
export const CORRECTNESS_BINS = 6;
export const SUSPECT_COLOR = "#d62728";
export const OTHER_COLOR = "#9e9e9e";

/**
 * Normalised device coordinates ([-1, 1] on both axes) of a (variability, confidence) point.
 * @param {number} variability
 * @param {number} confidence
 * @returns {[number, number]}
 */
export function toDevice(variability, confidence) {
  return [INSET * ((2 * variability) / VARIABILITY_MAX - 1), INSET * (2 * confidence - 1)];
}

/**
 * The point's position as a fraction of the square plot from its top-left corner.
 * @param {number} variability
 * @param {number} confidence
 * @returns {[number, number]}
 */
export function toFraction(variability, confidence) {
  const [x, y] = toDevice(variability, confidence);
  return [(x + 1) / 2, (1 - y) / 2];
}

/**
 * Category of every point and the colours of the categories for a colour mode:
 * "correctness" bins the fraction of evaluations that were right (viridis);
 * "suspect" shows the samples flagged as mislabelled in red, the rest grey.
 * @param {"correctness" | "suspect"} mode
 * @param {ArrayLike<number>} correctness  bytes 0..254 (fraction * 254)
 * @param {ArrayLike<number>} suspect  1 for a flagged sample
 * @returns {{codes: Float32Array, colors: string[], labels: string[]}}
 */
export function mapColours(mode, correctness, suspect) {
  const n = correctness.length;
  const codes = new Float32Array(n);
  if (mode === "suspect") {
    for (let i = 0; i < n; i++) codes[i] = suspect[i] ? 1 : 0;
    return { codes, colors: [OTHER_COLOR, SUSPECT_COLOR], labels: ["other samples", "likely mislabelled"] };
  }
  const k = CORRECTNESS_BINS;
  for (let i = 0; i < n; i++) codes[i] = Math.min(k - 1, Math.round((correctness[i] / 254) * (k - 1)));
  const colors = [];
  const labels = [];
  for (let b = 0; b < k; b++) {
    colors.push(rgbToHex(viridis(b / (k - 1))));
    labels.push(`right ${Math.round((100 * b) / (k - 1))}% of the time`);
  }
  return { codes, colors, labels };
}

/**
 * The point nearest a click at (px, py) CSS pixels in a width x height plot whose
 * sides are device coordinates -1 and 1, or -1 when none lies within `radius` pixels.
 * Ties go to the lower index.
 * @param {ArrayLike<number>} x  device coordinates
 * @param {ArrayLike<number>} y
 * @param {number} px
 * @param {number} py
 * @param {number} width
 * @param {number} height
 * @param {number} radius
 * @returns {number}
 */
export function nearestPoint(x, y, px, py, width, height, radius) {
  let best = -1;
  let bestD = radius * radius;
  for (let i = 0; i < x.length; i++) {
    const dx = ((x[i] + 1) / 2) * width - px;
    const dy = ((1 - y[i]) / 2) * height - py;
    const d = dx * dx + dy * dy;
    if (d < bestD || (d === bestD && best < 0)) {
      best = i;
      bestD = d;
    }
  }
  return best;
}

/**
 * Tick values of the two axes.
 * @returns {{x: number[], y: number[]}}
 */
export function mapTicks() {
  return { x: [0, 0.1, 0.2, 0.3, 0.4, 0.5], y: [0, 0.25, 0.5, 0.75, 1] };
}

/** The map's regions (Dataset Cartography), with where their names go (fractions of the plot). */
export const REGIONS = Object.freeze([
  { name: "easy to learn", x: 0.03, y: 0.04 },
  { name: "ambiguous", x: 0.62, y: 0.45 },
  { name: "\u2199 hard to learn (often mislabelled)", x: 0.12, y: 0.92 },
]);
