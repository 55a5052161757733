"""Per-head statistics of a padded batch are the real tokens' (``probe.set_mask``, else the
forward's ``attention_mask``), on a Hugging Face BERT classifier built from a config."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402

VOCAB, TOKENS, HEADS, HEAD = 30, 12, 2, 16
LAYER = "bert.encoder.layer.0.attention.self"


def tiny_bert() -> transformers.BertForSequenceClassification:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=HEADS * HEAD,
        num_hidden_layers=1,
        num_attention_heads=HEADS,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return transformers.BertForSequenceClassification(config)


def padded(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, TOKENS - 2, (6,), generator=gen)
    mask = torch.arange(TOKENS) < lengths[:, None]
    ids = torch.randint(1, VOCAB, (6, TOKENS), generator=gen) * mask
    return ids, mask, torch.randint(0, 2, (6,), generator=gen)


def rms_per_head(context: torch.Tensor) -> np.ndarray:
    """``(..., heads * head_dim)`` concatenated heads -> each head's RMS."""
    heads = context.reshape(-1, HEADS, HEAD).double()
    return heads.square().mean(dim=(0, 2)).sqrt().numpy()


@pytest.mark.parametrize("told", ["set_mask", "attention_mask"])
def test_padded_queries_are_left_out_of_each_heads_statistics(told, tmp_path):
    """The probe's mask, or without one the ``attention_mask`` the model is called with."""
    model = tiny_bert()
    contexts: list[torch.Tensor] = []
    attention = model.get_submodule(LAYER)
    handle = attention.register_forward_hook(lambda m, a, out: contexts.append(out[0].detach()))
    run = nbviz.Run(tmp_path / "run")
    probe = run.watch(model, every=1, hist_every=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    masks = []
    for step in range(3):
        ids, mask, labels = padded(step)
        masks.append(mask)
        if told == "set_mask":
            probe.set_mask(mask)
        loss = model(input_ids=ids, attention_mask=mask.long(), labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
    handle.remove()
    steps, got = run.unit_stats(f"{LAYER}/heads", "head_rms")
    assert steps.tolist() == [0, 1, 2]
    for step in range(3):
        real = rms_per_head(contexts[step][masks[step]])
        whole = rms_per_head(contexts[step])
        np.testing.assert_allclose(got[step], real, rtol=1e-5)
        assert not np.allclose(got[step], whole, rtol=1e-4)  # the padding would have counted
    run.close()


def test_an_encoder_decoders_mask_is_not_taken_for_its_decoders_tokens(tmp_path):
    """BART's ``attention_mask`` is its encoder's: its decoder's heads, over as many tokens,
    are measured whole."""
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=VOCAB,
        d_model=HEADS * HEAD,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=16,
        dropout=0.0,
        attention_dropout=0.0,
        pad_token_id=0,
        decoder_start_token_id=2,
    )
    model = transformers.BartForConditionalGeneration(config)
    heads_in: list[torch.Tensor] = []
    out_proj = model.get_submodule("model.decoder.layers.0.self_attn.out_proj")
    handle = out_proj.register_forward_pre_hook(lambda m, a: heads_in.append(a[0].detach()))
    run = nbviz.Run(tmp_path / "run")
    run.watch(model, every=1, hist_every=1)
    ids, mask, _ = padded(0)
    loss = model(input_ids=ids, attention_mask=mask.long(), labels=ids.flip(1)).loss
    loss.backward()
    run.log(0, train_loss=loss)
    run.flush()
    handle.remove()
    _, got = run.unit_stats("model.decoder.layers.0.self_attn/heads", "head_rms")
    np.testing.assert_allclose(got[0], rms_per_head(heads_in[0]), rtol=1e-5)
    run.close()


def test_the_attention_mask_leaves_padding_out_of_every_tokens_statistics(tmp_path):
    """Not only the heads: each (batch, tokens, features) output and output gradient is
    summarised over the real tokens; an output of another shape (the position
    embeddings, (1, tokens, features); the pooled (batch, features)) whole."""
    model = tiny_bert()
    seen: dict[str, torch.Tensor] = {}
    dense = model.get_submodule("bert.encoder.layer.0.intermediate.dense")
    dense.register_forward_hook(lambda m, a, out: seen.update(dense=out.detach()))
    run = nbviz.Run(tmp_path / "run")
    run.watch(model, every=1, hist_every=1)
    ids, mask, labels = padded(0)
    loss = model(input_ids=ids, attention_mask=mask.long(), labels=labels).loss
    loss.backward()
    run.log(0, train_loss=loss)
    run.flush()
    act = run.stats("activation").set_index("layer")["count"]
    grad = run.stats("gradient").set_index("layer")["count"]
    real = int(mask.sum())
    assert act["bert.encoder.layer.0.intermediate.dense"] == real * 64
    assert grad["bert.encoder.layer.0.intermediate.dense"] == real * 64
    assert act["bert.embeddings.position_embeddings"] == TOKENS * HEADS * HEAD
    assert act["bert.pooler.dense"] == 6 * HEADS * HEAD
    kept = seen["dense"][mask]
    got = run.stats("activation", layer="bert.encoder.layer.0.intermediate.dense").iloc[0]
    assert got["max"] == pytest.approx(float(kept.max()), rel=1e-6)
    run.close()
