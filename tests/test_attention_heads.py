"""Per-head statistics of attention outputs: recomputed from q, k, v; dead heads; invariance.

A little over 500 lines: the recomputations, the dead heads, the invariance and the
views read the same small models, batches and training helper defined at the top.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from reference_models import GPT, EncoderClassifier, GPTConfig, next_token_loss, token_batch
from torch import nn
from torch.nn import functional as F

import nbviz
from nbviz.probes.heads import NEAR_ZERO, SIGNALS

SMALL = GPTConfig(vocab=64, context=12, width=32, heads=4, blocks=2)
WIDTH, HEADS, HEAD = 32, 4, 8


def small_gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(SMALL)


def small_encoder(dropout: float = 0.0) -> EncoderClassifier:
    torch.manual_seed(0)
    model = EncoderClassifier(vocab=64, context=12, width=WIDTH, heads=HEADS, layers=2)
    for layer in model.encoder.layers:
        layer.self_attn.dropout = dropout
        layer.dropout = nn.Dropout(dropout)
    return model


class MhaModel(nn.Module):
    """``nn.MultiheadAttention`` called directly, with or without ``need_weights``."""

    def __init__(self, need_weights: bool, dropout: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(64, WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, dropout=dropout, batch_first=True)
        self.out = nn.Linear(WIDTH, 4)
        self.need_weights = need_weights

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        y, _ = self.attn(x, x, x, need_weights=self.need_weights)
        return self.out(y.mean(dim=1))


def gpt_batches(n: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = token_batch(gen, 4, SMALL.context + 1, SMALL.vocab)
        out.append((ids[:, :-1], ids[:, 1:]))
    return out


def class_batches(n: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [
        (torch.randint(0, 64, (4, 12), generator=gen), torch.randint(0, 4, (4,), generator=gen))
        for _ in range(n)
    ]


MODELS = {
    "gpt": (small_gpt, gpt_batches, next_token_loss),
    "encoder": (lambda: small_encoder(0.1), class_batches, F.cross_entropy),
    "mha_weights": (lambda: MhaModel(True, 0.1), class_batches, F.cross_entropy),
    "mha_no_weights": (lambda: MhaModel(False, 0.1), class_batches, F.cross_entropy),
}


def train(kind, model, steps, run=None, lr=1e-2, **watch):
    """Outputs and parameter gradients of ``steps`` AdamW steps (watched with ``run``)."""
    _, batches, loss_fn = MODELS[kind]
    probe = run.watch(model, **watch) if run is not None else None
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    outputs, grads = [], []
    for step, (x, y) in enumerate(batches(steps)):
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


def per_head(y: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rms, max |x| and ~0 fraction per head of ``y`` (batch, heads, tokens, head_dim)."""
    y = y.detach().double()
    rms = y.square().mean(dim=(0, 2, 3)).sqrt()
    peak = y.abs().amax(dim=(0, 2, 3))
    tol = max(float(y.square().mean().sqrt()) * NEAR_ZERO, torch.finfo(torch.float32).tiny)
    zero = (y.abs() < tol).double().mean(dim=(0, 2, 3))
    return rms.numpy(), peak.numpy(), zero.numpy()


def stored(run, layer: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {s: run.unit_stats(layer, s) for s in SIGNALS}


# ------------------------------------------------------------------ recomputed from q, k, v


def test_sdpa_head_statistics_equal_a_recomputation_from_the_models_own_q_k_v(tmp_path):
    model = small_gpt()
    attn = model.blocks[1].attn
    qkv_out: list[torch.Tensor] = []
    handle = attn.qkv.register_forward_hook(lambda m, a, out: qkv_out.append(out.detach()))
    with nbviz.Run(tmp_path / "run") as run:
        train("gpt", model, 4, run, every=2, hist_every=2)
        got = stored(run, "blocks.1.attn/heads")
        meta = run.meta("heads")
    handle.remove()
    steps = got["head_rms"][0]
    assert list(steps) == [0, 2]
    for row, step in enumerate(steps):
        x = qkv_out[step]
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, HEADS, HEAD).transpose(1, 2) for z in x.split(WIDTH, dim=2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(HEAD)
        scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        rms, peak, zero = per_head(torch.softmax(scores, dim=-1) @ v)
        np.testing.assert_allclose(got["head_rms"][1][row], rms, rtol=1e-5)
        np.testing.assert_allclose(got["head_max_abs"][1][row], peak, rtol=1e-5)
        np.testing.assert_allclose(got["head_zero_frac"][1][row], zero, atol=1e-6)
    assert meta["layers"]["blocks.1.attn/heads"] == {
        "module": "blocks.1.attn",
        "heads": HEADS,
        "head_dim": HEAD,
        "kind": "sdpa",
    }


def _mha_heads(mha: nn.MultiheadAttention, x: torch.Tensor) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d)) v`` per head, from the module's own projections."""
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
    b = x.shape[0]
    q, k, v = (
        (x @ w.T + bias).view(b, -1, HEADS, HEAD).transpose(1, 2)
        for w, bias in ((w_q, b_q), (w_k, b_k), (w_v, b_v))
    )
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(HEAD), dim=-1) @ v


