"""The training views in a real JupyterLab: they render, follow the scrubber, and
clicks reach the kernel."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect


def test_loss_curves_follow_the_scrubber(nb, demo_run_path: Path) -> None:
    nb.run(
        "loss.ipynb",
        [
            "import nbviz, traitlets, ipywidgets as W\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "sc = nbviz.StepScrubber(run); lc = nbviz.LossCurves(run)\n"
            "traitlets.link((sc, 'step'), (lc, 'step'))\n"
            "W.VBox([sc, lc])",
        ],
    )
    page = nb.page
    panel = page.locator('.nbviz-lc-panel[data-stem="loss"]')
    expect(panel.locator("canvas")).to_have_count(1)
    expect(panel.locator(".nbviz-lc-readout")).to_have_text(re.compile(r"^step 65: "))
    expect(page.locator(".nbviz-scrub-step")).to_contain_text("step 65")
    page.locator(".nbviz-scrub-first").click()
    expect(panel.locator(".nbviz-lc-readout")).to_have_text(re.compile(r"^step 0: train_loss"))
    nb.wait_kernel("lc.step", "0")
    nb.screenshot("loss-curves")


def test_histograms_ridge_and_heatmap_follow_a_click(nb, demo_run_path: Path) -> None:
    view = nb.run(
        "hist.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "h = nbviz.Histograms(run, signal='weights', layer='0.weight')\n"
            "h",
        ],
        ready=".nbviz-histograms",
    )
    expect(view.locator("canvas.nbviz-hist-ridge")).to_have_count(1)
    expect(view.locator(".nbviz-hist-current")).to_contain_text(
        re.compile(r"^step 65: [\d,]+ values")
    )
    expect(view.locator(".nbviz-hist-layer")).to_have_value("0.weight")
    heat = view.locator("canvas.nbviz-hist-heat")
    box = heat.bounding_box()
    assert box is not None and box["height"] > 100
    heat.click(position={"x": box["width"] / 2, "y": 2})  # the top row: the first histogram
    nb.wait_kernel("h.step", "0")
    expect(view.locator(".nbviz-hist-current")).to_contain_text("step 0:")
    view.locator(".nbviz-hist-signal").select_option("activations")
    nb.wait_kernel("h.signal", "'activations'")
    expect(view.locator(".nbviz-hist-layer")).not_to_have_value("0.weight")
    nb.screenshot("histograms")


def test_runs_table_sorts_and_highlights_a_run_in_loss_curves(nb, tmp_path: Path) -> None:
    nb.run(
        "runs.ipynb",
        [
            "import math, nbviz\n"
            "runs = []\n"
            "for lr in (0.3, 0.1, 0.03):\n"
            f"    r = nbviz.Run({str(tmp_path)!r} + f'/lr{{lr}}', config={{'lr': lr}})\n"
            "    for s in range(50):\n"
            "        r.log(s, train_loss=math.exp(-lr * s) + 0.1 * (lr == 0.3) * s / 50)\n"
            "    r.flush(); runs.append(r)\n"
            "lc = nbviz.LossCurves(runs)\n"
            "rt = nbviz.RunsTable(runs).link(lc)\n"
            "import ipywidgets as W; W.VBox([rt, lc])",
        ],
    )
    page = nb.page
    table = page.locator(".nbviz-rt-table")
    expect(table.locator("tbody tr")).to_have_count(3)
    table.locator('th[data-key="best:train_loss"]').click()
    nb.wait_kernel("rt.sort_by", "'best:train_loss'")
    # lower loss is better: lr=0.1 ends lowest (lr=0.3 turns back up at 0.04, lr=0.03 is slow)
    expect(table.locator("tbody tr").first).to_have_attribute("data-run", "lr0.1")
    expect(table.locator("tbody tr").first.locator("td.nbviz-rt-best")).not_to_have_count(0)
    table.locator('tbody tr[data-run="lr0.03"]').click()
    nb.wait_kernel("lc.highlight", "'lr0.03'")
    expect(page.locator(".nbviz-lc-run.nbviz-active")).to_have_text(re.compile("lr0.03"))
    nb.screenshot("runs-table")


def test_dashboard_scrubber_moves_every_view(nb, demo_run_path: Path) -> None:
    nb.run(
        "dash.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash",
        ],
    )
    page = nb.page
    expect(page.locator(".nbviz-scrubber")).to_have_count(1)
    # the overview tab opens first: losses beside findings
    expect(page.locator(".nbviz-dash-tab-open")).to_have_text("Overview")
    expect(page.locator(".nbviz-loss-curves canvas").first).to_be_visible()
    nb.screenshot("dashboard-overview")
    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    nb.wait_kernel("dash.tab", "'layers'")
    expect(page.locator(".nbviz-layer-browser .nbviz-lb-row").first).to_be_visible()
    page.locator(".nbviz-scrub-first").click()
    for view in ("loss_curves", "layers", "histograms"):
        nb.wait_kernel(f"dash.{view}.step", "0")
    expect(page.locator(".nbviz-hist-current")).to_contain_text("step 0:")
    page.locator(".nbviz-scrub-forward").click()
    # the click reaches the kernel asynchronously: read the new step once it has moved
    moved = nb.wait_kernel("dash.scrubber.step", lambda v: v != "0")
    nb.wait_kernel("dash.histograms.step", moved)
    page.locator(".nbviz-layer-browser .nbviz-lb-row").nth(1).click()
    nb.wait_kernel("dash.layers.selected_layer", "'1'")
    expect(page.locator(".nbviz-lb-detail canvas").first).to_be_visible()
    nb.screenshot("dashboard")


def test_clicking_a_finding_moves_the_dashboard_and_opens_the_layer(nb, tmp_path: Path) -> None:
    nb.run(
        "health.ipynb",
        [
            "import torch, nbviz\n"
            "from torch import nn\n"
            "torch.manual_seed(0)\n"
            "model = nn.Sequential()\n"
            "model.add_module('fc1', nn.Linear(16, 32)); model.add_module('act1', nn.ReLU())\n"
            "model.add_module('fc2', nn.Linear(32, 4))\n"
            "with torch.no_grad(): model.fc1.bias.fill_(-10.0)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.05)\n"
            "x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))\n"
            f"run = nbviz.Run({str(tmp_path / 'dead')!r}); run.watch(model, every=1)\n"
            "for step in range(30):\n"
            "    opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), y)\n"
            "    loss.backward(); opt.step(); run.log(step, train_loss=loss)\n"
            "run.flush()\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash",
        ],
    )
    page = nb.page
    finding = page.locator('.nbviz-hr-item[data-check="dead_units"]').first
    expect(finding).to_contain_text("act1")
    expect(finding.locator(":scope > .nbviz-hr-evidence")).to_be_hidden()
    finding.click()
    nb.wait_kernel("dash.scrubber.step", "0")
    nb.wait_kernel("dash.layers.selected_layer", "'act1'")
    expect(page.locator(".nbviz-scrub-step")).to_contain_text("step 0")
    nb.screenshot("health-report")
    # the finding opened its layer: the Layers tab shows it, with its badge
    expect(page.locator(".nbviz-dash-tab-open")).to_have_text("Layers")
    expect(page.locator('.nbviz-lb-row[data-layer="act1"] .nbviz-badge-error')).to_have_count(1)
    page.locator('.nbviz-dash-tab[data-key="overview"]').click()
    expect(
        finding.locator(":scope > .nbviz-hr-evidence")
    ).to_be_visible()  # its own, not a consequence's


def test_every_view_of_an_empty_run_shows_a_message_not_a_blank_box(nb, tmp_path: Path) -> None:
    nb.run(
        "empty.ipynb",
        [
            "import nbviz, ipywidgets as W\n"
            f"run = nbviz.Run({str(tmp_path / 'empty')!r}); run.flush()\n"
            "views = [nbviz.LossCurves(run), nbviz.LayerBrowser(run), nbviz.Histograms(run),\n"
            "         nbviz.StepScrubber(run), nbviz.RunsTable([run]), nbviz.HealthReport(run)]\n"
            "W.VBox(views)",
        ],
    )
    page = nb.page
    for cls in ("loss-curves", "layer-browser", "histograms", "runs-table", "health"):
        box = page.locator(f".nbviz-{cls}")
        expect(box.locator(".nbviz-message")).to_have_count(1)
        expect(box.locator(".nbviz-message")).not_to_have_text("")
    nb.screenshot("empty-run")


def test_two_named_models_show_side_by_side_in_the_layer_browser(nb, tmp_path: Path) -> None:
    nb.run(
        "gan.ipynb",
        [
            "import torch, nbviz\n"
            "from torch import nn\n"
            "torch.manual_seed(0)\n"
            "gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))\n"
            "disc = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))\n"
            "opt_g = torch.optim.Adam(gen.parameters())\n"
            "opt_d = torch.optim.Adam(disc.parameters())\n"
            f"run = nbviz.Run({str(tmp_path / 'gan')!r})\n"
            "run.watch(gen, name='G', every=2, optimizer=opt_g)\n"
            "run.watch(disc, name='D', every=2, optimizer=opt_d)\n"
            "sp = nn.functional.softplus\n"
            "for step in range(10):\n"
            "    fake = gen(torch.randn(16, 4))\n"
            "    opt_d.zero_grad()\n"
            "    d_loss = sp(-disc(torch.randn(16, 8))).mean() + sp(disc(fake.detach())).mean()\n"
            "    d_loss.backward(); opt_d.step()\n"
            "    opt_g.zero_grad(); g_loss = sp(-disc(fake)).mean()\n"
            "    g_loss.backward(); opt_g.step()\n"
            "    run.log(step, d_loss=d_loss, g_loss=g_loss)\n"
            "run.flush()\n"
            "lb = nbviz.LayerBrowser(run)\n"
            "lb",
        ],
    )
    page = nb.page
    for layer in ("G.0", "G.1", "G.2", "D.0", "D.1", "D.2"):
        expect(page.locator(f'.nbviz-lb-row[data-layer="{layer}"]')).to_have_count(1)
    expect(page.locator('.nbviz-lb-row[data-layer="D.1"]')).to_contain_text("LeakyReLU")
    page.locator('.nbviz-lb-row[data-layer="D.1"]').click()
    nb.wait_kernel("lb.selected_layer", "'D.1'")
    nb.screenshot("two-models")
