"""``run.evaluate`` lines a Hugging Face language model's positions up with its labels as
its own loss does, even where the pass ignores a pad id and the model ignores -100, and says
so where no alignment matches the model's loss."""

from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import nbviz  # noqa: E402

VOCAB, TOKENS = 30, 8


def test_pad_id_labels_of_a_causal_lm_are_shifted_as_the_model_shifts_them(tmp_path):
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1, n_embd=16, n_head=2, vocab_size=VOCAB, n_positions=16
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(1, VOCAB, (3, TOKENS))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids = ids * mask  # the pad id 0 in the labels too, no -100
    run = nbviz.Run(tmp_path / "run")
    run.evaluate(
        0, model, [{"input_ids": ids, "attention_mask": mask, "labels": ids}], ignore_index=0
    )
    frame = run.token_losses(0)
    assert frame.groupby("id").size().tolist() == [TOKENS - 1] * 3  # position t scored on t + 1
    first = frame[(frame["id"] == 0) & ~frame["padding"]]
    assert first["token_id"].tolist() == ids[0, 1:].tolist()
    run.close()


class OddLoss(nn.Module):
    """A Hugging Face-like model (it has a config) whose loss is neither alignment's."""

    def __init__(self) -> None:
        super().__init__()
        self.config = object()
        self.emb, self.out = nn.Embedding(VOCAB, 8), nn.Linear(8, VOCAB)

    def forward(self, input_ids, labels=None):
        return {"logits": self.out(self.emb(input_ids)), "loss": torch.tensor(123.0)}


def test_a_model_loss_that_no_alignment_matches_is_warned_of(tmp_path):
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (2, TOKENS))
    run = nbviz.Run(tmp_path / "run")
    with pytest.warns(UserWarning, match="neither the cross-entropy") as caught:
        run.evaluate(0, OddLoss().eval(), [{"input_ids": ids, "labels": ids}])
    assert caught[0].filename == __file__
    assert run.token_losses(0).groupby("id").size().tolist() == [TOKENS] * 2
    run.close()
