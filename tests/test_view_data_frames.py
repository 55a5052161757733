"""Every view gives its data as a tidy DataFrame and, where a plot makes sense, a bqplot
Figure: on real runs recorded by real torch models into real SQLite files."""

from __future__ import annotations

from pathlib import Path

import bqplot as bq
import numpy as np
import pytest
import torch
from torch import nn
from training import mlp, random_batches, sgd_step

import nbviz
from nbviz.widgets.wire import array_from_payload

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def marks_of(fig: bq.Figure, kind: type) -> list:
    assert isinstance(fig, bq.Figure)
    return [m for m in fig.marks if isinstance(m, kind)]


def test_layer_browser_table_matches_what_the_view_shows(demo_run) -> None:
    view = nbviz.LayerBrowser(demo_run, live=False)
    table = view.data()
    assert table.columns[:4].tolist() == ["layer", "type", "shape", "params"]
    assert table["layer"].tolist() == [r["name"] for r in view.layers]
    shown = view.values_at_step()
    for metric in ("zero_frac", "grad_norm", "update_ratio"):
        got = dict(zip(table["layer"], table[metric]))
        for layer, value in shown[metric].items():
            assert got[layer] == pytest.approx(value, nan_ok=True)
        assert {f"{metric}_step", f"{metric}_nonfinite"} <= set(table.columns)
    assert table["grad_norm"].notna().any()
    bars = marks_of(view.figure("grad_norm"), bq.Bars)
    assert list(bars[0].x) == table["layer"].tolist()
    with pytest.raises(ValueError, match="metric must be one of .*got 'loss'"):
        view.figure("loss")


def test_layer_browser_zero_fractions_are_those_of_the_distribution_steps(tmp_path) -> None:
    """The probe measures activations' zero fractions with the distributions: the table's
    value between two is the latest measured one, said to be from its step; the other
    signs are from the step's own capture."""
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, hist_every=5)
        for step, (x, y) in enumerate(random_batches(12)):
            run.log(step, loss=sgd_step(model, opt, x, y))
        run.flush()
        view = nbviz.LayerBrowser(run, live=False)
        view.step = 7
        table = view.data().set_index("layer")
        stored = run.stats("activation", steps=5).set_index("layer")["zero_frac"]
        spark_steps = view.spark["zero_frac"]["steps"]
        grad_steps = view.spark["grad_norm"]["steps"]
    relu = table.loc["1"]
    assert relu["zero_frac_step"] == 5 and relu["grad_norm_step"] == 7
    assert relu["zero_frac"] == pytest.approx(stored["1"]) and 0 < relu["zero_frac"] < 1
    assert array_from_payload(spark_steps).tolist() == [0, 5, 10]
    assert array_from_payload(grad_steps).tolist() == list(range(12))


def test_layer_browser_series_is_the_selected_layers_history(demo_run) -> None:
    view = nbviz.LayerBrowser(demo_run, live=False)
    assert view.series().empty
    layer = next(r["name"] for r in view.layers if r["own_params"])
    view.selected_layer = layer
    series = view.series()
    assert {"label", "signal", "layer", "step", "mean", "norm"} <= set(series.columns)
    assert set(series["signal"]) >= {"activation", "gradient", "weight"}
    acts = series[series["signal"] == "activation"]
    stored = demo_run.stats("activation", layer=layer)
    assert acts["step"].tolist() == stored["step"].tolist()
    assert np.allclose(acts["mean"], stored["mean"])


def test_histograms_give_the_histogram_at_the_step_and_the_ridge(demo_run) -> None:
    view = nbviz.Histograms(demo_run, signal="weights", live=False)
    hist = view.histogram()
    assert hist.columns.tolist() == ["layer", "signal", "step", "bin", "lo", "hi", "count"]
    edges, counts = demo_run.histogram(view.layer, "weight", int(hist["step"].iloc[0]))
    assert np.allclose(hist["count"], counts)
    assert hist["lo"].iloc[0] == pytest.approx(edges[0])
    assert hist["hi"].iloc[-1] == pytest.approx(edges[-1])
    ridge = view.ridge()
    assert ridge.columns.tolist() == ["step", "bin", "lo", "hi", "count"]
    assert ridge["step"].nunique() == len(demo_run.steps("weight")) or view.notice
    bins = len(hist)
    assert len(ridge) == ridge["step"].nunique() * bins
    bars = marks_of(view.figure(), bq.Bars)
    assert np.allclose(bars[0].y, counts)


