"""Hand-written attention (a Hugging Face Llama with ``eager`` attention) in a real
JupyterLab: its maps fill the attention view, causal and per head, as SDPA's would."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402

VOCAB, TOKENS = 40, 8


def eager_llama_run(path) -> None:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    model = transformers.LlamaForCausalLM(config)
    run = nbviz.Run(path)
    probe_ids = torch.arange(TOKENS).reshape(1, -1)
    run.watch(model, every=2, attention=probe_ids, tokens=lambda i: f"w{i}")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    for step in range(6):
        ids = torch.randint(0, VOCAB, (4, TOKENS), generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.close()


def test_eager_attention_maps_fill_the_view(nb, tmp_path):
    torch.set_num_threads(1)
    eager_llama_run(tmp_path / "run")
    view = nb.run(
        "eager_attention.ipynb",
        [
            f"import nbviz\na = nbviz.AttentionMaps(nbviz.open_run({str(tmp_path / 'run')!r}))\na",
        ],
        ready=".nbviz-attention",
    )
    expect(view.locator("canvas.nbviz-attn-cell")).to_have_count(8)  # 2 layers x 4 heads
    view.locator('canvas.nbviz-attn-cell[data-layer="1"][data-head="3"]').click()
    nb.wait_kernel("a.selected", "[1, 3]")
    expect(view.locator(".nbviz-attn-bigtitle")).to_contain_text("model.layers.1.self_attn, head 3")
    tokens = view.locator(".nbviz-attn-token")
    expect(tokens).to_have_count(TOKENS)
    tokens.nth(4).click()
    nb.wait_kernel("a.query", "4")
    weights = tokens.evaluate_all("ts => ts.map(t => t.getAttribute('title'))")
    values = [float(w.split()[1]) for w in weights]
    assert sum(values) == pytest.approx(1.0, abs=0.01)  # one query's weights
    assert all(v == 0 for v in values[5:])  # causal: nothing after the query
    assert all(v > 0 for v in values[:5])
    nb.screenshot("attention-maps-eager-llama")
