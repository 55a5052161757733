"""What the store says when a run's file cannot be read as it is.

A run may come from anywhere: a colleague's disk, a half-finished copy, a
crafted file. Whatever is wrong with it ends in one family of errors, each
naming the file, what is wrong with it and what to do:

- :class:`RunFileError`: the file is damaged, foreign or unreadable here (not
  a database, a page that does not decode, schema objects nbviz did not make,
  a stored value of the wrong type, a read that ran past its time budget);
- :class:`SchemaError` (a RunFileError): the file is a database, but not a
  run this nbviz reads (no schema version, or another version);
- :class:`RunFileWarning`: the run was opened, but part of it cannot be seen
  (a write-ahead log cut short) or was not made self-contained on close;
- :class:`RunClosedError` (a RuntimeError): a read of a run after ``run.close()``.

:class:`StoredValueError` is raised by the decoders of stored values (blobs,
JSON, numbers), which do not know the file; the readers turn it into a
RunFileError that names it.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

__all__ = [
    "RunClosedError",
    "RunFileError",
    "RunFileWarning",
    "SchemaError",
    "StoredValueError",
    "from_sqlite_error",
    "warn_run_file",
]


class RunClosedError(RuntimeError):
    """A read of a run that was closed (``run.close()``, or the end of its ``with``
    block); the message says how to read it again."""

    def __init__(self, run_dir: Path | str) -> None:
        super().__init__(
            f"the run at {run_dir} is closed (run.close(), or the end of its `with` "
            f"block): read it again with nbviz.open_run({str(run_dir)!r})"
        )
        self.run_dir = Path(run_dir)


#: What to do with a damaged run, said once for every error about one.
DAMAGED_REMEDY = (
    "if a copy of the run is damaged, copy it again from where it was recorded (the whole "
    "directory); `nbviz info RUN` lists what can still be read"
)


class RunFileError(RuntimeError):
    """A run's file cannot be read as it is; the message names the file, the fault and the remedy.

    ``path`` is the file (or directory) concerned; ``problem`` and ``remedy``
    are the two halves of the message.
    """

    def __init__(self, path: Path | str, problem: str, remedy: str = DAMAGED_REMEDY) -> None:
        self.path = Path(path)
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{self.path}: {problem}" + (f"; {remedy}" if remedy else ""))


class SchemaError(RunFileError):
    """A database that is not a run this nbviz reads: no schema version, or another one."""


class RunFileWarning(UserWarning):
    """A run was opened, but part of what was written to it cannot be read."""


class StoredValueError(ValueError):
    """A stored value that does not decode (a blob of the wrong size, bad JSON, a wrong type)."""


def from_sqlite_error(path: Path | str, exc: BaseException, doing: str) -> RunFileError:
    """The RunFileError for an ``sqlite3.Error`` met while ``doing`` something with a run."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith("SQLITE_NOTADB") or "not a database" in text:
        problem = f"{doing}: the file is not an SQLite database (or its header is damaged)"
    elif name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        problem = f"{doing}: the database is damaged ({text})"
    elif "interrupted" in text:
        problem = (
            f"{doing}: the read was stopped after running past its time budget; a file "
            "recorded by nbviz never needs that, so it is damaged or crafted"
        )
    elif name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        p = Path(path)
        if p.is_dir():
            problem = f"{doing}: it is a directory, not a database file"
            return RunFileError(path, problem, "remove or rename it, or open another run")
        problem = f"{doing}: SQLite cannot open it ({text})"
        return RunFileError(
            path, problem, "check that the file and its directory can be read (and written, to log)"
        )
    elif name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return RunFileError(
            path,
            f"{doing}: the database stayed locked ({text})",
            "another process holds a long write on it; try again when it is done",
        )
    elif name.startswith(("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY")):
        return RunFileError(
            path, f"{doing}: {text}", "check the disk has room and the run can be written"
        )
    else:
        problem = f"{doing}: {type(exc).__name__}: {text}"
    err = RunFileError(path, problem)
    err.__cause__ = exc
    return err


def warn_run_file(message: str) -> None:
    """Warn with a :class:`RunFileWarning`, pointing at the first caller outside nbviz."""
    level, frame = 1, sys._getframe(1)
    package = str(Path(__file__).resolve().parents[1])
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package):
        frame = frame.f_back
        level += 1
    warnings.warn(message, RunFileWarning, stacklevel=level)
