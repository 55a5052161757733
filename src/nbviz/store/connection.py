"""Connections to a run's database: opened guarded, closed self-contained.

A run's file may come from anywhere, so every connection is opened as if the
file were hostile: ``trusted_schema`` off (schema objects may not call
functions with side effects), no attached databases, readers ``query_only``
and under a time budget per statement (a progress handler stops a statement
that runs past :data:`READ_BUDGET_S`; nothing nbviz writes needs it, a crafted
file could). What the schema itself may hold is checked in
:mod:`nbviz.store.schema`.

A run's database is in WAL mode while it is written. :func:`close_writer`
makes a closed run one self-contained file: it checkpoints the log into
``run.sqlite`` and, when no other connection has the run open, leaves WAL
mode, so that the file alone (copied, mailed, on read-only media) holds
everything and opens anywhere. A reader that cannot see the log (a copy on
read-only media without its ``-shm``) reads the file as it is only when the
log holds nothing more; otherwise it refuses, saying why.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from nbviz.store.errors import RunFileError, from_sqlite_error
from nbviz.store.wal import scan_wal

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DB_NAME",
    "READ_BUDGET_S",
    "GuardedConnection",
    "close_writer",
    "connect",
    "db_path",
]

DB_NAME = "run.sqlite"
#: The largest step or sample id a run holds: integers exact in float64 (see nbviz.arguments).
MAX_STEP = 2**53 - 1
BUSY_TIMEOUT_MS = 10_000
#: Seconds one read statement may run before it is stopped (see the module docstring).
READ_BUDGET_S = 60.0
_PROGRESS_OPS = 50_000  # virtual-machine steps between two looks at the clock


class GuardedConnection(sqlite3.Connection):
    """A connection whose statements run under a time budget (``budget`` seconds, or None).

    Every ``execute`` starts the clock again; a statement still running when
    it runs out is stopped with ``sqlite3.OperationalError('interrupted')``.
    """

    budget: float | None = None
    _deadline: float = float("inf")

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        if self.budget is not None:
            self._deadline = time.monotonic() + self.budget
        try:
            return super().execute(sql, parameters)
        except UnicodeDecodeError as exc:  # SQLite's message quotes damaged schema text
            raise sqlite3.DatabaseError(
                f"database disk image is malformed (its schema holds text that is not UTF-8: {exc})"
            ) from None

    def _over_budget(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0


def db_path(path: Path | str) -> Path:
    """The database file of a run: ``path / run.sqlite``, or ``path`` if it is a file."""
    path = Path(path)
    return path if path.is_file() else path / DB_NAME


def _open(target: str | Path, *, uri: bool = False) -> GuardedConnection:
    conn = sqlite3.connect(
        target,
        uri=uri,
        isolation_level=None,
        check_same_thread=False,
        factory=GuardedConnection,
    )
    assert isinstance(conn, GuardedConnection)
    return conn


def _harden(conn: GuardedConnection, *, readonly: bool) -> None:
    """What every connection to a run sets before it reads anything (see the module docstring)."""
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA trusted_schema=OFF")
    conn.execute("PRAGMA cell_size_check=ON")
    if hasattr(conn, "setlimit"):  # Python >= 3.11; nbviz itself never attaches a database
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    if readonly:
        conn.execute("PRAGMA query_only=ON")
        conn.budget = READ_BUDGET_S
        conn.set_progress_handler(conn._over_budget, _PROGRESS_OPS)


def connect(path: Path | str, *, readonly: bool, wal: bool = True) -> GuardedConnection:
    """Open a run's database (``path`` is the run directory or the file), guarded.

    Read-only connections use a ``mode=ro`` URI and never create anything: a
    missing database raises FileNotFoundError naming the path. Writable ones
    put the database in WAL mode unless ``wal=False`` (a one-off write that
    leaves the run's journal mode as it is). Connections are in autocommit
    mode, and ``check_same_thread`` is off: callers guard a connection so that
    one thread uses it at a time. A file SQLite cannot open raises
    :class:`~nbviz.store.errors.RunFileError` naming it.
    """
    file = db_path(path)
    if file.is_dir():
        raise RunFileError(
            file,
            "it is a directory, not a database file",
            "remove or rename it, or give the path of another run",
        )
    if readonly:
        if not file.exists():
            raise FileNotFoundError(f"no nbviz run at {Path(path)}: {file} does not exist")
        return _connect_readonly(file)
    file.parent.mkdir(parents=True, exist_ok=True)
    conn = None
    try:
        conn = _open(file)
        _harden(conn, readonly=False)
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        raise from_sqlite_error(file, exc, "opening the run to write") from exc
    return conn


def _connect_readonly(file: Path) -> GuardedConnection:
    uri = file.resolve().as_uri()
    conn = _open(f"{uri}?mode=ro", uri=True)
    try:
        _harden(conn, readonly=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        cannot_open = getattr(exc, "sqlite_errorname", "") == "SQLITE_CANTOPEN"
        if not (cannot_open or "unable to open" in str(exc)):  # the name: Python >= 3.11
            raise from_sqlite_error(file, exc, "opening the run") from exc
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise from_sqlite_error(file, exc, "opening the run") from exc
    # A WAL database whose directory cannot be written and that has no -shm
    # cannot be opened for shared reading: nobody can be writing it. SQLite can
    # then read the file alone (immutable), which is all of the run only when
    # the log holds no commits.
    wal = Path(f"{file}-wal")
    scan = scan_wal(wal)
    if scan is not None and scan.header_ok and scan.committed:
        raise RunFileError(
            file,
            f"its write-ahead log {wal.name} holds {scan.committed:,} pages of commits not yet "
            f"in {file.name}, and SQLite cannot read a log where it cannot write a "
            f"{file.name}-shm beside it (the directory is read-only); reading the file alone "
            "would show part of the run as if it were all of it",
            "copy the whole run directory somewhere writable and open it there (or open it "
            "once for writing where it was recorded, with nbviz.Run(path), which folds the "
            "log into the file)",
        )
    conn = _open(f"{uri}?mode=ro&immutable=1", uri=True)
    try:
        _harden(conn, readonly=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise from_sqlite_error(file, exc, "opening the run") from exc
    return conn


def close_writer(conn: sqlite3.Connection, file: Path) -> str | None:
    """Fold the log into the database, leave WAL mode if alone, close; a problem or None.

    Returns a sentence for a warning when the run could not be made one
    self-contained file (another connection kept reading through the whole
    busy timeout, or the checkpoint failed).
    """
    problem = None
    try:
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or (log > 0 and done < log):
            problem = (
                f"{file.name}-wal could not be folded into {file.name} on close ({done} of "
                f"{log} pages): another connection kept reading the run; copy the whole run "
                "directory to share it, or open it once for writing to fold the log in"
            )
        else:
            # Alone with the run: a rollback-journal header lets the file alone
            # open anywhere, read-only media included. Others still open: it
            # stays in WAL mode, its log empty.
            conn.execute("PRAGMA busy_timeout=0")
            try:
                conn.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.OperationalError:
                pass
    except sqlite3.Error as exc:
        problem = f"closing {file.name} failed: {type(exc).__name__}: {exc}"
    finally:
        try:
            conn.close()
        except sqlite3.Error:
            pass
    return problem
