"""Per-head statistics at hist_every=1: the naming hooks stay on between measured forwards,
record what they recorded when attached per capture, leave copies of the model alone and
come off at close."""

from __future__ import annotations

import copy
import io

import numpy as np
import torch
from reference_models import GPT, GPTConfig, next_token_loss, token_batch
from torch import nn

import nbviz
from nbviz.probes.heads import SIGNALS

SMALL = GPTConfig(vocab=64, context=12, width=32, heads=4, blocks=2)


def small_gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(SMALL)


def lm_step(model: nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator) -> None:
    ids = token_batch(gen, 4, SMALL.context + 1, SMALL.vocab)
    loss = next_token_loss(model(ids[:, :-1]), ids[:, 1:])
    opt.zero_grad()
    loss.backward()
    opt.step()


def hook_counts(model: nn.Module) -> dict[str, tuple[int, int]]:
    return {n: (len(m._forward_pre_hooks), len(m._forward_hooks)) for n, m in model.named_modules()}


def head_values(run: nbviz.Run, steps: list[int]) -> dict[tuple[str, str], np.ndarray]:
    """Each heads pseudo-layer's values at ``steps``, per signal."""
    run.flush()
    out = {}
    for layer in ("blocks.0.attn/heads", "blocks.1.attn/heads"):
        for signal in SIGNALS:
            recorded, values = run.unit_stats(layer, signal, steps)
            assert recorded.tolist() == steps
            out[(layer, signal)] = values
    return out


def train(tmp_path, name: str, every: int) -> tuple[dict, nn.Module, nbviz.Run]:
    model = small_gpt()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1)
    run = nbviz.Run(tmp_path / name)
    probe = run.watch(model, every=every, hist_every=every)
    for step in range(6):
        lm_step(model, opt, gen)
        run.log(step, loss=0.0)
    probe.close()
    return head_values(run, [0, 2, 4]), model, run


def test_kept_naming_hooks_record_what_hooks_attached_per_capture_record(tmp_path):
    kept, _, run_a = train(tmp_path, "every1", every=1)
    per_capture, _, run_b = train(tmp_path, "every2", every=2)
    assert kept.keys() == per_capture.keys()
    for key, values in per_capture.items():
        np.testing.assert_array_equal(kept[key], values, err_msg=str(key))
    run_a.close()
    run_b.close()


def test_naming_hooks_stay_on_between_captures_and_come_off_at_close(tmp_path):
    model = small_gpt()
    before = hook_counts(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)
        lm_step(model, opt, gen)
        after_one = hook_counts(model)
        for step in range(1, 4):
            run.log(step - 1, loss=0.0)
            lm_step(model, opt, gen)
        assert hook_counts(model) == after_one  # attached once, not once per capture
        # a copy (an EMA or best-model snapshot) runs without naming anything of the model's
        twin = copy.deepcopy(model)
        with torch.no_grad():
            twin(token_batch(gen, 2, SMALL.context, SMALL.vocab))
        assert probe._heads._stack is not None and probe._heads._stack.names == [""]
        torch.save(model, io.BytesIO())  # the model can still be saved whole
        probe.close()
    assert hook_counts(model) == before


def test_every_other_step_takes_the_naming_hooks_off_after_each_capture(tmp_path):
    model = small_gpt()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=2, hist_every=2)
        watched = hook_counts(model)
        lm_step(model, opt, gen)
        assert hook_counts(model) == watched
        probe.close()


def test_at_every_1_the_distributions_follow_hist_every_and_the_naming_hooks_come_off(tmp_path):
    model = small_gpt()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1)  # hist_every: 10 by default
        watched = hook_counts(model)
        for step in range(21):
            lm_step(model, opt, gen)
            run.log(step, loss=0.0)
            assert hook_counts(model) == watched  # no naming hooks left on between forwards
        probe.close()
        stats_steps = run.stats("activation", layer="blocks.0.mlp.fc")["step"].tolist()
        unit_steps = run.unit_stats("blocks.0.mlp.fc", "zero_frac")[0].tolist()
        peak_steps = run.unit_stats("blocks.0.mlp.fc", "max_abs")[0].tolist()
        head_steps = run.unit_stats("blocks.0.attn/heads", "head_rms")[0].tolist()
    assert stats_steps == list(range(21))
    assert unit_steps == peak_steps == head_steps == [0, 10, 20]
