"""run.triage() names the cause a model was built to have; its consequences fold under it.

Each pathology is a small real model trained for real with a probe, once at
``every=1`` and once at the probe's defaults, and read back from the run on disk.
The same seed gives the same losses either way (a probe never changes training),
so the root's step is the same at both. Runs are recorded once per module, which is
why the pathologies share one file.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import nbviz
from nbviz.analysis.causes import Context, link
from nbviz.analysis.checks.finding import Finding
from nbviz.analysis.diagnose import diagnose, format_findings
from nbviz.analysis.triage import COLUMNS, triage, verdict_text

EVERY = pytest.mark.parametrize("every", [1, None], ids=["every=1", "default"])
#: Steps per run: enough captures at the default period (0, 50, 100, 150).
STEPS = {1: 100, None: 200}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -------------------------------------------------------------------- models
def mlp(*sizes: int, act: type[nn.Module] = nn.ReLU, norm: type[nn.Module] | None = None):
    """``fc1, [norm1,] act1, fc2, ..., fcN``: named layers, no activation after the last."""
    layers: list[tuple[str, nn.Module]] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True), start=1):
        layers.append((f"fc{i}", nn.Linear(a, b)))
        if i < len(sizes) - 1:
            if norm is not None:
                layers.append((f"norm{i}", norm(b)))
            layers.append((f"act{i}", act()))
    return nn.Sequential(OrderedDict(layers))


def normal_init(model: nn.Module, std: Callable[[int], float]) -> nn.Module:
    """Every linear weight drawn from N(0, std(fan_in)^2), biases zero."""
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight, std=std(layer.in_features))
            nn.init.zeros_(layer.bias)
    return model


class SequenceClassifier(nn.Module):
    """Embedding, one transformer encoder layer, mean pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 32)
        self.encoder = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(x)).mean(1))


class ResidualBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus the input, then ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


@pytest.fixture(scope="module")
def data():
    """Digits (flat), a random binary task, sequences and a regression target."""
    from nbviz.demo import load_digits

    d = load_digits(seed=0)
    g = torch.Generator().manual_seed(0)
    xr = torch.randn(256, 16, generator=g)
    xs = torch.randint(0, 12, (512, 10), generator=g)
    xq = torch.randn(512, 8, generator=g)
    yq = (xq @ torch.randn(8, 1, generator=g)).tanh() + 0.05 * torch.randn(512, 1, generator=g)
    return {
        "digits": (torch.from_numpy(d.x_train).flatten(1), torch.from_numpy(d.y_train)),
        "pixels": (255 * torch.from_numpy(d.x_train).flatten(1), torch.from_numpy(d.y_train)),
        "linear": (xq, xq @ torch.randn(8, 1, generator=g)),
        "images": (torch.from_numpy(d.x_train), torch.from_numpy(d.y_train)),
        "binary": (xr, (xr[:, 0] > 0).long()),
        "sequences": (xs, ((xs == 3).sum(1) >= 1).long()),
        "regression": (xq, yq),
    }


