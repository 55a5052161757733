"""Comparing two evaluations, a sample's detail, and the samples that excite a unit:
each view's state against what the run store holds, computed here directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import traitlets
from torch import nn

import nbviz
from nbviz.analysis import metrics
from nbviz.demo import DIGIT_NAMES, digits_cnn, load_digits

CAPTURED = (3, 17)


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A digits CNN trained for a few epochs, evaluated each epoch with per-unit
    summaries of the second conv block and the activations of two samples."""
    torch.manual_seed(0)
    data = load_digits()
    model = digits_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xt, yt = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
    loader = [(xv[i : i + 128], yv[i : i + 128]) for i in range(0, len(yv), 128)]
    path = tmp_path_factory.mktemp("details") / "run"
    step = 0
    with nbviz.Run(path, class_names=DIGIT_NAMES) as run:
        run.watch(model, every=10)
        run.evaluate(0, model, loader, units_layer="3", capture_ids=CAPTURED)
        for _epoch in range(3):
            for idx in torch.randperm(len(yt)).split(64):
                opt.zero_grad()
                nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
                opt.step()
                step += 1
                run.log(step, train_loss=0.0)
            run.evaluate(step, model, loader, units_layer="3", capture_ids=CAPTURED)
    return path


@pytest.fixture()
def run(digits_run: Path):
    view = nbviz.open_run(digits_run)
    yield view
    view.close()


def right(frame) -> dict[int, bool]:
    return {int(i): bool(t == p) for i, t, p in zip(frame["id"], frame["label"], frame["pred"])}


# -- comparing two evaluations ----------------------------------------------------------


def test_the_flips_between_two_steps_are_the_samples_whose_correctness_changed(run) -> None:
    steps = [int(s) for s in run.prediction_steps()]
    cm = nbviz.ConfusionMatrix(run, live=False)
    for base, now in [(steps[0], steps[-1]), (steps[1], steps[2]), (steps[2], steps[1])]:
        cm.step = now
        counts = cm.compare_with(base)
        before, after = run.predictions(base), run.predictions(now)
        a, b = right(before), right(after)
        loss = dict(zip(after["id"], after["loss"]))
        for which, was, is_ in (("to_wrong", True, False), ("to_right", False, True)):
            ids = [i for i in a if a[i] == was and b[i] == is_]
            expected = sorted(ids, key=lambda i: (-loss[i], i))
            assert cm.flipped_ids(which) == expected
            assert counts[which] == len(expected)
            cm.selected_flip = which
            assert cm.selected == [] and cm.selected_ids == expected
            assert cm.gallery.ids == expected
        assert counts["step"] == base and counts["common"] == len(after)
        assert counts["to_right"] > 0 or base > now  # training helps
        delta = nbviz.widgets.base.array_from_payload(cm.compare["delta"])
        expected_delta = metrics.confusion_matrix(after, 10) - metrics.confusion_matrix(before, 10)
        np.testing.assert_array_equal(delta, expected_delta)
    cm.close()


def test_a_cell_and_a_flip_list_replace_each_other_and_the_flips_follow_the_step(
    run, tmp_path: Path
) -> None:
    steps = [int(s) for s in run.prediction_steps()]
    cm = nbviz.ConfusionMatrix(run, live=False, step=steps[-1], compare_step=steps[0])
    cm.selected_flip = "to_right"
    fixed_late = list(cm.selected_ids)
    cm.select(0, 0)
    assert (
        cm.selected_flip == ""
        and cm.selected_ids == metrics.cell_ids(run.predictions(steps[-1]), 0, 0).tolist()
    )
    cm.selected_flip = "to_right"
    cm.step = steps[1]  # the flip list follows the step in view
    assert cm.selected_flip == "to_right" and cm.selected_ids != fixed_late
    assert cm.selected_ids == cm.flipped_ids("to_right")
    cm.compare_step = -1
    assert cm.compare == {} and cm.selected_ids == [] and cm.flipped_ids("to_wrong") == []
    with pytest.raises(traitlets.TraitError):
        cm.selected_flip = "flipped"
    with pytest.raises(ValueError, match="which must be 'to_wrong' or 'to_right'"):
        cm.flipped_ids("both")
    with pytest.raises(TypeError, match="compare_step must be an int"):
        nbviz.ConfusionMatrix(run, live=False, compare_step="first")
    cm.close()
    small = nbviz.Run(tmp_path / "small")
    for step, pred in ((10, [0, 1, 1]), (20, [1, 1, 0])):
        small.log_predictions(step, np.array(pred), np.array([0, 1, 0]))
    small.flush()
    cm = nbviz.ConfusionMatrix(small, live=False, compare_step=5)
    assert cm.compare == {"step": -1, "notice": "no evaluation at or before step 5 to compare with"}
    cm.compare_step = 10
    assert cm.flipped_ids("to_wrong") == [0] and cm.flipped_ids("to_right") == [2]
    cm.close()
    small.close()


# -- a sample's detail ------------------------------------------------------------------


