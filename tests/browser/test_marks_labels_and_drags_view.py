"""What a person sees and does on a diverging run's loss curves and a sweep's parallel
coordinates: the NaN/Inf marks' labels never overlap, a drag zooms without picking a
step while a click picks one, and long config names stay inside the plot."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from notebook_page import screenshot
from playwright.sync_api import expect

import nbviz

LONG_KEY = "decay_schedule_with_warmup_and_restarts"  # sorts first: the leftmost axis


def diverging_run(path: Path) -> Path:
    """Losses that go +Inf at step 8 and NaN at 12, val_loss -Inf at step 10 (close breaks)."""
    with nbviz.Run(path) as run:
        for step in range(20):
            v = 1.2 - 0.01 * step
            if step >= 8:
                v = math.inf
            if step >= 12:
                v = math.nan
            run.log(step, train_loss=v, val_loss=-math.inf if step == 10 else v)
    return path


def marks_in(labels: str) -> int:
    """How many marks labels such as "+Inf \u00d73, -Inf | NaN \u00d72" stand for."""
    parts = [p for label in labels.split(" | ") for p in label.split(", ") if p]
    return sum(int(p.split("\u00d7")[1]) if "\u00d7" in p else 1 for p in parts)


def test_break_labels_do_not_overlap_and_a_drag_zooms_without_picking_a_step(
    nb, tmp_path: Path
) -> None:
    path = diverging_run(tmp_path / "diverge")
    view = nb.run(
        "diverge-curves.ipynb",
        [f"import nbviz\nlc = nbviz.LossCurves(nbviz.open_run({str(path)!r}))\nlc"],
        ready=".nbviz-loss-curves",
    )
    page = nb.page
    panel = view.locator('.nbviz-lc-panel[data-stem="loss"]')
    # six breaks over five steps: labels that count them, not six on top of each other
    expect(panel).to_have_attribute("data-break-labels", re.compile(r"\u00d7"))
    screenshot(panel, "loss-curves-break-labels")
    assert marks_in(panel.get_attribute("data-break-labels") or "") == 6
    assert nb.kernel_eval("lc.step") == "19"

    canvas = panel.locator(".nbviz-lc-canvas")
    box = canvas.bounding_box()
    assert box is not None
    x0, y = box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x0 + box["width"] * 0.3, y, steps=8)
    page.mouse.up()
    expect(view).not_to_have_attribute("data-domain", "")
    domain = [float(v) for v in (view.get_attribute("data-domain") or "").split(",")]
    screenshot(panel, "loss-curves-break-labels-zoomed")
    # a cell run after the drag reaches the kernel after anything the drag sent
    nb.run_code("'step', lc.step")
    assert nb.kernel_eval("lc.step") == "19", "a drag picked a step"
    labels = panel.get_attribute("data-break-labels") or ""
    assert labels, "the breaks in view are labelled"

    # a press and a release far apart with no move reported between them: a drag too
    view.locator(".nbviz-lc-reset").click()
    expect(view).to_have_attribute("data-domain", "")
    press = {"clientY": y, "button": 0, "pointerId": 7, "isPrimary": True, "bubbles": True}
    canvas.dispatch_event("pointerdown", {**press, "clientX": box["x"] + box["width"] * 0.4})
    canvas.dispatch_event("pointerup", {**press, "clientX": box["x"] + box["width"] * 0.7})
    expect(view).not_to_have_attribute("data-domain", "")
    nb.run_code("'step', lc.step")
    assert nb.kernel_eval("lc.step") == "19", "a release without moves picked a step"

    # a click without movement picks the step under it (in the zoomed steps)
    domain = [float(v) for v in (view.get_attribute("data-domain") or "").split(",")]
    page.mouse.click(box["x"] + 58 + 2, y)
    nb.wait_kernel("lc.step", lambda v: int(v) != 19 and domain[0] - 1 <= int(v) <= domain[1])


def test_parallel_coordinates_keep_long_config_names_inside_the_plot(nb, tmp_path: Path) -> None:
    code = (
        "import nbviz\n"
        "runs = []\n"
        "for i, (sched, lr) in enumerate([('cosine_with_restarts_and_warmup', 0.1),\n"
        "        ('linear_decay_to_zero_after_warmup', 0.03), ('constant', 0.01)]):\n"
        f"    config = {{{LONG_KEY!r}: sched, 'lr': lr}}\n"
        f"    r = nbviz.Run({str(tmp_path)!r} + f'/r{{i}}', config=config)\n"
        "    for s in range(10):\n"
        "        r.log(s, train_loss=1.0 / (1 + lr * s))\n"
        "    r.flush(); runs.append(r)\n"
        "rt = nbviz.RunsTable(runs)\nrt"
    )
    view = nb.run("sweep-table.ipynb", [code], ready=".nbviz-runs-table")
    canvas = view.locator("canvas.nbviz-rt-parallel")
    expect(canvas).to_be_visible()
    expect(canvas).to_have_attribute("data-axes", re.compile(r'"key".*"key"'))
    screenshot(view.locator(".nbviz-rt-pc"), "runs-table-long-config-names")
    axes = json.loads(canvas.get_attribute("data-axes") or "[]")
    first = next(a for a in axes if LONG_KEY in a["key"])
    box = canvas.bounding_box()
    assert box is not None
    assert first is axes[0]
    # over the first axis' name (cut to fit): the whole name is the tooltip
    nb.page.mouse.move(box["x"] + first["x"], box["y"] + first["top"] - 20)
    expect(canvas).to_have_attribute("title", LONG_KEY)
    nb.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 150)
    expect(canvas).not_to_have_attribute("title", LONG_KEY)
