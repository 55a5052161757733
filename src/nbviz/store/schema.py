"""The run store's schema: tables, connections and version checks.

A run is a directory holding one SQLite database, ``run.sqlite``, in WAL mode:
one writer (a background thread, see :mod:`nbviz.store.writer`) and any number
of readers in other threads or processes. Arrays are stored as raw
little-endian bytes beside dtype and shape columns (:mod:`nbviz.store.arrays`);
nothing in a run is ever unpickled, so opening a run cannot run code.

Conventions the tables rely on:

- ``meta.value`` is JSON; ``schema_version`` holds the schema's version.
- ``layer_stats.signal`` and ``histograms.signal`` are one of :data:`SIGNALS`.
  ``layer`` is the module's qualified name for activations (and gradients of a
  module's output), or the parameter's qualified name (``"conv1.weight"``) for
  weights, updates and parameter gradients. ``rel`` is ``||w - w0|| / ||w0||``
  for weights, ``||dw|| / ||w||`` for updates and NULL otherwise.
- ``histograms.counts`` is a little-endian int64 array of n uniform bins over
  ``[lo, hi]``; ``unit_stats.values`` is little-endian float32, one per unit.
- ``ids`` blobs (``probabilities``, ``embeddings``) are little-endian int64.
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
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "DB_NAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SIGNALS",
    "TABLES",
    "SchemaError",
    "check_version",
    "connect",
    "create_or_open",
    "db_path",
    "read_schema_version",
]

SCHEMA_VERSION = 2
DB_NAME = "run.sqlite"
SIGNALS = ("activation", "gradient", "weight", "update")
BUSY_TIMEOUT_MS = 10_000


class SchemaError(RuntimeError):
    """A run's schema version cannot be read by this nbviz."""


# Column order of every table: the order of the tuples handed to Writer.insert.
TABLES: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "scalars": ("name", "step", "value", "wall_time"),
    "layer_stats": (
        "step",
        "layer",
        "signal",
        "count",
        "mean",
        "std",
        "min",
        "max",
        "zero_frac",
        "nonfinite",
        "norm",
        "rel",
    ),
    "histograms": (
        "step",
        "layer",
        "signal",
        "lo",
        "hi",
        "counts",
        "underflow",
        "overflow",
        "nonfinite",
    ),
    "unit_stats": ("step", "layer", "signal", "values"),
    "events": ("kind", "layer", "signal", "step", "detail"),
    "predictions": ("split", "step", "id", "label", "pred", "loss", "confidence"),
    "probabilities": ("split", "step", "ids", "probs", "dtype", "shape"),
    "samples": ("split", "id", "label", "kind", "payload", "dtype", "shape", "text"),
    "embeddings": (
        "split",
        "layer",
        "kind",
        "step",
        "ids",
        "matrix",
        "dtype",
        "shape",
    ),
    "projections": (
        "key",
        "split",
        "layer",
        "step",
        "method",
        "params",
        "matrix",
        "dtype",
        "shape",
        "created",
    ),
    "profiles": ("step", "name", "payload"),
    "captures": (
        "split",
        "id",
        "step",
        "position",
        "layer",
        "type",
        "summary",
        "units",
        "maps",
        "maps_shape",
    ),
}

_CAPTURES_DDL = """CREATE TABLE IF NOT EXISTS captures(
        split TEXT NOT NULL, id INTEGER NOT NULL, step INTEGER NOT NULL,
        position INTEGER NOT NULL, layer TEXT NOT NULL, type TEXT, summary TEXT NOT NULL,
        units BLOB, maps BLOB, maps_shape TEXT,
        PRIMARY KEY(split, id, step, layer))"""

