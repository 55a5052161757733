"""``run.evaluate(..., loss_fn=...)``: models that are not classifiers, recorded by their loss.

Real torch models (a convolutional autoencoder, regression MLPs, a per-pixel model, a
multi-label model) evaluated into a real run: each sample's loss, the outputs and
targets small enough to show, the embeddings, the samples, and ``{split}_loss``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from training import ConvAutoencoder

import nbviz
from nbviz.demo import load_digits
from nbviz.recording.outputs import MAX_VALUES_PER_SAMPLE


def batches(x: torch.Tensor, *rest: torch.Tensor, size: int = 64) -> list:
    """``x`` (and what goes with it) in loader-sized pieces, in order."""
    out = []
    for i in range(0, len(x), size):
        parts = (x[i : i + size], *(r[i : i + size] for r in rest))
        out.append(parts[0] if not rest else parts)
    return out


@pytest.fixture(scope="module")
def digits() -> tuple[torch.Tensor, torch.Tensor]:
    data = load_digits()
    return torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)


def mse() -> nn.Module:
    return nn.MSELoss(reduction="none")


def test_a_conv_autoencoder_records_each_samples_loss_reconstruction_and_code(
    tmp_path: Path, digits
) -> None:
    x, _ = digits
    torch.manual_seed(0)
    model = ConvAutoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with nbviz.Run(tmp_path / "ae") as run:
        probe = run.watch(model, every=5)
        for step in range(20):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x[:128]), x[:128])
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
        metrics = run.evaluate(19, model, batches(x), loss_fn=mse())
        probe.close()
        run.flush()
        frame = run.predictions(19)
        kept = run.outputs(19)
        ids, codes = run.embeddings(19)
        stored = run.samples()
    with torch.no_grad():
        expected = ((model(x) - x) ** 2).mean(dim=(1, 2, 3)).numpy()
    assert set(metrics) == {"val_loss"}
    assert metrics["val_loss"] == pytest.approx(float(expected.mean()), rel=1e-5)
    assert len(frame) == len(x) == 449
    np.testing.assert_allclose(frame["loss"].to_numpy(), expected, rtol=1e-5)
    assert frame["pred"].isna().all() and frame["label"].isna().all()
    assert frame["confidence"].isna().all()
    assert kept.outputs.shape == (449, 1, 8, 8) and kept.outputs.dtype == np.float32
    assert kept.targets_from == "inputs"
    np.testing.assert_array_equal(kept.targets, x.numpy())
    with torch.no_grad():  # one batch of 449 here, batches of the loader there: float32 sums
        np.testing.assert_allclose(kept.outputs, model(x).numpy(), rtol=1e-5, atol=1e-7)
    assert codes.shape == (449, 16)  # the input of the last Linear: the code
    assert len(stored) == 449 and set(stored["kind"]) == {"image"}
    assert stored["label"].isna().all()


def test_a_regression_mlp_keeps_predicted_values_beside_targets(tmp_path: Path, digits) -> None:
    x, _ = digits
    flat = x.reshape(len(x), -1)
    y1 = flat.mean(dim=1)  # (N,) targets
    yk = torch.stack([flat.mean(dim=1), flat.std(dim=1)], dim=1)  # (N, 2)
    torch.manual_seed(0)
    one = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1), nn.Flatten(0))
    two = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
    with nbviz.Run(tmp_path / "reg") as run:
        m1 = run.evaluate(0, one, batches(flat, y1), split="one", loss_fn=mse())
        m2 = run.evaluate(0, two, batches(flat, yk), split="two", loss_fn=mse())
        run.flush()
        one_out, two_out = run.outputs(0, "one"), run.outputs(0, "two")
        losses = run.predictions(0, "two")["loss"].to_numpy()
        assert run.predicts_classes("one") is False and run.predicts_classes("two") is False
        assert set(run.samples(split="one")["kind"]) == {"array"}
    with torch.no_grad():
        np.testing.assert_allclose(one_out.outputs, one(flat).numpy(), rtol=1e-6)
        np.testing.assert_allclose(losses, ((two(flat) - yk) ** 2).mean(dim=1).numpy(), rtol=1e-5)
    assert one_out.outputs.shape == (449,) and one_out.targets.shape == (449,)
    np.testing.assert_allclose(one_out.targets, y1.numpy())
    assert two_out.outputs.shape == two_out.targets.shape == (449, 2)
    assert two_out.targets_from == "targets"
    assert set(m1) == {"one_loss"} and set(m2) == {"two_loss"}


def test_a_per_pixel_model_averages_each_samples_pixel_losses(tmp_path: Path, digits) -> None:
    x, _ = digits
    masks = (x[:, 0] > 0.5).long()  # (N, 8, 8) class per pixel
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 1))
    with nbviz.Run(tmp_path / "seg") as run:
        run.evaluate(0, model, batches(x, masks), loss_fn=nn.CrossEntropyLoss(reduction="none"))
        run.flush()
        kept = run.outputs(0)
        frame = run.predictions(0)
    with torch.no_grad():
        per_pixel = nn.functional.cross_entropy(model(x), masks, reduction="none")
    np.testing.assert_allclose(frame["loss"], per_pixel.mean(dim=(1, 2)).numpy(), rtol=1e-5)
    assert kept.outputs.shape == (449, 2, 8, 8) and kept.targets.shape == (449, 8, 8)
    assert kept.targets.dtype == np.int64
    assert frame["pred"].isna().all()


def test_a_per_pixel_classifier_needs_no_loss_fn_and_leaves_ignored_pixels_out(
    tmp_path: Path, digits
) -> None:
    """(N, C, H, W) scores against (N, H, W) classes: torch's cross-entropy layout for
    segmentation. Each sample's loss is the mean over its pixels not marked ``ignore_index``."""
    x, _ = digits
    masks = (x[:, 0] > 0.5).long()
    masks[:, 0, :] = 255  # a border row the labels leave out
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 1))
    with nbviz.Run(tmp_path / "seg") as run:
        metrics = run.evaluate(0, model, batches(x, masks), ignore_index=255)
        run.flush()
        frame = run.predictions(0)
        kept = run.outputs(0)
        assert run.predicts_classes() is False
    with torch.no_grad():
        per_pixel = nn.functional.cross_entropy(model(x), masks, reduction="none", ignore_index=255)
    expected = per_pixel[:, 1:, :].mean(dim=(1, 2))
    np.testing.assert_allclose(frame["loss"], expected.numpy(), rtol=1e-5)
    assert metrics["val_loss"] == pytest.approx(float(expected.mean()), rel=1e-5)
    assert kept.outputs.shape == (449, 2, 8, 8) and kept.targets.shape == (449, 8, 8)
    assert kept.targets.dtype == np.int64  # classes, drawn as class maps


