"""Each unit's top-activating tokens at a language model's evaluation.

A real small GPT, watched while it trains, is evaluated into a real run with padding
(ignored targets and a masked tail); the tokens stored per unit of every watched layer
are checked against a recomputation from that layer's output on the same inputs, then
read by the LayerBrowser's unit explorer. Older runs (schema 6) still open.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch
from training import lm_steps
from unit_token_runs import HOSTILE, top_token_run

import nbviz
from nbviz.recording.unit_tokens import CONTEXT_AFTER, CONTEXT_BEFORE, TOP_TOKENS
from nbviz.store import DB_NAME, Writer, schema
from nbviz.store.errors import RunFileError
from nbviz.store.unit_tokens import TOP_TOKEN_COLUMNS


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    return top_token_run(tmp_path_factory.mktemp("top") / "run")


def test_top_tokens_equal_a_recomputation_from_each_layer_output(lm) -> None:
    path, ref = lm
    padding = ref["padding"].numpy()
    inputs = ref["inputs"].numpy()
    n, t = inputs.shape
    with nbviz.open_run(path) as run:
        layers = run.top_token_layers()
        # every watched layer whose output is (samples, tokens, features)
        expected_layers = sorted(
            name
            for name, out in ref["outputs"].items()
            if out.ndim == 3
            and tuple(out.shape[:2]) == (n, t)
            and name not in ("blocks.0", "blocks.0.attn", "blocks.0.mlp")  # not leaves
            and name != "tok"  # a token's own vector: kept only when named
        )
        assert layers == expected_layers and "blocks.0.mlp.act" in layers
        for layer in layers:
            out = ref["outputs"][layer].numpy().astype(np.float64)
            got = run.unit_tokens(layer)
            assert got.step == ref["step"]
            units = out.shape[2]
            assert got.values.shape == (units, TOP_TOKENS)
            assert got.contexts.shape == (units, TOP_TOKENS, CONTEXT_BEFORE + 1 + CONTEXT_AFTER)
            flat = np.where(padding[..., None], -np.inf, out).reshape(n * t, units)
            want = -np.sort(-flat, axis=0)[:TOP_TOKENS].T  # each unit's top values
            np.testing.assert_allclose(got.values, want, rtol=1e-5, atol=1e-6)
            ids, pos = got.ids, got.positions
            assert (ids >= 0).all() and (pos >= 0).all()
            assert not padding[ids, pos].any(), f"padding among the top tokens of {layer}"
            # each entry is the unit's activation at that sample and position
            at = out[ids, pos, np.arange(units)[:, None]]
            np.testing.assert_allclose(got.values, at, rtol=1e-5, atol=1e-6)
            # the context: the input tokens around the position, -1 outside the sample
            for u in (0, units - 1):
                for r in range(TOP_TOKENS):
                    i, p = int(ids[u, r]), int(pos[u, r])
                    window = [
                        int(inputs[i, q]) if 0 <= q < t else -1
                        for q in range(p - CONTEXT_BEFORE, p + CONTEXT_AFTER + 1)
                    ]
                    assert got.contexts[u, r].tolist() == window


def test_padding_would_have_won_without_the_mask(lm) -> None:
    """The test above means something: unmasked, padding positions are among some
    units' top tokens."""
    path, ref = lm
    padding = ref["padding"].numpy().reshape(-1)
    out = ref["outputs"]["blocks.0.mlp.act"].numpy()
    flat = out.reshape(-1, out.shape[2])
    top = np.argsort(-flat, axis=0)[:TOP_TOKENS]
    assert padding[top].any()


def test_top_tokens_frame_decodes_contexts_with_the_vocabulary(lm) -> None:
    path, ref = lm
    words, inputs = ref["words"], ref["inputs"]
    with nbviz.open_run(path) as run:
        frame = run.top_tokens("blocks.0.mlp.act", unit=5)
        assert list(frame.columns) == list(TOP_TOKEN_COLUMNS)
        assert len(frame) == TOP_TOKENS and frame["rank"].tolist() == list(range(TOP_TOKENS))
        assert frame["value"].is_monotonic_decreasing
        for row in frame.itertuples():
            token = int(inputs[row.id, row.position])
            assert row.token_id == token and row.token == words[token]
            assert row.context[row.focus] == words[token]
            assert row.context == [words[i] for i in row.context_ids]
        everything = run.top_tokens("blocks.0.mlp.act")
        assert len(everything) == 64 * TOP_TOKENS and set(everything["unit"]) == set(range(64))
        # the hostile token's text is stored as it is (the views put it in as text)
        texts = {t for ctx in everything["context"] for t in ctx}
        assert HOSTILE in texts
        with pytest.raises(ValueError, match=r"unit 64 is outside 0\.\.63"):
            run.top_tokens("blocks.0.mlp.act", unit=64)
        with pytest.raises(ValueError, match=r"no top tokens of layer 'blocks.0.mlp.ac'.*close"):
            run.top_tokens("blocks.0.mlp.ac")
        with pytest.raises(KeyError, match="at or before step 3"):
            run.top_tokens("blocks.0.mlp.act", step=3)


