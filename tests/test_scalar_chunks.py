"""Scalars packed in chunks: a zoom reads a handful of rows whatever the run's length, and the
chunks hold exactly what the scalars table holds (overwrites, out-of-order and sparse steps,
NaN and Inf, a run still being written, a run written before the chunks existed).

Reads are counted (rows and bytes handed from SQLite to Python), never timed.
"""

from __future__ import annotations

import json
import math
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nbviz
from nbviz.store import (
    DB_NAME,
    SCHEMA_VERSION,
    Reader,
    RunFileError,
    RunFileWarning,
    Writer,
    scalar_chunks,
    schema,
)
from nbviz.store.scalar_chunks import BUCKETS_PER_CHUNK, CHUNK_STEPS
from nbviz.store.writer import WriterError
from nbviz.widgets.scalar_points import window_points

SHORT, LONG = 4_000, 160_000
POINTS = 2000  # what LossCurves asks for per series (its max_points // 2)


def _loss(step: int) -> float:
    return 2.0 / (1 + step / 100) + 0.1 * math.sin(step)


def _write(path: Path, n_steps: int) -> Path:
    with Writer(path, commit_interval=0.5) as w:
        for lo in range(0, n_steps, 10_000):
            w.insert(
                "scalars",
                [("loss", s, _loss(s), 0.0) for s in range(lo, min(lo + 10_000, n_steps))],
            )
    return path


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Reader]]:
    root = tmp_path_factory.mktemp("chunks")
    out = {n: Reader(_write(root / f"run-{n}", n)) for n in (SHORT, LONG)}
    yield out
    for r in out.values():
        r.close()


def _counted(
    reader: Reader, monkeypatch: pytest.MonkeyPatch, action: Callable[[], Any]
) -> tuple[int, int, list[str], Any]:
    """``(rows, blob bytes, statements, result)`` of ``action()``: what SQLite handed over."""
    rows, nbytes, statements = [0], [0], []
    real = reader._q

    def q(sql: str, params: Any = ()) -> list[tuple]:
        got = real(sql, params)
        statements.append(sql)
        rows[0] += len(got)
        nbytes[0] += sum(len(v) for r in got for v in r if isinstance(v, bytes))
        return got

    with monkeypatch.context() as m:
        m.setattr(reader, "_q", q)
        result = action()
    return rows[0], nbytes[0], statements, result


def _as_before(reader: Reader, monkeypatch: pytest.MonkeyPatch, action: Callable[[], Any]) -> Any:
    """``action()`` read as a run without chunks is read: from its rows and buckets."""
    real = reader._holds
    with monkeypatch.context() as m:
        m.setattr(reader, "_holds", lambda table: table != "scalar_chunks" and real(table))
        return action()


def _same_points(a: Any, b: Any) -> None:
    assert (a.total, a.width) == (b.total, b.width)
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_array_equal(a.values, b.values)  # NaN and Inf where the other has them


