"""The background writer: batching, back-pressure, errors, flush and close."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from nbviz.store import DB_NAME, Reader, Writer, WriterError


def _count(run: Path, table: str) -> int:
    conn = sqlite3.connect(run / DB_NAME)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def _wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def test_insert_returns_at_once_and_flush_commits_everything(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run, commit_interval=60.0) as w:
        for step in range(200):
            w.insert("scalars", [("loss", step, 1.0 / (step + 1), float(step))])
        w.flush()
        assert _count(run, "scalars") == 200
    assert _count(run, "scalars") == 200


def test_rows_are_committed_within_the_commit_interval_without_a_flush(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run, commit_interval=0.05) as w:
        w.insert("scalars", [("loss", 0, 1.0, 0.0)])
        assert _wait_until(lambda: _count(run, "scalars") == 1, timeout=3.0)
        w.insert("scalars", [("loss", 1, 1.0, 0.0)])
        assert _wait_until(lambda: _count(run, "scalars") == 2, timeout=3.0)


def test_insert_or_replace_keeps_the_last_row_per_key(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run) as w:
        w.insert("scalars", [("loss", 0, 1.0, 0.0)])
        w.insert("scalars", [("loss", 0, 2.0, 0.0)])
    with Reader(run) as r:
        assert r.scalars()["value"].tolist() == [2.0]


def test_execute_runs_in_order_with_inserts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run) as w:
        w.insert("scalars", [("loss", s, 1.0, 0.0) for s in range(10)])
        w.execute("DELETE FROM scalars WHERE step >= ?", (5,))
        w.insert("scalars", [("loss", 7, 1.0, 0.0)])
    with Reader(run) as r:
        assert r.scalars()["step"].tolist() == [0, 1, 2, 3, 4, 7]


def test_unknown_tables_and_wrong_row_widths_are_refused_at_once(tmp_path: Path) -> None:
    with Writer(tmp_path / "run") as w:
        with pytest.raises(ValueError, match="unknown table 'scalar'; known tables: meta, scalars"):
            w.insert("scalar", [("loss", 0, 1.0, 0.0)])
        with pytest.raises(
            ValueError, match=r"row 1 for 'scalars' has 3 values but the table has 4 columns"
        ):
            w.insert("scalars", [("loss", 0, 1.0, 0.0), ("loss", 1, 1.0)])


def test_back_pressure_blocks_insert_and_bounds_the_queue(tmp_path: Path) -> None:
    run = tmp_path / "run"
    w = Writer(run, max_pending=10)
    w.flush()
    blocker = sqlite3.connect(run / DB_NAME, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the writer thread now waits for the lock
    try:
        w.insert("scalars", [("loss", s, 1.0, 0.0) for s in range(10)])
        second = threading.Thread(
            target=w.insert, args=("scalars", [("loss", s, 1.0, 0.0) for s in range(10, 20)])
        )
        second.start()
        second.join(timeout=0.3)
        assert second.is_alive(), "insert should wait while the queue is full"
        assert w.pending <= 10
    finally:
        blocker.execute("COMMIT")
        blocker.close()
    second.join(timeout=10)
    assert not second.is_alive()
    w.close()
    assert _count(run, "scalars") == 20


def test_a_tiny_queue_still_writes_everything_with_bounded_pending_rows(tmp_path: Path) -> None:
    run = tmp_path / "run"
    blob = np.zeros(128, dtype="<i8").tobytes()  # 1 KiB per row
    peak_rows = peak_bytes = 0
    with Writer(run, max_pending=8, max_pending_bytes=16 << 10) as w:
        for step in range(2000):
            w.insert("histograms", [(step, "fc", "weight", -1.0, 1.0, blob, 0, 0, 0)])
            peak_rows = max(peak_rows, w.pending)
            peak_bytes = max(peak_bytes, w._state.pending_bytes)
    assert peak_rows <= 8 and peak_bytes <= 16 << 10
    assert _count(run, "histograms") == 2000


def test_an_error_in_the_writer_thread_surfaces_on_the_next_flush(tmp_path: Path) -> None:
    run = tmp_path / "run"
    w = Writer(run)
    # sqlite cannot bind an object; the other rows are still written
    w.insert("scalars", [("loss", 0, 1.0, 0.0), ("loss", 1, object(), 0.0), ("loss", 2, 3.0, 0.0)])
    with pytest.raises(
        WriterError,
        match=r"inserting into .scalars.: 1 of 3 row\(s\) failed, "
        r"the first being .*\w+Error: .*parameter",
    ):
        w.flush()
    w.flush()  # reported once; the writer goes on
    w.close()
    with Reader(run) as r:
        assert r.scalars()["step"].tolist() == [0, 2]


def test_an_error_in_the_writer_thread_surfaces_on_the_next_insert(tmp_path: Path) -> None:
    w = Writer(tmp_path / "run")
    w.insert("layer_stats", [(0, None, "weight", 1, 0, 0, 0, 0, 0, 0, 0, None)])
    with pytest.raises(WriterError, match="'layer_stats'.*IntegrityError.*NOT NULL"):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            w.insert("scalars", [("loss", 0, 1.0, 0.0)])
            time.sleep(0.005)
    w.close()


def test_an_error_in_the_writer_thread_surfaces_on_close(tmp_path: Path) -> None:
    w = Writer(tmp_path / "run")
    w.execute("INSERT INTO no_such_table VALUES (1)")
    with pytest.raises(WriterError, match="no_such_table.*OperationalError"):
        w.close()
    w.close()  # idempotent


def test_close_is_idempotent_and_later_writes_are_refused(tmp_path: Path) -> None:
    w = Writer(tmp_path / "run")
    w.insert("scalars", [("loss", 0, 1.0, 0.0)])
    w.close()
    w.close()
    assert w.closed
    with pytest.raises(RuntimeError, match="is closed"):
        w.insert("scalars", [("loss", 1, 1.0, 0.0)])
    assert _count(tmp_path / "run", "scalars") == 1


def test_flush_times_out_when_the_database_stays_locked(tmp_path: Path) -> None:
    run = tmp_path / "run"
    w = Writer(run)
    w.flush()
    blocker = sqlite3.connect(run / DB_NAME, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        w.insert("scalars", [("loss", 0, 1.0, 0.0)])
        with pytest.raises(TimeoutError, match="not committed after 0.2 s"):
            w.flush(timeout=0.2)
    finally:
        blocker.execute("COMMIT")
        blocker.close()
    w.close()
    assert _count(run, "scalars") == 1


def test_a_writer_that_is_dropped_without_close_still_commits(tmp_path: Path) -> None:
    run = tmp_path / "run"
    w = Writer(run, commit_interval=60.0)
    w.insert("scalars", [("loss", 0, 1.0, 0.0)])
    del w  # the finalizer flushes and stops the thread
    assert _count(run, "scalars") == 1


def test_a_bad_row_in_a_large_batch_costs_only_that_row(tmp_path: Path) -> None:
    run = tmp_path / "run"
    rows = [("loss", s, float(s), 0.0) for s in range(5000)]
    rows[3000] = ("loss", 3000, [1, 2], 0.0)
    w = Writer(run)
    w.insert("scalars", rows)
    with pytest.raises(
        WriterError,
        match=r"1 of 2048 row\(s\) failed, the first being "
        r"\('loss', 3000, \[1, 2\], 0.0\)",
    ):
        w.flush()
    w.close()
    assert _count(run, "scalars") == 4999


def test_writer_keeps_up_with_many_small_batches(tmp_path: Path) -> None:
    run = tmp_path / "run"
    layers = [f"layer{i}" for i in range(50)]
    with Writer(run) as w:
        for step in range(200):
            w.insert(
                "layer_stats",
                [
                    (step, la, "activation", 10, 0.0, 1.0, -1.0, 1.0, 0.0, 0, 1.0, None)
                    for la in layers
                ],
            )
    assert _count(run, "layer_stats") == 200 * 50
