"""Everything written through the Writer comes back from the Reader as written."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbviz.store import MissingStepError, Reader, Writer, from_blob, to_blob
from nbviz.store.tables import TABLES

LAYERS = ["conv1", "conv2", "fc1", "fc2"]
BINS = 8


def _png(width: int, height: int) -> bytes:
    """A tiny valid grey PNG, built by hand."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\0" + bytes(range(width)) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _stat(step: int, layer: str, signal: str) -> tuple:
    rel = 0.01 * step if signal in ("weight", "update") else None
    return (step, layer, signal, 100, step + 0.5, 1.0, -2.0, 3.0, 0.25, 0, 7.0, rel)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    with Writer(path) as w:
        w.set_meta("config", {"lr": 0.1, "layers": LAYERS})
        w.set_meta("class_names", ["cat", "dog"])
        w.insert(
            "scalars",
            [
                ("train_loss", 0, 2.0, 100.0),
                ("train_loss", 10, float("nan"), 101.0),
                ("train_loss", 20, float("inf"), 102.0),
                ("train_loss", 30, float("-inf"), 103.0),
                ("lr", 0, 0.1, 100.0),
            ],
        )
        for step in (0, 10, 20):
            w.insert("layer_stats", [_stat(step, la, "activation") for la in LAYERS])
            w.insert("layer_stats", [_stat(step, f"{la}.weight", "weight") for la in LAYERS])
            w.insert(
                "histograms",
                [
                    (
                        step,
                        la,
                        "activation",
                        -1.0,
                        1.0,
                        np.arange(BINS, dtype="<i8").tobytes() * 1
                        if i
                        else (np.arange(BINS, dtype="<i8") + step).tobytes(),
                        1,
                        2,
                        0,
                    )
                    for i, la in enumerate(LAYERS)
                ],
            )
            w.insert(
                "unit_stats",
                [
                    (
                        step,
                        "conv1",
                        "zero_frac",
                        np.linspace(0, 1, 6, dtype="<f4").tobytes()
                        if step
                        else np.zeros(6, dtype="<f4").tobytes(),
                    ),
                ],
            )
        # stats with non-finite values: NaN mean, inf max
        w.insert(
            "layer_stats",
            [
                (
                    30,
                    "fc1",
                    "activation",
                    100,
                    float("nan"),
                    float("nan"),
                    float("-inf"),
                    float("inf"),
                    0.0,
                    5,
                    float("nan"),
                    None,
                ),
            ],
        )
        w.insert(
            "events",
            [
                ("nonfinite", "fc1", "activation", 30, json.dumps({"count": 5})),
            ],
        )
        w.insert(
            "predictions",
            [("val", 10, i, i % 2, (i + 1) % 2, 0.5 + i, 0.9) for i in range(4)]
            + [
                ("val", 20, i, i % 2, i % 2, float("nan") if i == 0 else 0.1, 0.99)
                for i in range(4)
            ]
            + [("train", 20, 0, 1, 1, 0.1, 0.5)],
        )
        probs = np.array([[0.9, 0.1], [0.2, 0.8]], dtype=np.float32)
        w.insert(
            "probabilities",
            [
                ("val", 20, np.array([5, 7], dtype="<i8").tobytes(), *to_blob(probs)),
            ],
        )
        image = _png(4, 3)
        arr = np.arange(6, dtype=np.int16).reshape(2, 3)
        w.insert(
            "samples",
            [
                ("val", 0, 1, "image", image, None, None, None),
                ("val", 1, 0, "array", *to_blob(arr), None),
                ("val", 2, None, "text", None, None, None, "a short review"),
            ],
        )
        for step in (10, 20):
            emb = np.full((3, 4), step, dtype=np.float32)
            w.insert(
                "embeddings",
                [
                    (
                        "val",
                        "fc1",
                        "embedding",
                        step,
                        np.array([0, 1, 2], "<i8").tobytes(),
                        *to_blob(emb),
                    ),
                ],
            )
        w.insert(
            "embeddings",
            [
                (
                    "val",
                    "fc2",
                    "embedding",
                    20,
                    np.array([0, 1], "<i8").tobytes(),
                    *to_blob(np.ones((2, 2), dtype=np.float64)),
                ),
                (
                    "val",
                    "fc1",
                    "units",
                    20,
                    np.array([0, 1, 2], "<i8").tobytes(),
                    *to_blob(np.zeros((3, 16), dtype=np.float16)),
                ),
            ],
        )
        w.insert("profiles", [(20, "forward", json.dumps({"conv1": 1.5}))])
    return path