@pytest.mark.parametrize("kind", ["encoder", "mha_weights", "mha_no_weights"])
def test_multihead_attention_head_statistics_equal_a_recomputation_from_its_projections(
    kind, tmp_path
):
    model = small_encoder() if kind == "encoder" else MhaModel(kind == "mha_weights")
    mha = model.encoder.layers[0].self_attn if kind == "encoder" else model.attn
    name = "encoder.layers.0.self_attn" if kind == "encoder" else "attn"
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def keep(m, args):
        weights = mha.in_proj_weight.detach().clone(), mha.in_proj_bias.detach().clone()
        seen.append((args[0].detach(), weights))

    handle = mha.register_forward_pre_hook(keep)
    with nbviz.Run(tmp_path / "run") as run:
        train(kind, model, 3, run, every=1, hist_every=1)
        got = stored(run, f"{name}/heads")
        meta = run.meta("heads")
    handle.remove()
    assert list(got["head_rms"][0]) == [0, 1, 2]
    for step in range(3):
        x, (w, bias) = seen[step]
        copy_ = copy.deepcopy(mha)
        with torch.no_grad():
            copy_.in_proj_weight.copy_(w)
            copy_.in_proj_bias.copy_(bias)
        rms, peak, zero = per_head(_mha_heads(copy_, x))
        np.testing.assert_allclose(got["head_rms"][1][step], rms, rtol=1e-4)
        np.testing.assert_allclose(got["head_max_abs"][1][step], peak, rtol=1e-4)
        np.testing.assert_allclose(got["head_zero_frac"][1][step], zero, atol=1e-6)
    assert meta["layers"][f"{name}/heads"]["kind"] == "mha"


# ------------------------------------------------------------------------------ a dead head


def _freeze_rows(p: nn.Parameter, rows: slice) -> None:
    """Zero ``rows`` of ``p`` and keep them zero: their gradient is masked."""
    with torch.no_grad():
        p[rows] = 0.0
    keep = torch.ones_like(p)
    keep[rows] = 0.0
    p.register_hook(lambda g: g * keep)


@pytest.mark.parametrize("kind", ["gpt", "encoder"])
def test_a_head_whose_value_projection_is_zero_reads_dead_and_the_others_do_not(kind, tmp_path):
    dead = 2
    rows = slice(2 * WIDTH + dead * HEAD, 2 * WIDTH + (dead + 1) * HEAD)
    if kind == "gpt":
        model = small_gpt()
        layer, other = "blocks.0.attn/heads", "blocks.1.attn/heads"
        params = (model.blocks[0].attn.qkv.weight, model.blocks[0].attn.qkv.bias)
    else:
        model = small_encoder()
        layer, other = "encoder.layers.0.self_attn/heads", "encoder.layers.1.self_attn/heads"
        mha = model.encoder.layers[0].self_attn
        params = (mha.in_proj_weight, mha.in_proj_bias)
    for p in params:
        _freeze_rows(p, rows)
    with nbviz.Run(tmp_path / "run") as run:
        train(kind, model, 6, run, every=2, hist_every=2)
        got = stored(run, layer)
        rest = stored(run, other)
        findings = run.diagnose()
    steps, zero = got["head_zero_frac"]
    assert list(steps) == [0, 2, 4]
    alive = [h for h in range(HEADS) if h != dead]
    assert np.all(zero[:, dead] == 1.0)
    assert np.all(got["head_rms"][1][:, dead] == 0.0)
    assert np.all(got["head_max_abs"][1][:, dead] == 0.0)
    assert np.all(zero[:, alive] < 0.05)
    assert np.all(got["head_rms"][1][:, alive] > 1e-3)
    assert np.all(rest["head_zero_frac"][1] < 0.05)
    # the pseudo-layer is not a module: no finding names it
    assert not findings["layer"].astype(str).str.endswith("/heads").any()


