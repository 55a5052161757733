// The widget model of a saved page (nbviz.widgets.export): the anywidget model API
// (get/set/on/off/save_changes/send) over recorded state, with no kernel behind it.
//
// A saved page holds each widget's state, the browser-side links between traits
// (ipywidgets.jslink) and "reaction tables": what Python answered when a trait
// the view sets (a step, a clicked cell, a selected layer) took a recorded
// value. `Runtime` plays those answers back: save_changes() on a model looks up
// the entry for the model's current inputs and applies the recorded outputs, as
// if the kernel had sent them. Nothing here touches the DOM.

import { snapIndex } from "./steps.js";
import { decodeArray } from "./wire.js";

/**
 * @typedef {object} PageData  what nbviz.widgets.export writes (version 1)
 * @property {number} version
 * @property {string[]} buffers  base64 strings
 * @property {any[]} values  JSON values; {"$buffer": i} stands for buffers[i] as a DataView
 * @property {{id: string, cls?: string, name: string, module: string, esm: string | null,
 *   css: string | null, state: Record<string, number>, live_only?: string[]}[]} models
 *   state: trait -> index into values; live_only: traits only a live kernel answers
 * @property {{source: [string, string], target: [string, string], both: boolean}[]} links
 * @property {Group[]} groups
 */

/**
 * @typedef {object} Group  one model's recorded reactions
 * @property {string} owner  model id
 * @property {string} label  readable name of the view, for notices
 * @property {string[]} inputs  the owner's traits that key the table
 * @property {string[]} loose  inputs Python may rewrite while reacting (matched when possible)
 * @property {number[] | null} steps  recorded values of a "step" input (sorted); others snap down
 * @property {[string, string][]} outputs  (model id, trait) pairs each entry sets
 * @property {{key: string[], out: number[]}[]} entries  key: JSON text per input; out: value index per output
 */

/** Decode base64 into bytes (atob in browsers, Buffer in Node). */
function fromBase64(/** @type {string} */ text) {
  if (typeof atob === "function") {
    const raw = atob(text);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }
  // @ts-ignore - Node
  return new Uint8Array(Buffer.from(text, "base64"));
}

/**
 * Turn a stored value into what a widget model holds: {"$buffer": i} becomes a DataView.
 * @param {any} value
 * @param {(i: number) => DataView} buffer
 * @returns {any}
 */
export function reviveValue(value, buffer) {
  if (Array.isArray(value)) return value.map((v) => reviveValue(v, buffer));
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === "$buffer" && Number.isInteger(value.$buffer)) {
      return buffer(value.$buffer);
    }
    /** @type {Record<string, any>} */
    const out = {};
    for (const k of keys) out[k] = reviveValue(value[k], buffer);
    return out;
  }
  return value;
}

/**
 * The event a model of a saved page emits, with the trait names, when the view changed
 * something only a live kernel answers: the view can say so where the answer would be.
 */
export const UNANSWERED = "nbviz:unanswered";

/** Largest index i with sorted[i] <= x, else 0 (the first recorded value). */
export const snapDown = snapIndex;

/**
 * A value as a key spells it: an integer array ({data: DataView, dtype, shape}, as a
 * click's point indices travel) as the list of its values, as the page writer does.
 * @param {any} value
 * @returns {any}
 */
function plainKey(value) {
  if (Array.isArray(value)) return value.map(plainKey);
  if (value && typeof value === "object") {
    if (value.data instanceof DataView && typeof value.dtype === "string" && /^[<|]?[iu]\d$/.test(value.dtype) && Array.isArray(value.shape)) {
      return Array.from(/** @type {ArrayLike<number>} */ (decodeArray(value).data));
    }
    /** @type {Record<string, any>} */
    const out = {};
    for (const k of Object.keys(value)) out[k] = plainKey(value[k]);
    return out;
  }
  return value;
}

/** JSON text of a key value, as the page writer spells it (compact, non-ASCII kept). */
export function keyText(/** @type {any} */ value) {
  return JSON.stringify(value === undefined ? null : plainKey(value));
}

/** Deep equality of model values (DataViews by bytes), so a set() that changes nothing is quiet. */
export function sameValue(/** @type {any} */ a, /** @type {any} */ b) {
  if (a === b) return true;
  if (a instanceof DataView && b instanceof DataView) {
    if (a.byteLength !== b.byteLength) return false;
    for (let i = 0; i < a.byteLength; i++) if (a.getUint8(i) !== b.getUint8(i)) return false;
    return true;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((v, i) => sameValue(v, b[i]));
  }
  if (a && b && typeof a === "object" && typeof b === "object" && !Array.isArray(a) && !Array.isArray(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && sameValue(a[k], b[k]));
  }
  return false;
}

