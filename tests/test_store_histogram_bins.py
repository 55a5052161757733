"""Histograms logged with their own (unequal) bins: kept exactly beside the uniform rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nbviz.store import DB_NAME, Reader, RunFileError, Writer
from nbviz.store.encoding import bins_blobs

STEPS = (0, 10, 20)
# exponential edges, as TensorBoard's default buckets are, and counts over them
EDGES = np.array([-1.0, -0.1, -0.01, 0.0, 0.01, 0.1, 1.0])
COUNTS = np.array([3, 40, 7, 9, 50, 2])
UNIFORM = np.array([10, 60, 41, 0], dtype="<i8")  # what the views draw: 4 bins on [-1, 1]


def _write(path: Path, counts: np.ndarray = COUNTS) -> None:
    with Writer(path) as w:
        for step in STEPS:
            w.insert(
                "histograms",
                [(step, "fc1.weight", "gradient", -1.0, 1.0, UNIFORM.tobytes(), 0, 0, 0)],
            )
            w.insert(
                "histogram_bins",
                [(step, "fc1.weight", "gradient", *bins_blobs(EDGES * (step + 1), counts))],
            )


def _damage(path: Path, step: int, edges: bytes | None = None, counts: bytes | None = None):
    conn = sqlite3.connect(path / DB_NAME)
    with conn:
        if edges is not None:
            conn.execute("UPDATE histogram_bins SET edges = ? WHERE step = ?", (edges, step))
        if counts is not None:
            conn.execute("UPDATE histogram_bins SET counts = ? WHERE step = ?", (counts, step))
    conn.close()


def test_logged_bins_come_back_exactly_and_the_uniform_rows_stay_what_views_read(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "run")
    with Reader(tmp_path / "run") as r:
        for step in STEPS:
            edges, counts = r.histogram("fc1.weight", "gradient", step)
            np.testing.assert_array_equal(edges, EDGES * (step + 1))
            np.testing.assert_array_equal(counts, COUNTS)
            assert edges.dtype == np.float64 and counts.dtype == np.int64
        rows = r.histogram_rows("fc1.weight", "gradient")
        assert rows.steps.tolist() == list(STEPS)
        np.testing.assert_array_equal(rows.counts, np.tile(UNIFORM, (3, 1)))
        at = r.histograms_at(10)
        np.testing.assert_array_equal(at["counts"].iloc[0], UNIFORM)
        step, edges, counts = r.histogram_before("fc1.weight", "gradient", 15)
        assert step == 10
        np.testing.assert_array_equal(edges, np.linspace(-1.0, 1.0, 5))
        np.testing.assert_array_equal(counts, UNIFORM)


def test_counts_that_are_not_whole_numbers_come_back_as_float64(tmp_path: Path) -> None:
    _write(tmp_path / "run", counts=COUNTS + 0.25)
    with Reader(tmp_path / "run") as r:
        _, counts = r.histogram("fc1.weight", "gradient", 0)
    assert counts.dtype == np.float64
    np.testing.assert_array_equal(counts, COUNTS + 0.25)


@pytest.mark.parametrize(
    ("edges", "counts", "fault"),
    [
        ([0.0, 1.0, 2.0], [1.0], "3 edges for 1 counts"),
        ([0.0, np.nan, 2.0], [1.0, 2.0], "a non-finite edge"),
        ([0.0, 2.0, 1.0], [1.0, 2.0], r"edges that decrease \(edge 2 is 1.0 after 2.0\)"),
        ([0.0, 1.0, 2.0], [1.0, -2.0], "a count that is negative or not finite"),
        ([0.0], [], "edges of shape"),
    ],
    ids=["lengths", "nan", "decreasing", "negative", "empty"],
)
def test_bins_that_are_not_a_histogram_are_refused_when_written(edges, counts, fault) -> None:
    with pytest.raises(ValueError, match=f"histogram bins: {fault}"):
        bins_blobs(edges, counts)


def _nan_edges() -> bytes:
    e = EDGES.copy()
    e[2] = np.nan
    return e.astype("<f8").tobytes()


@pytest.mark.parametrize(
    ("edges", "counts", "fault"),
    [
        (b"\x01\x02", None, "2 bytes of edges and 48 bytes of counts; expected n \\+ 1 and n"),
        (None, b"\x00" * 40, "56 bytes of edges and 40 bytes of counts"),
        (_nan_edges(), None, r"a non-finite edge \(nan\)"),
        (EDGES[::-1].astype("<f8").tobytes(), None, "edges that decrease"),
        (None, (-COUNTS).astype("<f8").tobytes(), "a count that is negative or not finite"),
    ],
    ids=["edges length", "counts length", "nan edge", "decreasing edges", "negative counts"],
)
def test_damaged_stored_bins_are_a_clear_error_naming_the_row(
    tmp_path: Path, edges, counts, fault
) -> None:
    _write(tmp_path / "run")
    _damage(tmp_path / "run", 10, edges, counts)
    with Reader(tmp_path / "run") as r:
        with pytest.raises(RunFileError) as caught:
            r.histogram("fc1.weight", "gradient", 10)
        message = str(caught.value)
        assert str(tmp_path / "run" / DB_NAME) in message
        assert "the logged bins of 'fc1.weight'/gradient at step 10 (histogram_bins)" in message
        assert caught.match(fault)
        # the other steps, and every read the views draw from, are untouched
        np.testing.assert_array_equal(r.histogram("fc1.weight", "gradient", 20)[1], COUNTS)
        rows = r.histogram_rows("fc1.weight", "gradient")
        np.testing.assert_array_equal(rows.counts[1], UNIFORM)
        assert r.histogram_before("fc1.weight", "gradient", 10)[0] == 10


def test_a_histogram_without_logged_bins_reads_its_uniform_row(tmp_path: Path) -> None:
    with Writer(tmp_path / "run") as w:
        w.insert("histograms", [(5, "conv1", "activation", 0.0, 2.0, UNIFORM.tobytes(), 0, 0, 0)])
    with Reader(tmp_path / "run") as r:
        edges, counts = r.histogram("conv1", "activation", 5)
    np.testing.assert_array_equal(edges, [0.0, 0.5, 1.0, 1.5, 2.0])
    np.testing.assert_array_equal(counts, UNIFORM)
