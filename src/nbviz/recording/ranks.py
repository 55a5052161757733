"""A run's place under ``torch.distributed``: which rank this process is, and
whether it writes.

With several ranks, every rank creates the Run with the same path; rank 0
writes it, the others keep nothing and touch nothing on disk (their writer is
a sink that drops rows), while ``watch`` and ``evaluate`` combine every rank's
data onto rank 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["null_writer", "rank_context"]


def rank_context(distributed: bool | None) -> Any:
    """This process's rank under torch.distributed with several ranks, else None.

    ``distributed``: None detects it, True requires it, False ignores it. Without
    torch there is one process (unless True asks for more).
    """
    if distributed is False:
        return None
    try:
        from nbviz.probes.distributed import resolve
    except ImportError:  # no torch: one process
        if distributed:
            raise
        return None
    return resolve(distributed)


def null_writer(run_dir: Path | str) -> Any:
    """The writer of a rank that does not write: it takes rows and drops them."""
    from nbviz.probes.distributed import NullSink

    return NullSink(run_dir)