def _scenario(name: str):
    """(model, optimizer, data key, loss function) of a named scenario, seeded."""
    torch.manual_seed(0)
    ce = nn.functional.cross_entropy
    if name == "oscillating_lr":  # tanh keeps it bounded: no NaN, just overshoot
        m = mlp(64, 64, 32, 10, act=nn.Tanh)
        return m, torch.optim.SGD(m.parameters(), lr=3.0), "digits", ce
    if name == "lr_kills_relus":
        m = mlp(64, 64, 32, 10)
        return m, torch.optim.SGD(m.parameters(), lr=10.0), "digits", ce
    if name == "lr_too_low":
        m = mlp(64, 64, 32, 10)
        return m, torch.optim.SGD(m.parameters(), lr=1e-4), "digits", ce
    if name == "deep_sigmoid":
        m = mlp(16, *[32] * 9, 2, act=nn.Sigmoid)  # 10 linear layers
        return m, torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), "binary", ce
    if name == "growing_gradients":  # N(0, 6 / fan_in): about 1.9x per ReLU layer
        m = normal_init(mlp(64, *[64] * 9, 10), lambda fan_in: math.sqrt(6 / fan_in))
        return m, torch.optim.Adam(m.parameters(), lr=1e-3), "digits", ce
    if name == "tiny_init":  # N(0, 0.01^2): about 16x smaller per layer
        m = normal_init(mlp(64, *[64] * 7, 10), lambda fan_in: 0.01)
        return m, torch.optim.Adam(m.parameters(), lr=1e-3), "digits", ce
    if name == "saturated_init":  # tanh with N(0, 36 / fan_in): most outputs at +-1 from the start
        m = normal_init(mlp(64, *[64] * 6, 10, act=nn.Tanh), lambda fan_in: 6 / math.sqrt(fan_in))
        return m, torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), "digits", ce
    if name == "lr_diverges":  # every step overshoots more, until the loss overflows
        m = mlp(8, 32, 1, act=nn.Tanh)
        return m, torch.optim.SGD(m.parameters(), lr=0.5), "linear", nn.functional.mse_loss
    if name == "unscaled_inputs":  # raw pixel values 0..255
        m = mlp(64, 64, 32, 10)
        return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), "pixels", ce
    if name == "healthy_resnet":
        m = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            ResidualBlock(8),
            ResidualBlock(8),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 10),
        )
        return (
            m,
            torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4),
            "images",
            ce,
        )
    if name == "healthy_adam_mlp":
        m = mlp(64, 64, 32, 10)
        return m, torch.optim.Adam(m.parameters(), lr=3e-3), "digits", ce
    if name == "healthy_cnn":
        from nbviz.demo import digits_cnn

        m = digits_cnn(8)
        return m, torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), "images", ce
    if name == "healthy_batchnorm":
        m = mlp(64, 64, 64, 10, norm=nn.BatchNorm1d)
        return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), "digits", ce
    if name == "healthy_tanh":
        m = mlp(64, 64, 32, 10, act=nn.Tanh)
        return m, torch.optim.SGD(m.parameters(), lr=0.1), "digits", ce
    if name == "healthy_regression":
        m = mlp(8, 32, 32, 1, act=nn.GELU)
        return m, torch.optim.AdamW(m.parameters(), lr=3e-3), "regression", nn.functional.mse_loss
    if name == "healthy_transformer":
        m = SequenceClassifier()
        return m, torch.optim.Adam(m.parameters(), lr=1e-3), "sequences", ce
    raise KeyError(name)


def train(path: Path, name: str, every: int | None, data: dict) -> Path:
    """The standard loop: forward, backward, optimizer.step(), run.log(step, train_loss, lr)."""
    model, opt, key, loss_fn = _scenario(name)
    x, y = data[key]
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(path) as run:
        run.watch(model) if every is None else run.watch(model, every=every)
        for step in range(STEPS[every]):
            idx = torch.randint(0, len(y), (64,), generator=gen)
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss.item(), lr=opt.param_groups[0]["lr"])
    return path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, data):
    """``recorded(name, every)``: the run of a scenario, trained once per module."""
    cache: dict[tuple[str, int | None], Path] = {}
    runs = []

    def get(name: str, every: int | None):
        key = (name, every)
        if key not in cache:
            cache[key] = train(tmp_path_factory.mktemp(name) / "run", name, every, data)
        run = nbviz.open_run(cache[key])
        runs.append(run)
        return run

    yield get
    for run in runs:
        run.close()


# ------------------------------------------------------------ reading runs
def verdict_of(run):
    findings = diagnose(run)
    verdict = triage(run, findings)
    return findings, verdict


def root_of(findings, verdict):
    """The first verdict row's top root finding (its first id)."""
    first = verdict.iloc[0]
    root = findings.set_index("id").loc[first["findings"][0]]
    assert root["root"] == "", "the verdict's first finding is a root"
    return root


def first_rise(run, factor: float = 1.3) -> int:
    """The first step whose training loss is ``factor`` times the first step's."""
    frame = run.scalars("train_loss")
    values = frame["value"].to_numpy()
    return int(frame["step"].to_numpy()[np.flatnonzero(values >= factor * values[0])[0]])


def explain(findings, verdict) -> str:
    return verdict_text(verdict) + "\n" + format_findings(findings)


# -------------------------------------------------------------- learning rate
@EVERY
def test_a_learning_rate_that_makes_the_loss_oscillate_without_nan(every, recorded):
    run = recorded("oscillating_lr", every)
    findings, verdict = verdict_of(run)
    assert np.isfinite(run.scalars("train_loss")["value"]).all()  # no NaN: overshoot only
    assert verdict.iloc[0]["cause"] == "learning_rate", explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == (
        "learning_rate_too_high",
        "",
        first_rise(run),
    )
    assert root["severity"] == "error"  # it ends no lower than it started
    assert "3" in verdict.iloc[0]["advice"] and "warm-up" in verdict.iloc[0]["advice"]
    # the saturated tanh units and the gradients they stop follow from it
    saturated = findings[findings["check"] == "saturated_units"]
    assert len(saturated) and set(saturated["root"]) == {root.name}
    assert set(findings[findings["severity"] != "info"]["cause"]) == {"learning_rate"}


