"""Bad arguments are refused at the call, naming the argument and the value; none lost later."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import nbviz
from nbviz.arguments import MAX_STEP


@pytest.fixture()
def run(tmp_path: Path):
    with nbviz.Run(tmp_path / "run") as r:
        yield r


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


BIG_STEPS = [2**53, 2**63, 2**64, np.uint64(2**63)]


@pytest.mark.parametrize("step", BIG_STEPS)
def test_steps_beyond_2_53_minus_1_are_refused_at_every_write_call(run, step) -> None:
    limit = r"step must be at most 2\*\*53 - 1 = 9,007,199,254,740,991 \(the views draw steps"
    logits, labels = np.eye(3), [0, 1, 2]
    model = _model()
    loader = [(torch.randn(3, 4), torch.tensor([0, 1, 2]))]
    calls = {
        "log": lambda: run.log(step, loss=1.0),
        "log_predictions": lambda: run.log_predictions(step, logits, labels),
        "log_embeddings": lambda: run.log_embeddings(step, np.ones((3, 2))),
        "evaluate": lambda: run.evaluate(step, model, loader),
        "capture": lambda: run.capture(model, torch.randn(4), 0, step=step),
        "profile": lambda: run.profile(model, lambda: model(torch.randn(2, 4)), step=step),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"{name}: {limit}.*got {int(step)}"):
            call()
    with pytest.raises(ValueError, match=r"watch: first_step must be at most 2\*\*53 - 1"):
        run.watch(model, first_step=step)
    run.log(MAX_STEP, loss=2.0)  # the limit itself is a step
    run.flush()
    assert run.scalars()["step"].tolist() == [MAX_STEP]


def test_steps_that_are_not_integers_say_what_they_got(run) -> None:
    for step in (1.5, "3", None, True):
        with pytest.raises(TypeError, match=f"log: step must be an integer, got {step!r}"):
            run.log(step, loss=1.0)
    with pytest.raises(ValueError, match="log: step must be >= 0, got -1"):
        run.log(-1, loss=1.0)


LONE = "loss\ud800"


def test_lone_surrogates_are_refused_where_they_enter(run) -> None:
    lone = r"holds '\\ud800' at index 4, a lone surrogate that cannot be stored as UTF-8"
    with pytest.raises(ValueError, match=f"log: scalar name 'loss\\\\ud800' {lone}"):
        run.log(0, **{LONE: 1.0})
    with pytest.raises(ValueError, match=f"log_predictions: split 'loss\\\\ud800' {lone}"):
        run.log_predictions(0, np.eye(2), [0, 1], split=LONE)
    with pytest.raises(ValueError, match=f"log_embeddings: layer 'loss\\\\ud800' {lone}"):
        run.log_embeddings(0, np.ones((2, 2)), layer=LONE)
    with pytest.raises(ValueError, match=f"log_samples: data\\[1\\] 'loss\\\\ud800' {lone}"):
        run.log_samples(["ok", LONE])
    pandas = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="log_samples: a column name 'loss\\\\ud800' holds"):
        run.log_samples(pandas.DataFrame({LONE: [1, 2]}))
    with pytest.raises(ValueError, match="log_samples: row 1 .* holds"):
        run.log_samples([{"a": "x"}, {"a": LONE}])
    with pytest.raises(ValueError, match="class_names: class_names\\[1\\] 'loss\\\\ud800' holds"):
        run.log_samples(["a", "b"], labels=[0, 1], class_names=["cat", LONE])
    model = _model()
    model.add_module(LONE, nn.Identity())
    with pytest.raises(ValueError, match="watch: a module name of the model 'loss\\\\ud800' holds"):
        run.watch(model)
    run.flush()
    assert run.scalars().empty and run.splits("samples") == []


def test_lone_surrogates_in_config_or_a_name_are_refused_when_the_run_is_made(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match=r"config: a key of config '\\ud800' holds"):
        nbviz.Run(tmp_path / "a", config={"\ud800": 1})
    with pytest.raises(ValueError, match=r"config: config\['opt'\]\[0\] 'x\\udfff' holds"):
        nbviz.Run(tmp_path / "b", config={"opt": ["x\udfff"]})
    with pytest.raises(ValueError, match="Run: name 'r\\\\ud800' holds"):
        nbviz.Run(tmp_path / "c", name="r\ud800")
    with pytest.raises(ValueError, match="class_names\\[0\\]"):
        nbviz.Run(tmp_path / "d", class_names=["\ud800"])


def test_a_second_log_predictions_at_a_step_is_refused_or_replaces_the_first_whole(run) -> None:
    run.log_predictions(0, np.eye(3)[[0, 1, 2, 0]], [0, 1, 2, 0])
    with pytest.raises(
        ValueError, match=r"log_predictions: 'val' predictions are already recorded at step 0; "
    ):
        run.log_predictions(0, np.eye(3)[[2, 2]], [2, 2])
    run.log_predictions(0, np.eye(3)[[2, 2]], [2, 2], ids=[7, 8], overwrite=True)
    run.log_predictions(0, np.eye(3)[[1]], [1], split="test")  # another split is another table
    frame = run.predictions(0)
    assert frame["id"].tolist() == [7, 8] and frame["pred"].tolist() == [2, 2]
    ids, probs = run.probabilities(0)
    assert ids.tolist() == [7, 8] and probs.shape == (2, 3)
    assert run.predictions(0, split="test")["id"].tolist() == [0]


def test_evaluating_again_at_a_step_replaces_the_evaluation(run) -> None:
    model = _model()
    first = [(torch.randn(4, 4), torch.tensor([0, 1, 2, 0]))]
    second = [(torch.randn(2, 4), torch.tensor([1, 1]), torch.tensor([10, 11]))]
    run.evaluate(0, model, first)
    run.evaluate(0, model, second, samples=False)
    assert run.predictions(0)["id"].tolist() == [10, 11]
    assert run.probabilities(0)[0].tolist() == [10, 11]


@pytest.mark.parametrize(
    ("preds", "message"),
    [
        (np.array([-1, 1]), "predicted classes must be class indices >= 0, got -1"),
        (np.array([np.inf, 1.0]), "predicted classes must be finite class indices, got inf"),
        (np.array([np.nan, 1.0]), "predicted classes must be finite class indices, got nan"),
        (np.array([0.5, 1.0]), "must hold predicted class indices, got 0.5"),
        (np.array([2**40, 1]), "predicted classes must be class indices at most 2,147,483,647"),
        (np.array([1e20, 1.0]), "predicted classes must be at most 2,147,483,647, got 1e\\+20"),
    ],
)
def test_1d_predicted_classes_are_checked_as_class_indices(run, preds, message) -> None:
    with pytest.raises((ValueError, TypeError), match=f"log_predictions: .*{message}"):
        run.log_predictions(0, preds, [0, 1])


def test_1d_predicted_classes_beyond_the_class_names_are_refused(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "run", class_names=["a", "b"]) as run:
        with pytest.raises(ValueError, match=r"predicted class 5 is out of range for 2 classes"):
            run.log_predictions(0, np.array([5, 1]), [0, 1])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda r: r.log_predictions(0, np.zeros((2, 0)), [0, 1]),
            ValueError,
            r"log_predictions: logits of shape \(2, 0\) have no classes",
        ),
        (
            lambda r: r.log_predictions(0, np.zeros((0, 3)), []),
            ValueError,
            r"log_predictions: logits_or_preds holds no samples \(shape \(0, 3\)\)",
        ),
        (
            lambda r: r.log_samples(np.zeros((2, 0, 4))),
            ValueError,
            r"log_samples: images of shape \(2, 0, 4\) are empty",
        ),
        (
            lambda r: r.log_embeddings(0, np.zeros((0, 3, 4))),
            ValueError,
            r"log_embeddings: features of shape \(0, 3, 4\) are empty",
        ),
        (
            lambda r: r.log_embeddings(0, np.full((2, 2), 1e300)),
            ValueError,
            r"log_embeddings: features hold 1e\+300, beyond float32's range",
        ),
        (
            lambda r: r.log(0, big=10**400),
            ValueError,
            r"log: big is an integer of 1329 bits, too large for a float64",
        ),
        (
            lambda r: r.log_predictions(0, np.eye(2), [1e20, 0]),
            ValueError,
            r"log_predictions: labels must be at most 2,147,483,647, got 1e\+20",
        ),
        (
            lambda r: r.log_predictions(0, np.eye(2), [np.inf, 0]),
            ValueError,
            r"log_predictions: labels must be finite class indices, got inf",
        ),
        (
            lambda r: r.log_predictions(0, np.eye(2), [0, 1], ids=np.array([2**63, 1], "u8")),
            ValueError,
            r"log_predictions: ids must be at most 2\*\*53 - 1 = 9,007,199,254,740,991, got "
            r"9223372036854775808",
        ),
        (
            lambda r: r.log_predictions(0, np.eye(2), [0, 1], ids=[2**53, 1]),
            ValueError,
            r"ids must be at most 2\*\*53 - 1 .*\(ids reach the browser as float64",
        ),
        (
            lambda r: r.watch(_model(), unknown=1),
            TypeError,
            r"watch: unknown option unknown; watch takes attention, bins, every, first_step",
        ),
    ],
)
def test_bad_values_get_messages_that_name_the_argument_and_the_value(
    run, call, error, message
) -> None:
    with pytest.raises(error, match=message):
        call(run)
    run.flush()
    assert run.scalars().empty


@pytest.mark.parametrize(
    ("loader", "message"),
    [
        (
            [(torch.randn(2, 4), torch.tensor([float("inf"), 1.0]))],
            "evaluate: labels must be finite class indices, got inf",
        ),
        (
            [(torch.randn(2, 4), torch.tensor([0, 1, 2]))],
            "evaluate: batch 0 has 3 labels but the model gave 2 rows of logits",
        ),
        (
            [(torch.randn(2, 4), torch.tensor([0, 1]), torch.tensor([5]))],
            "evaluate: batch 0 has 1 ids for 2 samples",
        ),
        (
            [(torch.randn(0, 4), torch.zeros(0, dtype=torch.long))],
            r"evaluate: the loader yielded no samples \(no batches, or only empty ones\)",
        ),
        (
            [(torch.randn(2, 4), torch.tensor([-1, 1]))],
            "evaluate: labels must be class indices >= 0, got -1",
        ),
    ],
)
def test_evaluate_checks_the_labels_log_predictions_checks(run, loader, message) -> None:
    with pytest.raises(ValueError, match=message):
        run.evaluate(0, _model(), loader)
    assert run.prediction_steps().tolist() == []


def test_evaluate_skips_empty_batches(run) -> None:
    loader = [
        (torch.randn(0, 4), torch.zeros(0, dtype=torch.long)),
        (torch.randn(2, 4), torch.tensor([0, 1])),
    ]
    run.evaluate(0, _model(), loader)
    assert run.predictions(0)["id"].tolist() == [0, 1]


def test_splits_given_an_array_names_it_rather_than_numpy_truth_values(run) -> None:
    with pytest.raises(ValueError, match=r"^splits: array\(\[1, 2\]\) is not a table with splits"):
        run.splits(np.array([1, 2]))
