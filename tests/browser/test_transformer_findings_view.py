"""Transformer findings in a real JupyterLab: a massive feature and a compounding residual
stream, each read in the HealthReport with its verdict, message and evidence."""

from __future__ import annotations

import torch
from playwright.sync_api import expect
from transformer_faults import FeatureGain, ScaledBlock, gain_after_block, train_lm


def test_massive_features_and_residual_growth_read_in_the_health_report(nb, tmp_path):
    torch.set_num_threads(1)
    massive = tmp_path / "massive"
    train_lm(massive, steps=20, plant=gain_after_block(FeatureGain(9, scale=1000.0))).close()

    def compound(model) -> None:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = ScaledBlock(block, 2.0)

    growing = tmp_path / "growing"
    train_lm(growing, steps=20, plant=compound).close()
    nb.run(
        "transformer_findings.ipynb",
        [
            "import nbviz\n"
            f"hm = nbviz.HealthReport(nbviz.open_run({str(massive)!r}), live=False)\n"
            "hm",
            f"hg = nbviz.HealthReport(nbviz.open_run({str(growing)!r}), live=False)\nhg",
        ],
    )
    page = nb.page
    reports = page.locator(".nbviz-health")
    expect(reports).to_have_count(2)

    # a feature amplified at every token: an architecture verdict, the feature named
    first = reports.nth(0)
    expect(first.locator(".nbviz-hr-verdict").first).to_have_attribute("data-cause", "architecture")
    item = first.locator("li.nbviz-hr-root[data-check='massive_activations']")
    expect(item).to_have_count(1)
    expect(item).to_have_attribute("data-layer", "blocks.1.after")
    expect(item.locator(".nbviz-hr-check")).to_have_text("massive activations")
    expect(item.locator(".nbviz-hr-message")).to_contain_text("feature 9")
    expect(item.locator(".nbviz-hr-message")).to_contain_text("amplified everywhere")
    item.locator(".nbviz-hr-head").click()
    nb.wait_kernel("hm.layer", repr("blocks.1.after"), timeout=60)
    expect(item.locator(".nbviz-hr-evidence")).to_be_visible()
    expect(item.locator(".nbviz-hr-evidence")).to_contain_text('"at_most_tokens": true')
    nb.screenshot("health-report-massive-activations")

    # a stream doubled by every block: the residual growth is the root
    second = reports.nth(1)
    root = second.locator("li.nbviz-hr-root[data-check='residual_growth']")
    expect(root).to_have_count(1)
    expect(root.locator(":scope > .nbviz-hr-message")).to_contain_text("grows block after block")
    # the exploding gradients that the scaled stream causes are folded under it
    toggle = root.locator(":scope > .nbviz-hr-toggle")
    toggle.click()
    folded = root.locator("li.nbviz-hr-consequence[data-check='exploding_gradients']")
    expect(folded.first).to_be_visible()
    root.scroll_into_view_if_needed()
    nb.screenshot("health-report-residual-growth")
