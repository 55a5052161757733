"""LossCurves over many runs: groups with bands, time axes, selection, data() and figure()."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import traitlets

import nbviz
from nbviz.widgets.run_groups import group_band, group_runs


def record(path: Path, i: int, opt: str, steps: int = 60) -> Path:
    with nbviz.Run(path, config={"opt": {"name": opt}, "seed": i}) as run:
        for s in range(steps):
            run.log(s, train_loss=1.0 + i + 0.01 * s)
            if s % 10 == 9:
                run.log(s, val_loss=2.0 + i)
            time.sleep(0.0005)
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    for i, opt in enumerate(["sgd", "adam", "sgd", "adam"]):
        record(root / f"r{i}", i, opt)
    return root


@pytest.fixture()
def runs(sweep: Path):
    runs = nbviz.open_runs(sweep)
    yield runs
    runs.close()


def test_group_band_is_mean_min_max_across_members_ignoring_nan() -> None:
    steps = np.arange(4)
    a = (steps.astype(float), np.array([1.0, 2.0, 3.0, 4.0]), steps)
    b = (steps.astype(float), np.array([3.0, np.nan, 5.0, 8.0]), steps)
    band = group_band([a, b], buckets=4)
    assert band.steps.tolist() == [0, 1, 2, 3]
    assert band.mean.tolist() == [2.0, 2.0, 4.0, 6.0]
    assert band.lo.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert band.hi.tolist() == [3.0, 2.0, 5.0, 8.0]


def test_group_runs_orders_numbers_numerically_and_missing_last() -> None:
    configs = [{"lr": 0.1}, {"lr": 0.01}, {}, {"lr": 0.1}]
    assert group_runs(configs, "lr") == [("lr=0.01", [1]), ("lr=0.1", [0, 3]), ("lr not set", [2])]


def test_grouped_curves_send_one_band_per_group_and_scalar(runs) -> None:
    lc = nbviz.LossCurves(runs, live=False, group_by="opt.name")
    assert lc.group_keys == ["opt.name", "seed"]
    assert lc.groups == ["opt.name=adam", "opt.name=sgd"]
    assert sorted((e["run"], e["name"]) for e in lc.series) == [
        ("opt.name=adam", "train_loss"),
        ("opt.name=adam", "val_loss"),
        ("opt.name=sgd", "train_loss"),
        ("opt.name=sgd", "val_loss"),
    ]
    frame = lc.data()
    assert list(frame.columns) == ["group", "name", "step", "x", "mean", "min", "max", "runs"]
    sgd = frame[(frame.group == "opt.name=sgd") & (frame.name == "val_loss")]
    # runs 0 and 2: val_loss 2 and 4
    assert sgd["min"].eq(2.0).all() and sgd["max"].eq(4.0).all() and sgd["mean"].eq(3.0).all()
    assert sgd["runs"].eq(2).all()
    lc.highlight = "opt.name=sgd"  # a group can be emphasised
    lc.close()


def test_grouped_bands_follow_the_selected_runs(runs) -> None:
    lc = nbviz.LossCurves(runs, live=False, group_by="opt.name")
    lc.selected_runs = ["r0", "r1"]
    frame = lc.data()
    sgd = frame[(frame.group == "opt.name=sgd") & (frame.name == "val_loss")]
    assert sgd["runs"].eq(1).all() and sgd["mean"].eq(2.0).all()
    assert "of 2 runs" in lc.notice
    lc.close()


def test_selected_runs_must_name_runs_of_the_view(runs) -> None:
    lc = nbviz.LossCurves(runs, live=False)
    with pytest.raises(traitlets.TraitError, match=r"selected_runs: no run named 'r9'"):
        lc.selected_runs = ["r0", "r9"]
    with pytest.raises(traitlets.TraitError, match=r"group_by: no config key 'optimizer'"):
        lc.group_by = "optimizer"
    lc.close()


def test_relative_time_axis_starts_each_run_at_zero(runs) -> None:
    from nbviz.widgets.wire import array_from_payload

    lc = nbviz.LossCurves(runs, live=False, x_axis="relative")
    for entry in lc.series:
        x = array_from_payload(entry["x"])
        assert len(x) == len(array_from_payload(entry["steps"]))
        assert np.all(np.diff(x) >= 0)
        if entry["name"] == "train_loss":
            assert 0.0 <= x[0] < 0.5
    lc.x_axis = "wall"
    wall = array_from_payload(lc.series[0]["x"])
    assert abs(wall[0] - time.time()) < 3600
    lc.x_axis = "step"
    assert "x" not in lc.series[0]
    lc.close()


def test_data_is_every_point_of_the_shown_runs(runs) -> None:
    lc = nbviz.LossCurves(runs, live=False, max_points=16)
    frame = lc.data()
    assert list(frame.columns) == ["run", "name", "step", "wall_time", "relative_time", "value"]
    assert len(frame) == 4 * (60 + 6)  # full resolution, though 16 points are sent
    lc.selected_runs = ["r3"]
    frame = lc.data()
    assert set(frame.run) == {"r3"} and len(frame) == 66
    assert frame.relative_time.min() == 0.0
    lc.close()


def test_figure_is_a_bqplot_figure_of_one_panel(runs) -> None:
    import bqplot

    lc = nbviz.LossCurves(runs, live=False)
    fig = lc.figure()
    assert isinstance(fig, bqplot.Figure)
    assert fig.title == "loss"
    labels = sorted(m.labels[0] for m in fig.marks)
    assert labels[:2] == ["r0 train_loss", "r0 val_loss"] and len(labels) == 8
    lc.group_by = "opt.name"
    fig = lc.figure("loss")
    fills = [m for m in fig.marks if m.fill == "between"]
    assert len(fills) == 4 and len(fig.marks) == 8
    with pytest.raises(ValueError, match=r"figure: no panel 'acc'; panels: loss"):
        lc.figure("acc")
    lc.close()


def test_many_runs_share_a_bounded_point_budget(runs) -> None:
    from nbviz.widgets import loss_curves

    lc = nbviz.LossCurves(runs, live=False)
    assert lc._cap(1000) == loss_curves.MIN_POINTS
    assert lc._cap(4) == lc.max_points
    assert lc._cap(100) == loss_curves.POINT_BUDGET // 100
    lc.close()
