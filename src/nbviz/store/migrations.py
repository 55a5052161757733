"""Schema upgrades: ``MIGRATIONS[n]`` turns a schema-n run into schema n + 1.

Each step runs inside one transaction; :func:`nbviz.store.schema.create_or_open`
records the new version. A run is migrated when it is opened for writing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from nbviz.store.encoding import pack_counts
from nbviz.store.scalar_chunks import rebuild_chunks
from nbviz.store.summaries import rebuild_all
from nbviz.store.tables import (
    ATTENTION_DDL,
    DDL_OF_VERSION,
    HISTOGRAM_BINS_DDL,
    OUTPUTS_DDL,
    SCALAR_CHUNKS_DDL,
    UNIT_TOKENS_DDL,
)

__all__ = ["MIGRATIONS"]


def _add_captures(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2: the ``captures`` table (one sample's activations per layer)."""
    conn.execute(next(d for d in DDL_OF_VERSION[2] if "captures(" in d))


def _series_ids(conn: sqlite3.Connection) -> None:
    """Schema 2 -> 3: statistics, histograms and unit values keyed by a series id,
    histogram counts at their narrowest width, and the summaries views read."""
    for table in ("layer_stats", "histograms", "unit_stats"):
        conn.execute(f"ALTER TABLE {table} RENAME TO old_{table}")
    conn.execute("DROP INDEX IF EXISTS layer_stats_by_layer")
    conn.execute("DROP INDEX IF EXISTS histograms_by_layer")
    for statement in DDL_OF_VERSION[3]:
        conn.execute(statement)
    conn.execute(
        "INSERT OR IGNORE INTO series(layer, signal) SELECT layer, signal FROM old_layer_stats "
        "UNION SELECT layer, signal FROM old_histograms UNION SELECT layer, signal FROM "
        "old_unit_stats ORDER BY 1, 2"
    )
    join = "JOIN series s ON s.layer = o.layer AND s.signal = o.signal"
    conn.execute(
        "INSERT INTO layer_stats SELECT o.step, s.id, o.count, o.mean, o.std, o.min, o.max, "
        f"o.zero_frac, o.nonfinite, o.norm, o.rel FROM old_layer_stats o {join}"
    )
    conn.execute(
        f'INSERT INTO unit_stats SELECT o.step, s.id, o."values" FROM old_unit_stats o {join}'
    )
    rows = conn.execute(
        "SELECT o.step, s.id, o.lo, o.hi, o.counts, o.underflow, o.overflow, o.nonfinite "
        f"FROM old_histograms o {join}"
    )
    insert = "INSERT INTO histograms VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    while batch := rows.fetchmany(4096):
        conn.executemany(
            insert,
            [
                (st, sid, lo, hi, *pack_counts(c), u, o, nf)
                for st, sid, lo, hi, c, u, o, nf in batch
            ],
        )
    for table in ("layer_stats", "histograms", "unit_stats"):
        conn.execute(f"DROP TABLE old_{table}")
    rebuild_all(conn)


def _add_outputs(conn: sqlite3.Connection) -> None:
    """Schema 3 -> 4: the ``outputs`` table (what a model that is not a classifier gave)."""
    conn.execute(OUTPUTS_DDL)


def _add_attention(conn: sqlite3.Connection) -> None:
    """Schema 4 -> 5: the ``attention`` table (a probe batch's attention maps per layer)."""
    conn.execute(ATTENTION_DDL)


def _add_histogram_bins(conn: sqlite3.Connection) -> None:
    """Schema 5 -> 6: the ``histogram_bins`` table (a histogram's bins as they were logged)."""
    conn.execute(HISTOGRAM_BINS_DDL)


def _add_unit_tokens(conn: sqlite3.Connection) -> None:
    """Schema 6 -> 7: the ``unit_tokens`` table (each unit's top-activating tokens)."""
    conn.execute(UNIT_TOKENS_DDL)


def _add_scalar_chunks(conn: sqlite3.Connection) -> None:
    """Schema 7 -> 8: every scalar's rows and buckets packed in blocks, built from its rows."""
    for statement in SCALAR_CHUNKS_DDL:
        conn.execute(statement)
    rebuild_chunks(conn)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _add_captures,
    2: _series_ids,
    3: _add_outputs,
    4: _add_attention,
    5: _add_histogram_bins,
    6: _add_unit_tokens,
    7: _add_scalar_chunks,
}
