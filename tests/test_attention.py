"""Transformers under a probe: bitwise invariance, attention maps, padding masks."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from reference_models import GPT, EncoderClassifier, GPTConfig, next_token_loss, token_batch
from torch import nn
from torch.nn import functional as F

import nbviz
from nbviz.probes.attention import head_statistics, record_attention

SMALL = GPTConfig(vocab=64, context=12, width=32, heads=4, blocks=2)


def small_gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(SMALL)


def small_encoder() -> EncoderClassifier:
    torch.manual_seed(0)
    model = EncoderClassifier(vocab=64, context=12, width=32, heads=4, layers=2)
    for layer in model.encoder.layers:  # dropout on: the probe pass must leave the RNG alone
        layer.dropout = nn.Dropout(0.1)
    return model


def lm_batches(n: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = token_batch(gen, 4, SMALL.context + 1, SMALL.vocab)
        out.append((ids[:, :-1], ids[:, 1:]))
    return out


def class_batches(n: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randint(0, 64, (4, SMALL.context), generator=gen),
            torch.randint(0, 4, (4,), generator=gen),
        )
        for _ in range(n)
    ]


MODELS = {
    "gpt": (small_gpt, lm_batches, next_token_loss),
    "encoder": (small_encoder, class_batches, F.cross_entropy),
}


def train(kind: str, model: nn.Module, steps: int, run=None, mask: bool = False, **watch):
    """Outputs, parameter gradients and losses of ``steps`` AdamW steps (watched with ``run``)."""
    _, batches, loss_fn = MODELS[kind]
    probe = run.watch(model, **watch) if run is not None else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    outputs, grads = [], []
    for step, (x, y) in enumerate(batches(steps)):
        torch.manual_seed(100 + step)
        if probe is not None and mask:
            probe.set_mask(torch.arange(x.shape[1]) < x.shape[1] - 2 + torch.zeros(x.shape[0], 1))
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        outputs.append(out.detach().clone())
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
        if run is not None:
            run.log(step, train_loss=loss)
    if probe is not None:
        probe.close()
    return outputs, grads


@pytest.mark.parametrize("attention", [False, True], ids=["plain", "attention"])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_probes_leave_transformer_outputs_and_gradients_bitwise_equal(kind, attention, tmp_path):
    make, batches, _ = MODELS[kind]
    plain = make()
    watched = copy.deepcopy(plain)
    out_a, grad_a = train(kind, plain, 5)
    options = {"attention": batches(1, seed=9)[0][0][:2]} if attention else {}
    with nbviz.Run(tmp_path / "run") as run:
        out_b, grad_b = train(kind, watched, 5, run, mask=True, every=1, hist_every=1, **options)
        recorded = run.steps("activation")
        steps_with_maps = run.attention_steps() if attention else []
        # each head's output was measured in those same forwards (nbviz.probes.heads)
        head_layers = run.recorded_layers("head_rms", table="unit_stats")
        head_steps = run.unit_stats(head_layers[0], "head_rms")[0]
    assert all(torch.equal(a, b) for a, b in zip(out_a, out_b, strict=True))
    for ga, gb in zip(grad_a, grad_b, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ga, gb, strict=True))
    for pa, pb in zip(plain.state_dict().values(), watched.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    assert list(recorded) == list(range(5))
    assert len(head_layers) == 2 and list(head_steps) == list(range(5))
    if attention:
        assert list(steps_with_maps) == list(range(5))
    assert watched.training


def test_gpt_attention_maps_equal_softmax_of_q_and_k(tmp_path):
    model = small_gpt()
    ids = lm_batches(1, seed=3)[0][0][:3]
    qkv_out = {}
    block = model.blocks[1]
    handle = block.attn.qkv.register_forward_hook(lambda m, a, out: qkv_out.update(x=out))
    try:
        calls = record_attention(model, ids)
    finally:
        handle.remove()
    assert [c.layer for c in calls] == ["blocks.0.attn", "blocks.1.attn"]
    b, t, c = qkv_out["x"].shape[0], qkv_out["x"].shape[1], SMALL.width
    q, k, _ = qkv_out["x"].split(c, dim=2)
    q, k = (z.view(b, t, SMALL.heads, c // SMALL.heads).transpose(1, 2) for z in (q, k))
    scores = q @ k.transpose(-2, -1) / math.sqrt(c // SMALL.heads)
    scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    expected = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(calls[1].weights, expected, rtol=1e-5, atol=1e-6)
    # stored as float16 in the run, read back per step
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, attention=ids, hist_every=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        for step, (x, y) in enumerate(lm_batches(2)):
            opt.zero_grad()
            next_token_loss(model(x), y).backward()
            opt.step()
            run.log(step, train_loss=0.0)
        probe.close()
        stored = run.attention(1, "blocks.1.attn")
        stats = run.attention_stats("blocks.1.attn")
    np.testing.assert_allclose(stored, expected.numpy(), atol=1e-3)
    assert stored.shape == (3, SMALL.heads, t, t)
    assert np.allclose(stored[..., 0, 0], 1.0)  # the first token sees itself alone
    assert list(stats.columns) == [
        *("step", "layer", "sample", "head"),
        *("entropy", "max_weight", "output_rms"),
    ]
    assert len(stats) == 2 * 3 * SMALL.heads
    assert stats["entropy"].between(0, 1).all() and stats["output_rms"].gt(0).all()


def test_multihead_attention_maps_equal_a_recomputation_from_its_projections():
    model = small_encoder().eval()
    ids = class_batches(1)[0][0][:2]
    mha = model.encoder.layers[0].self_attn
    seen = {}
    handle = mha.register_forward_pre_hook(lambda m, args: seen.update(x=args[0]))
    try:
        calls = record_attention(model, ids)
    finally:
        handle.remove()
    assert [c.layer for c in calls] == ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn"]
    x = seen["x"]
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
    heads, d = mha.num_heads, mha.head_dim
    q = (x @ w_q.T + b_q).view(2, -1, heads, d).transpose(1, 2)
    k = (x @ w_k.T + b_k).view(2, -1, heads, d).transpose(1, 2)
    v = (x @ w_v.T + b_v).view(2, -1, heads, d).transpose(1, 2)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    torch.testing.assert_close(calls[0].weights, expected.detach(), rtol=1e-4, atol=1e-5)
    # each head's output, read before nn.MultiheadAttention mixes the heads
    torch.testing.assert_close(calls[0].output, (expected @ v).detach(), rtol=1e-4, atol=1e-5)


def test_a_key_padding_mask_and_grouped_heads_are_applied_as_the_call_applies_them():
    torch.manual_seed(0)
    q = torch.randn(2, 4, 5, 8)
    k = torch.randn(2, 2, 5, 8)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])[:, None, None, :]

    class Gqa(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return F.scaled_dot_product_attention(
                self.lin(q), k, k, attn_mask=keep, enable_gqa=True, scale=0.3
            )

    model = Gqa()
    calls = record_attention(model, torch.zeros(1))
    (call,) = calls
    w = call.weights
    assert w.shape == (2, 4, 5, 5)
    assert torch.all(w[1, :, :, 3:] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 5))
    with torch.no_grad():
        out = model(torch.zeros(1))
    torch.testing.assert_close(call.output, out)  # the call itself ran as the model made it


def test_head_statistics_tell_collapsed_from_uniform_heads():
    n = 6
    uniform = torch.full((n, n), 1.0 / n)
    collapsed = torch.zeros(n, n)
    collapsed[:, 0] = 1.0
    stats = head_statistics(torch.stack([uniform, collapsed])[None], seen=torch.tensor(float(n)))
    assert stats.shape == (1, 2, 3)
    assert stats[0, 0, 0] == pytest.approx(1.0, abs=1e-6)
    assert stats[0, 1, 0] == pytest.approx(0.0, abs=1e-6)
    assert stats[0, 1, 1] == pytest.approx(1.0)
    assert np.isnan(stats[0, :, 2]).all()


def test_the_probe_pass_leaves_hooks_modes_and_flags_as_they_were():
    model = small_encoder()
    model.encoder.layers[1].eval()
    flags = [m.training for m in model.modules()]
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    state = torch.random.get_rng_state()
    record_attention(model, class_batches(1)[0][0])
    assert [m.training for m in model.modules()] == flags
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()) == hooks
    assert torch.equal(torch.random.get_rng_state(), state)


def test_attention_options_are_checked_at_watch(tmp_path):
    model = small_gpt()
    with nbviz.Run(tmp_path / "run") as run:
        with pytest.raises(TypeError, match="attention= takes the probe batch"):
            run.watch(model, attention="some text")
        with pytest.raises(ValueError, match="tokens= labels the attention= probe batch"):
            run.watch(model, tokens=[["a"]])
        with pytest.raises(ValueError, match="300 tokens per sample"):
            run.watch(model, attention=torch.zeros(2, 300, dtype=torch.long))
        probe = run.watch(model, attention=torch.zeros(12, 8, dtype=torch.long))
        assert any("first 8 of 12 probe samples" in n for n in probe.notes)
        meta = run.meta("attention")
        probe.close()
    assert meta["samples"] == 8 and meta["tokens"][0] == ["0"] * 8


# ------------------------------------------------------------------------ padding


class PaddedLM(nn.Module):
    """Embeddings, then a Linear+ReLU over tokens; padded positions are enormous."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.fc = nn.Linear(6, 5)
        self.act = nn.ReLU()
        self.head = nn.Linear(5, 3)

    def forward(self, ids):
        x = self.emb(ids)
        x = torch.where((ids == 0)[..., None], torch.full_like(x, 1e4), x)
        return self.head(self.act(self.fc(x))).mean(1)


