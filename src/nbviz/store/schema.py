"""The run store's schema: tables, connections and version checks.

A run is a directory holding one SQLite database, ``run.sqlite``, in WAL mode
while it is written: one writer (a background thread, see
:mod:`nbviz.store.writer`) and any number of readers in other threads or
processes (connections: :mod:`nbviz.store.connection`). A run opened is
checked to hold exactly the schema objects nbviz creates for its version
(:func:`check_objects`): a view, a trigger or a table of another shape in a
file from elsewhere is refused before anything is read from it. Arrays are stored as raw
little-endian bytes beside dtype and shape columns (:mod:`nbviz.store.arrays`);
nothing in a run is ever unpickled, so opening a run cannot run code.

Conventions the tables rely on:

- ``meta.value`` is JSON; ``schema_version`` holds the schema's version.
- ``layer_stats.signal`` and ``histograms.signal`` are one of :data:`SIGNALS`.
  ``layer`` is the module's qualified name for activations (and gradients of a
  module's output), or the parameter's qualified name (``"conv1.weight"``) for
  weights, updates and parameter gradients. ``rel`` is ``||w - w0|| / ||w0||``
  for weights, ``||dw|| / ||w||`` for updates and NULL otherwise.
- ``layer_stats``, ``histograms`` and ``unit_stats`` name their ``(layer, signal)``
  by ``sid``, the id of a ``series`` row (schema 3; :mod:`nbviz.store.tables`).
- ``histograms.counts`` holds ``bins`` uniform bins over ``[lo, hi]``, each a
  little-endian integer of 1, 2 or 4 unsigned bytes or 8 signed ones (the
  narrowest that holds the counts); ``unit_stats.values`` is little-endian
  float32, one per unit.
- ``histogram_bins`` (schema 6) keeps a histogram's bins as they were logged
  where the uniform ``histograms`` row at the same ``(step, sid)`` does not
  reproduce them exactly (a TensorBoard log's exponential buckets): ``edges``
  little-endian float64 (n + 1, finite, non-decreasing), ``counts`` little-endian
  float64 (n, finite, >= 0). The views draw the uniform row.
- ``unit_tokens`` (schema 7) keeps, per layer and evaluation of a language model,
  each unit's top-activating tokens: ``ids`` little-endian int64 and ``positions``
  int32 ``(units, k)`` (-1: no such token), ``values`` float32 ``(units, k)`` most
  active first, ``contexts`` int32 ``(units, k, width)``, the input token ids from
  ``before`` positions ahead of the token (-1 outside the sample).
- ``step_runs``, ``scalar_buckets`` and ``stat_buckets`` are summaries the
  writer keeps as it writes (:mod:`nbviz.store.summaries`); so are
  ``scalar_chunks`` and ``scalar_bucket_chunks`` (schema 8): each scalar's rows and
  buckets packed in blocks of little-endian records (:mod:`nbviz.store.scalar_chunks`).
- ``ids`` blobs (``probabilities``, ``embeddings``, ``outputs``) are little-endian int64.
- ``outputs`` hold what a model that is not a classifier gave at one evaluation
  (``run.evaluate(..., loss_fn=...)``, ``run.log_outputs``): the outputs and
  targets of the samples in ``ids``, each an array of shape ``(len(ids), ...)``
  or NULL where it was not kept; ``targets_from`` is ``"inputs"`` when the
  targets are the model's inputs (an autoencoder), ``"tokens"`` for a language
  model's per-token losses and top predictions (:mod:`nbviz.recording.tokens`),
  else ``"targets"``. Their
  per-sample losses are in ``predictions.loss`` (``label`` and ``pred`` NULL).
- ``captures`` hold one sample's activations, one row per layer (``position`` is
  the forward order): ``summary`` is JSON (output shape and statistics),
  ``units`` little-endian float32 (one mean per unit), ``maps`` little-endian
  float16 feature maps of shape ``maps_shape`` (channels, H, W), or NULL.
- SQLite stores a NaN REAL as NULL; readers turn NULL back into NaN.
"""

from __future__ import annotations

import json
import sqlite3
import time
from functools import cache
from pathlib import Path

from nbviz.store.connection import BUSY_TIMEOUT_MS, DB_NAME, connect, db_path
from nbviz.store.errors import RunFileError, SchemaError, from_sqlite_error
from nbviz.store.file_checks import warn_lost_commits
from nbviz.store.migrations import MIGRATIONS
from nbviz.store.tables import (
    DDL,
    DDL_OF_VERSION,
    INTERNAL_TABLES,
    READ_AS_IS,
    SCHEMA_VERSION,
    SIGNALS,
    TABLES,
)

