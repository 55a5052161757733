"""Run directories, connections and schema versions."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nbviz.store import DB_NAME, SCHEMA_VERSION, Reader, SchemaError, Writer, create_or_open, schema
from nbviz.store.encoding import bins_blobs


def _set_version(run: Path, version: int) -> None:
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(version),)
        )
    conn.close()


def _make_older(run: Path, version: int = SCHEMA_VERSION - 1) -> None:
    """Make ``run`` what nbviz wrote at schema ``version``: that version's tables, empty."""
    (run / DB_NAME).unlink()
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        for statement in schema.DDL_OF_VERSION[version]:
            conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (json.dumps(version),))
    conn.close()


def _written_at(run: Path, version: int) -> None:
    """Make a run written now what nbviz wrote at ``version``, its rows kept: the tables
    added since dropped (they are empty), the version set back."""
    names = {o[1] for o in schema.expected_objects(version)}
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            if table not in names:
                assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
                conn.execute(f"DROP TABLE {table}")
    conn.close()
    _set_version(run, version)


def _table_names(run: Path) -> set[str]:
    conn = sqlite3.connect(run / DB_NAME)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def _stored_version(run: Path) -> int:
    conn = sqlite3.connect(run / DB_NAME)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    finally:
        conn.close()
    return json.loads(row[0])


