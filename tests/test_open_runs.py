"""open_runs: every run under a directory or a glob, damaged runs named and skipped."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pytest

import nbviz
from nbviz.store import RunFileError, RunFileWarning


def record(path: Path, lr: float, steps: int = 5) -> Path:
    with nbviz.Run(path, config={"lr": lr}) as run:
        for s in range(steps):
            run.log(s, train_loss=1.0 / (1 + lr * s))
    return path


@pytest.fixture()
def sweep(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for i, lr in enumerate([0.1, 0.01, 0.001]):
        record(root / f"lr{i}" / "seed0", lr)
    record(root / "lr10", 0.5)  # natural order: lr10 after lr2
    return root


def test_open_runs_opens_every_run_under_a_directory_in_natural_order(sweep: Path) -> None:
    runs = nbviz.open_runs(sweep)
    assert isinstance(runs, list)
    assert [r.path.relative_to(sweep).as_posix() for r in runs] == [
        "lr0/seed0",
        "lr1/seed0",
        "lr2/seed0",
        "lr10",
    ]
    assert [r.config["lr"] for r in runs] == [0.1, 0.01, 0.001, 0.5]
    assert runs.skipped == {}
    assert len(runs[0].scalars()) == 5
    runs.close()


def test_open_runs_takes_a_glob(sweep: Path) -> None:
    runs = nbviz.open_runs(str(sweep / "lr[01]"))
    assert [r.config["lr"] for r in runs] == [0.1, 0.01]
    runs = nbviz.open_runs(str(sweep / "**" / "seed0"))
    assert len(runs) == 3


def test_open_runs_on_one_run_directory_gives_that_run(sweep: Path) -> None:
    runs = nbviz.open_runs(sweep / "lr10")
    assert [r.config["lr"] for r in runs] == [0.5]


def test_open_runs_feeds_the_comparison_views(sweep: Path) -> None:
    runs = nbviz.open_runs(sweep)
    table = nbviz.RunsTable(runs, live=False)
    curves = nbviz.LossCurves(runs, live=False)
    assert len(table.rows) == 4
    assert {s["run"] for s in curves.series} == set(curves.runs)
    table.close()
    curves.close()


def test_open_runs_names_a_pattern_that_finds_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no nbviz run .*nowhere.*does not exist"):
        nbviz.open_runs(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty.*no directory under it holds a run.sqlite"):
        nbviz.open_runs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=r"the glob matches no directory"):
        nbviz.open_runs(str(tmp_path / "x*"))


def test_open_runs_refuses_what_is_not_a_pattern() -> None:
    with pytest.raises(TypeError, match=r"open_runs: pattern must be .* got int 3"):
        nbviz.open_runs(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pattern is empty"):
        nbviz.open_runs("")


def damage(sweep: Path) -> tuple[Path, Path]:
    garbage = sweep / "garbage"
    garbage.mkdir()
    (garbage / "run.sqlite").write_bytes(b"this is not a database" * 100)
    foreign = sweep / "foreign"
    foreign.mkdir()
    with sqlite3.connect(foreign / "run.sqlite") as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    return garbage, foreign


def test_open_runs_skips_damaged_runs_with_a_warning_naming_each(sweep: Path) -> None:
    garbage, foreign = damage(sweep)
    with pytest.warns(RunFileWarning, match=r"skipped 2 damaged run\(s\) of 6") as caught:
        runs = nbviz.open_runs(sweep)
    text = str(caught[0].message)
    assert str(garbage) in text and str(foreign) in text
    assert "not an SQLite database" in text
    assert len(runs) == 4
    assert set(runs.skipped) == {garbage, foreign}
    assert "skipped" in repr(runs)


def test_open_runs_strict_refuses_a_damaged_run(sweep: Path) -> None:
    garbage, _ = damage(sweep)
    with pytest.raises(RunFileError) as info:
        nbviz.open_runs(sweep, strict=True)
    assert info.value.path.parent in {garbage, sweep / "foreign"}


def test_open_runs_where_every_run_is_damaged_is_an_error(tmp_path: Path) -> None:
    damage(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RunFileError, match=r"every one of the 2 runs found is damaged"):
            nbviz.open_runs(tmp_path)
