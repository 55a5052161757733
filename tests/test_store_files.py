"""A run's file closed, copied and shared: one self-contained file, never read as partial."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import nbviz
from nbviz.store import DB_NAME, RunFileError, RunFileWarning, SchemaError, Writer


def _record(path: Path, steps: int = 200) -> None:
    with nbviz.Run(path, config={"lr": 0.1}, class_names=["a", "b", "c"]) as run:
        for step in range(steps):
            run.log(step, train_loss=1.0 / (step + 1))
        logits = np.random.default_rng(0).normal(size=(8, 3))
        run.log_predictions(steps - 1, logits, [0, 1, 2, 0, 1, 2, 0, 1])
        run.log_embeddings(steps - 1, np.arange(16.0).reshape(8, 2))


def _assert_whole(path: Path, steps: int = 200) -> None:
    with nbviz.open_run(path) as run:
        scalars = run.scalars()
        assert scalars["step"].tolist() == list(range(steps))
        assert run.config == {"lr": 0.1}
        assert run.class_names == ["a", "b", "c"]
        assert len(run.predictions(steps - 1)) == 8
        assert run.probabilities(steps - 1) is not None
        ids, matrix = run.embeddings(steps - 1)
        assert ids.tolist() == list(range(8)) and matrix.shape == (8, 2)


def _files(path: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in path.iterdir()}


def test_close_leaves_one_self_contained_file(tmp_path: Path) -> None:
    _record(tmp_path / "run")
    assert _files(tmp_path / "run").keys() == {DB_NAME}
    alone = tmp_path / "copy"
    alone.mkdir()
    shutil.copy(tmp_path / "run" / DB_NAME, alone / DB_NAME)
    _assert_whole(alone)


def test_close_folds_the_log_in_while_others_still_read_the_run(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _record(path, steps=10)
    watcher = nbviz.open_run(path)  # a view in the same kernel, or another process, reads on
    watcher.scalars()
    with nbviz.Run(path) as run:
        for step in range(10, 200):
            run.log(step, train_loss=1.0 / (step + 1))
        run.log_predictions(199, np.eye(3)[[0, 1, 2, 0, 1, 2, 0, 1]], [0, 1, 2, 0, 1, 2, 0, 1])
        run.log_embeddings(199, np.arange(16.0).reshape(8, 2))
    assert _files(path).get(f"{DB_NAME}-wal", 0) == 0  # folded in, though not deleted
    alone = tmp_path / "copy"
    alone.mkdir()
    shutil.copy(path / DB_NAME, alone / DB_NAME)
    _assert_whole(alone)
    assert len(watcher.scalars()) == 200
    watcher.close()


@pytest.fixture()
def read_only_dir(tmp_path: Path) -> Iterator[tuple[Path, object]]:
    """A directory on a file system mounted read-only (a tmpfs; root only), and its sealer."""
    mount = tmp_path / "ro"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")

    def seal() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)

    try:
        yield mount, seal
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_closed_run_copied_alone_onto_read_only_media_reads_everything(
    tmp_path: Path, read_only_dir: tuple[Path, object]
) -> None:
    mount, seal = read_only_dir
    _record(tmp_path / "run")
    (mount / "run").mkdir()
    shutil.copy(tmp_path / "run" / DB_NAME, mount / "run" / DB_NAME)
    seal()  # type: ignore[operator]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_whole(mount / "run")


def _live_copy(src: Path, dst: Path, steps: int = 200) -> Writer:
    """``dst`` gets ``run.sqlite`` and ``run.sqlite-wal`` of a run still being written."""
    _record(src, steps=1)
    writer = Writer(src)
    writer.insert("scalars", [("train_loss", s, 1.0, time.time()) for s in range(1, steps)])
    writer.flush()
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / DB_NAME, dst / DB_NAME)
    shutil.copy(src / f"{DB_NAME}-wal", dst / f"{DB_NAME}-wal")
    assert (dst / f"{DB_NAME}-wal").stat().st_size > 0
    return writer


def test_a_read_only_copy_whose_log_holds_commits_refuses_rather_than_show_part(
    tmp_path: Path, read_only_dir: tuple[Path, object]
) -> None:
    mount, seal = read_only_dir
    writer = _live_copy(tmp_path / "run", mount / "run")
    try:
        seal()  # type: ignore[operator]
        with pytest.raises(
            RunFileError, match=r"run\.sqlite: its write-ahead log run\.sqlite-wal holds .* copy"
        ):
            nbviz.open_run(mount / "run")
    finally:
        writer.close()


def test_a_copy_with_its_log_reads_everything_that_was_committed(tmp_path: Path) -> None:
    writer = _live_copy(tmp_path / "run", tmp_path / "copy")
    writer.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with nbviz.open_run(tmp_path / "copy") as run:
            assert run.scalars()["step"].tolist() == list(range(200))


def _cut_log(path: Path) -> None:
    wal = path / f"{DB_NAME}-wal"
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size // 2)


def test_a_log_cut_short_is_reported_when_the_run_is_opened(tmp_path: Path) -> None:
    writer = _live_copy(tmp_path / "run", tmp_path / "copy")
    writer.close()
    _cut_log(tmp_path / "copy")
    shutil.copytree(tmp_path / "copy", tmp_path / "again")
    with pytest.warns(RunFileWarning, match=r"run\.sqlite-wal ends in [\d,]+ bytes that cannot"):
        run = nbviz.open_run(tmp_path / "copy")
    with run:
        assert 0 < len(run.scalars()) < 200  # what can be read is read
    with pytest.warns(RunFileWarning, match="cannot be read"):
        nbviz.Run(tmp_path / "again").close()  # appending says it too, before SQLite drops it


def test_a_log_cut_short_under_its_index_says_how_many_pages_are_lost(tmp_path: Path) -> None:
    src = tmp_path / "run"
    writer = _live_copy(src, tmp_path / "unused")
    try:
        copy = tmp_path / "copy"
        copy.mkdir()
        for suffix in ("", "-wal", "-shm"):
            shutil.copy(src / f"{DB_NAME}{suffix}", copy / f"{DB_NAME}{suffix}")
        _cut_log(copy)
        with pytest.warns(RunFileWarning, match=r"holds [\d,]+ of the [\d,]+ frames committed"):
            nbviz.open_run(copy).close()
    finally:
        writer.close()


def test_a_run_being_written_is_not_taken_for_a_damaged_one(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with nbviz.Run(tmp_path / "run") as run:
            reader = nbviz.open_run(tmp_path / "run")
            for step in range(300):
                run.log(step, loss=float(step))
                if step % 50 == 0:
                    nbviz.open_run(tmp_path / "run").close()
            reader.close()


# -- schema objects nbviz did not create -------------------------------------------------


def _tamper(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path / DB_NAME)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


RECURSIVE_VIEW = (
    "DROP TABLE scalars",
    "CREATE VIEW scalars(name, step, value, wall_time) AS WITH RECURSIVE r(i) AS "
    "(SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT 'loss', i, randomblob(1000), 0 FROM r",
)


@pytest.mark.parametrize(
    ("statements", "fault"),
    [
        (RECURSIVE_VIEW, "view 'scalars' where nbviz creates a table"),
        (
            ("CREATE TRIGGER wipe AFTER INSERT ON scalars BEGIN DELETE FROM predictions; END",),
            "trigger 'wipe' on 'scalars', which nbviz does not create",
        ),
        (("CREATE VIEW extra AS SELECT 1",), "view 'extra', which nbviz does not create"),
        (
            ("DROP TABLE events", "CREATE TABLE events(kind, layer, signal, step, detail)"),
            "table 'events' defined otherwise",
        ),
        (("DROP TABLE profiles",), "no table 'profiles'"),
    ],
)
def test_a_run_with_schema_objects_nbviz_did_not_create_is_refused(
    tmp_path: Path, statements: tuple[str, ...], fault: str
) -> None:
    _record(tmp_path / "run", steps=5)
    _tamper(tmp_path / "run", *statements)
    started = time.monotonic()
    with pytest.raises(RunFileError, match=f"its schema is not the one nbviz writes.*{fault}"):
        nbviz.open_run(tmp_path / "run")
    with pytest.raises(RunFileError, match=fault):
        nbviz.Run(tmp_path / "run")
    assert time.monotonic() - started < 10


def test_a_crafted_trigger_cannot_delete_data_when_the_run_is_appended_to(tmp_path: Path) -> None:
    _record(tmp_path / "run", steps=5)
    _tamper(
        tmp_path / "run",
        "CREATE TRIGGER wipe AFTER INSERT ON meta BEGIN DELETE FROM predictions; END",
    )
    with pytest.raises(RunFileError, match="trigger 'wipe'"):
        nbviz.Run(tmp_path / "run", config={"lr": 1})
    conn = sqlite3.connect(tmp_path / "run" / DB_NAME)
    assert conn.execute("SELECT count(*) FROM predictions").fetchone()[0] == 8
    conn.close()


def test_a_meta_that_is_a_view_is_never_read(tmp_path: Path) -> None:
    _record(tmp_path / "run", steps=5)
    _tamper(
        tmp_path / "run",
        "DROP TABLE meta",
        "CREATE VIEW meta(key, value) AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL "
        "SELECT i + 1 FROM r) SELECT 'schema_version', '2' FROM r",
    )
    with pytest.raises(RunFileError, match="its view 'meta' is not the table nbviz creates"):
        nbviz.open_run(tmp_path / "run")


def test_a_read_that_runs_past_its_time_budget_is_stopped_and_names_the_file(
    tmp_path: Path,
) -> None:
    _record(tmp_path / "run", steps=5)
    with nbviz.open_run(tmp_path / "run") as run:
        run._conn().budget = 0.3
        started = time.monotonic()
        with pytest.raises(
            RunFileError, match=r"run\.sqlite: reading the run: the read was stopped"
        ):
            run._q(
                "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                "SELECT max(i) FROM r"
            )
        assert time.monotonic() - started < 5
        assert len(run.scalars()) == 5  # the next read has its own budget


def test_readers_cannot_write_even_where_the_file_could_be_written(tmp_path: Path) -> None:
    _record(tmp_path / "run", steps=5)
    with nbviz.open_run(tmp_path / "run") as run:
        with pytest.raises(RunFileError, match="reading the run"):
            run._q("DELETE FROM scalars")
        assert len(run.scalars()) == 5


@pytest.mark.parametrize("cut", [None, 0.9, 0.5, 0.1])
def test_the_log_is_read_as_sqlite_reads_it(tmp_path: Path, cut: float | None) -> None:
    from nbviz.store.wal import scan_wal

    live = sqlite3.connect(tmp_path / "a.sqlite", isolation_level=None)
    live.execute("PRAGMA journal_mode=WAL")
    live.execute("PRAGMA wal_autocheckpoint=0")
    live.execute("CREATE TABLE t(x, y)")
    for i in range(60):
        live.execute("INSERT INTO t VALUES (?, randomblob(700))", (i,))
    copy = tmp_path / "b.sqlite"
    shutil.copy(tmp_path / "a.sqlite", copy)
    data = (tmp_path / "a.sqlite-wal").read_bytes()
    live.close()
    Path(f"{copy}-wal").write_bytes(data if cut is None else data[: int(len(data) * cut)])
    scan = scan_wal(f"{copy}-wal")
    conn = sqlite3.connect(copy)  # SQLite's own recovery of the same log
    _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    conn.close()
    assert scan is not None and scan.committed == frames
    assert (scan.unreadable_bytes > 0) == (cut is not None and cut < 1)


def test_a_copy_taken_before_any_checkpoint_whose_log_was_cut_says_the_log_was_cut(
    tmp_path: Path,
) -> None:
    src, copy = tmp_path / "run", tmp_path / "copy"
    run = nbviz.Run(src)
    run.log(0, train_loss=1.0)
    run.flush()  # everything, the tables included, is still in run.sqlite-wal
    copy.mkdir()
    for suffix in ("", "-wal"):
        shutil.copy(src / f"{DB_NAME}{suffix}", copy / f"{DB_NAME}{suffix}")
    run.close()
    _cut_log(copy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunFileWarning)  # the same words, said at open
        with pytest.raises(
            SchemaError,
            match=r"copy/run\.sqlite: it holds no tables that can be read: run\.sqlite-wal ends in "
            r"[\d,]+ bytes that cannot be read .*; copy the whole run directory again",
        ):
            nbviz.open_run(copy)