@pytest.mark.parametrize("share", [0.01, 0.25, 1.0])
def test_a_zoom_reads_a_handful_of_rows_at_any_run_length(
    readers: dict[int, Reader], monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    counts = {}
    for n, r in readers.items():
        lo = int(n * (1 - share) / 2)
        hi = lo + max(int(n * share) - 1, 1)
        rows, nbytes, statements, (total, steps, _values) = _counted(
            r, monkeypatch, lambda r=r, lo=lo, hi=hi: window_points(r, "loss", POINTS, lo, hi)
        )
        counts[n] = rows
        assert not any("FROM scalars " in s for s in statements), statements  # never the rows
        if total <= POINTS:  # every step of the window, one on each side
            assert steps.tolist() == list(range(max(lo - 1, 0), min(hi + 2, n)))
            assert rows <= POINTS // CHUNK_STEPS + 3, (n, rows)
            assert nbytes <= rows * CHUNK_STEPS * 10
        else:  # the extremes of buckets, read in chunks of them
            assert len(statements) == 1
            assert rows <= POINTS // BUCKETS_PER_CHUNK + 2, (n, rows)
            assert nbytes <= rows * BUCKETS_PER_CHUNK * 56
    assert counts[LONG] <= max(counts[SHORT], 1) + POINTS // CHUNK_STEPS + 2, counts


def test_a_window_of_a_given_width_reads_as_many_rows_in_a_run_forty_times_longer(
    readers: dict[int, Reader], monkeypatch: pytest.MonkeyPatch
) -> None:
    for width in (300, 1500, 3000):
        rows = {
            n: _counted(
                r,
                monkeypatch,
                lambda r=r, w=width: window_points(r, "loss", POINTS, 1000, 1000 + w),
            )[0]
            for n, r in readers.items()
        }
        assert rows[LONG] == rows[SHORT], (width, rows)


def test_chunks_give_the_points_the_rows_and_buckets_give(
    readers: dict[int, Reader], monkeypatch: pytest.MonkeyPatch
) -> None:
    r = readers[LONG]
    for window in [
        (0, 10),
        (255, 256),
        (1000, 2999),
        (0, LONG - 1),
        (LONG - 5, LONG + 50),
        (90_000, 150_000),
        (3000, 2000),  # an empty range: only the rows beside it
    ]:
        for points in (2, 50, 2000):
            got = r.scalar_points("loss", points, window, edges=True)
            want = _as_before(
                r, monkeypatch, lambda p=points, w=window: r.scalar_points("loss", p, w, edges=True)
            )
            _same_points(got, want)


def _history(seed: int) -> list[list[tuple[int, float]]]:
    """Commits of ``(step, value)``: out of order, sparse, written again, NaN and +-Inf."""
    rng = np.random.default_rng(seed)
    special = [float("nan"), float("inf"), -float("inf")]
    commits = []
    for _ in range(12):
        steps = rng.choice(5000, size=int(rng.integers(1, 400)), replace=False)
        values = rng.standard_normal(len(steps))
        rows = [
            (int(s), special[int(s) % 3] if rng.random() < 0.05 else float(v))
            for s, v in zip(steps, values)
        ]
        commits.append(rows)
    return commits


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunks_follow_out_of_order_overwritten_and_non_finite_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    run = tmp_path / "run"
    with Writer(run, commit_interval=10) as w, Reader(run, must_exist=False) as r:
        for rows in _history(seed):
            w.insert("scalars", [("x", s, v, 0.0) for s, v in rows])
            w.flush()  # each its own commit: a chunk is changed, not only made
            for window in [(0, 4999), (100, 400), (2000, 2600), (4990, 6000)]:
                for points in (20, 2000):
                    got = r.scalar_points("x", points, window, edges=True)
                    want = _as_before(
                        r,
                        monkeypatch,
                        lambda p=points, w=window: r.scalar_points("x", p, w, edges=True),
                    )
                    _same_points(got, want)
        logged = r.scalars("x").set_index("step")["value"]
        got = r.scalar_points("x", 10_000, (0, 4999))
        assert got.width == 0 and got.steps.tolist() == logged.index.tolist()
        np.testing.assert_array_equal(got.values, logged.to_numpy())


def test_an_overwritten_step_shows_its_new_value(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "run") as run:
        for step in range(600):
            run.log(step, loss=1.0)
        run.flush()
        before = run.scalar_points("loss", 2000, (250, 260))
        run.log(255, loss=7.0, overwrite=True)
        run.log(256, loss=float("nan"), overwrite=True)
        run.flush()
        after = run.scalar_points("loss", 2000, (250, 260))
        wide = run.scalar_points("loss", 10, (0, 599))
    assert before.values.tolist() == [1.0] * 11
    values = dict(zip(after.steps.tolist(), after.values.tolist()))
    assert values[255] == 7.0 and math.isnan(values[256]) and values[257] == 1.0
    assert wide.width > 0 and 7.0 in wide.values.tolist()  # the new maximum, in its bucket
    assert np.isnan(wide.values[wide.steps.tolist().index(256)])  # the line breaks there


def test_non_finite_values_stay_non_finite_never_zero(tmp_path: Path) -> None:
    nan, inf = float("nan"), float("inf")
    rows = [("x", s, 0.5, 0.0) for s in range(1000)]
    rows[300], rows[301], rows[302] = (
        ("x", 300, nan, 0.0),
        ("x", 301, inf, 0.0),
        ("x", 302, -inf, 0.0),
    )
    with Writer(tmp_path / "run") as w:
        w.insert("scalars", rows)
    with Reader(tmp_path / "run") as r:
        got = r.scalar_points("x", 2000, (299, 303))
        assert got.steps.tolist() == [299, 300, 301, 302, 303]
        assert got.values[0] == 0.5 and np.isnan(got.values[1])
        assert got.values[2] == inf and got.values[3] == -inf and got.values[4] == 0.5
        bucketed = r.scalar_points("x", 10, (0, 999))
        at = dict(zip(bucketed.steps.tolist(), bucketed.values.tolist()))
        assert math.isnan(at[300]) and 0.0 not in at.values()


def test_a_run_being_written_shows_its_newest_steps(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run, commit_interval=10) as w, Reader(run, must_exist=False) as r:
        step = 0
        for grow in (1, 10, 300, 1000, 5):
            w.insert("scalars", [("x", s, float(s), 0.0) for s in range(step, step + grow)])
            step += grow
            w.flush()
            newest = r.scalar_points("x", 2000, (max(step - 50, 0), step + 100), edges=True)
            assert newest.steps[-1] == step - 1 and newest.values[-1] == step - 1
            assert newest.steps.tolist() == list(range(max(step - 51, 0), step))
            whole = r.scalar_points("x", 30, (0, step + 100))
            assert whole.total == step and whole.steps.max() == step - 1


def test_chunks_add_about_fourteen_bytes_per_logged_step(readers: dict[int, Reader]) -> None:
    conn = sqlite3.connect(readers[LONG].run_dir / DB_NAME)
    try:
        steps = conn.execute("SELECT sum(length(points)) FROM scalar_chunks").fetchone()[0]
        buckets = conn.execute("SELECT sum(length(buckets)) FROM scalar_bucket_chunks").fetchone()[
            0
        ]
        rows = conn.execute("SELECT count(*) FROM scalar_chunks").fetchone()[0]
    finally:
        conn.close()
    assert steps == 10 * LONG and rows == LONG // CHUNK_STEPS + (LONG % CHUNK_STEPS > 0)
    assert buckets <= 3.8 * LONG


def _as_schema_7(run: Path) -> None:
    """The run as nbviz wrote it at schema 7: no chunk tables, the version set back."""
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        for table in schema.READ_AS_IS[7]:
            conn.execute(f"DROP TABLE {table}")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(7),))
    conn.close()


