"""A TensorBoard log's unequal histogram bins in a real browser: drawn on uniform bins,
every value counted, while ``run.histogram`` keeps the log's own bins."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

pytest.importorskip("tensorboard")
torch = pytest.importorskip("torch")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

STEPS = (0, 10, 20)


def _write_log(logdir: Path) -> None:
    with SummaryWriter(str(logdir)) as w:
        for step in STEPS:
            values = np.random.default_rng(step).normal(0.0, 1e-3, 500).astype(np.float32)
            w.add_scalar("loss/train", 1.0 / (step + 1), step)
            w.add_histogram("grads/fc1.weight", values, step)  # torch's exponential bins


def test_imported_unequal_bins_draw_every_value_and_keep_the_logged_bins(
    nb, tmp_path: Path
) -> None:
    _write_log(tmp_path / "tb")
    view = nb.run(
        "tb_hist.ipynb",
        [
            "import nbviz, numpy as np\n"
            f"run = nbviz.from_tensorboard({str(tmp_path / 'tb')!r}, {str(tmp_path / 'run')!r})\n"
            "def logged(step):\n"
            "    e, c = run.histogram('fc1.weight', 'gradient', step)\n"
            "    return len(c), int(c.sum()), bool(np.ptp(np.diff(e)) > 0)\n"
            "h = nbviz.Histograms(run, signal='gradients')\n"
            "h",
        ],
        ready=".nbviz-histograms",
    )
    expect(view.locator("canvas.nbviz-hist-ridge")).to_have_count(1)
    expect(view.locator(".nbviz-hist-layer")).to_have_value("fc1.weight")
    expect(view.locator(".nbviz-hist-current")).to_contain_text(
        re.compile(r"^step 20: 500 values in \[")
    )
    heat = view.locator("canvas.nbviz-hist-heat")
    box = heat.bounding_box()
    assert box is not None and box["height"] > 50
    heat.click(position={"x": box["width"] / 2, "y": 2})  # the top row: the first histogram
    nb.wait_kernel("h.step", "0")
    expect(view.locator(".nbviz-hist-current")).to_contain_text(
        re.compile(r"^step 0: 500 values in \[")
    )
    # drawn on uniform bins; the run keeps TensorBoard's own, unequal ones
    drawn = int(nb.kernel_eval("h.current['counts']['shape'][0]"))
    assert drawn >= 16
    # the logged bins: another number of them, of unequal widths, holding every value
    count, total, unequal = nb.kernel_eval("logged(0)").strip("()").split(", ")
    assert (total, unequal) == ("500", "True") and int(count) != drawn
    nb.screenshot("imported-tensorboard-histograms")
