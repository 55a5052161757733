"""Per-head statistics under interruption, changing heads, models without attention,
the opt-out and compiled children."""

from __future__ import annotations

import pytest
import torch
from reference_models import GPT, GPTConfig, next_token_loss, token_batch
from torch import nn
from torch.nn import functional as F

import nbviz
from nbviz.probes.heads import RECHECK

SMALL = GPTConfig(vocab=64, context=12, width=32, heads=4, blocks=2)


def small_gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(SMALL)


def lm_step(model: nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator) -> torch.Tensor:
    ids = token_batch(gen, 4, SMALL.context + 1, SMALL.vocab)
    loss = next_token_loss(model(ids[:, :-1]), ids[:, 1:])
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def hook_counts(model: nn.Module) -> dict[int, tuple[int, int]]:
    return {id(m): (len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()}


def test_a_keyboard_interrupt_mid_forward_leaves_no_mode_no_hook_and_records_nothing_after(
    tmp_path,
):
    model = small_gpt()
    stop = {"now": False}

    def interrupt(m, args, out):
        if stop["now"]:
            raise KeyboardInterrupt

    model.blocks[1].register_forward_hook(interrupt)  # before the probe's own hooks
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)
        watched = hook_counts(model)
        stop["now"] = True
        with pytest.raises(KeyboardInterrupt):
            model(token_batch(gen, 2, SMALL.context, SMALL.vocab))
        stop["now"] = False
        # an unrelated call, 5 heads: not the model's
        q = torch.randn(2, 5, 6, 4)
        F.scaled_dot_product_attention(q, q, q)
        model.eval()
        with torch.no_grad():
            model(token_batch(gen, 2, SMALL.context, SMALL.vocab))
        model.train()
        assert torch._C._len_torch_function_stack() == 0
        assert hook_counts(model) == watched  # the naming hooks are off
        for step in range(3):
            run.log(step, train_loss=lm_step(model, opt, gen))
        assert torch._C._len_torch_function_stack() == 0
        probe.close()
        layers = run.recorded_layers("head_rms", table="unit_stats")
        meta = run.meta("heads")
        rms = run.unit_stats("blocks.0.attn/heads", "head_rms")
    assert layers == ["blocks.0.attn/heads", "blocks.1.attn/heads"]
    assert {v["heads"] for v in meta["layers"].values()} == {4}
    assert meta["notes"] == []
    assert rms[1].shape == (3, 4)


class Reshaped(nn.Module):
    """One ``F.scaled_dot_product_attention`` whose head count is an attribute."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(64, 32)
        self.attn = nn.Linear(32, 32)
        self.out = nn.Linear(32, 4)
        self.heads = 4

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.attn(self.emb(ids))
        b, t, w = x.shape
        h = x.view(b, t, self.heads, w // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(h, h, h).transpose(1, 2).reshape(b, t, w)
        return self.out(y.mean(dim=1))


def train_steps(run, model, steps, heads_at=None, first=0):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(first)
    for step in range(first, first + steps):
        if heads_at is not None:
            model.heads = heads_at(step)
        x = torch.randint(0, 64, (4, 12), generator=gen)
        loss = F.cross_entropy(model(x), torch.randint(0, 4, (4,), generator=gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)


def test_a_head_count_that_changes_is_refused_with_a_note_written_to_the_meta(tmp_path):
    model = Reshaped()
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, hist_every=1)
        train_steps(run, model, 5, heads_at=lambda s: 8 if s == 2 else 4)
        steps, rms = run.unit_stats("heads", "head_rms")
        meta = run.meta("heads")
    assert list(steps) == [0, 1, 3] and rms.shape == (3, 4)  # readable: one width
    assert meta["layers"]["heads"]["heads"] == 4
    assert meta["notes"] == ["heads: 8 heads of 4 from step 2, 4 of 8 before: not recorded"]


class Mlp(nn.Module):
    """No attention until ``attn`` is set."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(64, 32)
        self.hidden = nn.Linear(32, 32)
        self.out = nn.Linear(32, 4)
        self.attn: nn.Module | None = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.hidden(self.emb(ids)))
        if self.attn is not None:
            x = self.attn(x)
        return self.out(x.mean(dim=1))


class Sdpa(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        h = x.view(b, t, 4, w // 4).transpose(1, 2)
        return F.scaled_dot_product_attention(h, h, h).transpose(1, 2).reshape(b, t, w)


def modes_seen(model: nn.Module) -> list[int]:
    """The torch function modes on at each forward of ``model.hidden``."""
    modes: list[int] = []
    model.hidden.register_forward_pre_hook(
        lambda m, a: modes.append(torch._C._len_torch_function_stack())
    )
    return modes


def test_a_model_without_attention_runs_without_the_mode_until_its_modules_change(tmp_path):
    # (a module added after watch() is not watched: its calls are seen, not measured)
    model = Mlp()
    modes = modes_seen(model)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, hist_every=1)
        train_steps(run, model, 4)
        assert modes == [1, 0, 0, 0]  # the first captured forward saw no attention
        model.attn = Sdpa()  # a new module set: checked again
        train_steps(run, model, 3, first=4)
        assert modes[4:] == [1, 1, 1]


def test_a_model_without_attention_is_checked_again_after_recheck_captures(tmp_path):
    model = Mlp()
    modes = modes_seen(model)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, hist_every=1)
        train_steps(run, model, RECHECK + 2)
    assert [i for i, n in enumerate(modes) if n] == [0, RECHECK + 1]


def test_heads_false_leaves_the_mode_out(tmp_path):
    model = small_gpt()
    modes: list[int] = []
    model.blocks[0].attn.register_forward_pre_hook(
        lambda m, a: modes.append(torch._C._len_torch_function_stack())
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, hist_every=1, heads=False)
        for step in range(2):
            run.log(step, train_loss=lm_step(model, opt, gen))
        assert run.meta("heads") is None
        assert run.recorded_layers("zero_frac", table="unit_stats")  # activations as before
    assert modes == [0, 0]
    with nbviz.Run(tmp_path / "bad") as run, pytest.raises(ValueError, match="heads must be"):
        run.watch(small_gpt(), heads="no")


def test_a_child_compiled_on_its_own_never_runs_under_the_mode(tmp_path):
    model = small_gpt()
    model.blocks[1] = torch.compile(model.blocks[1], backend="eager")
    modes: list[int] = []
    model.blocks[0].attn.register_forward_pre_hook(
        lambda m, a: modes.append(torch._C._len_torch_function_stack())
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)
        for step in range(2):
            run.log(step, train_loss=lm_step(model, opt, gen))
        assert any("blocks.1 torch.compile'd on its own" in n for n in probe.notes)
        assert run.meta("heads") is None
    assert modes == [0, 0]