def test_a_run_written_before_chunks_zooms_the_same_read_only_and_once_migrated(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    rows = [("x", s, _loss(s) if s != 777 else float("nan"), 0.0) for s in range(0, 9000, 3)]
    with Writer(run) as w:
        w.insert("scalars", rows)
    windows = [(0, 100), (700, 900), (0, 8999), (8000, 9500)]
    with Reader(run) as r:
        want = [r.scalar_points("x", p, w, edges=True) for w in windows for p in (20, 2000)]
    assert schema.READ_AS_IS[7] == ("scalar_chunks", "scalar_bucket_chunks")
    _as_schema_7(run)
    with Reader(run) as old:  # read as it is, from its rows
        assert not old._holds("scalar_chunks")
        got = [old.scalar_points("x", p, w, edges=True) for w in windows for p in (20, 2000)]
    for a, b in zip(got, want):
        _same_points(a, b)
    with Writer(run):  # a writer migrates it and packs what it holds
        pass
    with Reader(run) as new:
        assert new.meta("schema_version") == SCHEMA_VERSION and new._holds("scalar_chunks")
        got = [new.scalar_points("x", p, w, edges=True) for w in windows for p in (20, 2000)]
    for a, b in zip(got, want):
        _same_points(a, b)


def test_a_damaged_chunk_is_a_clear_error(tmp_path: Path) -> None:
    with Writer(tmp_path / "run") as w:
        w.insert("scalars", [("x", s, 1.0, 0.0) for s in range(100)])
    conn = sqlite3.connect(tmp_path / "run" / DB_NAME)
    with conn:
        conn.execute("UPDATE scalar_chunks SET points = x'0102030405'")
    conn.close()
    with Reader(tmp_path / "run") as r:
        with pytest.raises(RunFileError, match="5 bytes, not whole 10-byte records"):
            r.scalar_points("x", 2000, (0, 50))


def test_a_step_handed_over_as_a_whole_float_is_packed_as_the_table_keeps_it(
    tmp_path: Path,
) -> None:
    with Writer(tmp_path / "run") as w:
        w.insert("scalars", [("x", 3.0, 1.5, 0.0), ("x", 40, 2.5, 0.0)])
    with Reader(tmp_path / "run") as r:
        got = r.scalar_points("x", 2000, (0, 100))
    assert got.steps.tolist() == [3, 40] and got.values.tolist() == [1.5, 2.5]


def _chunks_hold_the_rows(r: Reader, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Every window of ``name`` reads the same from its chunks as from its rows and buckets."""
    for window in [(0, 99), (0, 10_000), (5, 17)]:
        for points in (4, 2000):
            got = r.scalar_points(name, points, window, edges=True)
            want = _as_before(
                r, monkeypatch, lambda p=points, w=window: r.scalar_points(name, p, w, edges=True)
            )
            _same_points(got, want)


def test_a_chunk_that_does_not_decode_is_packed_again_from_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    with Writer(run) as w:
        w.insert("scalars", [(n, s, float(s), 0.0) for n in ("a", "b") for s in range(10)])
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        conn.execute("UPDATE scalar_chunks SET points = x'00' WHERE name = 'a'")
        conn.execute("UPDATE scalar_bucket_chunks SET buckets = 'text' WHERE name = 'b'")
    conn.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # packed again: nothing to warn of, nothing raised
        with Writer(run) as w:
            w.insert("scalars", [(n, s, 100.0 + s, 0.0) for n in ("a", "b") for s in range(10, 20)])
    with Reader(run) as r:
        for name in ("a", "b"):
            got = r.scalar_points(name, 2000, (0, 19))
            assert got.steps.tolist() == list(range(20)), name
            _chunks_hold_the_rows(r, monkeypatch, name)
        assert r.recorded_steps("scalars").tolist() == list(range(20))


def test_a_step_beyond_int64_is_left_out_of_chunks_and_the_commit_goes_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Writer(run) as w:
            w.insert("scalars", [("a", 1e19, 1.0, 0.0)] + [("b", s, 1.0, 0.0) for s in range(10)])
    with Reader(run) as r:
        assert r.scalar_points("b", 2000).steps.tolist() == list(range(10))
        assert r.scalar_points("a", 2000, (0, 100)).total == 0
        assert r.recorded_steps("scalars").tolist() == list(range(10))
        _chunks_hold_the_rows(r, monkeypatch, "b")


def test_a_failure_for_one_scalar_is_one_warning_and_every_other_summary_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = scalar_chunks._repack

    def failing(conn: sqlite3.Connection, name: str, *args: Any) -> None:
        if name == "a":
            raise sqlite3.OperationalError("disk I/O error")
        real(conn, name, *args)

    monkeypatch.setattr(scalar_chunks, "_repack", failing)
    run = tmp_path / "run"
    w = Writer(run, commit_interval=10)
    w.insert("scalars", [(n, s, float(s), 0.0) for n in ("a", "b") for s in range(10)])
    with pytest.warns(RunFileWarning, match="packed chunks of scalar 'a'.*the rows are stored"):
        w.flush()  # the rows are all written: no WriterError
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per writer
        w.insert("scalars", [(n, s, float(s), 0.0) for n in ("a", "b") for s in range(10, 20)])
        w.flush()
        w.close()
    with Reader(run) as r:
        assert r.scalars("a")["step"].tolist() == list(range(20))
        assert r.scalar_points("b", 2000).steps.tolist() == list(range(20))
        assert r.recorded_steps("scalars").tolist() == list(range(20))
        summary = r.scalar_summary("a", 2)  # its buckets, kept
        assert summary.width > 0 and summary.total == 20
        _chunks_hold_the_rows(r, monkeypatch, "b")


def test_each_row_of_a_commit_is_noted_on_its_own(tmp_path: Path) -> None:
    run = tmp_path / "run"
    w = Writer(run)
    w.insert("scalars", [("a", 1, 1.0, 0.0), ("a", None, 2.0, 0.0), ("a", 500, 5.0, 0.0)])
    with pytest.raises(WriterError, match="1 of 3 row"):  # the row SQLite refused
        w.close()
    with Reader(run) as r:
        assert r.scalar_points("a", 100, (0, 1000)).steps.tolist() == [1, 500]
        assert r.recorded_steps("scalars").tolist() == [1, 500]


def test_steps_handed_to_the_writer_as_bools_or_whole_floats_are_summarised_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    with Writer(run, commit_interval=10) as w:
        w.insert("scalars", [("x", s, float(s), 0.0) for s in range(2, 40)])
        w.flush()
        w.insert("scalars", [("x", True, 7.0, 0.0), ("x", 41.0, 41.0, 0.0)])
    with Reader(run) as r:
        assert r.recorded_steps("scalars").tolist() == [1, *range(2, 40), 41]
        for window in [(0, 41), (1, 5), (30, 41)]:
            for points in (2, 5, 2000):
                got = r.scalar_points("x", points, window)
                want = _as_before(
                    r, monkeypatch, lambda p=points, w=window: r.scalar_points("x", p, w)
                )
                _same_points(got, want)
        assert r.scalar_points("x", 2000, (1, 1)).values.tolist() == [7.0]


def test_steps_below_zero_put_in_by_hand_are_refused_where_they_are_read(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run, commit_interval=10) as w:  # run.log refuses them; the writer stores them
        w.insert("scalars", [("x", s, float(s), 0.0) for s in range(-20, 40)])
    with Reader(run) as r, pytest.raises(RunFileError, match="-20, outside 0..2"):
        r.recorded_steps("scalars")


def test_a_zoom_never_returns_more_than_max_points_while_a_writer_commits(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run, commit_interval=10) as w, Reader(run, must_exist=False) as r:
        w.insert("scalars", [("a", s, float(s), 0.0) for s in range(0, 4000, 4)])
        w.flush()
        real = r._q

        def q(sql: str, params: Any = ()) -> list[tuple]:
            got = real(sql, params)
            if sql == scalar_chunks.BUCKET_CHUNKS_SQL:  # a commit between the zoom's reads
                w.insert("scalars", [("a", s, float(s), 0.0) for s in range(1, 4000, 4)])
                w.flush()
            return got

        r._q = q  # type: ignore[method-assign]
        during = r.scalar_points("a", 1500, (0, 3999))
        r._q = real  # type: ignore[method-assign]
        after = r.scalar_points("a", 1500, (0, 3999))
    assert len(during.steps) <= 1500  # the buckets read before that commit
    assert during.total == 1000 and during.width > 0
    assert after.total == 2000 and after.width > 0 and len(after.steps) <= 1500


def test_a_bucket_chunk_counting_impossible_rows_is_a_clear_error(tmp_path: Path) -> None:
    with Writer(tmp_path / "run") as w:
        w.insert("scalars", [("x", s, 1.0, 0.0) for s in range(400)])
    rec = np.zeros(2, scalar_chunks.BUCKET_DTYPE)
    rec["bucket"], rec["n"], rec["min"], rec["max"] = [0, 1], [2**62, 2**62], np.nan, np.nan
    conn = sqlite3.connect(tmp_path / "run" / DB_NAME)
    with conn:
        conn.execute(
            "UPDATE scalar_bucket_chunks SET buckets = ? WHERE level = 0 AND chunk = 0",
            (rec.tobytes(),),
        )
    conn.close()
    with Reader(tmp_path / "run") as r:
        with pytest.raises(RunFileError, match="counts 4611686018427387904 rows in a bucket"):
            r.scalar_points("x", 300, (0, 399))


def test_a_commit_reads_the_chunks_of_each_scalar_in_one_statement(tmp_path: Path) -> None:
    names = [f"m{i:02d}" for i in range(40)]
    statements: list[str] = []
    with Writer(tmp_path / "run", commit_interval=10) as w:
        for step in range(3):
            statements.clear()
            w._state.conn.set_trace_callback(statements.append)
            w.insert("scalars", [(n, step, 0.5, 0.0) for n in names])
            w.flush()
            w._state.conn.set_trace_callback(None)
            chunks = [s for s in statements if "_chunks" in s]
            assert len(chunks) <= len(names) + 4, len(chunks)  # one read each, writes together
