"""A stack of repeated blocks is watched by default: a GPT-style model's blocks, an
``nn.TransformerEncoder``'s layers and a ResNet-like stage record their outputs (the
stream between blocks), activations only, without changing the model or counting
anything twice."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from reference_models import GPT, EncoderClassifier, GPTConfig, next_token_loss, token_batch
from torch import nn
from torch.nn import functional as F
from training import lm_steps
from transformer_faults import CONFIG, ScaledBlock

import nbviz
from nbviz.analysis.checks.depth import feeds_normalisation
from nbviz.analysis.checks.model import layout
from nbviz.probes.select import DEFAULT_MAX_LAYERS, select_modules, stack_blocks
from nbviz.stacks import MIN_BLOCKS, block_index, stacks

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BLOCKS = [f"blocks.{i}" for i in range(CONFIG.blocks)]


def leaves_and_own_params(name: str, module: nn.Module) -> bool:
    """What the default selection watched before stacks: blocks left out."""
    return not list(module.children()) or any(True for _ in module.parameters(recurse=False))


# ------------------------------------------------------------------ what a stack is


def test_a_stack_is_three_or_more_numbered_modules_of_one_type() -> None:
    assert MIN_BLOCKS == 3
    assert block_index("encoder.layers.11") == ("encoder.layers", 11)
    assert block_index("blocks") is None and block_index("0") is None
    named = [
        ("h.10", "Block"),
        ("h.2", "Block"),
        ("h.1", "Block"),
        ("h.1.ln", "LayerNorm"),
        ("enc.0", "Layer"),
        ("enc.1", "Layer"),  # two: an encoder and a decoder are not a stack
        ("mix.0", "Conv"),
        ("mix.1", "ReLU"),
        ("mix.2", "Conv"),
    ]
    assert stacks(named) == [["h.1", "h.2", "h.10"]]


class ResBlock(nn.Module):
    """relu(x + conv(relu(conv(x)))): a ResNet basic block without normalisation."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.act = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.conv2(self.act(self.conv1(x))))


