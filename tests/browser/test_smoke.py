"""The front-end pipeline end to end: bundles load in JupyterLab, text stays text,
traits travel both ways, and arrays arrive as binary buffers."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import expect

REPO = Path(__file__).resolve().parents[2]
ESBUILD = REPO / "js" / "node_modules" / ".bin" / "esbuild"


def test_status_message_renders_markup_as_text_and_syncs_both_ways(nb) -> None:
    status = nb.run(
        "status.ipynb",
        [
            "from nbviz.widgets.status import StatusMessage",
            "w = StatusMessage('hello <b>x</b>', dismissible=True)\nw",
        ],
        ready=".nbviz-status",
    )
    text = status.locator(".nbviz-message-text")
    expect(text).to_have_text("hello <b>x</b>")
    expect(status.locator("b")).to_have_count(0)
    nb.screenshot("status-message")

    # JS -> Python: the close button sets the synced trait in the kernel
    assert nb.kernel_eval("w.dismissed") == "False"
    status.locator(".nbviz-dismiss").click()
    expect(text).to_have_count(0)
    nb.wait_kernel("w.dismissed", "True")

    # Python -> JS: changing traits redraws the view
    nb.run_code("w.message = 'back again'; w.kind = 'error'; w.dismissed = False")
    expect(text).to_have_text("back again")
    expect(status.locator(".nbviz-message-error")).to_have_count(1)


WIRE_PROBE_JS = """
import { decodeArray, encodeArray } from %(wire)s;

export default {
  render({ model, el }) {
    const draw = () => {
      const raw = model.get("arr");
      const arr = decodeArray(raw);
      const ids = decodeArray(model.get("ids"));
      const sum = arr.data.reduce((s, v) => s + v, 0);
      el.className = "nbviz-wire-probe";
      el.textContent = [
        Object.prototype.toString.call(raw.data),
        arr.dtype,
        arr.shape.join("x"),
        arr.data.constructor.name,
        `sum=${sum}`,
        `last=${arr.data[arr.data.length - 1]}`,
        `ids=${Array.from(ids.data).join(",")}`,
      ].join(" ");
      model.set("echo", encodeArray(arr.data.map((v) => 2 * v), arr.shape));
      model.save_changes();
    };
    draw();
    model.on("change:arr", draw);
    return () => model.off("change:arr", draw);
  },
};
"""


@pytest.fixture
def wire_probe_bundle(lab) -> Path:
    """A throwaway widget bundled with esbuild from js/lib/wire.js, as a real entry would be."""
    if not ESBUILD.exists():
        pytest.fail(f"{ESBUILD} is missing: run `make js` first", pytrace=False)
    entry = lab.root / "_wire_probe_src.js"
    entry.write_text(WIRE_PROBE_JS % {"wire": json.dumps(str(REPO / "js" / "lib" / "wire.js"))})
    out = lab.root / "_wire_probe.js"
    subprocess.run(
        [
            str(ESBUILD),
            str(entry),
            "--bundle",
            "--format=esm",
            f"--outfile={out}",
            "--log-level=warning",
        ],
        check=True,
        timeout=60,
    )
    return out


def test_array_payload_arrives_as_binary_and_decodes_in_js(nb, wire_probe_bundle: Path) -> None:
    nb.run(
        "wire.ipynb",
        [
            "import numpy as np, traitlets\n"
            "from pathlib import Path\n"
            "from nbviz.widgets.base import NbvizWidget, array_from_payload, array_trait_payload",
            "class WireProbe(NbvizWidget):\n"
            f"    _esm = Path({str(wire_probe_bundle)!r})\n"
            "    arr = traitlets.Dict().tag(sync=True)\n"
            "    ids = traitlets.Dict().tag(sync=True)\n"
            "    echo = traitlets.Dict().tag(sync=True)\n",
            "values = np.arange(12, dtype=np.float64).reshape(3, 4) / 4\n"
            "w = WireProbe(arr=array_trait_payload(values, dtype='<f4'),\n"
            "              ids=array_trait_payload(np.array([2**40, -5, 7], dtype=np.int64)))\n"
            "w",
        ],
    )
    expect(nb.page.locator(".nbviz-wire-probe")).to_have_text(
        "[object DataView] <f4 3x4 Float32Array sum=16.5 last=2.75 ids=1099511627776,-5,7"
    )

    # JS -> Python: a typed array sent back arrives as a buffer that decodes to the same values
    nb.wait_kernel("bool(w.echo)", "True")
    echoed = nb.kernel_eval("array_from_payload(w.echo).tolist()")
    assert ast.literal_eval(echoed) == [[v / 2 for v in range(r * 4, r * 4 + 4)] for r in range(3)]
    assert nb.kernel_eval("array_from_payload(w.echo).dtype.str") == "'<f4'"
    assert nb.kernel_eval("type(w.echo['data']).__name__") in ("'memoryview'", "'bytes'")
