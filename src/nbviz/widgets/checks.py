"""Checking what a view is given, with errors that name the view, the argument and the value.

Constructor arguments are checked at the call (``ValueError``/``TypeError``);
a value set on a trait later, from Python or the browser, is checked by the
trait's validator (``traitlets.TraitError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import traitlets

__all__ = ["check_choice", "check_int", "check_known", "check_split"]


def check_choice(where: str, name: str, value: Any, choices: Iterable[Any]) -> None:
    """``ValueError`` unless ``value`` is one of ``choices``: "where: name must be one of ..."."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(
            f"{where}: {name} must be one of {', '.join(map(repr, choices))}, got {value!r}"
        )


def check_split(where: str, split: Any) -> None:
    """``ValueError`` unless ``split`` is a non-empty string."""
    if not isinstance(split, str) or not split:
        raise ValueError(f"{where}: split must be a non-empty string, got {split!r}")


def check_int(where: str, name: str, value: Any) -> None:
    """``TypeError`` unless ``value`` is None or an int (a bool is not one)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
        raise TypeError(f"{where}: {name} must be an int, got {value!r}")


def check_known(
    value: str, known: Sequence[str], problem: str, listing: str, *, limit: int | None = None
) -> str:
    """``value`` when it is '' or one of ``known``; else a ``TraitError``: "problem; listing"
    followed by the known names (their first ``limit`` characters)."""
    if value and value not in known:
        names = ", ".join(n for n in known if n)
        raise traitlets.TraitError(f"{problem}; {listing}{names[:limit]}")
    return value