def test_the_unit_explorer_lists_a_units_top_tokens_as_strips(lm) -> None:
    path, ref = lm
    with nbviz.open_run(path) as run:
        lb = nbviz.LayerBrowser(run, selected_layer="blocks.0.mlp.act", live=False)
        us = lb.unit_samples
        assert us["kind"] == "tokens" and us["n_units"] == 64 and us["unit"] == -1
        lb.unit = 5
        us = lb.unit_samples
        frame = run.top_tokens("blocks.0.mlp.act", unit=5)
        assert [(s["id"], s["position"]) for s in us["tokens"]] == list(
            zip(frame["id"], frame["position"])
        )
        assert [s["context"] for s in us["tokens"]] == frame["context"].tolist()
        assert us["tokens"][0]["value"] == pytest.approx(float(frame["value"].iloc[0]))
        # a click opens the sample as a click on a sample card does
        lb.map_id = int(us["tokens"][0]["id"])
        assert lb.sample_maps["id"] == us["tokens"][0]["id"]
        # a layer whose output has no token axis says so
        lb.selected_layer = "pos"
        assert lb.unit_samples["n_units"] == 0
        assert lb.unit_samples["notice"].startswith("No top tokens of 'pos'")
        lb.close()


def test_without_token_samples_the_explorer_says_so(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    with nbviz.Run(tmp_path / "mlp") as run:
        run.watch(model, every=1)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        run.log(0, train_loss=1.0)
        run.evaluate(0, model, [(x, y)])
        run.flush()
        assert run.top_token_layers() == []
        lb = nbviz.LayerBrowser(run, selected_layer="1", live=False)
        assert "No per-sample unit values of '1'" in lb.unit_samples["notice"]
        lb.close()


def test_an_unwatched_model_records_units_layer_alone(tmp_path: Path) -> None:
    from reference_models import GPT, GPTConfig, token_batch

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab=12, context=8, width=8, heads=2, blocks=1))
    ids = token_batch(torch.Generator().manual_seed(0), 4, 9, 12)
    with nbviz.Run(tmp_path / "lm") as run:
        run.evaluate(0, model, [(ids[:, :-1], ids[:, 1:])], units_layer="blocks.0.mlp.fc")
        assert run.top_token_layers() == ["blocks.0.mlp.fc"]
        got = run.top_tokens("blocks.0.mlp.fc", unit=0)
        assert got["token"].tolist() == [str(i) for i in got["token_id"]]  # no vocabulary
        # an evaluation again at the same step replaces them
        run.evaluate(0, model, [(ids[:2, :-1], ids[:2, 1:])], units_layer="blocks.0.mlp.fc")
        run.flush()
        assert set(run.top_tokens("blocks.0.mlp.fc")["id"]) <= {0, 1}


