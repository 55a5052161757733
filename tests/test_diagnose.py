"""run.diagnose() names each problem a model was built to have: check, layer and step.

Every test trains a small real model on synthetic data or scikit-learn's digits
for a few dozen steps with a probe, at every=1 and at every=10, and reads the
findings back from the run on disk. Healthy runs must come back without a
warning or an error.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable

import pytest
import torch
from torch import nn
from training import dead_relu_mlp, loss_only_run, named_mlp, sgd_step

import nbviz
from nbviz.analysis.diagnose import CHECKS, COLUMNS, diagnose, format_findings

EVERY = pytest.mark.parametrize("every", [1, 10])


# ----------------------------------------------------------------- fixtures
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def digits():
    """Digits as flat float32 vectors: a fixed train and validation split."""
    from nbviz.demo import load_digits

    data = load_digits(seed=0)
    xt = torch.from_numpy(data.x_train.reshape(len(data.x_train), -1))
    xv = torch.from_numpy(data.x_val.reshape(len(data.x_val), -1))
    return xt, torch.from_numpy(data.y_train), xv, torch.from_numpy(data.y_val)


def train(
    run: nbviz.Run,
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    every: int,
    steps: int,
    optimizer: torch.optim.Optimizer | None = None,
    loss_fn: Callable = nn.functional.cross_entropy,
    batch: int = 64,
    evaluate: tuple[torch.Tensor, torch.Tensor] | None = None,
    eval_every: int = 10,
    before_step: Callable[[int], None] | None = None,
    logged_loss: Callable[[int, float], float] = lambda step, loss: loss,
) -> None:
    """The standard loop: forward, backward, optimizer.step(), run.log(step, train_loss=...)."""
    opt = optimizer or torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    run.watch(model, every=every, hist_every=every)  # per-unit maps at each capture too
    for step in range(steps):
        if before_step is not None:
            before_step(step)
        idx = torch.randint(0, len(y), (min(batch, len(y)),), generator=gen)
        if batch >= len(y):
            idx = torch.arange(len(y))
        loss = sgd_step(model, opt, x[idx], y[idx], loss_fn)
        run.log(step, train_loss=logged_loss(step, loss.item()))
        if evaluate is not None and (step + 1) % eval_every == 0:
            xv, yv = evaluate
            run.evaluate(step, model, [(xv, yv)], split="val", samples=False)
    run.flush()


def serious(findings):
    return findings[findings["severity"].isin(["warning", "error"])]


def only(findings, check: str):
    rows = findings[findings["check"] == check]
    assert len(rows) == 1, f"expected one {check} finding, got:\n{format_findings(findings)}"
    return rows.iloc[0]


# ------------------------------------------------------------------ healthy
def test_the_demo_run_has_no_warnings_or_errors(demo_run):
    findings = demo_run.diagnose()
    assert list(findings.columns) == list(COLUMNS)
    assert serious(findings).empty, format_findings(findings)


@EVERY
def test_a_healthy_mlp_has_no_warnings_or_errors(every, tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, xv, yv = digits
    model = named_mlp(64, 64, 32, 10)
    with nbviz.Run(tmp_path / "run") as run:
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        train(run, model, xt, yt, every=every, steps=60, optimizer=opt, evaluate=(xv, yv))
        findings = run.diagnose()
    assert serious(findings).empty, format_findings(findings)


def test_findings_are_json_serialisable_and_sorted_worst_first(tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = named_mlp(64, 32, 10)
    with torch.no_grad():
        model.fc1.bias.fill_(-10.0)  # an error (a dead layer) ...
    model.fc2.weight.requires_grad_(False)  # ... and an info (a frozen weight)
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, xt, yt, every=5, steps=20)
        findings = run.diagnose()
    ranks = findings["severity"].map({"error": 0, "warning": 1, "info": 2}).tolist()
    assert ranks == sorted(ranks) and ranks[0] == 0 and ranks[-1] == 2
    for evidence in findings["evidence"]:
        json.dumps(evidence, allow_nan=False)
    assert all(s is None or type(s) is int for s in findings["step"])
    assert findings.iloc[-1]["step"] is None  # the frozen weight has no "since when"
    assert set(findings["check"]) <= set(CHECKS)


# -------------------------------------------------------------- dead units
@EVERY
def test_a_bias_of_minus_ten_before_a_relu_kills_the_layer(every, tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = dead_relu_mlp(64, 32, 10)
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, xt, yt, every=every, steps=40)
        findings = run.diagnose()
    row = only(findings, "dead_units")
    assert (row["layer"], row["step"], row["severity"]) == ("act1", 0, "error")
    assert row["evidence"]["dead"] == row["evidence"]["units"] == 32
    assert "act1" in row["message"] and "dead" in row["message"]
    # the layer before the dead ReLU then gets no gradient: worth knowing, not a second alarm
    fc1 = findings[(findings["check"] == "stuck_weights") & (findings["layer"] == "fc1")]
    assert fc1["severity"].tolist() == ["info"]
    assert "vanishing_gradients" not in set(findings["check"])


def test_most_of_a_layer_dead_is_a_warning_and_a_few_units_are_info(tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = named_mlp(64, 32, 10)
    with torch.no_grad():
        model.fc1.bias[:24].fill_(-10.0)  # 24 of 32 units dead
    with nbviz.Run(tmp_path / "most") as run:
        train(run, model, xt, yt, every=5, steps=40)
        row = only(run.diagnose(), "dead_units")
    assert (row["layer"], row["severity"], row["evidence"]["dead"]) == ("act1", "warning", 24)

    torch.manual_seed(0)
    model = named_mlp(64, 32, 10)
    with torch.no_grad():
        model.fc1.bias[:3].fill_(-10.0)  # 3 of 32
    with nbviz.Run(tmp_path / "few") as run:
        train(run, model, xt, yt, every=5, steps=40)
        findings = run.diagnose()
    row = only(findings, "dead_units")
    assert (row["layer"], row["severity"], row["evidence"]["dead"]) == ("act1", "info", 3)
    assert serious(findings).empty, format_findings(findings)


# ------------------------------------------------------- vanishing gradients
@EVERY
def test_a_16_layer_sigmoid_mlp_has_vanishing_gradients(every, tmp_path):
    torch.manual_seed(0)
    x = torch.randn(256, 16)
    y = (x[:, 0] > 0).long()
    model = named_mlp(16, *([32] * 15), 2, act=nn.Sigmoid)  # 16 linear layers
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, x, y, every=every, steps=30)
        findings = run.diagnose()
    row = only(findings, "vanishing_gradients")
    assert (row["layer"], row["step"], row["severity"]) == ("fc1", 0, "warning")
    assert row["evidence"]["ratio_to_later_layers"] < 1e-3
    assert row["evidence"]["layers"][0] == "fc1" and "fc16" not in row["evidence"]["layers"]
    assert "exploding_gradients" not in set(findings["check"])


def test_depth_checks_compare_layers_within_each_model_of_a_run(tmp_path):
    """Three models in one run: a 16-layer sigmoid MLP vanishes; a small model trained
    on a far smaller loss, watched before a healthy one, does not."""
    torch.manual_seed(0)
    x = torch.randn(256, 16)
    y = (x[:, 0] > 0).long()
    models = {
        "small": (named_mlp(16, 32, 2), 1e-5),
        "deep": (named_mlp(16, *([32] * 15), 2, act=nn.Sigmoid), 1.0),
        "healthy": (named_mlp(16, 64, 64, 2), 1.0),
    }
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.1) for name, (m, _) in models.items()}
    with nbviz.Run(tmp_path / "run") as run:
        for name, (model, _) in models.items():
            run.watch(model, name=name, every=1)
        for step in range(30):
            for name, (model, scale) in models.items():
                opts[name].zero_grad()
                loss = scale * nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opts[name].step()
            run.log(step, train_loss=loss)
        run.flush()
        findings = run.diagnose()
    row = only(findings, "vanishing_gradients")
    assert row["layer"] == "deep.fc1"
    assert all(layer.startswith("deep.") for layer in row["evidence"]["layers"])


def test_a_layer_belongs_to_the_longest_model_name_it_starts_with():
    from nbviz.analysis.checks.model import ModelLayout

    lay = ModelLayout([], {}, [], (), None, models=("G", "G.ema", ""))
    assert lay.model_of("G.ema.0.weight") == "G.ema"
    assert lay.model_of("G.0.weight") == "G"
    assert lay.model_of("Gx.0") == lay.model_of("fc1") == ""


# ------------------------------------------------------- exploding gradients
@EVERY
def test_a_learning_rate_raised_past_stability_explodes_the_gradients(every, tmp_path):
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
    model = nn.Sequential(OrderedDict(fc=nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def raise_lr(step: int) -> None:
        if step == 20:  # far past 2 / (largest curvature): every step overshoots
            opt.param_groups[0]["lr"] = 2.0

    with nbviz.Run(tmp_path / "run") as run:
        train(
            run, model, x, y, every=every, steps=40, optimizer=opt,
            loss_fn=nn.functional.mse_loss, batch=256, before_step=raise_lr,
        )  # fmt: skip
        findings = run.diagnose()
    row = only(findings, "exploding_gradients")
    assert row["layer"] == "fc" and row["severity"] == "warning"
    assert 20 < row["step"] <= 20 + max(every, 5) and row["step"] % every == 0
    assert row["evidence"]["growth"] >= 100


# ----------------------------------------------------------- stuck weights
@EVERY
def test_a_parameter_group_with_zero_learning_rate_is_stuck(every, tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = named_mlp(64, 32, 32, 10)
    opt = torch.optim.SGD(
        [
            {"params": [*model.fc1.parameters(), *model.fc3.parameters()]},
            {"params": model.fc2.parameters(), "lr": 0.0},
        ],
        lr=0.1,
    )
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, xt, yt, every=every, steps=30, optimizer=opt)
        findings = run.diagnose()
    row = only(serious(findings), "stuck_weights")
    assert (row["layer"], row["step"], row["severity"]) == ("fc2", 0, "warning")
    params = {p["parameter"] for p in row["evidence"]["parameters"]}
    assert params == {"fc2.weight", "fc2.bias"}


@EVERY
def test_intentionally_frozen_parameters_are_info_not_a_warning(every, tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = named_mlp(64, 32, 10)
    model.fc1.requires_grad_(False)
    opt = torch.optim.SGD(model.fc2.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, xt, yt, every=every, steps=30, optimizer=opt)
        findings = run.diagnose()
    assert serious(findings).empty, format_findings(findings)
    row = only(findings, "stuck_weights")
    assert (row["layer"], row["severity"], row["step"]) == ("fc1", "info", None)
    assert "frozen" in row["message"]


# --------------------------------------------------------------- nonfinite
class PoisonAt(nn.Module):
    """Passes its input through, except on the ``at``-th training forward: one -inf."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.calls = at, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
            if self.calls - 1 == self.at:
                x = x.clone()
                x[0, 0] = -torch.inf
        return x