def test_a_samples_detail_holds_its_prediction_top_k_units_and_activations(run) -> None:
    last = int(run.prediction_steps()[-1])
    g = nbviz.SampleGallery(run, ids=list(range(30)), live=False)
    detail = g.show(CAPTURED[1])
    assert g.detail_id == CAPTURED[1] and detail["id"] == CAPTURED[1]
    frame = run.predictions(last).set_index("id")
    row = frame.loc[CAPTURED[1]]
    label, pred = int(row["label"]), int(row["pred"])
    assert detail["step"] == last and detail["pred"] == pred
    assert detail["label"] == label and detail["label_name"] == DIGIT_NAMES[label]
    assert detail["loss"] == pytest.approx(row["loss"])
    assert detail["kind"] == "image" and detail["png"][:4] == b"\x89PNG"
    ids, probs = run.probabilities(last)
    p = probs[list(ids).index(CAPTURED[1])].astype(np.float64)
    top = detail["top_k"]
    assert [t["class"] for t in top] == list(np.argsort(-p, kind="stable")[:5])
    assert [t["p"] for t in top] == pytest.approx(np.sort(p)[::-1][:5])
    assert top[0]["class"] == pred and top[0]["name"] == DIGIT_NAMES[pred]
    # the per-unit summary evaluate recorded for conv block "3", this sample's row
    uids, umat = run.embeddings(last, layer="3", kind="units")
    units = nbviz.widgets.base.array_from_payload(detail["units"]["values"])
    np.testing.assert_array_equal(units, umat[list(uids).index(CAPTURED[1])])
    assert detail["units"]["layer"] == "3" and units.shape == (32,)
    # the captured activations, layer by layer, as the store holds them
    acts = detail["activations"]
    stored = run.captures(CAPTURED[1], step=last)
    assert acts["step"] == last and [a["layer"] for a in acts["layers"]] == list(stored["layer"])
    conv = acts["layers"][0]
    assert conv["type"] == "Conv2d" and conv["shape"] == [16, 8, 8]
    maps = nbviz.widgets.base.array_from_payload(conv["maps"])
    np.testing.assert_array_equal(maps, stored["maps"].iloc[0])
    assert "maps" not in acts["layers"][-1] and acts["layers"][-1]["n_units"] == 10
    assert detail["activations_note"] == ""
    # the step moves the detail with it
    g.step = 0
    assert g.detail["step"] == 0 and g.detail["activations"]["step"] == 0
    g.close()


def test_a_sample_without_capture_or_probabilities_says_how_to_record_them(
    run, tmp_path: Path
) -> None:
    g = nbviz.SampleGallery(run, live=False)
    detail = g.show(5)
    assert detail["activations"] is None
    assert "run.capture(model, sample, id=5" in detail["activations_note"]
    assert "capture_ids=[5]" in detail["activations_note"]
    assert "missing" not in detail
    assert g.show(10_000)["missing"] == "No val sample or prediction has id 10000."
    g.detail_id = -1
    assert g.detail == {}
    g.close()
    bare = nbviz.Run(tmp_path / "bare")
    bare.log_predictions(1, np.array([0, 1, 1]), np.array([0, 1, 0]))  # classes, no logits
    bare.flush()
    g = nbviz.SampleGallery(bare, live=False)
    d = g.show(2)
    assert d["evaluated"] and d["pred"] == 1 and d["label"] == 0 and d["top_k"] == []
    assert "(N, classes) logits" in d["top_k_note"] and d["kind"] == ""
    g.close()
    bare.close()


# -- what each unit responds to ---------------------------------------------------------


def test_a_units_top_samples_are_those_with_the_highest_and_lowest_recorded_values(run) -> None:
    steps = [int(s) for s in run.prediction_steps()]
    lb = nbviz.LayerBrowser(run, selected_layer="3", live=False)
    lb.step = steps[2]
    got = lb.unit_samples
    assert got["kind"] == "units" and got["n_units"] == 32 and got["step"] == steps[2]
    ids, matrix = run.embeddings(steps[2], layer="3", kind="units")
    np.testing.assert_allclose(
        nbviz.widgets.base.array_from_payload(got["means"]), matrix.mean(axis=0), rtol=1e-5
    )
    preds = run.predictions(steps[2]).set_index("id")
    for unit in (0, 7, 31):
        most, least = lb.unit_top_samples(unit)
        values = matrix[:, unit].astype(np.float64)
        assert most == [int(ids[k]) for k in np.lexsort((ids, -values))[:8]]
        assert least == [int(ids[k]) for k in np.lexsort((ids, values))[:8]]
        card = lb.unit_samples["most"][0]
        assert card["value"] == pytest.approx(values.max())
        assert card["pred"] == preds.at[most[0], "pred"] and card["kind"] == "image"
        assert card["label_name"] == DIGIT_NAMES[int(preds.at[most[0], "label"])]
        assert metrics.top_samples_for_unit(run, "3", unit, steps[2], k=8)[0].tolist() == most
    lb.step = steps[0]  # the evaluation in view moves with the step
    assert lb.unit_samples["step"] == steps[0] and lb.unit_samples["unit"] == 31
    lb.unit = 99
    assert "unit 99 is outside 0..31" in lb.unit_samples["notice"]
    lb.selected_layer = "1"  # no units recorded there: say how to record them
    assert lb.unit == -1 and lb.unit_samples["n_units"] == 0
    assert "units_layer='1'" in lb.unit_samples["notice"]
    lb.selected_layer = "8"  # the embedding layer: its input, as the projector's data
    assert lb.unit_samples["kind"] == "embedding" and lb.unit_samples["n_units"] == 64
    lb.close()


