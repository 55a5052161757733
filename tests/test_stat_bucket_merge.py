"""The layer statistics' buckets, added to as rows arrive, equal buckets computed afresh.

A commit whose statistics rows all lie above every earlier row adds them to the
buckets they fall in (:func:`nbviz.store.summaries._merge_stats`); any other
commit recomputes its buckets from the rows. Whatever the order of the writes,
the buckets must be what :func:`~nbviz.store.summaries.rebuild_all` computes from
the stored rows: counts, extremes and steps exactly, sums to rounding.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from nbviz.store import DB_NAME, Writer
from nbviz.store.summaries import rebuild_all

LAYERS = ("enc.0", "enc.1", "head")
COLUMNS = (
    "level, bucket, sid, first_step, last_step, n, mean_total, mean_n, std_total, std_n, "
    "min, max, norm, zero_total, zero_n, rel_total, rel_n, nonfinite"
)
EXACT = {"level", "bucket", "sid", "first_step", "last_step", "n", "mean_n", "std_n"}
EXACT |= {"min", "max", "norm", "zero_n", "rel_n", "nonfinite"}


def _row(step: int, layer: str, signal: str = "activation", salt: float = 0.0) -> tuple:
    """A statistics row with a NaN mean, an infinite std, no norm or no min now and then."""
    k = step * 7 + len(layer) + salt
    mean = float("nan") if step % 29 == 3 else math.sin(k)
    std = float("inf") if step % 31 == 5 else 1.0 + math.cos(k) ** 2
    low = None if step % 37 == 1 else -abs(math.sin(k / 3))
    norm = None if step % 11 == 0 else abs(math.cos(k / 5)) * 10
    rel = None if step % 2 else 1e-3 * (1 + math.sin(k))
    nonfinite = 2 if step % 29 == 3 else 0
    return (
        step,
        layer,
        signal,
        64,
        mean,
        std,
        low,
        4.0 + step % 3,
        0.1 * (step % 9),
        nonfinite,
        norm,
        rel,
    )


def _buckets(conn: sqlite3.Connection) -> list[dict]:
    names = [c.strip() for c in COLUMNS.split(",")]
    rows = conn.execute(f"SELECT {COLUMNS} FROM stat_buckets ORDER BY level, bucket, sid")
    return [dict(zip(names, row, strict=True)) for row in rows]


def _assert_as_rebuilt(path: Path) -> None:
    live = sqlite3.connect(path / DB_NAME)
    kept = _buckets(live)
    fresh = sqlite3.connect(":memory:")
    live.backup(fresh)
    live.close()
    with fresh:
        rebuild_all(fresh)
    rebuilt = _buckets(fresh)
    assert len(kept) == len(rebuilt) and kept
    for got, want in zip(kept, rebuilt, strict=True):
        for column, value in want.items():
            if column in EXACT or value is None:
                assert got[column] == value, (column, got, want)
            else:
                assert got[column] == pytest.approx(value, rel=1e-12, abs=1e-12), (column, got)


def _write(path: Path, batches: list[list[tuple]]) -> None:
    with Writer(path, commit_interval=0.05) as w:
        for rows in batches:
            w.insert("layer_stats", rows)
            w.flush()  # one commit per batch


def test_buckets_added_to_batch_by_batch_equal_buckets_recomputed(tmp_path: Path) -> None:
    # forward in batches of 7 steps, from below zero: buckets of every level are shared
    # by many commits, and a step's NaN mean or missing norm must stay out of the sums
    steps = list(range(-40, 5000))
    batches = [
        [_row(s, layer) for s in steps[i : i + 7] for layer in LAYERS]
        for i in range(0, len(steps), 7)
    ]
    _write(tmp_path / "run", batches)
    _assert_as_rebuilt(tmp_path / "run")


def test_rewritten_and_late_steps_leave_the_buckets_as_if_recomputed(tmp_path: Path) -> None:
    forward = [
        [_row(s, layer) for s in range(i, i + 10) for layer in LAYERS] for i in range(0, 300, 10)
    ]
    batches = []
    for i, rows in enumerate(forward):
        batches.append(rows)
        if i % 4 == 3:  # a step written again with other values (replaces the old row)
            batches.append([_row(i * 10 - 15, "enc.1", salt=0.5)])
        if i % 5 == 4:  # a layer that comes late, below steps other layers have
            batches.append([_row(i * 10 - 3, "late")])
    batches.append([_row(s, "enc.0", "gradient") for s in range(250, 400)])  # a new signal
    batches.append([_row(s, "head") for s in range(100, 120)])  # a stretch written again
    _write(tmp_path / "run", batches)
    _assert_as_rebuilt(tmp_path / "run")


def test_a_run_reopened_adds_to_the_buckets_it_left(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _write(
        path,
        [[_row(s, layer) for s in range(i, i + 16) for layer in LAYERS] for i in range(0, 192, 16)],
    )
    _write(
        path,
        [[_row(s, layer) for s in range(i, i + 8) for layer in LAYERS] for i in range(192, 600, 8)],
    )
    _assert_as_rebuilt(path)
    conn = sqlite3.connect(path / DB_NAME)
    (n,) = conn.execute(
        "SELECT n FROM stat_buckets WHERE level = 4 AND bucket = 0 LIMIT 1"
    ).fetchone()
    assert n == 600