def test_the_units_an_evaluation_keeps_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Layers are taken whole while their units fit, the activation functions' outputs
    before the rest and the rest spread over the depth; ``units_layer`` first, counted."""
    from reference_models import GPT, GPTConfig, token_batch

    from nbviz.recording import unit_tokens

    monkeypatch.setattr(unit_tokens, "MAX_TOP_TOKEN_UNITS", 100)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab=24, context=8, width=16, heads=2, blocks=1))
    ids = token_batch(torch.Generator().manual_seed(0), 4, 9, 24)
    loader = [(ids[:, :-1], ids[:, 1:])]
    with nbviz.Run(tmp_path / "lm") as run:
        run.watch(model, every=1)
        run.evaluate(0, model, loader)
        run.flush()
        # mlp.act 64, then of the rest (first, last, middle, ...): ln1 16 (80), head 24
        # no longer fits, ln2 16 (96); tok is an embedding
        assert run.top_token_layers() == ["blocks.0.ln1", "blocks.0.ln2", "blocks.0.mlp.act"]
        run.evaluate(1, model, loader, units_layer="blocks.0.mlp.fc")
        run.flush()
        assert run.top_token_steps("blocks.0.mlp.fc").tolist() == [1]
        assert run.unit_tokens("blocks.0.mlp.fc").values.shape == (64, TOP_TOKENS)
        # the 36 units left: ln1 (16) and ln2 (16), no room for mlp.act
        assert run.top_token_steps("blocks.0.mlp.act").tolist() == [0]
        assert run.top_token_steps("blocks.0.ln2").tolist() == [0, 1]


def test_a_schema_6_run_opens_and_is_migrated_on_write(tmp_path: Path) -> None:
    run_dir = tmp_path / "old"
    with Writer(run_dir) as w:
        w.insert("scalars", [("loss", 1, 0.5, 0.0)])
    conn = sqlite3.connect(run_dir / DB_NAME)
    with conn:
        for table in schema.READ_AS_IS[6]:  # the tables added since schema 6
            conn.execute(f"DROP TABLE {table}")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(6),))
    conn.close()
    assert schema.READ_AS_IS[6][0] == "unit_tokens"
    with nbviz.open_run(run_dir) as old:
        assert old.top_token_layers() == [] and len(old.top_token_steps("x")) == 0
        assert old.scalars()["value"].tolist() == [0.5]
    with nbviz.Run(run_dir) as run:  # a writer migrates it
        assert run.meta("schema_version") == schema.SCHEMA_VERSION
        assert run.top_token_layers() == []
    conn = sqlite3.connect(run_dir / DB_NAME)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "unit_tokens" in names


def test_non_finite_activations_are_ranked_or_counted_never_taken_for_padding() -> None:
    """+inf is ranked above every finite value, NaN is counted: a unit that overflowed
    never silently lists only its finite values."""
    from nbviz.probes.unit_tokens import TopTokens

    module = torch.nn.Identity()
    top = TopTokens([("m", module)], 2, 1, 1, 100)
    handles = top.attach()
    x = torch.zeros(3, 4, 1)
    x[1, 2, 0], x[2, 1, 0], x[0, 0, 0] = float("inf"), 5.0, float("nan")
    counted = torch.ones(3, 4, dtype=torch.bool)
    counted[2, 3] = False  # padding is its own mask
    top.begin(counted, torch.arange(12).reshape(3, 4), 0)
    module(x)
    top.commit()
    for h in handles:
        h.remove()
    (got,) = top.result()
    assert got.values.tolist() == [[float("inf"), 5.0]]
    assert got.rows.tolist() == [[1, 2]] and got.positions.tolist() == [[2, 1]]
    assert got.nonfinite.tolist() == [2]  # the +inf and the NaN; padding never


def _gpt(blocks: int = 1) -> tuple[torch.nn.Module, list]:
    from reference_models import GPT, GPTConfig, token_batch

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab=24, context=8, width=16, heads=2, blocks=blocks))
    ids = token_batch(torch.Generator().manual_seed(0), 4, 9, 24)
    return model, [(ids[:, :-1], ids[:, 1:])]


def _watch(run: nbviz.Run, model: torch.nn.Module) -> None:
    """Watch ``model`` through one training step: the run then describes its layers."""
    run.watch(model, every=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    lm_steps(run, model, opt, torch.Generator().manual_seed(1), 1, batch=4)


def test_a_unit_that_overflowed_says_so_in_the_store_and_the_explorer(tmp_path: Path) -> None:
    model, loader = _gpt()
    layer = "blocks.0.mlp.act"

    def overflow(module, args, out):  # unit 0: +inf at (1, 2), NaN at (0, 0)
        out = out.clone()
        out[1, 2, 0], out[0, 0, 0] = float("inf"), float("nan")
        return out

    with nbviz.Run(tmp_path / "lm") as run:
        _watch(run, model)
        handle = model.blocks[0].mlp.act.register_forward_hook(overflow)
        run.evaluate(0, model, loader, units_layer=layer)
        run.flush()
        got = run.unit_tokens(layer)
        assert got.nonfinite[0] == 2 and (got.nonfinite[1:] == 0).all()
        assert got.values[0, 0] == np.inf and (got.ids[0, 0], got.positions[0, 0]) == (1, 2)
        assert np.isfinite(got.values[0, 1:]).all()
        frame = run.top_tokens(layer, unit=0)
        assert frame["value"].iloc[0] == np.inf
        lb = nbviz.LayerBrowser(run, selected_layer=layer, live=False)
        assert "1 of 64 units had non-finite activations" in lb.unit_samples["notice"]
        lb.unit = 0
        us = lb.unit_samples
        assert us["nonfinite"] == 2
        first = us["tokens"][0]
        assert first["value"] is None and first["nonfinite"] == "+Inf"
        assert all(isinstance(t["value"], float) for t in us["tokens"][1:])
        json.dumps(us["tokens"], allow_nan=False)  # what travels is JSON: no NaN or inf
        lb.close()
        handle.remove()


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("width", 0, r"column width holds 0"),
        ("width", "x", r"column width holds 'x' \(a str\)"),
        ("before", 3.7, r"column before holds 3\.7 \(a float\)"),
        ("before", 10, r"column before holds 10"),
        ("k", -1, r"column k holds -1"),
    ],
)
def test_a_hostile_unit_tokens_row_is_refused_by_name(
    tmp_path: Path, column: str, value: object, said: str
) -> None:
    model, loader = _gpt()
    path = tmp_path / "lm"
    with nbviz.Run(path) as run:
        run.evaluate(3, model, loader, units_layer="blocks.0.mlp.fc")
    conn = sqlite3.connect(path / DB_NAME)
    with conn:
        conn.execute(f"UPDATE unit_tokens SET {column} = ?", (value,))
    conn.close()
    with nbviz.open_run(path) as run:
        # the reader's StoredValueError, told as a damaged file's
        with pytest.raises(RunFileError, match=r"'blocks\.0\.mlp\.fc' at step 3: " + said):
            run.unit_tokens("blocks.0.mlp.fc")


def test_the_budget_goes_to_block_outputs_and_mlp_units_and_what_is_left_out_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embeddings only when named; a stack's block outputs first, then activation
    functions' outputs, then the rest; the layers left out are in meta and the notice."""
    from nbviz.recording import unit_tokens

    monkeypatch.setattr(unit_tokens, "MAX_TOP_TOKEN_UNITS", 120)
    model, loader = _gpt(blocks=3)
    with nbviz.Run(tmp_path / "lm") as run:
        _watch(run, model)
        run.evaluate(0, model, loader)
        run.flush()
        # 3 block outputs (48 units), then the first MLP's activation (64): 112 of 120
        kept = ["blocks.0", "blocks.0.mlp.act", "blocks.1", "blocks.2"]
        assert run.top_token_layers() == kept
        left = run.meta("top_tokens_left_out")["val"]
        assert left["step"] == 0 and left["layers"]["tok"] == "embedding"
        assert left["layers"]["blocks.2.mlp.act"] == "budget"
        assert "blocks.0.ln1" in left["layers"] and "blocks.0" not in left["layers"]
        lb = nbviz.LayerBrowser(run, selected_layer="blocks.1.mlp.act", live=False)
        notice = lb.unit_samples["notice"]
        assert notice.startswith("No top tokens of 'blocks.1.mlp.act': the evaluation of step 0")
        assert "120 units in all" in notice and "tok" in notice and "blocks.2.mlp.act" in notice
        lb.selected_layer = "tok"
        assert "each token's own vector" in lb.unit_samples["notice"]
        lb.close()
        # named, an embedding is kept; it counts in the budget like any layer
        run.evaluate(1, model, loader, units_layer="tok")
        run.flush()
        assert run.top_token_steps("tok").tolist() == [1]
        assert "tok" not in run.meta("top_tokens_left_out")["val"]["layers"]


