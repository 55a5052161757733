"""A DataMap in a saved page: a click on a point shows its sample with no kernel, as in
a notebook; a map too large to hold every point's sample holds those of its list and
says so."""

from __future__ import annotations

import json
import re
import time

import pytest
from training import data_map_run

import nbviz
from nbviz.widgets import answer_plans
from nbviz.widgets.export import offline_page


def _page_data(text: str) -> dict:
    raw = re.search(
        r'<script type="application/json" id="nbviz-report-data">(.*?)</script>', text, re.S
    )
    assert raw is not None
    return json.loads(raw.group(1))


def _clicks(data: dict, map_id: str) -> tuple[dict, dict[int, list[int]]]:
    """The DataMap's group and, per clicked point, the ids its gallery then shows."""
    (group,) = [g for g in data["groups"] if g["owner"] == map_id and g["label"] == "DataMap"]
    assert group["inputs"] == ["picked"]
    gallery_ids = [k for k, (mid, trait) in enumerate(group["outputs"]) if trait == "ids"]
    (k,) = gallery_ids
    shown = {}
    for entry in group["entries"]:
        (point,) = json.loads(entry["key"][0])["indices"]
        shown[point] = data["values"][entry["out"][k]]
    return group, shown


@pytest.fixture(scope="module")
def mapped(tmp_path_factory: pytest.TempPathFactory):
    with nbviz.open_run(data_map_run(tmp_path_factory.mktemp("map") / "run")) as run:
        yield run


def test_every_point_of_a_data_map_opens_its_sample_in_a_saved_page(mapped) -> None:
    dm = nbviz.DataMap(mapped, live=False)
    assert dm.gallery is None  # made on the first click in a notebook
    t0 = time.perf_counter()
    text, info = offline_page(dm)
    seconds = time.perf_counter() - t0
    n = dm.points["n"]
    print(f"{n} points: {info.nbytes / 1e6:.2f} MB in {seconds:.1f} s")
    data = _page_data(text)
    group, shown = _clicks(data, dm.model_id)
    assert group["entries"] and len(shown) == n
    for point, ids in shown.items():
        assert ids == [int(dm._ids[point])]
    # the gallery was made before recording, and the page holds it
    assert dm.gallery is not None
    assert dm.gallery.model_id in {m["id"] for m in data["models"]}
    assert not any("DataMap: changing picked" in note for note in info.notes)
    assert dm.selected_ids == [] and dm.gallery.ids == []  # left as it was shown
    dm.close()


def test_a_large_data_map_holds_its_list_and_says_so(
    mapped, monkeypatch: pytest.MonkeyPatch
) -> None:
    dm = nbviz.DataMap(mapped, live=False)
    monkeypatch.setattr(answer_plans, "MAX_MAP_POINTS", 10)
    text, info = offline_page(dm)
    _, shown = _clicks(_page_data(text), dm.model_id)
    assert sorted(shown) == sorted(s["index"] for s in dm.suspects)
    (note,) = [n for n in info.notes if n.startswith("DataMap: a click")]
    assert f"the {len(dm.suspects)} most likely mislabelled" in note
    assert "need a live kernel" in note
    dm.close()
