"""Probes across ranks: two gloo ranks on the CPU, launched once with torchrun.

``tests/distributed/ddp_checks.py`` records three small DDP runs; the tests here
read them and replay the same training in this process over the two ranks'
concatenated batches, which is what the combined statistics must equal.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist
from torch import nn

import nbviz

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

SCRIPT = Path(__file__).parent / "distributed" / "ddp_checks.py"
LAUNCH_TIMEOUT_S = 300


def _script():
    spec = importlib.util.spec_from_file_location("ddp_checks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checks = _script()


def _launch(out: Path, *args: str) -> Path:
    """``torchrun --nproc_per_node=2`` (gloo, CPU) on the script; returns ``out``."""
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo is not available in this torch build")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={checks.WORLD}",
        str(SCRIPT),
        str(out),
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=env, check=False
    )
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three runs of the script."""
    return _launch(tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="module")
def launched_branch_free(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first run again, its statistics taken the accelerators' way."""
    return _launch(tmp_path_factory.mktemp("ddp-branch-free"), "--branch-free")


def _report(out: Path, rank: int) -> dict:
    return json.loads((out / f"rank{rank}.json").read_text())


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same training in one process, each step over both ranks' micro-batches joined."""
    path = tmp_path_factory.mktemp("ref") / "run"
    model = checks.make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = checks.train_data()
    with nbviz.Run(path) as run:
        run.watch(model, every=checks.EVERY, optimizer=opt)
        for step in range(checks.STEPS):
            opt.zero_grad()
            for m in range(checks.ACCUM):
                xb = torch.cat([x[step, m, r] for r in range(checks.WORLD)])
                yb = torch.cat([y[step, m, r] for r in range(checks.WORLD)])
                (nn.functional.cross_entropy(model(xb), yb) / checks.ACCUM).backward()
            opt.step()
            run.log(step, train_loss=0.0)
        ex, ey = checks.eval_data()
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(ex, ey), batch_size=8, shuffle=False
        )
        run.evaluate(checks.STEPS - 1, model, loader)
    return path


@pytest.mark.parametrize("runs", ["launched", "launched_branch_free"])
def test_combined_statistics_equal_one_process_over_the_global_batch(request, runs, reference):
    launched = request.getfixturevalue(runs)  # CPU reads, or the accelerators' way
    with nbviz.open_run(launched / "ddp") as ddp, nbviz.open_run(reference) as ref:
        for signal in ("activation", "gradient", "weight", "update"):
            got, want = ddp.stats(signal), ref.stats(signal)
            assert len(got) and len(got) == len(want), signal
            both = got.merge(want, on=["step", "layer", "signal"], suffixes=("", "_ref"))
            assert len(both) == len(want), f"{signal}: layers or steps differ"
            assert (both["count"] == both["count_ref"]).all(), signal
            for col in ("mean", "std", "min", "max", "norm", "zero_frac", "rel"):
                np.testing.assert_allclose(
                    both[col].to_numpy(float),
                    both[f"{col}_ref"].to_numpy(float),
                    rtol=1e-4,
                    atol=1e-6,
                    err_msg=f"{signal} {col}",
                )
        # activation counts are the global batch: both ranks' micro-batches
        first = ddp.stats("activation", layer="0")
        assert set(first["count"]) == {checks.WORLD * checks.ACCUM * checks.BATCH * 16}


@pytest.mark.parametrize("runs", ["launched", "launched_branch_free"])
def test_combined_histograms_and_unit_maps_equal_one_process(request, runs, reference):
    launched = request.getfixturevalue(runs)  # CPU reads, or the accelerators' way
    with nbviz.open_run(launched / "ddp") as ddp, nbviz.open_run(reference) as ref:
        for signal in ("activation", "gradient", "weight"):
            for layer in ref.recorded_layers(signal, table="histograms"):
                for step in ref.histogram_steps(layer, signal):
                    edges, counts = ddp.histogram(layer, signal, int(step))
                    ref_edges, ref_counts = ref.histogram(layer, signal, int(step))
                    assert counts.sum() == ref_counts.sum(), (layer, signal, step)
                    if signal == "gradient" and "." in layer:
                        # a parameter gradient's range comes from its first measurement:
                        # here the first micro-batch's partial sum, under DDP the step's
                        # synchronised total (no_sync backwards hold local partial sums)
                        continue
                    np.testing.assert_allclose(edges, ref_edges, rtol=1e-5, atol=1e-7)
                    # values a rounding apart from a bin edge may land in the next bin
                    assert np.abs(counts - ref_counts).sum() <= 2, (layer, signal, step)
        steps, got = ddp.unit_stats("1", "zero_frac")
        ref_steps, want = ref.unit_stats("1", "zero_frac")
        assert list(steps) == list(ref_steps)
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_only_rank_0_writes_the_run(launched):
    rank0, rank1 = _report(launched, 0), _report(launched, 1)
    assert rank1["writer_threads"] == []  # rank 1 never opened a writer
    with nbviz.open_run(launched / "ddp") as run:
        scalars = run.scalars()
        assert set(scalars.loc[scalars["name"] == "rank", "value"]) == {0.0}
        stored = scalars.loc[scalars["name"] == "train_loss", "value"].to_numpy()
        np.testing.assert_allclose(stored, rank0["losses"])
        assert not np.allclose(stored, rank1["losses"])
    for name in ("ddp", "nan"):
        files = {p.name for p in (launched / name).iterdir()}
        assert files <= {"run.sqlite", "run.sqlite-wal", "run.sqlite-shm"}, files


