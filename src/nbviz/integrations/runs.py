"""The run an integration writes: which process writes it, and config added at the end."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nbviz.probes.distributed import current
from nbviz.run import Run


def world_size() -> int:
    """Processes in the default ``torch.distributed`` group (1 without one)."""
    ctx = current()
    return ctx.world_size if ctx is not None else 1


def writes() -> bool:
    """Whether this process writes runs (rank 0, or the only process)."""
    ctx = current()
    return ctx is None or ctx.writes


def add_config(path: str | Path, config: Mapping[str, Any]) -> None:
    """Merge ``config`` into the closed run at ``path`` (rank 0 writes; other ranks skip).

    A run's config is written when it is opened; what a trainer reports at the
    end (a summary, late hyperparameters) lands once the run is closed.
    """
    if writes():
        Run(path, config=config, distributed=False).close()