def test_a_multi_label_model_with_bce_keeps_its_labels_and_class_colours(
    tmp_path: Path, digits
) -> None:
    x, y = digits
    flat = x.reshape(len(x), -1)
    # three labels per digit: even, above 4, a loop in it (0, 6, 8, 9)
    tags = torch.stack([y % 2 == 0, y > 4, torch.isin(y, torch.tensor([0, 6, 8, 9]))], 1).float()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
    loader = [
        {"image": flat[i : i + 64], "target": tags[i : i + 64], "label": y[i : i + 64]}
        for i in range(0, len(x), 64)
    ]
    with nbviz.Run(tmp_path / "tags", class_names=[str(d) for d in range(10)]) as run:
        run.evaluate(0, model, loader, loss_fn=nn.BCEWithLogitsLoss(reduction="none"))
        run.flush()
        frame = run.predictions(0)
        kept = run.outputs(0)
    with torch.no_grad():
        expected = nn.functional.binary_cross_entropy_with_logits(
            model(flat), tags, reduction="none"
        ).mean(dim=1)
    np.testing.assert_allclose(frame["loss"], expected.numpy(), rtol=1e-5)
    assert frame["label"].tolist() == y.tolist()  # the digits, for colouring
    assert frame["pred"].isna().all()
    assert kept.outputs.shape == kept.targets.shape == (449, 3)