__all__ = [
    "DDL",
    "DDL_OF_VERSION",
    "INTERNAL_TABLES",
    "BUSY_TIMEOUT_MS",
    "DB_NAME",
    "MIGRATIONS",
    "READ_AS_IS",
    "SCHEMA_VERSION",
    "SIGNALS",
    "TABLES",
    "SchemaError",
    "check_objects",
    "expected_objects",
    "normal_sql",
    "check_version",
    "connect",
    "create_or_open",
    "db_path",
    "read_schema_version",
]

_NOT_A_RUN = "open a run directory that nbviz recorded"
# a run copied while it was written keeps everything committed since its last
# checkpoint in run.sqlite-wal: the database file alone can be its empty first page
_EMPTY_FILE = (
    "a run copied while it was being written keeps its data in run.sqlite-wal beside "
    "run.sqlite: copy the whole run directory, or copy it after run.close()"
)
_CUT_LOG = (
    "copy the whole run directory again from where it was recorded, or copy it after "
    "run.close() (then run.sqlite alone holds everything)"
)
_FOREIGN = (
    "a run from elsewhere is read as data, never as code, so a file whose schema is not "
    "the one nbviz writes is refused; record the run again, or ask whoever sent it for "
    "the run as nbviz wrote it"
)


def normal_sql(sql: str | None) -> str | None:
    """SQL text with runs of whitespace made one space, and none inside brackets' edges."""
    if sql is None:
        return None
    text = " ".join(sql.split())
    for a, b in (("( ", "("), (" )", ")"), (" ,", ","), (" (", "(")):
        text = text.replace(a, b)
    return text


@cache
def expected_objects(version: int) -> frozenset[tuple[str, str, str, str | None]]:
    """``(type, name, table, sql)`` of every schema object a run of ``version`` holds.

    Built by SQLite itself from the version's DDL in an in-memory database, so
    that its own spelling of the statements (and its automatic indexes) is
    what a run's ``sqlite_master`` is compared with.
    """
    mem = sqlite3.connect(":memory:")
    try:
        for statement in DDL_OF_VERSION[version]:
            mem.execute(statement)
        rows = mem.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    finally:
        mem.close()
    return frozenset((t, n, tb, normal_sql(q)) for t, n, tb, q in rows)


def _objects(conn: sqlite3.Connection) -> set[tuple[str, str, str, str | None]]:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return {(str(t), str(n), str(tb), normal_sql(q)) for t, n, tb, q in rows}


def _describe(obj: tuple[str, str, str, str | None]) -> str:
    kind, name, table, _ = obj
    return f"{kind} {name!r}" + (f" on {table!r}" if kind in ("index", "trigger") else "")


def check_objects(conn: sqlite3.Connection, where: Path | str, version: int) -> None:
    """Raise RunFileError unless the run holds exactly the schema objects of ``version``.

    Views, triggers, tables and indexes that nbviz did not create, or a table
    of nbviz's name whose definition differs, could run work (a recursive
    view) or change data (a trigger) when the run is read or appended to.
    """
    expected = expected_objects(version)
    found = _objects(conn)
    if found == expected:
        return
    by_name = {o[1]: o for o in expected}
    extra = sorted(found - expected, key=lambda o: o[1])
    missing = sorted(expected - found, key=lambda o: o[1])
    faults = []
    for obj in extra:
        mine = by_name.get(obj[1])
        if mine is None:
            faults.append(f"{_describe(obj)}, which nbviz does not create")
        elif mine[0] != obj[0]:
            faults.append(f"{_describe(obj)} where nbviz creates a {mine[0]}")
        else:
            faults.append(f"{_describe(obj)} defined otherwise than nbviz defines it")
    found_names = {o[1] for o in found}
    faults += [f"no {_describe(o)}" for o in missing if o[1] not in found_names]
    shown = "; ".join(faults[:6]) + (f"; and {len(faults) - 6} more" if len(faults) > 6 else "")
    raise RunFileError(
        where, f"its schema is not the one nbviz writes (schema {version}): {shown}", _FOREIGN
    )


def _meta_is_nbviz(conn: sqlite3.Connection, where: Path | str) -> bool:
    """Whether the ``meta`` table is nbviz's (so reading it runs nothing); False if absent."""
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name = 'meta'"
    ).fetchall()
    if not rows:
        return False
    mine = {o for o in expected_objects(SCHEMA_VERSION) if o[1] == "meta"}
    if {(str(t), str(n), str(tb), normal_sql(q)) for t, n, tb, q in rows} != mine:
        raise RunFileError(
            where,
            f"its {rows[0][0]} 'meta' is not the table nbviz creates, so its schema version "
            "is not read",
            _FOREIGN,
        )
    return True


