"""HealthReport: the diagnosis as a clickable list, and its place in the Dashboard."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from training import dead_relu_mlp, fit, named_mlp, sgd_step

import nbviz
from nbviz.widgets.health import badges_of


def dead_relu_run(path: Path) -> nbviz.Run:
    """A small MLP whose first ReLU never fires (bias -10), trained 30 steps."""
    torch.manual_seed(0)
    model = dead_relu_mlp(16, 32, 4)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    run = nbviz.Run(path)
    run.watch(model, every=1)
    fit(run, model, [(x, y)] * 30, lr=0.05)
    return run


def test_findings_are_listed_worst_first_and_a_click_goes_to_one(tmp_path: Path) -> None:
    run = dead_relu_run(tmp_path / "dead")
    report = nbviz.HealthReport(run, live=False)
    severities = [f["severity"] for f in report.findings]
    assert severities[0] == "error"
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    first = report.findings[0]
    assert (first["check"], first["layer"], first["step"]) == ("dead_units", "act1", 0)
    assert json.loads(first["evidence"])["dead"] == 32
    report.step = 29
    report.selected = 0
    assert (report.step, report.layer) == (0, "act1")
    assert report.badges()["act1"] == ["error", "dead units"]
    run.close()


def test_badges_keep_the_worst_finding_per_layer() -> None:
    findings = [
        {"check": "stuck_weights", "layer": "fc1", "severity": "info"},
        {"check": "dead_units", "layer": "fc1", "severity": "warning"},
        {"check": "loss_spikes", "layer": "", "severity": "warning"},
    ]
    assert badges_of(findings) == {"fc1": ["warning", "dead units"]}


def test_the_dashboard_badges_layers_and_opens_a_findings_layer(tmp_path: Path) -> None:
    run = dead_relu_run(tmp_path / "dash")
    dash = nbviz.Dashboard(run, live=False)
    assert dash.health is not None and dash.layers is not None
    assert dash.layers.badges["act1"] == [["error", "dead units"]]
    dash.health.selected = 0
    assert dash.layers.selected_layer == "act1"
    dash.close()
    run.close()


def test_a_healthy_run_reports_no_warnings(demo_run) -> None:
    report = nbviz.HealthReport(demo_run, live=False)
    assert {f["severity"] for f in report.findings} <= {"info"}


def lr_spike_run(path: Path) -> nbviz.Run:
    """A small ReLU MLP at lr=10: the loss blows up and a ReLU layer dies."""
    torch.manual_seed(0)
    model = named_mlp(16, 32, 32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=10.0)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 16, generator=g), torch.randint(0, 4, (256,), generator=g)
    run = nbviz.Run(path)
    run.watch(model, every=1, optimizer=opt)
    for step in range(40):
        idx = torch.randint(0, 256, (64,), generator=g)
        run.log(step, train_loss=sgd_step(model, opt, x[idx], y[idx]))
    run.flush()
    return run


def test_the_report_opens_with_the_verdict_and_folds_consequences_under_their_root(
    tmp_path: Path,
) -> None:
    run = lr_spike_run(tmp_path / "spike")
    report = nbviz.HealthReport(run, live=False)
    first = report.verdict[0]
    assert first["cause"] == "learning_rate" and 0 < first["score"] <= 1
    assert first["summary"].startswith("The learning rate") and "Try" not in first["summary"]
    assert first["findings"][0] == "learning_rate_too_high@" + first["findings"][0].split("@")[1]
    by_id = {f["id"]: f for f in report.findings}
    root = by_id[first["findings"][0]]
    followers = [f for f in report.findings if f["root"] == root["id"]]
    assert followers and all(f["advice"] == "" for f in followers)
    assert {f["cause"] for f in followers} == {"learning_rate"}
    report.expanded = [root["id"]]
    # a click on a consequence goes to its layer and step
    dead = next(i for i, f in enumerate(report.findings) if f["check"] == "dead_units")
    report.selected = dead
    assert (report.layer, report.step) == (
        report.findings[dead]["layer"],
        report.findings[dead]["step"],
    )
    assert report.selected_ids == []  # not a finding about samples
    run.close()


def test_a_healthy_run_gets_one_healthy_verdict(demo_run) -> None:
    report = nbviz.HealthReport(demo_run, live=False)
    assert [v["cause"] for v in report.verdict] == ["healthy"]