# Tables with small rows cluster on their natural key (WITHOUT ROWID). Tables
# whose rows carry blobs keep a rowid: SQLite advises against WITHOUT ROWID for
# rows over ~1/20 of a page, and the key is then a unique index.
DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS meta(
        key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS scalars(
        name TEXT NOT NULL, step INTEGER NOT NULL, value REAL, wall_time REAL,
        PRIMARY KEY(name, step)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS layer_stats(
        step INTEGER NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        count INTEGER, mean REAL, std REAL, min REAL, max REAL, zero_frac REAL,
        nonfinite INTEGER, norm REAL, rel REAL,
        PRIMARY KEY(step, signal, layer)) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS layer_stats_by_layer
        ON layer_stats(layer, signal, step)""",
    """CREATE TABLE IF NOT EXISTS histograms(
        step INTEGER NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        lo REAL, hi REAL, counts BLOB NOT NULL, underflow INTEGER,
        overflow INTEGER, nonfinite INTEGER,
        PRIMARY KEY(step, signal, layer))""",
    """CREATE INDEX IF NOT EXISTS histograms_by_layer
        ON histograms(layer, signal, step)""",
    """CREATE TABLE IF NOT EXISTS unit_stats(
        step INTEGER NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        "values" BLOB NOT NULL,
        PRIMARY KEY(layer, signal, step))""",
    """CREATE TABLE IF NOT EXISTS events(
        kind TEXT NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        step INTEGER, detail TEXT,
        PRIMARY KEY(kind, layer, signal)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS predictions(
        split TEXT NOT NULL, step INTEGER NOT NULL, id INTEGER NOT NULL,
        label INTEGER, pred INTEGER, loss REAL, confidence REAL,
        PRIMARY KEY(split, step, id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS probabilities(
        split TEXT NOT NULL, step INTEGER NOT NULL, ids BLOB NOT NULL,
        probs BLOB NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL,
        PRIMARY KEY(split, step))""",
    """CREATE TABLE IF NOT EXISTS samples(
        split TEXT NOT NULL, id INTEGER NOT NULL, label INTEGER,
        kind TEXT NOT NULL, payload BLOB, dtype TEXT, shape TEXT, text TEXT,
        PRIMARY KEY(split, id))""",
    """CREATE TABLE IF NOT EXISTS embeddings(
        split TEXT NOT NULL, layer TEXT NOT NULL, kind TEXT NOT NULL,
        step INTEGER NOT NULL, ids BLOB NOT NULL, matrix BLOB NOT NULL,
        dtype TEXT NOT NULL, shape TEXT NOT NULL,
        PRIMARY KEY(split, layer, kind, step))""",
    """CREATE TABLE IF NOT EXISTS projections(
        key TEXT PRIMARY KEY, split TEXT, layer TEXT, step INTEGER,
        method TEXT, params TEXT, matrix BLOB NOT NULL, dtype TEXT NOT NULL,
        shape TEXT NOT NULL, created REAL)""",
    """CREATE TABLE IF NOT EXISTS profiles(
        step INTEGER NOT NULL, name TEXT NOT NULL, payload TEXT,
        PRIMARY KEY(step, name)) WITHOUT ROWID""",
    _CAPTURES_DDL,
)


# Schema upgrades: MIGRATIONS[n] turns a schema-n database into schema n + 1.
# Each step runs inside one transaction; create_or_open records the new version.
def _add_captures(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2: the ``captures`` table (one sample's activations per layer)."""
    conn.execute(_CAPTURES_DDL)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _add_captures}


def db_path(path: Path | str) -> Path:
    """The database file of a run: ``path / run.sqlite``, or ``path`` if it is a file."""
    path = Path(path)
    return path if path.is_file() else path / DB_NAME


def connect(path: Path | str, *, readonly: bool) -> sqlite3.Connection:
    """Open a run's database (``path`` is the run directory or the file).

    Read-only connections use a ``mode=ro`` URI and never create anything: a
    missing database raises FileNotFoundError naming the path. Connections are
    in autocommit mode (``isolation_level=None``), so every statement outside
    an explicit transaction sees the latest commit. ``check_same_thread`` is
    off: callers guard a connection so only one thread uses it at a time.
    """
    file = db_path(path)
    if readonly:
        if not file.exists():
            raise FileNotFoundError(f"no nbviz run at {Path(path)}: {file} does not exist")
        uri = f"{file.resolve().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL database on read-only media with no -shm file cannot be
            # opened for shared reading; nobody can be writing it, so read it
            # as immutable instead.
            conn.close()
            conn = sqlite3.connect(
                f"{file.resolve().as_uri()}?mode=ro&immutable=1",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        return conn
    file.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def read_schema_version(conn: sqlite3.Connection) -> int | None:
    """The stored ``schema_version``, or None for a database without one."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return None if row is None else int(json.loads(row[0]))


def check_version(conn: sqlite3.Connection, where: Path | str, *, readonly: bool) -> None:
    """Raise SchemaError unless the database is at SCHEMA_VERSION (migrating if allowed)."""
    version = read_schema_version(conn)
    if version is None:
        raise SchemaError(f"{where} is not an nbviz run: it has no schema_version")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"run at {where} was written with schema {version} but this nbviz "
            f"reads up to {SCHEMA_VERSION}: upgrade nbviz"
        )
    if version == SCHEMA_VERSION:
        return
    missing = [v for v in range(version, SCHEMA_VERSION) if v not in MIGRATIONS]
    if missing:
        raise SchemaError(
            f"run at {where} was written with schema {version} and this nbviz "
            f"reads schema {SCHEMA_VERSION}, but it has no migration from schema "
            f"{missing[0]}: open the run with the nbviz release that wrote it, or "
            f"record it again"
        )
    if readonly:
        raise SchemaError(
            f"run at {where} was written with schema {version} and this nbviz "
            f"reads schema {SCHEMA_VERSION}: open it once for writing "
            f"(nbviz.Run({str(where)!r})) to migrate it"
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


def _set_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
        (json.dumps(version),),
    )


def create_or_open(path: Path | str) -> sqlite3.Connection:
    """Create a run (directory, database, schema) or open one and check its version.

    Returns a writable connection in autocommit mode. An older schema is
    brought up to date through :data:`MIGRATIONS`; a newer one, or an older one
    with no migration path, raises SchemaError saying what to do.
    """
    path = Path(path)
    conn = connect(path, readonly=False)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            fresh = (
                conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[
                    0
                ]
                == 0
            )
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
        if not fresh:
            check_version(conn, path, readonly=False)
    except BaseException:
        conn.close()
        raise
    return conn


def _nbviz_version() -> str:
    try:
        from nbviz import __version__
    except ImportError:  # pragma: no cover - the store used on its own
        return "unknown"
    return str(__version__)
