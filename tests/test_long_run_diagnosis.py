"""The diagnosis of a long run reads a bounded amount and still finds what is there.

The losses are read as their outline (exact ends, bucket means and peaks between
them) and a first NaN by index seeks; reads are counted in SQLite virtual-machine
steps (``count_vm_steps``), not timed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import nbviz
from nbviz.analysis.checks.losses import ENDS, WHOLE
from nbviz.store import Writer

SHORT, MIDDLE, LONG = 1000, 4000, 64000
SPIKE_AT = 30011
NAN_AT = 50003


def _loss(n_steps: int, seed: int = 0) -> np.ndarray:
    """A healthy noisy training loss: falling from 2.3 to about 0.1, minibatch noise."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n_steps)
    trend = 0.1 + 2.2 * np.exp(-steps / (n_steps / 8))
    return trend * (1 + 0.1 * rng.standard_normal(n_steps))


def _write(path: Path, loss: np.ndarray, *, val_every: int = 1000) -> Path:
    with Writer(path, commit_interval=0.2) as w:
        rows = []
        for step, value in enumerate(loss):
            rows.append(("train_loss", step, float(value), 0.0))
            rows.append(("lr", step, 0.01, 0.0))
            if step % val_every == val_every - 1:
                rows.append(("val_loss", step, float(value) * 1.1, 0.0))
            if len(rows) >= 20000:
                w.insert("scalars", rows)
                rows = []
        w.insert("scalars", rows)
    return path


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("long-diagnosis")
    return {n: _write(root / f"run-{n}", _loss(n)) for n in (SHORT, MIDDLE, LONG)}