def test_meta_round_trips_as_json(run: Path) -> None:
    with Reader(run) as r:
        assert r.meta("config") == {"lr": 0.1, "layers": LAYERS}
        assert r.meta("missing", default=3) == 3
        everything = r.meta()
        assert everything["class_names"] == ["cat", "dog"]
        assert {"schema_version", "created", "nbviz_version"} <= set(everything)


def test_scalars_keep_nan_and_infinities_sorted_by_name_then_step(run: Path) -> None:
    with Reader(run) as r:
        df = r.scalars()
        assert list(df.columns) == ["step", "name", "value", "wall_time"]
        assert list(df["name"]) == ["lr"] + ["train_loss"] * 4
        loss = r.scalars("train_loss")
        assert loss["step"].tolist() == [0, 10, 20, 30]
        values = loss["value"].to_numpy()
        assert values.dtype == np.float64
        assert values[0] == 2.0 and math.isnan(values[1])
        assert values[2] == math.inf and values[3] == -math.inf
        assert r.scalar_names() == ["lr", "train_loss"]


def test_unknown_scalar_names_raise_with_close_matches(run: Path) -> None:
    with Reader(run) as r, pytest.raises(ValueError, match="'train_los'.*train_loss"):
        r.scalars(["lr", "train_los"])


def test_stats_round_trip_with_nan_and_infinite_values(run: Path) -> None:
    with Reader(run) as r:
        df = r.stats("activation", "fc1")
        # the columns handed to Writer.insert, in their order
        assert tuple(df.columns) == TABLES["layer_stats"]
        assert df["step"].tolist() == [0, 10, 20, 30]
        assert df["nonfinite"].dtype == np.int64 and df["count"].dtype == np.int64
        last = df.iloc[-1]
        assert math.isnan(last["mean"]) and math.isnan(last["std"]) and math.isnan(last["norm"])
        assert last["min"] == -math.inf and last["max"] == math.inf
        assert last["nonfinite"] == 5
        assert df["rel"].isna().all()
        weights = r.stats("weight", "conv1.weight")
        np.testing.assert_allclose(weights["rel"], [0.0, 0.1, 0.2])


def test_stats_selects_steps_by_int_list_or_inclusive_range(run: Path) -> None:
    with Reader(run) as r:
        assert len(r.stats("activation")) == 3 * len(LAYERS) + 1
        assert r.stats("activation", steps=10)["layer"].tolist() == sorted(LAYERS)
        assert sorted(set(r.stats("activation", steps=[0, 20, 99])["step"])) == [0, 20]
        assert sorted(set(r.stats("activation", step_range=(10, 30))["step"])) == [10, 20, 30]
        assert r.steps("activation").tolist() == [0, 10, 20, 30]
        assert r.steps("weight").tolist() == [0, 10, 20]
        assert r.steps("gradient").tolist() == []
        with pytest.raises(ValueError, match="not both"):
            r.stats("activation", steps=[0], step_range=(0, 1))


def test_stats_at_returns_every_layer_and_signal_at_one_step(run: Path) -> None:
    with Reader(run) as r:
        df = r.stats_at(10)
        assert len(df) == 2 * len(LAYERS)
        assert set(df["signal"]) == {"activation", "weight"}
        assert (df["step"] == 10).all()
        assert len(r.stats_at(10, signal="weight")) == len(LAYERS)


def test_unknown_signal_lists_the_valid_ones(run: Path) -> None:
    with Reader(run) as r:
        for call in (
            lambda: r.steps("weights"),
            lambda: r.stats("weights"),
            lambda: r.histogram("fc1", "weights", 0),
        ):
            with pytest.raises(ValueError, match="'weights'.*activation, gradient, weight, update"):
                call()


def test_unknown_layer_names_close_matches(run: Path) -> None:
    with Reader(run) as r:
        with pytest.raises(ValueError, match="'conv_1'.*close matches: conv1"):
            r.stats("activation", "conv_1")
        with pytest.raises(ValueError, match="'conv1'.*signal 'weight'.*conv1.weight"):
            r.stats("weight", "conv1")
        with pytest.raises(ValueError, match="'fc3'.*close matches: fc2, fc1"):
            r.histogram("fc3", "activation", 0)


