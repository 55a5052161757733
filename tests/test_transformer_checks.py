"""Transformer diagnosis: massive activations, a residual stream growing with depth, and
where a loss spike began, each on a small GPT-style model with the fault planted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from reference_models import GPT, next_token_loss, token_batch
from torch import nn
from transformer_faults import (
    CONFIG,
    FeatureGain,
    GainedBlock,
    ScaledBlock,
    gain_after_block,
    train_lm,
)

import nbviz
from nbviz.analysis.checks import massive, residual

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def findings_of(run, check: str):
    frame = run.diagnose()
    return frame[frame["check"] == check]


# ------------------------------------------------------------------ the statistic


def test_each_features_peak_is_recorded_for_sequence_outputs(tmp_path: Path, read_path) -> None:
    torch.manual_seed(0)
    model = GPT(CONFIG)
    seen: dict[str, torch.Tensor] = {}
    model.blocks[2].mlp.fc.register_forward_hook(lambda m, a, out: seen.update(fc=out.detach()))
    model.tok.register_forward_hook(lambda m, a, out: seen.update(tok=out.detach()))
    ids = token_batch(torch.Generator().manual_seed(1), 4, CONFIG.context + 1, CONFIG.vocab)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1)
        loss = next_token_loss(model(ids[:, :-1]), ids[:, 1:])
        loss.backward()
        run.log(0, train_loss=loss)
    read = nbviz.open_run(tmp_path / "run")
    for layer, key in (("blocks.2.mlp.fc", "fc"), ("tok", "tok")):
        steps, peaks = read.unit_stats(layer, "max_abs")
        expected = seen[key].abs().amax(dim=(0, 1)).numpy()
        assert list(steps) == [0]
        np.testing.assert_allclose(peaks[0], expected, rtol=1e-6)


class Twice(nn.Module):
    """One linear layer called on two inputs in one forward."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.lin(a).sum() + self.lin(b).sum()


