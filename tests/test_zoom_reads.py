"""What a zoom into a long run reads: the window's rows in one statement, the finest buckets
of a wider window, and numbers converted from rows in one pass (exactly as column by column).

Costs are counted (SQLite statements and virtual-machine steps), never timed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbviz.store import Reader, Writer
from nbviz.store.columns import frame
from nbviz.store.errors import StoredValueError
from nbviz.widgets.scalar_points import summary_points, window_points

SHORT, LONG = 2_000, 32_000


def _write(path: Path, n_steps: int) -> Path:
    with Writer(path, commit_interval=0.5) as w:
        for lo in range(0, n_steps, 1000):
            rows = []
            for step in range(lo, min(lo + 1000, n_steps)):
                loss = 2.0 / (1 + step / 100) + 0.1 * math.sin(step)
                rows.append(("loss", step, float("nan") if step == 1234 else loss, 0.0))
                if step % 100 == 99:
                    rows.append(("val_loss", step, loss * 1.1, 0.0))
            w.insert("scalars", rows)
    return path


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Reader]]:
    root = tmp_path_factory.mktemp("zoom")
    out = {n: Reader(_write(root / f"run-{n}", n)) for n in (SHORT, LONG)}
    yield out
    for r in out.values():
        r.close()


def _statements(reader: Reader, action: Callable[[], object]) -> list[str]:
    conn = reader._conn()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        action()
    finally:
        conn.set_trace_callback(None)
    return seen


def test_a_window_of_rows_and_its_edges_are_one_statement(readers: dict[int, Reader]) -> None:
    r = readers[LONG]
    summary = r.scalar_summary("loss", 2000, (1200, 1299), edges=True)
    assert summary.width == 0 and summary.total == 100
    assert summary.frame["step"].tolist() == list(range(1199, 1301))
    values = summary.frame["value"].to_numpy()
    assert np.isnan(values[1234 - 1199]) and np.isfinite(np.delete(values, 1234 - 1199)).all()
    whole = r.scalars("loss").set_index("step")["value"]
    np.testing.assert_array_equal(values, whole.loc[1199:1300].to_numpy())
    seen = _statements(r, lambda: r.scalar_summary("loss", 2000, (1200, 1299), edges=True))
    assert len(seen) == 1, seen
    # a sparse series: the edges are the logged rows nearest to the window
    sparse = r.scalar_summary("val_loss", 2000, (1200, 1299), edges=True)
    assert sparse.frame["step"].tolist() == [1199, 1299, 1399] and sparse.total == 1
    # at the run's start and end there is nothing beyond the edge
    assert r.scalar_summary("loss", 2000, (0, 9), edges=True).frame["step"].tolist() == list(
        range(11)
    )


def test_a_window_past_max_points_is_the_finest_buckets_that_fit(
    readers: dict[int, Reader],
) -> None:
    r = readers[LONG]
    total, steps, values = window_points(r, "loss", 1000, 10_000, 20_000)
    assert 10_001 <= total <= 10_001 + 2 * 16  # whole buckets of 16 steps
    assert len(steps) <= 2 * 1000 and (np.diff(steps) > 0).all()  # a minimum and a maximum each
    whole = r.scalars("loss").set_index("step")["value"]
    inside = whole.loc[10_000:20_000]
    assert values.min() == inside.min() and values.max() == inside.max()
    assert steps[0] >= 10_000 - 16 and steps[-1] <= 20_000 + 16


def test_an_unknown_scalar_is_named_whatever_the_range(readers: dict[int, Reader]) -> None:
    r = readers[SHORT]
    for step_range in (None, (0, 10), (0, 1999)):
        with pytest.raises(ValueError, match=r"no scalar named 'los'.*loss"):
            r.scalar_summary("los", 100, step_range)
    empty = r.scalar_summary("loss", 100, (5000, 5010), edges=True)
    assert empty.total == 0 and empty.frame["step"].tolist() == [SHORT - 1]


def test_a_zoom_of_a_given_width_costs_the_same_in_a_longer_run(
    readers: dict[int, Reader], vm_steps: Callable[..., int]
) -> None:
    cost = {
        n: vm_steps(r, lambda r=r, n=n: window_points(r, "loss", 2000, n // 2, n // 2 + 999))
        for n, r in readers.items()
    }
    assert cost[LONG] <= 1.2 * cost[SHORT] + 200, cost  # a 16 times longer run


def _exact(rows: list[tuple], columns: tuple[str, ...], kinds: str) -> pd.DataFrame:
    # what frame() made before it converted numbers in one pass: column by column
    from nbviz.store.columns import _column

    cols = list(zip(*rows))
    return pd.DataFrame({c: _column(col, k) for c, col, k in zip(columns, cols, kinds)})


def test_numbers_converted_in_one_pass_match_the_column_by_column_reading() -> None:
    rng = np.random.default_rng(0)
    rows = [
        (
            int(s),
            float(v),
            None if s % 7 else int(s * 3),
            None if s % 5 == 0 else float(v),
            -(2**52) + int(s),
        )
        for s, v in zip(range(100), rng.standard_normal(100))
    ]
    columns, kinds = ("a", "b", "c", "d", "e"), "ififi"
    got, want = frame(rows, columns, kinds), _exact(rows, columns, kinds)
    assert got.equals(want)
    assert [str(t) for t in got.dtypes] == ["int64", "float64", "Int64", "float64", "int64"]
    assert got["c"].isna().sum() == 85


@pytest.mark.parametrize(
    "bad",
    [b"\x00\x01", "not a number", 2.5, 2**60],
    ids=["bytes", "text", "a fraction", "past 2**53"],
)
def test_a_value_one_pass_cannot_read_exactly_is_read_column_by_column(bad: object) -> None:
    rows = [(s, float(s)) for s in range(40)] + [(bad, 1.0)]
    if bad == 2**60:
        assert frame(rows, ("step", "value"), "if")["step"].iloc[-1] == 2**60
        return
    with pytest.raises(StoredValueError):
        frame(rows, ("step", "value"), "if")


@pytest.mark.parametrize("n_rows", [3, 31, 32, 200])
@pytest.mark.parametrize("bad", ["7", "nan", b"7", 7.0], ids=["7", "nan", "bytes", "a float"])
def test_an_int_column_holding_no_integer_raises_at_any_row_count(n_rows: int, bad: object) -> None:
    # text that float64 would parse (a number, 'nan') must not read as one past 32 rows
    rows = [(s, float(s)) for s in range(n_rows)]
    rows[n_rows // 2] = (bad, 1.0)
    with pytest.raises(StoredValueError, match=re.escape(f"a stored integer is {bad!r}")):
        frame(rows, ("step", "value"), "if")


@pytest.mark.parametrize("bad", ["7", "nan", b"7", " 7 ", "inf", "oops"])
def test_a_float_column_holding_text_reads_the_same_at_any_row_count(bad: object) -> None:
    for n_rows in (3, 31, 32, 200):
        rows = [(s, float(s)) for s in range(n_rows)]
        rows[1] = (1, bad)
        try:
            want = _exact(rows, ("step", "value"), "if")
        except StoredValueError as exc:
            with pytest.raises(StoredValueError, match=re.escape(str(exc))):
                frame(rows, ("step", "value"), "if")
        else:
            assert frame(rows, ("step", "value"), "if").equals(want), n_rows


@pytest.mark.parametrize(
    "window",
    [(1200, 1299), (0, 10), (1000, 1900), (900, 12_000), (0, LONG - 1), (LONG - 5, LONG + 50)],
)
@pytest.mark.parametrize("name", ["loss", "val_loss"])
def test_scalar_points_are_the_points_of_scalar_summary(
    readers: dict[int, Reader], window: tuple[int, int], name: str
) -> None:
    r = readers[LONG]
    for points in (50, 2000):
        got = r.scalar_points(name, points, window, edges=True)
        summary = r.scalar_summary(name, points, window, edges=True)
        steps, values, _breaks = summary_points(summary)
        assert (got.total, got.width) == (summary.total, summary.width)
        np.testing.assert_array_equal(got.steps, steps)
        np.testing.assert_array_equal(got.values, values)  # NaN where the series broke
    whole = r.scalar_points(name, 100)
    assert whole.width > 0 and whole.total == len(r.scalars(name))


def _awkward_series() -> list[tuple[int, float]]:
    """``(step, value)`` rows whose buckets hit each rule of the points: constant and tied
    extremes, non-finite buckets with no finite value, single rows, sparse stretches."""
    nan, inf = float("nan"), float("inf")
    rows = [(s, 1.0) for s in range(16)]  # constant: min and max at one step
    rows += [(s, 2.0) for s in range(16, 32)]  # min and max tied at every step
    rows[18], rows[25] = (18, 0.5), (25, 0.5)  # the minimum reached twice
    rows[20], rows[30] = (20, 3.0), (30, 3.0)  # and the maximum
    rows += [(s, nan) for s in range(32, 48)]  # NaN only
    rows += [(s, inf if s % 2 else -inf) for s in range(48, 64)]  # +-Inf only
    rows += [(s, nan if s % 3 else -1.0) for s in range(64, 80)]  # NaN around finite ones
    rows += [(100, 4.0), (200, nan), (300, -inf), (400, 2.0), (401, nan), (416, 7.0)]
    rng = np.random.default_rng(17)
    tail = rng.integers(0, 5, 4000).astype(float)  # few distinct values: ties everywhere
    tail[rng.integers(0, 4000, 30)] = nan
    rows += [(1000 + i, float(v)) for i, v in enumerate(tail)]
    rows += [(20_000 + 300 * i, float(i % 3)) for i in range(40)]  # one row per bucket
    return rows


@pytest.fixture(scope="module")
def awkward(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    path = tmp_path_factory.mktemp("awkward") / "run"
    with Writer(path, commit_interval=0.5) as w:
        w.insert("scalars", [("odd", s, v, 0.0) for s, v in _awkward_series()])
    with Reader(path) as r:
        yield r


@pytest.mark.parametrize(
    "window", [(0, 80), (0, 450), (0, 1000), (0, 6000), (900, 2100), (0, 40_000), (15_000, 40_000)]
)
@pytest.mark.parametrize("max_points", [2, 7, 30, 200])
def test_bucket_points_in_sql_are_summary_points_of_awkward_buckets(
    awkward: Reader, window: tuple[int, int], max_points: int
) -> None:
    # window_sql.BUCKET_POINTS and scalar_points.summary_points: the same points, rule for rule
    got = awkward.scalar_points("odd", max_points, window)
    summary = awkward.scalar_summary("odd", max_points, window)
    steps, values, _breaks = summary_points(summary)
    assert (got.total, got.width) == (summary.total, summary.width)
    np.testing.assert_array_equal(got.steps, steps)
    np.testing.assert_array_equal(got.values, values)


def test_awkward_buckets_give_the_points_their_rules_say(awkward: Reader) -> None:
    got = awkward.scalar_points("odd", 30, (0, 450))
    assert got.width == 16
    points = dict(zip(got.steps.tolist(), got.values.tolist()))
    assert points[0] == 1.0 and not set(points) & set(range(1, 16))  # constant: one point
    assert {s: points.get(s) for s in range(16, 32) if s in points} == {18: 0.5, 20: 3.0}
    assert [s for s in points if 32 <= s < 80] == [32, 48, 64, 66]  # a NaN each, -1.0 at 66
    assert np.isnan([points[32], points[48], points[64]]).all() and points[66] == -1.0
    assert points[100] == 4.0 and np.isnan(points[200]) and np.isnan(points[300])
    assert points[400] == 2.0 and np.isnan(points[401]) and points[416] == 7.0


def test_a_bucketed_window_keeps_the_break_of_a_non_finite_step(
    readers: dict[int, Reader],
) -> None:
    got = readers[LONG].scalar_points("loss", 50, (1000, 2000))
    assert got.width == 256 and 1234 in got.steps.tolist()
    assert np.isnan(got.values[got.steps.tolist().index(1234)])


def test_a_zoom_is_a_few_statements_whatever_the_window(readers: dict[int, Reader]) -> None:
    r = readers[LONG]
    for window in [(1200, 1299), (0, LONG - 1)]:
        seen = _statements(r, lambda w=window: window_points(r, "loss", 2000, *w))
        assert len(seen) <= 2, seen
