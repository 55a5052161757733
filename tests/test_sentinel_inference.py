"""The sentinel skips reads whose answer it knows, and still names the first bad layer exactly."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from training import fit, random_batches

import nbviz
from nbviz.probes import finite

BAD_STEP = 7


def train(model: nn.Module, run: nbviz.Run, steps: int = 12, **watch) -> None:
    run.watch(model, every=10, **watch)
    fit(run, model, random_batches(steps))


def first_events(run: nbviz.Run, signal: str) -> dict[str, int]:
    """Layer -> first step reported non-finite, for one signal."""
    events = run.events("nonfinite")
    events = events[events["signal"] == signal]
    return {row.layer: int(row.step) for row in events.itertuples()}


def at_bad_step(bad: dict[str, int]) -> set[str]:
    """The layers reported at BAD_STEP; none may be reported before it.

    (After it the NaN spreads through the update into every weight.)
    """
    assert min(bad.values(), default=BAD_STEP) >= BAD_STEP, bad
    return {layer for layer, step in bad.items() if step == BAD_STEP}


def origin(run: nbviz.Run) -> str:
    events = run.events("nonfinite")
    events = events[events["signal"] == "activation"]

    def order(row) -> tuple[int, int]:
        detail = row.detail if isinstance(row.detail, dict) else json.loads(row.detail)
        return int(row.step), detail["order"]

    return min(events.itertuples(), key=order).layer


class Counter:
    """Counts the forwards of the model it is attached to (the step in these loops)."""

    def __init__(self) -> None:
        self.calls = 0

    def bad(self) -> bool:
        return self.calls == BAD_STEP + 1


class AddInPlace(nn.Module):
    """fc -> (in-place add, Inf once) -> ReLU: the ReLU's input changed after fc's check."""

    def __init__(self, counter: Counter) -> None:
        super().__init__()
        self.counter = counter
        self.fc = nn.Linear(12, 16)
        self.act = nn.ReLU()
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        self.counter.calls += 1
        h = self.fc(x)
        if self.counter.bad():
            h.add_(float("inf"))
        return self.head(self.act(h))


def test_a_relu_whose_input_changed_in_place_is_checked_itself(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        train(AddInPlace(Counter()), run)
        # fc's own output was finite: the Inf came in between
        assert at_bad_step(first_events(run, "activation")) == {"act", "head"}
        assert origin(run) == "act"


class Poison(nn.Module):
    def __init__(self, counter: Counter) -> None:
        super().__init__()
        self.counter = counter

    def forward(self, x):
        self.counter.calls += 1
        x = x.clone()
        if self.counter.bad():
            x[0, 0] = float("nan")
        return x


@pytest.mark.parametrize("inplace", [False, True])
def test_a_nan_is_named_where_it_appeared_and_followed_through_relu_chains(tmp_path, inplace):
    model = nn.Sequential(
        nn.Linear(12, 16),
        nn.ReLU(inplace=inplace),
        Poison(Counter()),
        nn.ReLU(inplace=inplace),
        nn.MaxPool1d(2),
        nn.Linear(8, 5),
    )
    with nbviz.Run(tmp_path / "run") as run:
        train(model, run, layers=["0", "1", "2", "3", "4", "5"])
        assert at_bad_step(first_events(run, "activation")) == {"2", "3", "4", "5"}
        assert origin(run) == "2"


class NanGradOnce(torch.autograd.Function):
    """Identity forward; a NaN in the gradient once (the backward of a broken op)."""

    @staticmethod
    def forward(ctx, x, bad: bool):
        ctx.bad = bad
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if ctx.bad:
            grad = grad.clone()
            grad[0, 0] = float("nan")
        return grad, None


class BadBackward(nn.Module):
    def __init__(self, counter: Counter) -> None:
        super().__init__()
        self.counter = counter
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        self.counter.calls += 1
        return NanGradOnce.apply(self.fc2(torch.relu(self.fc1(x))), self.counter.bad())


def test_a_nan_output_gradient_is_reported_on_the_layer_weights_at_its_step(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        train(BadBackward(Counter()), run)
        assert {"fc2.weight", "fc2.bias"} <= at_bad_step(first_events(run, "gradient"))
        # the forward of that step was finite
        assert BAD_STEP not in first_events(run, "activation").values()


def test_a_weight_gradient_changed_by_a_hook_is_checked_itself(tmp_path):
    counter = Counter()  # counts backward passes here
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))

    def spoil(grad):
        counter.calls += 1
        if counter.bad():
            grad = grad.clone()
            grad[0, 0] = float("inf")
        return grad

    model[0].weight.register_hook(spoil)
    with nbviz.Run(tmp_path / "run") as run:
        train(model, run)
        # the bias was not touched
        assert at_bad_step(first_events(run, "gradient")) == {"0.weight"}


class SelfAttention(nn.Module):
    """The 12 features as 3 tokens of 4, through ``MultiheadAttention`` (its packed
    input projection and ``out_proj``)."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True)

    def forward(self, x):
        t = x.view(x.shape[0], 3, 4)
        return self.attn(t, t, t, need_weights=False)[0].reshape(x.shape[0], 12)