class ResNetLike(nn.Module):
    """A stem, a stage of three residual blocks, a plain Sequential stack and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1)
        self.stage = nn.Sequential(*[ResBlock(8) for _ in range(3)])
        # blocks that are plain chains: their output is their last child's
        self.chain = nn.Sequential(
            *[nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU()) for _ in range(3)]
        )
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.chain(self.stage(self.stem(x))).mean(dim=(2, 3)))


def encoder() -> EncoderClassifier:
    torch.manual_seed(0)
    model = EncoderClassifier(vocab=64, context=12, width=32, heads=4, layers=3)
    for layer in model.encoder.layers:  # dropout on: the probe must leave the RNG alone
        layer.dropout = nn.Dropout(0.1)
    return model


def test_the_default_selection_adds_each_stacks_blocks_for_their_outputs_only() -> None:
    gpt = select_modules(GPT(CONFIG))
    names = [n for n, _ in gpt.modules]
    assert set(BLOCKS) <= set(names) and gpt.activations_only == frozenset(BLOCKS)
    assert "blocks.0.attn.qkv" in names and "blocks.0.attn" not in names  # no stack, no params
    note = next(n for n in gpt.notes if "repeated blocks" in n)
    assert "blocks.0 .. blocks.5" in note and "residual stream" in note
    assert "activations only" in note
    enc = select_modules(encoder())
    layers = [f"encoder.layers.{i}" for i in range(3)]
    assert enc.activations_only == frozenset(layers)
    assert set(layers) <= {n for n, _ in enc.modules}
    res = select_modules(ResNetLike())
    assert res.activations_only == {"stage.0", "stage.1", "stage.2"}
    assert stack_blocks(ResNetLike()) == [["stage.0", "stage.1", "stage.2"]]
    # chosen names, not the defaults: no block is added
    given = select_modules(GPT(CONFIG), layers="blocks.*.mlp.fc")
    assert given.activations_only == frozenset() and len(given.modules) == CONFIG.blocks
    assert select_modules(GPT(CONFIG), blocks=False).activations_only == frozenset()


def test_two_blocks_are_not_a_stack() -> None:
    model = GPT(GPTConfig(vocab=64, context=12, width=32, heads=4, blocks=2))
    assert select_modules(model).activations_only == frozenset()


def test_the_blocks_count_within_the_layer_cap_and_are_kept_first() -> None:
    config = GPTConfig(vocab=64, context=8, width=16, heads=2, blocks=16)
    model = GPT(config)
    full = select_modules(model, max_layers=None)
    assert len(full.modules) > DEFAULT_MAX_LAYERS
    capped = select_modules(model, max_layers=DEFAULT_MAX_LAYERS)
    assert len(capped.modules) == DEFAULT_MAX_LAYERS
    blocks = {f"blocks.{i}" for i in range(16)}
    assert blocks <= {n for n, _ in capped.modules} and capped.activations_only == blocks
    assert any(f"watching {DEFAULT_MAX_LAYERS} of" in n for n in capped.notes)
    few = select_modules(model, max_layers=4)
    assert len(few.modules) == 4 and few.activations_only == {n for n, _ in few.modules}


# ------------------------------------------------------------------ recorded at the defaults


def test_watch_at_the_defaults_records_the_blocks_outputs(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = GPT(CONFIG)
    seen: dict[str, torch.Tensor] = {}

    def keep_first(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        seen.setdefault("b3", out.detach().clone())

    model.blocks[3].register_forward_hook(keep_first)
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model)
        lm_steps(run, model, opt, gen, 51, batch=8)
        notes = list(probe.notes)
    read = nbviz.open_run(tmp_path / "run")
    assert list(read.steps("activation")) == [0, 50]
    assert set(BLOCKS) <= set(read.recorded_layers("activation"))
    assert not set(BLOCKS) & set(read.recorded_layers("gradient"))  # activations only
    assert "blocks.0.mlp.fc" in read.recorded_layers("gradient")  # the rest as before
    row = read.stats("activation", layer="blocks.3", steps=[0]).iloc[0]
    expected = seen["b3"]
    assert row["count"] == expected.numel()
    assert row["norm"] == pytest.approx(float(expected.norm()), rel=1e-5)
    assert any("repeated blocks" in n for n in notes)
    assert any("repeated blocks" in n for n in read.meta("probe")["notes"])
    layers = read.layers().set_index("name")
    assert layers.loc[BLOCKS, "watched"].all()
    # the layer browser: a block is one row, its output's statistics its own
    browser = nbviz.LayerBrowser(read, live=False, selected_layer="blocks.3")
    table = browser.data().set_index("layer")
    assert table.index.is_unique and set(BLOCKS) <= set(table.index)
    assert table.loc["blocks.3", "zero_frac_step"] == 50
    assert table.loc["blocks.3", "grad_norm"] != table.loc["blocks.3", "grad_norm"]  # NaN
    assert set(browser.series()["label"]) == {"activations"}


def train_gpt_at_the_defaults(path: Path, plant=None, steps: int = 101) -> nbviz.Run:
    """A small GPT trained with AdamW, ``run.watch(model)`` with no options."""
    torch.manual_seed(0)
    model = GPT(CONFIG)
    if plant is not None:
        plant(model)
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with nbviz.Run(path) as run:
        run.watch(model)
        lm_steps(run, model, opt, gen, steps, batch=8)
    return nbviz.open_run(path)


def projections_scaled_by_depth(model: GPT) -> None:
    """Block ``i`` writes into the stream 3**i times louder: growth that compounds."""
    with torch.no_grad():
        for i, block in enumerate(model.blocks):
            block.attn.proj.weight.mul_(3.0**i)
            block.mlp.proj.weight.mul_(3.0**i)


def test_a_compounding_stream_is_found_at_the_defaults(tmp_path: Path) -> None:
    run = train_gpt_at_the_defaults(tmp_path / "run", plant=projections_scaled_by_depth)
    frame = run.diagnose()
    found = frame[frame["check"] == "residual_growth"]
    assert len(found) == 1, frame[["check", "layer", "message"]].to_string()
    f = found.iloc[0]
    assert f["layer"] == "blocks.5" and f["severity"] == "warning"
    assert f["evidence"]["blocks"] == BLOCKS and f["evidence"]["total"] >= 8


def test_a_healthy_gpt_at_the_defaults_has_no_residual_finding(tmp_path: Path) -> None:
    run = train_gpt_at_the_defaults(tmp_path / "run")
    assert set(BLOCKS) <= set(run.recorded_layers("activation"))
    assert "residual_growth" not in set(run.diagnose()["check"])
    assert list(run.triage()["cause"]) == ["healthy"]


def test_the_encoders_layers_are_read_as_a_stack(tmp_path: Path) -> None:
    from nbviz.analysis.checks.residual import block_stacks

    model = encoder()
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=2, hist_every=2)
        for step in range(6):
            x = torch.randint(0, 64, (4, 12), generator=gen)
            y = torch.randint(0, 4, (4,), generator=gen)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    read = nbviz.open_run(tmp_path / "run")
    layers = [f"encoder.layers.{i}" for i in range(3)]
    recorded = set(read.recorded_layers("activation"))
    assert set(layers) <= recorded
    assert not set(layers) & set(read.recorded_layers("gradient"))
    assert block_stacks(layout(read), recorded) == [layers]


# ------------------------------------------------------------------ nothing changed


def _train(model: nn.Module, batches, loss_fn, run=None, **watch):
    probe = run.watch(model, **watch) if run is not None else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    outputs, grads = [], []
    for step, (x, y) in enumerate(batches):
        torch.manual_seed(100 + step)
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        outputs.append(out.detach().clone())
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
        if run is not None:
            run.log(step, train_loss=loss)
    if probe is not None:
        probe.close()
    return outputs, grads


def _gpt_case():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    ids = [token_batch(gen, 4, 13, 64) for _ in range(5)]
    config = GPTConfig(vocab=64, context=12, width=32, heads=4, blocks=3)
    return GPT(config), [(i[:, :-1], i[:, 1:]) for i in ids], next_token_loss, "blocks"


def _encoder_case():
    gen = torch.Generator().manual_seed(0)
    batches = [
        (torch.randint(0, 64, (4, 12), generator=gen), torch.randint(0, 4, (4,), generator=gen))
        for _ in range(5)
    ]
    return encoder(), batches, F.cross_entropy, "encoder.layers"


def _resnet_case():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    batches = [
        (torch.randn(4, 1, 8, 8, generator=gen), torch.randint(0, 10, (4,), generator=gen))
        for _ in range(5)
    ]
    return ResNetLike(), batches, F.cross_entropy, "stage"


CASES = {"gpt": _gpt_case, "encoder": _encoder_case, "resnet": _resnet_case}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_watched_blocks_leave_outputs_and_gradients_bitwise_equal(kind, tmp_path: Path) -> None:
    plain, batches, loss_fn, stack = CASES[kind]()
    watched = copy.deepcopy(plain)
    out_a, grad_a = _train(plain, batches, loss_fn)
    with nbviz.Run(tmp_path / "run") as run:
        out_b, grad_b = _train(watched, batches, loss_fn, run, every=1, hist_every=1)
        recorded = set(run.recorded_layers("activation"))
        steps = list(run.steps("activation"))
    assert {f"{stack}.{i}" for i in range(3)} <= recorded  # the blocks were watched
    assert steps == list(range(5))
    assert all(torch.equal(a, b) for a, b in zip(out_a, out_b, strict=True))
    for ga, gb in zip(grad_a, grad_b, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ga, gb, strict=True))
    for pa, pb in zip(plain.state_dict().values(), watched.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)


# ------------------------------------------------------------------ nothing counted twice


def test_the_checks_find_the_same_with_and_without_the_blocks(tmp_path: Path) -> None:
    def plant(model: GPT) -> None:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = ScaledBlock(block, 2.0)

    def findings(layers):
        torch.manual_seed(0)
        model = GPT(CONFIG)
        plant(model)
        path = tmp_path / ("blocks" if layers is None else "leaves")
        with nbviz.Run(path) as run:
            run.watch(model, every=5, hist_every=5, layers=layers)
            lm_steps(
                run,
                model,
                torch.optim.AdamW(model.parameters(), lr=1e-3),
                torch.Generator().manual_seed(1),
                40,
                batch=8,
            )
        read = nbviz.open_run(path)
        frame = read.diagnose()
        return read, sorted(zip(frame["check"], frame["layer"], frame["severity"]))

    with_blocks, found = findings(None)
    without, found_before = findings(leaves_and_own_params)
    assert ("residual_growth", "blocks.5", "warning") in found
    assert [f for f in found if f[0] != "residual_growth"] == found_before
    # the depth checks read the main layers only, and a block ends after its children
    # without being the module its last child feeds
    lay, lay_before = layout(with_blocks), layout(without)
    assert "blocks.0" in lay.forward_order and "blocks.0" not in lay_before.forward_order
    for name in lay_before.forward_order:
        assert feeds_normalisation(lay, name) == feeds_normalisation(lay_before, name), name


def test_a_nan_inside_a_block_is_named_at_its_child_not_at_the_block(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = GPT(CONFIG)

    def fault(model: GPT, step: int) -> None:
        if step == 3:  # ahead of the probe's hook: the probe sees the NaN
            model.blocks[2].mlp.fc.register_forward_hook(
                lambda m, a, out: out * float("nan"), prepend=True
            )

    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=5, hist_every=5)
        lm_steps(
            run, model, torch.optim.SGD(model.parameters(), lr=0.0), gen, 4, batch=4, before=fault
        )
    read = nbviz.open_run(tmp_path / "run")
    found = read.diagnose()
    f = found[found["check"] == "nonfinite"].iloc[0]
    assert f["layer"] == "blocks.2.mlp.fc" and f["step"] == 3
    reached = {d["module"] for d in f["evidence"]["downstream"] if d["step"] == 3}
    assert {"blocks.2", "blocks.3"} <= reached and "blocks.1" not in reached


def test_a_dead_relu_in_a_residual_stage_is_one_finding(tmp_path: Path) -> None:
    def findings(layers):
        model, batches, loss_fn, _ = _resnet_case()
        with torch.no_grad():
            model.stage[1].conv1.bias.fill_(-50.0)  # every unit of stage.1.act dead
        path = tmp_path / ("blocks" if layers is None else "leaves")
        with nbviz.Run(path) as run:
            _train(model, batches * 2, loss_fn, run, every=1, hist_every=1, layers=layers)
        frame = nbviz.open_run(path).diagnose()
        return sorted(zip(frame["check"], frame["layer"]))

    found = findings(None)
    assert ("dead_units", "stage.1.act") in found
    assert not [f for f in found if f[1].startswith("stage.") and f[1].count(".") == 1]
    assert found == findings(leaves_and_own_params)