def test_a_classifier_evaluated_with_loss_fn_stays_a_classifier_with_that_loss(
    tmp_path: Path, digits
) -> None:
    x, y = digits
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    smoothed = nn.CrossEntropyLoss(reduction="none", label_smoothing=0.1)
    with nbviz.Run(tmp_path / "clf") as run:
        metrics = run.evaluate(0, model, batches(x, y), loss_fn=smoothed)
        run.flush()
        frame = run.predictions(0)
        assert run.predicts_classes() is True and run.outputs(0) is None
    with torch.no_grad():
        logits = model(x)
    np.testing.assert_allclose(frame["loss"], smoothed(logits, y).numpy(), rtol=1e-5)
    assert frame["pred"].tolist() == logits.argmax(1).tolist()
    assert set(metrics) == {"val_loss", "val_accuracy"}


def test_without_loss_fn_a_model_that_is_not_a_classifier_is_told_to_pass_one(
    tmp_path: Path, digits
) -> None:
    x, y = digits
    with nbviz.Run(tmp_path / "r") as run:
        with pytest.raises(ValueError, match=r"shape \(449, 1, 8, 8\); .*pass loss_fn="):
            run.evaluate(0, ConvAutoencoder(), batches(x, y))
        with pytest.raises(ValueError, match=r"got Tensor of length 64; .*pass loss_fn="):
            run.evaluate(0, ConvAutoencoder(), batches(x))
        flat = x.reshape(len(x), -1)
        regression = nn.Linear(64, 1)
        with pytest.raises(TypeError, match=r"whole numbers .*pass loss_fn="):
            run.evaluate(0, regression, batches(flat, flat.mean(1, keepdim=True)))


def test_a_loss_fn_that_reduces_the_batch_or_is_not_a_function_is_refused(
    tmp_path: Path, digits
) -> None:
    x, _ = digits
    with nbviz.Run(tmp_path / "r") as run:
        with pytest.raises(ValueError, match=r"loss is one number .*reduction='none'"):
            run.evaluate(0, ConvAutoencoder(), batches(x), loss_fn=nn.MSELoss())
        with pytest.raises(TypeError, match="loss_fn must be a function"):
            run.evaluate(0, ConvAutoencoder(), batches(x), loss_fn="mse")
        wrong_rows = lambda out, t: torch.zeros(3)  # noqa: E731 - a loss of the wrong length
        with pytest.raises(ValueError, match="loss has 3 rows but there are 64 samples"):
            run.evaluate(0, ConvAutoencoder(), batches(x), loss_fn=wrong_rows)
        assert not len(run.prediction_steps())


def test_outputs_too_big_to_show_keep_their_losses_only(tmp_path: Path) -> None:
    side = int(np.sqrt(MAX_VALUES_PER_SAMPLE)) * 2  # 4x the values a sample may keep
    x = torch.rand(6, 1, side, side)
    model = nn.Conv2d(1, 1, 1)
    with nbviz.Run(tmp_path / "big") as run:
        run.evaluate(0, model, [x], loss_fn=mse())
        run.flush()
        kept = run.outputs(0)
        assert len(run.predictions(0)) == 6
    assert kept.outputs is None and kept.targets is None and len(kept.ids) == 6


def test_log_outputs_replaces_an_evaluation_only_when_asked(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "r") as run:
        run.log_outputs(0, [0.1, 0.2], outputs=[[1.0], [2.0]], targets=[[1.5], [2.5]])
        with pytest.raises(ValueError, match="already recorded at step 0; pass overwrite=True"):
            run.log_outputs(0, [0.3, 0.4])
        run.log_outputs(0, [0.3], ids=[9], overwrite=True)
        run.flush()
        assert run.predictions(0)["id"].tolist() == [9]
        assert run.outputs(0).outputs is None
        with pytest.raises(ValueError, match=r"log_outputs: loss is one number \(0.5\)"):
            run.log_outputs(1, 0.5)
        with pytest.raises(ValueError, match=r"outputs of shape \(3, 1\) must have one row"):
            run.log_outputs(1, [0.1, 0.2], outputs=np.zeros((3, 1)))