@pytest.fixture(scope="module")
def troubled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A long run with one loss spike and, later, a NaN loss from which it stays NaN."""
    loss = _loss(LONG, seed=1)
    loss[SPIKE_AT] = 2.5
    loss[NAN_AT:] = math.nan
    return _write(tmp_path_factory.mktemp("long-troubled") / "run", loss)


def test_the_diagnosis_reads_about_as_much_of_a_run_sixteen_times_longer(
    healthy: dict[int, Path], count_vm_steps
) -> None:
    reads = {}
    for n, path in healthy.items():
        with nbviz.open_run(path) as run:
            reads[n], findings = count_vm_steps(run, run.diagnose)
            assert findings.empty, (n, findings[["id", "message"]].to_dict("records"))
    # both long runs are read as outlines: exact ends and at most WHOLE buckets between
    assert reads[LONG] <= 1.5 * reads[MIDDLE], reads
    # a run short enough to be read whole reads its rows (fewer than WHOLE) instead
    assert reads[LONG] <= 4 * reads[SHORT], reads


def test_a_spike_and_a_nan_in_a_long_run_are_found_at_their_exact_steps(
    troubled: Path, count_vm_steps
) -> None:
    with nbviz.open_run(troubled) as run:
        findings = run.diagnose()
        spikes = findings[findings["check"] == "loss_spikes"]
        assert list(spikes["step"]) == [SPIKE_AT], findings[["id", "message"]].to_dict("records")
        assert spikes["evidence"].iloc[0]["peak_value"] == pytest.approx(2.5)
        bad = findings[findings["check"] == "nonfinite"]
        assert list(bad["step"]) == [NAN_AT]
        assert bad["evidence"].iloc[0]["origin"] == {
            "name": "train_loss",
            "signal": "loss",
            "step": NAN_AT,
        }
        # the first NaN: two seeks, not a read of the 64k rows
        reads, first = count_vm_steps(run, lambda: run.first_nonfinite("train_loss"))
        assert first[0] == NAN_AT and math.isnan(first[1])
        assert reads < 1000, reads
        assert run.first_nonfinite("lr") is None
        with pytest.raises(ValueError, match="no scalar named 'los'"):
            run.first_nonfinite("los")


def test_a_loss_that_blows_up_midway_through_a_long_run_is_dated_within_a_bucket(
    tmp_path: Path,
) -> None:
    loss = _loss(LONG, seed=2)
    onset = 40000
    loss[onset:] = 3.0 * loss[0] * (1 + 0.05 * np.random.default_rng(3).random(LONG - onset))
    with nbviz.open_run(_write(tmp_path / "run", loss)) as run:
        findings = run.diagnose()
    high = findings[findings["check"] == "learning_rate_too_high"]
    assert len(high) == 1, findings[["id", "message"]].to_dict("records")
    assert onset <= high["step"].iloc[0] <= onset + 256
    assert high["severity"].iloc[0] == "error"  # it ends no lower than it started


def test_an_outline_holds_the_ends_as_logged_and_exact_bucket_means_between(
    healthy: dict[int, Path],
) -> None:
    loss = _loss(LONG)
    with nbviz.open_run(healthy[LONG]) as run:
        outline = run.scalar_outline("train_loss", WHOLE, ENDS)
        short = run.scalar_outline("train_loss", LONG + 1)
        with pytest.raises(ValueError, match="max_points"):
            run.scalar_outline("train_loss", 1)
    assert len(short) == LONG and (short["n"] == 1).all()
    np.testing.assert_allclose(short["value"], loss)
    assert len(outline) <= WHOLE + 2 * ENDS
    assert outline["step"].is_monotonic_increasing
    np.testing.assert_allclose(outline["value"][:ENDS], loss[:ENDS])
    np.testing.assert_allclose(outline["value"][-ENDS:], loss[-ENDS:])
    middle = outline[ENDS:-ENDS]
    assert (middle["n"] > 1).all()
    for row in middle.iloc[[0, len(middle) // 2, -1]].itertuples():
        rows = loss[row.step - row.n + 1 : row.step + 1]
        assert row.value == pytest.approx(rows.mean())
        assert row.peak == pytest.approx(rows.max())
        assert loss[row.peak_step] == pytest.approx(row.peak)


# -- the checks of layer statistics ---------------------------------------------------

MODULES = (("enc.0", "Linear"), ("act.0", "ReLU"), ("head", "Linear"))
PARAMS = ("enc.0.weight", "head.weight")


def _write_probed(
    path: Path, n_steps: int, dead_from: int | None = None, spike_at: int | None = None
) -> Path:
    """A run as a probe records it: every step's statistics of three layers and the
    zero fraction of each of the ReLU's 16 units (9 of them dead from ``dead_from``);
    at ``spike_at`` the loss spikes and the head's weight gradient jumps 10x."""
    rng = np.random.default_rng(0)
    with Writer(path, commit_interval=0.2) as w:
        w.set_meta(
            "model",
            {
                "modules": [
                    {"name": m, "type": t, "depth": 1, "shape": [32, 16], "watched": True}
                    for m, t in MODULES
                ],
                "forward_order": [m for m, _ in MODULES],
            },
        )
        w.set_meta(
            "probe",
            {
                "every": 1,
                "signals": ["activations", "gradients", "weights"],
                "layers": [m for m, _ in MODULES],
                "params": [{"name": p, "shape": [16, 16], "requires_grad": True} for p in PARAMS],
            },
        )
        loss = _loss(n_steps)
        if spike_at is not None:
            loss[spike_at] = 2.5
        for lo in range(0, n_steps, 2000):
            scalars, stats, units = [], [], []
            for s in range(lo, min(lo + 2000, n_steps)):
                scalars.append(("train_loss", s, float(loss[s]), 0.0))
                zero = (0.3 + 0.2 * rng.random(16)).astype("<f4")
                if dead_from is not None and s >= dead_from:
                    zero[:9] = 1.0
                units.append((s, "act.0", "zero_frac", zero.tobytes()))
                for m, _ in MODULES:
                    z = 0.2 + 0.01 * rng.random()
                    stats.append((s, m, "activation", 512, 0.5, 1.0, 0.0, 4.0, z, 0, 20.0, None))
                    stats.append(
                        (s, m, "gradient", 512, 0.0, 1e-3, -1e-2, 1e-2, 0.0, 0, 0.02, None)
                    )
                for p in PARAMS:
                    g = 0.02 * (1 + 0.1 * rng.random())
                    if s == spike_at and p == "head.weight":
                        g *= 10
                    stats.append((s, p, "gradient", 256, 0.0, 1e-3, -1e-2, 1e-2, 0.0, 0, g, None))
                    stats.append((s, p, "weight", 256, 0.0, 0.1, -0.4, 0.4, 0.0, 0, 1.6, None))
                    stats.append(
                        (s, p, "update", 256, 0.0, 1e-4, -1e-3, 1e-3, 0.0, 0, 1.6e-3, 1e-3)
                    )
            w.insert("scalars", scalars)
            w.insert("layer_stats", stats)
            w.insert("unit_stats", units)
    return path