@EVERY
def test_a_learning_rate_spike_that_kills_relus_folds_dead_units_and_stuck_weights(every, recorded):
    run = recorded("lr_kills_relus", every)
    findings, verdict = verdict_of(run)
    assert list(verdict["cause"]) == ["learning_rate"], explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == (
        "learning_rate_too_high",
        "",
        first_rise(run),
    )
    dead = findings[findings["check"] == "dead_units"].set_index("layer")
    assert dead.loc["act2", "severity"] == "error"  # every unit of act2 died
    assert not dead.loc["act2", "evidence"]["at_init"]  # ... after the first capture
    stuck = findings[findings["check"] == "stuck_weights"]
    assert len(stuck) >= 2
    for folded in (dead, stuck):
        assert set(folded["root"]) == {root.name}
        assert set(folded["cause"]) == {"learning_rate"}
        assert set(folded["advice"]) == {""}
    assert not findings["message"].str.contains("optimizer was given").any()
    assert "optimizer" not in " ".join(verdict["advice"])
    assert set(stuck["evidence"].map(lambda e: e["why"])) == {"no_gradient"}


@EVERY
def test_a_learning_rate_too_low_is_named_with_a_range_to_try(every, recorded):
    run = recorded("lr_too_low", every)
    findings, verdict = verdict_of(run)
    first = verdict.iloc[0]
    assert first["cause"] == "learning_rate", explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == ("learning_rate_too_low", "", 0)
    assert root["evidence"]["update_to_weight"] < 1e-4 and root["evidence"]["lr"] == 1e-4
    # raise it toward update/weight ratios of 1e-3: a range above today's 1e-4
    factor = root["evidence"]["suggested_factor"]
    assert 30 < factor < 3000 and "raise the learning rate" in first["advice"].lower()
    assert "(now 1.00e-04)" in first["advice"]
    assert len(verdict) == 1


@EVERY
def test_a_learning_rate_that_diverges_to_nan_is_the_root_of_the_nan(every, recorded):
    run = recorded("lr_diverges", every)
    findings, verdict = verdict_of(run)
    assert not np.isfinite(run.scalars("train_loss")["value"]).all()
    assert verdict.iloc[0]["cause"] == "learning_rate", explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == (
        "learning_rate_too_high",
        "",
        first_rise(run),
    )
    nan = findings[findings["check"] == "nonfinite"].iloc[0]
    assert nan["root"] == root.name and nan["cause"] == "learning_rate"
    assert nan["step"] > root["step"] and nan["advice"] == ""
    assert "numerics" not in set(verdict["cause"])


# ----------------------------------------------------------------------- data
@EVERY
def test_inputs_far_from_unit_scale_are_the_root_of_the_instability_they_cause(every, recorded):
    run = recorded("unscaled_inputs", every)
    findings, verdict = verdict_of(run)
    assert verdict.iloc[0]["cause"] == "data", explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == ("input_scale", "fc1", 0)
    assert 50 < root["evidence"]["input_rms"] < 200  # raw pixels: 124 in truth
    folded = findings[findings["root"] == root.name]
    assert "learning_rate_too_high" in set(folded["check"])
    assert "normalise the inputs" in verdict.iloc[0]["advice"].lower()


# --------------------------------------------------------------- architecture
@EVERY
def test_a_deep_sigmoid_net_vanishes_and_its_stuck_weights_follow(every, recorded):
    run = recorded("deep_sigmoid", every)
    findings, verdict = verdict_of(run)
    assert list(verdict["cause"]) == ["architecture"], explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == ("vanishing_gradients", "fc1", 0)
    stuck = findings[findings["check"] == "stuck_weights"]
    assert len(stuck) >= 2 and "fc1" in set(stuck["layer"])
    assert set(stuck["root"]) == {root.name} and set(stuck["advice"]) == {""}
    assert set(stuck["evidence"].map(lambda e: e["why"])) == {"small_gradient"}
    assert not findings["message"].str.contains("optimizer was given").any()
    # the update/weight ratios are tiny, but because the gradient is: not the learning rate
    low = findings[findings["check"] == "learning_rate_too_low"]
    assert set(low["root"]) <= {root.name}