class Scale(nn.Module):
    """Each feature times its weight (ones): an inf stays in its own feature."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def test_a_feature_that_saw_inf_has_no_peak_and_the_rest_keep_theirs(
    tmp_path: Path, read_path
) -> None:
    x = torch.randn(2, 5, 6)
    x[1, 3, 4] = float("inf")
    model = nn.Sequential(Scale(6))
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1)
        model(x)
        run.log(0, loss=0.0)
    _, peaks = nbviz.open_run(tmp_path / "run").unit_stats("0", "max_abs")
    expected = x.abs().amax((0, 1)).numpy()
    assert np.isnan(peaks[0, 4])
    keep = np.arange(6) != 4
    np.testing.assert_allclose(peaks[0, keep], expected[keep], rtol=1e-6)


def test_peaks_combine_over_a_modules_calls_by_the_larger(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Twice()
    a, b = torch.randn(2, 3, 4), 50 * torch.randn(2, 3, 4)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1)
        out = model(a, b)
        out.backward()
        run.log(0, loss=out)
    with torch.no_grad():
        lin = model.lin
        expected = torch.maximum(lin(a).abs().amax((0, 1)), lin(b).abs().amax((0, 1)))
    _, peaks = nbviz.open_run(tmp_path / "run").unit_stats("lin", "max_abs")
    np.testing.assert_allclose(peaks[0], expected.numpy(), rtol=1e-6)


# ------------------------------------------------------------------ healthy


@pytest.fixture(scope="module")
def healthy_lm(tmp_path_factory: pytest.TempPathFactory) -> nbviz.Run:
    return train_lm(tmp_path_factory.mktemp("healthy") / "run", steps=120, every=5)


def test_a_healthy_lm_has_no_transformer_finding(healthy_lm) -> None:
    checks = set(healthy_lm.diagnose()["check"])
    assert not checks & {"massive_activations", "residual_growth", "loss_spikes"}
    assert list(healthy_lm.triage()["cause"]) == ["healthy"]


def test_a_healthy_lms_stream_grows_well_under_the_threshold(healthy_lm) -> None:
    # recorded and read, just below what a finding needs: the margin the threshold keeps
    from nbviz.analysis.checks.depth import activation_rms, trend

    blocks = [f"blocks.{i}" for i in range(CONFIG.blocks)]
    profile = activation_rms(healthy_lm, blocks).to_numpy()[-5:].mean(axis=0)
    shape = trend(profile)
    assert shape is not None and shape.total < residual.MIN_TOTAL / 1.5


# ------------------------------------------------------------------ massive activations


def test_a_feature_huge_at_the_first_token_is_a_sink_like_info(tmp_path: Path) -> None:
    run = train_lm(tmp_path / "run", plant=gain_after_block(FeatureGain(5, value=300.0)))
    found = findings_of(run, "massive_activations")
    assert len(found) == 1, found["message"].tolist()
    f = found.iloc[0]
    assert f["layer"] == "blocks.1.after"  # where it is written, not where it is carried
    assert f["severity"] == "info" and f["cause"] == "architecture"
    assert f["evidence"]["features"] == [5] and f["evidence"]["ratios"][0] > 100
    assert not f["evidence"]["at_most_tokens"]
    assert "blocks.5" in f["evidence"]["layers"]
    assert "feature 5" in f["message"] and "few tokens" in f["message"]
    assert "quantis" in f["advice"]  # when it matters


def test_a_feature_amplified_at_every_token_is_a_warning(tmp_path: Path) -> None:
    run = train_lm(tmp_path / "run", plant=gain_after_block(FeatureGain(9, scale=1000.0)))
    found = findings_of(run, "massive_activations")
    assert len(found) == 1
    f = found.iloc[0]
    assert f["layer"] == "blocks.1.after" and f["severity"] == "warning"
    assert f["cause"] == "architecture" and f["evidence"]["at_most_tokens"]
    assert f["evidence"]["features"] == [9]
    assert "amplified everywhere" in f["message"]
    assert run.triage()["cause"].iloc[0] == "architecture"


def test_a_peak_near_float16s_range_points_at_numerics(tmp_path: Path) -> None:
    run = train_lm(tmp_path / "run", steps=20, plant=gain_after_block(FeatureGain(3, value=2e4)))
    f = findings_of(run, "massive_activations").iloc[0]
    assert f["severity"] == "warning" and f["cause"] == "numerics"
    assert "float16" in f["message"] and f["evidence"]["float16_margin"] < 16


@pytest.fixture(scope="module")
def two_gains(tmp_path_factory: pytest.TempPathFactory) -> nbviz.Run:
    """Feature 3 at the first token: 300 after block 1, near float16's range after block 4."""

    def plant(model: GPT) -> None:
        model.blocks[1] = GainedBlock(model.blocks[1], FeatureGain(3, value=300.0))
        model.blocks[4] = GainedBlock(model.blocks[4], FeatureGain(3, value=2e4))

    return train_lm(tmp_path_factory.mktemp("two-gains") / "run", steps=20, plant=plant)


def test_a_later_layer_near_float16s_range_is_not_hidden_behind_the_first(two_gains) -> None:
    found = findings_of(two_gains, "massive_activations")
    assert len(found) == 1, found["message"].tolist()
    f = found.iloc[0]
    ev = f["evidence"]
    assert f["layer"] == "blocks.1.after" and "blocks.4.after" in ev["layers"]
    # the group takes its worst: the later layer's peak near float16's largest value
    assert f["severity"] == "warning" and f["cause"] == "numerics"
    assert ev["peak"] < 1000 and ev["largest_peak"] > 1e4 and ev["float16_margin"] < 16
    assert ev["peak_layer"] != "blocks.1.after"
    assert "float16" in f["message"] and f"in '{ev['peak_layer']}'" in f["message"]
    assert "float32" in f["advice"]


def test_a_massive_feature_explains_an_overflow_only_at_or_after_its_layer(two_gains) -> None:
    from nbviz.analysis.causes import Context, link
    from nbviz.analysis.checks.finding import Finding
    from nbviz.analysis.checks.model import layout

    ctx = Context(layout=layout(two_gains), every=5, first_capture=0)
    peak = Finding(
        check="massive_activations",
        severity="warning",
        cause="numerics",
        layer="blocks.4.after",
        step=0,
        message="a peak near float16's largest value",
    )

    def nan_in(layer: str) -> Finding:
        return Finding(
            check="nonfinite",
            severity="error",
            cause="numerics",
            layer=layer,
            step=10,
            message="NaN",
        )

    assert link([peak, nan_in("blocks.0.mlp.fc")], ctx).parent == [None, None]
    assert link([peak, nan_in("blocks.4.after")], ctx).parent == [None, 0]
    assert link([peak, nan_in("blocks.5.mlp.fc")], ctx).parent == [None, 0]
    assert link([peak, nan_in("")], ctx).parent == [None, 0]  # the loss: after every layer


