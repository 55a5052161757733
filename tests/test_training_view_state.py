"""The training views' Python side: what they send, what they refuse, and live updates."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import traitlets
from training import loss_only_run

import nbviz
from nbviz.widgets.base import array_from_payload
from nbviz.widgets.loss_curves import minmax_downsample, nonfinite_breaks, split_name
from nbviz.widgets.runs_table import better, flatten_config, summarise


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_scalar_names_pair_train_and_validation_by_stem() -> None:
    assert split_name("train_loss") == ("loss", "train")
    assert split_name("val_loss") == ("loss", "val")
    assert split_name("loss/valid") == ("loss", "valid")
    assert split_name("loss") == ("loss", "train")
    assert split_name("lr") == ("lr", "")


def test_downsampling_keeps_spikes_and_marks_breaks() -> None:
    steps = np.arange(100_000)
    values = np.ones(100_000)
    values[54_321] = 50.0
    values[70_000:70_010] = np.nan
    s, v = minmax_downsample(steps, values, 1000)
    assert len(s) <= 1000
    assert 54_321 in s and np.nanmax(v) == 50.0
    assert np.isnan(v).any()
    assert nonfinite_breaks(steps, values).tolist() == [[70_000, 70_009, 0]]


def test_loss_curves_overlay_runs_and_refuse_unknown_highlight(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        run = nbviz.Run(tmp_path / name)
        for step in range(5):
            run.log(step, train_loss=1.0 / (step + 1), val_loss=2.0 / (step + 1))
        run.flush()
        runs.append(run)
    view = nbviz.LossCurves(runs, live=False)
    assert view.panels == ["loss"]
    assert sorted((s["run"], s["name"]) for s in view.series) == [
        ("a", "train_loss"),
        ("a", "val_loss"),
        ("b", "train_loss"),
        ("b", "val_loss"),
    ]
    assert view.step == 4
    with pytest.raises(traitlets.TraitError, match="no run named 'c'"):
        view.highlight = "c"
    for run in runs:
        run.close()


def test_loss_curves_follow_a_training_loop_in_the_same_kernel(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "live")
    view = nbviz.LossCurves(run)
    assert view.empty.startswith("No scalars logged yet")
    for step in range(3):
        run.log(step, train_loss=float(step))
    run.flush()
    wait_until(lambda: view.series and view.series[0]["total"] == 3)
    assert view.empty == ""
    view.close()
    run.close()


def test_runs_table_best_is_a_minimum_for_losses_and_a_maximum_for_scores() -> None:
    assert better("val_loss") == "min"
    assert better("val_accuracy") == "max"
    assert better("f1/val") == "max"
    steps = np.array([0, 1, 2, 3])
    out = summarise(steps, np.array([3.0, 1.0, np.nan, 2.0]), "min")
    assert (out["final"], out["final_step"], out["best"], out["best_step"]) == (2.0, 3, 1.0, 1)
    assert out["nonfinite"] == 1
    assert summarise(steps, np.full(4, np.nan), "max")["best"] is None


def test_runs_table_lists_configuration_beside_results(tmp_path: Path) -> None:
    runs = []
    for lr in (0.1, 0.01):
        run = nbviz.Run(tmp_path / f"lr{lr}", config={"opt": {"lr": lr}, "layers": [64, 64]})
        for step in range(4):
            run.log(step, train_loss=math.exp(-lr * step), val_accuracy=lr * step)
        run.flush()
        runs.append(run)
    table = nbviz.RunsTable(runs, live=False)
    keys = [c["key"] for c in table.columns]
    assert keys[:3] == ["run", "config:layers", "config:opt.lr"]
    assert "best:val_accuracy" in keys and "final:train_loss" in keys
    first = table.rows[0]
    assert first["cells"]["config:opt.lr"] == 0.1
    assert first["cells"]["config:layers"] == "[64, 64]"
    assert first["cells"]["best:val_accuracy"] == pytest.approx(0.3)
    assert first["steps"]["best:val_accuracy"] == 3
    assert flatten_config({"a": {"b": {"c": 1}}}) == {"a.b.c": 1}
    with pytest.raises(traitlets.TraitError, match="no run named"):
        table.selected = "nope"
    curves = nbviz.LossCurves(runs, live=False)
    table.link(curves)
    table.selected = runs[1].name
    assert curves.highlight == runs[1].name
    for run in runs:
        run.close()


def test_histograms_send_the_stored_counts_at_the_linked_step(demo_run) -> None:
    view = nbviz.Histograms(demo_run, signal="weights", layer="2.weight", live=False)
    steps = demo_run.histogram_steps("2.weight", "weight")
    view.step = int(steps[1]) + 1  # between captures: the one before is shown
    assert view.current["step"] == int(steps[1])
    edges, counts = demo_run.histogram("2.weight", "weight", int(steps[1]))
    assert np.array_equal(array_from_payload(view.current["counts"]), counts)
    assert view.current["lo"] == pytest.approx(edges[0])
    history = array_from_payload(view.data["counts"])
    assert history.shape == (len(steps), len(counts))
    view.signal = "activations"
    assert view.layer in view.layer_choices and not view.layer.endswith(".weight")


def test_histograms_name_what_exists_on_bad_input(demo_run) -> None:
    with pytest.raises(ValueError, match="signal must be one of"):
        nbviz.Histograms(demo_run, signal="weight")
    with pytest.raises(traitlets.TraitError, match="layers with weights histograms: .*0.weight"):
        nbviz.Histograms(demo_run, layer="conv9.weight", live=False)


def test_dashboard_links_every_view_to_the_scrubber(demo_run) -> None:
    dash = nbviz.Dashboard(demo_run, live=False)
    assert {"loss_curves", "layers", "histograms"} <= set(dash.views)
    linked = {link.target[0] for link in dash.links}
    assert linked == set(dash.views.values()) - {
        v for v in dash.views.values() if "step" not in v.trait_names()
    }
    assert dash.scrubber is not None
    shown = {p["view"] for s in dash.sections for p in s["panels"]}
    assert shown == set(dash.views.values())  # every view is in a tab
    assert all(v.step == dash.scrubber.step for v in dash.views.values())
    dash.close()


def test_dashboard_of_an_empty_run_says_what_is_missing(tmp_path: Path) -> None:
    run = loss_only_run(tmp_path / "empty")
    dash = nbviz.Dashboard(run, live=False)
    assert list(dash.views) == ["loss_curves", "health"]  # a verdict reads the loss alone
    assert any("LayerBrowser: no captures" in note for note in dash.notes)
    dash.close()
    run.close()


def test_a_view_of_open_run_picks_up_steps_another_process_writes(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "other"
    writer = nbviz.Run(path)
    writer.log(0, train_loss=1.0)
    writer.close()
    reader = nbviz.open_run(path)
    scrubber = nbviz.StepScrubber(reader)
    curves = nbviz.LossCurves(reader)
    assert scrubber.step == 0
    code = (
        "import nbviz\n"
        f"run = nbviz.Run({str(path)!r})\n"
        "for s in range(1, 6): run.log(s, train_loss=1.0 / (s + 1))\n"
        "run.close()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    wait_until(lambda: curves.series and curves.series[0]["total"] == 6)
    # a scrubber standing on the last step moves on with the run
    wait_until(lambda: scrubber.step == 5)
    curves.close()
    scrubber.close()
    reader.close()


class ScaledLinear(torch.nn.Module):
    """A parameter of the model itself (no module of its own) before a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(4))
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x * self.scale)


def test_a_parameter_of_the_model_itself_has_its_own_layer_row(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ScaledLinear()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "r") as run:
        run.watch(model, every=1)
        for step in range(3):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
            run.log(step, loss=1.0)
    lb = nbviz.LayerBrowser(nbviz.open_run(tmp_path / "r"), live=False)
    rows = {r["name"]: r for r in lb.layers}
    assert set(rows) == {"fc", "scale"}
    assert (rows["scale"]["type"], rows["scale"]["shape"], rows["scale"]["params"]) == (
        "Parameter",
        "[4]",
        4,
    )
    at = {name: array_from_payload(v["values"]) for name, v in lb.current.items()}
    order = [r["name"] for r in lb.layers]
    scale = order.index("scale")
    assert at["grad_norm"][scale] > 0 and at["update_ratio"][scale] > 0  # its own gradient
    assert math.isnan(at["zero_frac"][scale])  # a parameter has no activations
    lb.selected_layer = "scale"
    assert lb.error == "" and lb.detail["layer"] == "scale"
    lb.close()