def test_missing_step_names_the_recorded_range(run: Path) -> None:
    with Reader(run) as r:
        with pytest.raises(KeyError, match=r"step 15.*0\.\.30 \(4 steps\).*nearest: 10, 20"):
            r.stats("activation", "fc1", steps=15)
        with pytest.raises(MissingStepError, match=r"step 5.*0\.\.30"):
            r.stats_at(5)
        with pytest.raises(ValueError, match=r"histogram for 'fc1' at step 15.*0\.\.20"):
            r.histogram("fc1", "activation", 15)
        with pytest.raises(KeyError, match=r"no histograms at step 15"):
            r.histograms_at(15)


def test_histogram_round_trips_edges_and_counts(run: Path) -> None:
    with Reader(run) as r:
        edges, counts = r.histogram("conv1", "activation", 20)
        np.testing.assert_allclose(edges, np.linspace(-1, 1, BINS + 1))
        assert counts.dtype == np.int64
        assert counts.tolist() == list(range(20, 20 + BINS))


def test_histogram_rows_stack_one_layer_over_time(run: Path) -> None:
    with Reader(run) as r:
        rows = r.histogram_rows("conv1", "activation")
        assert rows.steps.tolist() == [0, 10, 20]
        assert rows.counts.shape == (3, BINS)
        assert rows.counts[:, 0].tolist() == [0, 10, 20]
        assert rows.underflow.tolist() == [1, 1, 1] and rows.overflow.tolist() == [2, 2, 2]
        assert rows.lo.tolist() == [-1.0] * 3
        part = r.histogram_rows("conv1", "activation", step_range=(5, 20))
        assert part.steps.tolist() == [10, 20]


def test_histograms_at_returns_every_layer_at_one_step(run: Path) -> None:
    with Reader(run) as r:
        df = r.histograms_at(10)
        assert df["layer"].tolist() == sorted(LAYERS)
        assert all(c.shape == (BINS,) for c in df["counts"])
        assert df.set_index("layer").loc["conv1", "counts"][0] == 10


def test_unit_stats_round_trip_as_a_float32_matrix(run: Path) -> None:
    with Reader(run) as r:
        steps, values = r.unit_stats("conv1", "zero_frac")
        assert steps.tolist() == [0, 10, 20]
        assert values.dtype == np.float32 and values.shape == (3, 6)
        np.testing.assert_allclose(values[1], np.linspace(0, 1, 6))
        with pytest.raises(ValueError, match="conv1/zero_frac"):
            r.unit_stats("conv1", "zero_fraction")


def test_events_and_profiles_decode_their_json(run: Path) -> None:
    with Reader(run) as r:
        ev = r.events("nonfinite")
        assert ev[["kind", "layer", "signal", "step"]].values.tolist() == [
            ["nonfinite", "fc1", "activation", 30]
        ]
        assert ev["detail"][0] == {"count": 5}
        assert r.events("other").empty
        prof = r.profiles()
        assert prof["payload"][0] == {"conv1": 1.5}
        assert r.profiles(step=20)["name"].tolist() == ["forward"]


def test_predictions_default_to_the_latest_step_and_keep_nan_losses(run: Path) -> None:
    with Reader(run) as r:
        df = r.predictions()
        assert list(df.columns) == ["step", "id", "label", "pred", "loss", "confidence"]
        assert (df["step"] == 20).all() and df["id"].tolist() == [0, 1, 2, 3]
        assert math.isnan(df["loss"][0])
        assert r.predictions(10)["pred"].tolist() == [1, 0, 1, 0]
        assert r.predictions(split="train")["label"].tolist() == [1]
        assert r.prediction_steps("val").tolist() == [10, 20]
        assert r.predictions(split="test").empty
        with pytest.raises(KeyError, match=r"step 15.*10\.\.20"):
            r.predictions(15)


def test_probabilities_round_trip_or_are_none(run: Path) -> None:
    with Reader(run) as r:
        ids, probs = r.probabilities(20, "val")
        assert ids.tolist() == [5, 7]
        assert probs.dtype == np.float32
        np.testing.assert_allclose(probs, [[0.9, 0.1], [0.2, 0.8]])
        assert r.probabilities(10, "val") is None


def test_samples_round_trip_image_bytes_arrays_and_text_in_the_order_asked(run: Path) -> None:
    with Reader(run) as r:
        df = r.samples([2, 0, 1])
        assert df["id"].tolist() == [2, 0, 1]
        assert df["kind"].tolist() == ["text", "image", "array"]
        assert df["payload"][1] == _png(4, 3)
        assert df["payload"][1].startswith(b"\x89PNG")
        row = df.iloc[2]
        np.testing.assert_array_equal(
            from_blob(row["payload"], row["dtype"], row["shape"]),
            np.arange(6, dtype=np.int16).reshape(2, 3),
        )
        assert df["text"][0] == "a short review"
        assert pd.isna(df["label"][0]) and df["label"][1] == 1
        assert r.samples()["id"].tolist() == [0, 1, 2]
        assert r.sample_ids("val").tolist() == [0, 1, 2]
        with pytest.raises(KeyError, match=r"ids \[9\]"):
            r.samples([0, 9])


