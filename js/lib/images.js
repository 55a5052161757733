// Pictures of samples and activations: PNG bytes from a binary trait shown as
// an <img> (through an object URL the view revokes), and a layer's feature
// maps drawn channel by channel as small pixelated canvases.
import { finiteExtent, sequentialScale } from "./color.js";
import { el } from "./dom.js";

/**
 * Bytes of a binary trait value (DataView from the widget manager, a typed
 * array or an ArrayBuffer), or null for anything else.
 * @param {any} data
 * @returns {Uint8Array | null}
 */
export function bytesOf(data) {
  if (!data) return null;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

/**
 * The object URLs a view made for its images, revoked together when the
 * images are replaced and in the view's cleanup.
 */
export class ObjectUrls {
  constructor() {
    /** @type {string[]} */
    this.urls = [];
  }

  /**
   * An <img> of PNG bytes (a binary trait value), or null when there are none.
   * @param {any} png
   * @param {{class?: string, alt?: string}} [options]
   * @returns {HTMLImageElement | null}
   */
  png(png, options = {}) {
    const bytes = bytesOf(png);
    if (!bytes) return null;
    const url = URL.createObjectURL(new Blob([bytes.slice()], { type: "image/png" }));
    this.urls.push(url);
    return /** @type {HTMLImageElement} */ (el("img", { class: options.class, attrs: { src: url, alt: options.alt ?? "" } }));
  }

  /** Revoke every URL made so far. */
  revoke() {
    for (const url of this.urls) URL.revokeObjectURL(url);
    this.urls = [];
  }
}

/**
 * One canvas per channel of a (channels, h, w) array, coloured over the finite
 * range of the whole array, each pixel at least 2 CSS px (about 48 px a map).
 * @param {{data: ArrayLike<number>, shape: number[]}} maps
 * @param {{class: string, active?: number}} options  active: the channel to mark (class nbviz-active)
 * @returns {HTMLCanvasElement[]}
 */
export function featureMaps(maps, options) {
  const [channels, h, w] = maps.shape;
  const [lo, hi] = finiteExtent(maps.data);
  const scale = sequentialScale(lo, hi);
  const px = Math.max(2, Math.floor(48 / Math.max(h, w)));
  const out = [];
  for (let c = 0; c < channels; c++) {
    const canvas = /** @type {HTMLCanvasElement} */ (
      el("canvas", {
        class: [options.class, c === options.active ? "nbviz-active" : ""],
        attrs: { title: `channel ${c}`, "data-channel": c },
      })
    );
    canvas.width = w;
    canvas.height = h;
    canvas.style.width = `${w * px}px`;
    canvas.style.height = `${h * px}px`;
    const ctx = canvas.getContext?.("2d");
    if (ctx) {
      const image = ctx.createImageData(w, h);
      for (let i = 0; i < h * w; i++) {
        const rgb = scale(maps.data[c * h * w + i]);
        image.data[4 * i] = rgb[0];
        image.data[4 * i + 1] = rgb[1];
        image.data[4 * i + 2] = rgb[2];
        image.data[4 * i + 3] = 255;
      }
      ctx.putImageData(image, 0, 0);
    }
    out.push(canvas);
  }
  return out;
}
