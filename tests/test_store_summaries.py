"""Summaries kept as a run is written, compact storage, and reads bounded whatever the run's length.

The bounded reads are asserted by counting SQLite virtual-machine steps (a
progress handler on the reader's connection) on a short and a 16 times longer
run written the same way: what a view reads must not grow with the run.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbviz.store import DB_NAME, SCHEMA_VERSION, Reader, Writer, create_or_open
from nbviz.store.encoding import counts_array, pack_counts
from nbviz.store.errors import StoredValueError
from nbviz.store.schema import DDL_OF_VERSION

LAYERS = ("enc.0", "enc.1", "head")
SHORT, LONG = 500, 8000


def _hist(step: int, i: int) -> bytes:
    counts = (np.arange(16) * 40 * (step % 7 + i + 1)) % 1000  # bins above 255: two bytes each
    return counts.astype("<i8").tobytes()


def _rows(step: int) -> dict[str, list[tuple]]:
    loss = 2.0 / (1 + step / 100) + 0.1 * math.sin(step)
    rows: dict[str, list[tuple]] = {
        "scalars": [("loss", step, loss, 0.0), ("lr", step, 0.01, 0.0)],
        "layer_stats": [],
        "histograms": [],
        "unit_stats": [],
    }
    if step % 100 == 99:
        rows["scalars"].append(("val_loss", step, loss * 1.1, 0.0))
    for i, layer in enumerate(LAYERS):
        z = 0.1 * i + 0.001 * (step % 13)
        rows["layer_stats"].append(
            (step, layer, "activation", 64, 0.5, 1.0, -step % 5, 4.0 + step % 3, z, 0, 3.0, None)
        )
        rows["histograms"].append((step, layer, "activation", -1.0, 1.0, _hist(step, i), 0, 1, 0))
        rows["unit_stats"].append((step, layer, "zero_frac", np.full(4, z, dtype="<f4").tobytes()))
    return rows


def _write(path: Path, n_steps: int, extra: Callable[[Writer], None] | None = None) -> Path:
    with Writer(path, commit_interval=0.2) as w:
        for lo in range(0, n_steps, 100):
            batch: dict[str, list[tuple]] = {}
            for step in range(lo, min(lo + 100, n_steps)):
                for table, rows in _rows(step).items():
                    batch.setdefault(table, []).extend(rows)
            for table, rows in batch.items():
                w.insert(table, rows)
        if extra is not None:
            extra(w)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("summaries")
    return {n: _write(root / f"run-{n}", n) for n in (SHORT, LONG)}


# -- what is stored ------------------------------------------------------------------


def test_histogram_counts_are_stored_in_the_fewest_bits_and_read_back_as_int64(
    runs: dict[int, Path],
) -> None:
    conn = sqlite3.connect(runs[SHORT] / DB_NAME)
    widths = {r[0] for r in conn.execute("SELECT length(counts) FROM histograms")}
    conn.close()
    assert widths == {1 + 16 * 10 // 8}  # counts up to 999: 10 bits a bin, not 64
    with Reader(runs[SHORT]) as r:
        rows = r.histogram_rows("enc.1", "activation", steps=[3, 4])
        assert rows.counts.dtype == np.int64
        expected = [np.frombuffer(_hist(s, 1), "<i8") for s in (3, 4)]
        np.testing.assert_array_equal(rows.counts, expected)
        edges, counts = r.histogram("head", "activation", 7)
        np.testing.assert_array_equal(counts, np.frombuffer(_hist(7, 2), "<i8"))


def test_a_layer_is_named_once_in_the_series_table(runs: dict[int, Path]) -> None:
    conn = sqlite3.connect(runs[SHORT] / DB_NAME)
    series = conn.execute("SELECT layer, signal FROM series ORDER BY layer, signal").fetchall()
    conn.close()
    assert sorted(series) == sorted(
        [(la, "activation") for la in LAYERS] + [(la, "zero_frac") for la in LAYERS]
    )


def test_a_schema_2_run_is_migrated_and_reads_as_the_same_run_written_now(
    runs: dict[int, Path], tmp_path: Path
) -> None:
    old = tmp_path / "old"
    old.mkdir()
    conn = sqlite3.connect(old / DB_NAME)
    for statement in DDL_OF_VERSION[2]:
        conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (json.dumps(2),))
    for step in range(SHORT):
        for table, rows in _rows(step).items():
            marks = ", ".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    conn.commit()
    conn.close()
    create_or_open(old).close()  # opened for writing: migrated
    with Reader(old) as a, Reader(runs[SHORT]) as b:
        assert a.meta("schema_version") == SCHEMA_VERSION
        assert a.stats("activation").equals(b.stats("activation"))
        assert a.stats_at(17).equals(b.stats_at(17))
        assert (
            a.histograms_at(9)
            .drop(columns="counts")
            .equals(b.histograms_at(9).drop(columns="counts"))
        )
        np.testing.assert_array_equal(
            a.histogram_rows("enc.0", "activation").counts,
            b.histogram_rows("enc.0", "activation").counts,
        )
        np.testing.assert_array_equal(
            a.unit_stats("head", "zero_frac")[1], b.unit_stats("head", "zero_frac")[1]
        )
        np.testing.assert_array_equal(a.steps("activation"), b.steps("activation"))
        assert a.scalar_summary("loss", 10).frame.equals(b.scalar_summary("loss", 10).frame)
        # the buckets' sums added up commit by commit as written, all at once as migrated
        pd.testing.assert_frame_equal(
            a.stats_summary("activation", "head", 10).frame,
            b.stats_summary("activation", "head", 10).frame,
            check_exact=False,
            rtol=1e-12,
        )


# -- the summaries ---------------------------------------------------------------------


def test_scalar_buckets_hold_the_min_max_mean_and_last_of_their_steps(
    runs: dict[int, Path],
) -> None:
    with Reader(runs[SHORT]) as r:
        full = r.scalars("loss")
        summary = r.scalar_summary("loss", 40)
    steps, values = full["step"].to_numpy(), full["value"].to_numpy()
    assert summary.width == 16 and summary.total == SHORT
    bucket = steps // summary.width
    for row in summary.frame.itertuples():
        mine = bucket == row.first_step // summary.width
        assert row.n == mine.sum()
        assert row.min == values[mine].min() and row.max == values[mine].max()
        assert values[steps == row.min_step][0] == row.min
        assert math.isclose(row.total / row.n_finite, values[mine].mean())
        assert row.last == values[mine][-1]


def test_a_short_range_is_read_as_its_rows(runs: dict[int, Path]) -> None:
    with Reader(runs[LONG]) as r:
        summary = r.scalar_summary("loss", 200, step_range=(4000, 4079))
        edged = r.scalar_summary("loss", 200, step_range=(4000, 4079), edges=True)
    assert summary.width == 0 and summary.total == 80
    assert summary.frame["step"].tolist() == list(range(4000, 4080))
    assert edged.frame["step"].tolist() == list(range(3999, 4081))


def test_scalar_outline_names_a_bad_ends_and_takes_one_row_at_each_end(
    runs: dict[int, Path],
) -> None:
    with Reader(runs[LONG]) as r:
        with pytest.raises(ValueError, match=r"ends must be an integer >= 1, got 0"):
            r.scalar_outline("loss", 64, ends=0)
        with pytest.raises(TypeError, match=r"scalar_outline: ends must be an integer, got 2.5"):
            r.scalar_outline("loss", 64, ends=2.5)
        with pytest.raises(ValueError, match=r"max_points must be an integer >= 2, got 1"):
            r.scalar_outline("loss", 1, ends=1)
        outline = r.scalar_outline("loss", 64, ends=1)
    steps = outline["step"].tolist()
    assert steps[0] == 0 and steps[-1] == LONG - 1
    assert outline["n"].iloc[0] == 1 and outline["n"].iloc[-1] == 1


def test_non_finite_values_are_kept_apart_and_a_rewritten_step_replaces_its_value(
    tmp_path: Path,
) -> None:
    def extra(w: Writer) -> None:
        w.insert("scalars", [("loss", 40, float("nan"), 0.0), ("loss", 41, float("inf"), 0.0)])
        w.insert("scalars", [("loss", 42, 123.0, 0.0), ("loss", 42, -5.0, 0.0)])

    path = _write(tmp_path / "run", 100, extra)
    with Reader(path) as r:
        summary = r.scalar_summary("loss", 4)
        level0 = r.scalar_summary("loss", 20)
    row = level0.frame[level0.frame["first_step"] == 32].iloc[0]
    assert (row["bad_first"], row["bad_last"], row["bad_kind"]) == (40, 41, 0)
    assert row["n"] == 16 and row["n_finite"] == 14
    assert row["min"] == -5.0 and row["min_step"] == 42  # the value written last
    top = summary.frame.iloc[0]
    assert top["min"] == -5.0 and top["bad_first"] == 40 and top["n"] == 100


def test_stats_summary_keeps_the_extremes_of_each_bucket(runs: dict[int, Path]) -> None:
    with Reader(runs[LONG]) as r:
        summary = r.stats_summary("activation", "enc.1", 100)
        raw = r.stats("activation", "enc.1")
    assert summary.width == 256 and summary.total == LONG
    first = raw[raw["step"] < 256]
    row = summary.frame.iloc[0]
    assert row["step"] == 255 and row["n"] == 256
    assert row["min"] == first["min"].min() and row["max"] == first["max"].max()
    assert math.isclose(row["zero_frac"], first["zero_frac"].mean())


def test_recorded_steps_are_runs_of_steps(runs: dict[int, Path]) -> None:
    conn = sqlite3.connect(runs[LONG] / DB_NAME)
    n_runs = dict(conn.execute("SELECT source, count(*) FROM step_runs GROUP BY source"))
    conn.close()
    assert n_runs == {"scalars": 1, "stats:activation": 1, "histograms:activation": 1}
    with Reader(runs[LONG]) as r:
        np.testing.assert_array_equal(r.recorded_steps("scalars"), np.arange(LONG))
        np.testing.assert_array_equal(r.steps("activation"), np.arange(LONG))
        with pytest.raises(ValueError, match="unknown source 'stats:nope'"):
            r.recorded_steps("stats:nope")


# -- bounded reads -------------------------------------------------------------------


@pytest.fixture(scope="module")
def readers(runs: dict[int, Path]) -> Iterator[dict[int, Reader]]:
    out = {n: Reader(p) for n, p in runs.items()}
    yield out
    for r in out.values():
        r.close()


BOUNDED_READS: dict[str, Callable[[Reader, int], Any]] = {
    # max_points small enough that both runs are read as buckets (the regime of a long run)
    "scalar_summary": lambda r, n: r.scalar_summary("loss", 20),
    "scalar_summary of 1%": lambda r, n: r.scalar_summary("loss", 4, (n // 2, n // 2 + n // 100)),
    "stats_summary": lambda r, n: r.stats_summary("activation", "enc.0", 20),
    "scalars_at": lambda r, n: r.scalars_at(n // 2),
    "scalar_counts": lambda r, n: r.scalar_counts(),
    "stats_at": lambda r, n: r.stats_at(n // 2),
    "histogram_before": lambda r, n: r.histogram_before("head", "activation", n // 2),
    "histograms_at": lambda r, n: r.histograms_at(n // 2),
    "recorded layers": lambda r, n: r.recorded_layers(table="histograms"),
    "steps (rows read)": lambda r, n: r.steps("activation"),
}


@pytest.mark.parametrize("read", list(BOUNDED_READS))
def test_a_read_a_view_makes_does_not_grow_with_the_run(
    read: str, readers: dict[int, Reader], vm_steps: Callable[..., int]
) -> None:
    cost = {n: vm_steps(r, lambda r=r, n=n: BOUNDED_READS[read](r, n)) for n, r in readers.items()}
    assert cost[LONG] <= 2 * cost[SHORT] + 200, cost  # a 16 times longer run


@pytest.mark.parametrize("points", [10, 100, 1000])
def test_a_summary_never_holds_more_than_max_points_rows(
    points: int, readers: dict[int, Reader]
) -> None:
    for n, r in readers.items():
        for lo, hi in [(0, n - 1), (n // 2, n // 2 + n // 100), (10, 10 + points)]:
            assert len(r.scalar_summary("loss", points, (lo, hi)).frame) <= points
            assert len(r.stats_summary("activation", "head", points, (lo, hi)).frame) <= points


def test_full_reads_do_grow_so_the_count_measures_something(
    readers: dict[int, Reader], vm_steps: Callable[..., int]
) -> None:
    cost = {n: vm_steps(r, lambda r=r: r.scalars("loss")) for n, r in readers.items()}
    assert cost[LONG] > 10 * cost[SHORT], cost


@pytest.mark.parametrize(
    "counts",
    [[0] * 5, [255, 0], [256], [1], [-3, 5], [2**63 - 1, 0], [2**62], [2**40, 1], list(range(300))],
)
def test_packed_counts_read_back_exactly(counts: list[int]) -> None:
    blob, bins = pack_counts(np.array(counts, dtype="<i8").tobytes())
    assert bins == len(counts)
    np.testing.assert_array_equal(counts_array(blob, bins), counts)


def test_counts_that_do_not_fit_their_bin_count_are_refused() -> None:
    blob, bins = pack_counts(np.arange(64, dtype="<i8").tobytes())
    with pytest.raises(StoredValueError, match="64 bins hold 3 bytes"):
        counts_array(b"\x01\x02\x03", 64)
    with pytest.raises(StoredValueError):
        counts_array(b"\x41" + blob[1:], bins)  # 65 bits a count
