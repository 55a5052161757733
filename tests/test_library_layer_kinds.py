"""Layers a library derives from torch's or writes itself are what they are to the checks:
an embedding subclass is a lookup table, a ``LlamaRMSNorm`` normalises."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nbviz
from nbviz.analysis.checks.depth import feeds_normalisation, is_lookup
from nbviz.analysis.checks.model import ModelLayout, layout


class ScaledEmbedding(nn.Embedding):
    """A library's embedding: a table whose rows come out scaled."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids) * self.embedding_dim**0.5


class OwnRMSNorm(nn.Module):
    """A normalisation written out, as libraries write theirs (not a torch.nn class)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = ScaledEmbedding(20, 16)
        self.proj = nn.Linear(16, 16)
        self.norm = OwnRMSNorm(16)
        self.head = nn.Linear(16, 5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.proj(self.embed(ids))))


def test_the_run_records_the_torch_layer_each_module_derives_from(tmp_path):
    model = Tagger()
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ids = torch.randint(0, 20, (4, 6))
        loss = nn.functional.cross_entropy(model(ids).transpose(1, 2), ids % 5)
        loss.backward()
        opt.step()
        run.log(0, train_loss=loss)
        run.flush()
        lay = layout(run)
    assert (lay.type_of("embed"), lay.kind_of("embed")) == ("ScaledEmbedding", "Embedding")
    assert (lay.type_of("norm"), lay.kind_of("norm")) == ("OwnRMSNorm", "OwnRMSNorm")
    assert lay.kind_of("proj") == "Linear"
    assert is_lookup(lay, "embed") and not is_lookup(lay, "proj")
    assert feeds_normalisation(lay, "proj")  # by its name: it says RMSNorm
    assert not feeds_normalisation(lay, "embed")


@pytest.mark.parametrize(
    "kind", ["LlamaRMSNorm", "T5LayerNorm", "ConvNextLayerNorm", "BatchNorm2d", "GroupNorm"]
)
def test_a_module_named_for_a_normalisation_normalises(kind):
    lay = ModelLayout(["fc", "norm"], {"fc": "Linear", "norm": kind}, [], (), None)
    assert feeds_normalisation(lay, "fc")


@pytest.mark.parametrize("kind", ["NormalMixture", "FrozenBatchNorm2d"])
def test_a_module_of_another_name_or_a_frozen_norm_does_not_normalise(kind):
    lay = ModelLayout(["fc", "other"], {"fc": "Linear", "other": kind}, [], (), None)
    assert not feeds_normalisation(lay, "fc")


def test_an_older_run_without_bases_reads_each_type_as_it_is():
    lay = ModelLayout(["emb"], {"emb": "Embedding"}, [], (), None)
    assert lay.kind_of("emb") == "Embedding" and is_lookup(lay, "emb")
    assert lay.kind_of("unknown") == "?"
