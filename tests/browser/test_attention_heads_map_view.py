"""The LayerBrowser's heads map in a real JupyterLab: heads x steps, a dead head named."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from playwright.sync_api import expect
from training import lm_steps

import nbviz

DEAD = (0, 1)  # block, head


def dead_head_run(path: Path, steps: int = 12, every: int = 2) -> Path:
    """A small GPT-style model whose block 0 head 1 has a zero value projection, kept zero."""
    from reference_models import GPT, GPTConfig, token_batch

    config = GPTConfig(vocab=48, context=10, width=32, heads=4, blocks=2)
    torch.manual_seed(0)
    model = GPT(config)
    block, head = DEAD
    d = config.width // config.heads
    rows = slice(2 * config.width + head * d, 2 * config.width + (head + 1) * d)
    qkv = model.blocks[block].attn.qkv
    for p in (qkv.weight, qkv.bias):
        with torch.no_grad():
            p[rows] = 0.0
        keep = torch.ones_like(p)
        keep[rows] = 0.0
        p.register_hook(lambda g, keep=keep: g * keep)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    probe_ids = token_batch(gen, 2, config.context, config.vocab)
    with nbviz.Run(path) as run:
        run.watch(model, every=every, attention=probe_ids)
        lm_steps(run, model, opt, gen, steps, batch=8)
    return Path(path)


def test_layer_browser_shows_an_attention_layers_heads_with_the_dead_one(nb, tmp_path: Path):
    run_dir = dead_head_run(tmp_path / "lm")
    nb.run(
        "attention_heads.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            "lb = nbviz.LayerBrowser(run)\n"
            "lb",
        ],
        ready=".nbviz-layer-browser .nbviz-lb-row",
    )
    page = nb.page
    view = page.locator(".nbviz-layer-browser")
    # one row per attention layer's heads, after its module's row
    heads_row = view.locator('.nbviz-lb-row[data-layer="blocks.0.attn/heads"]')
    expect(heads_row).to_have_count(1)
    expect(heads_row).to_contain_text("4 \u00d7 8")
    expect(view.locator('.nbviz-lb-row[data-layer="blocks.1.attn/heads"]')).to_have_count(1)
    heads_row.click()
    nb.wait_kernel("lb.selected_layer", "'blocks.0.attn/heads'")
    frame = view.locator(".nbviz-lb-dead-frame")
    expect(frame).to_have_attribute("data-axis", "head")
    expect(view.locator(".nbviz-lb-dead-title")).to_contain_text(
        "fraction of each head's output that is ~0 (heads \u00d7 steps"
    )
    dead = view.locator(".nbviz-lb-dead-heads")
    expect(dead).to_have_attribute("data-dead", "1")
    expect(dead).to_have_text("dead: head 1 (output ~0 at every capture shown)")
    expect(view.locator(".nbviz-lb-dead-legend")).to_contain_text("~0 everywhere (dead)")
    # the map's read-out under the pointer: head 1's row, its output rms 0
    canvas = view.locator("canvas.nbviz-lb-dead")
    box = canvas.bounding_box()
    assert box is not None
    canvas.hover(position={"x": box["width"] * 0.5, "y": box["height"] * (1.5 / 4)})
    expect(view.locator(".nbviz-lb-dead-caption")).to_have_text(
        re.compile(r"^head 1 at step \d+: output rms 0, max \|x\| 0, ~0 on 100% of its output$")
    )
    canvas.hover(position={"x": box["width"] * 0.5, "y": box["height"] * (0.5 / 4)})
    expect(view.locator(".nbviz-lb-dead-caption")).to_have_text(
        re.compile(r"^head 0 at step \d+: output rms [0-9.e-]+, max \|x\| [0-9.e-]+, ~0 on 0%")
    )
    view.locator(".nbviz-lb-detail").scroll_into_view_if_needed()
    nb.screenshot("attention-heads-map")
    # the other block's heads are all alive
    view.locator('.nbviz-lb-row[data-layer="blocks.1.attn/heads"]').click()
    nb.wait_kernel("lb.selected_layer", "'blocks.1.attn/heads'")
    expect(view.locator(".nbviz-lb-dead-heads")).to_have_text(
        "no head is ~0 at every capture shown"
    )
    # a module's own map keeps its unit axis
    view.locator('.nbviz-lb-row[data-layer="blocks.0.mlp.act"]').click()
    nb.wait_kernel("lb.selected_layer", "'blocks.0.mlp.act'")
    expect(frame).to_have_attribute("data-axis", "unit")
    expect(view.locator(".nbviz-lb-dead-heads")).to_have_count(0)
    assert page.locator(".nbviz-error").count() == 0


def test_attention_maps_give_each_heads_output_rms_the_dead_one_zero(nb, tmp_path: Path):
    run_dir = dead_head_run(tmp_path / "lm")
    nb.run(
        "attention_heads_rms.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            "a = nbviz.AttentionMaps(run)\n"
            "a",
        ],
        ready=".nbviz-attention canvas.nbviz-attn-cell",
    )
    view = nb.page.locator(".nbviz-attention")
    block, head = DEAD
    cell = view.locator(f'canvas.nbviz-attn-cell[data-layer="{block}"][data-head="{head}"]')
    expect(cell).to_have_attribute(
        "title", re.compile(r"^blocks\.0\.attn head 1 \(dead\): entropy [0-9.e-]+, output rms 0$")
    )
    expect(cell).to_have_class(re.compile(r"\bnbviz-dead\b"))
    expect(view.locator(".nbviz-attn-flags")).to_contain_text("dead: blocks.0.attn head 1")
    alive = view.locator('canvas.nbviz-attn-cell[data-layer="0"][data-head="0"]')
    expect(alive).to_have_attribute(
        "title", re.compile(r"output rms [1-9][0-9.e-]*|output rms 0\.\d")
    )
    cell.click()
    nb.wait_kernel("a.selected", f"[{block}, {head}]")
    expect(view.locator(".nbviz-attn-bigtitle")).to_contain_text(
        f"blocks.{block}.attn, head {head} (step 10; entropy"
    )
    expect(view.locator(".nbviz-attn-bigtitle")).to_contain_text("output rms 0)")
    nb.screenshot("attention-heads-rms")
