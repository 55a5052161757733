"""The attention view in a real JupyterLab: scrub the captures, pick a head, click a token."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect
from training import language_model_run


def test_attention_maps_scrub_pick_a_head_and_colour_the_tokens(nb, tmp_path: Path) -> None:
    run_dir = language_model_run(tmp_path / "lm", steps=12, every=3, collapse=(1, 2))
    view = nb.run(
        "attention.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            "a = nbviz.AttentionMaps(run)\n"
            "a",
        ],
        ready=".nbviz-attention",
    )
    # the grid: 2 layers x 4 heads, the planted head marked collapsed
    expect(view.locator("canvas.nbviz-attn-cell")).to_have_count(8)
    expect(view.locator('canvas.nbviz-collapsed[data-layer="1"][data-head="2"]')).to_have_count(1)
    expect(view.locator(".nbviz-attn-flags")).to_contain_text("collapsed: blocks.1.attn head 2")
    expect(view.locator(".nbviz-attn-step")).to_contain_text("step 9 (capture 4 of 4)")
    # scrub to the first capture
    view.locator(".nbviz-attn-slider").fill("0")
    nb.wait_kernel("a.step", "0")
    expect(view.locator(".nbviz-attn-step")).to_contain_text("step 0 (capture 1 of 4)")
    # pick the collapsed head: its map opens large with the sample's tokens
    view.locator('canvas.nbviz-attn-cell[data-layer="1"][data-head="2"]').click()
    nb.wait_kernel("a.selected", "[1, 2]")
    expect(view.locator(".nbviz-attn-bigtitle")).to_contain_text("blocks.1.attn, head 2")
    tokens = view.locator(".nbviz-attn-token")
    expect(tokens).to_have_count(10)
    expect(tokens.first).to_have_text(re.compile(r"^w\d+$"))
    # click a token: it becomes the query and the tokens it attends to are coloured
    tokens.nth(6).click()
    nb.wait_kernel("a.query", "6")
    expect(view.locator(".nbviz-attn-token.nbviz-query")).to_have_attribute("data-pos", "6")
    expect(view.locator(".nbviz-attn-token-caption")).to_contain_text("(position 6) attends to")
    weights = view.locator(".nbviz-attn-token").evaluate_all(
        "ts => ts.map(t => t.getAttribute('title'))"
    )
    assert all(w.startswith("weight ") for w in weights)
    values = [float(w.split()[1]) for w in weights]
    assert max(values) > 0.9  # a collapsed head: nearly all weight on one token
    assert all(v == 0 for v in values[7:])  # causal: nothing after the query
    # a click on a row of the large map picks that query
    big = view.locator("canvas.nbviz-attn-big")
    box = big.bounding_box()
    assert box is not None
    big.click(position={"x": box["width"] / 2, "y": box["height"] * 0.35})
    nb.wait_kernel("a.query", "3")
    nb.screenshot("attention-maps")
