"""An encoder-decoder (a Hugging Face BART) in a real JupyterLab: each map is drawn at its
own extent, a cross-attention target x source, and its detail names queries and keys
with their own tokens."""

from __future__ import annotations

import ast

import pytest
from playwright.sync_api import expect

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402

SOURCE, TARGET = 10, 6


def bart_run(path) -> None:
    from tiny_hf import bart_run

    bart_run(path, source=SOURCE, target=TARGET, probe_samples=1, every=2, steps=6).close()


def test_cross_attention_is_drawn_target_by_source_with_both_sequences(nb, tmp_path):
    torch.set_num_threads(1)
    bart_run(tmp_path / "run")
    layers = nbviz.open_run(tmp_path / "run").attention_layers()
    cross = layers.index("model.decoder.layers.1.encoder_attn")
    decoder = layers.index("model.decoder.layers.1.self_attn")
    view = nb.run(
        "bart_attention.ipynb",
        [f"import nbviz\na = nbviz.AttentionMaps(nbviz.open_run({str(tmp_path / 'run')!r}))\na"],
        ready=".nbviz-attention",
    )
    cells = view.locator("canvas.nbviz-attn-cell")
    expect(cells).to_have_count(6 * 4)  # 6 attention layers x 4 heads
    # a cross-attention map is wider than tall, a decoder's own square and smaller
    cell = view.locator(f'canvas.nbviz-attn-cell[data-layer="{cross}"][data-head="0"]')
    expect(cell).to_have_attribute("data-queries", str(TARGET))
    expect(cell).to_have_attribute("data-keys", str(SOURCE))
    box = cell.bounding_box()
    assert box is not None and box["width"] > 1.5 * box["height"]
    own = view.locator(f'canvas.nbviz-attn-cell[data-layer="{decoder}"][data-head="0"]')
    expect(own).to_have_attribute("data-keys", str(TARGET))
    # at initialisation every head spreads its attention: said once, not 24 times
    expect(view.locator(".nbviz-attn-flags")).to_have_text(
        "At the last capture: uniform: every head (24)"
    )
    nb.screenshot("attention-maps-bart-grid")

    cell.click()
    nb.wait_kernel("a.selected", f"[{cross}, 0]")
    expect(view.locator(".nbviz-attn-bigtitle")).to_contain_text(
        f"rows are {TARGET} queries, columns {SOURCE} keys"
    )
    queries = view.locator(".nbviz-attn-queries .nbviz-attn-token")
    keys = view.locator(".nbviz-attn-keys .nbviz-attn-token")
    expect(queries).to_have_count(TARGET)
    expect(keys).to_have_count(SOURCE)
    target_tokens = ast.literal_eval(nb.kernel_eval(f"a.axis_tokens[{cross}][0]"))
    assert queries.all_inner_texts() == target_tokens
    queries.nth(3).click()
    nb.wait_kernel("a.query", "3")
    weights = keys.evaluate_all("ts => ts.map(t => t.getAttribute('title'))")
    values = [float(w.split()[1]) for w in weights]
    assert sum(values) == pytest.approx(1.0, abs=0.02)  # one query's weights over the source
    expect(view.locator(".nbviz-attn-token-caption")).to_contain_text("(position 3) attends to")
    nb.screenshot("attention-maps-bart-cross")

    # the decoder's self-attention: one strip, its own tokens, causal
    view.locator(f'canvas.nbviz-attn-cell[data-layer="{decoder}"][data-head="1"]').click()
    nb.wait_kernel("a.selected", f"[{decoder}, 1]")
    tokens = view.locator(".nbviz-attn-tokens > .nbviz-attn-token")
    expect(tokens).to_have_count(TARGET)
    tokens.nth(2).click()
    nb.wait_kernel("a.query", "2")
    values = [
        float(w.split()[1])
        for w in tokens.evaluate_all("ts => ts.map(t => t.getAttribute('title'))")
    ]
    assert all(v == 0 for v in values[3:]) and sum(values) == pytest.approx(1.0, abs=0.02)