# --------------------------------------------------------------------------- invariance


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_head_statistics_leave_outputs_and_gradients_bitwise_equal(kind, tmp_path):
    make = MODELS[kind][0]
    plain = make()
    watched = copy.deepcopy(plain)
    out_a, grad_a = train(kind, plain, 5)
    with nbviz.Run(tmp_path / "run") as run:
        out_b, grad_b = train(kind, watched, 5, run, every=2, hist_every=2)
        heads = run.meta("heads")
        layer = sorted(heads["layers"])[0]
        steps = run.unit_stats(layer, "head_rms")[0]
    assert all(torch.equal(a, b) for a, b in zip(out_a, out_b, strict=True))
    for ga, gb in zip(grad_a, grad_b, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ga, gb, strict=True))
    for pa, pb in zip(plain.state_dict().values(), watched.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    assert list(steps) == [0, 2, 4]


def test_nothing_watches_torch_calls_outside_captured_forwards(tmp_path):
    model = small_gpt()
    modes: list[int] = []
    model.blocks[0].attn.register_forward_pre_hook(
        lambda m, a: modes.append(torch._C._len_torch_function_stack())
    )
    hooks_before = sum(len(m._forward_pre_hooks) for m in model.modules())
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=3, hist_every=3)
        train("gpt", model, 6)
        # between forwards only the step clock's: on the model and its direct children
        clock = 1 + len(list(model.children()))
        assert sum(len(m._forward_pre_hooks) for m in model.modules()) == hooks_before + clock
        probe.close()
    # steps 0 and 3 are captured: a mode is on during their forward only
    assert [bool(n) for n in modes] == [True, False, False, True, False, False]
    assert torch._C._len_torch_function_stack() == 0


