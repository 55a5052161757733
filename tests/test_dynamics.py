"""run.sample_dynamics(): per-sample training dynamics, and the data findings built on them.

A digits MLP is trained for real with the training split evaluated once per
epoch (``run.evaluate(step, model, [(x, y)], split="train")``), once with 15%
of its training labels flipped to another class and once clean, at ``every=1``
and at the probe's defaults. The flipped samples must rank first by
``mislabel_score`` and the verdict must name the data.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import nbviz
from nbviz.analysis.diagnose import diagnose, format_findings
from nbviz.analysis.dynamics import COLUMNS, sample_dynamics
from nbviz.analysis.triage import triage, verdict_text

EVERY = pytest.mark.parametrize("every", [1, None], ids=["every=1", "default"])
FLIPPED = 0.15
EPOCHS = 12
BATCH = 64


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def digits():
    from nbviz.demo import load_digits

    d = load_digits(seed=0)
    return (
        torch.from_numpy(d.x_train).flatten(1),
        torch.from_numpy(d.y_train),
        torch.from_numpy(d.x_val).flatten(1),
        torch.from_numpy(d.y_val),
    )


def flip(y: torch.Tensor, fraction: float, seed: int = 0) -> tuple[torch.Tensor, np.ndarray]:
    """``y`` with ``fraction`` of its labels moved to another class, and which ones."""
    rng = np.random.default_rng(seed)
    which = rng.choice(len(y), int(fraction * len(y)), replace=False)
    out = y.clone()
    out[which] = torch.from_numpy((y[which].numpy() + rng.integers(1, 10, len(which))) % 10)
    return out, np.sort(which)


def train_epochs(path, x, y, xv, yv, *, every, epochs=EPOCHS, names=None):
    """An MLP trained by epochs; the training and validation splits evaluated after each."""
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(64, 64), act1=nn.ReLU(), fc2=nn.Linear(64, 10)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    per_epoch = len(y) // BATCH
    with nbviz.Run(path, class_names=names) as run:
        run.watch(model) if every is None else run.watch(model, every=every)
        step = 0
        for _ in range(epochs):
            for idx in torch.randperm(len(y), generator=gen)[: per_epoch * BATCH].split(BATCH):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
                loss.backward()
                opt.step()
                run.log(step, train_loss=loss.item())
                step += 1
            run.evaluate(step - 1, model, [(x, y)], split="train", samples=False)
            run.evaluate(step - 1, model, [(xv, yv)], split="val", samples=False)
    return nbviz.open_run(path)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory, digits):
    """``noisy(every)``: (run, flipped ids) with 15% of the training labels flipped."""
    x, y, xv, yv = digits
    y_noisy, flipped = flip(y, FLIPPED)
    cache = {}

    def get(every):
        if every not in cache:
            path = tmp_path_factory.mktemp("noisy") / "run"
            cache[every] = train_epochs(path, x, y_noisy, xv, yv, every=every)
        return cache[every], flipped

    yield get
    for run in cache.values():
        run.close()


@pytest.fixture(scope="module")
def clean(tmp_path_factory, digits):
    x, y, xv, yv = digits
    run = train_epochs(tmp_path_factory.mktemp("clean") / "run", x, y, xv, yv, every=10)
    yield run
    run.close()


# ------------------------------------------------------------- the dynamics
def test_sample_dynamics_has_one_row_per_training_sample_with_its_numbers(clean, digits):
    dyn = sample_dynamics(clean, "train")
    assert list(dyn.columns) == list(COLUMNS)
    assert list(dyn["id"]) == list(range(len(digits[1])))
    assert (dyn["label"].to_numpy() == digits[1].numpy()).all()
    assert (dyn["evaluations"] == EPOCHS).all()
    assert dyn["confidence"].between(0, 1).all() and dyn["correctness"].between(0, 1).all()
    assert dyn["variability"].between(0, 0.5).all()  # the std of values in [0, 1]
    assert dyn["mislabel_score"].between(0, 1).all()
    # a sample the model gets right with a growing margin has a positive AUM, and back
    easy = dyn[dyn["correctness"] == 1]
    assert (easy["aum"] > 0).mean() > 0.99
    assert np.allclose(dyn["mislabel_score"], 1 / (1 + np.exp(dyn["aum"])))


def test_the_confidence_is_the_labelled_class_probability_averaged_over_evaluations(clean):
    dyn = sample_dynamics(clean, "train").set_index("id")
    steps = clean.prediction_steps("train")
    p = []
    for step in steps:
        ids, probs = clean.probabilities(int(step), split="train")
        labels = clean.predictions(int(step), split="train").set_index("id").loc[ids, "label"]
        p.append(pd.Series(probs[np.arange(len(ids)), labels.to_numpy()], index=ids))
    frame = pd.concat(p, axis=1).astype(np.float64)
    assert np.allclose(dyn.loc[frame.index, "confidence"], frame.mean(axis=1), atol=1e-6)
    assert np.allclose(dyn.loc[frame.index, "variability"], frame.std(axis=1, ddof=0), atol=1e-6)


def test_sample_dynamics_says_what_to_log_when_the_split_has_no_predictions(clean):
    with pytest.raises(ValueError, match=r"no predictions for split 'holdout'.*split='holdout'"):
        sample_dynamics(clean, "holdout")
    with pytest.raises(TypeError, match="split must be a non-empty string"):
        sample_dynamics(clean, "")


def test_predictions_logged_from_training_batches_with_their_ids_feed_it(tmp_path):
    torch.manual_seed(0)
    logits = torch.randn(6, 3)
    with nbviz.Run(tmp_path / "run") as run:
        run.log_predictions(0, logits[:3], torch.tensor([0, 1, 2]), ids=[10, 11, 12], split="train")
        run.log_predictions(1, logits[3:], torch.tensor([1, 2, 0]), ids=[11, 12, 13], split="train")
        dyn = sample_dynamics(run, "train")
    assert list(dyn["id"]) == [10, 11, 12, 13]
    assert list(dyn["evaluations"]) == [1, 2, 2, 1]
    assert list(dyn["label"]) == [0, 1, 2, 0]


# ------------------------------------------------------------- mislabelled
@EVERY
def test_flipped_labels_rank_first_by_mislabel_score_and_the_verdict_is_data(every, noisy, capsys):
    run, flipped = noisy(every)
    dyn = sample_dynamics(run, "train")
    top = dyn.sort_values("mislabel_score", ascending=False).head(len(flipped))
    precision = float(np.isin(top["id"], flipped).mean())
    with capsys.disabled():
        print(
            f"\n  precision of the top {len(flipped)} by mislabel_score ({every=}): {precision:.3f}"
        )
    assert precision >= 0.85
    findings = diagnose(run)
    verdict = triage(run, findings)
    assert verdict.iloc[0]["cause"] == "data", verdict_text(verdict) + format_findings(findings)
    root = findings.set_index("id").loc[verdict.iloc[0]["findings"][0]]
    first_evaluation = int(run.prediction_steps("train")[0])
    assert (root["check"], root["layer"], root["step"]) == (
        "mislabeled_samples",
        "",
        first_evaluation,
    )
    assert root["severity"] == "warning" and root["root"] == ""
    suspects = root["evidence"]["ids"]
    assert np.isin(suspects, flipped).mean() >= 0.9  # the ones it names are mostly flipped
    assert 0.08 <= root["evidence"]["fraction"] <= 0.16
    assert "mislabel_score" in verdict.iloc[0]["advice"]
    assert set(findings[findings["severity"] != "info"]["cause"]) == {"data"}


def test_a_clean_run_with_training_evaluations_is_healthy(clean):
    findings = diagnose(clean)
    verdict = triage(clean, findings)
    assert list(verdict["cause"]) == ["healthy"], verdict_text(verdict)
    flagged = findings[findings["check"] == "mislabeled_samples"]
    assert set(flagged["severity"]) <= {"info"}


# ------------------------------------------------------ classes in the labels
def test_a_class_missing_from_the_training_labels_is_the_root_of_its_errors(tmp_path, digits):
    x, y, xv, yv = digits
    keep = y != 3  # no 3 in training at all; validation still has its threes
    names = [str(i) for i in range(10)]
    run = train_epochs(tmp_path / "run", x[keep], y[keep], xv, yv, every=10, epochs=6, names=names)
    findings = diagnose(run)
    verdict = triage(run, findings)
    assert verdict.iloc[0]["cause"] == "data", verdict_text(verdict)
    root = findings.set_index("id").loc[verdict.iloc[0]["findings"][0]]
    assert root["check"] == "class_imbalance" and root["evidence"]["missing"] == [3]
    assert "'3'" in root["message"]
    for check in ("unlearned_classes", "class_error_imbalance"):
        rows = findings[(findings["check"] == check) & (findings["severity"] != "info")]
        assert len(rows) >= 1 and set(rows["root"]) == {root.name}, format_findings(findings)
        assert set(rows["evidence"].map(lambda e: e["class"])) == {3}
    run.close()


def test_a_rare_class_the_model_misses_is_an_imbalance_warning(tmp_path, digits):
    x, y, xv, yv = digits
    rare = torch.nonzero(y == 7).flatten()
    keep = torch.ones(len(y), dtype=torch.bool)
    keep[rare[3:]] = False  # three sevens against ~135 of every other digit
    run = train_epochs(tmp_path / "run", x[keep], y[keep], xv, yv, every=10, epochs=6)
    findings = diagnose(run)
    row = findings[findings["check"] == "class_imbalance"].iloc[0]
    assert row["severity"] == "warning" and row["root"] == ""
    assert row["evidence"]["small"] == [7] and row["evidence"]["ratio"] > 30
    assert row["evidence"]["minority_recall_gap"] >= 0.25
    run.close()


# ------------------------------------------------------------------ the view
def test_the_data_map_places_each_sample_and_a_pick_opens_it(noisy):
    from nbviz.widgets.base import array_from_payload, array_trait_payload

    run, flipped = noisy(1)
    view = nbviz.DataMap(run, live=False)
    dyn = view.dynamics
    assert view.points["n"] == len(dyn) == 1348
    xy = array_from_payload(view.points["xy"])
    assert xy.dtype == np.float32 and xy.shape == (len(dyn), 2)
    # variability across [0, 0.5] and confidence up [0, 1], in device coordinates
    assert np.allclose(xy[:, 0], 0.96 * (4 * dyn["variability"] - 1), atol=1e-6)
    assert np.allclose(xy[:, 1], 0.96 * (2 * dyn["confidence"] - 1), atol=1e-6)
    suspect = array_from_payload(view.points["suspect"])
    assert suspect.sum() > 0.08 * len(dyn)
    listed = [row["id"] for row in view.suspects]
    assert len(listed) == 20 and np.isin(listed, flipped).mean() >= 0.9
    first = view.suspects[0]
    assert view.points["first"] == first["index"] and dyn["id"].iloc[first["index"]] == first["id"]
    # a click on a point (its index) selects the sample; the gallery shows it
    view.picked = {"indices": array_trait_payload(np.array([first["index"]], dtype=np.uint32))}
    assert view.selected_ids == [first["id"]]
    assert view.gallery is not None and view.gallery.ids == [first["id"]]
    view.close()


def test_the_data_map_says_what_to_log_without_training_evaluations(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        run.log(0, train_loss=1.0)
        view = nbviz.DataMap(run, live=False)
        assert "run.evaluate(step, model, loader, split='train')" in view.empty
        view.close()
    with pytest.raises(ValueError, match="DataMap: color_by must be one of"):
        nbviz.DataMap(run, color_by="loss")


def test_the_dashboard_maps_the_training_data_and_a_finding_selects_its_samples(noisy):
    run, flipped = noisy(None)
    dash = nbviz.Dashboard(run, live=False)
    assert dash.data_map is not None and dash.health is not None
    findings = dash.health.findings
    i = next(k for k, f in enumerate(findings) if f["check"] == "mislabeled_samples")
    dash.health.selected = i
    assert dash.health.selected_split == "train"
    assert dash.data_map.selected_ids == dash.health.selected_ids
    assert np.isin(dash.data_map.selected_ids, flipped).mean() >= 0.9
    dash.close()
