"""What can still be read from a run that cannot be opened whole: ``nbviz info`` on a damaged run.

:func:`inspect_run` looks at a run's file step by step, each step guarded, and
says what it found: whether the file is an SQLite database at all, its
journal mode and write-ahead log, which of nbviz's tables are there and how
many rows each holds, which schema objects nbviz did not create (named, never
read), which meta values decode, and the first faults SQLite's own check
finds. It never reads a view or anything whose definition is not nbviz's, and
every statement runs under a short time budget.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nbviz.store.columns import json_value
from nbviz.store.connection import connect, db_path
from nbviz.store.errors import RunFileError, StoredValueError
from nbviz.store.schema import (
    READ_AS_IS,
    SCHEMA_VERSION,
    TABLES,
    expected_objects,
    normal_sql,
    read_schema_version,
)
from nbviz.store.wal import lost_commits

__all__ = ["inspect_run"]

#: Seconds each statement of an inspection may run.
INSPECT_BUDGET_S = 5.0
_MAGIC = b"SQLite format 3\x00"


def inspect_run(path: Path | str) -> list[str]:
    """Lines that say what of the run at ``path`` can be read, and what cannot."""
    file = db_path(path)
    if not file.exists():
        return [f"{file} does not exist"]
    if file.is_dir():
        return [f"{file} is a directory, not a database file"]
    lines = []
    with open(file, "rb") as f:
        header = f.read(100)
    size = file.stat().st_size
    if size == 0:
        return [f"{file.name} is empty (0 bytes)"]
    if header[:16] != _MAGIC:
        return [f"{file.name} ({size:,} bytes) does not start as an SQLite database does"]
    mode = {1: "rollback journal (closed)", 2: "write-ahead log"}.get(header[18], "unknown")
    lines.append(f"{file.name}: an SQLite database of {size:,} bytes, journal mode {mode}")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    if page and pages and pages * page > size:
        lines.append(
            f"its header says it holds {pages:,} pages of {page:,} bytes ({pages * page:,} "
            f"bytes) but the file has {size:,}: it was cut short"
        )
    lost = lost_commits(file)
    if lost:
        lines.append(lost)
    try:
        conn = connect(file, readonly=True)
    except (RunFileError, sqlite3.Error) as exc:
        return [*lines, f"SQLite cannot open it: {exc}"]
    conn.budget = INSPECT_BUDGET_S
    try:
        lines += _tables(conn)
        lines += _meta(conn)
        lines += _check(conn)
    finally:
        conn.close()
    return lines


def _tables(conn: sqlite3.Connection) -> list[str]:
    try:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    except sqlite3.Error as exc:
        return [f"its schema cannot be read: {exc}"]
    found = {(str(t), str(n), str(tb), normal_sql(q)) for t, n, tb, q in rows}
    known = set().union(*(expected_objects(v) for v in range(1, SCHEMA_VERSION + 1)))
    lines = []
    foreign = sorted(found - known, key=lambda o: o[1])
    if foreign:
        shown = ", ".join(f"{t} {n!r}" for t, n, _, _ in foreign[:10])
        lines.append(f"schema objects nbviz does not create (not read): {shown}")
    counts = []
    version = _version(conn)
    later = set(READ_AS_IS.get(version, ())) if version is not None else set()
    for table in TABLES:
        mine = {o for o in known if o[1] == table and o[0] == "table"}
        if not mine & found:
            if table in later and not any(o[1] == table for o in found):
                # added by a later schema: an older file does not hold it, as expected
                counts.append(f"{table}: none yet (schema {version}; added on the next write)")
            else:
                counts.append(f"{table}: missing or not nbviz's")
            continue
        try:
            (n,) = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            counts.append(f"{table}: {n:,} rows")
        except sqlite3.Error as exc:
            counts.append(f"{table}: unreadable ({exc})")
    lines.append("tables: " + "; ".join(counts))
    return lines


def _version(conn: sqlite3.Connection) -> int | None:
    """The stored schema version, or None where it cannot be read."""
    try:
        return read_schema_version(conn)
    except (RunFileError, sqlite3.Error):
        return None


def _meta(conn: sqlite3.Connection) -> list[str]:
    mine = {o for o in expected_objects(SCHEMA_VERSION) if o[1] == "meta"}
    try:
        rows = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name = 'meta'"
        ).fetchall()
        if {(str(t), str(n), str(tb), normal_sql(q)) for t, n, tb, q in rows} != mine:
            return ["meta: not nbviz's table, not read"]
        pairs = conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
    except sqlite3.Error as exc:
        return [f"meta: unreadable ({exc})"]
    good, bad = [], []
    for key, value in pairs:
        try:
            json_value(value)
            good.append(str(key))
        except StoredValueError:
            bad.append(str(key))
    line = f"meta values that decode: {', '.join(good) or 'none'}"
    return [line] + ([f"meta values that do not decode: {', '.join(bad)}"] if bad else [])


def _check(conn: sqlite3.Connection) -> list[str]:
    try:
        faults = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.Error as exc:
        return [f"SQLite's check of the file stopped: {exc}"]
    if faults == ["ok"]:
        return ["SQLite's check of the file: ok"]
    return ["SQLite's check of the file found: " + "; ".join(faults)]


def describe_failure(path: Path | str) -> str:
    """One paragraph for a run that failed to open: what could be read, indented."""
    return "\n".join(f"  {line}" for line in inspect_run(path))
