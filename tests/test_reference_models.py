"""The reference models the probe's overhead is measured on are what they say they are."""

from __future__ import annotations

import pytest
import torch
from reference_models import GPT, WORKLOADS, EncoderClassifier, GPTConfig
from torch import nn


def test_gpt_is_causal_and_its_head_is_tied_to_the_token_embedding() -> None:
    torch.manual_seed(0)
    model = GPT().eval()
    ids = torch.randint(0, GPTConfig.vocab, (2, 16))
    changed = ids.clone()
    changed[:, 10] = (ids[:, 10] + 1) % GPTConfig.vocab
    with torch.no_grad():
        before, after = model(ids), model(changed)
    assert before.shape == (2, 16, GPTConfig.vocab)
    assert torch.equal(before[:, :10], after[:, :10])  # no position sees a later token
    assert not torch.equal(before[:, 10:], after[:, 10:])
    assert model.head.weight is model.tok.weight
    assert len(model.blocks) == 4
    assert isinstance(model.blocks[0].attn.qkv, nn.Linear)


def test_gpt_refuses_more_tokens_than_its_context() -> None:
    with pytest.raises(ValueError, match="65 tokens exceed the context of 64"):
        GPT()(torch.zeros(1, 65, dtype=torch.long))


def test_encoder_classifier_pools_the_tokens_into_class_logits() -> None:
    model = EncoderClassifier(layers=2)
    assert model.encoder.layers[0].self_attn.batch_first
    assert model(torch.randint(0, 512, (3, 20))).shape == (3, 4)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_trains_a_step_with_gradients_everywhere(name: str) -> None:
    workload = WORKLOADS[name]
    torch.manual_seed(0)
    model = workload.model()
    opt = workload.optimizer(model.parameters())
    x, y = workload.batch(seed=1)
    before = [p.detach().clone() for p in model.parameters()]
    loss = workload.step(model, opt, x, y)
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters())
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    # the same seed gives the same synthetic batch
    assert all(torch.equal(a, b) for a, b in zip(workload.batch(seed=1), (x, y), strict=True))
