"""What the integrations take from their callers: ``run.watch`` options, logged numbers."""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Mapping
from typing import Any

import torch

from nbviz.probes.probe import Probe

#: ``run.watch`` options a caller may set (an integration supplies the optimizer and steps).
WATCH_OPTIONS = frozenset(inspect.signature(Probe.__init__).parameters) - {
    "self",
    "sink",
    "model",
    "optimizer",
    "first_step",
    "on_close",
    "dist",
}


def check_watch_options(what: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` if each is a ``run.watch`` option, else a TypeError naming the unknown ones."""
    unknown = sorted(set(options) - WATCH_OPTIONS)
    if unknown:
        raise TypeError(
            f"{what}: unknown option(s) {', '.join(unknown)}; run.watch takes "
            f"{', '.join(sorted(WATCH_OPTIONS))}"
        )
    return dict(options)


def numeric(values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a trainer's log that are numbers (or one-element tensors)."""
    out = {}
    for key, value in values.items():
        if isinstance(value, torch.Tensor):
            if value.numel() == 1:
                out[str(key)] = value
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            out[str(key)] = value
    return out