/** A widget model with the anywidget API, backed by recorded state. */
export class OfflineModel {
  /**
   * @param {Runtime} runtime
   * @param {string} id
   * @param {string} name  the ipywidgets model name, e.g. "AnyModel", "VBoxModel"
   * @param {Record<string, any>} attrs
   */
  constructor(runtime, id, name, attrs) {
    this.runtime = runtime;
    this.model_id = id;
    this.name = name;
    /** @type {Record<string, any>} */
    this.attrs = attrs;
    /** @type {Map<string, Set<(...args: any[]) => void>>} */
    this.listeners = new Map();
    /** @type {Set<string>} */
    this.dirty = new Set();
    this.widget_manager = runtime.manager;
  }

  get(/** @type {string} */ name) {
    return this.attrs[name];
  }

  /** Set a trait from the view: change events fire now, save_changes() "sends" it. */
  set(/** @type {string} */ name, /** @type {any} */ value) {
    if (this.update(name, value)) this.dirty.add(name);
  }

  /** Set a trait as the kernel would (no echo back); true when it changed. */
  update(/** @type {string} */ name, /** @type {any} */ value) {
    return this.updateMany({ [name]: value }).length > 0;
  }

  /**
   * Set several traits as one message from the kernel does: every value first, then
   * the change events, so a view reacting to one reads the others' new values too.
   * @param {Record<string, any>} values
   * @returns {string[]} the names that changed
   */
  updateMany(values) {
    const changed = Object.keys(values).filter((name) => !sameValue(this.attrs[name], values[name]));
    for (const name of changed) this.attrs[name] = values[name];
    for (const name of changed) this.emit(`change:${name}`, this, values[name]);
    if (changed.length) this.emit("change", this);
    return changed;
  }

  save_changes() {
    if (!this.dirty.size) return;
    const names = [...this.dirty];
    this.dirty.clear();
    this.runtime.changed(this, names);
  }

  /** Custom messages go nowhere: a saved page has no kernel to answer them. */
  send(/** @type {any} */ content) {
    this.runtime.unanswered(this, content);
  }

  on(/** @type {string} */ event, /** @type {(...args: any[]) => void} */ fn) {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(fn);
  }

  off(/** @type {string} */ event, /** @type {((...args: any[]) => void) | undefined} */ fn) {
    if (!fn) this.listeners.delete(event);
    else this.listeners.get(event)?.delete(fn);
  }

  emit(/** @type {string} */ event, /** @type {any[]} */ ...args) {
    for (const fn of [...(this.listeners.get(event) ?? [])]) fn(...args);
  }
}

/** The models of a saved page, their links and their recorded reactions. */
export class Runtime {
  /**
   * @param {PageData} data
   * @param {{notice?: (text: string) => void}} [options]
   *   notice: told when a change has no recorded answer (shown on the page)
   */
  constructor(data, options = {}) {
    if (!data || data.version !== 1) {
      throw new Error(`nbviz offline page: unsupported data version ${data && data.version}`);
    }
    this.data = data;
    this.notice = options.notice ?? (() => {});
    /** @type {Map<number, DataView>} */
    this.buffers = new Map();
    /** @type {Map<number, any>} */
    this.cache = new Map();
    /** @type {Map<string, OfflineModel>} */
    this.models = new Map();
    /** @type {Map<string, Group[]>} */
    this.groups = new Map();
    /** @type {Map<OfflineModel, Set<string>>} */
    this.pending = new Map();
    this.scheduled = false;
    /** Reactions applied (for tests and the page's status line). */
    this.applied = 0;
    /** @type {any} */
    this.manager = {
      get_model: async (/** @type {string} */ id) => this.model(id),
    };
    for (const m of data.models) {
      /** @type {Record<string, any>} */
      const attrs = {};
      for (const [trait, index] of Object.entries(m.state)) attrs[trait] = this.value(index);
      this.models.set(m.id, new OfflineModel(this, m.id, m.name, attrs));
    }
    for (const g of data.groups) {
      const list = this.groups.get(g.owner) ?? [];
      list.push(g);
      this.groups.set(g.owner, list);
    }
    for (const link of data.links) this.link(link);
  }

  /** The model with this id; an error naming it when the page does not hold it. */
  model(/** @type {string} */ id) {
    const m = this.models.get(id);
    if (!m) throw new Error(`nbviz offline page: no widget model ${id} in this page`);
    return m;
  }

  buffer(/** @type {number} */ i) {
    let view = this.buffers.get(i);
    if (!view) {
      const text = this.data.buffers[i];
      if (typeof text !== "string") throw new Error(`nbviz offline page: no buffer ${i}`);
      const bytes = fromBase64(text);
      view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      this.buffers.set(i, view);
    }
    return view;
  }

  /** Stored value `index`, revived (decoded once; views treat values as read-only). */
  value(/** @type {number} */ index) {
    if (!this.cache.has(index)) {
      this.cache.set(index, reviveValue(this.data.values[index], (i) => this.buffer(i)));
    }
    return this.cache.get(index);
  }

