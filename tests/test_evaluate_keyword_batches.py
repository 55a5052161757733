"""``run.evaluate`` on dict batches of a model's keyword arguments (Hugging Face's
``input_ids``, ``attention_mask``, ``labels``): the model gets its mask (and a language
model its labels), and the positions line up with the labels as the model's own loss
lines them up."""

from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402

VOCAB, TOKENS, PAD = 30, 10, 0


def padded_ids(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids 1.. with the tail of each row padded (0), and the mask of real tokens."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (n, TOKENS), generator=gen)
    lengths = torch.randint(4, TOKENS + 1, (n,), generator=gen)
    mask = (torch.arange(TOKENS) < lengths[:, None]).long()
    return ids * mask, mask


def tiny_gpt2() -> transformers.GPT2LMHeadModel:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=16, pad_token_id=PAD
    )
    return transformers.GPT2LMHeadModel(config).eval()


def test_a_causal_lms_labels_are_scored_as_the_model_scores_them(tmp_path):
    model = tiny_gpt2()
    ids, mask = padded_ids(6, seed=1)
    labels = ids.masked_fill(mask == 0, -100)  # what a collator gives: the model shifts them
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    with torch.no_grad():
        own = float(model(**batch).loss)
    run = nbviz.Run(tmp_path / "run")
    got = run.evaluate(0, model, [batch], tokens=[f"w{i}" for i in range(VOCAB)])
    assert got["val_loss"] == pytest.approx(own, rel=1e-5)
    frame = run.token_losses(0)
    # position t is scored on token t + 1: one position less, the padding left out
    assert frame.groupby("id").size().tolist() == [TOKENS - 1] * 6
    real = frame[~frame["padding"]]
    assert len(real) == int(mask[:, 1:].sum())
    first = real[real["id"] == 0]
    assert first["token_id"].tolist() == ids[0, 1 : int(mask[0].sum())].tolist()
    run.close()


def test_an_encoder_decoders_labels_are_scored_as_given_even_when_they_copy_the_input(
    tmp_path,
):
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=VOCAB,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=16,
        pad_token_id=PAD,
        decoder_start_token_id=2,
    )
    model = transformers.BartForConditionalGeneration(config).eval()
    ids, mask = padded_ids(4, seed=2)
    labels = ids.masked_fill(mask == 0, -100)  # a copy task: the decoder's inputs come from them
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    with torch.no_grad():
        own = float(model(**batch).loss)
    run = nbviz.Run(tmp_path / "run")
    got = run.evaluate(0, model, [batch])
    assert got["val_loss"] == pytest.approx(own, rel=1e-5)
    frame = run.token_losses(0)
    assert frame.groupby("id").size().tolist() == [TOKENS] * 4
    assert int((~frame["padding"]).sum()) == int(mask.sum())
    run.close()


def test_a_classifier_gets_its_attention_mask(tmp_path):
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=3,
    )
    model = transformers.BertForSequenceClassification(config).eval()
    ids, mask = padded_ids(8, seed=3)
    labels = torch.arange(8) % 3
    with torch.no_grad():
        masked = model(input_ids=ids, attention_mask=mask).logits
        unmasked = model(input_ids=ids).logits
    assert not torch.allclose(masked, unmasked)  # the mask matters to this batch
    run = nbviz.Run(tmp_path / "run")
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels, "ids": torch.arange(8)}
    got = run.evaluate(0, model, [batch])
    expected = torch.nn.functional.cross_entropy(masked, labels)
    assert got["val_loss"] == pytest.approx(float(expected), rel=1e-5)
    predictions = run.predictions(0).sort_values("id")
    assert predictions["pred"].tolist() == masked.argmax(1).tolist()
    run.close()


def test_a_dict_batch_with_neither_inputs_nor_arguments_names_what_it_needs(tmp_path):
    run = nbviz.Run(tmp_path / "run")
    with pytest.raises(ValueError, match=r"keyword arguments \(input_ids, attention_mask"):
        run.evaluate(0, tiny_gpt2(), [{"labels": torch.zeros(2, dtype=torch.long)}])
    run.close()
