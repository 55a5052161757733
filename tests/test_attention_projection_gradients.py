"""A freshly made BERT's query and key projections get little gradient (its attention
logits are small): that is not a gradient vanishing toward the input."""

from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402
from nbviz.analysis.checks.gradients import VANISH_RATIO  # noqa: E402

VOCAB, TOKENS = 30, 12


def test_a_healthy_bert_has_no_vanishing_gradients_though_its_queries_learn_slowly(tmp_path):
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = transformers.BertForSequenceClassification(config)
    run = nbviz.Run(tmp_path / "run")
    run.watch(model, every=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    for step in range(10):
        labels = torch.randint(0, 2, (8,), generator=gen)
        ids = torch.randint(2, VOCAB, (8, TOKENS), generator=gen)
        ids[:, 0] = labels  # the class is the first token
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()

    def relative(layer: str) -> float:  # gradient over weights, at the first capture
        grad = run.stats("gradient", layer=f"{layer}.weight")["norm"].iloc[0]
        return grad / run.stats("weight", layer=f"{layer}.weight")["norm"].iloc[0]

    query = relative("bert.encoder.layer.1.attention.self.query")
    assert query < VANISH_RATIO * relative("classifier")  # small beside a layer after it
    assert relative("bert.embeddings.word_embeddings") > 100 * query  # the input side learns
    findings = run.diagnose()
    assert "vanishing_gradients" not in set(findings["check"])
    assert run.triage().iloc[0]["cause"] == "healthy"
    run.close()
