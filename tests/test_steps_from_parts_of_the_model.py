"""A loop that trains the watched model without calling it: ``model.forward(x)``, or its
parts one by one (``model.encoder(x)`` then ``model.head(h)``, as a LightningModule's
``training_step`` calls ``self.net(x)``). The model's own hooks never run then; its direct
children mark the training forwards instead, so the run records what calling the model
records, step for step."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

import nbviz


class EncoderHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 16), nn.ReLU())
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


CALLS: dict[str, Callable[[EncoderHead, torch.Tensor], torch.Tensor]] = {
    "model(x)": lambda m, x: m(x),
    "model.forward(x)": lambda m, x: m.forward(x),
    "model.head(model.encoder(x))": lambda m, x: m.head(m.encoder(x)),
}


def record(path: Path, call: Callable[[EncoderHead, torch.Tensor], torch.Tensor]) -> pd.DataFrame:
    g = torch.Generator().manual_seed(1)
    model = EncoderHead()
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with nbviz.Run(path) as run:
        with run.watch(model, every=3):
            for step in range(7):
                x, y = torch.randn(16, 12, generator=g), torch.randint(0, 4, (16,), generator=g)
                with torch.no_grad():  # an evaluation between steps: not a training forward
                    model.eval()
                    call(model, x)
                    model.train()
                loss = nn.functional.cross_entropy(call(model, x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                run.log(step, train_loss=loss)
        run.flush()
        frames = [run.stats(s) for s in ("activation", "gradient", "weight", "update")]
    frame = pd.concat(frames)[["step", "signal", "layer", "count", "mean", "norm"]]
    return frame.sort_values(["step", "signal", "layer"]).reset_index(drop=True)


@pytest.mark.parametrize("call", ["model.forward(x)", "model.head(model.encoder(x))"])
def test_a_loop_that_calls_parts_of_the_model_records_what_calling_it_records(
    tmp_path: Path, call: str
) -> None:
    expected = record(tmp_path / "called", CALLS["model(x)"])
    got = record(tmp_path / "parts", CALLS[call])
    assert sorted(set(got["step"])) == [0, 3, 6]
    assert {"encoder.0", "encoder.2", "head"} <= set(got["layer"])
    pd.testing.assert_frame_equal(got, expected)


def test_a_part_called_deeper_than_the_models_children_is_said_not_recorded(
    tmp_path: Path,
) -> None:
    model = EncoderHead()
    x = torch.randn(8, 12)
    with nbviz.Run(tmp_path / "r") as run, run.watch(model, every=1) as probe:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model(x).sum().backward()  # the model, its children, evaluation: nothing to say
            model.forward(x).sum().backward()
            model.encoder(x).sum().backward()
            with torch.no_grad():
                model.encoder[0](x)
            model.eval()
            model.encoder[0](x)
            model.train()
            assert not caught and not probe.notes
            model.encoder[0](x).sum().backward()  # a grandchild alone: unseen
            model.encoder[2](torch.randn(8, 24)).sum().backward()
        said = [str(w.message) for w in caught]
        assert len(said) == 1 and len(probe.notes) == 1, said
        assert "'encoder.0' ran with gradients on and in train mode outside a call" in said[0]
        assert "call the model, or watch the module the loop calls" in probe.notes[0]
        run.flush()
        assert run.meta("probe")["notes"] == probe.notes  # kept in the run: nbviz info says it


def test_a_forward_of_a_part_cut_short_leaves_the_next_ones_recorded(tmp_path: Path) -> None:
    """An interrupted forward (an exception, Ctrl-C in a notebook) of a part the loop calls:
    the next call of that part begins afresh, and an evaluation in between is not taken
    for training."""
    model = EncoderHead()
    g = torch.Generator().manual_seed(2)
    stop = model.encoder[2].register_forward_hook(lambda *a: (_ for _ in ()).throw(KeyError()))
    with nbviz.Run(tmp_path / "r") as run, run.watch(model, every=1):
        with pytest.raises(KeyError):
            model.encoder(torch.randn(8, 12, generator=g))
        stop.remove()
        for step in range(3):
            with torch.no_grad():
                model.eval()
                model.encoder(100 + torch.randn(8, 12, generator=g))  # far off: would show
                model.train()
            model.head(model.encoder(torch.randn(8, 12, generator=g))).sum().backward()
            run.log(step, train_loss=0.0)
        run.flush()
        stats = run.stats("activation", layer="encoder.0")
    assert stats["step"].tolist() == [0, 1, 2]
    # step 0 pools the interrupted forward with its own, as for the model's own call
    assert stats["count"].tolist() == [2 * 8 * 24, 8 * 24, 8 * 24]
    assert (stats["max"] < 50).all()
