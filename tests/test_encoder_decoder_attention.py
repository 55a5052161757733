"""An encoder-decoder's attention (a Hugging Face BART): each layer's maps keep their
own extent (the decoder's cross-attention is target x source) and their own tokens."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402

SOURCE, TARGET = 10, 6
CROSS = "model.decoder.layers.1.encoder_attn"
DECODER = "model.decoder.layers.1.self_attn"
ENCODER = "model.encoder.layers.0.self_attn"


def bart_run(path, target: int = TARGET) -> nbviz.Run:
    from tiny_hf import bart_run

    return bart_run(path, source=SOURCE, target=target)


def test_each_layers_maps_keep_their_extent_and_tokens(tmp_path):
    with bart_run(tmp_path / "run") as run:
        sets = {s["name"]: s["tokens"] for s in run.meta("attention")["token_sets"]}
        source, target = sets["input_ids"][1], sets["decoder_input_ids"][1]
        assert (len(source), len(target)) == (SOURCE, TARGET)
        view = nbviz.AttentionMaps(run, sample=1)
        extent = dict(zip(view.layers, view.extents, strict=True))
        assert extent[CROSS] == [4, TARGET, SOURCE]
        assert extent[DECODER] == [4, TARGET, TARGET]
        assert extent[ENCODER] == [4, SOURCE, SOURCE]
        labels = dict(zip(view.layers, view.axis_tokens, strict=True))
        assert labels[CROSS] == [target, source]
        assert labels[DECODER] == [target, target]
        assert labels[ENCODER] == [source, source]

        table = view.data()
        per_layer = table.groupby("layer").size()
        assert per_layer[CROSS] == 4 * TARGET * SOURCE  # nothing of the padding
        assert per_layer[DECODER] == 4 * TARGET * TARGET
        cross = table[table["layer"] == CROSS]
        assert cross["query"].max() == TARGET - 1 and cross["key"].max() == SOURCE - 1
        assert set(cross["query_token"]) <= set(target) and set(cross["key_token"]) <= set(source)
        # each query's weights over the source sum to 1
        sums = cross.groupby(["head", "query"])["weight"].sum()
        assert sums.between(0.99, 1.01).all()
        stored = run.attention(None, CROSS)[1]
        one = view.data(layer=CROSS, head=2)
        assert one["weight"].to_numpy().reshape(TARGET, SOURCE) == pytest.approx(stored[2])


def test_two_sequences_of_one_length_leave_the_positions_unnamed(tmp_path):
    """Source and target of 10 tokens: a map's length does not say whose tokens label it."""
    with bart_run(tmp_path / "run", target=SOURCE) as run:
        view = nbviz.AttentionMaps(run)
        labels = dict(zip(view.layers, view.axis_tokens, strict=True))
        assert labels[CROSS] == [[str(i) for i in range(SOURCE)]] * 2


def test_a_mask_and_token_types_beside_the_ids_do_not_unname_them(tmp_path):
    """A BERT probe batch as a tokenizer gives it: the mask and the token types have as
    many positions as the ids, but are no tokens."""
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
    )
    model = transformers.BertForSequenceClassification(config)
    ids = torch.randint(2, 50, (1, SOURCE), generator=torch.Generator().manual_seed(0))
    probe = {
        "input_ids": ids,
        "attention_mask": torch.ones(1, SOURCE, dtype=torch.long),
        "token_type_ids": torch.zeros(1, SOURCE, dtype=torch.long),
    }
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, attention=probe, tokens=lambda i: f"w{i}")
        loss = model(input_ids=ids, labels=torch.tensor([1])).loss
        loss.backward()
        run.log(0, train_loss=loss)
        run.flush()
        names = [s["name"] for s in run.meta("attention")["token_sets"]]
        assert names == ["input_ids"]
        view = nbviz.AttentionMaps(run)
        words = [f"w{i}" for i in ids[0].tolist()]
        assert view.axis_tokens == [[words, words]]