def test_embeddings_round_trip_by_step_layer_and_kind(run: Path) -> None:
    with Reader(run) as r:
        assert r.embedding_layers("val") == ["fc1", "fc2"]
        assert r.embedding_steps("val").tolist() == [10, 20]
        ids, m = r.embeddings(10)
        assert ids.tolist() == [0, 1, 2] and m.dtype == np.float32 and (m == 10).all()
        ids, m = r.embeddings(None, layer="fc2")
        assert ids.tolist() == [0, 1] and m.dtype == np.float64
        _, units = r.embeddings(20, kind="units")
        assert units.dtype == np.float16 and units.shape == (3, 16)
        with pytest.raises(KeyError, match=r"step 15.*10\.\.20"):
            r.embeddings(15)
        with pytest.raises(ValueError, match="'fc9'.*fc1"):
            r.embeddings(10, layer="fc9")


def test_projections_are_cached_in_the_run(run: Path) -> None:
    matrix = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    with Reader(run) as r:
        assert r.projection("fc1/10/pca") is None
        assert r.put_projection("fc1/10/pca", "val", "fc1", 10, "pca", {"n": 2}, matrix)
    with Reader(run) as r:
        got, meta = r.projection("fc1/10/pca")
        np.testing.assert_array_equal(got, matrix)
        assert meta["method"] == "pca" and meta["params"] == {"n": 2} and meta["step"] == 10


def test_projections_are_kept_in_memory_when_the_run_is_read_only(run: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("file permissions do not bind root")
    matrix = np.ones((3, 2), dtype=np.float32)
    for p in (run, *run.iterdir()):
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        with Reader(run) as r:
            assert r.stats_at(10) is not None
            assert r.put_projection("k", "val", "fc1", 10, "pca", {}, matrix) is False
            got, meta = r.projection("k")
            np.testing.assert_array_equal(got, matrix)
    finally:
        for p in (run, *run.iterdir()):
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_projections_fall_back_to_memory_when_the_run_refuses_writes(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    with Reader(run) as r:
        r.stats_at(0)  # this thread's read connection is open
        monkeypatch.setattr(sqlite3, "connect", refuse)
        assert r.put_projection("k", "val", "fc1", 10, "umap", {"k": 15}, np.ones((3, 2))) is False
        got, meta = r.projection("k")
        assert got.shape == (3, 2) and meta["params"] == {"k": 15}


def test_a_reader_sees_each_new_commit(tmp_path: Path) -> None:
    path = tmp_path / "run"
    with Writer(path) as w:
        w.insert("scalars", [("loss", 0, 1.0, 0.0)])
        w.flush()
        r = Reader(path)
        assert len(r.scalars()) == 1
        w.insert("scalars", [("loss", 1, 0.5, 1.0)])
        w.flush()
        assert r.scalars("loss")["step"].tolist() == [0, 1]
        r.close()


def test_a_reader_can_be_shared_between_threads(run: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with Reader(run) as r, ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda s: len(r.stats_at(s)), [0, 10, 20] * 10))
    assert results == [2 * len(LAYERS)] * 30


def test_a_projection_can_be_cached_while_a_writer_holds_a_transaction(tmp_path: Path) -> None:
    path = tmp_path / "run"
    with Writer(path, commit_interval=0.5) as w, Reader(path) as r:
        w.insert("scalars", [("loss", 0, 1.0, 0.0)])
        deadline = time.monotonic() + 5
        while w.pending and time.monotonic() < deadline:  # written, not yet committed
            time.sleep(0.005)
        assert r.put_projection("k", "val", "", 0, "pca", {}, np.zeros((2, 2), "<f4"))
        w.insert("scalars", [("loss", 1, 1.0, 0.0)])
    with Reader(path) as r:
        assert r.projection("k") is not None
        assert len(r.scalars()) == 2


def test_recorded_layers_are_listed_per_table_and_signal(run: Path) -> None:
    with Reader(run) as r:
        assert r.recorded_layers("activation") == sorted(LAYERS)
        assert r.recorded_layers("weight") == sorted(f"{la}.weight" for la in LAYERS)
        assert r.recorded_layers(table="unit_stats") == ["conv1"]
        assert r.splits() == ["train", "val"]
