"""Heads dead from the start and heads killed later are separate findings, each with its
cause and onset; heads of an ordinary size beside one outlier head are not dead."""

from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import tiny_hf  # noqa: E402

import nbviz  # noqa: E402

VOCAB, TOKENS, HEAD = 40, 12, 16


def tiny_llama() -> transformers.LlamaForCausalLM:
    return tiny_hf.tiny_llama(kv_heads=4, vocab=VOCAB)


def kill(attention: torch.nn.Module, head: int, opt: torch.optim.Optimizer | None = None) -> None:
    """Zero a head's values and what reads them (and the optimizer's moments there)."""
    with torch.no_grad():
        for weight, dim in ((attention.v_proj.weight, 0), (attention.o_proj.weight, 1)):
            weight.narrow(dim, head * HEAD, HEAD).zero_()
            state = opt.state.get(weight, {}) if opt is not None else {}
            for moment in ("exp_avg", "exp_avg_sq"):
                if moment in state:
                    state[moment].narrow(dim, head * HEAD, HEAD).zero_()


def train(model, path, steps: int, kill_at: int | None = None, lr: float = 1e-3) -> nbviz.Run:
    run = nbviz.Run(path)
    run.watch(model, every=2, hist_every=2)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(1)
    for step in range(steps):
        if step == kill_at:
            kill(model.model.layers[1].self_attn, 1, opt)
        ids = (torch.randint(0, VOCAB, (8, 1), generator=gen) + torch.arange(TOKENS)) % VOCAB
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
    return run


def test_a_head_dead_from_the_start_and_one_killed_later_are_two_findings(tmp_path):
    model = tiny_llama()
    kill(model.model.layers[1].self_attn, 0)
    run = train(model, tmp_path / "run", steps=22, kill_at=7)
    findings = run.diagnose()
    dead = findings[findings["check"] == "dead_heads"]
    got = [(row["evidence"]["heads"], row["step"], row["cause"]) for _, row in dead.iterrows()]
    assert sorted(got, key=lambda g: g[1]) == [([0], 0, "architecture"), ([1], 8, "learning_rate")]
    run.close()


def test_heads_of_an_ordinary_size_beside_an_outlier_head_are_not_dead(tmp_path):
    model = tiny_llama()
    with torch.no_grad():
        model.model.layers[1].self_attn.v_proj.weight[3 * HEAD : 4 * HEAD] *= 3000
    run = train(model, tmp_path / "run", steps=14, lr=1e-4)
    _, rms = run.unit_stats("model.layers.1.self_attn/heads", "head_rms")
    assert (rms[:, 3] > 1000 * rms[:, :3].max()).all()  # the others under 1/1000 of it
    assert "dead_heads" not in set(run.diagnose()["check"])
    run.close()