@EVERY
def test_output_gradients_growing_by_depth_are_exploding_gradients(every, recorded):
    run = recorded("growing_gradients", every)
    findings, verdict = verdict_of(run)
    assert verdict.iloc[0]["cause"] == "architecture", explain(findings, verdict)
    exploding = findings[findings["check"] == "exploding_gradients"]
    assert len(exploding) == 1, explain(findings, verdict)
    row = exploding.iloc[0]
    assert row["layer"] == "fc1" and row["evidence"]["kind"] == "backprop"
    assert row["evidence"]["backprop_ratio"] >= 10
    # the weights' scale makes both the activations grow forward and the gradients backward
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == ("bad_init", "fc1", 0)
    assert row["root"] == root.name and root["evidence"]["total_change"] > 100


@EVERY
def test_a_bad_initialisation_is_the_root_of_what_follows(every, recorded):
    run = recorded("tiny_init", every)
    findings, verdict = verdict_of(run)
    assert list(verdict["cause"]) == ["architecture"], explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["layer"], root["step"]) == ("bad_init", "fc1", 0)
    assert root["evidence"]["total_change"] < 1e-3  # the signal shrinks with depth
    assert root["evidence"]["kind"] == "whole stack"
    serious = findings[(findings["severity"] != "info") & (findings["id"] != root.name)]
    assert len(serious) and set(serious["root"]) == {root.name}
    assert "Kaiming" in verdict.iloc[0]["advice"]


@EVERY
def test_tanh_units_saturated_by_their_initial_weights_are_the_architecture(every, recorded):
    # at the first capture each unit sits on +1 for some samples and -1 for others: the
    # layer's moments and its units' means do not show it yet, its histogram does
    run = recorded("saturated_init", every)
    findings, verdict = verdict_of(run)
    assert list(verdict["cause"]) == ["architecture"], explain(findings, verdict)
    root = root_of(findings, verdict)
    assert (root["check"], root["step"]) == ("saturated_units", 0)
    assert root["layer"].startswith("act") and root["evidence"]["from_first_capture"]
    assert root["evidence"]["at_first_capture"] >= 0.25
    assert "Xavier" in verdict.iloc[0]["advice"]
    serious = findings[findings["severity"] != "info"]
    assert set(serious["cause"]) == {"architecture"}, explain(findings, verdict)


# ------------------------------------------------------------------- healthy
HEALTHY = [
    "healthy_adam_mlp",
    "healthy_cnn",
    "healthy_batchnorm",
    "healthy_tanh",
    "healthy_regression",
    "healthy_transformer",
    "healthy_resnet",
]


@EVERY
@pytest.mark.parametrize("kind", HEALTHY)
def test_healthy_runs_of_several_kinds_are_healthy(kind, every, recorded):
    run = recorded(kind, every)
    findings, verdict = verdict_of(run)
    assert list(verdict["cause"]) == ["healthy"], explain(findings, verdict)
    assert set(findings["severity"]) <= {"info"}, format_findings(findings)
    row = verdict.iloc[0]
    assert row["summary"].startswith("No problem found") and row["advice"] == ""
    assert list(row["findings"]) == list(findings["id"])


# --------------------------------------------------------------- the frame
def test_the_verdict_has_its_columns_and_scores_in_order(recorded):
    run = recorded("lr_kills_relus", 1)
    findings, verdict = verdict_of(run)
    assert list(verdict.columns) == list(COLUMNS)
    assert verdict["score"].between(0, 1).all()
    assert list(verdict["score"]) == sorted(verdict["score"], reverse=True)
    row = verdict.iloc[0]
    assert row["summary"].endswith(".") and row["summary"].count(". ") == 0
    assert set(row["findings"]) == set(findings[findings["cause"] == "learning_rate"]["id"])
    assert len(row["evidence"]) == len(row["findings"])
    assert findings["id"].is_unique
    roots = set(findings.loc[findings["root"] == "", "id"])
    assert set(findings["root"]) - {""} <= roots  # a root is the top of its chain
    # a consequence's message says what it follows from, a root's what to try
    folded = findings[findings["root"] != ""]
    assert folded["message"].str.contains("This follows from").all()
    assert findings.loc[findings["id"] == row["findings"][0], "message"].str.contains("Try:").all()


def test_the_verdict_names_the_step_of_each_figure_it_gives(recorded):
    # the rise starts at the root's step; its largest ratio is reached at the peak's step
    from nbviz.analysis.checks.finding import fmt

    run = recorded("lr_kills_relus", 1)
    findings, verdict = verdict_of(run)
    root = root_of(findings, verdict)
    ev = root["evidence"]
    assert ev["peak_step"] > root["step"]
    losses = run.scalars("train_loss").set_index("step")["value"]
    ratio = fmt(losses[ev["peak_step"]] / losses.iloc[0])
    summary = verdict.iloc[0]["summary"]
    assert f"from step {root['step']}" in summary, summary
    assert f"{ratio}x its starting value at step {ev['peak_step']}" in summary, summary


