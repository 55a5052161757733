"""A view given something that is not a run says so at the call, naming the argument and
the value; a run opened by its file is named after its directory, like one opened by it."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbviz
from nbviz.store import DB_NAME

VIEWS = [
    "Dashboard",
    "LossCurves",
    "LayerBrowser",
    "Histograms",
    "ConfusionMatrix",
    "SampleGallery",
    "EmbeddingProjector",
    "StepScrubber",
    "HealthReport",
    "DataMap",
    "AttentionMaps",
]


@pytest.mark.parametrize("view", VIEWS)
def test_a_path_given_where_a_run_is_expected_is_refused_naming_it(view: str) -> None:
    with pytest.raises(TypeError, match=rf"^{view}: run must be a run .* got str 'runs/exp1'"):
        getattr(nbviz, view)("runs/exp1")


def test_a_run_opened_by_its_file_is_named_after_its_directory(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "exp1") as run:
        run.log(0, train_loss=1.0)
    with nbviz.open_run(tmp_path / "exp1" / DB_NAME) as run:
        assert run.name == "exp1"
        assert nbviz.LossCurves(run).data()["run"].unique().tolist() == ["exp1"]


@pytest.mark.parametrize("view", [*VIEWS, "RunsTable"])
def test_a_misspelt_keyword_or_a_live_that_is_not_a_bool_is_refused_at_the_call(
    view: str, tmp_path: Path
) -> None:
    with nbviz.Run(tmp_path / "exp1") as run:
        run.log(0, train_loss=1.0)
    with nbviz.open_run(tmp_path / "exp1") as run:
        cls = getattr(nbviz, view)
        with pytest.raises(TypeError, match=rf"^{view}: unknown argument 'spilt'; {view} takes "):
            cls(run, spilt="test")
        with pytest.raises(TypeError, match=rf"^{view}: live must be True or False, got 'no'"):
            cls(run, live="no")
        assert cls(run, live=False, layout={"width": "400px"}).layout.width == "400px"
