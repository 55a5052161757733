"""Training passes whose weights do not change: several per logged step (gradient
accumulation) without ``optimizer=``, which the probe tells at once; and a step that took
no update (a warm-up from 0), which diagnose() does not blame on a layer's optimizer."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from training import named_mlp

import nbviz

X = torch.randn(512, 12, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] > 0).long()


def _accumulate(run: nbviz.Run, model: nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    """The standard accumulation loop: 4 micro-batches, clipping, one optimizer step."""
    for step in range(steps):
        opt.zero_grad()
        total = 0.0
        for k in range(4):
            i = (step * 128 + k * 32) % 512
            loss = nn.functional.cross_entropy(model(X[i : i + 32]), Y[i : i + 32]) / 4
            loss.backward()
            total += float(loss.detach())
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        run.log(step, train_loss=total)


def test_accumulation_without_the_optimizer_warns_once_and_names_the_fix(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = named_mlp(12, 16, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with nbviz.Run(tmp_path / "r") as run:
        with pytest.warns(UserWarning, match=r"run\.log\(1\) came after 4 training passes") as got:
            probe = run.watch(model, every=1)
            _accumulate(run, model, opt, 5)
        assert len([w for w in got if "training passes" in str(w.message)]) == 1
        assert any("run.watch(model, optimizer=opt)" in n for n in probe.notes)
        probe.close()


def test_accumulation_with_the_optimizer_is_one_step_per_update_and_quiet(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = named_mlp(12, 16, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with nbviz.Run(tmp_path / "r") as run, warnings.catch_warnings():
        warnings.simplefilter("error")
        with run.watch(model, every=2, optimizer=opt):
            _accumulate(run, model, opt, 6)
        run.flush()
        assert list(run.steps("update")) == [0, 2, 4]
        updates = run.stats("update", layer="fc1.weight")
        assert (updates["norm"] > 0).all()  # each captured step holds its optimizer's update
        assert run.diagnose().query("check == 'stuck_weights'").empty


def test_logging_every_tenth_step_or_a_loop_started_again_is_no_accumulation(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    model = named_mlp(12, 16, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with nbviz.Run(tmp_path / "r") as run, warnings.catch_warnings():
        warnings.simplefilter("error")
        with run.watch(model, every=5):
            for again in range(2):  # the training cell run again, over what it logged
                for step in range(30):
                    i = (step * 32) % 512
                    loss = nn.functional.cross_entropy(model(X[i : i + 32]), Y[i : i + 32])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    if step % 10 == 0:
                        run.log(step, train_loss=loss, overwrite=bool(again))


def test_a_warm_up_from_zero_seen_at_one_capture_blames_no_layer(tmp_path: Path) -> None:
    """A short run at the default period captures step 0 alone, where a learning rate
    warmed up from 0 moves nothing: one info row on the step, no layer's optimizer blamed."""
    torch.manual_seed(0)
    model = named_mlp(12, 16, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, step / 10))
    with nbviz.Run(tmp_path / "r") as run:
        with run.watch(model):
            for step in range(30):
                i = (step * 32) % 512
                loss = nn.functional.cross_entropy(model(X[i : i + 32]), Y[i : i + 32])
                opt.zero_grad()
                loss.backward()
                opt.step()
                warm.step()
                run.log(step, train_loss=loss)
        run.flush()
        assert list(run.steps("update")) == [0]
        stuck = run.diagnose().query("check == 'stuck_weights'")
        assert len(stuck) == 1 and stuck["severity"].iloc[0] == "info"
        assert stuck["layer"].iloc[0] == ""
        assert "No parameter changed at step 0, the only step captured" in stuck["message"].iloc[0]
        assert run.triage()["cause"].iloc[0] == "healthy"
