"""A report of a run with a damaged table: written all the same, the other views in it,
and what could not be read said in the page, as the live Dashboard says it."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import nbviz
from nbviz.report import write_report
from nbviz.widgets.wire import array_from_payload

DATA = re.compile(r'<script type="application/json" id="nbviz-report-data">(.*?)</script>', re.S)
VIEWS = {"StepScrubber", "LossCurves", "LayerBrowser", "Histograms", "ConfusionMatrix"}


def damaged_copy(source: Path, target: Path, sql: str) -> Path:
    """A copy of the run directory ``source`` at ``target`` with ``sql`` run on its file."""
    shutil.copytree(source, target)
    con = sqlite3.connect(target / "run.sqlite")
    try:
        con.executescript(sql)
        con.commit()
    finally:
        con.close()
    return target


def page_data(path: Path) -> dict[str, Any]:
    found = DATA.search(path.read_text(encoding="utf-8"))
    assert found, "the page has no embedded data"
    return json.loads(found.group(1))


def state_of(data: dict[str, Any], cls: str, name: str) -> Any:
    model = next(m for m in data["models"] if m["cls"] == cls)
    return data["values"][model["state"][name]]


def embed_layer(path: Path) -> str:
    run = nbviz.open_run(path)
    try:
        return run.embedding_layers("val", kind="embedding")[0]
    finally:
        run.close()


@pytest.fixture(scope="module")
def truncated_embeddings(demo_run_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo run with every embedding matrix cut to 17 bytes."""
    target = tmp_path_factory.mktemp("damaged") / "embeddings"
    return damaged_copy(
        demo_run_path, target, "UPDATE embeddings SET matrix = substr(matrix, 1, 17);"
    )


def test_a_report_of_a_run_with_damaged_embeddings_holds_every_other_view(
    truncated_embeddings: Path, tmp_path: Path
) -> None:
    info = write_report(truncated_embeddings, tmp_path / "report.html", max_steps=10)
    assert VIEWS <= set(info.views), info.views
    assert "EmbeddingProjector" not in info.views
    said = [n for n in info.notes if "EmbeddingProjector" in n and "does not decode" in n]
    assert said, info.notes
    data = page_data(tmp_path / "report.html")
    pending = state_of(data, "Dashboard", "pending")
    assert pending.startswith("Not shown: EmbeddingProjector: ") and "embeddings" in pending


def test_the_layer_browser_says_a_layer_s_unit_values_cannot_be_read(
    truncated_embeddings: Path, tmp_path: Path
) -> None:
    layer = embed_layer(truncated_embeddings)
    run = nbviz.open_run(truncated_embeddings)
    dash = nbviz.Dashboard(run, live=False)
    try:
        dash.layers.selected_layer = layer  # raised in the kernel before
        got = dash.layers.unit_samples
        assert got["n_units"] == 0
        assert got["notice"].startswith(f"The per-sample unit values of {layer!r} at step ")
        assert "cannot be read" in got["notice"] and "does not decode" in got["notice"]
        dash.layers.selected_layer = ""
        info = dash.save_html(tmp_path / "dash.html", max_steps=8)
        # every layer's answers were recorded: nothing stopped at the damaged one
        assert not any(n.startswith("Not shown: LayerBrowser") for n in info.notes), info.notes
    finally:
        dash.close()
        run.close()


def test_answers_behind_a_damaged_table_are_left_out_and_said_in_the_page(
    demo_run_path: Path, tmp_path: Path
) -> None:
    # one captured step's histograms cut short: only the answers that read them fail
    path = damaged_copy(
        demo_run_path,
        tmp_path / "run",
        "UPDATE histograms SET counts = substr(counts, 1, 3) WHERE step = "
        "(SELECT step FROM histograms ORDER BY step LIMIT 1 OFFSET 40);",
    )
    run = nbviz.open_run(path)
    dash = nbviz.Dashboard(run, live=False)
    try:
        before = {k: v.get_state() for k, v in dash.views.items()}
        info = dash.save_html(tmp_path / "dash.html", max_steps=12)
        assert {k: v.get_state() for k, v in dash.views.items()} == before
    finally:
        dash.close()
        run.close()
    assert VIEWS - {"Histograms"} <= set(info.views), info.views
    note = next(n for n in info.notes if n.startswith("Not shown: LayerBrowser"))
    assert "combinations kept" in note and "histogram" in note and "does not decode" in note
    data = page_data(tmp_path / "dash.html")
    assert note in state_of(data, "Dashboard", "pending").split("\n")
    group = next(g for g in data["groups"] if g["label"] == "LayerBrowser")
    assert group["entries"], "the answers read before the damaged table are kept"


def test_a_histograms_view_leaves_out_a_step_that_does_not_decode_and_says_which(
    demo_run_path: Path, tmp_path: Path
) -> None:
    second = "(SELECT min(step) FROM histograms WHERE step > (SELECT min(step) FROM histograms))"
    damaged = damaged_copy(
        demo_run_path,
        tmp_path / "hist",
        f"UPDATE histograms SET counts = substr(counts, 1, 3) WHERE step = {second};",
    )
    con = sqlite3.connect(damaged / "run.sqlite")
    bad, after = (
        s
        for (s,) in con.execute(
            "SELECT DISTINCT step FROM histograms ORDER BY step LIMIT 2 OFFSET 1"
        )
    )
    con.close()
    run = nbviz.open_run(damaged)
    view = nbviz.Histograms(run, live=False)
    assert f"do not decode and are left out (step {bad})" in view.notice, view.notice
    assert bad not in array_from_payload(view.data["steps"]).tolist()
    view.step = bad
    assert view.current == {} and f"the histogram at step {bad}" in view.error
    view.step = after
    assert view.error == "" and view.current["step"] == after
    run.close()
