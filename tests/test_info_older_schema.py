"""``nbviz info`` on a run written by an older schema that is read as it is."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

from nbviz.store import DB_NAME, Writer, schema
from nbviz.store.inspect import describe_failure, inspect_run


def _schema_5_run(run: Path) -> None:
    """A run as nbviz wrote it at schema 5: one histogram row, no ``histogram_bins`` table."""
    with Writer(run) as w:
        w.insert(
            "histograms",
            [(3, "fc1", "weight", 0.0, 1.0, np.arange(4, dtype="<i8").tobytes(), 0, 0, 0)],
        )
    names = {o[1] for o in schema.expected_objects(5)}
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        for (table,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'"
        ).fetchall():
            if table not in names:
                conn.execute(f'DROP TABLE "{table}"')
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(5),))
    conn.close()


def test_a_table_added_by_a_later_schema_is_not_called_missing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _schema_5_run(run)
    assert schema.READ_AS_IS[5][:2] == ("histogram_bins", "unit_tokens")
    tables = next(line for line in inspect_run(run) if line.startswith("tables: "))
    assert "missing" not in tables
    assert "histogram_bins: none yet (schema 5; added on the next write)" in tables
    assert "histograms: 1 rows" in tables
    assert "histogram_bins: none yet" in describe_failure(run)


def test_a_table_missing_from_a_current_run_is_still_called_missing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Writer(run) as w:
        w.insert("scalars", [("loss", 1, 0.5, 0.0)])
    conn = sqlite3.connect(run / DB_NAME)
    with conn:
        conn.execute("DROP TABLE histogram_bins")
    conn.close()
    tables = next(line for line in inspect_run(run) if line.startswith("tables: "))
    assert "histogram_bins: missing or not nbviz's" in tables
