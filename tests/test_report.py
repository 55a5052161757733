"""The offline report and ``save_html``: one self-contained file holding every view,
its front-end and the recorded answers to the changes a view can make."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nbviz
from nbviz.cli import main
from nbviz.report import write_report
from nbviz.widgets.base import STATIC

DATA = re.compile(r'<script type="application/json" id="nbviz-report-data">(.*?)</script>', re.S)
OUTSIDE = re.compile(
    r"""(?:src|href|action|srcset)\s*=\s*["']?\s*(?:https?:)?//"""
    r"""|@import\s+(?:url\()?\s*["']?(?:https?:)?//"""
    r"""|\bimport\s*\(?\s*["'](?:https?:)?//"""
    r"""|\bfrom\s*["'](?:https?:)?//""",
    re.I,
)


def page_data(text: str) -> dict[str, Any]:
    found = DATA.search(text)
    assert found, "the page has no embedded data"
    return json.loads(found.group(1))


def revive(value: Any, data: dict[str, Any]) -> Any:
    """A stored value with its buffers back as bytes (what get_state() holds)."""
    if isinstance(value, list):
        return [revive(v, data) for v in value]
    if isinstance(value, dict):
        if list(value) == ["$buffer"]:
            return base64.b64decode(data["buffers"][value["$buffer"]])
        return {k: revive(v, data) for k, v in value.items()}
    return value


def model_of(data: dict[str, Any], cls: str) -> dict[str, Any]:
    found = [m for m in data["models"] if m["cls"] == cls]
    assert len(found) == 1, f"{len(found)} {cls} in the page"
    return found[0]