def test_create_makes_the_directory_database_and_schema(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "exp1"
    conn = create_or_open(run)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert (run / DB_NAME).is_file()
    assert tables == set(schema.TABLES) | set(schema.INTERNAL_TABLES)
    assert _stored_version(run) == SCHEMA_VERSION


def test_database_is_in_wal_mode_with_normal_sync_and_a_busy_timeout(tmp_path: Path) -> None:
    conn = create_or_open(tmp_path / "run")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    conn.close()


def test_reopening_keeps_data_and_version(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run) as w:
        w.set_meta("config", {"lr": 0.1})
    create_or_open(run).close()
    with Reader(run) as r:
        assert r.meta("config") == {"lr": 0.1}
        assert r.meta("schema_version") == SCHEMA_VERSION


def test_readonly_connection_cannot_write(tmp_path: Path) -> None:
    create_or_open(tmp_path / "run").close()
    conn = schema.connect(tmp_path / "run", readonly=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("INSERT INTO meta VALUES ('a', '1')")
    conn.close()


def test_a_directory_without_a_database_opened_readonly_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        Reader(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=DB_NAME):
        schema.connect(tmp_path / "empty", readonly=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Reader(tmp_path / "missing")
    assert not (tmp_path / "empty" / DB_NAME).exists()


def test_a_newer_schema_says_to_upgrade_nbviz(tmp_path: Path) -> None:
    run = tmp_path / "run"
    create_or_open(run).close()
    _set_version(run, SCHEMA_VERSION + 1)
    message = (
        f"run/run.sqlite: the run was written with schema {SCHEMA_VERSION + 1} but this "
        f"nbviz reads up to {SCHEMA_VERSION}; upgrade nbviz"
    )
    with pytest.raises(SchemaError, match=message):
        create_or_open(run)
    with pytest.raises(SchemaError, match=message):
        Writer(run)
    with pytest.raises(SchemaError, match=message):
        Reader(run)


def test_an_older_schema_without_a_migration_names_both_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    create_or_open(run).close()
    _make_older(run)
    monkeypatch.setattr(schema, "MIGRATIONS", {})
    with pytest.raises(
        SchemaError,
        match=f"written with schema {SCHEMA_VERSION - 1} and this nbviz reads schema "
        f"{SCHEMA_VERSION}, but it has no migration .*; open the run with the nbviz release",
    ):
        create_or_open(run)
    assert _stored_version(run) == SCHEMA_VERSION - 1


def test_an_older_schema_is_migrated_by_the_registered_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    create_or_open(run).close()
    _make_older(run)
    applied: list[int] = []
    real = schema.MIGRATIONS[SCHEMA_VERSION - 1]

    def step(conn: sqlite3.Connection) -> None:
        applied.append(1)
        real(conn)  # what the real step does, and a mark beside it
        conn.execute("INSERT INTO meta VALUES ('migrated', 'true')")

    monkeypatch.setitem(schema.MIGRATIONS, SCHEMA_VERSION - 1, step)
    create_or_open(run).close()
    assert applied == [1]
    assert _stored_version(run) == SCHEMA_VERSION
    with Reader(run) as r:
        assert r.meta("migrated") is True


def test_a_failed_migration_leaves_the_run_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    create_or_open(run).close()
    _make_older(run)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO meta VALUES ('half', 'true')")
        raise RuntimeError("step failed")

    monkeypatch.setitem(schema.MIGRATIONS, SCHEMA_VERSION - 1, broken)
    with pytest.raises(RuntimeError, match="step failed"):
        create_or_open(run)
    assert _stored_version(run) == SCHEMA_VERSION - 1
    conn = sqlite3.connect(run / DB_NAME)
    assert conn.execute("SELECT count(*) FROM meta WHERE key = 'half'").fetchone()[0] == 0
    conn.close()


def test_a_foreign_sqlite_file_is_not_taken_for_a_run(tmp_path: Path) -> None:
    run = tmp_path / "other"
    run.mkdir()
    conn = sqlite3.connect(run / DB_NAME)
    conn.execute("CREATE TABLE t(x)")
    conn.close()
    with pytest.raises(SchemaError, match="is not an nbviz run"):
        create_or_open(run)


def test_a_schema_1_run_is_migrated_step_by_step_and_keeps_its_data(tmp_path: Path) -> None:
    run = tmp_path / "run"
    create_or_open(run).close()
    _make_older(run, 1)
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        conn.execute("INSERT INTO scalars VALUES ('loss', 3, 0.5, 0.0)")
    conn.close()
    with pytest.raises(SchemaError, match="written with schema 1 .* open it once for writing"):
        Reader(run)
    create_or_open(run).close()
    assert _stored_version(run) == SCHEMA_VERSION
    with Reader(run) as r:
        assert r.scalars()["value"].tolist() == [0.5]
        assert r.outputs(0) is None and len(r.captured_ids()) == 0


def _schema_5_run(run: Path) -> None:
    with Writer(run) as w:
        w.insert(
            "histograms",
            [(3, "fc1", "weight", 0.0, 1.0, np.arange(4, dtype="<i8").tobytes(), 0, 0, 0)],
        )
    _written_at(run, 5)


def test_a_schema_5_run_opened_read_only_is_read_as_it_is_and_left_unchanged(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    _schema_5_run(run)
    before = (run / DB_NAME).read_bytes()
    with Reader(run) as r:
        assert r.meta("schema_version") == 5
        edges, counts = r.histogram("fc1", "weight", 3)  # no logged bins: the uniform row
        np.testing.assert_array_equal(edges, [0.0, 0.25, 0.5, 0.75, 1.0])
        np.testing.assert_array_equal(counts, [0, 1, 2, 3])
        assert r.histogram_rows("fc1", "weight").steps.tolist() == [3]
    assert (run / DB_NAME).read_bytes() == before
    assert "histogram_bins" not in _table_names(run)


def test_a_schema_5_run_is_migrated_to_6_and_then_keeps_logged_bins(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _schema_5_run(run)
    edges, counts = [0.0, 0.1, 1.0], [7, 2]
    with Reader(run) as early:  # opened before the migration, read as schema 5
        assert len(early.histogram("fc1", "weight", 3)[1]) == 4
        with Writer(run) as w:  # a writer migrates it
            w.insert("histogram_bins", [(3, "fc1", "weight", *bins_blobs(edges, counts))])
        assert _stored_version(run) == SCHEMA_VERSION >= 6
        assert "histogram_bins" in _table_names(run)
        with Reader(run) as r:
            for reader in (r, early):
                got_edges, got_counts = reader.histogram("fc1", "weight", 3)
                np.testing.assert_array_equal(got_edges, edges)
                np.testing.assert_array_equal(got_counts, counts)
                rows = reader.histogram_rows("fc1", "weight")
                np.testing.assert_array_equal(rows.counts[0], [0, 1, 2, 3])


def test_a_run_older_than_schema_5_is_refused_read_only_until_migrated(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _schema_5_run(run)
    _written_at(run, 4)
    assert 4 not in schema.READ_AS_IS
    with pytest.raises(SchemaError, match="written with schema 4 .* open it once for writing"):
        Reader(run)  # a reader never changes a run
    assert _stored_version(run) == 4


def test_versions_read_as_they_are_list_every_table_added_since() -> None:
    """A read-only reader of such a version treats exactly these tables as empty."""

    def tables(version: int) -> set[str]:
        return {o[1] for o in schema.expected_objects(version) if o[0] == "table"}

    for version, added in schema.READ_AS_IS.items():
        assert version < SCHEMA_VERSION
        assert tables(SCHEMA_VERSION) - tables(version) == set(added), version
        assert tables(version) <= tables(SCHEMA_VERSION), version
