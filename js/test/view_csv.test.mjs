import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ATTENTION_CSV_ROWS, attentionCsv, attentionCsvNote, confusionCsv, fetchTable, findingsCsv, histogramCsv, layerTableCsv, modulesCsv } from "../lib/view_csv.js";
import { exportMenu, stackCanvases } from "../lib/export.js";
import { encodeArray } from "../lib/wire.js";
import { find, settle, withDocument } from "./fake_dom.mjs";

/** A model's `get` over a plain object of synced state. */
const getter = (/** @type {Record<string, any>} */ state) => (/** @type {string} */ k) => state[k];
const lines = (/** @type {string} */ csv) => csv.trimEnd().split("\r\n");

describe("view CSVs", () => {
  it("lays out the layer table with each sign's value, capture step and non-finite count", () => {
    const current = {
      zero_frac: { step: 10, values: encodeArray(Float64Array.from([0.25, NaN])), nonfinite: encodeArray(Float64Array.from([0, 0])) },
      grad_norm: { step: 10, values: encodeArray(Float64Array.from([1.5, 2])), nonfinite: encodeArray(Float64Array.from([0, 3])) },
    };
    const layers = [
      { name: "fc1", type: "Linear", shape: "[8, 4]", params: 36 },
      { name: "act, 1", type: "ReLU", shape: "[8, 4]", params: 0 },
    ];
    const rows = lines(layerTableCsv(getter({ layers, current })));
    assert.equal(
      rows[0],
      "layer,type,shape,params,zero_frac,zero_frac_step,zero_frac_nonfinite,grad_norm,grad_norm_step,grad_norm_nonfinite," +
        "update_ratio,update_ratio_step,update_ratio_nonfinite",
    );
    assert.equal(rows[1], 'fc1,Linear,"[8, 4]",36,0.25,10,0,1.5,10,0,NaN,-1,0');
    assert.equal(rows[2], '"act, 1",ReLU,"[8, 4]",0,NaN,10,0,2,10,3,NaN,-1,0');
  });

  it("gives one row per bin of the histogram at the step, edges on uniform bins", () => {
    const current = { layer: "fc1.weight", step: 20, lo: -1, hi: 1, counts: encodeArray(Float64Array.from([1, 2, 3, 4])) };
    const rows = lines(histogramCsv(getter({ current, signal: "weights" })));
    assert.deepEqual(rows, [
      "layer,signal,step,bin,lo,hi,count",
      "fc1.weight,weights,20,0,-1,-0.5,1",
      "fc1.weight,weights,20,1,-0.5,0,2",
      "fc1.weight,weights,20,2,0,0.5,3",
      "fc1.weight,weights,20,3,0.5,1,4",
    ]);
    assert.deepEqual(lines(histogramCsv(getter({ current: {} }))), ["layer,signal,step,bin,lo,hi,count"]);
  });

  it("lists every confusion cell with names and the rate over the true class", () => {
    const matrix = { step: 5, counts: encodeArray(Int32Array.from([3, 1, 0, 0]), [2, 2]) };
    const rows = lines(confusionCsv(getter({ mode: "matrix", matrix, eval_step: 5, class_names: ["cat", 'd"og'] })));
    assert.deepEqual(rows, [
      "step,true,predicted,true_name,predicted_name,count,rate",
      "5,0,0,cat,cat,3,0.75",
      "5,0,1,cat,\"d\"\"og\",1,0.25",
      "5,1,0,\"d\"\"og\",cat,0,NaN",
      "5,1,1,\"d\"\"og\",\"d\"\"og\",0,NaN",
    ]);
  });

  it("lists the most-confused pairs in list mode", () => {
    const confused = [{ true: 7, pred: 9, count: 4, rate: 0.5, true_name: "seven", pred_name: "nine" }];
    const rows = lines(confusionCsv(getter({ mode: "pairs", matrix: {}, eval_step: 3, confused })));
    assert.equal(rows[1], "3,7,9,seven,nine,4,0.5");
  });

  it("writes findings with their JSON evidence quoted, and modules slowest first", () => {
    const findings = [{ id: "f1", check: "nonfinite", layer: "fc1", step: 7, severity: "error", message: "NaN, at 7", cause: "numerics", root: "", advice: "lower lr", evidence: '{"a": 1}' }];
    const rows = lines(findingsCsv(getter({ findings })));
    assert.equal(rows[0], "id,check,layer,step,severity,message,cause,root,advice,evidence");
    assert.equal(rows[1], 'f1,nonfinite,fc1,7,error,"NaN, at 7",numerics,,lower lr,"{""a"": 1}"');
    const modules = [
      { name: "a", self_ms: 1, total_ms: 2, input_shapes: [[2, 3]] },
      { name: "b", self_ms: 5, total_ms: 5 },
    ];
    const m = lines(modulesCsv(getter({ profile: { modules } })));
    assert.match(m[0], /^name,type,parent,depth,calls,self_ms,total_ms,/);
    assert.equal(m[1].split(",")[0], "b");
    assert.ok(m[2].endsWith('"[[2,3]]"'));
  });

  it("gives one row per attention weight with the tokens of query and key", () => {
    const maps = encodeArray(Float32Array.from([1, 0, 0.5, 0.5, 0.25, 0.75, 1, 0]), [2, 1, 2, 2]);
    const rows = lines(attentionCsv(getter({ maps, layers: ["b0", "b1"], tokens: ["x", "y"], shown_step: 9, sample: 1 })));
    assert.equal(rows.length, 9);
    assert.equal(rows[0], "step,sample,layer,head,query,key,query_token,key_token,weight");
    assert.equal(rows[3], "9,1,b0,0,1,0,y,x,0.5");
    assert.equal(rows[6], "9,1,b1,0,0,1,x,y,0.75");
  });

  it("holds only the map opened large, as the view draws it", () => {
    const maps = encodeArray(Float32Array.from([1, 0, 0.5, 0.5, 0.25, 0.75, 1, 0]), [2, 1, 2, 2]);
    const get = getter({ maps, layers: ["b0", "b1"], tokens: ["x", "y"], shown_step: 9, sample: 1, selected: [1, 0] });
    const rows = lines(attentionCsv(get));
    assert.deepEqual(rows.slice(1), ["9,1,b1,0,0,0,x,x,0.25", "9,1,b1,0,0,1,x,y,0.75", "9,1,b1,0,1,0,y,x,1", "9,1,b1,0,1,1,y,y,0"]);
    assert.equal(attentionCsvNote(get), "");
  });

  it("stops at each layer's own extent, its queries and keys named by their own tokens", () => {
    // a decoder's cross-attention, 1 query x 2 keys, padded to 2 x 2 beside a 2 x 2 layer
    const maps = encodeArray(Float32Array.from([0.25, 0.75, 9, 9, 1, 0, 0.5, 0.5]), [2, 1, 2, 2]);
    const get = getter({
      maps,
      layers: ["cross", "self"],
      extents: [[1, 1, 2], [1, 2, 2]],
      axis_tokens: [[["t"], ["s0", "s1"]], [["s0", "s1"], ["s0", "s1"]]],
      shown_step: 4,
      sample: 0,
      selected: [],
    });
    const rows = lines(attentionCsv(get));
    assert.equal(rows.length, 1 + 2 + 4); // no row of the padding (the 9s)
    assert.deepEqual(rows.slice(1, 3), ["4,0,cross,0,0,0,t,s0,0.25", "4,0,cross,0,0,1,t,s1,0.75"]);
    assert.equal(rows[4], "4,0,self,0,0,1,s0,s1,0");
  });

  it("stops at a row limit and says so, where the grid holds more weights", () => {
    // 12 layers x 12 heads of 512 x 512 maps: 37.7 million weights, never laid out in full
    const shape = [12, 12, 512, 512];
    const maps = { data: new DataView(new ArrayBuffer(4 * 12 * 12 * 512 * 512)), dtype: "<f4", shape };
    const get = getter({ maps, layers: [], tokens: [], shown_step: 3, sample: 0, selected: [] });
    const rows = lines(attentionCsv(get));
    assert.equal(rows.length, 1 + ATTENTION_CSV_ROWS);
    assert.equal(rows[1], "3,0,0,0,0,0,0,0,0");
    assert.match(attentionCsvNote(get), /^CSV holds the first 500,000 of 37,748,736 rows: open one map/);
    const small = getter({ maps, layers: [], tokens: [], shown_step: 3, sample: 0, selected: [0, 1] });
    assert.equal(lines(attentionCsv(small, 10)).length, 11);
    assert.match(attentionCsvNote(small, 10), /first 10 of 262,144 rows: use AttentionMaps\.data/);
    assert.equal(attentionCsvNote(small), "");
  });
});

