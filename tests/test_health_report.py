"""HealthReport: the diagnosis as a clickable list, and its place in the Dashboard."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

import nbviz
from nbviz.widgets.health import badges_of


def dead_relu_run(path: Path) -> nbviz.Run:
    """A small MLP whose first ReLU never fires (bias -10), trained 30 steps."""
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(16, 32))
    model.add_module("act1", nn.ReLU())
    model.add_module("fc2", nn.Linear(32, 4))
    with torch.no_grad():
        model.fc1.bias.fill_(-10.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    run = nbviz.Run(path)
    run.watch(model, every=1)
    for step in range(30):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
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