def test_the_checks_of_layer_statistics_read_a_bounded_number_of_captures(
    tmp_path: Path, count_vm_steps
) -> None:
    from nbviz.analysis.checks.model import WHOLE_CAPTURES, capture_steps

    reads = {}
    for n in (SHORT, 3 * WHOLE_CAPTURES, 24 * WHOLE_CAPTURES):
        with nbviz.open_run(_write_probed(tmp_path / f"run-{n}", n)) as run:
            reads[n], findings = count_vm_steps(run, run.diagnose)
            assert findings.empty, (n, findings[["id", "message"]].to_dict("records"))
            steps = capture_steps(run, "weight")
            if n <= WHOLE_CAPTURES:
                assert steps is None
            else:
                assert len(steps) <= WHOLE_CAPTURES and steps == sorted(set(steps))
                assert steps[0] == 0 and steps[-1] == n - 1
    long, middle = reads[24 * WHOLE_CAPTURES], reads[3 * WHOLE_CAPTURES]
    assert long <= 1.5 * middle, reads
    assert long <= 4 * reads[SHORT], reads


def test_units_that_die_midway_through_a_long_run_are_dated_at_the_captures_read(
    tmp_path: Path,
) -> None:
    from nbviz.analysis.checks.model import WHOLE_CAPTURES

    n = 24 * WHOLE_CAPTURES
    onset = n // 2 + 7
    with nbviz.open_run(_write_probed(tmp_path / "run", n, dead_from=onset)) as run:
        findings = run.diagnose()
    dead = findings[findings["check"] == "dead_units"]
    assert list(dead["layer"]) == ["act.0"], findings[["id", "message"]].to_dict("records")
    # the middle of the run is read every n / 1024 captures: the onset within one spacing
    assert onset <= dead["step"].iloc[0] <= onset + n // 1024 + 1


