"""One sample's activations: captured through hooks, stored by run.capture, read back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import nbviz
from nbviz.demo import digits_cnn
from nbviz.probes.capture import MAX_MAP_SIDE, MAX_MAPS, capture_sample


def reference_outputs(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every leaf module's output for the batch ``x``, by plain forward hooks."""
    seen: dict[str, torch.Tensor] = {}
    handles = [
        m.register_forward_hook(lambda mod, a, o, n=name: seen.__setitem__(n, o.detach().clone()))
        for name, m in model.named_modules()
        if name and not list(m.children())
    ]
    model.eval()
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    return seen


def test_a_capture_holds_each_layer_in_forward_order_and_leaves_the_model_as_it_was() -> None:
    torch.manual_seed(0)
    model = digits_cnn()
    model.train()
    x = torch.randn(1, 8, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        expected_out = model.eval()(x[None])[0]
    model.train()
    layers, out = capture_sample(model, x)
    assert [a.name for a in layers] == ["0", "1", "2", "3", "4", "6", "7", "8"]  # no Flatten
    assert model.training and all(m.training for m in model.modules())
    assert all(not m._forward_hooks for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert out is not None and torch.equal(out, expected_out)
    ref = reference_outputs(model, x[None])
    for a in layers:
        r = ref[a.name][0]
        assert a.shape == tuple(r.shape)
        assert a.mean == pytest.approx(float(r.mean()), rel=1e-5, abs=1e-6)
        assert a.zero_frac == pytest.approx(float((r == 0).float().mean()))
        per_unit = r.reshape(r.shape[0], -1).mean(dim=1) if r.dim() > 1 else r
        np.testing.assert_allclose(a.units, per_unit.numpy(), rtol=1e-5, atol=1e-6)
        if r.dim() == 3:  # conv outputs: the feature maps themselves
            np.testing.assert_array_equal(a.maps, r.numpy())
        else:
            assert a.maps is None
    model.eval()
    capture_sample(model, x)
    assert not model.training  # an eval-mode model stays in eval mode


def test_large_maps_are_pooled_and_many_channels_cut_with_a_note() -> None:
    model = nn.Sequential(nn.Conv2d(3, MAX_MAPS + 8, 3, padding=1), nn.ReLU())
    layers, _ = capture_sample(model, torch.randn(3, 2 * MAX_MAP_SIDE, 2 * MAX_MAP_SIDE))
    conv = layers[0]
    assert conv.maps.shape == (MAX_MAPS, MAX_MAP_SIDE, MAX_MAP_SIDE)
    assert conv.n_units == MAX_MAPS + 8 and len(conv.units) == MAX_MAPS + 8
    assert "pooled from 64x64" in conv.note and f"first {MAX_MAPS} of {MAX_MAPS + 8}" in conv.note


class TupleOut(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, str]:
        return x * 2, "note"


class Nothing(nn.Module):
    def forward(self, x: torch.Tensor) -> None:
        return None


def test_modules_with_tuple_or_no_tensor_outputs_are_handled() -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pair = TupleOut()
            self.quiet = Nothing()
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y, _ = self.pair(x)
            self.quiet(y)
            return self.fc(y)

    layers, out = capture_sample(Model(), np.ones(4, dtype=np.float32))
    assert [a.name for a in layers] == ["pair", "fc"]
    np.testing.assert_allclose(layers[0].units, np.full(4, 2.0))
    assert out.shape == (2,)
    with pytest.raises(TypeError, match="the sample must be a tensor"):
        capture_sample(Model(), "pixels")
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        capture_sample(lambda x: x, torch.ones(4))


def test_run_capture_stores_what_the_capture_saw_and_open_run_reads_it(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = digits_cnn()
    x = torch.randn(1, 8, 8)
    run = nbviz.Run(tmp_path / "run")
    run.log(0, train_loss=1.0)
    run.log(7, train_loss=0.5)
    frame = run.capture(model, x, id=12)
    assert (frame["step"] == 7).all()  # the latest logged step
    run.capture(model, x * 0, id=12, step=3)
    run.capture(model, x, id=4, split="test", step=3)
    run.close()
    view = nbviz.open_run(tmp_path / "run")
    assert view.captured_ids("val").tolist() == [12]
    assert view.capture_steps(12).tolist() == [3, 7]
    stored = view.captures(12)
    layers, _ = capture_sample(model, x)
    assert stored["layer"].tolist() == [a.name for a in layers]
    assert stored["position"].tolist() == list(range(len(layers)))
    for a, row in zip(layers, stored.to_dict("records")):
        assert row["type"] == a.type and tuple(row["shape"]) == a.shape
        assert row["mean"] == pytest.approx(a.mean) and row["n_units"] == a.n_units
        np.testing.assert_array_equal(row["units"], a.units)
        if a.maps is None:
            assert row["maps"] is None
        else:  # float16 on disk
            np.testing.assert_allclose(row["maps"], a.maps, rtol=1e-3, atol=1e-3)
    assert (view.captures(12, step=5)["step"] == 3).all()  # the latest at or before
    assert len(view.captures(12, step=2)) == 0 and len(view.captures(99)) == 0
    assert view.captured_ids("test").tolist() == [4]
    view.close()


def test_evaluate_records_the_captures_of_the_ids_asked_for(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = digits_cnn()
    x, y = torch.randn(20, 1, 8, 8), torch.arange(20) % 10
    run = nbviz.Run(tmp_path / "run", class_names=[str(i) for i in range(10)])
    run.evaluate(5, model, [(x[:10], y[:10]), (x[10:], y[10:])], capture_ids=[3, 15])
    assert run.captured_ids().tolist() == [3, 15]
    direct, _ = capture_sample(model, x[15])
    np.testing.assert_array_equal(run.captures(15)["units"].iloc[-1], direct[-1].units)
    assert run.capture_steps(15).tolist() == [5]
    with pytest.raises(ValueError, match=r"capture_ids \[99\] are not among the 20 inputs"):
        run.evaluate(6, model, [(x, y)], capture_ids=[99])
    with pytest.raises(TypeError, match="id must be an int"):
        run.capture(model, x[0], id="first")
    run.close()


def test_a_schema_1_run_gains_the_captures_table_when_opened_for_writing(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "old")
    run.log(0, loss=1.0)
    run.close()
    conn = sqlite3.connect(tmp_path / "old" / "run.sqlite")
    conn.execute("DROP TABLE captures")
    conn.execute("DROP TABLE outputs")  # added by schema 3
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(1),))
    conn.commit()
    conn.close()
    with pytest.raises(nbviz.store.SchemaError, match="open it once for writing"):
        nbviz.open_run(tmp_path / "old")
    run = nbviz.Run(tmp_path / "old")
    with pytest.raises(ValueError, match="no module of the Linear"):
        run.capture(nn.Linear(3, 2), torch.ones(3), id=0)
    run.capture(nn.Sequential(nn.Linear(3, 2)), torch.ones(3), id=0)
    assert run.captured_ids().tolist() == [0]
    assert run.scalars()["value"].tolist() == [1.0]
    run.close()