describe("tables asked of the kernel", () => {
  /** A model whose kernel answers a table request with `reply` (or never, when null). */
  const fakeModel = (/** @type {any} */ reply, /** @type {DataView[]} */ buffers = []) => {
    /** @type {Map<string, Set<Function>>} */
    const listeners = new Map();
    /** @type {any[]} */
    const sent = [];
    return {
      sent,
      listeners,
      on: (/** @type {string} */ e, /** @type {Function} */ f) => listeners.set(e, (listeners.get(e) ?? new Set()).add(f)),
      off: (/** @type {string} */ e, /** @type {Function} */ f) => listeners.get(e)?.delete(f),
      send(/** @type {any} */ content) {
        sent.push(content);
        if (!reply) return;
        // another request's answer first: it must be ignored
        const other = { ...reply, request: "someone-else", rows: 0, columns: [] };
        setTimeout(() => {
          for (const f of [...(listeners.get("msg:custom") ?? [])]) f(other, []);
          for (const f of [...(listeners.get("msg:custom") ?? [])]) f({ ...reply, request: content.request }, buffers);
        }, 1);
      },
    };
  };

  it("builds the CSV from binary numeric columns and text columns", async () => {
    const ids = encodeArray(Float64Array.from([7, 3]));
    const x = encodeArray(Float64Array.from([0.5, NaN]));
    const reply = {
      type: "table",
      rows: 2,
      columns: [
        { name: "id", dtype: ids.dtype, shape: ids.shape, buffer: 0 },
        { name: "x", dtype: x.dtype, shape: x.shape, buffer: 1 },
        { name: "name", values: ["a,b", null] },
        { name: "suspect", values: [true, false] },
      ],
    };
    const model = fakeModel(reply, [ids.data, x.data]);
    const csv = await fetchTable(model, 1000);
    assert.deepEqual(lines(csv), ["id,x,name,suspect", '7,0.5,"a,b",true', "3,NaN,,false"]);
    assert.equal(model.sent[0].type, "table");
    assert.equal(model.listeners.get("msg:custom")?.size, 0);
  });

  it("rejects with the kernel's error when the view's data() raised, and stops listening", async () => {
    const model = fakeModel({ type: "table", error: "ValueError: the points are gone" });
    await assert.rejects(fetchTable(model, 1000), (err) => {
      assert.ok(err instanceof Error);
      assert.match(err.message, /ValueError: the points are gone/);
      assert.doesNotMatch(err.message, /live kernel/);
      return true;
    });
    assert.equal(model.listeners.get("msg:custom")?.size, 0);
  });

  it("rejects with a clear reason when no kernel answers, and stops listening", async () => {
    const model = fakeModel(null);
    await assert.rejects(fetchTable(model, 20), /needs a live kernel/);
    assert.equal(model.listeners.get("msg:custom")?.size, 0);
  });
});

