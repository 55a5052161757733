"""Keep torch.profiler's own log lines out of the user's stderr, and nothing else.

Kineto and the profiler's C++ code write progress lines ("profiler_start",
"Completed Stage: Warm Up", "Memory block of unknown size was allocated before
the profiling started") straight to file descriptor 2, below Python: a notebook
shows each as a red stderr box although nothing is wrong. :func:`profiler_lines_dropped`
points descriptor 2 at a temporary file while the profiler runs, then writes back
every line that is not one of those (a real warning or error stays visible, in
order, after the block).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

__all__ = ["is_profiler_line", "profiler_lines_dropped"]

# a native log line ("file.cpp:52] message") of the profiler's own machinery
_NATIVE = re.compile(r"\.(?:cpp|cc|h):\d+\]")
_PROFILER = re.compile(r"profil|kineto|Completed Stage", re.IGNORECASE)


def is_profiler_line(line: str) -> bool:
    """True for a native log line the profiler writes about itself."""
    return bool(_NATIVE.search(line) and _PROFILER.search(line))


@contextlib.contextmanager
def profiler_lines_dropped() -> Iterator[None]:
    """Capture descriptor 2 for the block; write back what is not the profiler's own log."""
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (a windowless process): nothing to keep clean
        yield
        return
    with tempfile.TemporaryFile() as caught:
        _flush()
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            _flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            text = caught.read().decode("utf-8", errors="replace")
            kept = [line for line in text.splitlines() if line and not is_profiler_line(line)]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
                _flush()


def _flush() -> None:
    for stream in (sys.stderr, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
