"""The Dashboard on one screen in a real JupyterLab: tabs of views side by side, the
scrubber kept in view while a tall tab is read, on a healthy run and a broken one."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

# where the notebook's visible area starts, and where the dashboard's sticky header is
HEADER_IN_VIEW = """() => {
  const area = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')
    ?? document.querySelector('.jp-NotebookPanel-notebook');
  const header = document.querySelector('.nbviz-dash-header');
  const tabs = document.querySelector('.nbviz-dash-tabs');
  const dash = document.querySelector('.nbviz-dashboard');
  return {area: area.getBoundingClientRect().top, header: header.getBoundingClientRect().top,
          below_tabs: header.getBoundingClientRect().bottom - tabs.getBoundingClientRect().bottom,
          dash: dash.getBoundingClientRect().top, height: dash.getBoundingClientRect().height};
}"""


def test_the_scrubber_stays_in_view_while_a_tall_tab_is_read(nb, demo_run_path: Path) -> None:
    nb.run(
        "layout.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash",
        ],
    )
    page = nb.page
    tabs = page.locator(".nbviz-dash-tab")
    expect(tabs).to_have_text(["Overview", "Layers", "Predictions"])
    heights = {}
    for key in ("overview", "layers", "predictions"):
        page.locator(f'.nbviz-dash-tab[data-key="{key}"]').click()
        expect(page.locator(".nbviz-dashboard")).to_have_attribute("data-tab", key)
        page.wait_for_timeout(300)  # let the views of a tab opened the first time lay out
        heights[key] = page.evaluate(HEADER_IN_VIEW)["height"]
    print(f"dashboard height per tab (px): {heights}")
    # the confusion matrix and the projector side by side in a 1280 px window
    left = page.locator(".nbviz-confusion").bounding_box()
    right = page.locator(".nbviz-projector").bounding_box()
    assert left and right and right["x"] > left["x"] + left["width"] - 1, (left, right)
    nb.screenshot("dashboard-predictions")

    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    page.locator(".nbviz-layer-browser").hover()
    for _ in range(3):
        page.mouse.wheel(0, 250)
    page.wait_for_timeout(300)
    where = page.evaluate(HEADER_IN_VIEW)
    assert where["dash"] < where["area"] - 100, f"the notebook did not scroll: {where}"
    assert abs(where["header"] - where["area"]) <= 2, f"the scrubber scrolled away: {where}"
    # what stays is the scrubber and the tabs; the lines on what is not shown scrolled
    # away with the views instead of covering them
    assert where["below_tabs"] <= 4, f"the stuck header holds more than the tabs: {where}"
    expect(page.locator(".nbviz-dash-pending")).to_contain_text("Not shown")
    expect(page.locator(".nbviz-dash-header .nbviz-dash-pending")).to_have_count(0)
    expect(page.locator(".nbviz-scrub-step")).to_be_in_viewport()
    page.locator(".nbviz-scrub-first").click()  # still usable where it stays
    nb.wait_kernel("dash.layers.step", "0")
    expect(page.locator(".nbviz-lb-step")).to_have_text(re.compile(r"^step 0"))
    nb.screenshot("dashboard-layers-scrolled")


def test_the_dashboard_of_a_diverging_run_on_one_screen(nb, tmp_path: Path) -> None:
    nb.run(
        "broken.ipynb",
        [
            "import torch, nbviz\n"
            "from torch import nn\n"
            "torch.manual_seed(0)\n"
            "model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))\n"
            "opt = torch.optim.SGD(model.parameters(), lr=8.0)\n"
            "x, y = torch.randn(64, 16) * 4, torch.randint(0, 4, (64,))\n"
            f"run = nbviz.Run({str(tmp_path / 'diverging')!r}); run.watch(model, every=1)\n"
            "for step in range(40):\n"
            "    opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), y)\n"
            "    loss.backward(); opt.step(); run.log(step, train_loss=loss)\n"
            "run.flush()\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash",
        ],
    )
    page = nb.page
    findings = page.locator(".nbviz-health .nbviz-hr-item")
    expect(findings.first).to_be_visible()
    expect(page.locator(".nbviz-dash-pending")).to_contain_text("predictions")
    nb.screenshot("dashboard-broken-overview")
    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    expect(page.locator(".nbviz-layer-browser .nbviz-lb-row").first).to_be_visible()
    nb.screenshot("dashboard-broken-layers")