def read_schema_version(conn: sqlite3.Connection, where: Path | str = "run") -> int | None:
    """The stored ``schema_version``, or None for a database without one.

    The ``meta`` table is read only once it is known to be nbviz's; a version
    that is not a whole number raises RunFileError.
    """
    if not _meta_is_nbviz(conn, where):
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        version = json.loads(row[0])
    except (TypeError, ValueError):
        version = row[0]
    if isinstance(version, bool) or not isinstance(version, int):
        raise SchemaError(
            where,
            f"its schema_version is {reprlib_short(version)}, not a whole number: the file "
            "was changed by something other than nbviz, or is damaged",
            _FOREIGN,
        )
    return version


def reprlib_short(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (for values read from a foreign file)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_version(
    conn: sqlite3.Connection, where: Path | str, *, readonly: bool, lost: str | None = None
) -> int:
    """Raise unless the database is a run at SCHEMA_VERSION (migrating it if allowed);
    returns the version the run now holds.

    Read-only, a version of :data:`READ_AS_IS` is read as it is (the version is
    returned; its reads treat the tables added since as empty). SchemaError: no
    schema version, a newer one, or an older one that cannot be (or, read-only,
    is not) migrated. RunFileError: schema objects that are not the version's,
    or a damaged file. ``lost``: what of the write-ahead log could not be read (from
    :func:`~nbviz.store.file_checks.warn_lost_commits`), named when it took the tables.
    """
    try:
        return _check_version(conn, where, readonly=readonly, lost=lost)
    except sqlite3.DatabaseError as exc:
        raise from_sqlite_error(_file(where), exc, "reading its schema") from exc


def _file(where: Path | str) -> Path:
    """The database file of ``where`` (a run directory or the file), for messages."""
    where = Path(where)
    return where if where.name == DB_NAME or where.is_file() else where / DB_NAME


def _check_version(
    conn: sqlite3.Connection, where: Path | str, *, readonly: bool, lost: str | None
) -> int:
    file = _file(where)
    version = read_schema_version(conn, file)
    if version is None:
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            if lost:  # the tables were in the part of the log that cannot be read
                raise SchemaError(file, f"it holds no tables that can be read: {lost}", _CUT_LOG)
            raise SchemaError(file, "it holds no tables at all", _EMPTY_FILE)
        raise SchemaError(file, "it is not an nbviz run: it has no schema_version", _NOT_A_RUN)
    if version > SCHEMA_VERSION:
        raise SchemaError(
            file,
            f"the run was written with schema {version} but this nbviz reads up to "
            f"{SCHEMA_VERSION}",
            "upgrade nbviz",
        )
    if version not in DDL_OF_VERSION:
        raise SchemaError(
            file,
            f"its schema_version is {version}, which no nbviz release wrote",
            _FOREIGN,
        )
    check_objects(conn, file, version)
    if version == SCHEMA_VERSION or (readonly and version in READ_AS_IS):
        return version
    missing = [v for v in range(version, SCHEMA_VERSION) if v not in MIGRATIONS]
    if missing:
        raise SchemaError(
            file,
            f"the run was written with schema {version} and this nbviz reads schema "
            f"{SCHEMA_VERSION}, but it has no migration from schema {missing[0]}",
            "open the run with the nbviz release that wrote it, or record it again",
        )
    if readonly:
        raise SchemaError(
            file,
            f"the run was written with schema {version} and this nbviz reads schema "
            f"{SCHEMA_VERSION}",
            f"open it once for writing (nbviz.Run({str(where)!r})) to migrate it",
        )
    for v in range(version, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[v](conn)
            _set_version(conn, v + 1)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION


def _set_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
        (json.dumps(version),),
    )


def create_or_open(path: Path | str) -> sqlite3.Connection:
    """Create a run (directory, database, schema) or open one and check it.

    Returns a writable connection in autocommit mode. An older schema is
    brought up to date through :data:`MIGRATIONS`; a newer one, or an older one
    with no migration path, raises SchemaError saying what to do; a damaged or
    foreign file raises RunFileError. A write-ahead log that lost commits is
    reported (a RunFileWarning) before SQLite reads it and drops what it lost.
    """
    path = Path(path)
    file = db_path(path)
    warn_lost_commits(file)
    conn = connect(path, readonly=False)
    try:
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
                if fresh:
                    for statement in DDL:
                        conn.execute(statement)
                    _set_version(conn, SCHEMA_VERSION)
                    conn.execute(
                        "INSERT OR IGNORE INTO meta(key, value) VALUES ('created', ?)",
                        (json.dumps(time.time()),),
                    )
                    conn.execute(
                        "INSERT OR IGNORE INTO meta(key, value) VALUES ('nbviz_version', ?)",
                        (json.dumps(_nbviz_version()),),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise from_sqlite_error(file, exc, "opening the run to write") from exc
        if not fresh:
            check_version(conn, path, readonly=False)
    except BaseException:
        conn.close()
        raise
    return conn


def _nbviz_version() -> str:
    try:
        from nbviz._version import __version__
    except ImportError:  # pragma: no cover - the store used on its own
        return "unknown"
    return str(__version__)