def test_confusion_matrix_table_has_every_cell_and_the_figure_the_matrix(demo_run) -> None:
    view = nbviz.ConfusionMatrix(demo_run, live=False)
    table = view.data()
    assert table.columns.tolist() == [
        "step",
        "true",
        "predicted",
        "true_name",
        "predicted_name",
        "count",
        "rate",
    ]
    n = len(view.class_names)
    assert len(table) == n * n and table["count"].sum() == view.scores["n"]
    preds = view.predictions()
    wrong = preds[(preds["label"] == 3) & (preds["pred"] == 5)]
    cell = table[(table["true"] == 3) & (table["predicted"] == 5)].iloc[0]
    assert cell["count"] == len(wrong) and cell["true_name"] == view.class_names[3]
    assert table.groupby("true")["rate"].sum().round(6).isin([0.0, 1.0]).all()
    grid = marks_of(view.figure(), bq.GridHeatMap)[0]
    assert np.asarray(grid.color).shape == (n, n)
    assert np.asarray(grid.color).sum() == view.scores["n"]


def test_projector_points_carry_ids_coordinates_and_colour(demo_run) -> None:
    view = nbviz.EmbeddingProjector(demo_run, method="pca", color_by="loss", live=False)
    table = view.data()
    assert table.columns.tolist() == [
        "id",
        "x",
        "y",
        "label",
        "pred",
        "loss",
        "confidence",
        "color",
    ]
    ids, matrix = demo_run.embeddings(view.shown_step, split=view.split)
    assert sorted(table["id"]) == sorted(int(i) for i in ids)
    assert np.allclose(table["color"], table["loss"], equal_nan=True)
    view.color_by = "correct"
    right = view.data()["color"].to_numpy()
    assert np.array_equal(right, (table["label"] == table["pred"]).to_numpy(dtype=float))
    scatter = marks_of(view.figure(), bq.Scatter)[0]
    assert len(scatter.x) == len(table)
    view.close()


def test_health_report_findings_frame_and_no_figure(nan_run_path: Path) -> None:
    run = nbviz.open_run(nan_run_path)
    view = nbviz.HealthReport(run, live=False)
    table = view.data()
    assert table.columns.tolist() == [
        "id",
        "check",
        "layer",
        "step",
        "severity",
        "message",
        "cause",
        "root",
        "advice",
        "evidence",
    ]
    diag = run.diagnose()
    assert sorted(table["id"]) == sorted(diag["id"].astype(str))
    assert "nonfinite" in set(table["check"])
    with pytest.raises(TypeError, match="HealthReport.figure: the findings are a list"):
        view.figure()
    run.close()


def test_data_map_frame_is_the_dynamics_with_the_suspects(demo_run) -> None:
    view = nbviz.DataMap(demo_run, split="val", live=False)
    table = view.data()
    dyn = demo_run.sample_dynamics(split="val")
    assert len(table) == len(dyn) and "suspect" in table.columns
    assert table["id"].tolist() == dyn["id"].tolist()
    assert np.allclose(table["confidence"], dyn["confidence"], equal_nan=True)
    scatter = marks_of(view.figure(), bq.Scatter)[0]
    assert np.allclose(scatter.x, table["variability"])


def test_attention_maps_frame_is_the_shown_sample_and_head(tmp_path: Path) -> None:
    from training import language_model_run

    run = nbviz.open_run(language_model_run(tmp_path / "lm", steps=6, every=3))
    view = nbviz.AttentionMaps(run, live=False)
    table = view.data()
    assert table.columns.tolist() == [
        "step",
        "sample",
        "layer",
        "head",
        "query",
        "key",
        "query_token",
        "key_token",
        "weight",
    ]
    layer = view.layers[1]
    one = view.data(layer=layer, head=2)
    stored = run.attention(view.shown_step, layer)[view.sample, 2]
    assert len(one) == stored.size
    got = one.pivot(index="query", columns="key", values="weight").to_numpy()
    assert np.allclose(got, stored, atol=1e-6)
    assert one["key_token"].iloc[0] == view.tokens[0]
    grid = marks_of(view.figure(layer=layer, head=2), bq.GridHeatMap)[0]
    assert np.allclose(grid.color, stored, atol=1e-6)
    with pytest.raises(ValueError, match="head 9 outside 0..3"):
        view.data(head=9)
    with pytest.raises(ValueError, match="no layer 'nope'"):
        view.figure(layer="nope")
    run.close()