def test_a_forward_that_raises_on_a_capture_step_leaves_no_mode_and_no_hook(tmp_path):
    model = small_gpt()
    before = {id(m): (len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()}
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)
        with pytest.raises(ValueError, match="exceed the context"):
            model(torch.zeros(2, SMALL.context + 5, dtype=torch.long))
        assert torch._C._len_torch_function_stack() == 0
        probe.close()
    after = {id(m): (len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()}
    assert after == before


def test_only_attention_inside_the_watched_modules_is_measured(tmp_path):
    model = small_gpt()
    with nbviz.Run(tmp_path / "run") as run:
        train("gpt", model, 2, run, every=1, hist_every=1, layers=["blocks.1.*"])
        layers = run.recorded_layers("head_rms", table="unit_stats")
    assert layers == ["blocks.1.attn/heads"]


def test_no_head_statistics_without_activations(tmp_path):
    model = small_gpt()
    with nbviz.Run(tmp_path / "run") as run:
        train("gpt", model, 2, run, every=1, hist_every=1, signals=["gradients", "weights"])
        assert run.recorded_layers("head_rms", table="unit_stats") == []
        assert run.meta("heads") is None


# ------------------------------------------------------------------------------ the view


def test_the_layer_browser_shows_each_attention_layers_heads_by_steps(tmp_path):
    from nbviz.widgets.wire import array_from_payload

    model = small_gpt()
    dead = 1
    qkv = model.blocks[0].attn.qkv
    for p in (qkv.weight, qkv.bias):
        _freeze_rows(p, slice(2 * WIDTH + dead * HEAD, 2 * WIDTH + (dead + 1) * HEAD))
    with nbviz.Run(tmp_path / "run") as run:
        train("gpt", model, 6, run, every=2, hist_every=2)
    view = nbviz.LayerBrowser(nbviz.open_run(tmp_path / "run"), live=False)
    names = [r["name"] for r in view.layers]
    # right after its module's row, one level deeper
    at = names.index("blocks.0.attn/heads")
    assert names[at - 1] == "blocks.0.attn"
    assert view.layers[at]["depth"] == view.layers[at - 1]["depth"] + 1
    assert view.layers[at]["shape"] == f"{HEADS} \u00d7 {HEAD}"
    assert view.layers[at]["type"] == "heads"
    view.selected_layer = "blocks.0.attn/heads"
    dm = view.dead_map
    assert dm["axis"] == "head" and dm["units"] == HEADS
    assert "~0" in dm["title"]
    assert list(array_from_payload(dm["steps"])) == [0, 2, 4]
    zero = np.asarray(array_from_payload(dm["values"])).reshape(3, HEADS)
    rms = np.asarray(array_from_payload(dm["rms"])).reshape(3, HEADS)
    assert np.all(zero[:, dead] == 1.0) and np.all(rms[:, dead] == 0.0)
    assert np.all(rms[:, [0, 2, 3]] > 0)
    assert dm["dead"] == [dead]
    assert view.detail["empty"] == ""
    # a module's own map is unchanged: units, zero fractions
    view.selected_layer = "blocks.0.mlp.act"
    assert view.dead_map.get("axis") is None and view.dead_map["units"] == 4 * WIDTH


def test_one_rule_says_which_heads_are_dead_a_layer_all_zero_included():
    from nbviz.analysis.dead_heads import dead_heads
    from nbviz.widgets.attention import head_flags

    rms = np.array([[0.0, 0.0, 0.0], [1.0, 5e-4, np.nan]])
    assert dead_heads(rms).tolist() == [[True, True, True], [False, True, False]]
    assert head_flags(np.full(6, 0.5), rms) == ["dead"] * 3 + ["", "dead", ""]


def test_both_views_flag_a_layer_whose_heads_are_all_dead(tmp_path):
    model = small_gpt()
    qkv = model.blocks[0].attn.qkv
    for p in (qkv.weight, qkv.bias):
        _freeze_rows(p, slice(2 * WIDTH, 3 * WIDTH))  # every head's value projection
    probe_batch = gpt_batches(1, seed=5)[0][0][:2]
    with nbviz.Run(tmp_path / "run") as run:
        train("gpt", model, 4, run, every=2, hist_every=2, attention=probe_batch)
    done = nbviz.open_run(tmp_path / "run")
    maps = nbviz.AttentionMaps(done, live=False)
    assert maps.flags[:HEADS] == ["dead"] * HEADS
    assert "dead" not in maps.flags[HEADS:]
    view = nbviz.LayerBrowser(done, live=False)
    view.selected_layer = "blocks.0.attn/heads"
    assert view.dead_map["dead"] == list(range(HEADS))
    view.selected_layer = "blocks.1.attn/heads"
    assert view.dead_map["dead"] == []


def test_attention_maps_show_each_heads_output_rms_a_dead_one_at_zero(tmp_path):
    from nbviz.widgets.wire import array_from_payload

    model = small_encoder()
    mha = model.encoder.layers[0].self_attn
    dead = 3
    for p in (mha.in_proj_weight, mha.in_proj_bias):
        _freeze_rows(p, slice(2 * WIDTH + dead * HEAD, 2 * WIDTH + (dead + 1) * HEAD))
    probe_batch = class_batches(1, seed=5)[0][0][:2]
    with nbviz.Run(tmp_path / "run") as run:
        train("encoder", model, 4, run, every=2, hist_every=2, attention=probe_batch)
    view = nbviz.AttentionMaps(nbviz.open_run(tmp_path / "run"), live=False)
    rms = np.asarray(array_from_payload(view.output_rms)).reshape(2, HEADS, 2)
    assert np.all(rms[0, dead] == 0.0)
    alive = [h for h in range(HEADS) if h != dead]
    assert np.all(rms[0, alive] > 0) and np.all(rms[1] > 0)  # nn.MultiheadAttention: shown
    assert view.flags[dead] == "dead"
    assert "dead" not in view.flags[:dead] + view.flags[dead + 1 :]


def test_head_reductions_tell_a_dead_head_from_a_non_finite_one():
    from nbviz.probes.heads import head_reductions

    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 4)  # (batch, heads, tokens, head_dim)
    x[:, 1] = 0.0
    x[0, 2, 0, 0] = float("nan")
    sumsq, peak, near = head_reductions(x, 1)
    assert near[1] == 40 and sumsq[1] == 0 and peak[1] == 0  # dead: every value ~0
    assert near[0] < 2 and sumsq[0] > 0  # alive, and its count untouched by head 2's NaN
    assert torch.isnan(sumsq[2]) and torch.isnan(peak[2])  # non-finite, not dead
    torch.testing.assert_close(sumsq[0], x[:, 0].square().sum())
    torch.testing.assert_close(peak[0], x[:, 0].abs().max())


