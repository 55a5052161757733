"""Many runs in a real JupyterLab: brushing the parallel coordinates chooses the runs a
linked LossCurves draws, and the download menu saves what the view shows."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from nbviz.store import Writer

LRS = (0.3, 0.1, 0.03, 0.01)
OPTIMIZERS = ("sgd", "adam", "adamw")


def sweep(root: Path, n_runs: int, n_steps: int) -> Path:
    """Runs with config lr/optimizer/seed, train_loss every step, val_loss every 50 steps."""
    for i in range(n_runs):
        lr, opt = LRS[i % len(LRS)], OPTIMIZERS[(i // len(LRS)) % len(OPTIMIZERS)]
        w = Writer(root / f"run{i:03d}")
        w.set_meta("name", f"run{i:03d}")
        w.set_meta("config", {"lr": lr, "optimizer": opt, "seed": i})
        now = time.time() - n_steps
        floor = 0.1 + 0.2 * abs(math.log10(lr / 0.03))
        rows = []
        for s in range(n_steps):
            v = floor + 2 * math.exp(-s * lr * (2 if opt != "sgd" else 1) / 10)
            v *= 1 + 0.05 * math.sin(s * 1.7 + i)
            rows.append(("train_loss", s, v, now + s * (1 + i % 3)))
            if s % 50 == 49:
                rows.append(("val_loss", s, v * 1.1, now + s * (1 + i % 3)))
        w.insert("scalars", rows)
        w.close()
    return root


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep(tmp_path_factory.mktemp("sweep"), 12, 300)


def axis_point(canvas, key: str, value: float, axes_json: str, lo: float, hi: float) -> dict:
    """Where ``value`` lies on the axis ``key`` of the parallel coordinates (canvas px)."""
    axis = next(a for a in json.loads(axes_json) if a["key"] == key)
    y = axis["bottom"] - (value - lo) / (hi - lo) * (axis["bottom"] - axis["top"])
    return {"x": axis["x"], "y": y}


def test_brushing_the_parallel_coordinates_selects_runs_and_the_curves_follow(
    nb, small_sweep: Path
) -> None:
    nb.run(
        "many.ipynb",
        [
            "import nbviz, ipywidgets as W\n"
            f"runs = nbviz.open_runs({str(small_sweep)!r})\n"
            "lc = nbviz.LossCurves(runs)\n"
            "rt = nbviz.RunsTable(runs).link(lc)\n"
            "W.VBox([rt, lc])",
        ],
    )
    page = nb.page
    canvas = page.locator("canvas.nbviz-rt-parallel")
    expect(canvas).to_have_attribute("data-axes", re.compile(r"config:lr"))
    expect(page.locator(".nbviz-loss-curves")).to_have_attribute("data-series", "24")
    axes = canvas.get_attribute("data-axes")
    keys = [a["key"] for a in json.loads(axes)]
    assert keys == ["config:lr", "config:optimizer", "config:seed", "best:val_loss"]
    # drag along the lr axis from above its top down to halfway between 0.1 and 0.3
    top = axis_point(canvas, "config:lr", 0.3, axes, 0.01, 0.3)
    mid = axis_point(canvas, "config:lr", 0.2, axes, 0.01, 0.3)
    box = canvas.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + top["x"], box["y"] + top["y"] - 6)
    page.mouse.down()
    page.mouse.move(box["x"] + mid["x"], box["y"] + mid["y"], steps=5)
    page.mouse.up()
    expected = "['run000', 'run004', 'run008']"  # lr=0.3
    nb.wait_kernel("rt.selected_runs", expected)
    nb.wait_kernel("lc.selected_runs", expected)
    # the curves draw those three runs (train and val each) and the table lists them
    expect(page.locator(".nbviz-loss-curves")).to_have_attribute("data-series", "6")
    expect(page.locator(".nbviz-runs-table")).to_have_attribute("data-selected", "3")
    expect(page.locator(".nbviz-rt-table tbody tr")).to_have_count(3)
    expect(page.locator(".nbviz-lc-legend .nbviz-lc-run")).to_have_count(3)
    # a filter narrows the brushed runs: optimizer adam among them is run004
    page.locator('select.nbviz-rt-filter[data-key="config:optimizer"]').select_option("adam")
    nb.wait_kernel("lc.selected_runs", "['run004']")
    expect(page.locator(".nbviz-loss-curves")).to_have_attribute("data-series", "2")
    nb.screenshot("runs-table-parallel-selection")
    page.locator(".nbviz-rt-clear").click()
    nb.wait_kernel("lc.selected_runs", "[]")
    expect(page.locator(".nbviz-loss-curves")).to_have_attribute("data-series", "24")


def test_loss_curves_csv_download_holds_the_points_drawn(nb, small_sweep: Path) -> None:
    nb.run(
        "csv.ipynb",
        [
            "import nbviz\n"
            f"runs = nbviz.open_runs({str(small_sweep)!r})[:2]\n"
            "lc = nbviz.LossCurves(runs, x_axis='relative')\n"
            "lc",
        ],
    )
    page = nb.page
    view = page.locator(".nbviz-loss-curves")
    expect(view).to_have_attribute("data-x-axis", "relative")
    expect(view.locator(".nbviz-lc-readout").first).to_contain_text("since start")
    view.locator(".nbviz-export-button").click()
    with page.expect_download() as info:
        view.locator('.nbviz-export-item[data-format="csv"]').click()
    download = info.value
    assert download.suggested_filename == "loss_curves.csv"
    lines = Path(download.path()).read_text().splitlines()
    assert lines[0] == "run,name,step,relative_time,value"
    body = [line.split(",") for line in lines[1:]]
    # two runs of 300 train_loss and 6 val_loss points, all drawn (short series are not summarised)
    assert len(body) == 2 * (300 + 6)
    frame_rows = int(nb.kernel_eval("len(lc.data())"))
    assert frame_rows == len(body)
    first = nb.kernel_eval(
        "(lambda d: (lambda r: f'{r.step},{r.relative_time:.3f},{r.value:.6f}')"
        "(d[(d.run == 'run001') & (d.name == 'val_loss')].iloc[0]))(lc.data())"
    )
    step, rel, value = first.strip("'").split(",")
    row = next(r for r in body if r[0] == "run001" and r[1] == "val_loss")
    assert row[2] == step
    assert abs(float(row[3]) - float(rel)) < 1e-3
    assert abs(float(row[4]) - float(value)) < 1e-6
    view.locator(".nbviz-export-button").click()
    with page.expect_download() as info:
        view.locator('.nbviz-export-item[data-format="svg"]').click()
    svg = Path(info.value.path()).read_text()
    assert svg.startswith("<?xml") and "<path" in svg and "train_loss" in svg


def test_a_hundred_runs_table_and_grouped_curves(nb, tmp_path_factory) -> None:
    root = sweep(tmp_path_factory.mktemp("hundred"), 100, 2000)
    nb.run(
        "hundred.ipynb",
        [
            "import nbviz, ipywidgets as W\n"
            f"runs = nbviz.open_runs({str(root)!r})\n"
            "lc = nbviz.LossCurves(runs, group_by='optimizer')\n"
            "rt = nbviz.RunsTable(runs).link(lc)\n"
            "W.VBox([rt, lc])",
        ],
        timeout_ms=240_000,
    )
    page = nb.page
    expect(page.locator(".nbviz-rt-table tbody tr")).to_have_count(100, timeout=60_000)
    expect(page.locator(".nbviz-loss-curves")).to_have_attribute("data-series", "6")
    expect(page.locator(".nbviz-lc-legend .nbviz-lc-run")).to_have_count(3)
    nb.screenshot("runs-table-100-grouped")
    page.locator(".nbviz-rt-table").scroll_into_view_if_needed()
    page.locator(".nbviz-loss-curves").scroll_into_view_if_needed()
    nb.screenshot("loss-curves-100-grouped")
    page.locator("select.nbviz-lc-axis").select_option("relative")
    nb.wait_kernel("lc.x_axis", "'relative'")
    expect(page.locator(".nbviz-loss-curves")).to_have_attribute("data-x-axis", "relative")
    nb.screenshot("loss-curves-100-grouped-relative-time")