  /** ipywidgets.jslink (both ways) or jsdlink: the browser keeps two traits equal. */
  link(/** @type {{source: [string, string], target: [string, string], both: boolean}} */ spec) {
    const [sid, strait] = spec.source;
    const [tid, ttrait] = spec.target;
    if (!this.models.has(sid) || !this.models.has(tid)) return;
    const source = this.model(sid);
    const target = this.model(tid);
    let updating = false;
    const copy = (/** @type {OfflineModel} */ from, /** @type {string} */ fromTrait,
      /** @type {OfflineModel} */ to, /** @type {string} */ toTrait) => {
      if (updating) return;
      updating = true;
      try {
        to.set(toTrait, from.get(fromTrait));
        to.save_changes();
      } finally {
        updating = false;
      }
    };
    source.on(`change:${strait}`, () => copy(source, strait, target, ttrait));
    if (spec.both) target.on(`change:${ttrait}`, () => copy(target, ttrait, source, strait));
  }

  /** save_changes() of `model`: answer the changed traits from the tables (after this turn). */
  changed(/** @type {OfflineModel} */ model, /** @type {string[]} */ names) {
    const set = this.pending.get(model) ?? new Set();
    for (const n of names) set.add(n);
    this.pending.set(model, set);
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  /** Apply every pending reaction now (a microtask does it after each change). */
  flush() {
    this.scheduled = false;
    let rounds = 0;
    while (this.pending.size && rounds++ < 50) {
      const batch = [...this.pending];
      this.pending.clear();
      for (const [model, names] of batch) this.react(model, names);
    }
  }

  /**
   * The kernel's answer to `names` changing on `model`, from the recorded entries.
   * @param {OfflineModel} model
   * @param {Set<string>} names
   */
  react(model, names) {
    const spec = this.data.models.find((m) => m.id === model.model_id);
    const live = (spec && spec.live_only ? spec.live_only : []).filter((n) => names.has(n));
    if (live.length) {
      const label = spec && spec.cls ? spec.cls : "a view";
      this.notice(`${label}: changing ${live.join(", ")} needs a live kernel; the view keeps what it showed.`);
      // the view itself can say so where the answer would have appeared
      model.emit(UNANSWERED, live);
    }
    for (const group of this.groups.get(model.model_id) ?? []) {
      const touched = group.inputs.filter((n) => names.has(n));
      if (!touched.length) continue;
      const entry = this.lookup(group, model, new Set(touched));
      if (!entry) {
        const what = touched.map((n) => `${n} = ${keyText(model.get(n))}`).join(", ");
        this.notice(`${group.label}: ${what} was not recorded in this page; the view keeps what it showed.`);
        // the view itself can say so where the answer would have appeared
        model.emit(UNANSWERED, touched);
        continue;
      }
      // one message per model, as the kernel sends them (hold_sync)
      /** @type {Map<OfflineModel, Record<string, any>>} */
      const byModel = new Map();
      group.outputs.forEach(([id, trait], k) => {
        const target = this.models.get(id);
        if (!target) return;
        const values = byModel.get(target) ?? {};
        values[trait] = this.value(entry.out[k]);
        byModel.set(target, values);
      });
      for (const [target, values] of byModel) target.updateMany(values);
      // inputs Python rewrote (e.g. the layer after a change of signal); never the step
      group.inputs.forEach((n, k) => {
        if (n === "step" || keyText(model.get(n)) === entry.key[k]) return;
        const v = JSON.parse(entry.key[k]);
        if (!sameValue(model.get(n), v)) model.update(n, v);
      });
      this.applied += 1;
    }
  }

  /**
   * The entry for the model's current inputs: exact on the changed ones and on every
   * input that is not loose; loose inputs match when an entry allows it.
   * @param {Group} group
   * @param {OfflineModel} model
   * @param {Set<string>} touched
   */
  lookup(group, model, touched) {
    const want = group.inputs.map((n) => {
      if (n === "step" && group.steps && group.steps.length) {
        return keyText(group.steps[snapDown(group.steps, Number(model.get("step")))]);
      }
      return keyText(model.get(n));
    });
    let best = null;
    let bestScore = -1;
    for (const entry of group.entries) {
      let score = 0;
      let ok = true;
      for (let k = 0; k < group.inputs.length; k++) {
        const n = group.inputs[k];
        const same = entry.key[k] === want[k];
        if (same) score += 1;
        else if (touched.has(n) || !group.loose.includes(n)) {
          ok = false;
          break;
        }
      }
      if (ok && score > bestScore) {
        best = entry;
        bestScore = score;
        if (score === group.inputs.length) break;
      }
    }
    return best;
  }

  /** A custom message no kernel will answer (e.g. a zoom asking for full resolution). */
  unanswered(/** @type {OfflineModel} */ model, /** @type {any} */ content) {
    const type = content && typeof content === "object" && content.type ? ` (${content.type})` : "";
    this.notice(`a request${type} from a view needs a live kernel; this page shows the recorded summary.`);
    void model;
  }
}
