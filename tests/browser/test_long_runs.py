"""A long run in a real JupyterLab: LossCurves draws its summary, and zooming in brings
every step of the window at full resolution from the kernel."""

from __future__ import annotations

import math
import re
from pathlib import Path

from playwright.sync_api import expect

import nbviz

N_STEPS = 30_000


def _long_run(path: Path) -> Path:
    run = nbviz.Run(path)
    for step in range(N_STEPS):
        # a sawtooth under a decay: its buckets' extremes are at a few steps each
        run.log(step, train_loss=math.exp(-step / 10_000) + 0.05 * (step % 37) / 37)
    run.close()
    return path


def _readout_steps(page, canvas, panel) -> set[int]:
    box = canvas.bounding_box()
    assert box is not None
    steps = set()
    for i in range(1, 30):
        page.mouse.move(box["x"] + box["width"] * i / 30, box["y"] + box["height"] / 2)
        text = panel.locator(".nbviz-lc-readout").text_content() or ""
        hit = re.match(r"^step ([\d,]+):", text)
        if hit:
            steps.add(int(hit.group(1).replace(",", "")))
    return steps


def test_zooming_into_a_long_run_shows_every_step_of_the_window(nb, tmp_path: Path) -> None:
    path = _long_run(tmp_path / "long")
    nb.run(
        "long.ipynb",
        [f"import nbviz\nlc = nbviz.LossCurves(nbviz.open_run({str(path)!r}))\nlc"],
    )
    page = nb.page
    panel = page.locator('.nbviz-lc-panel[data-stem="loss"]')
    canvas = panel.locator("canvas")
    expect(canvas).to_have_count(1)
    expect(page.locator(".nbviz-lc-notice")).to_contain_text("zoom in for detail")
    summary = nb.kernel_eval("(lc.series[0]['total'], lc.series[0]['stride'])")
    box = canvas.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for _ in range(6):  # each turn narrows the view e times: 30,000 steps to ~75
        page.mouse.wheel(0, -500)
        page.wait_for_timeout(150)
    page.wait_for_timeout(1500)  # the window's rows arrive from the kernel
    steps = _readout_steps(page, canvas, panel)
    span = max(steps) - min(steps)
    # the summary holds ~2 points per 16 steps: a window of ~75 steps shows about 9 of
    # them; at full resolution each of the 29 places the pointer visits finds its own step
    assert 29 <= span < 400, (span, sorted(steps), summary)
    assert len(steps) >= 20, (sorted(steps), summary)
    nb.screenshot("loss-curves-long-run-zoomed")