class Slow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.slow = nn.Sequential(*[nn.Linear(96, 96) for _ in range(4)])
        self.head = nn.Linear(96, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.slow(x))


def test_profiler_frame_is_the_module_table(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Slow()
    x = torch.randn(32, 96)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    run = nbviz.Run(tmp_path / "run")
    run.log(0, train_loss=1.0)
    empty = nbviz.Profiler(run, live=False)
    assert empty.data().empty and "self_ms" in empty.data().columns
    view = nbviz.Profiler(model, step, steps=2, warmup=0, wait=0, run=run, step=0, baseline=0)
    table = view.data()
    assert table.equals(view.modules()) and "slow" in set(table["name"])
    bars = marks_of(view.figure(top=3), bq.Bars)[0]
    assert list(bars.x) == table["name"].head(3).tolist()
    with pytest.raises(ValueError, match="top must be >= 1, got 0"):
        view.figure(top=0)
    run.close()


def test_projector_answers_a_table_request_with_its_data(demo_run) -> None:
    from nbviz.widgets.wire import array_from_payload

    view = nbviz.EmbeddingProjector(demo_run, method="pca", live=False)
    sent: list = []
    view.send = lambda content, buffers=None: sent.append((content, buffers))  # type: ignore[method-assign]
    view._handle_custom_msg({"type": "table", "request": "r1"}, [])
    view._handle_custom_msg({"type": "something else"}, [])
    assert len(sent) == 1
    reply, buffers = sent[0]
    table = view.data()
    assert reply["type"] == "table" and reply["request"] == "r1" and reply["rows"] == len(table)
    assert [c["name"] for c in reply["columns"]] == table.columns.tolist()
    for col in reply["columns"]:
        assert "buffer" in col  # every column of the points is numeric: binary, no JSON lists
        got = array_from_payload({**col, "data": buffers[col["buffer"]]})
        assert np.allclose(got, table[col["name"]].to_numpy(dtype=float), equal_nan=True)
    view.close()


def test_a_table_request_whose_data_raises_is_answered_with_the_error(demo_run) -> None:
    view = nbviz.EmbeddingProjector(demo_run, method="pca", live=False)
    sent: list = []
    view.send = lambda content, buffers=None: sent.append((content, buffers))  # type: ignore[method-assign]

    def broken() -> None:
        raise ValueError("the points are gone")

    view.data = broken  # type: ignore[method-assign]
    view._handle_custom_msg({"type": "table", "request": "r7"}, [])
    assert sent == [
        ({"type": "table", "request": "r7", "error": "ValueError: the points are gone"}, [])
    ]
    view.close()


def test_data_map_figure_says_why_nothing_is_on_the_map(demo_run, tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "nothing") as run:
        run.log(0, loss=1.0)
    empty = nbviz.DataMap(nbviz.open_run(tmp_path / "nothing"), split="val", live=False)
    with pytest.raises(ValueError, match=r"nothing on the map: The data map needs the val"):
        empty.figure()
    view = nbviz.DataMap(demo_run, split="val", live=False)
    view.points = {}  # two evaluations, yet no sample to place
    with pytest.raises(ValueError, match=r"nothing on the map: no val sample") as err:
        view.figure()
    assert "()" not in str(err.value)


def test_table_message_sends_text_and_flags_as_lists() -> None:
    import pandas as pd

    from nbviz.widgets.view_data import table_message

    table = pd.DataFrame(
        {"id": [2**60, 1], "name": ["a", None], "ok": [True, False], "v": [0.5, np.nan]}
    )
    reply, buffers = table_message(table)
    cols = {c["name"]: c for c in reply["columns"]}
    assert cols["id"]["values"] == [str(2**60), "1"]  # not exact as a float64: text
    assert cols["name"]["values"] == ["a", None]
    assert cols["ok"]["values"] == [True, False]
    assert len(buffers) == 1 and cols["v"]["buffer"] == 0
