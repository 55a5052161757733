"""``run.evaluate`` hands a dict batch's other entries to the model where its ``forward``
names them, and a tuple of inputs as its arguments: a padding mask beside the input
reaches the model as in training."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nbviz


class PaddedEncoder(nn.Module):
    """``nn.MultiheadAttention`` over tokens, with the padding mask as a keyword."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(20, 16)
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        h = self.embed(x)
        h = self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]
        return self.head(h[:, 0])


def test_a_padding_mask_beside_the_input_reaches_the_model(tmp_path):
    model = PaddedEncoder().eval()
    x = torch.randint(1, 20, (8, 6))
    pad = torch.arange(6) >= torch.tensor([6, 5, 4, 3, 6, 2, 3, 4])[:, None]
    labels = torch.arange(8) % 3
    with torch.no_grad():
        masked = model(x, pad=pad)
        assert not torch.allclose(masked, model(x))  # the mask matters to this batch
    with nbviz.Run(tmp_path / "run") as run:
        got = run.evaluate(0, model, [{"x": x, "pad": pad, "label": labels, "note": "ignored"}])
    expected = nn.functional.cross_entropy(masked, labels)
    assert got["val_loss"] == pytest.approx(float(expected), rel=1e-5)


def test_a_tuple_of_inputs_is_the_models_arguments(tmp_path):
    model = PaddedEncoder().eval()
    x = torch.randint(1, 20, (4, 6))
    pad = torch.arange(6) >= torch.tensor([6, 2, 3, 4])[:, None]
    labels = torch.tensor([0, 1, 2, 0])
    with torch.no_grad():
        masked = model(x, pad)
    with nbviz.Run(tmp_path / "run") as run:
        got = run.evaluate(0, model, [((x, pad), labels)])
        assert run.samples(split="val")["id"].tolist() == [0, 1, 2, 3]  # the token ids kept
    expected = nn.functional.cross_entropy(masked, labels)
    assert got["val_loss"] == pytest.approx(float(expected), rel=1e-5)
