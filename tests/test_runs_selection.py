"""RunsTable over a sweep: parallel axes, filters and brushes choose runs; LossCurves follows."""

from __future__ import annotations

from pathlib import Path

import pytest
import traitlets

import nbviz


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    for i, (lr, opt) in enumerate([(0.1, "sgd"), (0.01, "sgd"), (0.1, "adam"), (0.01, "adam")]):
        with nbviz.Run(root / f"r{i}", config={"lr": lr, "opt": opt, "width": 64}) as run:
            for s in range(20):
                run.log(s, train_loss=1.0 + i - 0.01 * s)
            run.log(19, val_loss=0.5 + i)
    return root


@pytest.fixture()
def table(sweep: Path):
    runs = nbviz.open_runs(sweep)
    table = nbviz.RunsTable(runs, live=False)
    yield table
    table.close()
    runs.close()


def test_axes_are_the_config_keys_that_vary_then_the_metric(table) -> None:
    assert table.metric == "best:val_loss"
    assert [(a["key"], a["kind"]) for a in table.axes] == [
        ("config:lr", "number"),
        ("config:opt", "category"),
        ("best:val_loss", "number"),
    ]
    opt = table.axes[1]
    assert opt["categories"] == ["adam", "sgd"] and opt["options"] == ["adam", "sgd"]
    assert [c["config:opt"] for c in table.coords] == [1.0, 1.0, 0.0, 0.0]
    assert [c["best:val_loss"] for c in table.coords] == [0.5, 1.5, 2.5, 3.5]


def test_a_filter_and_a_brush_select_the_runs_passing_both(table) -> None:
    assert table.selected_runs == []
    table.filters = {"config:opt": ["sgd"]}
    assert table.selected_runs == ["r0", "r1"]
    table.brushes = {"best:val_loss": [1.0, 3.0]}
    assert table.selected_runs == ["r1"]
    table.filters = {}
    assert table.selected_runs == ["r1", "r2"]
    table.brushes = {}
    assert table.selected_runs == []


def test_linked_curves_draw_the_selected_runs(table) -> None:
    curves = nbviz.LossCurves(table._runs, live=False)
    table.link(curves)
    table.brushes = {"config:lr": [0.05, 0.2]}
    assert curves.selected_runs == ["r0", "r2"]
    assert set(curves.data().run) == {"r0", "r2"}
    table.selected = "r2"
    assert curves.highlight == "r2"
    curves.close()


def test_a_new_metric_moves_the_last_axis(table) -> None:
    table.metric = "final:train_loss"
    assert table.axes[-1]["key"] == "final:train_loss"
    with pytest.raises(traitlets.TraitError, match=r"metric: no metric column 'best:acc'"):
        table.metric = "best:acc"
    with pytest.raises(traitlets.TraitError, match=r"brushes: no axis 'config:width'"):
        table.brushes = {"config:width": [0, 1]}  # every run shares it: no axis
    with pytest.raises(traitlets.TraitError, match=r"brushes\['config:lr'\] must be \[lo, hi\]"):
        table.brushes = {"config:lr": "low"}


def test_data_and_figure(table) -> None:
    import bqplot

    table.filters = {"config:opt": ["adam"]}
    frame = table.data()
    assert list(frame["run"]) == ["r0", "r1", "r2", "r3"]
    assert list(frame["selected"]) == [False, False, True, True]
    assert "best val_loss" in frame.columns
    fig = table.figure()
    assert isinstance(fig, bqplot.Figure) and fig.title == "best val_loss by lr"
    assert list(fig.marks[0].names) == ["r0", "r1", "r2", "r3"]
    with pytest.raises(ValueError, match=r"no varying config key 'width'; keys: lr, opt"):
        table.figure("width")


def test_the_table_reads_final_and_best_from_summaries_as_the_series_says(tmp_path: Path) -> None:
    import numpy as np

    from nbviz.widgets.runs_table import bounded_summary, summarise

    values = 2.0 + np.sin(np.arange(3000) / 50.0)
    values[1234] = 0.5  # the best, reached once
    values[2990:] = np.nan  # ends badly: the final value is the last finite one
    values[100] = np.inf
    with nbviz.Run(tmp_path / "long") as run:
        for s, v in enumerate(values):
            run.log(s, loss=float(v), acc=float(-v))
    run = nbviz.open_run(tmp_path / "long")
    for name, direction in (("loss", "min"), ("acc", "max")):
        steps = np.arange(3000)
        expected = summarise(steps, values if name == "loss" else -values, direction)
        assert bounded_summary(run, name, direction) == expected
    assert run.scalar_summary("loss", 64).width > 0  # buckets, not rows
    run.close()