describe("the download menu", () => {
  withDocument();

  it("says beside the menu why a CSV or PNG was not saved", async () => {
    const menu = exportMenu({ name: "v", csv: () => Promise.reject(new Error("no kernel")), png: () => [] });
    const item = (/** @type {string} */ f) => find(/** @type {any} */ (menu.node), (n) => n.getAttribute?.("data-format") === f)[0];
    const note = find(/** @type {any} */ (menu.node), "nbviz-export-note")[0];
    item("csv").fire("click");
    await settle();
    await settle();
    assert.equal(note.textContent, "CSV not saved: no kernel");
    item("png").fire("click");
    assert.equal(note.textContent, "PNG not saved: nothing is drawn");
    menu.dispose();
  });

  it("saves a CSV that stops at its row limit and says so beside the menu", async () => {
    /** @type {string[]} */
    const saved = [];
    const doc = /** @type {any} */ (globalThis.document);
    const { createObjectURL, revokeObjectURL } = URL;
    doc.body = { append: (/** @type {any} */ a) => (a.click = () => saved.push(a.getAttribute("download"))) };
    URL.createObjectURL = () => "blob:csv";
    URL.revokeObjectURL = () => {};
    try {
      const menu = exportMenu({ name: "attention_maps", csv: () => ({ text: "a\r\n", note: "CSV holds the first 10 of 20 rows" }) });
      const item = find(/** @type {any} */ (menu.node), (n) => n.getAttribute?.("data-format") === "csv")[0];
      const note = find(/** @type {any} */ (menu.node), "nbviz-export-note")[0];
      item.fire("click");
      await settle();
      await settle();
      assert.deepEqual(saved, ["attention_maps.csv"]);
      assert.equal(note.textContent, "CSV holds the first 10 of 20 rows");
      menu.dispose();
    } finally {
      URL.createObjectURL = createObjectURL;
      URL.revokeObjectURL = revokeObjectURL;
      delete doc.body;
    }
  });

  it("shows the kernel's error when the view's data() raised", async () => {
    /** @type {Set<Function>} */
    const listeners = new Set();
    const model = {
      on: (/** @type {string} */ _e, /** @type {Function} */ f) => listeners.add(f),
      off: (/** @type {string} */ _e, /** @type {Function} */ f) => listeners.delete(f),
      send: (/** @type {any} */ c) =>
        setTimeout(() => {
          for (const f of [...listeners]) f({ type: "table", request: c.request, error: "KeyError: 'confidence'" }, []);
        }, 1),
    };
    const menu = exportMenu({ name: "v", csv: () => fetchTable(model, 5000) });
    const item = find(/** @type {any} */ (menu.node), (n) => n.getAttribute?.("data-format") === "csv")[0];
    const note = find(/** @type {any} */ (menu.node), "nbviz-export-note")[0];
    item.fire("click");
    for (let i = 0; i < 20 && !note.textContent; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(note.textContent, "CSV not saved: the kernel could not give the table: KeyError: 'confidence'");
    menu.dispose();
  });
});

describe("stacked pictures", () => {
  it("puts a title line over a titled canvas and none over a bare one", () => {
    /** @type {any[]} */
    const drawn = [];
    const ctx = new Proxy({}, { get: (_t, name) => (name === "fillText" || name === "drawImage" ? (/** @type {any[]} */ ...a) => drawn.push([name, ...a]) : () => {}), set: () => true });
    const canvas = (/** @type {number} */ w, /** @type {number} */ h) => ({ width: w, height: h, getContext: () => ctx });
    const before = globalThis.document;
    globalThis.document = /** @type {any} */ ({ createElement: () => canvas(0, 0) });
    try {
      const a = canvas(100, 40);
      const b = canvas(80, 30);
      const out = stackCanvases([{ canvas: a, title: "fc1 <b>" }, /** @type {any} */ (b)]);
      const line = Math.round(18 * (globalThis.devicePixelRatio ?? 1));
      assert.equal(out.width, 100);
      assert.equal(out.height, line + 40 + 30);
      assert.deepEqual(drawn.map((d) => d[0]), ["fillText", "drawImage", "drawImage"]);
      assert.equal(drawn[0][1], "fc1 <b>");
      assert.deepEqual(drawn.slice(1).map((d) => d[3]), [line, line + 40]);
    } finally {
      globalThis.document = before;
    }
  });
});