def test_units_layer_counts_in_the_budget_and_one_too_wide_is_refused_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbviz.recording import unit_tokens

    monkeypatch.setattr(unit_tokens, "MAX_TOP_TOKEN_UNITS", 20)
    model, loader = _gpt()
    with nbviz.Run(tmp_path / "lm") as run:
        _watch(run, model)
        with pytest.warns(UserWarning, match=r"units_layer 'head' has more units than the 20"):
            run.evaluate(0, model, loader, units_layer="head")  # 24 units: a vocabulary
        run.flush()
        # 16-unit layers fill the rest: ln1 first, then no more fits
        assert run.top_token_layers() == ["blocks.0.ln1"]
        assert run.meta("top_tokens_left_out")["val"]["layers"]["head"] == "width"
        assert len(run.embeddings(0, layer="head", kind="units")[0]) == 4  # its means are kept


def test_units_layer_is_the_module_itself_first_in_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module given as ``units_layer`` is found among the watched ones by identity
    (recorded under the probe's name for it) and takes its units first: here all of them."""
    from nbviz.recording import unit_tokens

    monkeypatch.setattr(unit_tokens, "MAX_TOP_TOKEN_UNITS", 64)
    model, loader = _gpt()
    with nbviz.Run(tmp_path / "lm") as run:
        run.watch(model, every=1, name="D")
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        lm_steps(run, model, opt, torch.Generator().manual_seed(1), 1, batch=4)
        run.evaluate(0, model, loader, units_layer=model.blocks[0].mlp.fc)
        run.flush()
        assert run.top_token_layers() == ["D.blocks.0.mlp.fc"]
        left = run.meta("top_tokens_left_out")["val"]["layers"]
        assert left["D.blocks.0.mlp.act"] == "budget" and left["D.tok"] == "embedding"
