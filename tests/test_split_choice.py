"""Views open on a split the run has, and switch between its splits.

A run evaluated only on "test" (or "train", or any name) is a valid run: the
Dashboard, the report and every classification view show it. Given no split, a
view prefers "val", then "test", then the first recorded; its ``split`` trait
(a menu in the browser) switches to another, and the saved report holds the
answers for every split.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import traitlets
from test_report import model_of, page_data, revive
from test_training_view_state import wait_until
from training import named_mlp

import nbviz
from nbviz.cli import main
from nbviz.report import write_report
from nbviz.widgets.splits import choose_split


def loader(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()  # 4 classes
    return [(x[i : i + 32], y[i : i + 32]) for i in range(0, n, 32)]


def evaluated_run(path: Path, splits: tuple[str, ...]) -> nbviz.Run:
    """A real MLP trained a few steps, evaluated with run.evaluate on ``splits`` only."""
    torch.manual_seed(0)
    model = named_mlp(12, 16, 4)
    run = nbviz.Run(path, class_names=["a", "b", "c", "d"])
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    train = loader(256, seed=1)
    for step in range(30):
        x, y = train[step % len(train)]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
        if step in (9, 29):
            for k, split in enumerate(splits):
                run.evaluate(step, model, loader(96, seed=10 + k), split=split)
    run.flush()
    return run


@pytest.fixture(scope="module")
def test_only(tmp_path_factory: pytest.TempPathFactory) -> nbviz.Run:
    run = evaluated_run(tmp_path_factory.mktemp("splits") / "test_only", ("test",))
    yield run
    run.close()


@pytest.fixture(scope="module")
def two_splits(tmp_path_factory: pytest.TempPathFactory) -> nbviz.Run:
    run = evaluated_run(tmp_path_factory.mktemp("splits") / "two", ("train", "test"))
    yield run
    run.close()


def test_the_split_preferred_is_val_then_test_then_the_first() -> None:
    assert choose_split(["test", "train", "val"]) == "val"
    assert choose_split(["train", "test"]) == "test"
    assert choose_split(["holdout", "train"]) == "holdout"
    assert choose_split([]) is None


def test_every_view_opens_on_the_only_split_evaluated(test_only: nbviz.Run) -> None:
    assert test_only.splits() == ["test"]
    cm = nbviz.ConfusionMatrix(test_only, live=False)
    assert cm.split == "test" and cm.splits == ["test"] and cm.eval_steps == [9, 29]
    assert cm.empty == "" and cm.scores["n"] == 96 and cm.mode == "matrix"
    gallery = nbviz.SampleGallery(test_only, live=False)
    assert gallery.split == "test" and len(gallery.ids) == 96 and gallery.items
    projector = nbviz.EmbeddingProjector(test_only, method="pca", live=False)
    assert projector.split == "test" and projector.points and projector.shown_step == 29
    layers = nbviz.LayerBrowser(test_only, live=False)
    assert layers.split == "test"
    for view in (cm, gallery, projector, layers):
        view.close()


def test_a_split_the_run_lacks_is_refused_naming_the_ones_it_has(test_only: nbviz.Run) -> None:
    with pytest.raises(ValueError, match=r"no predictions for split 'val'.*'test'"):
        nbviz.ConfusionMatrix(test_only, split="val", live=False)
    with pytest.raises(ValueError, match=r"no embeddings for split 'val'.*'test'"):
        nbviz.EmbeddingProjector(test_only, split="val", method="pca", live=False)
    with pytest.raises(ValueError, match="split must be a non-empty string"):
        nbviz.ConfusionMatrix(test_only, split="", live=False)


def test_the_dashboard_and_report_show_a_run_evaluated_only_on_test(
    test_only: nbviz.Run, tmp_path: Path
) -> None:
    dash = nbviz.Dashboard(test_only, live=False)
    assert dash.confusion is not None and dash.confusion.split == "test"
    assert dash.projector is not None and dash.projector.split == "test"
    assert not [n for n in dash.notes if "ConfusionMatrix" in n]
    dash.close()
    info = write_report(test_only, tmp_path / "report.html")
    data = page_data(Path(info.path).read_text(encoding="utf-8"))
    cm = model_of(data, "ConfusionMatrix")
    assert revive(data["values"][cm["state"]["split"]], data) == "test"
    assert "ConfusionMatrix" in info.views
    out = tmp_path / "cli.html"
    assert main(["report", str(test_only.run_dir), "-o", str(out)]) == 0
    assert "ConfusionMatrix" in out.read_text(encoding="utf-8")


def test_switching_the_split_keeps_the_selection_and_its_ids_follow(
    two_splits: nbviz.Run,
) -> None:
    cm = nbviz.ConfusionMatrix(two_splits, live=False)
    assert cm.split == "test" and sorted(cm.splits) == ["test", "train"]
    cm.selected = [1, 1]
    on_test = list(cm.selected_ids)
    cm.split = "train"
    frame = two_splits.predictions(29, "train")
    expected = frame[(frame.label == 1) & (frame.pred == 1)]
    assert cm.selected == [1, 1] and cm.eval_step == 29
    assert sorted(cm.selected_ids) == sorted(expected.id.tolist())
    assert cm.scores["n"] == len(frame) and cm.gallery.split == "train"
    assert cm.gallery.ids == cm.selected_ids
    cm.split = "test"
    assert cm.selected_ids == on_test
    with pytest.raises(traitlets.TraitError, match="'holdout' is not one of this run's splits"):
        cm.split = "holdout"
    cm.close()
    gallery = nbviz.SampleGallery(two_splits, live=False)
    gallery.split = "train"
    assert gallery.ids == two_splits.sample_ids("train").tolist()
    gallery.close()
    projector = nbviz.EmbeddingProjector(two_splits, method="pca", live=False)
    assert projector.split == "test" and sorted(projector.splits) == ["test", "train"]
    projector.split = "train"
    ids, _ = two_splits.embeddings(29, split="train", layer=projector.layer)
    assert sorted(projector.points_frame().id) == sorted(ids.tolist())
    projector.close()


def test_in_the_dashboard_the_projector_follows_the_confusion_matrix_split(
    two_splits: nbviz.Run,
) -> None:
    dash = nbviz.Dashboard(two_splits, live=False)
    assert dash.confusion.split == dash.projector.split == "test"
    dash.confusion.split = "train"
    assert dash.projector.split == "train"  # so that a cell's ids light up that split's points
    dash.confusion.selected = [0, 0]
    assert dash.projector.highlight_ids == dash.confusion.selected_ids
    dash.close()


def test_the_report_holds_the_answers_of_every_split(two_splits: nbviz.Run, tmp_path: Path) -> None:
    info = write_report(two_splits, tmp_path / "report.html")
    data = page_data(Path(info.path).read_text(encoding="utf-8"))
    cm_id = model_of(data, "ConfusionMatrix")["id"]
    group = next(g for g in data["groups"] if g["owner"] == cm_id)
    assert group["inputs"] == ["split", "step", "selected"]
    outputs = [tuple(o) for o in group["outputs"]]
    live = nbviz.ConfusionMatrix(two_splits, live=False)
    try:
        for split in ("train", "test"):
            live.split = split
            live.step = 29
            live.selected = [2, 2]
            key = [json.dumps(split), "29", "[2,2]"]
            entry = next(e for e in group["entries"] if e["key"] == key)
            for trait in ("selected_ids", "scores"):
                stored = revive(data["values"][entry["out"][outputs.index((cm_id, trait))]], data)
                assert stored == live.get_state(trait)[trait], (split, trait)
            gallery = next(o for o in outputs if o[0] != cm_id and o[1] == "split")
            assert revive(data["values"][entry["out"][outputs.index(gallery)]], data) == split
    finally:
        live.close()
    views = ("ConfusionMatrix", "SampleGallery")
    assert not [n for n in info.notes if n.startswith(views) and "split" in n]


def test_evaluating_only_a_test_split_returns_its_metrics(tmp_path: Path) -> None:
    model = named_mlp(12, 16, 4)
    run = nbviz.Run(tmp_path / "run")
    out = run.evaluate(0, model, loader(64, seed=3), split="test")
    run.flush()
    assert set(out) == {"test_loss", "test_accuracy"}
    frame = run.predictions(0, "test")
    assert len(frame) == 64 and np.isfinite(frame.loss).all()
    run.close()


def test_a_live_view_opened_before_any_prediction_follows_the_first_split_to_arrive(
    tmp_path: Path,
) -> None:
    run = nbviz.Run(tmp_path / "live")
    run.log(0, train_loss=1.0)
    run.flush()
    cm = nbviz.ConfusionMatrix(run)  # live: follows the run
    gallery = nbviz.SampleGallery(run)
    assert cm.split == "val" and "No val predictions" in cm.empty
    rng = np.random.default_rng(0)
    run.log_predictions(4, rng.normal(size=(20, 3)), rng.integers(0, 3, 20), split="test")
    run.flush()
    wait_until(lambda: cm.eval_step == 4 and len(gallery.ids) == 20)
    assert cm.split == "test" and cm.splits == ["test"] and cm.empty == ""
    assert gallery.split == "test"
    named = nbviz.ConfusionMatrix(run, split="test")  # a split the user named stays
    run.log_predictions(5, rng.normal(size=(8, 3)), rng.integers(0, 3, 8), split="val")
    run.flush()
    wait_until(lambda: cm.splits == ["test", "val"] and named.splits == ["test", "val"])
    assert cm.split == "test" and named.split == "test"
    for view in (cm, gallery, named):
        view.close()
    run.close()


def test_the_matrix_opens_on_a_split_of_classes_beside_one_evaluated_by_its_loss(
    tmp_path: Path,
) -> None:
    run = nbviz.Run(tmp_path / "mixed")
    regressor = torch.nn.Linear(12, 1)
    x = torch.randn(64, 12)
    pairs = [(x[i : i + 32], x[i : i + 32, :1]) for i in range(0, 64, 32)]
    run.evaluate(0, regressor, pairs, loss_fn=torch.nn.MSELoss(reduction="none"))  # "val"
    run.evaluate(0, named_mlp(12, 8, 4), loader(64, seed=5), split="test")
    run.flush()
    assert run.predicts_classes("val") is False and run.class_splits() == ["test"]
    cm = nbviz.ConfusionMatrix(run, live=False)
    assert cm.split == "test" and cm.splits == ["test"] and cm.scores["n"] == 64
    cm.close()
    named = nbviz.ConfusionMatrix(run, split="val", live=False)  # named: says why it is empty
    assert "have no classes" in named.empty and named.splits == ["test", "val"]
    named.close()
    run.close()
