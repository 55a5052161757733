"""``run.diagnose()`` names dead attention heads of a Hugging Face model built from a config."""

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
    """Two layers, four query heads sharing two key/value heads (grouped-query attention)."""
    return tiny_hf.tiny_llama(kv_heads=2, vocab=VOCAB)


def kill_first_group(attention: torch.nn.Module, opt: torch.optim.Optimizer | None = None) -> None:
    """Zero key/value head 0's values and what reads query heads 0 and 1 (and the
    optimizer's moments there): they stay dead, as no gradient reaches them."""
    parts = ((attention.v_proj.weight, 0, HEAD), (attention.o_proj.weight, 1, 2 * HEAD))
    with torch.no_grad():
        for weight, dim, n in parts:
            weight.narrow(dim, 0, n).zero_()
            state = opt.state.get(weight, {}) if opt is not None else {}
            for moment in ("exp_avg", "exp_avg_sq"):
                if moment in state:
                    state[moment].narrow(dim, 0, n).zero_()


def train(model: torch.nn.Module, path, steps: int = 12, kill_at: int | None = None) -> nbviz.Run:
    run = nbviz.Run(path)
    run.watch(model, every=2, hist_every=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    for step in range(steps):
        if step == kill_at:
            kill_first_group(model.model.layers[1].self_attn, opt)
        start = torch.randint(0, VOCAB, (8, 1), generator=gen)
        ids = (start + torch.arange(TOKENS)) % VOCAB
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
    return run


def test_heads_dead_from_the_start_are_named_with_their_layer_and_cause(tmp_path):
    model = tiny_llama()
    kill_first_group(model.model.layers[1].self_attn)
    run = train(model, tmp_path / "run")
    findings = run.diagnose()
    dead = findings[findings["check"] == "dead_heads"]
    assert len(dead) == 1
    row = dead.iloc[0]
    assert row["layer"] == "model.layers.1.self_attn"
    assert row["evidence"]["heads"] == [0, 1]
    assert row["evidence"]["of_heads"] == 4
    assert (row["severity"], row["cause"], row["root"], row["step"]) == (
        "warning",
        "architecture",
        "",
        0,
    )
    assert "Heads 0, 1 of the 4 of 'model.layers.1.self_attn' are dead" in row["message"]
    verdict = run.triage()
    assert verdict.iloc[0]["cause"] == "architecture"
    assert "heads 0, 1 of 'model.layers.1.self_attn'" in verdict.iloc[0]["summary"]
    run.close()


def test_heads_killed_during_training_point_at_the_steps(tmp_path):
    run = train(tiny_llama(), tmp_path / "run", steps=16, kill_at=6)
    findings = run.diagnose()
    dead = findings[findings["check"] == "dead_heads"]
    assert dead[["layer", "step", "cause"]].values.tolist() == [
        ["model.layers.1.self_attn", 6, "learning_rate"]
    ]
    assert "dead since step 6" in dead.iloc[0]["message"]
    run.close()


def test_a_healthy_model_has_no_dead_heads(tmp_path):
    run = train(tiny_llama(), tmp_path / "run")
    assert run.unit_stats("model.layers.1.self_attn/heads", "head_rms")[1].shape == (6, 4)
    assert "dead_heads" not in set(run.diagnose()["check"])
    run.close()
