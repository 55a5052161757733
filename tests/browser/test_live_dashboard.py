"""A Dashboard followed live in a real JupyterLab: made before the first step, its cells
run again in the same kernel, the run recorded afresh at the same path."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

SETUP = """\
import threading, time, torch, nbviz
from torch import nn
dashes = globals().setdefault('dashes', [])

def train(run, model, steps, pause=0.02, start=0):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(len(dashes))
    for step in range(start, start + steps):
        x, y = torch.randn(32, 12, generator=g), torch.randint(0, 4, (32,), generator=g)
        opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), y)
        loss.backward(); opt.step(); run.log(step, train_loss=loss)
        time.sleep(pause)
    run.flush()
"""


def live_cells(path: Path, steps: int) -> list[str]:
    """The cells a person writes: a run, a probe, the dashboard, the training loop."""
    return [
        SETUP,
        f"run = nbviz.Run({str(path)!r}, overwrite=True)",
        "model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))\n"
        "probe = run.watch(model, every=5)",
        "dash = nbviz.Dashboard(run); dashes.append(dash)\ndash",
        f"train(run, model, {steps})",
    ]


def test_rerunning_the_live_cells_in_one_kernel_the_dashboard_follows(nb, tmp_path) -> None:
    path = tmp_path / "live"
    nb.run("live.ipynb", live_cells(path, 24))
    page = nb.page
    scrubber = page.locator(".nbviz-scrub-step")
    # made before the first capture, the dashboard gained the Layers tab as captures arrived
    expect(scrubber).to_have_text(re.compile(r"^step 23 · 24 of 24"))
    expect(page.locator('.nbviz-dash-tab[data-key="layers"]')).to_be_visible()
    expect(page.locator(".nbviz-lc-readout").first).to_have_text(re.compile(r"^step 23: "))
    assert nb.kernel_eval("len(dashes)") == "1"

    # run every cell again: a fresh run at the same path, a new probe, a new dashboard
    nb.run_all(timeout_ms=120_000)
    assert nb.kernel_eval("len(dashes)") == "2"
    expect(scrubber).to_have_count(1)  # the cell's output is the new dashboard
    expect(scrubber).to_have_text(re.compile(r"^step 23 · 24 of 24"))
    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    expect(page.locator(".nbviz-lb-step")).to_have_text(re.compile(r"^step 23 "))
    nb.screenshot("live-rerun-layers")

    # the first dashboard (its run was replaced) shows the new run and says so
    out = nb.run_code("dashes[0]")
    expect(out.locator(".nbviz-dash-banner")).to_contain_text("recorded afresh")
    expect(out.locator(".nbviz-scrub-step")).to_have_text(re.compile(r"^step 23 · 24 of 24"))

    # and it keeps following: more steps logged now reach both
    nb.run_code("train(run, model, 10, start=24)")
    nb.assert_no_cell_errors()
    nb.wait_kernel("[d.scrubber.step for d in dashes]", "[33, 33]")
    expect(out.locator(".nbviz-scrub-step")).to_have_text(re.compile(r"^step 33 · 34 of 34"))
    nb.screenshot("live-rerun-replaced")


def test_a_dashboard_made_before_the_first_capture_gains_its_views(nb, tmp_path) -> None:
    path = tmp_path / "early"
    cells = live_cells(path, 0)
    nb.run("early.ipynb", cells)
    page = nb.page
    dash = page.locator(".nbviz-dashboard")
    expect(dash.locator(".nbviz-dash-pending")).to_contain_text("LayerBrowser: no captures")
    expect(dash.locator(".nbviz-dash-tab")).to_have_count(0)
    nb.screenshot("live-before-first-step")
    # training runs in the background while the page is watched
    nb.run_code("t = threading.Thread(target=train, args=(run, model, 30, 0.05)); t.start()")
    expect(dash.locator('.nbviz-dash-tab[data-key="overview"]')).to_be_visible(timeout=60_000)
    expect(dash.locator('.nbviz-dash-tab[data-key="layers"]')).to_be_visible(timeout=60_000)
    expect(dash.locator(".nbviz-scrub-step")).to_have_text(
        re.compile(r"^step 29 · 30 of 30"), timeout=60_000
    )
    expect(dash.locator(".nbviz-dash-pending")).not_to_contain_text("no captures")
    dash.locator('.nbviz-dash-tab[data-key="layers"]').click()
    expect(dash.locator(".nbviz-layer-browser .nbviz-lb-row").first).to_be_visible()
    expect(dash.locator(".nbviz-lb-step")).to_have_text(re.compile(r"^step 29 "))
    dash.locator('.nbviz-dash-tab[data-key="overview"]').click()
    expect(dash.locator(".nbviz-lc-readout").first).to_have_text(re.compile(r"^step 29: "))
    nb.screenshot("live-views-arrived")