def test_padding_is_left_out_of_the_statistics(tmp_path):
    torch.manual_seed(0)
    model = PaddedLM()
    ids = torch.randint(1, 10, (4, 7))
    ids[:, 5:] = 0  # padding
    keep = ids != 0
    seen = {}
    model.fc.register_forward_hook(lambda m, a, out: seen.update(fc=out.detach().clone()))
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)
        probe.set_mask(keep)
        F.cross_entropy(model(ids), torch.tensor([0, 1, 2, 0])).backward()
        run.log(0, train_loss=0.0)
        probe.close()
        stats = run.stats("activation", layer="fc").iloc[0]
        _, zero_frac = run.unit_stats("act", "zero_frac")
    real = seen["fc"][keep]  # (kept positions, 5)
    assert stats["count"] == real.numel()
    assert stats["max"] == pytest.approx(float(real.max()), rel=1e-6)
    assert stats["mean"] == pytest.approx(float(real.mean()), rel=1e-5)
    assert abs(stats["max"]) < 1e3  # the padding's 1e4-scale values are not in it
    # dead-unit maps: per feature, the fraction of real positions where the ReLU is off
    np.testing.assert_allclose(zero_frac[0], (real <= 0).float().mean(0).numpy(), atol=1e-6)


class MaskedLM(PaddedLM):
    """Called as a Hugging Face model is, ``model(ids, attention_mask=mask)``, but not one:
    nothing says its mask is that of every (batch, tokens) tensor it makes."""

    def forward(self, ids, attention_mask=None):
        return super().forward(ids)