def test_the_demo_runs_last_linear_layer_lists_the_samples_of_its_input_units(demo_run) -> None:
    lb = nbviz.LayerBrowser(demo_run, selected_layer="8", live=False)
    most, least = lb.unit_top_samples(5)
    ids, emb = demo_run.embeddings(None, layer="8")
    assert most[0] == int(ids[np.argmax(emb[:, 5])]) and len(most) == len(least) == 8
    lb.close()


def test_a_sample_clicked_under_a_unit_shows_its_feature_maps_of_the_layer(run) -> None:
    last = int(run.prediction_steps()[-1])
    lb = nbviz.LayerBrowser(run, selected_layer="3", live=False)
    lb.step = last
    lb.map_id = CAPTURED[0]
    got = lb.sample_maps
    stored = run.captures(CAPTURED[0], step=last).set_index("layer")
    assert got["id"] == CAPTURED[0] and got["layer"] == "3" and got["step"] == last
    maps = nbviz.widgets.base.array_from_payload(got["maps"])
    assert maps.shape == (32, 8, 8)
    np.testing.assert_array_equal(maps, stored.at["3", "maps"])
    lb.selected_layer = "8"  # a linear layer: its units, no maps
    assert "maps" not in lb.sample_maps and lb.sample_maps["shape"] == [10]
    np.testing.assert_array_equal(
        nbviz.widgets.base.array_from_payload(lb.sample_maps["units"]), stored.at["8", "units"]
    )
    lb.map_id = 0  # never captured: say how
    assert "run.capture(model, sample, id=0" in lb.sample_maps["notice"]
    lb.map_id = -1
    assert lb.sample_maps == {}
    lb.close()


def test_the_gallery_captures_the_open_sample_when_the_model_is_at_hand(tmp_path: Path) -> None:
    torch.manual_seed(3)
    model = digits_cnn()
    x = torch.randn(6, 1, 8, 8)
    run = nbviz.Run(tmp_path / "run")
    run.evaluate(2, model, [(x, torch.arange(6))])
    g = nbviz.SampleGallery(run, live=False)
    with pytest.raises(ValueError, match="no sample is open"):
        g.capture(model, x[4])
    assert g.show(4)["activations"] is None
    detail = g.capture(model, x[4])
    assert detail["activations"]["step"] == 2 and len(detail["activations"]["layers"]) == 8
    assert run.captured_ids().tolist() == [4]
    g.close()
    run.close()
    view = nbviz.open_run(tmp_path / "run")
    g = nbviz.SampleGallery(view, live=False)
    g.show(1)
    with pytest.raises(TypeError, match=r"read-only; record with nbviz.Run\("):
        g.capture(model, x[1])
    g.close()
    view.close()


def test_tabular_samples_show_their_values_on_cards_and_in_full_in_the_detail(
    tmp_path: Path,
) -> None:
    rows = np.arange(40 * 20, dtype=np.float32).reshape(40, 20)
    run = nbviz.Run(tmp_path / "rows")
    run.log_samples(rows, np.zeros(40, dtype=np.int64))
    run.flush()
    g = nbviz.SampleGallery(run, live=False, page_size=5)
    card = g.items[1]
    assert card["kind"] == "array" and card["size"] == 20
    np.testing.assert_array_equal(
        nbviz.widgets.base.array_from_payload(card["values"]), rows[1, :16]
    )
    d = g.show(3)
    np.testing.assert_array_equal(nbviz.widgets.base.array_from_payload(d["values"]), rows[3])
    assert d["label"] == 0 and not d["evaluated"]
    assert d["top_k_note"] == "No evaluation at or before this step."
    g.close()
    run.close()


def test_the_dashboard_carries_the_comparison_the_detail_and_the_unit_samples(run) -> None:
    dash = nbviz.Dashboard(run, live=False)
    cm, lb = dash.confusion, dash.layers
    assert cm is not None and lb is not None
    steps = [int(s) for s in run.prediction_steps()]
    cm.compare_with(steps[0])
    assert cm.compare["step"] == steps[0] and cm.compare["to_right"] > 0
    assert cm.gallery.show(CAPTURED[0])["activations"] is not None
    lb.selected_layer = "3"
    assert lb.unit_top_samples(0)[0]
    dash.close()
