"""Probes record training without changing it, and clean up after themselves."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from torch import nn
from training import mlp, random_batches, sgd_step

import nbviz

# --------------------------------------------------------------------------- models


class TupleOut(nn.Module):
    """Returns (features, aux-dict) like many research models."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(12, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.head(h), {"hidden": h, "mask": h > 0}


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    index: torch.Tensor


class DataclassHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        y = self.fc(x)
        return Output(y, y.argmax(dim=1))


class SharedTwice(nn.Module):
    """One Linear applied twice per forward (weight sharing)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(12, 16)
        self.shared = nn.Linear(16, 16)
        self.act = nn.Tanh()
        self.out = nn.Linear(16, 5)

    def forward(self, x):
        h = self.act(self.inp(x))
        h = self.act(self.shared(h))
        h = self.act(self.shared(h))
        return self.out(h)


class LSTMClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(12, 16, batch_first=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        seq = x.reshape(x.shape[0], 3, 4).repeat(1, 1, 3)
        out, (h, c) = self.lstm(seq)
        return self.fc(out[:, -1])


class TransformerClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 16)
        self.enc = nn.TransformerEncoderLayer(
            16, 4, dim_feedforward=32, dropout=0.1, batch_first=True
        )
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        h = self.proj(x.reshape(x.shape[0], 3, 4))
        return self.fc(self.enc(h).mean(dim=1))


class DictOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(12, 16), nn.ReLU())
        self.heads = nn.ModuleDict({"a": nn.Linear(16, 5), "b": nn.Linear(16, 2)})
        self.none_module = NoneModule()

    def forward(self, x):
        h = self.trunk(x)
        self.none_module(h)
        return {"a": self.heads["a"](h), "b": self.heads["b"](h)}


class NoneModule(nn.Module):
    def forward(self, x):
        return None


def bn_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Unflatten(1, (1, 3, 4)),
        nn.Conv2d(1, 6, 3, padding=1),
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.Dropout(0.3),
        nn.Flatten(),
        nn.Linear(72, 5),
    )


MODELS = {
    "mlp": mlp,
    "cnn_batchnorm_dropout": bn_cnn,
    "tuple_output": TupleOut,
    "dict_output_and_none": DictOut,
    "dataclass_output": lambda: nn.Sequential(nn.Linear(12, 16), nn.ReLU(), DataclassHead()),
    "shared_module": SharedTwice,
    "lstm": LSTMClassifier,
    "transformer": TransformerClassifier,
}


def logits_of(out):
    if isinstance(out, tuple):
        return out[0]
    if isinstance(out, dict):
        return out["a"] + out["b"].sum(dim=1, keepdim=True)
    if isinstance(out, Output):
        return out.logits
    return out


def train(model, n_steps, run=None, seed=0, **watch):
    """Train ``model`` for ``n_steps``; returns per-step outputs and parameter gradients."""
    probe = run.watch(model, **watch) if run is not None else None
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    outputs, grads = [], []
    for step, (x, y) in enumerate(random_batches(n_steps, seed)):
        torch.manual_seed(1000 + step)  # dropout masks identical with and without a probe
        opt.zero_grad()
        out = logits_of(model(x))
        loss = nn.functional.cross_entropy(out, y)
        loss.backward()
        outputs.append(out.detach().clone())
        grads.append([p.grad.detach().clone() for p in model.parameters() if p.grad is not None])
        opt.step()
        if run is not None:
            run.log(step, train_loss=loss)
    if probe is not None:
        probe.close()
    return outputs, grads


# ------------------------------------------------------------------------ behaviour


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_probe_leaves_outputs_and_gradients_bitwise_equal(kind, tmp_path):
    torch.manual_seed(0)
    plain = MODELS[kind]()
    watched = copy.deepcopy(plain)
    out_a, grad_a = train(plain, 6)
    with nbviz.Run(tmp_path / "run") as run:
        out_b, grad_b = train(watched, 6, run, every=1)
        recorded = run.steps("activation")
    assert all(torch.equal(a, b) for a, b in zip(out_a, out_b, strict=True))
    for ga, gb in zip(grad_a, grad_b, strict=True):
        assert len(ga) == len(gb) and all(torch.equal(a, b) for a, b in zip(ga, gb, strict=True))
    for pa, pb in zip(plain.state_dict().values(), watched.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    assert list(recorded) == list(range(6))


def _hook_count(model: nn.Module) -> int:
    total = 0
    for m in model.modules():
        for attr in (
            "_forward_hooks",
            "_forward_pre_hooks",
            "_backward_hooks",
            "_backward_pre_hooks",
            "_forward_hooks_with_kwargs",
            "_forward_pre_hooks_with_kwargs",
        ):
            total += len(getattr(m, attr, {}))
    return total


@pytest.mark.parametrize("kind", ["mlp", "transformer", "dict_output_and_none"])
def test_close_removes_every_hook(kind, tmp_path):
    model = MODELS[kind]()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = _hook_count(model)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=2, optimizer=opt)
        assert _hook_count(model) > before
        train_steps = 0
        for x, y in random_batches(3):
            opt.zero_grad()
            nn.functional.cross_entropy(logits_of(model(x)), y).backward()
            opt.step()
            train_steps += 1
        probe.close()
        probe.close()  # idempotent
        assert _hook_count(model) == before
        assert len(opt._optimizer_step_post_hooks) == 0
        # a closed probe can be replaced by a new one on the same model
        run.watch(model).close()


def test_a_copy_of_a_watched_model_is_not_watched(tmp_path):
    """deepcopy (an EMA or best-model snapshot) and torch.save(model) work while watched."""
    import io

    torch.manual_seed(0)
    model = mlp()
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1)
        train(model, 2)
        snapshot = copy.deepcopy(model)
        saved = io.BytesIO()
        torch.save(model, saved)
        saved.seek(0)
        loaded = torch.load(saved, weights_only=False)
        seen = probe.steps_seen
        for copied in (snapshot, loaded):
            train(copied, 3)  # trains the copies, not the watched model
            x = torch.randn(4, 12)
            assert torch.equal(copied(x), copied(x))
        assert probe.steps_seen == seen
        train(model, 1)
        assert probe.steps_seen == seen + 1


def test_with_block_closes_the_probe(tmp_path):
    model = mlp()
    with nbviz.Run(tmp_path / "run") as run:
        with run.watch(model) as probe:
            assert _hook_count(model) > 0
        assert probe.closed and _hook_count(model) == 0


def test_recorded_statistics_match_the_tensors(tmp_path, read_path):
    torch.manual_seed(0)
    model = mlp()
    captured = {}
    model[1].register_forward_hook(lambda m, i, o: captured.__setitem__("relu", o.detach().clone()))
    with nbviz.Run(tmp_path / "run") as run:
        train(model, 1, run, every=1)
        run.flush()
        act = run.stats("activation", layer="1", steps=0).iloc[0]
        weight = run.stats("weight", layer="0.weight", steps=0).iloc[0]
        edges, counts = run.histogram("1", "activation", 0)
        _, zero_frac = run.unit_stats("1", "zero_frac")
    x = captured["relu"].double().numpy()
    assert act["count"] == x.size
    assert act["mean"] == pytest.approx(x.mean(), rel=1e-5)
    assert act["std"] == pytest.approx(x.std(), rel=1e-4)
    assert act["min"] == pytest.approx(x.min()) and act["max"] == pytest.approx(x.max(), rel=1e-6)
    assert act["zero_frac"] == pytest.approx((x == 0).mean())
    assert act["norm"] == pytest.approx(np.sqrt((x**2).sum()), rel=1e-5)
    assert act["nonfinite"] == 0
    np.testing.assert_allclose(zero_frac[0], (x == 0).mean(axis=0), rtol=1e-6)
    assert counts.sum() == x.size  # small tensors are binned whole
    assert edges[0] == 0.0  # a non-negative signal's histogram starts at zero
    # weights after the step, and their distance from the initial values
    assert weight["count"] == 12 * 32
    assert weight["rel"] > 0


def test_module_used_twice_is_aggregated_over_its_calls(tmp_path):
    model = SharedTwice()
    with nbviz.Run(tmp_path / "run") as run:
        train(model, 2, run, every=1)
        run.flush()
        shared = run.stats("activation", layer="shared")
        once = run.stats("activation", layer="inp")
    assert (shared["count"] == 2 * once["count"]).all()


def test_outputs_without_float_tensors_are_skipped_with_a_note(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        train(DictOut(), 2, run, every=1)
        run.flush()
        layers = run.layers().set_index("name")
        recorded = run.recorded_layers("activation")
    assert "skipped" in layers.loc["none_module", "note"]
    assert "none_module" not in recorded
    assert {"heads.a", "heads.b", "trunk.0"} <= set(recorded)


def test_memory_stays_flat_over_2000_steps(tmp_path):
    import gc
    import resource

    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = next(random_batches(1))

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20

    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=10)
        marks = {}
        for step in range(2000):
            run.log(step, train_loss=sgd_step(model, opt, x, y))
            if step in (499, 1999):
                run.flush()
                gc.collect()
                marks[step] = rss_mb()
        assert len(probe._counter_tags) <= 2
        assert not probe._sentinel._values
        assert len(run.steps("activation")) == 200
    assert marks[1999] - marks[499] < 20, marks


def test_a_rebuilt_model_takes_over_its_name_with_replace(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        old = mlp()  # still alive, as in a notebook's Out[...]
        first = run.watch(old, name="net")
        with pytest.raises(ValueError, match="under name='net'.*replace=True"):
            run.watch(mlp(), name="net")
        rebuilt = mlp()
        with pytest.raises(ValueError, match="every must be a positive integer"):
            run.watch(rebuilt, name="net", replace=True, every=0)
        assert not first.closed  # a refused watch leaves the other probe as it was
        second = run.watch(rebuilt, name="net", replace=True)
        assert first.closed and not second.closed
        train(old, 1)  # no longer watched
        train(rebuilt, 2)
        run.flush()
        layers = set(run.stats("activation")["layer"])
        assert second.steps_seen == 2
    assert layers == {"net.0", "net.1", "net.2", "net.3", "net.4"}


def test_bad_watch_arguments_name_the_value(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        with pytest.raises(ValueError, match=r"pattern 'conv\*' matches no module.*Modules: 0, 1"):
            run.watch(mlp(), layers="conv*")
        with pytest.raises(ValueError, match="has no parameters"):
            run.watch(nn.ReLU())
        with pytest.raises(ValueError, match="every must be a positive integer, got 0"):
            run.watch(mlp(), every=0)
        with pytest.raises(ValueError, match="unknown signal 'weight_decay'"):
            run.watch(mlp(), signals=["weight_decay"])
        with pytest.raises(TypeError, match="expected a torch.nn.Module"):
            run.watch("model")
        lazy = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.Linear(4, 2))
        with pytest.raises(ValueError, match=r"parameters '0.weight', '0.bias' .* not initial"):
            run.watch(lazy)
        lazy(torch.randn(3, 7))  # one batch gives the lazy layer its shape
        run.watch(lazy).close()


def test_unusual_parameters_and_batches_are_recorded_as_such(tmp_path, read_path):
    """Sparse and complex gradients, empty parameters and empty batches: recorded or
    skipped with a note, never a crash."""

    class Unusual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(30, 4, sparse=True)
            self.rot = nn.Parameter(torch.randn(4, 4, dtype=torch.cfloat))
            self.nothing = nn.Parameter(torch.zeros(0))
            self.head = nn.Linear(4, 3)

        def forward(self, ids):
            x = self.emb(ids).mean(dim=1)
            return self.head((x.cfloat() @ self.rot.conj()).abs())  # a conjugate view

    torch.manual_seed(0)
    model = Unusual()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grads, rot_norms = {}, {}
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=3, hist_every=3)  # steps 1, 2, 4: the sentinel alone
        for step in range(5):
            batch = 0 if step in (2, 3) else 6  # empty batches: a capture step and another
            opt.zero_grad()
            loss = model(torch.randint(0, 30, (batch, 5))).sum()
            loss.backward()
            grads[step] = model.emb.weight.grad.to_dense().double().numpy()
            opt.step()
            rot_norms[step] = float(torch.linalg.vector_norm(model.rot.detach()))
            run.log(step, train_loss=loss)
        probe.close()
        run.flush()
        emb_grad = run.stats("gradient", layer="emb.weight")
        rot = run.stats("weight", layer="rot")
        head = run.stats("activation", layer="head")
        layers = set(run.stats("weight")["layer"])
    assert any("no elements not recorded: nothing" in n for n in probe.notes)
    assert "nothing" not in layers
    # the sparse gradient is measured as the dense one it stands for
    g = emb_grad[emb_grad["step"] == 0].iloc[0]
    assert g["count"] == 30 * 4
    assert g["zero_frac"] == pytest.approx((grads[0] == 0).mean())
    assert g["norm"] == pytest.approx(np.sqrt((grads[0] ** 2).sum()), rel=1e-5)
    # a complex weight: its real and imaginary parts, so its norm is the complex norm
    w = rot[rot["step"] == 3].iloc[0]
    assert w["count"] == 2 * 16
    assert w["norm"] == pytest.approx(rot_norms[3], rel=1e-5)
    # an empty batch has no activations to show; the steps around it do
    assert sorted(head["step"]) == [0]  # step 3 was captured, but its batch was empty
    assert sorted(rot["step"]) == [0, 3]  # weights are recorded all the same


def test_layer_patterns_take_globs_and_types(tmp_path):
    model = TransformerClassifier()
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, layers=["enc.linear*", nn.LayerNorm])
        names = [n for n, _ in probe.modules]
        probe.close()
    assert names == ["enc.linear1", "enc.linear2", "enc.norm1", "enc.norm2"]


def test_large_models_are_capped_with_a_note(tmp_path):
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(300)])
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, max_layers=50)
        assert len(probe.modules) == 50
        assert any("watching 50 of 300 modules" in n for n in probe.notes)
        probe.close()


def test_compiled_model_records_weights_and_parameter_gradients(tmp_path):
    torch.manual_seed(0)
    model = torch.compile(mlp(), backend="eager")
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step, (x, y) in enumerate(random_batches(3)):
            sgd_step(model, opt, x, y)
            run.log(step, train_loss=1.0)
        probe.close()
        assert "torch.compile" in " ".join(probe.notes)
        assert set(run.recorded_layers("weight")) == {
            "0.weight",
            "0.bias",
            "2.weight",
            "2.bias",
            "4.weight",
            "4.bias",
        }
        assert list(run.steps("gradient")) == [0, 1, 2]
        assert len(run.steps("activation")) == 0


def test_model_summary_is_in_the_run_meta(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        train(bn_cnn(), 1, run)
        run.flush()
        layers = run.layers().set_index("name")
    assert layers.loc["1", "type"] == "Conv2d"
    assert layers.loc["1", "params"] == 6 * 9 + 6
    assert layers.loc["1", "shape"] == [8, 6, 3, 4]
    assert not layers.loc["4", "watched"]  # Dropout is a pass-through