@EVERY
def test_the_first_nonfinite_layer_and_step_are_named_and_later_layers_are_downstream(
    every, tmp_path, digits
):
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = nn.Sequential(
        OrderedDict(
            fc1=nn.Linear(64, 32),
            poison=PoisonAt(17),
            fc2=nn.Linear(32, 32),
            act=nn.ReLU(),
            fc3=nn.Linear(32, 10),
        )
    )
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, xt, yt, every=every, steps=25)
        findings = run.diagnose()
    row = only(findings, "nonfinite")
    assert (row["layer"], row["step"], row["severity"]) == ("poison", 17, "error")
    assert findings.iloc[0]["check"] == "nonfinite"  # the worst comes first
    downstream = {d["module"] for d in row["evidence"]["downstream"]}
    assert {"fc2", "act", "fc3"} <= downstream and "poison" not in downstream
    assert "step 17" in row["message"] and "'poison'" in row["message"]
    # forward, the NaN reaches the outputs after its origin; backward, every layer's gradient,
    # those before it included: 'fc1' is named among the gradients, never among the outputs
    spread = row["message"].split("It spread within that step to ")[1].split(". ")[0]
    outputs, _, grads = spread.partition(" and the gradients of ")
    assert outputs.startswith("the outputs of ") and "'fc2'" in outputs, row["message"]
    assert "fc1" not in outputs and "'fc1.weight'" in grads, row["message"]
    assert "downstream" not in row["message"].lower()


