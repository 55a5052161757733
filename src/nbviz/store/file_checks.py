"""What a run's file must be before SQLite reads it: whole, and with a readable log.

SQLite reads the missing bytes of a file cut short as zeros, and drops the
part of a write-ahead log after the first bad frame, both without a word.
These checks run before a run is opened, for reading or writing, and say so:
a file cut short is a :class:`~nbviz.store.errors.RunFileError`, a log that
lost commits a :class:`~nbviz.store.errors.RunFileWarning` (the rest of the
run is still read).
"""

from __future__ import annotations

from pathlib import Path

from nbviz.store.errors import RunFileError, warn_run_file
from nbviz.store.wal import lost_commits

__all__ = ["check_file_size", "warn_lost_commits"]


def check_file_size(file: Path) -> None:
    """Raise RunFileError when ``file`` is shorter than its header says (a copy cut short).

    SQLite reads missing bytes of a cut-short file as zeros, silently, so this
    is checked before it reads. Only while the log is empty: during a
    checkpoint, a run being written may grow after its header says it has.
    """
    wal = Path(f"{file}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return
    try:
        with open(file, "rb") as f:
            header = f.read(100)
        size = file.stat().st_size
    except OSError:
        return
    if len(header) < 100 or header[:16] != b"SQLite format 3\x00":
        return  # SQLite itself says what is wrong with it
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the header's page count is current
    if page and (size % page or (valid and pages and size < pages * page)):
        expected = f"{pages * page:,}" if valid and pages else f"a multiple of {page:,}"
        raise RunFileError(
            file,
            f"the file is {size:,} bytes where its header says {expected}: it was cut short "
            "(a copy or download that stopped early), and what is missing would be read as "
            "zeros",
        )


def warn_lost_commits(file: Path) -> str | None:
    """Warn (RunFileWarning) when ``file``'s write-ahead log lost commits SQLite cannot read,
    and return what was lost (None if nothing); raise RunFileError when the file itself
    was cut short (:func:`check_file_size`)."""
    check_file_size(file)
    lost = lost_commits(file)
    if lost:
        warn_run_file(
            f"{file}: {lost}. The run is opened with what can be read; copy it again from "
            "where it was recorded if that copy is whole"
        )
    return lost
