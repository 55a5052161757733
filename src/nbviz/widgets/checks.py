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

__all__ = [
    "MAX_ID",
    "check_choice",
    "check_flag",
    "check_int",
    "check_known",
    "check_run_name",
    "check_run_names",
    "check_run",
    "check_split",
    "id_trait",
]

#: The largest step or sample id a run holds (integers exact in float64, as the browser's).
MAX_ID = 2**53 - 1


class _WholeInt(traitlets.Int):
    """An int trait that takes no bool (``True`` is not a step, an id or an index)."""

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):
            self.error(obj, value)
        return super().validate(obj, value)


def id_trait(default: int, help: str, *, low: int = -1, high: int = MAX_ID) -> traitlets.Int:
    """A synced int trait bounded to ``low..high`` (-1: none): a step, a sample id, an index
    set from the browser. A value outside, or a bool, is a TraitError naming the trait and
    the value."""
    return _WholeInt(default, min=low, max=high, help=help).tag(sync=True)


def check_run(where: str, run: Any) -> None:
    """``TypeError`` unless ``run`` reads like a run (``nbviz.Run`` or ``nbviz.open_run(...)``)."""
    if not all(hasattr(run, name) for name in ("run_dir", "scalars", "meta")):
        raise TypeError(
            f"{where}: run must be a run (nbviz.Run or nbviz.open_run(path)), got "
            f"{type(run).__name__} {run!r:.60}"
        )


def check_flag(where: str, name: str, value: Any) -> bool:
    """``value`` as a bool; ``TypeError`` unless it is True or False (numpy's included):
    ``live="no"`` would be true."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be True or False, got {value!r}")
    return bool(value)


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


def check_run_name(where: str, name: str, runs: Sequence[str]) -> str:
    """``name`` when it is '' or one of the run names ``runs``; else a ``TraitError``
    "where: no run named ...; runs: ..." (``where`` is the view and trait)."""
    return check_known(name, runs, f"{where}: no run named {name!r}", "runs: ")


def check_run_names(where: str, names: Iterable[str], runs: Sequence[str]) -> list[str]:
    """``names`` as a list when each is one of the run names ``runs``; else a ``TraitError``
    naming the first that is not (see :func:`check_run_name`)."""
    names = list(names)
    for name in names:
        check_run_name(where, name, runs)
    return names