# ------------------------------------------------------------------ residual growth


def test_a_stream_that_compounds_by_depth_is_a_residual_growth_warning(tmp_path: Path) -> None:
    def plant(model: GPT) -> None:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = ScaledBlock(block, 2.0)

    run = train_lm(tmp_path / "run", plant=plant)
    found = findings_of(run, "residual_growth")
    assert len(found) == 1
    f = found.iloc[0]
    # named at the last block (a row of the layer browser), the stack in the evidence
    assert f["layer"] == "blocks.5" and f["severity"] == "warning" and f["cause"] == "architecture"
    ev = f["evidence"]
    assert ev["stack"] == "blocks"
    assert ev["blocks"] == [f"blocks.{i}" for i in range(CONFIG.blocks)]
    assert ev["total"] > 20 and ev["per_block"] > 1.8 and ev["from_first_capture"]
    assert "1/sqrt" in f["advice"]
    # the gradient flowing back through the scaled stream grows alike: it follows from it
    frame = run.diagnose()
    exploding = frame[frame["check"] == "exploding_gradients"]
    assert (exploding["root"] == f["id"]).all()
    assert run.triage()["cause"].iloc[0] == "architecture"


def test_without_the_blocks_watched_the_stream_is_not_guessed(tmp_path: Path) -> None:
    def plant(model: GPT) -> None:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = ScaledBlock(block, 2.0)

    def leaves(name: str, module: nn.Module) -> bool:
        return not list(module.children())

    run = train_lm(tmp_path / "run", steps=20, plant=plant, layers=leaves)
    assert findings_of(run, "residual_growth").empty


# ------------------------------------------------------------------ where a spike began


def test_a_loss_spike_names_where_the_gradients_jumped(tmp_path: Path) -> None:
    def fault(model: GPT, step: int) -> None:
        # step 70 only: the final normalisation's output scaled 20x (the logits with it)
        if step == 70:
            model._spike = model.ln_f.register_forward_hook(lambda m, a, out: 20 * out)
        elif step == 71:
            model._spike.remove()

    run = train_lm(tmp_path / "run", steps=90, every=1, fault=fault)
    spikes = findings_of(run, "loss_spikes")
    assert len(spikes) >= 1
    f = spikes[spikes["step"] == 70].iloc[0]
    ev = f["evidence"]
    assert ev["origin_step"] == 70 and ev["origin_layer"]
    assert ev["origin_layers_jumped"] >= 1 and ev["origin_layers"] > 20
    assert not ev["origin_before_loss"]
    assert f"'{ev['origin_layer']}'" in f["message"]
    json.dumps(ev)  # evidence stays JSON


def test_a_spike_without_recorded_gradients_has_no_origin(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "run") as run:
        losses = np.r_[np.linspace(3, 1, 60), [8.0], np.full(20, 1.0)]
        for step, value in enumerate(losses):
            run.log(step, train_loss=float(value))
    f = findings_of(nbviz.open_run(tmp_path / "run"), "loss_spikes").iloc[0]
    assert f["evidence"]["origin_layer"] is None and "jumped" not in f["message"]


# ------------------------------------------------------------------ shown to a person


def test_the_health_report_lists_the_new_findings(tmp_path: Path) -> None:
    run = train_lm(tmp_path / "run", steps=20, plant=gain_after_block(FeatureGain(9, scale=1000.0)))
    report = nbviz.HealthReport(run, live=False)
    shown = [f for f in report.findings if f["check"] == "massive_activations"]
    assert len(shown) == 1
    assert shown[0]["layer"] == "blocks.1.after" and "feature 9" in shown[0]["message"]
    assert json.loads(shown[0]["evidence"])["features"] == [9]
    assert report.badges()["blocks.1.after"] == ["warning", "massive activations"]


def test_the_new_checks_are_registered_by_name() -> None:
    from nbviz.analysis.diagnose import CHECKS

    assert CHECKS["massive_activations"] is massive.check
    assert CHECKS["residual_growth"] is residual.check