def test_another_models_attention_mask_is_not_guessed_at_and_a_note_says_so(tmp_path):
    torch.manual_seed(0)
    model = MaskedLM()
    ids = torch.randint(1, 10, (4, 7))
    ids[:, 5:] = 0
    seen = {}
    model.fc.register_forward_hook(lambda m, a, out: seen.update(fc=out.detach().clone()))
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)
        out = model(ids, attention_mask=(ids != 0).long())
        F.cross_entropy(out, torch.tensor([0, 1, 2, 0])).backward()
        run.log(0, train_loss=0.0)
        run.flush()
        act = run.stats("activation", layer="fc").iloc[0]
        assert act["count"] == seen["fc"].numel()
        assert any("probe.set_mask" in note for note in probe.notes)
        probe.close()


def test_each_gradient_takes_the_mask_of_the_forward_that_made_it(tmp_path):
    """Two forwards (micro-batches of different padding), one backward of their sum."""
    torch.manual_seed(0)
    model = PaddedLM()
    ids = [torch.randint(1, 10, (4, 7)) for _ in range(2)]
    ids[0][:, 5:] = 0
    ids[1][:, 2:] = 0
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)
        loss = 0
        for x in ids:
            probe.set_mask(x != 0)
            loss = loss + F.cross_entropy(model(x), torch.tensor([0, 1, 2, 0]))
        loss.backward()
        run.log(0, train_loss=0.0)
        run.flush()
        act = run.stats("activation", layer="fc").iloc[0]
        grad = run.stats("gradient", layer="fc").iloc[0]
        probe.close()
    kept = sum(int((x != 0).sum()) for x in ids) * 5
    assert act["count"] == kept
    assert grad["count"] == kept


def test_bad_masks_are_refused_naming_the_value(tmp_path):
    model = PaddedLM()
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model)
        with pytest.raises(ValueError, match=r"mask must be \(batch, tokens\), got shape \(3,\)"):
            probe.set_mask(torch.ones(3, dtype=torch.bool))
        with pytest.raises(ValueError, match="booleans"):
            probe.set_mask(torch.full((2, 3), 0.5))
        probe.set_mask([[1, 0, 1]])
        assert probe._mask.dtype == torch.bool
        probe.set_mask(None)
        probe.close()


# ------------------------------------------------------------------------ diagnosis


def test_a_planted_collapsed_head_is_found_and_named(tmp_path):
    from training import language_model_run

    run_dir = language_model_run(tmp_path / "lm", steps=12, every=3, collapse=(1, 2))
    run = nbviz.open_run(run_dir)
    findings = run.diagnose()
    run.close()
    collapsed = findings[findings["check"] == "attention_collapse"]
    assert len(collapsed) == 1
    row = collapsed.iloc[0]
    assert row["layer"] == "blocks.1.attn" and row["evidence"]["head"] == 2
    assert row["severity"] == "warning" and row["step"] == 0
    assert row["evidence"]["entropy"] < 0.15 and row["evidence"]["from_first_capture"]
    assert "Head 2 of blocks.1.attn has collapsed from the first capture" in row["message"]
    assert row["cause"] == "architecture" and "initialisation" in row["advice"]


def test_healthy_heads_are_not_called_collapsed(tmp_path):
    from training import language_model_run

    run = nbviz.open_run(language_model_run(tmp_path / "lm", steps=9, every=3))
    findings = run.diagnose()
    run.close()
    assert "attention_collapse" not in set(findings["check"])
