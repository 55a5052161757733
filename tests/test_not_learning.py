"""A classifier whose loss stays at chance while its weights move learns nothing: the
diagnosis says so (the labels, the inputs or the loop), where a healthy run, a
regression, a warm-up and a stalled model each say something else."""

from __future__ import annotations

import math

import torch
from torch import nn
from training import named_mlp

import nbviz
from nbviz.demo import load_digits

STEPS = 150


def digits_run(path, labels: str = "true", lr_warmup: bool = False) -> nbviz.Run:
    """An MLP on the digits for ``STEPS`` steps of SGD; ``labels="random"`` draws each
    batch's labels afresh, unrelated to the images."""
    torch.manual_seed(0)
    d = load_digits(seed=0)
    x, y = torch.from_numpy(d.x_train).flatten(1), torch.from_numpy(d.y_train)
    model = named_mlp(64, 64, 32, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    run = nbviz.Run(path)
    run.watch(model, every=10, optimizer=opt)
    for step in range(STEPS):
        if lr_warmup:  # rising all run long: from 0.01 to 0.1
            for group in opt.param_groups:
                group["lr"] = 0.01 + 0.09 * step / STEPS
        idx = torch.randint(0, len(y), (64,), generator=gen)
        target = torch.randint(0, 10, (64,), generator=gen) if labels == "random" else y[idx]
        loss = nn.functional.cross_entropy(model(x[idx]), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
    return run


def test_labels_unrelated_to_the_inputs_leave_the_loss_at_chance_and_say_so(tmp_path):
    with digits_run(tmp_path / "run", labels="random") as run:
        found = run.diagnose()
        row = found[found["check"] == "not_learning"].iloc[0]
        assert (row["severity"], row["cause"], row["root"]) == ("warning", "data", "")
        ev = row["evidence"]
        assert ev["outputs"] == 10 and ev["output_layer"] == "fc3"
        assert abs(ev["loss_end"] - math.log(10)) < 0.05 * math.log(10)
        assert ev["update_to_weight"] >= 1e-4
        assert "labels may not follow from the inputs" in row["message"]
        assert "one small batch" in row["advice"]
        assert run.triage().iloc[0]["cause"] == "data"


def test_the_same_model_on_its_labels_is_healthy(tmp_path):
    with digits_run(tmp_path / "run") as run:
        assert "not_learning" not in set(run.diagnose()["check"])
        assert run.triage().iloc[0]["cause"] == "healthy"


def test_a_learning_rate_still_warming_up_is_too_early_to_judge(tmp_path):
    with digits_run(tmp_path / "run", labels="random", lr_warmup=True) as run:
        assert "not_learning" not in set(run.diagnose()["check"])


def test_a_loss_that_is_no_cross_entropy_at_chance_says_nothing(tmp_path):
    """A regression whose error stays flat: its loss never started near ln(outputs)."""
    torch.manual_seed(0)
    model = named_mlp(8, 32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=10)
        for step in range(STEPS):
            x = torch.randn(32, 8, generator=gen)
            loss = nn.functional.mse_loss(model(x), 3 * torch.randn(32, 4, generator=gen))
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
        run.flush()
        assert "not_learning" not in set(run.diagnose()["check"])


def test_a_language_model_on_random_tokens_is_at_chance_over_its_vocabulary(tmp_path):
    from reference_models import GPT, GPTConfig, next_token_loss

    torch.manual_seed(0)
    config = GPTConfig(vocab=64, context=16, width=32, heads=2, blocks=2)
    model = GPT(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=10)
        for step in range(120):
            ids = torch.randint(0, config.vocab, (8, config.context + 1), generator=gen)
            loss = next_token_loss(model(ids[:, :-1]), ids[:, 1:])
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
        run.flush()
        found = run.diagnose()
        row = found[found["check"] == "not_learning"]
        assert len(row) == 1 and row.iloc[0]["evidence"]["outputs"] == config.vocab


def test_a_finding_that_stalls_the_model_explains_a_loss_at_chance():
    from nbviz.analysis.causes import Context, link
    from nbviz.analysis.checks.finding import Finding

    ctx = Context(layout=None, every=10, first_capture=0)
    at_chance = Finding(
        check="not_learning", severity="warning", cause="data", layer="", step=0, message="."
    )

    def vanishing(severity: str) -> Finding:
        return Finding(
            check="vanishing_gradients",
            severity=severity,
            cause="architecture",
            layer="fc1",
            step=0,
            message=".",
        )

    assert link([vanishing("warning"), at_chance], ctx).parent == [None, 0]
    # an info (the optimizer's steps make up for the gradient) stalls nothing
    assert link([vanishing("info"), at_chance], ctx).parent == [None, None]
    # nor does the loss at chance explain anything else
    assert link([at_chance, vanishing("warning")], ctx).parent == [1, None]