@pytest.fixture(scope="module")
def report(demo_run_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    info = write_report(demo_run_path, tmp_path_factory.mktemp("report") / "report.html")
    print(f"\nreport of the demo run: {info.nbytes / 1e6:.2f} MB, written in {info.seconds:.1f} s")
    return info, Path(info.path).read_text(encoding="utf-8")


def test_report_is_one_file_that_needs_no_network(report: tuple[Any, str]) -> None:
    info, text = report
    assert info.nbytes == len(text.encode("utf-8"))
    assert info.nbytes < 10_000_000, f"report of a 3-epoch demo is {info.nbytes:,} bytes"
    assert not OUTSIDE.search(text), OUTSIDE.search(text)
    # two scripts, both inline: the data and the bootstrap that starts the runtime
    scripts = re.findall(r"<script\b[^>]*>", text)
    assert scripts == [
        '<script type="application/json" id="nbviz-report-data">',
        '<script type="module">',
    ]
    assert "<link" not in text and "<iframe" not in text
    data = page_data(text)
    assert data["runtime"] == (STATIC / "report_runtime.js").read_text(encoding="utf-8")
    for code in data["assets"].values():
        assert not OUTSIDE.search(code)


def test_report_holds_every_view_of_the_dashboard(report: tuple[Any, str]) -> None:
    info, text = report
    data = page_data(text)
    for cls in [
        "StepScrubber",
        "LossCurves",
        "HealthReport",
        "LayerBrowser",
        "Histograms",
        "ConfusionMatrix",
        "SampleGallery",
    ]:
        m = model_of(data, cls)
        assert m["esm"] in data["assets"], f"{cls}: its front-end is not in the page"
        assert cls in info.views
    root = next(m for m in data["models"] if m["id"] == data["root"])
    assert root["cls"] == "Dashboard" and root["esm"] in data["assets"]
    # the scrubber's step reaches every view with a step, as jslink does in a notebook
    scrubber = model_of(data, "StepScrubber")["id"]
    linked = {link["target"][0] for link in data["links"] if link["source"] == [scrubber, "step"]}
    for cls in ["LossCurves", "LayerBrowser", "Histograms", "ConfusionMatrix", "HealthReport"]:
        assert model_of(data, cls)["id"] in linked, cls
    assert any("recorded steps are stored" in note for note in info.notes)


def test_a_selected_cell_has_an_answer_before_the_first_evaluation(
    report: tuple[Any, str],
) -> None:
    _, text = report
    data = page_data(text)
    confusion = model_of(data, "ConfusionMatrix")["id"]
    group = next(g for g in data["groups"] if g["owner"] == confusion)
    assert group["inputs"] == ["split", "step", "selected"]
    first = str(group["steps"][0])
    cells = {key[2] for key in (e["key"] for e in group["entries"]) if key[1] == first}
    assert "[0,1]" in cells and "[]" in cells  # moving the scrubber there keeps a selection


def test_recorded_answers_are_what_the_kernel_sends(report: tuple[Any, str], demo_run) -> None:
    _, text = report
    data = page_data(text)
    layers_id = model_of(data, "LayerBrowser")["id"]
    group = next(g for g in data["groups"] if g["owner"] == layers_id)
    assert group["inputs"] == ["selected_layer", "step"]
    outputs = [tuple(o) for o in group["outputs"]]
    live = nbviz.LayerBrowser(demo_run, live=False)
    try:
        for layer, step in [("", 0), ("2", 30), ("6", 65)]:
            live.selected_layer = layer
            live.step = step
            key = [json.dumps(layer), json.dumps(step)]
            entry = next(e for e in group["entries"] if e["key"] == key)
            for (mid, trait), index in zip(outputs, entry["out"]):
                assert mid == layers_id
                stored = revive(data["values"][index], data)
                assert stored == live.get_state(trait)[trait], (layer, step, trait)
    finally:
        live.close()


def test_confusion_cells_open_their_samples_offline(report: tuple[Any, str], demo_run) -> None:
    _, text = report
    data = page_data(text)
    cm_id = model_of(data, "ConfusionMatrix")["id"]
    group = next(g for g in data["groups"] if g["owner"] == cm_id)
    outputs = [tuple(o) for o in group["outputs"]]
    preds = demo_run.predictions(65, split="val")
    wrong = preds[preds["label"] != preds["pred"]]
    (t, p), n = next(iter(wrong.groupby(["label", "pred"]).size().sort_values().items()))
    entry = next(e for e in group["entries"] if e["key"] == ['"val"', "65", f"[{t},{p}]"])
    ids = revive(data["values"][entry["out"][outputs.index((cm_id, "selected_ids"))]], data)
    assert len(ids) == n
    assert set(ids) == set(wrong[(wrong["label"] == t) & (wrong["pred"] == p)]["id"])
    gallery = next(o for o in outputs if o[0] != cm_id and o[1] == "items")
    items = revive(data["values"][entry["out"][outputs.index(gallery)]], data)
    assert [i["id"] for i in items] == ids[:24]
    assert all(i["png"].startswith(b"\x89PNG") for i in items)


def test_saving_leaves_the_views_as_they_were(demo_run, tmp_path: Path) -> None:
    dash = nbviz.Dashboard(demo_run, live=False)
    try:
        dash.layers.selected_layer = "2"
        before = {k: v.get_state() for k, v in dash.views.items()}
        info = dash.save_html(tmp_path / "dash.html", max_steps=8)
        after = {k: v.get_state() for k, v in dash.views.items()}
        assert after == before
        assert info.path == tmp_path / "dash.html" and info.path.is_file()
        data = page_data(info.path.read_text(encoding="utf-8"))
        layers = model_of(data, "LayerBrowser")
        assert data["values"][layers["state"]["selected_layer"]] == "2"
    finally:
        dash.close()


def test_one_view_saves_on_its_own(demo_run, tmp_path: Path) -> None:
    view = nbviz.ConfusionMatrix(demo_run, live=False)
    try:
        info = view.save_html(tmp_path / "cm.html", title="where the digits model errs")
        text = info.path.read_text(encoding="utf-8")
        data = page_data(text)
        assert data["root"] == view.model_id
        assert info.views == ["ConfusionMatrix", "SampleGallery"]
        assert "<title>where the digits model errs</title>" in text
        print(f"\nConfusionMatrix alone: {info.nbytes / 1e6:.2f} MB")
    finally:
        view.close()


def test_few_steps_are_sampled_and_the_page_says_so(demo_run_path: Path, tmp_path: Path) -> None:
    info = write_report(demo_run_path, tmp_path / "r.html", max_steps=10)
    data = page_data(info.path.read_text(encoding="utf-8"))
    scrubber = model_of(data, "StepScrubber")["id"]
    steps = next(g for g in data["groups"] if g["owner"] == scrubber)["steps"]
    assert 10 <= len(steps) < 20 and steps[0] == 0 and steps[-1] == 65
    assert 21 in steps and 43 in steps  # evaluations are kept whatever the sampling
    note = next(n for n in info.notes if n.startswith("Steps:"))
    assert f"{len(steps)} of 66 recorded steps" in note


def test_the_size_budget_is_kept_and_the_page_says_what_was_left_out(
    demo_run_path: Path, tmp_path: Path, report: tuple[Any, str]
) -> None:
    full, _ = report
    info = write_report(demo_run_path, tmp_path / "small.html", max_bytes=400_000)
    assert info.nbytes < full.nbytes
    assert any("size budget" in n for n in info.notes), info.notes
    print(f"\nwith a 0.4 MB budget for answers: {info.nbytes / 1e6:.2f} MB")


def test_text_from_data_cannot_escape_the_page(tmp_path: Path) -> None:
    hostile = "</script><script>alert(1)</script>"
    run = nbviz.Run(tmp_path / "run")
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=30)
    run.log_samples(rng.random((30, 8, 8)), labels, class_names=[hostile, "<b>b</b>", "c"])
    run.log_predictions(10, rng.random((30, 3)), labels)
    run.flush()
    view = nbviz.ConfusionMatrix(run, live=False)
    try:
        info = view.save_html(tmp_path / "cm.html")
    finally:
        view.close()
        run.close()
    text = info.path.read_text(encoding="utf-8")
    assert hostile not in text and "<b>b</b>" not in text
    assert len(re.findall(r"<script\b", text)) == 2
    data = page_data(text)
    names = data["values"][model_of(data, "ConfusionMatrix")["state"]["class_names"]]
    assert names == [hostile, "<b>b</b>", "c"]


def test_cli_writes_the_report_and_prints_its_size(
    demo_run_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.html"
    assert main(["report", str(demo_run_path), "-o", str(out), "--max-steps", "12"]) == 0
    printed = capsys.readouterr().out
    assert f"report written to {out}" in printed
    assert re.search(r"\(\d+\.\d\d MB, \d+\.\d s\)", printed)
    assert out.is_file()


def test_cli_names_a_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert "nbviz report:" in err and "nothing" in err