def test_a_spike_in_a_long_run_is_traced_at_its_exact_captures(tmp_path: Path) -> None:
    # every step recorded; the captures the other checks read skip the spike's step
    from nbviz.analysis.checks.model import WHOLE_CAPTURES, capture_steps

    n = 3 * WHOLE_CAPTURES
    with nbviz.open_run(_write_probed(tmp_path / "probe", n)) as run:
        sampled = set(capture_steps(run, "gradient"))
    spike = next(s for s in range(n // 2, n) if s not in sampled)
    with nbviz.open_run(_write_probed(tmp_path / "run", n, spike_at=spike)) as run:
        findings = run.diagnose()
    spikes = findings[findings["check"] == "loss_spikes"]
    assert list(spikes["step"]) == [spike], findings[["id", "message"]].to_dict("records")
    ev = spikes["evidence"].iloc[0]
    assert ev["origin_step"] == spike and ev["origin_layer"] == "head"
    assert ev["origin_jump"] == pytest.approx(10, rel=0.2)
    assert ev["origin_layers_jumped"] == 1 and not ev["origin_together"]


def test_a_spike_over_many_buckets_of_a_long_run_is_told_in_steps(tmp_path: Path) -> None:
    loss = _loss(LONG, seed=4)
    loss[SPIKE_AT : SPIKE_AT + 300] = 2.5 - 1e-4 * np.arange(300)  # each bucket peaks first
    with nbviz.open_run(_write(tmp_path / "run", loss)) as run:
        findings = run.diagnose()
    spikes = findings[findings["check"] == "loss_spikes"]
    assert len(spikes) == 1, findings[["id", "message"]].to_dict("records")
    f = spikes.iloc[0]
    assert f["step"] == SPIKE_AT
    # the values are bucket peaks: the span from the first to the last, not their count
    buckets = f["evidence"]["steps"]
    span = buckets[-1] - SPIKE_AT + 1
    assert 1 < len(buckets) < 20 and 100 <= span <= 300, buckets
    assert f"for {span} steps" in f["message"]


# -- massive activations and the residual stream, as a probe records them ---------


def _write_sequence_outputs(
    path: Path,
    n_steps: int,
    rms: Callable[[int, int], float],
    *,
    peaks: bool = False,
) -> Path:
    """A run recording six blocks' outputs ``blocks.<i>`` of shape (16, 64) at every step,
    block ``i``'s rms at step ``s`` being ``rms(s, i)``; with ``peaks``, the per-feature
    peaks of ``blocks.0`` (feature 7 at 500, the others about 1) and no per-feature means."""
    blocks = [f"blocks.{i}" for i in range(6)]
    count = 16 * 64
    rng = np.random.default_rng(0)
    with Writer(path, commit_interval=0.2) as w:
        w.set_meta(
            "model",
            {
                "modules": [
                    {"name": b, "type": "Block", "depth": 1, "shape": [8, 16, 64], "watched": True}
                    for b in blocks
                ],
                "forward_order": blocks,
            },
        )
        w.set_meta(
            "probe",
            {"every": 1, "signals": ["activations"], "layers": blocks, "params": []},
        )
        for lo in range(0, n_steps, 2000):
            scalars, stats, units = [], [], []
            for s in range(lo, min(lo + 2000, n_steps)):
                scalars.append(("train_loss", s, 1.0 + 0.01 * rng.random(), 0.0))
                for i, b in enumerate(blocks):
                    norm = rms(s, i) * math.sqrt(count)
                    stats.append(
                        (s, b, "activation", count, 0.0, 1.0, -1.0, 1.0, 0.0, 0, norm, None)
                    )
                if peaks:
                    peak = (1 + 0.1 * rng.random(64)).astype("<f4")
                    peak[7] = 500.0
                    units.append((s, "blocks.0", "max_abs", peak.tobytes()))
            w.insert("scalars", scalars)
            w.insert("layer_stats", stats)
            if units:
                w.insert("unit_stats", units)
    return path


def test_a_massive_feature_whose_mean_was_not_recorded_is_not_guessed(tmp_path: Path) -> None:
    from nbviz.analysis.checks import massive

    run = nbviz.open_run(
        _write_sequence_outputs(tmp_path / "run", 40, lambda s, i: 1.0, peaks=True)
    )
    (f,) = massive.check(run)
    assert f.layer == "blocks.0" and f.evidence["features"] == [7]
    assert f.evidence["spread"] is None and f.evidence["at_most_tokens"] is None
    assert "not recorded" in f.message
    assert "0%" not in f.message and "few tokens only" not in f.message
    assert f.severity == "info" and "from the first capture" in f.message


def test_massive_activations_read_a_bounded_number_of_captures(
    tmp_path: Path, count_vm_steps
) -> None:
    from nbviz.analysis.checks import massive
    from nbviz.analysis.checks.model import WHOLE_CAPTURES

    reads = {}
    for n in (3 * WHOLE_CAPTURES, 24 * WHOLE_CAPTURES):
        path = _write_sequence_outputs(tmp_path / f"run-{n}", n, lambda s, i: 1.0, peaks=True)
        with nbviz.open_run(path) as run:
            reads[n], found = count_vm_steps(run, lambda: massive.check(run))
            assert [f.evidence["features"] for f in found] == [[7]]
    assert reads[24 * WHOLE_CAPTURES] <= 1.5 * reads[3 * WHOLE_CAPTURES], reads


def test_residual_growth_is_told_from_the_blocks_read_and_dated_by_its_onset(
    tmp_path: Path,
) -> None:
    from nbviz.analysis.checks import residual

    onset = 25

    def rms(s: int, i: int) -> float:
        if i == 5:
            return math.nan  # the last block's output was not finite
        return 3.0**i if s >= onset else 1.0 + 0.01 * i

    run = nbviz.open_run(_write_sequence_outputs(tmp_path / "run", 40, rms))
    (f,) = residual.check(run)
    ev = f.evidence
    # a row of the layer browser: the last block; the stack named in the evidence
    assert f.layer == "blocks.5" and ev["stack"] == "blocks"
    assert ev["blocks_read"] == [f"blocks.{i}" for i in range(5)]
    assert "nan" not in f.message.lower()
    assert "to 'blocks.4' (81" in f.message and "adding 5 similar branches" in f.message
    assert f.step == onset and not ev["from_first_capture"]
    assert f"since step {onset} (x1.04 at the first capture)" in f.message
    json.dumps(ev, allow_nan=False)
