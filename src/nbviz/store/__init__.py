"""The run store: one SQLite database per run, a background writer, read queries.

A run is a directory holding ``run.sqlite`` (WAL mode): :class:`Writer` is its
one writer, :class:`Reader` reads it from any thread or process, also while it
is being written. Nothing here imports torch or a widget library, so a run can
be read and analysed wherever numpy and pandas exist.
"""

from nbviz.store.arrays import from_blob, to_blob
from nbviz.store.reader import HistogramRows, MissingStepError, Reader
from nbviz.store.schema import (
    DB_NAME,
    SCHEMA_VERSION,
    SIGNALS,
    TABLES,
    SchemaError,
    create_or_open,
)
from nbviz.store.writer import Writer, WriterError

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "SIGNALS",
    "TABLES",
    "HistogramRows",
    "MissingStepError",
    "Reader",
    "SchemaError",
    "Writer",
    "WriterError",
    "create_or_open",
    "from_blob",
    "to_blob",
]
