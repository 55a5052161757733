"""The run store: one SQLite database per run, a background writer, read queries.

A run is a directory holding ``run.sqlite`` (WAL mode while it is written; a
closed run is one self-contained file): :class:`Writer` is its one writer,
:class:`Reader` reads it from any thread or process, also while it is being
written. A file from elsewhere is data, never code: connections are guarded
and the schema checked (:mod:`nbviz.store.connection`,
:mod:`nbviz.store.schema`), and whatever is wrong with a file ends in a
:class:`RunFileError` naming it (:mod:`nbviz.store.errors`). Nothing here
imports torch or a widget library, so a run can be read and analysed wherever
numpy and pandas exist.
"""

from nbviz.store.arrays import from_blob, to_blob
from nbviz.store.errors import RunClosedError, RunFileError, RunFileWarning, StoredValueError
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
    "RunClosedError",
    "RunFileError",
    "RunFileWarning",
    "SchemaError",
    "StoredValueError",
    "Writer",
    "WriterError",
    "create_or_open",
    "from_blob",
    "to_blob",
]