def test_the_run_gives_the_verdict_and_nbviz_info_prints_it_first(recorded, capsys):
    from nbviz.cli import main

    run = recorded("lr_too_low", None)
    verdict = run.triage()
    assert list(verdict.columns) == list(COLUMNS) and verdict.iloc[0]["cause"] == "learning_rate"
    assert main(["info", str(run.path)]) == 0
    out = capsys.readouterr().out
    assert out.index("verdict:") < out.index("findings (")
    assert out.splitlines()[1].lstrip().startswith("LEARNING RATE")


# ------------------------------------------------------------ the mechanism
def _finding(check: str, step: int | None, layer: str = "", **evidence) -> Finding:
    return Finding(check=check, severity="warning", message=check, layer=layer, step=step,
                   evidence=evidence)  # fmt: skip


def test_a_consequence_is_linked_to_its_strongest_earlier_explanation():
    ctx = Context(layout=None, every=1, first_capture=0)
    high = _finding("learning_rate_too_high", 3)
    spike = _finding("loss_spikes", 5)
    dead = _finding("dead_units", 9, "act1", at_init=False, first_dead_step=6, fraction=1.0)
    early = _finding("dead_units", 0, "act2", at_init=True, first_dead_step=0, fraction=1.0)
    links = link([spike, dead, high, early], ctx)
    assert links.parent == [2, 2, None, None]  # the spike and the killed units: the lr
    assert links.root == [2, 2, None, None]  # units dead from the start: their own root


def test_a_cause_never_comes_after_its_consequence_and_links_never_cycle():
    ctx = Context(layout=None, every=1, first_capture=0)
    later = _finding("learning_rate_too_high", 50)
    dead = _finding("dead_units", 10, "act1", at_init=False, first_dead_step=10, fraction=1.0)
    assert link([later, dead], ctx).parent == [None, None]
    a = _finding("nonfinite", 5)
    b = _finding("exploding_gradients", 7, "fc1", kind="growth")
    links = link([a, b], ctx)  # NaN at 5 explains the growth at 7, not the reverse
    assert links.parent == [None, 0]


# ------------------------------------------------ what the loop alone logs
def _log_series(path: Path, losses, **series) -> nbviz.RunView:
    with nbviz.Run(path) as run:
        for step, loss in enumerate(losses):
            run.log(step, train_loss=float(loss), **{k: float(v[step]) for k, v in series.items()})
    return nbviz.open_run(path)


def test_a_loss_that_blows_up_is_the_learning_rate_with_no_probe_at_all(tmp_path):
    rng = np.random.default_rng(0)
    losses = np.concatenate([2.3 - 0.01 * np.arange(20), 6 + rng.random(80)])
    run = _log_series(tmp_path / "run", losses, lr=np.full(100, 0.5))
    findings, verdict = verdict_of(run)
    assert list(verdict["cause"]) == ["learning_rate"]
    root = root_of(findings, verdict)
    assert (root["check"], root["step"]) == ("learning_rate_too_high", 20)
    assert "to 0.05 to 0.167 (now 0.5)" in verdict.iloc[0]["advice"]
    run.close()


def test_the_curvature_test_backs_a_blow_up_and_alone_is_only_worth_knowing(tmp_path):
    steps = np.arange(100)
    blown = np.concatenate([2.3 - 0.01 * np.arange(20), np.full(80, 6.0)])
    sharp = {"sharpness": np.where(steps >= 20, 90.0, 10.0), "stability_limit": np.full(100, 40.0)}
    run = _log_series(tmp_path / "blown", blown, lr=np.full(100, 0.05), **sharp)
    findings, verdict = verdict_of(run)
    root = root_of(findings, verdict)
    assert root["evidence"]["sharpness"]["over"] == 80
    assert "curvature test" in root["message"]
    # the stable limit scales with 1/lr: lr * limit / sharpness
    assert "below 0.0222 (now 0.05" in verdict.iloc[0]["advice"]
    run.close()
    calm = 2.3 * np.exp(-0.02 * steps)
    run = _log_series(tmp_path / "calm", calm, lr=np.full(100, 0.05), **sharp)
    findings, verdict = verdict_of(run)
    assert list(verdict["cause"]) == ["healthy"]
    row = findings[findings["check"] == "learning_rate_too_high"].iloc[0]
    assert row["severity"] == "info" and "edge of stability" in row["message"]
    run.close()