def test_names_drop_the_ddp_module_prefix(launched):
    report = _report(launched, 0)
    assert report["layers"] == ["0", "1", "2"]
    assert report["params"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with nbviz.open_run(launched / "ddp") as run:
        assert not any(name.startswith("module") for name in run.stats("weight")["layer"])


def test_evaluation_gathers_every_sample_once_onto_rank_0(launched, reference):
    rank0, rank1 = _report(launched, 0), _report(launched, 1)
    # the sampler repeated a sample to give both ranks the same count
    sampled = rank0["eval_ids"] + rank1["eval_ids"]
    assert len(sampled) > checks.EVAL_SAMPLES and set(sampled) == set(range(checks.EVAL_SAMPLES))
    assert rank0["metrics"] == rank1["metrics"]
    step = checks.STEPS - 1
    with nbviz.open_run(launched / "ddp") as run, nbviz.open_run(reference) as ref:
        got = run.predictions(step).sort_values("id").reset_index(drop=True)
        want = ref.predictions(step).sort_values("id").reset_index(drop=True)
        assert got["id"].tolist() == list(range(checks.EVAL_SAMPLES))
        assert (got["label"] == want["label"]).all()
        np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-4, atol=1e-6)
        ids, matrix = run.embeddings(step)
        ref_ids, ref_matrix = ref.embeddings(step)
        order, ref_order = np.argsort(ids), np.argsort(ref_ids)
        assert list(ids[order]) == list(ref_ids[ref_order])
        np.testing.assert_allclose(matrix[order], ref_matrix[ref_order], rtol=1e-4, atol=1e-6)
        scalars = run.scalars().set_index("name")
        assert scalars.loc["val_loss", "value"] == pytest.approx(rank0["metrics"]["val_loss"])
        assert len(run.samples()) == checks.EVAL_SAMPLES


def test_a_parameter_changed_on_rank_1_is_a_rank_divergence(launched):
    with nbviz.open_run(launched / "div") as run:
        findings = run.diagnose()
    found = findings[findings["check"] == "rank_divergence"]
    params = found[found["severity"] == "error"]
    assert len(params) == 1, found[["layer", "severity", "message"]]
    row = params.iloc[0]
    assert row["layer"] == "3" and row["step"] == checks.DIV_STEP
    assert row["evidence"]["tensor"] == "3.bias" and row["evidence"]["ranks"] == [1]
    assert "rank 1" in row["message"]
    # BatchNorm statistics differ by rank too, and DDP broadcasts rank 0's: worth knowing
    buffers = found[found["evidence"].map(lambda e: e["kind"] == "buffer")]
    assert set(buffers["evidence"].map(lambda e: e["tensor"])) == {
        "1.running_mean",
        "1.running_var",
    }
    assert set(buffers["severity"]) == {"info"}


def test_rank_shards_hold_each_ranks_own_statistics(launched):
    with nbviz.open_run(launched / "div") as main:
        combined = main.stats("activation", layer="0")["count"]
    for rank in range(checks.WORLD):
        with nbviz.open_run(launched / "div" / "ranks" / str(rank)) as shard:
            own = shard.stats("activation", layer="0")["count"]
            assert (own.to_numpy() * checks.WORLD == combined.to_numpy()).all()
            assert shard.meta("distributed")["rank"] == rank
            assert "1" in set(shard.layers()["name"])  # a run of its own: the model summary too


def test_a_nan_on_rank_1_is_reported_with_rank_1(launched):
    with nbviz.open_run(launched / "nan") as run:
        events = run.events("nonfinite")
        findings = run.diagnose()
    first = events[(events["layer"] == "0") & (events["signal"] == "activation")].iloc[0]
    assert first["step"] == checks.NAN_STEP
    assert first["detail"]["rank"] == 1
    assert set(events["step"]) == {checks.NAN_STEP}  # rank 1 saw everything first
    origin = findings[findings["check"] == "nonfinite"].iloc[0]
    assert origin["step"] == checks.NAN_STEP and origin["layer"] == "0"
    assert f"step {checks.NAN_STEP} on rank 1" in origin["message"]
    assert origin["evidence"]["origin"]["rank"] == 1


def test_distributed_true_without_a_process_group_says_what_to_do(tmp_path):
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        nbviz.Run(tmp_path / "run", distributed=True)
    with pytest.raises(ValueError, match="rank_shards=True needs torch.distributed"):
        with nbviz.Run(tmp_path / "run") as run:
            run.watch(nn.Linear(2, 2), rank_shards=True)


def test_single_process_runs_record_no_distributed_meta(tmp_path):
    with nbviz.Run(tmp_path / "run") as run:
        model = nn.Linear(3, 2)
        run.watch(model, every=1)
        model(torch.randn(4, 3)).sum().backward()
        run.log(0, loss=0.0)
    with nbviz.open_run(tmp_path / "run") as run:
        assert run.meta("distributed") is None
        assert run.diagnose().query("check == 'rank_divergence'").empty
        assert isinstance(run.stats("activation"), pd.DataFrame)