def test_a_three_dimensional_attention_call_shows_no_heads_and_is_left_out(tmp_path):
    class Flat(nn.Module):
        """Heads folded into the batch: (batch * heads, tokens, head_dim)."""

        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(64, WIDTH)
            self.out = nn.Linear(WIDTH, 4)

        def forward(self, ids):
            x = self.emb(ids).view(ids.shape[0] * HEADS, ids.shape[1], HEAD)
            y = F.scaled_dot_product_attention(x, x, x)
            return self.out(y.reshape(ids.shape[0], ids.shape[1], WIDTH).mean(dim=1))

    model = Flat()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, hist_every=1)
        for step, (x, y) in enumerate(class_batches(2)):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
        assert run.recorded_layers("head_rms", table="unit_stats") == []


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "run"
    with nbviz.Run(path) as run:
        train("gpt", small_gpt(), 4, run, every=2, hist_every=2)
    return path


@pytest.mark.parametrize(
    "heads, left_out",
    [
        ([], "is a list, not a mapping"),
        ("x", "is a str, not a mapping"),
        ({"layers": ["a"]}, "layers are a list, not a mapping"),
        ({"layers": {"a": "x"}}, "1 malformed entry"),
        ({"layers": {"b.0.attn/heads": {"module": "b.0.attn", "heads": "x"}}}, "1 malformed"),
        ({"layers": {"a": {"heads": -2}, "c": {"heads": True}, "d": {"heads": 4.5}}}, "3 malf"),
        ({"layers": {"a": {"heads": 2, "head_dim": "8", "module": 7}}}, "1 malformed entry"),
    ],
)
def test_the_layer_browser_leaves_a_malformed_heads_meta_out_and_says_so(
    gpt_run, heads, left_out, tmp_path
):
    import shutil

    from nbviz.store import Writer

    path = tmp_path / "run"
    shutil.copytree(gpt_run, path)
    with Writer(path) as w:
        w.set_meta("heads", heads)
    view = nbviz.LayerBrowser(nbviz.open_run(path), live=False)
    names = [r["name"] for r in view.layers]
    assert "blocks.0.attn" in names
    assert not any(r.get("type") == "heads" for r in view.layers)
    assert left_out in view.notice


def test_the_layer_browser_keeps_the_well_formed_heads_entries(gpt_run, tmp_path):
    import shutil

    from nbviz.store import Writer

    path = tmp_path / "run"
    shutil.copytree(gpt_run, path)
    good = {"module": "blocks.0.attn", "heads": 4, "head_dim": 8, "kind": "sdpa"}
    with Writer(path) as w:
        w.set_meta("heads", {"layers": {"blocks.0.attn/heads": good, "x": {"heads": 0}}})
    view = nbviz.LayerBrowser(nbviz.open_run(path), live=False)
    heads = [r for r in view.layers if r.get("type") == "heads"]
    assert [r["name"] for r in heads] == ["blocks.0.attn/heads"]
    assert "1 malformed entry of the meta 'heads' left out ('x')" in view.notice


def test_the_probes_own_statistics_are_not_handed_to_the_heads_mode(tmp_path, monkeypatch):
    from nbviz.probes import heads as heads_module

    seen: list[object] = []
    original = heads_module._HeadsMode.__torch_function__

    def counting(self, func, types, args=(), kwargs=None):
        seen.append(func)
        return original(self, func, types, args, kwargs)

    monkeypatch.setattr(heads_module._HeadsMode, "__torch_function__", counting)
    model = small_gpt()
    with nbviz.Run(tmp_path / "run") as run:
        train("gpt", model, 2, run, every=1, hist_every=1)
        assert run.unit_stats("blocks.0.attn/heads", "head_rms")[0].tolist() == [0, 1]
        assert len(run.stats_at(1)) > 0
    # the model's own calls pass through the mode; the statistics' reductions do not
    assert F.linear in seen and F.scaled_dot_product_attention in seen
    assert torch.aminmax not in seen and torch.dot not in seen


def test_aside_takes_only_the_heads_mode_off_and_puts_it_back():
    from torch.overrides import TorchFunctionMode

    from nbviz.probes.heads import _Aside

    ours, other = TorchFunctionMode(), TorchFunctionMode()
    with ours:
        with _Aside(ours):
            assert torch._C._len_torch_function_stack() == 0
        assert torch._C._len_torch_function_stack() == 1
        with other:  # a mode entered above it stays, and so does the heads' mode
            with _Aside(ours):
                assert torch._C._len_torch_function_stack() == 2
            assert torch._C._len_torch_function_stack() == 2
        with pytest.raises(RuntimeError, match="inside"):
            with _Aside(ours):
                raise RuntimeError("inside")
        assert torch._C._len_torch_function_stack() == 1
    assert torch._C._len_torch_function_stack() == 0
    with _Aside(None):
        assert torch._C._len_torch_function_stack() == 0
