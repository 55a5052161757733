"""A language model's evaluation token by token: per-token losses, padding, top predictions.

A real small GPT-style model trained on synthetic text and evaluated into a real run
(``run.evaluate`` recognises its ``(N, T, vocab)`` logits against ``(N, T)`` targets);
what is stored is checked against ``F.cross_entropy`` and ``logits.topk`` computed here,
then read back by ``run.token_losses``, an ``open_run`` of the file, and the gallery.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from training import token_loss_run

import nbviz
from nbviz.recording import tokens as token_records
from nbviz.store.tokens import TOKEN_COLUMNS


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    return token_loss_run(tmp_path_factory.mktemp("lm") / "run", top_k=4)


def by_position(frame, column: str, shape: tuple[int, int]) -> np.ndarray:
    frame = frame.sort_values(["id", "position"])
    return np.stack(frame[column].to_list()).reshape(*shape, -1).squeeze(-1)


def test_per_token_losses_equal_cross_entropy_and_padding_is_left_out(lm) -> None:
    path, ref = lm
    run = nbviz.open_run(path)
    frame = run.token_losses(ref["step"])
    assert list(frame.columns) == list(TOKEN_COLUMNS)
    targets, logits = ref["targets"], ref["logits"]
    expected = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").numpy()
    padding = ref["padding"].numpy()
    got = frame.sort_values(["id", "position"])["loss"].to_numpy().reshape(targets.shape)
    assert np.array_equal(np.isnan(got), padding)
    np.testing.assert_allclose(got[~padding], expected[~padding], rtol=1e-6, atol=1e-6)
    # an ignored target is no token (no text); a masked one keeps its token
    pad_rows = frame[frame["padding"]].set_index(["id", "position"])
    assert set(pad_rows.loc[1, "token_id"]) == {-100} and set(pad_rows.loc[1, "token"]) == {""}
    assert set(pad_rows.loc[4, "token_id"]) == {0} and set(pad_rows.loc[4, "token"]) == {"w0"}
    # each sample's loss is the mean over its real tokens; val_loss over every real token
    per_sample = run.predictions(ref["step"]).set_index("id")["loss"]
    for i in range(len(targets)):
        real = ~padding[i]
        assert per_sample[i] == pytest.approx(float(expected[i][real].mean()), rel=1e-5)
    mean = float(expected[~padding].astype(np.float64).mean())  # every real token alike
    val = run.scalars(["val_loss"])["value"].iloc[-1]
    assert val == pytest.approx(float(mean), rel=1e-5)
    run.close()


def test_stored_top_predictions_equal_logits_topk(lm) -> None:
    path, ref = lm
    run = nbviz.open_run(path)
    frame = run.token_losses(ref["step"])
    logits = ref["logits"]
    top = logits.topk(4, dim=-1)
    shape = tuple(ref["targets"].shape)
    top_ids = np.stack(frame.sort_values(["id", "position"])["top_ids"].to_list())
    assert top_ids.reshape(*shape, 4).tolist() == top.indices.tolist()
    probs = np.stack(frame.sort_values(["id", "position"])["top_probs"].to_list())
    expected = torch.softmax(logits, dim=-1).gather(-1, top.indices).numpy()
    np.testing.assert_allclose(probs.reshape(*shape, 4), expected, rtol=1e-5, atol=1e-7)
    # decoded with the vocabulary given to evaluate
    words = ref["words"]
    row = frame[(frame["id"] == 2) & (frame["position"] == 3)].iloc[0]
    assert row["token"] == words[int(ref["targets"][2, 3])]
    assert row["top_tokens"] == [words[i] for i in row["top_ids"]]
    # the samples are logged as the text of their tokens
    text = run.samples([0])["text"].iloc[0]
    assert text.split()[0] == words[0] or text.split()[0] in words
    run.close()


def test_token_losses_picks_samples_and_names_what_is_missing(lm) -> None:
    path, ref = lm
    run = nbviz.open_run(path)
    frame = run.token_losses(ref["step"], ids=[4, 1])
    assert frame["id"].unique().tolist() == [4, 1]
    assert len(frame) == 2 * ref["targets"].shape[1]
    with pytest.raises(ValueError, match=r"ids \[99\] have no per-token losses"):
        run.token_losses(ref["step"], ids=[99])
    with pytest.raises(ValueError, match="no predictions|holds no per-token"):
        run.token_losses(ref["step"], split="test")
    run.close()


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 9) -> None:
        super().__init__()
        self.emb, self.head = nn.Embedding(vocab, 8), nn.Linear(8, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.emb(ids)))


def test_a_mask_in_a_dict_batch_and_a_loss_fn_per_token_are_used(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    x = torch.randint(0, 9, (4, 6))
    y = torch.randint(0, 9, (4, 6))
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[0, 4:] = False
    scaled = nn.CrossEntropyLoss(reduction="none")
    with nbviz.Run(tmp_path / "r") as run:
        run.evaluate(
            0,
            model,
            [{"input": x, "target": y, "mask": mask}],
            loss_fn=lambda out, t: 2.0 * scaled(out.transpose(1, 2), t),
            tokens=lambda i: f"<{i}>",
        )
        frame = run.token_losses(0)
        with torch.no_grad():
            expected = 2.0 * F.cross_entropy(model(x).transpose(1, 2), y, reduction="none")
        got = frame["loss"].to_numpy().reshape(4, 6)
        assert np.isnan(got[0, 4:]).all() and not np.isnan(got[0, :4]).any()
        np.testing.assert_allclose(got[mask.numpy()], expected[mask].numpy(), rtol=1e-6)
        assert frame["token"].iloc[0] == f"<{int(y[0, 0])}>"
        per = run.predictions(0).set_index("id")["loss"]
        assert per[0] == pytest.approx(float(expected[0, :4].mean()), rel=1e-5)


def test_loss_fn_ignore_index_marks_padding(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    x = torch.randint(0, 9, (3, 5))
    y = torch.randint(0, 9, (3, 5))
    y[2, 1:] = 0  # token 0 is padding for this loss

    class TokenCE(nn.CrossEntropyLoss):  # (N, T, V) scores against (N, T) targets
        def forward(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return super().forward(out.transpose(1, 2), target)

    with nbviz.Run(tmp_path / "r") as run:
        run.evaluate(0, model, [(x, y)], loss_fn=TokenCE(reduction="none", ignore_index=0))
        run.evaluate(1, model, [(x, y)], ignore_index=0)
        for step in (0, 1):
            frame = run.token_losses(step)
            assert frame["padding"].to_numpy().reshape(3, 5).tolist() == (y == 0).tolist()


def test_an_ignore_index_that_loss_fn_contradicts_is_refused(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    x = torch.randint(0, 9, (3, 5))
    y = torch.randint(0, 9, (3, 5))
    y[1, 2:] = 0

    class TokenCE(nn.CrossEntropyLoss):
        def forward(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return super().forward(out.transpose(1, 2), target)

    with nbviz.Run(tmp_path / "r") as run:
        with pytest.raises(ValueError, match=r"ignore_index=0 but loss_fn.ignore_index is -100"):
            run.evaluate(0, model, [(x, y)], loss_fn=TokenCE(reduction="none"), ignore_index=0)
        assert not len(run.prediction_steps())  # refused before the pass
        loss_fn = TokenCE(reduction="none", ignore_index=0)
        run.evaluate(0, model, [(x, y)], loss_fn=loss_fn, ignore_index=0)
        padding = run.token_losses(0)["padding"].to_numpy().reshape(3, 5)
        assert padding.tolist() == (y == 0).tolist()


def test_log_token_losses_checks_its_arguments(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "r") as run:
        with pytest.raises(ValueError, match=r"losses must be \(samples, positions\)"):
            run.log_token_losses(0, np.zeros(4), np.zeros(4, dtype=int))
        with pytest.raises(ValueError, match=r"targets has shape \(2, 3\); expected \(2, 4\)"):
            run.log_token_losses(0, np.zeros((2, 4)), np.zeros((2, 3), dtype=int))
        with pytest.raises(ValueError, match="top_ids and top_probs together"):
            run.log_token_losses(0, np.zeros((2, 4)), np.zeros((2, 4), dtype=int), top_ids=[])
        with pytest.raises(TypeError, match="tokens must be a vocabulary"):
            run.log_token_losses(0, np.zeros((2, 4)), np.zeros((2, 4), dtype=int), tokens=3.5)
        with pytest.raises(TypeError, match="evaluate: top_k must be an int"):
            run.evaluate(0, TinyLM(), [(torch.zeros(1, 2, dtype=torch.long),) * 2], top_k="5")
        run.log(0, train_loss=1.0)
        run.log_predictions(0, np.eye(3), [0, 1, 2])
        with pytest.raises(ValueError, match="holds no per-token losses"):
            run.token_losses(0)


def test_non_finite_token_losses_are_kept_and_counted_by_the_gallery(tmp_path: Path) -> None:
    losses = np.array([[0.5, np.inf, 1.0], [np.nan, 2.0, 0.0]])
    targets = np.array([[1, 2, 3], [4, 5, -100]])
    top_ids = np.tile(np.arange(2), (2, 3, 1))
    top_probs = np.full((2, 3, 2), 0.25)
    with nbviz.Run(tmp_path / "r") as run:
        run.log_token_losses(
            3, losses, targets, top_ids=top_ids, top_probs=top_probs, tokens=list("abcdef")
        )
        frame = run.token_losses(3)
        assert np.isinf(frame["loss"].iloc[1]) and np.isnan(frame["loss"].iloc[3])
        assert frame["padding"].tolist() == [False] * 5 + [True]
        gallery = nbviz.SampleGallery(run, live=False)
        assert gallery.token_scale["nonfinite"] == 2
        card = {item["id"]: item for item in gallery.items}[0]
        assert card["tokens"]["nonfinite"] == 1
        assert card["tokens"]["texts"]["1"] == "b"
        detail = gallery.show(1)
        assert detail["tokens"]["more"] == 0 and "outputs" not in detail
        gallery.close()


def test_a_sample_that_is_all_padding_has_no_loss_rather_than_a_nan_one(tmp_path: Path) -> None:
    losses = np.array([[0.5, 1.0, 2.0], [np.nan, np.nan, 0.0], [np.nan, 1.0, 1.0]])
    targets = np.array([[1, 2, 3], [-100, -100, -100], [4, 5, 6]])
    with nbviz.Run(tmp_path / "r") as run:
        run.log_token_losses(3, losses, targets)
        assert np.isnan(run.predictions(3)["loss"].iloc[1])  # a mean of nothing, kept as NULL
        gallery = nbviz.SampleGallery(run, live=False)
        cards = {item["id"]: item for item in gallery.items}
        assert cards[1]["loss_note"] == "no tokens counted" and "nonfinite" not in cards[1]
        assert cards[1]["tokens"]["counted"] == 0 and cards[0]["tokens"]["counted"] == 3
        # a NaN token loss that counts is a non-finite loss still
        assert cards[2]["nonfinite"] == {"loss": "NaN"} and "loss_note" not in cards[2]
        detail = gallery.show(1)
        assert detail["loss_note"] == "no tokens counted" and "nonfinite" not in detail
        assert "loss_note" not in gallery.show(0)
        gallery.close()


def test_another_models_outputs_are_not_decoded_to_find_no_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with nbviz.Run(tmp_path / "r") as run:
        images = np.zeros((3, 8, 8), dtype=np.float32)
        run.log_outputs(0, np.ones(3), images, images)
        run.log_token_losses(1, np.ones((2, 3)), np.ones((2, 3), dtype=int))
    view = nbviz.open_run(tmp_path / "r")
    decoded: list[int] = []
    outputs = type(view).outputs

    def counted(self, step: int, split: str = "val"):
        decoded.append(step)
        return outputs(self, step, split)

    monkeypatch.setattr(type(view), "outputs", counted)
    assert view.token_evaluation(0) is None and view.token_evaluation(5) is None
    assert decoded == []
    assert view.token_evaluation(1) is not None and decoded == [1]
    view.close()


def test_the_gallery_sends_a_page_of_tokens_and_the_detail_more(lm) -> None:
    path, ref = lm
    run = nbviz.open_run(path)
    gallery = nbviz.SampleGallery(run, live=False)
    state = gallery.get_state()
    assert state["token_scale"]["lo"] == 0.0 and state["token_scale"]["hi"] > 0
    item = state["items"][1]
    tokens = item["tokens"]
    assert tokens["loss"]["shape"] == [9] and tokens["top_ids"]["shape"] == [9, 4]
    loss = np.frombuffer(tokens["loss"]["data"], dtype="<f4")
    assert np.isnan(loss[6:]).all() and np.isfinite(loss[:6]).all()
    assert "outputs" not in item
    detail = gallery.show(4)
    assert detail["tokens"]["padding"]["shape"] == [9]
    gallery.close()
    run.close()


def test_only_the_first_samples_keep_their_tokens_when_there_are_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_records, "MAX_TOKEN_VALUES", 5 * 6 * 3)  # 5 samples' worth
    torch.manual_seed(0)
    model = TinyLM()
    x = torch.randint(0, 9, (12, 6))
    y = torch.randint(0, 9, (12, 6))
    with nbviz.Run(tmp_path / "r") as run:
        run.evaluate(0, model, [(x[:4], y[:4]), (x[4:], y[4:])], top_k=2)
        assert run.token_losses(0)["id"].unique().tolist() == [0, 1, 2, 3, 4]
        assert len(run.predictions(0)) == 12  # every sample's loss
        assert run.predictions(0)["loss"].notna().all()


def test_batches_of_different_lengths_are_padded_to_the_longest(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    short, long = torch.randint(0, 9, (2, 5)), torch.randint(0, 9, (3, 7))
    with nbviz.Run(tmp_path / "r") as run:
        run.evaluate(0, model, [(short, short), (long, long)], top_k=3)
        frame = run.token_losses(0)
        padding = frame.pivot(index="id", columns="position", values="padding")
        assert padding.shape == (5, 7)
        assert padding.loc[[0, 1], [5, 6]].to_numpy().all()
        assert not padding.loc[[0, 1], list(range(5))].to_numpy().any()
        assert not padding.loc[[2, 3, 4]].to_numpy().any()
        with torch.no_grad():
            expected = F.cross_entropy(model(short).transpose(1, 2), short, reduction="none")
        got = frame[(frame["id"] == 1) & ~frame["padding"]]["loss"].to_numpy()
        np.testing.assert_allclose(got, expected[1].numpy(), rtol=1e-6)


def test_a_mask_of_another_shape_and_mixed_batches_are_refused(tmp_path: Path) -> None:
    model = TinyLM()
    x = torch.randint(0, 9, (2, 4))
    with nbviz.Run(tmp_path / "r") as run:
        bad_mask = {"input": x, "target": x, "mask": torch.ones(2, 3, dtype=torch.bool)}
        with pytest.raises(ValueError, match=r"mask has shape \(2, 3\); expected \(2, 4\)"):
            run.evaluate(0, model, [bad_mask])
        mixed = [(x, x), (x, x[:, 0])]  # the second batch's targets: one class per sample
        with pytest.raises(ValueError, match="a language model's, and others did not"):
            run.evaluate(0, model, mixed, loss_fn=lambda o, t: o.float().mean(-1).mean(-1))
