"""Which split a view opens on, and the trait that lets a person switch.

A run may hold predictions or embeddings for any splits ("val", "test",
"train", ...). A view given no split opens on one that exists, preferring
``"val"``, then ``"test"``, then the first recorded; one given a split that
the run lacks (while it has others) is refused, naming the ones it has. The
view's ``splits`` trait lists what the menu in the browser offers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import traitlets

from nbviz.widgets.checks import check_split

__all__ = [
    "PREFERRED",
    "check_switch",
    "choose_split",
    "followed_split",
    "opening_split",
    "split_choices",
]

PREFERRED = ("val", "test")
"""Splits a view opens on when none is given, in this order; then the first recorded."""


def choose_split(available: Sequence[str]) -> str | None:
    """The split to open on: ``"val"``, else ``"test"``, else the first of ``available``."""
    for name in PREFERRED:
        if name in available:
            return name
    return available[0] if available else None


def opening_split(
    where: str, split: Any, available: Sequence[str], run_name: str, what: str
) -> str:
    """The split a view opens on: ``split`` when given (it must be among ``available``
    when the run has any ``what``), else :func:`choose_split` (``"val"`` for a run
    with none yet: it fills in as they arrive)."""
    if split is None:
        return choose_split(list(available)) or "val"
    check_split(where, split)
    if available and split not in available:
        raise ValueError(
            f"{where}: no {what} for split {split!r} in {run_name}; "
            f"splits with {what}: {', '.join(map(repr, available))}"
        )
    return split


def followed_split(current: str, available: Sequence[str], chosen: bool) -> str:
    """The split a view shows once its run grew: a split it chose itself gives way to
    :func:`choose_split` when the run now has splits and not that one (a live run
    whose first predictions came for "test"); a split the user named stays."""
    if chosen and available and current not in available:
        return choose_split(list(available)) or current
    return current


def split_choices(help: str = "Splits the view can show (the menu's choices).") -> Any:
    """A synced list of split names."""
    return traitlets.List(traitlets.Unicode(), help=help).tag(sync=True)


def check_switch(where: str, split: Any, choices: Sequence[str]) -> str:
    """A split set on a built view: a non-empty string, among ``choices`` when there are any."""
    if not isinstance(split, str) or not split:
        raise traitlets.TraitError(f"{where}.split must be a non-empty string, got {split!r}")
    if choices and split not in choices:
        raise traitlets.TraitError(
            f"{where}.split: {split!r} is not one of this run's splits "
            f"({', '.join(map(repr, choices))})"
        )
    return split