# ------------------------------------------------------------- overfitting
@EVERY
def test_a_tiny_training_set_overfits_from_the_best_validation_step(every, tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, xv, yv = digits
    x, y = xt[:24], yt[:24].clone()
    y[::4] = (y[::4] + 1) % 10  # a quarter of the labels wrong: memorised, not learned
    model = named_mlp(64, 256, 10)
    with nbviz.Run(tmp_path / "run") as run:
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        train(
            run, model, x, y, every=every, steps=150, optimizer=opt, batch=24,
            evaluate=(xv, yv), eval_every=10,
        )  # fmt: skip
        findings = run.diagnose()
        val = run.scalars("val_loss")
    row = only(findings, "overfitting")
    best_step = int(val.loc[val["value"].idxmin(), "step"])
    assert (row["layer"], row["step"], row["severity"]) == ("", best_step, "warning")
    assert best_step < 149 and row["evidence"]["val_rise"] >= 0.1


# ------------------------------------------------------------- loss spikes
@EVERY
def test_a_loss_spike_is_found_at_its_step_and_minibatch_noise_is_not(every, tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = named_mlp(64, 32, 10)
    with nbviz.Run(tmp_path / "run") as run:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        train(
            run, model, xt, yt, every=every, steps=80, optimizer=opt, batch=16,
            logged_loss=lambda step, loss: loss * 8 if step == 57 else loss,
        )  # fmt: skip
        findings = run.diagnose()
    row = only(findings, "loss_spikes")
    assert (row["layer"], row["step"], row["severity"]) == ("", 57, "warning")
    assert row["evidence"]["robust_z"] >= 10


# ------------------------------------------------------ class error imbalance
@EVERY
def test_a_class_trained_under_another_label_is_mostly_wrong(every, tmp_path, digits):
    torch.manual_seed(0)
    xt, yt, xv, yv = digits
    y = yt.clone()
    y[y == 3] = 5  # the model never sees a "3": validation threes come out as fives
    model = named_mlp(64, 64, 10)
    with nbviz.Run(tmp_path / "run", class_names=[str(i) for i in range(10)]) as run:
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        train(
            run, model, xt, y, every=every, steps=60, optimizer=opt, evaluate=(xv, yv),
            eval_every=30,
        )  # fmt: skip
        findings = run.diagnose()
    row = only(serious(findings), "class_error_imbalance")
    assert (row["layer"], row["step"], row["severity"]) == ("", 29, "warning")
    assert row["evidence"]["class"] == 3 and row["evidence"]["error_rate"] > 0.9
    assert row["evidence"]["confused_with"][0]["name"] == "5"
    assert "'3'" in row["message"] and "'5'" in row["message"]


# -------------------------------------------------------------- reporting
def test_format_findings_lists_worst_first_and_says_when_there_are_none(tmp_path, digits):
    assert "none" in format_findings(diagnose_empty(tmp_path))
    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = dead_relu_mlp(64, 32, 10)
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, xt, yt, every=5, steps=20)
        text = format_findings(run.diagnose())
    lines = text.splitlines()
    assert lines[0].startswith("findings (1 error")
    assert lines[1].split()[:2] == ["ERROR", "dead_units"] and "layer act1, step 0" in lines[1]


def diagnose_empty(tmp_path):
    with loss_only_run(tmp_path / "empty") as run:
        return run.diagnose()


def test_nbviz_info_prints_the_findings(tmp_path, digits, capsys):
    from nbviz.cli import main

    torch.manual_seed(0)
    xt, yt, _, _ = digits
    model = dead_relu_mlp(64, 32, 10)
    with nbviz.Run(tmp_path / "run") as run:
        train(run, model, xt, yt, every=5, steps=20)
    assert main(["info", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "findings (1 error" in out and "dead_units [layer act1, step 0]" in out


def test_diagnose_can_run_chosen_checks_and_refuses_unknown_names(demo_run):
    assert diagnose(demo_run, checks=["nonfinite"]).empty
    with pytest.raises(ValueError, match=r"unknown check\(s\) \['dead'\]; choose from nonfinite"):
        diagnose(demo_run, checks=["dead"])


def test_analysis_reads_runs_without_torch_or_widgets():
    import subprocess
    import sys

    code = (
        "import sys, nbviz.analysis.diagnose; "
        "bad = [m for m in ('torch', 'ipywidgets', 'anywidget') if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("val_name", ["val_loss", "eval_loss", "valid_loss", "validation_loss"])
def test_overfitting_reads_the_validation_loss_under_the_names_trainers_give_it(tmp_path, val_name):
    with nbviz.Run(tmp_path / "run") as run:
        for step in range(100):
            run.log(step, loss=2.0 * 0.98**step)
            if step % 10 == 9:
                evaluation = step // 10
                run.log(
                    step,
                    **{val_name: 1.0 - 0.1 * min(evaluation, 4) + 0.08 * max(0, evaluation - 4)},
                )
        findings = run.diagnose()
    row = only(findings, "overfitting")
    assert (row["step"], row["severity"]) == (49, "warning")
    assert val_name in row["message"]