def _norm_layers() -> dict[str, nn.Module]:
    return {
        "LayerNorm": nn.LayerNorm(12),
        "BatchNorm1d": nn.BatchNorm1d(12),
        "GroupNorm": nn.GroupNorm(3, 12),
        "MultiheadAttention": SelfAttention(),
    }


class NanGradAfter(nn.Module):
    """``layer``, then a NaN in the gradient of its output once, then a head."""

    def __init__(self, layer: nn.Module, counter: Counter) -> None:
        super().__init__()
        self.counter = counter
        self.layer = layer
        self.head = nn.Linear(12, 5)

    def forward(self, x):
        self.counter.calls += 1
        return self.head(NanGradOnce.apply(self.layer(x), self.counter.bad()))


@pytest.mark.parametrize("kind", list(_norm_layers()))
def test_a_nan_output_gradient_is_reported_on_a_norms_scale_and_an_attentions_projection(
    kind, tmp_path
):
    # their weight slots take the bias gradient's check: reported at the same step
    model = NanGradAfter(_norm_layers()[kind], Counter())
    with nbviz.Run(tmp_path / "run") as run:
        train(model, run)
        bad = at_bad_step(first_events(run, "gradient"))
        if kind == "MultiheadAttention":
            expected = {"layer.attn.in_proj_weight", "layer.attn.in_proj_bias"}
            expected |= {"layer.attn.out_proj.weight", "layer.attn.out_proj.bias"}
        else:
            expected = {"layer.weight", "layer.bias"}
        assert expected <= bad
        assert BAD_STEP not in first_events(run, "activation").values()


def _reads_per_step(model: nn.Module, steps: int, autocast: bool, monkeypatch, tmp_path) -> int:
    calls = []
    real = finite.checksum
    monkeypatch.setattr(finite, "checksum", lambda x: calls.append(1) or real(x))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with nbviz.Run(tmp_path / f"run{autocast}") as run:
        run.watch(model, every=1000)
        for step, (x, y) in enumerate(random_batches(steps + 1)):
            if step == 1:
                calls.clear()  # step 0 is a capture
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    assert len(calls) % steps == 0, calls
    return len(calls) // steps


@pytest.mark.parametrize("autocast", [False, True])
def test_relus_and_weight_gradients_take_the_check_that_already_tells(
    autocast, monkeypatch, tmp_path
):
    model = nn.Sequential(
        nn.Linear(12, 16),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Linear(8, 16),
        nn.Tanh(),
        nn.Linear(16, 5),
    )
    reads = _reads_per_step(model, 4, autocast, monkeypatch, tmp_path)
    # three Linear outputs (ReLU, pooling and tanh take the check before them), then
    # three bias gradients (or all six parameter gradients under autocast, where a
    # weight gradient may overflow on its own)
    assert reads == (3 + 6 if autocast else 3 + 3)


@pytest.mark.parametrize("autocast", [False, True])
def test_norm_scales_and_attention_projections_take_their_bias_gradients_check(
    autocast, monkeypatch, tmp_path
):
    model = nn.Sequential(
        SelfAttention(), nn.LayerNorm(12), nn.BatchNorm1d(12), nn.GroupNorm(3, 12)
    )
    reads = _reads_per_step(model, 4, autocast, monkeypatch, tmp_path)
    # four outputs (the attention and the three norms), then five bias gradients
    # (in_proj, out_proj and the norms' shifts), or under autocast all ten parameter
    # gradients
    assert reads == (4 + 10 if autocast else 4 + 5)


def test_the_sentinel_keeps_each_slots_first_bad_step_whatever_the_layout_of_its_rows():
    from nbviz.probes.sentinel import ROWS, Sentinel

    nan, inf = float("nan"), float("inf")
    sentinel = Sentinel(4, torch.device("cpu"))
    steps = [
        # (counter, {slot: value}); a step may check other slots than the last one
        (1, {0: 1.0, 1: 2.0, 2: 3.0}),
        (2, {0: 1.0, 1: inf, 2: 3.0}),
        (3, {0: 1.0, 2: nan}),
        (4, {3: -inf, 0: 1.0}),
        (5, {0: nan, 1: nan, 2: nan, 3: nan}),
    ]
    for counter, values in steps:
        for slot, value in values.items():
            dtype = torch.float64 if slot == 3 else torch.float32
            sentinel.add(slot, torch.tensor(value, dtype=dtype))
        sentinel.commit(counter)
    assert sentinel.first_bad.tolist() == [5, 2, 3, 4]

    # rows of one layout, folded every ROWS steps and on reading: the first step stays
    uniform = Sentinel(3, torch.device("cpu"))
    for counter in range(1, 3 * ROWS + 2):
        bad = counter in (ROWS + 3, 2 * ROWS + 5)
        uniform.add_many([0, 2], [torch.tensor(0.0), torch.tensor(nan if bad else 1.0)])
        uniform.commit(counter)
        if counter == ROWS:
            assert uniform.first_bad.tolist() == [-1, -1, -1]
    assert uniform.first_bad.tolist() == [-1, -1, ROWS + 3]
    assert not uniform._rows  # nothing kept once read
