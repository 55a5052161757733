"""run.log and friends refuse bad input at logging time and keep what is recorded."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nbviz


def test_nan_and_inf_scalars_are_stored_as_they_are(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        run.log(0, train_loss=float("nan"), grad=torch.tensor(float("inf")))
        frame = run.scalars().set_index("name")
    assert math.isnan(frame.loc["train_loss", "value"])
    assert frame.loc["grad", "value"] == math.inf


def test_log_rejects_values_that_are_not_numbers(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        with pytest.raises(TypeError, match=r"log: train_loss='low' is a str, not a number"):
            run.log(0, train_loss="low")
        with pytest.raises(ValueError, match="tensor with 3 elements"):
            run.log(0, train_loss=torch.ones(3))
        for complex_value in (torch.tensor(1 + 2j), np.complex128(1 + 2j), np.array(1j)):
            with pytest.raises(TypeError, match=r"log: z=.* not a number"):
                run.log(0, z=complex_value)
        assert run.scalars().empty  # nothing half-logged


def test_log_takes_numbers_of_every_kind(tmp_path):
    values = {
        "py_int": 3,
        "py_bool": True,
        "np_float": np.float32(0.5),
        "np_int": np.int64(7),
        "np_bool": np.bool_(True),
        "np_0d": np.array(2.5),
        "np_1elem": np.array([4.0]),
        "tensor": torch.tensor(1.5, dtype=torch.float64),
        "half": torch.tensor(0.25, dtype=torch.float16),
        "bool_tensor": torch.tensor(False),
        "int_tensor": torch.tensor(9),
    }
    with nbviz.Run(tmp_path / "run") as run:
        run.log(np.int64(2), values)
        frame = run.scalars().set_index("name")
    assert frame["step"].unique().tolist() == [2]
    assert frame["value"].to_dict() == {
        "py_int": 3.0,
        "py_bool": 1.0,
        "np_float": 0.5,
        "np_int": 7.0,
        "np_bool": 1.0,
        "np_0d": 2.5,
        "np_1elem": 4.0,
        "tensor": 1.5,
        "half": 0.25,
        "bool_tensor": 0.0,
        "int_tensor": 9.0,
    }


def test_log_rejects_names_that_are_not_strings(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        with pytest.raises(TypeError, match="scalar names must be non-empty strings, got 3"):
            run.log(0, {3: 1.0})


def test_a_step_going_backwards_needs_overwrite(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        run.log(5, train_loss=1.0)
        with pytest.raises(ValueError, match=r"'train_loss' was already logged at step 5; step 4"):
            run.log(4, train_loss=2.0)
        run.log(4, train_loss=2.0, overwrite=True)
        run.log(4, val_loss=0.5)  # steps are checked per name
        values = run.scalars("train_loss").set_index("step")["value"]
    assert values.to_dict() == {4: 2.0, 5: 1.0}


def test_an_appended_run_remembers_its_last_steps(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        run.log(9, train_loss=1.0)
    with nbviz.Run(tmp_path / "run") as run:
        with pytest.raises(ValueError, match="already logged at step 9"):
            run.log(3, train_loss=1.0)


def test_prediction_inputs_are_checked(tmp_path):
    with nbviz.Run(tmp_path / "run", class_names=list("abc")) as run:
        with pytest.raises(ValueError, match="labels has 4 items but logits has 5 rows"):
            run.log_predictions(0, np.zeros((5, 3)), [0, 1, 2, 0])
        with pytest.raises(ValueError, match=r"label 7 is out of range for 3 classes"):
            run.log_predictions(0, np.zeros((2, 3)), [0, 7])
        with pytest.raises(ValueError, match=r"ids are not unique; repeated: \[1\]"):
            run.log_predictions(0, np.zeros((2, 3)), [0, 1], ids=[1, 1])


def test_overwrite_starts_a_run_afresh(tmp_path) -> None:
    import nbviz

    with nbviz.Run(tmp_path / "r", config={"lr": 1}) as run:
        run.log(5, train_loss=1.0)
    with pytest.raises(ValueError, match="already logged at step 5"):
        with nbviz.Run(tmp_path / "r") as run:
            run.log(0, train_loss=2.0)
    with nbviz.Run(tmp_path / "r", overwrite=True) as run:
        run.log(0, train_loss=2.0)
        assert run.config == {}
        assert run.scalars()["step"].tolist() == [0]


def test_a_binary_models_single_logit_is_read_as_two_classes(tmp_path):
    torch.manual_seed(0)
    z = torch.randn(20, 1) * 3
    y = torch.randint(0, 2, (20,))
    model = torch.nn.Linear(5, 1)
    x = torch.randn(20, 5)
    with nbviz.Run(tmp_path / "run") as run:
        run.log_predictions(0, z, y)
        squeezed = torch.nn.Sequential(model, torch.nn.Flatten(0))  # (N,) as BCE loops do
        metrics = run.evaluate(1, squeezed, [(x, y)], split="test", samples=False)
        with pytest.raises(ValueError, match="label 2 with one logit per sample"):
            run.log_predictions(2, z, torch.full((20,), 2))
        preds = run.predictions(split="val")
    bce = torch.nn.functional.binary_cross_entropy_with_logits(z[:, 0], y.float(), reduction="none")
    sigmoid = torch.sigmoid(z[:, 0])
    np.testing.assert_allclose(preds["loss"], bce.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(preds["pred"], (z[:, 0] > 0).long().numpy())
    np.testing.assert_allclose(
        preds["confidence"], torch.maximum(sigmoid, 1 - sigmoid).numpy(), rtol=1e-5
    )
    with torch.no_grad():
        logit = model(x)[:, 0]
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logit, y.float())
    assert metrics["test_loss"] == pytest.approx(float(expected), rel=1e-5)
    accuracy = float(((logit > 0).long() == y).float().mean())
    assert metrics["test_accuracy"] == pytest.approx(accuracy)


def test_a_table_of_any_columns_is_logged_row_by_row_as_text(tmp_path):
    import pandas as pd

    table = pd.DataFrame(
        {"age": [31, 58], "city": ["Lyon", "<b>Oslo</b>"], "bmi": [22.5, 0.1 + 0.2]}
    )
    with nbviz.Run(tmp_path / "run") as run:
        run.log_samples(table, labels=[0, 1], ids=[10, 11])
        run.log_samples([{"word": "cat"}, {"word": "dog", "n": 2}], ids=[0, 1], split="dicts")
        with pytest.raises(ValueError, match="a table's rows are text samples, not kind='image'"):
            run.log_samples(table, ids=[10, 11], split="bad", kind="image")
        rows = run.samples(split="val")
        dicts = run.samples(split="dicts")
    assert list(rows["kind"]) == ["text", "text"]
    assert list(rows["text"]) == [
        "age: 31\ncity: Lyon\nbmi: 22.5",
        "age: 58\ncity: <b>Oslo</b>\nbmi: 0.3",
    ]
    assert list(dicts["text"]) == ["word: cat", "word: dog\nn: 2"]
